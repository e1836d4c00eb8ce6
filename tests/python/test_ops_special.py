"""Special functions (csrc/lowering/special.cc) compared with CPU over wide input ranges."""

import pytest
import torch

import torch_pjrt
from compare import check

special = torch.special

# name: (fn, lo, hi, has_grad, supports_bf16)
UNARY = {
    "i0": (torch.i0, -20.0, 20.0, True, True),
    "i0e": (special.i0e, -20.0, 20.0, True, True),
    "i1": (special.i1, -20.0, 20.0, True, True),
    "i1e": (special.i1e, -20.0, 20.0, True, True),
    "digamma": (torch.digamma, -5.5, 8.0, True, True),
    "ndtri": (special.ndtri, 0.0, 1.0, True, True),
    "log_ndtr": (special.log_ndtr, -12.0, 6.0, True, True),
    "erfcx": (special.erfcx, -8.0, 60.0, True, True),
    "airy_ai": (special.airy_ai, -12.0, 12.0, False, False),
    "bessel_j0": (special.bessel_j0, -30.0, 30.0, False, False),
    "bessel_j1": (special.bessel_j1, -30.0, 30.0, False, False),
    "bessel_y0": (special.bessel_y0, -1.0, 30.0, False, False),
    "bessel_y1": (special.bessel_y1, -1.0, 30.0, False, False),
    "modified_bessel_i0": (special.modified_bessel_i0, -15.0, 15.0, False, False),
    "modified_bessel_i1": (special.modified_bessel_i1, -15.0, 15.0, False, False),
    "modified_bessel_k0": (special.modified_bessel_k0, -0.5, 15.0, False, False),
    "modified_bessel_k1": (special.modified_bessel_k1, -0.5, 15.0, False, False),
    "scaled_modified_bessel_k0": (special.scaled_modified_bessel_k0, -0.5, 15.0, False, False),
    "scaled_modified_bessel_k1": (special.scaled_modified_bessel_k1, -0.5, 15.0, False, False),
    "spherical_bessel_j0": (special.spherical_bessel_j0, -20.0, 20.0, False, False),
}


def _cpu_supports(fn, dtype):
    try:
        fn(torch.ones(2, dtype=dtype))
        return True
    except RuntimeError:
        return False


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unary_special_matches_cpu(name, dtype):
    fn, lo, hi, has_grad, _ = UNARY[name]
    if not _cpu_supports(fn, dtype):
        pytest.skip(f"CPU has no {dtype} kernel for {name}")
    x = (torch.rand(40, 9) * (hi - lo) + lo).to(dtype)
    torch_pjrt.reset_metrics()
    check(fn, x, grad=has_grad and dtype == torch.float32, rtol=1e-4 if dtype == torch.float32 else None, atol=1e-5)
    check(fn, x.t(), rtol=1e-4 if dtype == torch.float32 else None, atol=1e-5)  # non-contiguous
    assert torch_pjrt.metrics()["fallback_ops"] == {}


@pytest.mark.parametrize("name", sorted(set(UNARY) - {"digamma"}))  # elementwise.cc's digamma: NaN at +-0
def test_unary_special_edge_values(name):
    fn = UNARY[name][0]
    x = torch.tensor(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            2.09,
            -2.09,
            5.0,
            8.0,
            50.0,
            1e8,
            -30.0,
            float("inf"),
            float("-inf"),
            float("nan"),
            1e-6,
            -1e-6,
            0.999,
            1e-30,
        ]
    )
    torch_pjrt.reset_metrics()
    check(fn, x, rtol=1e-4, atol=1e-5)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_unary_special_out_and_int_inputs():
    torch_pjrt.reset_metrics()
    x = torch.rand(5, 4) * 6

    def i0_out(t):
        out = torch.empty_like(t)
        torch.i0(t, out=out)
        return out

    check(i0_out, x)
    check(lambda t: t.clone().i0_(), x)
    check(lambda t: special.bessel_j0(t, out=torch.empty_like(t)), x)
    check(special.i1, torch.arange(-4, 5))
    check(special.erfcx, torch.arange(-4, 5))
    assert torch_pjrt.metrics()["fallback_ops"] == {}


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_polygamma_matches_cpu(n, dtype):
    x = (torch.rand(30, 7) * 12 - 4).to(dtype)  # negative non-integers exercise reflection and the zeta loop
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    torch_pjrt.reset_metrics()
    check(lambda t: torch.polygamma(n, t), x, grad=dtype == torch.float32 and n < 4, **tol)
    check(lambda t: special.polygamma(n, t), x.t(), **tol)
    check(lambda t: t.clone().polygamma_(n), x, **tol)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_polygamma_poles_and_negative_order():
    x = torch.tensor([0.0, -1.0, -2.0, 1.0, 1e-3, 40.0, float("inf"), float("nan")])
    for n in range(4):
        check(lambda t, n=n: torch.polygamma(n, t), x, rtol=1e-4)
    with pytest.raises(RuntimeError, match="negative n"):
        torch.polygamma(-1, torch.ones(2, device="tpu"))


