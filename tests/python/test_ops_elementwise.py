"""Every elementwise lowering (csrc/lowering/elementwise.cc) against CPU PyTorch.

Each case runs the same function on CPU and on tpu with the same inputs
(compare.check) and compares values, dtypes and shapes with per-dtype
tolerances, and gradients where the op is differentiable. Where CPU PyTorch
refuses a dtype the tpu must refuse it too. Every test also asserts that no
op took the CPU fallback (the ``no_fallback`` fixture), so a lowering that
silently stops being used fails here.

Inputs use few distinct shapes on purpose: each new program shape compiles.
"""

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import DEVICE, check, compare, fallback_guard

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTS = [torch.int64, torch.int32]
DTYPES = FLOATS + INTS + [torch.bool]
NAN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def no_fallback():
    """Fails the test if any op ran through the CPU fallback (tests may allow named ones)."""
    yield from fallback_guard()


def dname(dtype):
    return str(dtype).replace("torch.", "")


def make(shape, dtype, kind="any"):
    """Random input; kind: any, nonzero (divisors), positive, exponent (small, >= 0 for ints), unit (|x| < 1)."""
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5 if kind != "nonzero" else torch.ones(shape, dtype=torch.bool)
    if dtype.is_floating_point:
        x = torch.randn(shape) * 2
        if kind == "positive":
            x = x.abs() + 0.1
        elif kind == "nonzero":
            x = torch.where(x.abs() < 0.25, torch.full_like(x, 0.5), x)
        elif kind == "exponent":
            x = x.clamp(-2, 2)
        elif kind == "unit":
            x = torch.rand(shape) * 1.8 - 0.9
        return x.to(dtype)
    if kind == "positive":
        return torch.randint(1, 7, shape, dtype=dtype)
    if kind == "exponent":
        return torch.randint(0, 4, shape, dtype=dtype)
    x = torch.randint(-6, 7, shape, dtype=dtype)
    if kind == "nonzero":
        x = torch.where(x == 0, torch.full_like(x, 3), x)
    return x


def specials(dtype):
    """Float edge values: signed zeros, infinities, NaN, rounding ties, large and tiny magnitudes."""
    v = [0.0, -0.0, INF, -INF, NAN, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-3, -30.0, 30.0, 7.0, -1.0, 1.0]
    return torch.tensor(v).to(dtype)


# ----------------------------------------------------------------------------- binary ops

# name -> (fn, kind of the second input). Tensor-Tensor overloads; the second
# operand is broadcast (shape [5] against [3, 5]).
BINARY = {
    "add": (torch.add, "any"),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), "any"),
    "sub": (torch.sub, "any"),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=3), "any"),
    "rsub": (lambda a, b: torch.rsub(a, b, alpha=2), "any"),
    "mul": (torch.mul, "any"),
    "div": (torch.div, "nonzero"),
    "div_floor": (lambda a, b: torch.div(a, b, rounding_mode="floor"), "nonzero"),
    "div_trunc": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), "nonzero"),
    "remainder": (torch.remainder, "nonzero"),
    "fmod": (torch.fmod, "nonzero"),
    "pow": (torch.pow, "exponent"),
    "maximum": (torch.maximum, "any"),
    "minimum": (torch.minimum, "any"),
    "clamp_min": (torch.clamp_min, "any"),
    "clamp_max": (torch.clamp_max, "any"),
    "eq": (torch.eq, "any"),
    "ne": (torch.ne, "any"),
    "lt": (torch.lt, "any"),
    "le": (torch.le, "any"),
    "gt": (torch.gt, "any"),
    "ge": (torch.ge, "any"),
    "logical_and": (torch.logical_and, "any"),
    "logical_or": (torch.logical_or, "any"),
    "logical_xor": (torch.logical_xor, "any"),
    "bitwise_and": (torch.bitwise_and, "any"),
    "bitwise_or": (torch.bitwise_or, "any"),
    "bitwise_xor": (torch.bitwise_xor, "any"),
}


# Ops that share their lowering with a fully swept sibling (eq, logical_and, bitwise_and) run on fewer dtypes.
BINARY_DTYPES = {
    **{n: [torch.float32, torch.int64] for n in ("ne", "le", "gt", "ge")},
    **{n: [torch.float32, torch.bool] for n in ("logical_or", "logical_xor")},
    **{n: [torch.int64, torch.bool] for n in ("bitwise_or", "bitwise_xor")},
}


@pytest.mark.parametrize(
    "name,dtype", [(n, d) for n in BINARY for d in BINARY_DTYPES.get(n, DTYPES)], ids=lambda v: dname(v)
)
def test_binary(name, dtype):
    fn, kind = BINARY[name]
    a = make((3, 5), dtype)
    b = make((5,), dtype, kind)
    if name == "pow" and dtype.is_floating_point:
        a = a.abs() + 0.5  # keep real results (negative bases: test_binary_special_values)
    compare(fn, a, b)


# Float ops compared on edge values in both operand positions (NaN and inf
# propagation, signed zeros, division by zero).
SPECIAL_BINARY = [
    "add",
    "mul",
    "div",
    "div_floor",
    "div_trunc",
    "remainder",
    "fmod",
    "pow",
    "maximum",
    "minimum",
    "clamp_min",
    "clamp_max",
    "eq",
    "lt",
    "ge",
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=dname)
@pytest.mark.parametrize("name", SPECIAL_BINARY)
def test_binary_special_values(name, dtype):
    fn = BINARY[name][0]
    s = specials(dtype)
    compare(fn, s.reshape(-1, 1), s)  # every pair of edge values


