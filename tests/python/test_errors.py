"""Bad input raises a clear Python error, and the next op still works."""

import pytest
import torch

import torch_pjrt

TPU = torch.device("tpu")


def still_works():
    x = torch.arange(3.0, device=TPU)
    assert (x + 1).cpu().tolist() == [1.0, 2.0, 3.0]


def test_mismatched_shapes():
    with pytest.raises(RuntimeError, match="broadcast"):
        torch.ones(3, device=TPU) + torch.ones(4, device=TPU)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.ones(2, 3, device=TPU) @ torch.ones(4, 5, device=TPU)
    still_works()


def test_index_out_of_range_raises_index_error_at_sync():
    x = torch.randn(4, 3, device=TPU)
    idx = torch.tensor([0, 7], device=TPU)
    with pytest.raises(IndexError, match="index_select"):
        torch.index_select(x, 0, idx).cpu()
    still_works()


def test_index_out_of_range_raises_at_once_in_debug_mode():
    x = torch.randn(4, 3, device=TPU)
    with torch_pjrt.eager_mode("debug"):
        with pytest.raises(IndexError, match=r"test_errors.py:\d+"):
            torch.index_select(x, 0, torch.tensor([5], device=TPU))
    still_works()


def test_dim_out_of_range_is_index_error():
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.ones(2, 3, device=TPU).sum(dim=5)
    still_works()


def test_mixing_cpu_and_tpu_tensors():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device=TPU) + torch.ones(3)
    # A zero-dim CPU tensor mixes as on CUDA.
    assert (torch.ones(3, device=TPU) + torch.tensor(2.0)).cpu().tolist() == [3.0, 3.0, 3.0]
    still_works()


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="not supported on the tpu device"):
        torch.ones(2, dtype=torch.complex32).to(TPU) + 1  # complex64 and complex128 are supported
    still_works()


def test_inplace_result_cannot_be_cast():
    for device in ("cpu", TPU):  # an empty tensor is refused too, as on CPU
        for x in (torch.ones(3, dtype=torch.int64, device=device), torch.ones(0, 2, dtype=torch.int64, device=device)):
            with pytest.raises(RuntimeError, match="can't be cast"):
                x.add_(1.5)
            with pytest.raises(RuntimeError, match="can't be cast"):
                x.tan_()
    still_works()


def test_complex_results_take_cpu_dtypes_and_complex_half_is_refused():
    """A float tensor meeting a complex scalar becomes complex at its own width, as torch.result_type says."""
    for dtype, other in [(torch.float32, torch.tensor(2j, dtype=torch.complex128)), (torch.bfloat16, 2j)]:
        x = torch.ones(3, dtype=dtype)
        other_tpu = other.to(TPU) if isinstance(other, torch.Tensor) else other
        result = x.to(TPU) * other_tpu
        assert result.dtype == (x * other).dtype
        assert torch.equal(result.cpu(), x * other)
    with pytest.raises(NotImplementedError, match="ComplexHalf is not supported on the tpu device"):
        torch.ones(3, dtype=torch.float16, device=TPU) * (1 - 2j)  # CPU gives complex32, which the device lacks
    still_works()


def test_inplace_abs_of_complex_is_refused_as_on_cpu():
    for device in ("cpu", TPU):
        z = torch.tensor([3 + 4j, -1j], device=device)
        with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors"):
            z.abs_()
        with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors"):
            torch._foreach_abs_([torch.ones(2, device=device), z])
        assert z.cpu().tolist() == [3 + 4j, -1j]  # nothing written
    still_works()


def test_fallback_can_be_turned_into_an_error(monkeypatch):
    # linalg.eigvals (aten::_linalg_eigvals): an op with no lowering
    a = torch.tensor([[3.0, 1.0], [1.0, 2.0]])
    x = a.to(TPU)
    monkeypatch.setenv("TORCH_PJRT_FALLBACK", "error")
    with pytest.raises(NotImplementedError, match="TORCH_PJRT_FALLBACK=error"):
        torch.linalg.eigvals(x)
    monkeypatch.delenv("TORCH_PJRT_FALLBACK")
    torch_pjrt.reset_metrics()
    torch.testing.assert_close(torch.linalg.eigvals(x).cpu(), torch.linalg.eigvals(a))
    assert torch_pjrt.metrics()["fallback_ops"] == {"aten::_linalg_eigvals": 1}
    still_works()


