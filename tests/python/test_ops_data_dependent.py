"""Data-dependent shapes (csrc/lowering/data_dependent.cc and the glue's sync points) against CPU PyTorch.

nonzero, masked_select and unique compile one program per input shape that
returns padded results plus a count; the glue reads the count and narrows.
Bool/uint8 mask indexing expands to nonzero() in the glue, as on CPU.
equal returns a Python bool. Every case runs on CPU and on tpu and compares.
"""

import contextlib

import pytest
import torch

import torch_pjrt
from compare import DEVICE, assert_close, check


@contextlib.contextmanager
def lowered():
    """Asserts the body ran without the CPU fallback."""
    torch_pjrt.reset_metrics()
    yield
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def sparse(shape, dtype=torch.float32, p=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    x[torch.rand(shape, generator=g) < p] = 0
    return x.to(dtype)


def mask_of(shape, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) < 0.5


# ---- nonzero, argwhere, nonzero_static


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_nonzero(dtype):
    with lowered():
        check(torch.nonzero, sparse((4, 5), dtype))
        check(torch.nonzero, sparse((6, 3), dtype).t())  # non-contiguous
        check(torch.nonzero, sparse((2, 3, 4), dtype))
        check(lambda x: torch.nonzero(x, as_tuple=True), sparse((4, 5), dtype))
        check(torch.argwhere, sparse((4, 5), dtype))


def test_nonzero_edge_cases():
    with lowered():
        check(torch.nonzero, torch.tensor(3.0))
        check(torch.nonzero, torch.tensor(0.0))
        check(torch.nonzero, torch.zeros(0, 3))
        check(torch.nonzero, torch.zeros(3, 4))
        check(torch.nonzero, torch.tensor([float("nan"), 0.0, 1.0]))


def test_nonzero_out():
    x = sparse((4, 5))
    out_cpu = torch.empty(0, dtype=torch.long)
    out_dev = torch.empty(0, dtype=torch.long, device=DEVICE)
    with lowered():
        torch.nonzero(x, out=out_cpu)
        torch.nonzero(x.to(DEVICE), out=out_dev)
    assert_close(out_dev, out_cpu)


def test_nonzero_compiles_once_per_shape():
    # one program per input shape: a new count neither recompiles nonzero nor
    # the read of its narrowed result to the host
    torch.nonzero(sparse((7, 3), seed=5).to(DEVICE)).cpu()
    before = torch_pjrt.metrics()["compiles"]
    for seed in range(6, 10):
        x = sparse((7, 3), seed=seed)
        assert_close(torch.nonzero(x.to(DEVICE)), torch.nonzero(x))
    assert torch_pjrt.metrics()["compiles"] == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_nonzero_static(dtype):
    x = sparse((4, 5), dtype)
    with lowered():
        for size in (0, 3, 10, 25):
            check(lambda t, s=size: torch.nonzero_static(t, size=s), x)
            check(lambda t, s=size: torch.nonzero_static(t, size=s, fill_value=7), x.t())


# ---- masked_select, masked_scatter


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masked_select(dtype):
    x = torch.randn(4, 5).to(dtype)
    with lowered():
        check(torch.masked_select, x, mask_of((4, 5)), grad=True)
        check(torch.masked_select, x.t(), mask_of((5, 4)), grad=True)
        check(torch.masked_select, x, mask_of((5,)), grad=True)  # mask broadcasts
        check(torch.masked_select, torch.randn(5).to(dtype), mask_of((3, 5)), grad=True)  # self broadcasts
        check(torch.masked_select, x, torch.zeros(4, 5, dtype=torch.bool))


def test_masked_select_out():
    x, m = torch.randn(4, 5), mask_of((4, 5))
    out = torch.empty(0, device=DEVICE)
    with lowered():
        torch.masked_select(x.to(DEVICE), m.to(DEVICE), out=out)
    assert_close(out, torch.masked_select(x, m))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_masked_scatter(dtype):
    x = torch.randn(4, 5).to(dtype) if dtype.is_floating_point else torch.randint(-5, 5, (4, 5))
    src = torch.randn(6, 5).to(dtype) if dtype.is_floating_point else torch.randint(-5, 5, (6, 5))
    grad = dtype.is_floating_point
    with lowered():
        check(torch.masked_scatter, x, mask_of((4, 5)), src, grad=grad)
        check(torch.masked_scatter, x.t(), mask_of((5, 4)), src, grad=grad)
        check(torch.masked_scatter, x, mask_of((5,)), src, grad=grad)
        check(lambda a, m, s: a.clone().masked_scatter_(m, s), x, mask_of((4, 5)), src)


def test_masked_scatter_short_source_raises():
    x = torch.zeros(4, device=DEVICE)
    m = torch.ones(4, dtype=torch.bool, device=DEVICE)
    with pytest.raises(Exception, match="Number of elements of source < number of ones in mask"):
        torch.masked_scatter(x, m, torch.ones(2, device=DEVICE)).cpu()


def test_combinations():
    with lowered():
        check(torch.combinations, torch.randn(5), grad=True)
        check(lambda t: torch.combinations(t, r=3, with_replacement=True), torch.randn(4), grad=True)


# ---- mask indexing


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_getitem_bool_mask(dtype):
    x = torch.randn(4, 5, 3).to(dtype)
    with lowered():
        check(lambda t, m: t[m], x, mask_of((4,)), grad=True)
        check(lambda t, m: t[m], x, mask_of((4, 5)), grad=True)
        check(lambda t, m: t[m], x, mask_of((4, 5, 3)), grad=True)
        check(lambda t, m: t[:, m], x, mask_of((5,)), grad=True)
        check(lambda t, m: t[m, 1:], x.transpose(0, 1), mask_of((5,)), grad=True)  # non-contiguous
        two = torch.tensor([True, False, True, False])  # two true elements pair with a long index of 2
        check(lambda t, m, i: t[m, i], x, two, torch.tensor([2, 0]), grad=True)


def test_getitem_uint8_mask():
    x = torch.randn(4, 5)
    m = mask_of((4, 5)).to(torch.uint8)
    with lowered(), pytest.warns(UserWarning):
        check(lambda t, k: t[k], x, m)


def test_getitem_mask_shape_mismatch_raises():
    x = torch.randn(4, 5)
    with pytest.raises(IndexError, match="The shape of the mask"):
        x[torch.ones(3, dtype=torch.bool)]
    with pytest.raises(IndexError, match="The shape of the mask"):
        x.to(DEVICE)[torch.ones(3, dtype=torch.bool, device=DEVICE)]


def test_index_put_bool_mask():
    x = torch.randn(4, 5)
    m = mask_of((4, 5))
    k = int(m.sum())
    with lowered():
        # values per true element: a sync point (nonzero), as on CPU
        check(lambda t, mm, v: t.index_put((mm,), v), x, m, torch.randn(k), grad=True)
        check(lambda t, mm, v: t.index_put((mm,), v, accumulate=True), x, m, torch.randn(k), grad=True)
        check(lambda t, mm, v: t.clone().index_put_((mm,), v), x, m, torch.randn(k))
        # a scalar value needs no count
        check(lambda t, mm: t.clone().index_put_((mm,), torch.tensor(2.5).to(t.device)), x, m)

        def setitem(t, mm, v):
            t = t.clone()
            t[mm] = v
            return t

        check(setitem, x, mask_of((4,)), torch.randn(int(mask_of((4,)).sum()), 5))


# ---- gather with an empty uint8 index, masked_fill broadcasting


def test_gather_empty_uint8_index():
    with lowered():
        check(lambda t, i: torch.gather(t, 0, i), torch.randn(5), torch.tensor([], dtype=torch.uint8), grad=True)
        check(lambda t, i: torch.gather(t, 0, i), torch.randn(5), torch.zeros(2, 0, dtype=torch.uint8))


def test_masked_fill_broadcasts_self():
    x = torch.randn(5)
    m = mask_of((5, 5))
    with lowered():
        check(lambda t, mm: torch.masked_fill(t, mm, 1.5), x, m, grad=True)
        check(lambda t, mm: torch.masked_fill(t, mm, torch.tensor(-2.0).to(t.device)), x, m)
    with pytest.raises(RuntimeError, match=r"output with shape \[5\] doesn't match the broadcast shape \[5, 5\]"):
        x.to(DEVICE).masked_fill_(m.to(DEVICE), 1.0)


# ---- equal (a Python bool)


def test_equal():
    a = torch.randn(3, 4)
    with lowered():
        assert torch.equal(a.to(DEVICE), a.clone().to(DEVICE)) is True
        b = a.clone()
        b[1, 2] += 1
        assert torch.equal(a.to(DEVICE), b.to(DEVICE)) is False
        assert torch.equal(a.to(DEVICE), a.t().contiguous().to(DEVICE)) is False  # other shape
        assert torch.equal(a.t().to(DEVICE), a.t().contiguous().to(DEVICE)) is True  # non-contiguous
        ints = torch.arange(4)
        assert torch.equal(ints.to(DEVICE), ints.float().to(DEVICE)) == torch.equal(ints, ints.float())
        nan = torch.tensor([float("nan")])
        assert torch.equal(nan.to(DEVICE), nan.to(DEVICE)) == torch.equal(nan, nan)
        assert torch.equal(a.bfloat16().to(DEVICE), a.bfloat16().to(DEVICE)) is True


def test_corrcoef_cov():
    x = torch.randn(3, 6)
    with lowered():
        check(torch.corrcoef, x, grad=True)
        check(torch.cov, x, grad=True)
        check(lambda t, w: torch.cov(t, fweights=w), x, torch.tensor([1, 2, 1, 3, 1, 1]))


# ---- unique, unique_consecutive


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_unique(dtype):
    x = torch.randint(0, 5, (4, 6)).to(dtype)
    with lowered():
        for sorted_ in (True, False):
            check(lambda t, s=sorted_: torch.unique(t, sorted=s), x)
            check(lambda t, s=sorted_: torch.unique(t, sorted=s, return_inverse=True, return_counts=True), x.t())
        check(lambda t: torch.unique(t, return_counts=True), x)
        check(lambda t: torch.unique(t, dim=0, return_inverse=True, return_counts=True), x[[0, 1, 0, 2]])
        check(lambda t: torch.unique(t, dim=1, return_inverse=True, return_counts=True), x[:, [3, 1, 3, 0, 1]])
        check(torch.unique, torch.zeros(0, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_unique_consecutive(dtype):
    x = torch.tensor([1, 1, 2, 2, 3, 1, 1, 2]).to(dtype)
    rows = torch.tensor([[1, 2], [1, 2], [0, 5], [1, 2], [1, 2]]).to(dtype)
    with lowered():
        check(torch.unique_consecutive, x)
        check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), x.view(2, 4).t())
        check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=0), rows)
        check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=1), rows.t())


