"""Unary and binary float math lowered through chlo/stablehlo, compared with CPU."""

import pytest
import torch

import torch_pjrt
from compare import check

UNARY = {
    "acos": (torch.acos, -0.99, 0.99),
    "acosh": (torch.acosh, 1.0, 5.0),
    "asin": (torch.asin, -0.99, 0.99),
    "asinh": (torch.asinh, -5.0, 5.0),
    "atan": (torch.atan, -5.0, 5.0),
    "atanh": (torch.atanh, -0.99, 0.99),
    "cosh": (torch.cosh, -4.0, 4.0),
    "sinh": (torch.sinh, -4.0, 4.0),
    "erfc": (torch.erfc, -3.0, 3.0),
    "erfinv": (torch.erfinv, -0.99, 0.99),
    "lgamma": (torch.lgamma, 0.1, 6.0),
    "digamma": (torch.digamma, 0.1, 6.0),
    "log2": (torch.log2, 0.01, 100.0),
    "log10": (torch.log10, 0.01, 100.0),
    "exp2": (torch.exp2, -8.0, 8.0),
    "sgn": (torch.sgn, -3.0, 3.0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unary_math_matches_cpu(name, dtype):
    fn, lo, hi = UNARY[name]
    x = (torch.rand(6, 5) * (hi - lo) + lo).to(dtype)
    torch_pjrt.reset_metrics()
    check(
        fn,
        x,
        grad=dtype == torch.float32 and name not in ("sgn", "digamma"),
        rtol=1e-4 if dtype == torch.float32 else None,
    )
    check(fn, x.t())  # non-contiguous
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_sgn_is_abs_backward_and_handles_zero():
    torch_pjrt.reset_metrics()
    x = torch.tensor([-2.0, 0.0, 3.0, -0.0])
    check(torch.sgn, x)
    check(lambda t: t.abs().sum(), torch.randn(7), grad=True)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_integer_inputs_promote_to_float():
    check(torch.log2, torch.tensor([1, 2, 8, 1024]))
    check(torch.exp2, torch.tensor([0, 3, -2]))


def test_atan2_broadcast_and_grad():
    torch_pjrt.reset_metrics()
    check(torch.atan2, torch.randn(4, 3), torch.randn(3), grad=True)
    check(torch.atan2, torch.randn(4, 3).to(torch.bfloat16), torch.randn(4, 3).to(torch.bfloat16))
    assert torch_pjrt.metrics()["fallback_ops"] == {}