def test_div_floor_follows_python_semantics():
    # floor(a / b) is wrong here: 1 / 0.1 rounds to 10 in float32 but 1 // 0.1 == 9 (0.1 is slightly more than 1/10).
    a = torch.tensor([1.0, -1.0, 7.0, -7.0, 1.0, 5.0, 0.0, -0.0, 3.0, -3.0, 0.3, -0.3])
    b = torch.tensor([0.1, 0.1, 0.7, 0.7, 0.2, 0.5, 2.0, 2.0, -0.0, 0.0, 0.1, -0.1])
    for dtype in FLOATS:
        compare(lambda x, y: torch.div(x, y, rounding_mode="floor"), a.to(dtype), b.to(dtype))
        compare(lambda x, y: torch.remainder(x, y), a.to(dtype), b.to(dtype))
    ints = torch.tensor([-7, 7, -6, 5, -1, 0, 9, -9])
    divs = torch.tensor([2, -2, 3, -5, 3, -4, -3, 3])
    for dtype in INTS:
        compare(lambda x, y: torch.div(x, y, rounding_mode="floor"), ints.to(dtype), divs.to(dtype))
        compare(lambda x, y: torch.div(x, y, rounding_mode="trunc"), ints.to(dtype), divs.to(dtype))
        compare(torch.remainder, ints.to(dtype), divs.to(dtype))
        compare(torch.fmod, ints.to(dtype), divs.to(dtype))


def test_nan_propagates_from_either_operand():
    a = torch.tensor([NAN, 1.0, NAN, -1.0, 2.0])
    b = torch.tensor([1.0, NAN, NAN, 0.0, NAN])
    for fn in (torch.maximum, torch.minimum, torch.clamp_min, torch.clamp_max, lambda x, y: torch.clamp(x, y, y + 1)):
        compare(fn, a, b)
        compare(fn, b, a)
    compare(lambda x: x.clamp(-1.0, NAN), a)


def test_integer_pow_and_overflow_wraps_like_cpu():
    base = torch.tensor([1, -1, 2, -2, 0, 3, 2, -3])
    exp = torch.tensor([-1, -1, -1, -3, 2, 0, 62, 39])  # negative int exponents of tensors are allowed
    for dtype in INTS:
        compare(torch.pow, base.to(dtype), exp.to(dtype))
    compare(lambda x: x * 3_000_000_000, torch.tensor([2, -4, 5], dtype=torch.int64))
    compare(lambda x: x + 2_000_000_000, torch.tensor([2, -4, 500_000_000], dtype=torch.int32))


# ATen's CPU pow computes these exponents with other kernels (copy, products, sqrt, reciprocal); the program holds
# them as constants, every other exponent stays a runtime parameter.
POW_FIXED_EXPONENTS = [1, 2, 3, -2, 0.5, -0.5, -1, 2.0, True]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=dname)
def test_pow_of_fixed_exponents_matches_cpu_on_special_values(dtype):
    x = torch.cat([torch.tensor([NAN, INF, -INF, -0.0, 0.0, -3.0, 1e-3]), torch.randn(64) * 4])
    for e in POW_FIXED_EXPONENTS + [2.5, -3, 0]:
        compare(lambda t, e=e: t.pow(e), x.to(dtype))
        compare(lambda t, e=e: t.pow_(e), x.to(dtype))
    check(
        lambda t: (t.pow(2) + t.pow(3) + t.pow(0.5) + t.pow(-1)).sum(),
        make((4, 3), torch.float32, "positive"),
        grad=True,
    )


def test_pow_compiles_once_per_fixed_exponent_and_once_for_all_others():
    x = make((8,), torch.float32, "positive").to(DEVICE)
    x.pow(7.25).cpu()
    torch_pjrt.reset_metrics()
    for e in [1.5, 2.5, -3.0, 4.75]:  # runtime parameters: the program of 7.25 serves them all
        x.pow(e).cpu()
    assert torch_pjrt.metrics()["compiles"] == 0
    for e in [2, 3, 0.5]:
        x.pow(e).cpu()
    assert torch_pjrt.metrics()["compiles"] == 3
    x.pow(2).cpu(), x.pow(0.5).cpu()
    assert torch_pjrt.metrics()["compiles"] == 3
    with torch_pjrt.eager_mode("fused"):  # the pending program's text
        assert "stablehlo.multiply" in torch_pjrt.stablehlo(x.pow(2))
        assert "stablehlo.power" not in torch_pjrt.stablehlo(x.pow(2))


# ----------------------------------------------------------------------------- scalar operands, type promotion

SCALAR_OPS = {
    "add": lambda t, s: t + s,
    "sub": lambda t, s: t - s,
    "rsub": lambda t, s: s - t,
    "mul": lambda t, s: t * s,
    "div": lambda t, s: t / s,
    "rdiv": lambda t, s: s / t,
    "floordiv": lambda t, s: torch.div(t, s, rounding_mode="floor"),
    "remainder": lambda t, s: torch.remainder(t, s),
    "fmod": lambda t, s: torch.fmod(t, s),
    "pow": lambda t, s: torch.pow(t, s),
    "rpow": lambda t, s: torch.pow(s, t),
    "clamp": lambda t, s: torch.clamp(t, min=-s, max=s),
    "clamp_min": lambda t, s: torch.clamp_min(t, s),
    "eq": lambda t, s: t == s,
    "lt": lambda t, s: t < s,
    "bitwise_xor": lambda t, s: t ^ s,
    "masked_fill": lambda t, s: t.masked_fill(torch.arange(5, device=t.device) % 2 == 0, s),
    "where": lambda t, s: torch.where(torch.arange(5, device=t.device) % 2 == 0, t, s),
    "lerp": lambda t, s: torch.lerp(t, t * 2, s),
    "addcmul": lambda t, s: torch.addcmul(t, t, t, value=s),
    "addcdiv": lambda t, s: torch.addcdiv(t, t, t + 10, value=s),
}
# Python scalars of each kind (bool scalars and 0-dim tensors: test_type_promotion).
SCALARS = {"int": 2, "float": -0.75}