def test_zeta_matches_cpu():
    torch_pjrt.reset_metrics()
    x = torch.rand(8, 6) * 6 + 1.0
    q = torch.rand(8, 6) * 10 - 3
    check(special.zeta, x, q, rtol=1e-4, atol=1e-5)
    check(special.zeta, x[:, :1], q.t()[:6, :].t(), rtol=1e-4, atol=1e-5)  # broadcast, non-contiguous
    check(special.zeta, torch.tensor([1.0, 0.5, 2.0, 3.0, 2.5, 2.0]), torch.tensor([1.0, 1.0, -2.0, -1.5, -1.5, 0.0]))
    check(lambda q: special.zeta(2.0, q), q.abs() + 0.1, rtol=1e-4)
    check(lambda x: special.zeta(x, 2.0), x, rtol=1e-4)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


POLYNOMIALS = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_matches_cpu(name):
    fn = getattr(special, name)
    torch_pjrt.reset_metrics()
    # x inside and outside [-1, 1] and at the endpoints of both the plain and shifted forms;
    # degrees below and above the cos/sin shortcut thresholds, negative and fractional ones.
    # (no NaN x: ATen returns an uninitialised value for NaN x in most of these loops)
    x = torch.cat([torch.rand(60) * 2.4 - 1.2, torch.tensor([1.0, -1.0, 0.0, 0.5, 2.0])])
    n = torch.tensor([-2.0, 0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 9.0, 12.0, 2.7, 30.0])
    xs, ns = torch.broadcast_tensors(x[:, None], n[None, :])
    check(fn, xs.contiguous(), ns.contiguous(), rtol=1e-4, atol=1e-4)
    check(fn, x[:, None], n[None, :], rtol=1e-4, atol=1e-4)  # broadcast
    check(fn, xs.t(), ns.t(), rtol=1e-4, atol=1e-4)  # non-contiguous
    check(lambda t: fn(t, 3), x, rtol=1e-4, atol=1e-4)  # Python-number degree
    check(fn, x[:4], torch.tensor([4, 1, 0, 2]))  # integer degree tensor
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_hermite_degree_limit_and_out():
    x = torch.tensor([0.5, -0.3, 1.1])
    check(special.hermite_polynomial_h, x, torch.tensor([128.0, 129.0, float("inf")]))
    check(lambda a, b: special.legendre_polynomial_p(a, b, out=torch.empty_like(a)), x, torch.tensor([3.0, 4.0, 5.0]))


def _outcome(fn, device):
    try:
        result = fn(device)
        if device != "cpu":
            torch.tpu.synchronize()
        return result, None
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return None, e


def _same_outcome_as_cpu(fn):
    """Where CPU raises, tpu raises the same class; where CPU returns, tpu returns the same values."""
    expected, error = _outcome(fn, "cpu")
    actual, tpu_error = _outcome(fn, "tpu")
    if error is not None:
        assert isinstance(tpu_error, type(error)), f"CPU raised {error!r}, tpu {tpu_error!r}"
        return
    assert tpu_error is None, f"CPU returned, tpu raised {tpu_error!r}"
    rtol, atol = {torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3)}.get(expected.dtype, (1e-4, 1e-5))
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol, equal_nan=True)


# The dtypes CPU's special-function kernels dispatch over: float16/bfloat16 only for some, never complex; integer
# inputs promote to float32, except for igamma/igammac, which refuse them.
_SPECIAL_NAMES = sorted(UNARY) + ["zeta", "polygamma2", "igamma", "igammac", "xlog1py", "entr"] + POLYNOMIALS[::4]


@pytest.mark.parametrize(
    "name, dtype",
    [(n, d) for n in _SPECIAL_NAMES for d in (torch.float16, torch.complex64)]
    + [(n, torch.int32) for n in ("igamma", "igammac", "zeta", "polygamma2")],
)
def test_special_dtype_refusals_match_cpu(name, dtype):
    def fn(device):
        x = (torch.arange(1, 7, device=device) % 3 + 1).to(dtype)
        if name in UNARY:
            return UNARY[name][0](x)
        if name == "polygamma2":
            return torch.polygamma(2, x)
        if name == "entr":
            return special.entr(x)
        if name in ("igamma", "igammac"):
            return getattr(torch, name)(x, x)
        return getattr(special, name)(x, x)

    _same_outcome_as_cpu(fn)
