"""More elementwise ops (copysign, fmax, gcd, shifts, nextafter, frexp, logit, isin, ...) compared with CPU."""

import pytest
import torch

import torch_pjrt
from compare import DEVICE, check

# No subnormals: the XLA CPU backend flushes them to zero in arithmetic.
SPECIALS = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), -3.5, 2.5]


@pytest.fixture(autouse=True)
def no_fallback():
    torch_pjrt.reset_metrics()
    yield
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def specials(dtype=torch.float32):
    return torch.tensor(SPECIALS).to(dtype)


BINARY_FLOAT = {
    "copysign": torch.copysign,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "hypot": torch.hypot,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "xlogy": torch.xlogy,
    "xlog1py": torch.special.xlog1py,
    "floor_divide": torch.floor_divide,
}


@pytest.mark.parametrize("name", sorted(BINARY_FLOAT))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_binary_float_ops_match_cpu(name, dtype):
    fn = BINARY_FLOAT[name]
    a = (torch.randn(5, 4) * 3).to(dtype)
    b = (torch.randn(4) * 3).to(dtype)
    if name in ("xlogy",):
        b = b.abs()
    if name in ("xlog1py",):
        b = b.abs() - 0.5
    differentiable = name not in ("floor_divide",)
    check(fn, a, b, grad=differentiable and dtype == torch.float32, rtol=1e-4 if dtype == torch.float32 else None)
    check(fn, a.t().contiguous().t(), a.t().t())  # non-contiguous
    check(fn, a.t(), a.t())


@pytest.mark.parametrize("name", sorted(BINARY_FLOAT))
def test_binary_float_ops_special_values(name):
    fn = BINARY_FLOAT[name]
    s = specials()
    a, b = s.repeat_interleave(len(s)), s.repeat(len(s))  # every pair of special values
    check(fn, a, b)


def test_binary_float_ops_with_python_scalars_and_ints():
    check(torch.copysign, torch.randn(6), -2.0)
    check(torch.copysign, torch.tensor([1, -2, 3]), torch.tensor([-1, 0, 1]))
    check(torch.xlogy, torch.tensor([0.0, 1.0, 2.0]), 3.0)
    check(torch.xlogy, 2.0, torch.tensor([0.0, 1.0, float("nan")]))
    check(torch.special.xlog1py, 2.0, torch.tensor([0.0, 1.0, float("nan")]))
    check(torch.special.xlog1py, torch.tensor([0.0, 1.0, 2.0]), 3.0)
    check(torch.hypot, torch.tensor([3e30, 1e-30]), torch.tensor([4e30, 1e-30]))
    check(torch.floor_divide, torch.tensor([1.0, -1.0, 7.5]), 0.1)
    check(torch.floor_divide, torch.tensor([7, -7, 7, -7]), torch.tensor([2, 2, -2, -2]))
    check(torch.floor_divide, torch.tensor([7, -7]), 3)


def test_inplace_and_out_variants():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    check(lambda x, y: x.clone().copysign_(y), a, b)
    check(lambda x, y: x.clone().hypot_(y), a, b)
    check(lambda x, y: x.clone().xlogy_(y.abs()), a, b)
    check(lambda x, y: x.clone().logit_(eps=0.1), torch.rand(3, 4), b)
    check(lambda x, y: torch.fmax(x, y, out=torch.empty_like(x)), a, b)
    check(lambda x, y: torch.logaddexp(x, y, out=torch.empty_like(x)), a, b)
    check(lambda x: torch.nan_to_num(x, out=torch.empty_like(x)), specials())
    check(lambda x: x.clone().nan_to_num_(nan=1.0), specials())


UNARY_FLOAT = {
    "frac": (torch.frac, -5.0, 5.0),
    "sinc": (torch.sinc, -3.0, 3.0),
    "entr": (torch.special.entr, 0.0, 3.0),
    "logit": (torch.logit, 0.01, 0.99),
    "angle": (torch.angle, -3.0, 3.0),
    "nan_to_num": (torch.nan_to_num, -3.0, 3.0),
}


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unary_float_ops_match_cpu(name, dtype):
    fn, lo, hi = UNARY_FLOAT[name]
    x = (torch.rand(6, 5) * (hi - lo) + lo).to(dtype)
    check(fn, x, grad=dtype == torch.float32, rtol=1e-4 if dtype == torch.float32 else None)
    check(fn, x.t())
    check(fn, specials(dtype))


def test_sinc_at_zero_and_int_inputs():
    check(torch.sinc, torch.tensor([0.0, 1.0, -0.5]), grad=True)
    check(torch.sinc, torch.tensor([0, 1, 2]))
    check(torch.special.entr, torch.tensor([0, 1, 2]))
    check(torch.angle, torch.tensor([-2, 0, 3]))