@pytest.mark.parametrize("scalar", SCALARS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool], ids=dname)
@pytest.mark.parametrize("name", SCALAR_OPS)
def test_python_scalar_operand(name, dtype, scalar):
    s = SCALARS[scalar]
    kind = "positive" if name in ("rdiv", "addcdiv") else "any"
    t = make((3, 5), dtype, kind)
    if name in ("pow", "rpow") and dtype.is_floating_point:
        t = t.abs() + 0.5
    if name == "rpow" and not dtype.is_floating_point and dtype != torch.bool:
        t = t.abs()
    compare(lambda x: SCALAR_OPS[name](x, s), t)


# Each Scalar overload called by name (Python operators mostly reach the Tensor overloads with a wrapped scalar).
SCALAR_OVERLOADS = {
    "add.Scalar": (2.5, 2),
    "sub.Scalar": (1.5, 3),
    "mul.Scalar": (-2,),
    "div.Scalar": (4,),
    "div.Scalar_mode": (-1.5, "floor"),
    "remainder.Scalar": (-0.75,),
    "fmod.Scalar": (0.75,),
    "rsub.Scalar": (2, 2),
    "pow.Tensor_Scalar": (3,),
    "eq.Scalar": (1,),
    "ne.Scalar": (1,),
    "lt.Scalar": (0.5,),
    "le.Scalar": (1,),
    "gt.Scalar": (-0.5,),
    "ge.Scalar": (0,),
    "bitwise_and.Scalar": (6,),
    "bitwise_or.Scalar": (5,),
    "bitwise_xor.Scalar": (3,),
    "clamp_min": (0.25,),
    "clamp_max": (-0.25,),
    "fill.Scalar": (7,),
    "masked_fill.Scalar": (-1,),
    "lerp.Scalar": (0.75,),
}


@pytest.mark.parametrize("name", SCALAR_OVERLOADS)
def test_scalar_overloads_by_name(name):
    op = torch.ops.aten
    for part in name.split("."):
        op = getattr(op, part)
    rest = SCALAR_OVERLOADS[name]
    dtype = torch.int32 if name.startswith("bitwise") else torch.float32
    x = make((3, 5), dtype)
    if name == "masked_fill.Scalar":
        compare(lambda t: op(t, t > 0, *rest), x)
    elif name == "lerp.Scalar":
        compare(lambda t: op(t, t * 3, *rest), x)
    elif name == "div.Scalar_mode":
        compare(lambda t: op(t, rest[0], rounding_mode=rest[1]), x)
    else:
        compare(lambda t: op(t, *rest), x)
    if name == "pow.Tensor_Scalar":
        compare(lambda t: torch.ops.aten.pow.Scalar(2.5, t), make((3, 5), torch.float32))


# case -> () -> (lhs, rhs): the promotion cases plus the other priority combinations
# (dimensioned tensor, 0-dim tensor, Python scalar; category and width).
PROMOTION = {
    "int_tensor+float_scalar": lambda: (make((3, 5), torch.int64), 2.5),
    "int32_tensor*float_scalar": lambda: (make((3, 5), torch.int32), -0.5),
    "f16_tensor*python_float": lambda: (make((3, 5), torch.float16), 1.1),
    "bf16_tensor+python_int": lambda: (make((3, 5), torch.bfloat16), 3),
    "int32+0dim_f64": lambda: (make((3, 5), torch.int32), torch.tensor(1.5, dtype=torch.float64)),
    "int32+0dim_int64": lambda: (make((3, 5), torch.int32), torch.tensor(7)),
    "f16+0dim_f32": lambda: (make((3, 5), torch.float16), torch.tensor(2.25)),
    "bf16+0dim_f64": lambda: (make((3, 5), torch.bfloat16), torch.tensor(-1.5, dtype=torch.float64)),
    "bool+int_scalar": lambda: (make((3, 5), torch.bool), 3),
    "bool+bool_scalar": lambda: (make((3, 5), torch.bool), True),
    "f32+bool_scalar": lambda: (make((3, 5), torch.float32), True),
    "int32+bool_scalar": lambda: (make((3, 5), torch.int32), False),
    "bool+float_scalar": lambda: (make((3, 5), torch.bool), 0.5),
    "bool+0dim_int32": lambda: (make((3, 5), torch.bool), torch.tensor(4, dtype=torch.int32)),
    "bool+int_tensor": lambda: (make((3, 5), torch.bool), make((5,), torch.int32)),
    "int32+int64": lambda: (make((3, 5), torch.int32), make((5,), torch.int64)),
    "int64+f16": lambda: (make((3, 5), torch.int64), make((5,), torch.float16)),
    "bf16+f16": lambda: (make((3, 5), torch.bfloat16), make((5,), torch.float16)),
    "f16+f32": lambda: (make((3, 5), torch.float16), make((5,), torch.float32)),
    "0dim_f32+int_tensor": lambda: (torch.tensor(1.25), make((3, 5), torch.int32)),
    "0dim+0dim": lambda: (torch.tensor(3, dtype=torch.int32), torch.tensor(1.5, dtype=torch.float16)),
}
PROMOTION_OPS = {
    "add": torch.add,
    "lt": torch.lt,
    "where": lambda a, b: torch.where(torch.arange(5, device=a.device) % 2 == 0, a, b),
}


