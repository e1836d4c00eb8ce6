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