# ---- repeat_interleave, bincount, prod backward


def test_repeat_interleave():
    reps = torch.tensor([2, 0, 3, 1])
    with lowered():
        check(torch.repeat_interleave, reps)
        check(torch.repeat_interleave, reps.int())
        check(lambda r: torch.repeat_interleave(r, output_size=6), reps)
        check(lambda t, r: torch.repeat_interleave(t, r, dim=0), torch.randn(4, 3), reps, grad=True)
        check(lambda t, r: torch.repeat_interleave(t, r, dim=1), torch.randn(3, 4).bfloat16(), reps)
        check(torch.repeat_interleave, torch.zeros(0, dtype=torch.long))


def test_bincount():
    x = torch.tensor([1, 1, 3, 0, 7, 1])
    with lowered():
        check(torch.bincount, x)
        check(lambda t: torch.bincount(t, minlength=12), x)
        check(lambda t, w: torch.bincount(t, weights=w), x, torch.randn(6))
        check(lambda t, w: torch.bincount(t, weights=w), x, torch.randn(6).double())
        check(torch.bincount, torch.zeros(0, dtype=torch.long))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -1], device=DEVICE))


def test_prod_backward_with_zeros():
    x = torch.tensor([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.0, 2.0, -1.0]])
    with lowered():
        check(torch.prod, x, grad=True)
        check(lambda t: torch.prod(t, dim=1), x, grad=True)
        check(lambda t: torch.prod(t, dim=0), x.t(), grad=True)