@pytest.mark.parametrize("op", PROMOTION_OPS)
@pytest.mark.parametrize("case", PROMOTION)
def test_type_promotion(case, op):
    lhs, rhs = PROMOTION[case]()
    fn = PROMOTION_OPS[op]
    if isinstance(rhs, torch.Tensor):
        compare(fn, lhs, rhs)  # rhs moved to tpu, 0-dim tensors included
        if rhs.dim() == 0:  # a CPU 0-dim tensor mixed with a tpu tensor, as on CUDA
            compare(lambda a: fn(a, rhs), lhs)
    else:
        compare(lambda a: fn(a, rhs), lhs)


# ----------------------------------------------------------------------------- unary ops

# name -> (fn, input kind)
UNARY = {
    "neg": (torch.neg, "any"),
    "abs": (torch.abs, "any"),
    "sign": (torch.sign, "any"),
    "exp": (torch.exp, "any"),
    "expm1": (torch.expm1, "any"),
    "log": (torch.log, "positive"),
    "log1p": (torch.log1p, "positive"),
    "sqrt": (torch.sqrt, "positive"),
    "rsqrt": (torch.rsqrt, "positive"),
    "sin": (torch.sin, "any"),
    "cos": (torch.cos, "any"),
    "tan": (torch.tan, "unit"),
    "tanh": (torch.tanh, "any"),
    "sigmoid": (torch.sigmoid, "any"),
    "erf": (torch.erf, "any"),
    "floor": (torch.floor, "any"),
    "ceil": (torch.ceil, "any"),
    "round": (torch.round, "any"),
    "trunc": (torch.trunc, "any"),
    "reciprocal": (torch.reciprocal, "nonzero"),
    "relu": (torch.relu, "any"),
    "silu": (F.silu, "any"),
    "gelu": (F.gelu, "any"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "any"),
    "logical_not": (torch.logical_not, "any"),
    "bitwise_not": (torch.bitwise_not, "any"),
    "isnan": (torch.isnan, "any"),
    "isposinf": (torch.isposinf, "any"),
    "isneginf": (torch.isneginf, "any"),
    "clone": (torch.clone, "any"),
    "zero": (lambda x: torch.zero_(x.clone()), "any"),
}


# int32 goes through the same conversions as int64 here (it is swept in test_binary and test_ternary), and the
# float functions share one int -> float32 path, swept on ints and bools for a few of them.
FLOAT_FUNCTIONS = ["expm1", "log", "log1p", "rsqrt", "sin", "cos", "tan", "tanh", "erf"]
UNARY_CASES = [
    (n, d)
    for n in UNARY
    for d in [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool]
    if n not in FLOAT_FUNCTIONS or d.is_floating_point
]


@pytest.mark.parametrize("name,dtype", UNARY_CASES, ids=lambda v: dname(v))
def test_unary(name, dtype):
    fn, kind = UNARY[name]
    compare(fn, make((3, 5), dtype, kind))


# CPU's vectorized gelu returns NaN for +-inf (it computes inf * 0); compare the finite edge values there.
SPECIAL_SKIP_INF = {"gelu", "gelu_tanh"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=dname)
@pytest.mark.parametrize("name", [n for n in UNARY if n not in ("bitwise_not", "zero")])
def test_unary_special_values(name, dtype):
    s = specials(dtype)
    if name in SPECIAL_SKIP_INF:
        s = s[s.isfinite() | s.isnan()]
    compare(UNARY[name][0], s)


def test_gelu_far_negative_tail_is_zero():
    # 0.5 * x * (1 + erf(x / sqrt 2)) with an erf that stops short of -1 leaves x * 1e-7 instead of -0.
    x = torch.tensor([-1000.0, -100.0, -12.0, -8.0, -5.0, -3.0, 3.0, 8.0, 100.0])
    for dtype in FLOATS:
        compare(F.gelu, x.to(dtype), grad=dtype == torch.float32)


# Reduced precision: PyTorch computes these in float32 and rounds once; rounding every intermediate
# shows up as cancellation error when the result is much smaller than the operands.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dname)
def test_reduced_precision_fused_ops_round_once(dtype):
    a, b = (torch.randn(64) * 100).to(dtype), (torch.randn(64) * 100).to(dtype)
    w = torch.rand(64).to(dtype)
    compare(lambda x, y: torch.lerp(x, y, 0.7), a, b)
    compare(lambda x, y: torch.lerp(x, y, 0.3), a, b)
    compare(torch.lerp, a, b, w)
    compare(lambda x, y: torch.addcmul(x, y, y, value=-0.5), a, b)
    compare(lambda x, y: torch.addcdiv(x, y, y.abs() + 1, value=3), a, b)
    compare(lambda x, y: torch.add(x, y, alpha=3), a, b)
    compare(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b / 7)


# ----------------------------------------------------------------------------- ternary and misc ops

TERNARY = {
    "clamp_scalars": lambda x, lo, hi: torch.clamp(x, -0.5, 0.75),
    "clamp_min_only": lambda x, lo, hi: torch.clamp(x, min=0.25),
    "clamp_max_only": lambda x, lo, hi: torch.clamp(x, max=0.25),
    "clamp_tensors": lambda x, lo, hi: torch.clamp(x, lo, hi),
    "clamp_min_gt_max": lambda x, lo, hi: torch.clamp(x, hi, lo),
    "lerp_scalar": lambda x, lo, hi: torch.lerp(x, hi, 0.3),
    "lerp_tensor": lambda x, lo, hi: torch.lerp(x, hi, lo),
    "addcmul": lambda x, lo, hi: torch.addcmul(x, lo, hi, value=0.5),
    "addcdiv": lambda x, lo, hi: torch.addcdiv(x, lo, hi, value=-2),
    "where": lambda x, lo, hi: torch.where(x > 0, lo, hi),
    "masked_fill": lambda x, lo, hi: x.masked_fill(hi > 0, 2),
    "masked_fill_tensor": lambda x, lo, hi: x.masked_fill(hi > 0, hi[0, 0]),
    "fill": lambda x, lo, hi: torch.fill(x, 3),
    "fill_tensor": lambda x, lo, hi: torch.fill(x, hi[1, 1]),
    "copy": lambda x, lo, hi: x.clone().copy_(hi),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=dname)