@pytest.mark.parametrize("eps", [None, 0.1, 0.0, -1.0])
def test_logit_eps_forward_and_backward(eps):
    x = torch.tensor([-0.5, 0.0, 0.05, 0.3, 0.5, 0.95, 1.0, 1.5])
    check(lambda t: torch.logit(t, eps), x)
    dy = torch.randn(8)
    check(lambda g, t: torch.ops.aten.logit_backward(g, t, eps), dy, x)
    check(lambda t: torch.logit(t, eps), torch.rand(4, 3) * 0.8 + 0.1, grad=True)
    check(lambda t: torch.logit(t, eps), torch.rand(4, 3).to(torch.bfloat16))


def test_binary_cross_entropy_and_kl_div():
    p = torch.rand(4, 5) * 0.9 + 0.05
    y = torch.rand(4, 5)
    check(torch.nn.functional.binary_cross_entropy, p, y, grad=True)
    logq = torch.log_softmax(torch.randn(4, 5), -1)
    q = torch.softmax(torch.randn(4, 5), -1)
    check(lambda a, b: torch.nn.functional.kl_div(a, b, reduction="batchmean"), logq, q, grad=True)


def test_nan_to_num_values():
    x = specials()
    check(torch.nan_to_num, x)
    check(lambda t: torch.nan_to_num(t, nan=2.0, posinf=10.0, neginf=-10.0), x)
    check(lambda t: torch.nan_to_num(t, posinf=1e6), x.to(torch.bfloat16))
    check(torch.nan_to_num, torch.tensor([1, -2, 3]))


