"""complex64 inputs to lowerings written for real dtypes, compared with CPU: the ops CPU refuses for
complex raise its message (they were silently wrong or crashed), the ones with a simple complex
formula match CPU natively, and the ones without a complex lowering take the CPU fallback."""

import pytest
import torch

import torch_pjrt
from compare import DEVICE, check

TOL = {"rtol": 1e-5, "atol": 1e-5}
NAN, INF = float("nan"), float("inf")


def cplx(*shape):
    return torch.randn(*shape, dtype=torch.complex64)


def special():
    """Finite values and non-finite parts (NaN, inf), as a non-contiguous view."""
    v = [1 + 2j, complex(NAN, 1), -3 - 1j, complex(INF, 0), complex(0.5, NAN), complex(-INF, 2), 0j, 2j]
    return torch.tensor(v + v, dtype=torch.complex64).reshape(2, 8).t()


def fallbacks():
    return torch_pjrt.metrics()["fallback_ops"]


# (name, fn, message CPU raises): ops whose CPU kernels refuse complex inputs.
REFUSED = [
    ("floor", torch.floor, "floor is not supported for complex inputs"),
    ("ceil", torch.ceil, "ceil is not supported for complex inputs"),
    ("trunc", torch.trunc, "trunc is not supported for complex inputs"),
    ("round", torch.round, "not implemented for 'ComplexFloat'"),
    ("round_decimals", lambda x: torch.round(x, decimals=1), "not implemented for 'ComplexFloat'"),
    ("frac", torch.frac, "not implemented for 'ComplexFloat'"),
    ("sign", torch.sign, "torch.sign is not intended to support complex numbers"),
    ("signbit", torch.signbit, "signbit is not implemented for complex tensors"),
    ("isposinf", torch.isposinf, "isposinf does not support complex inputs"),
    ("isneginf", torch.isneginf, "isneginf does not support complex inputs"),
    ("clamp", lambda x: torch.clamp(x, 0, 1), "clamp is not supported for complex types"),
    ("clamp_min", lambda x: torch.clamp_min(x, 0), "clamp is not supported for complex types"),
    ("clamp_max", lambda x: torch.clamp_max(x, 0), "clamp is not supported for complex types"),
    ("relu", torch.relu, "clamp is not supported for complex types"),
    ("lt", lambda x: x < x.flip(0), "\"lt_cpu\" not implemented for 'ComplexFloat'"),
    ("le", lambda x: x <= x.flip(0), "\"le_cpu\" not implemented for 'ComplexFloat'"),
    ("gt", lambda x: x > x.flip(0), "\"gt_cpu\" not implemented for 'ComplexFloat'"),
    ("ge", lambda x: x >= x.flip(0), "\"ge_cpu\" not implemented for 'ComplexFloat'"),
    ("maximum", lambda x: torch.maximum(x, x.flip(0)), "maximum not implemented for complex tensors"),
    ("minimum", lambda x: torch.minimum(x, x.flip(0)), "minimum not implemented for complex tensors"),
    ("fmax", lambda x: torch.fmax(x, x.flip(0)), "fmax not implemented for complex tensors"),
    ("fmin", lambda x: torch.fmin(x, x.flip(0)), "fmin not implemented for complex tensors"),
    ("remainder", lambda x: torch.remainder(x, x.flip(0)), '"remainder_cpu" not implemented'),
    ("fmod", lambda x: torch.fmod(x, x.flip(0)), '"fmod_cpu" not implemented'),
    ("floor_divide", lambda x: torch.floor_divide(x, x.flip(0)), '"div_floor_cpu" not implemented'),
    ("div_floor", lambda x: torch.div(x, x.flip(0), rounding_mode="floor"), '"div_floor_cpu" not implemented'),
    ("div_trunc", lambda x: torch.div(x, x.flip(0), rounding_mode="trunc"), '"div_trunc_cpu" not implemented'),
    ("copysign", lambda x: torch.copysign(x, x.flip(0)), '"copysign_cpu" not implemented'),
    ("atan2", lambda x: torch.atan2(x, x.flip(0)), '"atan2_cpu" not implemented'),
    ("hypot", lambda x: torch.hypot(x, x.flip(0)), '"hypot_cpu" not implemented'),
    ("nextafter", lambda x: torch.nextafter(x, x.flip(0)), '"nextafter_cpu" not implemented'),
    ("xlogy", lambda x: torch.xlogy(x, x.flip(0)), '"xlogy_cpu" not implemented'),
    ("heaviside", lambda x: torch.heaviside(x, x.flip(0)), "heaviside is not yet implemented for complex tensors"),
    ("erf", torch.erf, '"erf_vml_cpu" not implemented'),
    ("erfinv", torch.erfinv, '"erfinv_vml_cpu" not implemented'),
    ("lgamma", torch.lgamma, '"lgamma_vml_cpu" not implemented'),
    ("digamma", torch.digamma, '"digamma" not implemented'),
    ("logit", torch.logit, '"logit_cpu" not implemented'),
    ("gelu", torch.nn.functional.gelu, '"GeluKernelImpl" not implemented'),
    ("isin", lambda x: torch.isin(x, x.flip(0)), "Unsupported input type encountered for isin\\(\\): ComplexFloat"),
    ("amax", torch.amax, '"max_values_cpu" not implemented'),
    ("amin", torch.amin, '"min_values_cpu" not implemented'),
    ("max", torch.max, '"max_all" not implemented'),
    ("min", torch.min, '"min_all" not implemented'),
    ("max_dim", lambda x: torch.max(x, 0), "max\\(\\): does not support complex input"),
    ("argmax", torch.argmax, "argmax\\(\\): does not support complex input"),
    ("argmin", torch.argmin, "argmin\\(\\): does not support complex input"),
    ("aminmax", torch.aminmax, '"aminmax_cpu" not implemented'),
    ("cummax", lambda x: torch.cummax(x, 0), '"cummax_cpu" not implemented'),
    ("nansum", torch.nansum, "nansum on CPU does not support complex inputs"),
]