@pytest.mark.parametrize("name", TERNARY)
def test_ternary(name, dtype):
    x = make((3, 5), dtype)
    lo = make((5,), dtype, "nonzero")
    hi = make((3, 1), dtype, "nonzero")
    if name in ("clamp_tensors", "clamp_min_gt_max") and dtype != torch.bool:
        lo, hi = torch.minimum(lo, hi).expand(3, 5).contiguous() - 1, torch.maximum(lo, hi).expand(3, 5).contiguous()
    if name in ("fill_tensor", "masked_fill_tensor", "copy"):
        hi = hi.expand(3, 5).contiguous()
    compare(TERNARY[name], x, lo, hi)


def test_mixed_dtype_operands():
    x, i = make((3, 5), torch.float32), make((3, 5), torch.int32)
    compare(lambda a, b: torch.where(a > 0, a, b), x, i)
    compare(lambda a, b: torch.where(b > 0, b, 0.5), x, i)
    compare(lambda a, b: torch.where(b > 0, a.half(), a.bfloat16()), x, i)
    compare(lambda a, b: torch.clamp(b, min=-0.5, max=2.5), x, i)  # int tensor, float bounds: float result
    compare(lambda a, b: torch.clamp(b, a - 1, a + 1), x, i)
    compare(lambda a, b: torch.addcmul(a, b, b, value=0.5), x, i)
    compare(lambda a, b: a.masked_fill(b > 0, 7), x, i)
    compare(lambda a, b: a.clone().copy_(b), x, i)
    compare(lambda a, b: b.clone().copy_(a), x, i)
    compare(lambda a, b: (b > 0).clone().copy_(a), x, i)
    compare(lambda a: a.half().clone().copy_(a), x)


def test_backward_ops_directly():
    g, x = make((3, 5), torch.float32), make((3, 5), torch.float32)
    y = torch.sigmoid(x)
    for dtype in FLOATS:
        gd, xd, yd = g.to(dtype), x.to(dtype), y.to(dtype)
        compare(lambda a, b: torch.ops.aten.gelu_backward(a, b), gd, xd)
        compare(lambda a, b: torch.ops.aten.gelu_backward(a, b, approximate="tanh"), gd, xd)
        compare(torch.ops.aten.silu_backward, gd, xd)
        compare(torch.ops.aten.sigmoid_backward, gd, yd)
        compare(torch.ops.aten.tanh_backward, gd, yd)
        compare(lambda a, b: torch.ops.aten.threshold_backward(a, b, 0.25), gd, xd)


# ----------------------------------------------------------------------------- non-contiguous inputs


# Views are made inside the compared function (from contiguous bases), so that both devices see the same strides.
LAYOUTS = {
    "transposed": ((5, 3), lambda t: t.t()),
    "stepped": ((7, 12), lambda t: t[1::3, ::2][:, :5]),
    "expanded_row": ((1, 5), lambda t: t.expand(3, 5)),
    "expanded_col": ((3, 1), lambda t: t.expand(3, 5)),
}

LAYOUT_OPS = {
    "add": lambda a, b: torch.add(a, b, alpha=0.5),
    "mul_bcast": lambda a, b: a * b[0],
    "div_floor": lambda a, b: torch.div(a, b * b + 0.5, rounding_mode="floor"),
    "maximum": torch.maximum,
    "where": lambda a, b: torch.where(a > b, a, b),
    "lerp": lambda a, b: torch.lerp(a, b, b.sigmoid()),
    "gelu": lambda a, b: F.gelu(a) * b,
    "clone": lambda a, b: a.clone(),
    "to_int": lambda a, b: a.to(torch.int32),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, -1),
}