def test_signbit_and_heaviside():
    x = specials()
    check(torch.signbit, x)
    check(torch.signbit, x.to(torch.bfloat16))
    check(torch.signbit, torch.tensor([-3, 0, 4]))
    check(torch.signbit, torch.tensor([0, 200], dtype=torch.uint8))
    check(torch.heaviside, x, torch.tensor([0.5]))
    check(torch.heaviside, torch.tensor([-2, 0, 3]), torch.tensor([7, 8, 9]))
    with pytest.raises(RuntimeError):
        torch.heaviside(torch.ones(2, device=DEVICE), torch.ones(2, device=DEVICE, dtype=torch.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nextafter_steps_one_ulp(dtype):
    x = specials(dtype)
    a, b = x.repeat_interleave(len(x)), x.repeat(len(x))
    check(torch.nextafter, a, b, rtol=0, atol=0)
    r = torch.randn(5, 3).to(dtype)
    check(torch.nextafter, r, torch.zeros(3, dtype=dtype), rtol=0, atol=0)
    check(torch.nextafter, r.t(), torch.full((3, 1), float("inf"), dtype=dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_frexp_mantissa_and_exponent(dtype):
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -1e-3, 123456.0, 1e-40, -2e-42, 1e30]).to(dtype)
    check(torch.frexp, x, rtol=0, atol=0)
    check(torch.frexp, (torch.randn(4, 3) * 100).to(dtype).t(), rtol=0, atol=0)
    check(lambda t: torch.frexp(t).mantissa, torch.randn(6), grad=True)


@pytest.mark.parametrize("decimals", [0, 3, -3, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_round_decimals(decimals, dtype):
    x = (torch.randn(5, 4) * 1000).to(dtype)
    check(lambda t: torch.round(t, decimals=decimals), x, rtol=0, atol=0)
    check(lambda t: torch.round(t, decimals=decimals), x.t(), rtol=0, atol=0)
    check(lambda t: torch.round(t, decimals=decimals), torch.tensor([0.0005, 2.5, -1.2345, 1500.0]), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_bit_shifts_match_cpu_out_of_range(dtype):
    lo = 0 if dtype == torch.uint8 else -100
    a = torch.randint(lo, 100, (6, 7)).to(dtype)
    amounts = torch.tensor([-1, 0, 1, 3, 7, 8, 15, 16, 31, 32, 63, 64, 70], dtype=torch.int64)
    if dtype == torch.uint8:
        amounts = amounts.clamp(min=0)
    amounts = amounts.to(dtype) if dtype != torch.int8 else amounts.clamp(max=127).to(dtype)
    aa, ss = a.flatten()[: len(amounts)], amounts
    check(torch.bitwise_left_shift, aa, ss)
    check(torch.bitwise_right_shift, aa, ss)
    check(torch.bitwise_left_shift, a.t(), a.t()[:, :1].abs() % 5)
    check(torch.bitwise_right_shift, a, 2)
    check(lambda t: t.clone().bitwise_left_shift_(1), a)
    check(lambda t: t << 2, a)
    check(lambda t: t >> 1, a)


def test_shift_scalar_tensor_and_float_refused():
    check(lambda s: torch.bitwise_left_shift(3, s), torch.tensor([0, 1, 5, 70]))
    check(lambda s: torch.bitwise_right_shift(-64, s), torch.tensor([0, 1, 5, 70, -1]))
    with pytest.raises(RuntimeError):
        torch.bitwise_left_shift(torch.ones(2, device=DEVICE), 1)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_gcd_lcm(dtype):
    lo = 0 if dtype == torch.uint8 else -50
    a = torch.randint(lo, 50, (5, 6)).to(dtype)
    b = torch.randint(lo, 50, (6,)).to(dtype)
    if dtype == torch.uint8:  # keep lcm in range, as CPU would wrap
        a, b = a % 16, b % 16
    a[0, 0] = 0
    b[0] = 0
    check(torch.gcd, a, b)
    check(torch.lcm, a, b)
    check(torch.gcd, a.t(), a.t())
    check(lambda x, y: x.clone().gcd_(y), a, b)
    check(lambda x, y: torch.lcm(x, y, out=torch.empty_like(x)), a, b)
    check(torch.gcd, torch.tensor(12, dtype=dtype), torch.tensor(18, dtype=dtype))  # zero-dim
    check(torch.gcd, torch.tensor([], dtype=dtype), torch.tensor([], dtype=dtype))


def test_gcd_refuses_floats():
    with pytest.raises(RuntimeError):
        torch.gcd(torch.ones(2, device=DEVICE), torch.ones(2, device=DEVICE))


def test_isin_overloads():
    e = torch.randint(0, 10, (4, 5))
    t = torch.randint(0, 10, (3, 2))
    check(torch.isin, e, t)
    check(lambda a, b: torch.isin(a, b, invert=True), e, t)
    check(torch.isin, e.t(), t)
    check(torch.isin, e, 3)
    check(lambda a: torch.isin(a, 3, invert=True), e)
    check(lambda b: torch.isin(4, b), t)
    check(torch.isin, torch.tensor([1.0, float("nan"), 2.5]), torch.tensor([float("nan"), 2.5]))
    check(torch.isin, e.float(), torch.tensor([1, 2, 3]))
    check(torch.isin, e, torch.tensor([], dtype=torch.int64))
    check(lambda a, b: torch.isin(a, b, out=torch.empty(a.shape, dtype=torch.bool, device=a.device)), e, t)


@pytest.mark.parametrize(
    "fn",
    [
        torch.logaddexp,
        torch.logaddexp2,
        torch.hypot,
        torch.nextafter,
        torch.gcd,
        torch.floor_divide,
        torch.bitwise_left_shift,
    ],
)
def test_operand_dtypes_refused_like_cpu(fn):
    ints = torch.tensor([1, 2])
    floats = torch.tensor([1.0, 2.0])
    for a in (ints, floats, ints > 1):
        try:
            fn(a, a)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                fn(a.to(DEVICE), a.to(DEVICE))
        else:
            check(fn, a, a)
    for unary in (torch.frac, lambda t: torch.round(t, decimals=2), torch.frexp):
        with pytest.raises(RuntimeError):
            unary(ints.to(DEVICE))


def test_unravel_index_uses_floor_divide():
    check(lambda i: torch.unravel_index(i, (3, 4, 5)), torch.tensor([0, 7, 59, 33]))


def test_shift_dunders_and_floor_divide_scalar():
    a = torch.randint(-100, 100, (5, 4))
    s = torch.randint(0, 8, (5, 4))
    check(lambda a, s: a.__lshift__(s), a, s)
    check(lambda a, s: a.__rshift__(s), a, s)
    check(lambda a: torch.ops.aten.floor_divide.Scalar(a, 3), a)
    check(lambda a: torch.ops.aten.floor_divide.Scalar(a, -2.5), torch.randn(6, 3).t())


@pytest.mark.parametrize("exponent", [2, 3, -2, 0.5, -0.5, -1, 1.7, 2.01])
def test_pow_scalar_rounds_like_cpu_in_reduced_precision(exponent):
    # CPU rounds the exponent to the tensor's dtype, and cubes/inverse squares step by step in bfloat16.
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.rand(64, dtype=torch.float32).mul(3).add(0.05).to(dtype)
        check(lambda t: t**exponent, x, rtol=0, atol=0)


def _outcome(fn, device):
    try:
        result = fn(device)
        if device != "cpu":
            torch.tpu.synchronize()
        return result, None
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return None, e


A = torch.ops.aten


def _t(dtype, device, n=6):
    return (torch.arange(n, device=device) % 3 + 1).to(dtype)


# Inputs CPU refuses (dtypes its kernels do not dispatch over, Scalars that do not fit the computing dtype, bad
# strings) or accepts where a lowering used to fail: the same class, or the same values.
CPU_RULES = {
    "abs_bool": lambda d: torch.abs(_t(torch.bool, d)),
    "abs_uint8": lambda d: torch.abs(_t(torch.uint8, d)),
    "sgn_uint8": lambda d: torch.sgn(_t(torch.uint8, d) - 1),
    "sign_uint8": lambda d: torch.sign(_t(torch.uint8, d) - 1),
    "addcmul_bool": lambda d: torch.addcmul(*[_t(torch.bool, d)] * 3),
    "addcmul_complex_value": lambda d: torch.addcmul(*[_t(torch.float32, d)] * 3, value=1 - 2j),
    "addcmul_int8_value_300": lambda d: torch.addcmul(*[_t(torch.int8, d)] * 3, value=300),
    "addcmul_uint8_value_minus_1": lambda d: torch.addcmul(*[_t(torch.uint8, d)] * 3, value=-1),
    "addcdiv_complex_value": lambda d: torch.addcdiv(*[_t(torch.float32, d)] * 3, value=1 - 2j),
    "clamp_tensor_bool": lambda d: torch.clamp(*[_t(torch.bool, d)] * 3),
    "clamp_tensor_bool_min_only": lambda d: torch.clamp(_t(torch.bool, d), min=_t(torch.bool, d)),
    "div_bad_rounding_mode": lambda d: A.div.Tensor_mode(_t(torch.float32, d), _t(torch.float32, d), rounding_mode="x"),
    "div_trunc_bool": lambda d: torch.div(_t(torch.bool, d), _t(torch.bool, d), rounding_mode="trunc"),
    "remainder_bool": lambda d: torch.remainder(_t(torch.bool, d), _t(torch.bool, d)),
    "fmod_bool": lambda d: torch.fmod(_t(torch.bool, d), _t(torch.bool, d)),
    "remainder_float16_scalar": lambda d: torch.remainder(torch.linspace(-3, 3, 12, device=d).half(), -0.128),
    "pow_bool_tensors": lambda d: torch.pow(_t(torch.bool, d), _t(torch.bool, d)),
    "gelu_int": lambda d: torch.nn.functional.gelu(_t(torch.int64, d)),
    "gelu_bad_approximate": lambda d: A.gelu(_t(torch.float32, d), approximate="x"),
    "gelu_backward_int": lambda d: A.gelu_backward(_t(torch.int32, d), _t(torch.int32, d)),
    "silu_int": lambda d: torch.nn.functional.silu(_t(torch.int64, d)),
    "silu_inplace_int": lambda d: torch.nn.functional.silu(_t(torch.int32, d), inplace=True),
    "tanh_backward_int": lambda d: A.tanh_backward(_t(torch.int64, d), _t(torch.int64, d)),
    "sigmoid_backward_bool": lambda d: A.sigmoid_backward(_t(torch.bool, d), _t(torch.bool, d)),
    "logit_backward_int": lambda d: A.logit_backward(_t(torch.int64, d), _t(torch.int64, d)),
    "threshold_backward_bool": lambda d: A.threshold_backward(_t(torch.bool, d), _t(torch.bool, d), 0),
    "threshold_backward_complex_threshold": lambda d: A.threshold_backward(
        _t(torch.float32, d), _t(torch.float32, d), 1 - 2j
    ),
    "lerp_int": lambda d: torch.lerp(_t(torch.int64, d), _t(torch.int64, d), 0.5),
    "lerp_weight_overflows": lambda d: torch.lerp(_t(torch.float32, d), _t(torch.float32, d), 1e300),
    "add_alpha_overflows": lambda d: torch.add(_t(torch.float32, d), _t(torch.float32, d), alpha=1e300),
    "add_int8_alpha_300": lambda d: torch.add(_t(torch.int8, d), _t(torch.int8, d), alpha=300),
    "fill_int8_300": lambda d: _t(torch.int8, d).fill_(300),
    "fill_float16_1e6": lambda d: _t(torch.float16, d).fill_(1e6),
    "fill_float16_inf": lambda d: _t(torch.float16, d).fill_(float("inf")),
    "masked_fill_int8_300": lambda d: _t(torch.int8, d).masked_fill(_t(torch.bool, d), 300),
}


@pytest.mark.parametrize("name", sorted(CPU_RULES))
def test_cpu_rules(name):
    fn = CPU_RULES[name]
    expected, error = _outcome(fn, "cpu")
    actual, tpu_error = _outcome(fn, DEVICE)
    if error is not None:
        assert isinstance(tpu_error, type(error)), f"CPU raised {error!r}, tpu {tpu_error!r}"
        return
    assert tpu_error is None, f"CPU returned, tpu raised {tpu_error!r}"
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)