@pytest.mark.parametrize("name,fn,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_like_cpu(name, fn, message):
    x = cplx(4, 3)
    with pytest.raises(Exception, match=message):
        fn(x)
    torch_pjrt.reset_metrics()
    with pytest.raises(Exception, match=message):
        fn(x.to(DEVICE))
        torch_pjrt.synchronize()
    assert fallbacks() == {}


# Ops with a complex formula of their own (and ops that gave wrong non-finite parts).
NATIVE = [
    ("nan_to_num", torch.nan_to_num),
    ("nan_to_num_args", lambda x: torch.nan_to_num(x, nan=1.5, posinf=2.0, neginf=-3.0)),
    ("abs", torch.abs),
    ("sgn", torch.sgn),
    ("log2", torch.log2),
    ("log10", torch.log10),
    ("exp2", torch.exp2),
    ("eq", lambda x: x == x.flip(0)),
    ("ne", lambda x: x != x.flip(0)),
    ("isnan", torch.isnan),
    ("isinf", torch.isinf),
    ("isfinite", torch.isfinite),
    ("vector_norm", lambda x: torch.linalg.vector_norm(x)),
    ("vector_norm_inf_dim", lambda x: torch.linalg.vector_norm(x, float("inf"), dim=0, keepdim=True)),
    ("vector_norm_1", lambda x: torch.linalg.vector_norm(x, 1, dim=1)),
    ("norm", lambda x: torch.norm(x, 3)),
]


@pytest.mark.parametrize("name,fn", NATIVE, ids=[r[0] for r in NATIVE])
def test_native_with_non_finite_parts(name, fn):
    torch_pjrt.reset_metrics()
    check(fn, special(), **TOL)
    check(fn, cplx(3, 4).t(), **TOL)
    assert fallbacks() == {}


def test_nan_to_num_in_place():
    torch_pjrt.reset_metrics()
    check(lambda x: x.clone().nan_to_num_(), special(), **TOL)
    assert fallbacks() == {}


def test_addcdiv_complex():
    torch_pjrt.reset_metrics()
    check(lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), cplx(3, 4), cplx(3, 4), cplx(4).expand(3, 4), **TOL)
    assert fallbacks() == {}


VAR_STD = [
    ("var", lambda x: torch.var(x)),
    ("var_dim", lambda x: torch.var(x, 1, keepdim=True)),
    ("var_correction0", lambda x: torch.var(x, 0, correction=0)),
    ("std", lambda x: torch.std(x, 0)),
    ("var_mean", lambda x: torch.var_mean(x, 1)),
    ("std_mean", lambda x: torch.std_mean(x, (0, 1), correction=2)),
]


@pytest.mark.parametrize("name,fn", VAR_STD, ids=[r[0] for r in VAR_STD])
def test_var_std_complex_is_real(name, fn):
    torch_pjrt.reset_metrics()
    out = check(fn, cplx(5, 6).t(), **TOL)
    first = out[0] if isinstance(out, tuple) else out
    assert first.dtype == torch.float32
    assert fallbacks() == {}


@pytest.mark.parametrize(
    "fn",
    [torch.tanh, torch.sigmoid, lambda x: torch.linalg.vector_norm(x, float("inf"), dim=1)],
    ids=["tanh", "sigmoid", "vector_norm_inf"],
)
def test_complex_backward_conjugates(fn):
    """tanh_backward / sigmoid_backward multiply by the conjugate derivative on complex inputs; the
    inf-norm backward compares |x| with the (now native) forward result."""
    x = cplx(3, 4)
    y = fn(x)
    w = torch.randn(y.shape, dtype=y.dtype)  # real for a norm
    xc = x.clone().requires_grad_(True)
    fn(xc).backward(w)
    torch_pjrt.reset_metrics()
    xd = x.to(DEVICE).requires_grad_(True)
    fn(xd).backward(w.to(DEVICE))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **TOL)
    assert fallbacks() == {}


# Ops CPU computes on complex inputs that have no complex lowering here: the CPU fallback.
DECLINED = [
    ("logaddexp", lambda x: torch.logaddexp(x, x.flip(0)), "aten::logaddexp"),
    ("logsumexp", lambda x: torch.logsumexp(x, 0), "aten::logsumexp"),
    ("lerp", lambda x: torch.lerp(x, x.flip(0), 0.25), "aten::lerp.Scalar"),
]


@pytest.mark.parametrize("name,fn,op", DECLINED, ids=[r[0] for r in DECLINED])
def test_declined_take_cpu_fallback(name, fn, op):
    torch_pjrt.reset_metrics()
    check(fn, cplx(4, 3), **TOL)
    assert fallbacks().get(op, 0) >= 1


def test_real_dtypes_unchanged():
    """The complex checks leave real inputs lowered natively."""
    torch_pjrt.reset_metrics()
    x = torch.randn(4, 5)
    check(torch.floor, x, **TOL)
    check(torch.sign, x, **TOL)
    check(lambda a: torch.clamp(a, -0.5, 0.5), x, **TOL)
    check(lambda a: torch.var(a, 1), x, **TOL)
    check(torch.log2, x.abs(), **TOL)
    check(lambda a: torch.remainder(a, 0.7), x, **TOL)
    check(torch.var, x.to(torch.bfloat16))
    assert fallbacks() == {}