@pytest.mark.parametrize("op", LAYOUT_OPS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_noncontiguous_inputs(layout, op):
    shape, view = LAYOUTS[layout]
    other = "transposed" if layout != "transposed" else "stepped"
    other_shape, other_view = LAYOUTS[other]

    def fn(x, y):
        a, b = view(x), other_view(y)
        assert not a.is_contiguous() and not b.is_contiguous()
        return LAYOUT_OPS[op](a, b)

    compare(fn, torch.randn(shape), torch.randn(other_shape), grad=op in ("add", "mul_bcast", "lerp", "gelu"))


@pytest.mark.parametrize("name", [n for n in UNARY if n not in ("bitwise_not",)])
def test_unary_noncontiguous(name):
    fn, kind = UNARY[name]

    def view(x):
        v = x.t()[1::2, 1:6]  # [4, 5] of a [6, 8] base: transposed, stepped and offset
        assert not v.is_contiguous()
        return fn(v)

    compare(view, make((6, 8), torch.float32, kind))


# ----------------------------------------------------------------------------- in-place variants through views

INPLACE = {
    "add_": lambda v, o: v.add_(o, alpha=2),
    "add_scalar_": lambda v, o: v.add_(1.5),
    "sub_": lambda v, o: v.sub_(o),
    "rsub_via_mul_": lambda v, o: v.mul_(-1).add_(3),
    "mul_": lambda v, o: v.mul_(o[0]),  # broadcast operand
    "div_": lambda v, o: v.div_(o.abs() + 0.5),
    "div_floor_": lambda v, o: v.div_(o.abs() + 0.5, rounding_mode="floor"),
    "div_trunc_": lambda v, o: v.div_(0.3, rounding_mode="trunc"),
    "remainder_": lambda v, o: v.remainder_(0.7),
    "fmod_": lambda v, o: v.fmod_(o.abs() + 0.5),
    "pow_": lambda v, o: v.abs_().pow_(o),
    "pow_scalar_": lambda v, o: v.pow_(2),
    "clamp_": lambda v, o: v.clamp_(-0.5, 0.5),
    "clamp_tensor_": lambda v, o: v.clamp_(o - 1, o + 1),
    "clamp_min_": lambda v, o: v.clamp_min_(0.1),
    "clamp_max_": lambda v, o: v.clamp_max_(o),
    "lerp_": lambda v, o: v.lerp_(o, 0.25),
    "lerp_tensor_": lambda v, o: v.lerp_(o, o.sigmoid()),
    "addcmul_": lambda v, o: v.addcmul_(o, o, value=0.5),
    "addcdiv_": lambda v, o: v.addcdiv_(o, o.abs() + 1, value=2),
    "neg_": lambda v, o: v.neg_(),
    "abs_": lambda v, o: v.abs_(),
    "sign_": lambda v, o: v.sign_(),
    "exp_": lambda v, o: v.exp_(),
    "expm1_": lambda v, o: v.expm1_(),
    "log_": lambda v, o: v.abs_().log_(),
    "log1p_": lambda v, o: v.abs_().log1p_(),
    "sqrt_": lambda v, o: v.abs_().sqrt_(),
    "rsqrt_": lambda v, o: v.abs_().add_(0.1).rsqrt_(),
    "sin_": lambda v, o: v.sin_(),
    "cos_": lambda v, o: v.cos_(),
    "tan_": lambda v, o: v.clamp_(-1, 1).tan_(),
    "tanh_": lambda v, o: v.tanh_(),
    "sigmoid_": lambda v, o: v.sigmoid_(),
    "erf_": lambda v, o: v.erf_(),
    "floor_": lambda v, o: v.floor_(),
    "ceil_": lambda v, o: v.ceil_(),
    "round_": lambda v, o: v.mul_(4).round_(),
    "trunc_": lambda v, o: v.trunc_(),
    "reciprocal_": lambda v, o: v.abs_().add_(0.1).reciprocal_(),
    "relu_": lambda v, o: v.relu_(),
    "silu_inplace": lambda v, o: F.silu(v, inplace=True),
    "gelu_": lambda v, o: torch.ops.aten.gelu_(v),
    "eq_": lambda v, o: v.eq_(o),
    "lt_scalar_": lambda v, o: v.lt_(0.5),
    "ge_": lambda v, o: v.ge_(o),
    "logical_and_": lambda v, o: v.logical_and_(o > 0),
    "logical_not_": lambda v, o: v.logical_not_(),
    "masked_fill_": lambda v, o: v.masked_fill_(o > 0, -3.0),
    "masked_fill_tensor_": lambda v, o: v.masked_fill_(o > 0, o[0, 0]),
    "fill_": lambda v, o: v.fill_(7),
    "fill_tensor_": lambda v, o: v.fill_(o[1, 1]),
    "zero_": lambda v, o: v.zero_(),
    "copy_": lambda v, o: v.copy_(o),
    "copy_bcast_dtype_": lambda v, o: v.copy_((o[0] * 3).to(torch.int32)),
    "maximum_out_self": lambda v, o: torch.maximum(v, o, out=v),
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_on_view_writes_base(name):
    base = make((4, 10), torch.float32)
    other = make((3, 5), torch.float32)

    def fn(b, o):
        b = b.clone()
        v = b[1:, ::2]  # [3, 5], strided, offset
        r = INPLACE[name](v, o)
        return b, v, r

    compare(fn, base, other)


@pytest.mark.parametrize(
    "name",
    [
        "add_",
        "mul_",
        "clamp_",
        "neg_",
        "sign_",
        "fill_",
        "copy_",
        "masked_fill_",
        "remainder_",
        "div_floor_",
        "div_trunc_",
    ],
)
@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.bfloat16], ids=dname)
def test_inplace_other_dtypes(name, dtype):
    base = make((4, 10), dtype)
    other = make((3, 5), dtype, "nonzero")
    fns = dict(
        INPLACE,
        **{
            "div_floor_": lambda v, o: v.div_(o, rounding_mode="floor"),
            "div_trunc_": lambda v, o: v.div_(o, rounding_mode="trunc"),
            "remainder_": lambda v, o: v.remainder_(o),
            "clamp_": lambda v, o: v.clamp_(-2, 2),
            "copy_": lambda v, o: v.copy_(o),
            "fill_": lambda v, o: v.fill_(1),
        },
    )

    def fn(b, o):
        b = b.clone()
        v = b.t()[1:8:2].t()[1:]  # [3, 4], non-contiguous view
        r = fns[name](v, o[:, :4])
        return b, v, r

    compare(fn, base, other)


def test_inplace_bitwise_on_ints_and_bools():
    for dtype in INTS + [torch.bool]:
        base, other = make((4, 6), dtype), make((4, 6), dtype)
        for op in ("bitwise_and_", "bitwise_or_", "bitwise_xor_"):
            compare(lambda b, o, op=op: (getattr(b.t()[::2], op)(o.t()[::2]), b)[1], base.clone(), other)
        compare(lambda b: (b[:, 1:].bitwise_not_(), b)[1], base.clone())
        compare(lambda b, o: (b[:, 1:].logical_xor_(o[:, 1:]), b)[1], base.clone(), other)


def test_inplace_through_aliases_sees_write():
    x = make((4, 6), torch.float32)

    def fn(a):
        a = a.clone()
        t = a.t()  # alias of the whole storage
        row = a[2]  # alias of one row
        a[1:3, 1:].mul_(10)
        t[0].add_(100)  # column 0 of a
        row.sub_(1)
        return a, t, row

    compare(fn, x)