def test_out_of_memory_raises_and_process_survives():
    with pytest.raises(torch.OutOfMemoryError, match=r"out of memory in .*tried to allocate 1048576\.00 MiB"):
        x = torch.zeros(2**38, device=TPU)  # 1 TiB
        x.add_(1)
        x[0].item()
    still_works()


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_out_of_memory_in_a_region_keeps_the_other_results(mode):
    """Fused mode's region holds calls before and after the one that cannot allocate: they keep their results (as in
    strict mode, which runs them alone), an in-place update of a live parameter is not lost, and what the failed call
    should have made raises when read instead of reading as zeros."""
    torch.manual_seed(0)
    w = torch.randn(64, 64, device=TPU)
    w_before = w.cpu()
    with torch_pjrt.eager_mode(mode):
        a = torch.arange(10.0, device=TPU)
        b = a * 2  # before the failing call, in the same region
        w.add_(torch.ones(64, 64, device=TPU))  # an in-place update of a live tensor, same region
        big = None
        with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
            big = torch.zeros(2**38, device=TPU)  # 1 TiB: runs alone in strict mode, joins the region in fused
            c = b + 1  # after it, independent of it
            big.sum().item()
        torch.testing.assert_close(a.cpu(), torch.arange(10.0))
        torch.testing.assert_close(b.cpu(), torch.arange(10.0) * 2)
        torch.testing.assert_close(w.cpu(), w_before + 1)
        assert (big is not None) == (mode == "fused")  # fused mode handed it out before its program ran
        if big is not None:
            torch.testing.assert_close(c.cpu(), torch.arange(10.0) * 2 + 1)
            with pytest.raises(torch.OutOfMemoryError):
                big[:4].cpu()
            del big
        still_works()


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_results_larger_than_the_device_raise_at_the_op(mode):
    """A program whose results cannot fit the device (1 TiB here; the CPU plugin's device is the host's memory) is
    refused before it runs, as out of memory at its op, instead of failing later at a sync point."""
    with torch_pjrt.eager_mode(mode):
        row = torch.ones(2**20, device=TPU)
        with pytest.raises(torch.OutOfMemoryError, match=r"aten::mul"):
            row.expand(2**18, 2**20) * 2
        torch.testing.assert_close(row.sum().cpu(), torch.tensor(2.0**20))
        still_works()


def _bad_index_cases(dev):
    import torch.nn.functional as F

    def t(v):
        return torch.tensor(v, device=dev)

    w = torch.arange(12.0, device=dev).reshape(3, 4)
    x = torch.arange(6.0, device=dev).reshape(2, 3)
    return {
        "index_add_2d": lambda: w.clone().index_add_(0, t([5]), torch.ones(1, 4, device=dev)),
        "index_add_1d": lambda: w[0].clone().index_add_(0, t([5]), torch.ones(1, device=dev)),
        "embedding_bag_index": lambda: F.embedding_bag(t([0, 9]), w, t([0])),
        "embedding_bag_first_offset": lambda: F.embedding_bag(t([0, 1]), w, t([1])),
        "embedding_bag_last_offset": lambda: F.embedding_bag(t([0, 1]), w, t([0, 5])),
        "searchsorted_sorter": lambda: torch.searchsorted(t([1.0, 2.0, 3.0]), t([2.0]), sorter=t([0, 1, 5])),
        "multi_margin_loss": lambda: F.multi_margin_loss(x, t([0, 7])),
        "multilabel_margin_loss": lambda: F.multilabel_margin_loss(x, t([[0, 7, -1], [1, -1, 0]])),
        "nll_loss": lambda: F.nll_loss(x, t([0, 7])),
        "index_select": lambda: w.index_select(0, t([5])),
    }


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name", list(_bad_index_cases("cpu")))
def test_bad_index_errors_have_cpus_class(mode, name):
    """Out-of-range indices found at run time raise the class CPU raises for the same call (IndexError for some ops,
    RuntimeError for others: `except RuntimeError` code must keep working)."""
    with pytest.raises(Exception) as on_cpu:
        _bad_index_cases("cpu")[name]()
    with torch_pjrt.eager_mode(mode):
        with pytest.raises(Exception) as on_tpu:
            _bad_index_cases(TPU)[name]()
            torch_pjrt.synchronize()
    assert type(on_tpu.value) is type(on_cpu.value), on_tpu.value
    still_works()


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_runtime_check_messages_name_their_op_once(mode):
    a = torch.arange(4.0, device=TPU)
    with torch_pjrt.eager_mode(mode):
        with pytest.raises(IndexError) as bad_index:
            a.index_select(0, torch.tensor([9], device=TPU))
            torch_pjrt.synchronize()
        with pytest.raises(ZeroDivisionError) as by_zero:
            a.long() // torch.zeros(4, dtype=torch.long, device=TPU)
            torch_pjrt.synchronize()
    for e, op in ((bad_index.value, "aten::index_select"), (by_zero.value, "aten::floor_divide")):
        assert str(e).count(op) == 1, str(e)
        assert str(e).count(" (at ") == (0 if mode == "strict" else 1), str(e)
    still_works()


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("op", ["remainder", "floor_divide", "fmod", "div_trunc"])
def test_empty_integer_division_divides_nothing(mode, op):
    """An empty result divides no element: a zero in the broadcast divisor raises nothing, as on CPU."""
    fns = {
        "remainder": torch.remainder,
        "floor_divide": torch.floor_divide,
        "fmod": torch.fmod,
        "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    }
    a = torch.ones(0, 3, dtype=torch.int64)
    b = torch.tensor([[1, 0, 2]])
    expected = fns[op](a, b)
    with torch_pjrt.eager_mode(mode):
        got = fns[op](a.to(TPU), b.to(TPU))
        assert got.cpu().shape == expected.shape
        torch_pjrt.synchronize()
        with pytest.raises(ZeroDivisionError):  # a non-empty one still checks
            fns[op](torch.ones(2, 3, dtype=torch.int64, device=TPU), b.to(TPU))
            torch_pjrt.synchronize()
    still_works()