# ---- sync points and modes


def test_debug_mode():
    x = sparse((4, 5))
    m = mask_of((4, 5))
    with torch_pjrt.eager_mode("debug"):
        assert_close(torch.nonzero(x.to(DEVICE)), torch.nonzero(x))
        assert_close(x.to(DEVICE)[m.to(DEVICE)], x[m])
        assert torch.equal(x.to(DEVICE), x.to(DEVICE)) is True
        with pytest.raises(RuntimeError, match=r"test_ops_data_dependent.py:\d+"):
            torch.masked_scatter(
                torch.zeros(4, device=DEVICE),
                torch.ones(4, dtype=torch.bool, device=DEVICE),
                torch.ones(2, device=DEVICE),
            )


def test_count_read_is_a_sync_point_for_pending_checks():
    # an out-of-range index found by an earlier program is raised when nonzero reads its count
    x = torch.randn(4, 3, device=DEVICE)
    y = torch.index_select(x, 0, torch.tensor([0, 7], device=DEVICE))
    with pytest.raises(IndexError, match="index_select"):
        torch.nonzero(y)
    assert torch.nonzero(torch.ones(2, device=DEVICE)).cpu().tolist() == [[0], [1]]


def test_private_unique_with_inverse():
    x = torch.tensor([3, 1, 2, 3, 1, 7])
    check(lambda t: torch.ops.aten._unique(t, True, True), x)
    check(lambda t: torch.ops.aten._unique(t), x.float()[::2])
