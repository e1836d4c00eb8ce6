"""Storage and view model: writes through any view are seen by every alias, as on CPU."""

import pytest
import torch

from compare import to_device

TPU = torch.device("tpu")


def same(fn):
    """Runs fn(base) on a CPU tensor and on its tpu copy; returns both bases for comparison."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    dev = base.to(TPU)
    fn(base)
    fn(dev)
    torch.testing.assert_close(dev.cpu(), base)


def test_inplace_on_slice_is_seen_by_base():
    same(lambda b: b[1:3, ::2].add_(100))


def test_inplace_on_transposed_view():
    same(lambda b: b.t()[2].mul_(-1))


def test_copy_into_slice():
    same(lambda b: b[:, 1:4].copy_(torch.ones(4, 3, device=b.device) * 7))


def test_setitem_scalar_and_tensor():
    def fn(b):
        b[0] = 5
        b[:, -1] = torch.arange(4.0, device=b.device)
        b[2, 2] = -3.5

    same(fn)


def test_index_put_through_view():
    def fn(b):
        v = b[1:]
        v[torch.tensor([0, 2], device=b.device), torch.tensor([1, 3], device=b.device)] = 42.0

    same(fn)


def test_out_variant_writes_into_view():
    def fn(b):
        torch.add(b[0], b[1], out=b[3])

    same(fn)


def test_aliases_share_storage_after_write():
    x = torch.zeros(6, device=TPU)
    a = x.view(2, 3)
    b = x[2:]
    a[0, 2] = 1.0
    assert b[0].item() == 1.0
    assert x.data_ptr() == a.data_ptr()


def test_expand_and_as_strided_reads():
    x = torch.arange(12.0)
    d = x.to(TPU)
    torch.testing.assert_close(d[:3].expand(4, 3).cpu(), x[:3].expand(4, 3))
    torch.testing.assert_close(d.as_strided((3, 3), (1, 2), 1).cpu(), x.as_strided((3, 3), (1, 2), 1))
    torch.testing.assert_close(d.unfold(0, 4, 2).cpu(), x.unfold(0, 4, 2))
    torch.testing.assert_close(torch.diagonal(d.view(3, 4)).cpu(), torch.diagonal(x.view(3, 4)))


def test_view_as_other_dtype_reinterprets_bytes():
    x = torch.tensor([1.0, -2.0, 0.5])
    d = x.to(TPU)
    assert torch.equal(d.view(torch.int32).cpu(), x.view(torch.int32))


def test_noncontiguous_roundtrip_to_cpu():
    x = torch.randn(5, 7)[1:, ::3].t()
    d = to_device(x, TPU)
    assert d.stride() == x.stride()
    torch.testing.assert_close(d.cpu(), x)
    torch.testing.assert_close(d.contiguous().cpu(), x.contiguous())


def test_resize_keeps_data():
    d = torch.arange(4.0, device=TPU)
    d.resize_(8)
    assert d.shape == (8,)
    torch.testing.assert_close(d[:4].cpu(), torch.arange(4.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool])
def test_dtype_roundtrip(dtype):
    x = (torch.randn(3, 5) * 10).to(dtype)
    torch.testing.assert_close(x.to(TPU).cpu(), x)
    assert x.to(TPU).to(torch.float32).cpu().dtype == torch.float32


def test_partial_writes_into_never_written_and_written_storages():
    """A storage never written reads as zeros inside the program (no upload); one written before keeps its values.
    The same op sequence meets both kinds, never-written first, so a program made for the first must not serve the
    second."""
    a = torch.arange(4, dtype=torch.float32) + 1
    fresh = torch.empty(8, device=TPU)
    fresh[:4].copy_(a.to(TPU))
    fresh.zero_()[4:].add_(3)
    torch.testing.assert_close(fresh.cpu(), torch.tensor([0, 0, 0, 0, 3, 3, 3, 3.0]))
    for written_by in ("upload", "program"):
        full = torch.full((8,), 5.0)
        if written_by == "upload":
            written = torch.empty(8, device=TPU)
            written.copy_(full)
        else:
            written = torch.ones(8, device=TPU) * 5
        written[:4].copy_(a.to(TPU))
        expected = full.clone()
        expected[:4] = a
        torch.testing.assert_close(written.cpu(), expected)
        written[4:].add_(written[:4])
        expected[4:] += expected[:4]
        torch.testing.assert_close(written.cpu(), expected)