def test_inplace_dtype_errors_match_cpu():
    i = make((3, 5), torch.int64)
    assert compare(lambda a: a.add_(1.5), i) is RuntimeError  # float result into an int tensor
    assert compare(lambda a: a.div_(2), i) is RuntimeError
    assert compare(lambda a: (a > 0).mul_(a), i) is RuntimeError
    assert compare(lambda a: a.add_(torch.ones(2, 3, 5, dtype=a.dtype, device=a.device)), i) is RuntimeError
    assert compare(lambda a: a.float().abs_().sqrt_().long(), i) is None


def test_bool_arithmetic_errors_match_cpu():
    b = make((3, 5), torch.bool)
    assert compare(torch.neg, b) is RuntimeError
    assert compare(torch.sub, b, b) is RuntimeError
    assert compare(lambda x: torch.lerp(x.float(), x.half(), 0.5), b) is RuntimeError
    assert compare(lambda x: torch.addcdiv(x.float(), x.long(), x.int()), b) is RuntimeError
    assert compare(torch.relu, b) is RuntimeError


# ----------------------------------------------------------------------------- out= variants

OUT_OPS = {
    "add": lambda a, b, out: torch.add(a, b, alpha=2, out=out),
    "sub": lambda a, b, out: torch.sub(a, b, out=out),
    "mul": lambda a, b, out: torch.mul(a, b, out=out),
    "div": lambda a, b, out: torch.div(a, b, out=out),
    "div_floor": lambda a, b, out: torch.div(a, b, rounding_mode="floor", out=out),
    "fmod": lambda a, b, out: torch.fmod(a, b, out=out),
    "pow": lambda a, b, out: torch.pow(a.abs(), b, out=out),
    "maximum": lambda a, b, out: torch.maximum(a, b, out=out),
    "minimum": lambda a, b, out: torch.minimum(a, b, out=out),
    "clamp": lambda a, b, out: torch.clamp(a, -0.5, 0.5, out=out),
    "clamp_min": lambda a, b, out: torch.clamp_min(a, b, out=out),
    "lerp": lambda a, b, out: torch.lerp(a, b, 0.4, out=out),
    "addcmul": lambda a, b, out: torch.addcmul(a, a, b, out=out),
    "addcdiv": lambda a, b, out: torch.addcdiv(a, a, b, value=0.5, out=out),
    "exp": lambda a, b, out: torch.exp(a, out=out),
    "log": lambda a, b, out: torch.log(a, out=out),
    "sqrt": lambda a, b, out: torch.sqrt(a, out=out),
    "tanh": lambda a, b, out: torch.tanh(a, out=out),
    "sigmoid": lambda a, b, out: torch.sigmoid(a, out=out),
    "erf": lambda a, b, out: torch.erf(a, out=out),
    "neg": lambda a, b, out: torch.neg(a, out=out),
    "abs": lambda a, b, out: torch.abs(a, out=out),
    "floor": lambda a, b, out: torch.floor(a, out=out),
    "round": lambda a, b, out: torch.round(a, out=out),
    "reciprocal": lambda a, b, out: torch.reciprocal(a, out=out),
    "silu": lambda a, b, out: torch._C._nn.silu(a, out=out),
}


@pytest.mark.parametrize("name", OUT_OPS)
def test_out_into_view(name):
    a, b = make((3, 5), torch.float32, "positive"), make((3, 5), torch.float32, "nonzero")

    def fn(x, y, base):
        base = base.clone()
        out = base[1:, 1::2]  # [3, 5] strided view: the result must land in base
        r = OUT_OPS[name](x, y, out)
        assert r.data_ptr() == out.data_ptr()
        return base, r

    compare(fn, a, b, make((4, 10), torch.float32))


# The out= tensors: wrong-sized (resized), of a wider dtype (the result is cast), and bool results.
OUT_VARIANTS = {
    "resized": lambda a, b: torch.add(a, b, out=torch.empty(0, device=a.device)),
    "resized_unary": lambda a, b: torch.exp(a, out=torch.empty(7, device=a.device)),
    "float64_out": lambda a, b: torch.mul(a, b, out=torch.empty(3, 5, dtype=torch.float64, device=a.device)),
    "int_into_float": lambda a, b: torch.add(a.long(), b.long(), out=torch.empty(3, 5, device=a.device)),
    "cmp_into_bool": lambda a, b: torch.lt(a, b, out=torch.empty(3, 5, dtype=torch.bool, device=a.device)),
    "isneginf_into_bool": lambda a, b: torch.isneginf(
        a.log(), out=torch.empty(3, 5, dtype=torch.bool, device=a.device)
    ),
    "cmp_into_float": lambda a, b: torch.ge(a, b, out=torch.empty(3, 5, device=a.device)),
    "logical_into_int": lambda a, b: torch.logical_and(a, b, out=torch.empty(3, 5, dtype=torch.int32, device=a.device)),
    "bitwise_int": lambda a, b: torch.bitwise_and(
        a.int(), b.int(), out=torch.empty(3, 5, dtype=torch.int32, device=a.device)
    ),
    # CPU's gelu.out ignores a non-contiguous out (writes a temporary), so only a fresh out here.
    "gelu": lambda a, b: torch._C._nn.gelu(a, out=torch.empty(3, 5, device=a.device)),
    "transposed_out": lambda a, b: torch.sub(a, b, out=torch.empty(5, 3, device=a.device).t()),
}


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("name", OUT_VARIANTS)
def test_out_dtype_and_resize(name):
    compare(OUT_VARIANTS[name], make((3, 5), torch.float32), make((3, 5), torch.float32))


