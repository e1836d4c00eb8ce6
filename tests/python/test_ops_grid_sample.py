"""Grid sampling (csrc/lowering/sampling.cc) compared with CPU PyTorch."""

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import assert_close, check

MODES_2D = ["bilinear", "nearest", "bicubic"]
PADDINGS = ["zeros", "border", "reflection"]


def _grid(*shape):
    # Coordinates past [-1, 1] exercise the padding modes.
    return torch.rand(*shape) * 2.6 - 1.3


@pytest.mark.parametrize("mode", MODES_2D)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_2d(mode, padding, align):
    x = torch.randn(2, 3, 5, 7)
    grid = _grid(2, 4, 6, 2)
    torch_pjrt.reset_metrics()
    check(F.grid_sample, x, grid, grad=True, mode=mode, padding_mode=padding, align_corners=align, rtol=1e-4, atol=1e-5)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_3d(mode, padding, align):
    x = torch.randn(2, 2, 3, 4, 5)
    grid = _grid(2, 3, 2, 4, 3)
    torch_pjrt.reset_metrics()
    check(F.grid_sample, x, grid, grad=True, mode=mode, padding_mode=padding, align_corners=align, rtol=1e-4, atol=1e-5)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_grid_sample_non_contiguous_and_bfloat16():
    x = torch.randn(2, 5, 7, 3).permute(0, 3, 1, 2)  # channels-last view
    grid = _grid(2, 2, 6, 4).permute(0, 2, 3, 1)[..., :2]
    check(F.grid_sample, x, grid, grad=True, align_corners=False, rtol=1e-4, atol=1e-5)
    # CPU's bfloat16 kernel rounds every intermediate step (up to ~0.1 off its own float32 result on these
    # inputs); ours computes in float32 and rounds once, so compare with CPU's float32 result rounded to bfloat16.
    xb, gb = x.bfloat16(), grid.bfloat16()
    for mode in MODES_2D:
        kw = dict(mode=mode, padding_mode="reflection", align_corners=True)
        expected = F.grid_sample(xb.float(), gb.float(), **kw).bfloat16()
        actual = F.grid_sample(xb.to("tpu"), gb.to("tpu"), **kw)
        assert actual.dtype == torch.bfloat16
        assert_close(actual, expected, rtol=1e-2, atol=1e-2)


def test_grid_sampler_direct_ops():
    x = torch.randn(1, 2, 4, 4)
    grid = _grid(1, 3, 3, 2)
    check(torch.grid_sampler_2d, x, grid, 0, 2, False)
    check(torch.grid_sampler, x, grid, 2, 1, True)
    x3 = torch.randn(1, 2, 3, 3, 3)
    check(torch.grid_sampler_3d, x3, _grid(1, 2, 2, 2, 3), 1, 0, True)


def test_grid_sample_errors_like_cpu():
    dev = "tpu"
    x = torch.randn(1, 1, 2, 2, 2, device=dev)
    grid = torch.zeros(1, 1, 1, 1, 3, device=dev)
    with pytest.raises(RuntimeError):
        F.grid_sample(x, grid, mode="bicubic", align_corners=False)


# igamma / igammac (csrc/lowering/special.cc) share this new test file with grid sampling.
def _igamma_inputs():
    a = torch.cat([torch.rand(60) * 5, torch.rand(60) * 60 + 0.5, torch.rand(40) * 500 + 150])
    x = torch.cat(
        [
            torch.rand(60) * 8,
            a[60:120] * (1 + (torch.rand(60) - 0.5) * 0.5),  # the asymptotic expansion near a
            a[120:] * (1 + (torch.rand(40) - 0.5) * 0.2),
        ]
    )
    edge_a = torch.tensor([0.0, 0.0, 1.0, float("inf"), float("inf"), 2.0, -1.0, 3.0, 0.3, 2.0])
    edge_x = torch.tensor([0.0, 1.0, 0.0, 3.0, float("inf"), float("inf"), 1.0, -2.0, 0.45, 0.9])
    return torch.cat([a, edge_a]), torch.cat([x, edge_x])


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_igamma_matches_cpu(fn, dtype):
    a, x = _igamma_inputs()
    a, x = a.to(dtype), x.to(dtype)
    torch_pjrt.reset_metrics()
    tol = 2e-5 if dtype == torch.float32 else 1e-12
    check(fn, a, x, rtol=tol, atol=1e-6 if dtype == torch.float32 else 1e-14)
    check(fn, a.reshape(10, 17).t(), x.reshape(10, 17).t(), rtol=tol, atol=1e-5)  # non-contiguous
    check(fn, a[:5].reshape(5, 1), x[:7], rtol=tol, atol=1e-5)  # broadcasting
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_igamma_bfloat16_inplace_and_out():
    a, x = _igamma_inputs()
    check(torch.igamma, a.bfloat16(), x.bfloat16())
    check(lambda u, v: u.igammac_(v), a.clone(), x)
    check(lambda u, v: torch.igamma(u, v, out=torch.empty_like(u)), a, x, rtol=2e-5, atol=1e-6)