# Out overloads whose functional op shares its argument names with a Scalar overload
# (remainder.Scalar_Tensor(self, other), where.ScalarOther, bitwise_xor.Scalar_Tensor): the glue once
# resolved them by names alone, to the Scalar overload, and they fell back to CPU.
OUT_SHARED_NAMES = {
    "remainder": lambda a, b, out: torch.remainder(a, b, out=out),
    "where": lambda a, b, out: torch.where(a > b, a, b, out=out),
    "bitwise_xor": lambda a, b, out: torch.bitwise_xor(a > 0, b > 0, out=out.bool()),
}


@pytest.mark.parametrize("name", OUT_SHARED_NAMES)
def test_out_overloads_sharing_argument_names(name):
    a, b = make((3, 5), torch.float32), make((3, 5), torch.float32, "nonzero")
    compare(lambda x, y: OUT_SHARED_NAMES[name](x, y, torch.empty(3, 5, device=x.device)), a, b)


# PyTorch refuses these out= tensors (a float result into bool/int64, isposinf into a non-bool tensor).
OUT_REFUSED = {
    "float_into_bool": lambda x: torch.mul(x, x, out=torch.empty(3, 5, dtype=torch.bool, device=x.device)),
    "float_into_int64": lambda x: torch.add(x, 1, out=torch.empty(3, 5, dtype=torch.int64, device=x.device)),
    "isposinf_into_float": lambda x: torch.isposinf(x, out=torch.empty(3, 5, device=x.device)),
}


@pytest.mark.parametrize("name", list(OUT_REFUSED))
def test_out_refuses_lossy_cast_like_cpu(name):
    assert compare(OUT_REFUSED[name], make((3, 5), torch.float32)) is RuntimeError


# ----------------------------------------------------------------------------- gradients

# name -> (fn, input kinds). Every floating input requires grad.
GRAD = {
    "add": (lambda a, b: torch.add(a, b, alpha=2), ("any", "any")),
    "sub": (lambda a, b: torch.sub(a, b, alpha=0.5), ("any", "any")),
    "rsub": (lambda a, b: torch.rsub(a, b), ("any", "any")),
    "mul": (torch.mul, ("any", "any")),
    "div": (torch.div, ("any", "nonzero")),
    "remainder": (torch.remainder, ("any", "nonzero")),
    "fmod": (torch.fmod, ("any", "nonzero")),
    "pow": (torch.pow, ("positive", "exponent")),
    "pow_scalar": (lambda a, b: a**3 + b**0.5, ("any", "positive")),
    "rpow": (lambda a, b: 2**a + 1.5**b, ("any", "any")),
    "maximum": (torch.maximum, ("any", "any")),
    "minimum": (torch.minimum, ("any", "any")),
    "clamp": (lambda a, b: a.clamp(-0.5, 0.5) * b, ("any", "any")),
    "clamp_tensor": (lambda a, b: a.clamp(b - 1, b + 1), ("any", "any")),
    "clamp_min": (lambda a, b: torch.clamp_min(a, b), ("any", "any")),
    "clamp_max": (lambda a, b: torch.clamp_max(a, 0.2) + b, ("any", "any")),
    "lerp": (lambda a, b: torch.lerp(a, b, 0.3), ("any", "any")),
    "lerp_tensor": (lambda a, b: torch.lerp(a, b, b.sigmoid()), ("any", "any")),
    "addcmul": (lambda a, b: torch.addcmul(a, a, b, value=0.5), ("any", "any")),
    "addcdiv": (lambda a, b: torch.addcdiv(a, a, b, value=0.5), ("any", "nonzero")),
    "where": (lambda a, b: torch.where(a > b, a * 2, b), ("any", "any")),
    "masked_fill": (lambda a, b: a.masked_fill(b > 0, 1.0) * b, ("any", "any")),
    "bcast_mul": (lambda a, b: a * b[0], ("any", "any")),
}
for _name in [
    "neg",
    "exp",
    "expm1",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "erf",
    "reciprocal",
    "relu",
    "silu",
    "gelu",
    "gelu_tanh",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sign",
    "abs",
]:
    GRAD[_name] = (lambda a, b, f=UNARY[_name][0]: f(a) * b, (UNARY[_name][1], "any"))  # b: a second input
# abs's derivative is sgn(x), which has no lowering yet.
GRAD_FALLBACKS = {"abs": {"aten::sgn.out"}}


@pytest.mark.parametrize("name", GRAD)
def test_grad(name, no_fallback):
    fn, kinds = GRAD[name]
    no_fallback.update(GRAD_FALLBACKS.get(name, ()))
    a, b = make((3, 5), torch.float32, kinds[0]), make((3, 5), torch.float32, kinds[1])
    compare(fn, a, b, grad=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dname)
@pytest.mark.parametrize(
    "name", ["mul", "div", "pow", "lerp", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "relu", "exp", "log", "where"]
)
def test_grad_reduced_precision(name, dtype):
    fn, kinds = GRAD[name]
    a, b = make((3, 5), dtype, kinds[0]), make((3, 5), dtype, kinds[1])
    rtol, atol = (2e-2, 2e-2) if dtype == torch.bfloat16 else (2e-3, 2e-3)
    compare(fn, a, b, grad=True, rtol=rtol, atol=atol)


def test_grad_through_noncontiguous_and_broadcast():
    a = torch.randn(5, 3).t()  # [3, 5] transposed
    b = torch.randn(10)  # stepped below, broadcast against a
    compare(lambda x, y: (F.gelu(x * y[::2]) + torch.tanh(y[::2])).sigmoid() / (y[::2] ** 2 + 1), a, b, grad=True)
