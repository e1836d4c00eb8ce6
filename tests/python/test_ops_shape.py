"""Shape, indexing and sorting lowerings (csrc/lowering/shape.cc, indexing.cc, sorting.cc) against CPU PyTorch.

Every lowering in the shape family is run on CPU and on tpu with the same
inputs (contiguous and non-contiguous), in the dtypes CPU supports, through
its functional, in-place and out= variants and through autograd. Index
errors found on device must raise IndexError by the next sync point.
"""

import contextlib

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import DEVICE, assert_close, check, to_device

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTS = [torch.int64, torch.int32]
ALL = FLOATS + INTS + [torch.bool]


@contextlib.contextmanager
def lowered():
    """Asserts the body ran without the CPU fallback."""
    torch_pjrt.reset_metrics()
    yield
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def make(shape, dtype=torch.float32, lo=-5, hi=5):
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    return torch.randint(lo, hi, shape, dtype=dtype)


def layouts(shape, dtype=torch.float32):
    """The same logical `shape` as a contiguous, transposed, sliced and expanded tensor."""
    a, b = shape
    return {
        "contiguous": make(shape, dtype),
        "transposed": make((b, a), dtype).t(),
        "sliced": make((a + 1, 2 * b), dtype)[1:, ::2],
        "expanded": make((1, b), dtype).expand(a, b),
    }


LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def idx(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def dev(x):
    return to_device(x, DEVICE)


# ---------------------------------------------------------------- cat / stack


@pytest.mark.parametrize("dtype", ALL)
def test_cat_dtypes(dtype):
    with lowered():
        check(lambda a, b: torch.cat([a, b], dim=1), make((3, 2), dtype), make((3, 4), dtype))
        check(lambda a, b: torch.cat([a, b], dim=-2), make((3, 2), dtype), make((1, 2), dtype))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cat_stack_noncontiguous(layout):
    x = layouts((3, 4))[layout]
    with lowered():
        check(lambda a, b: torch.cat([a, b, a], 0), x, make((2, 4)))
        check(lambda a: torch.stack([a, a * 2], 1), x)


def test_cat_promotes_and_skips_legacy_empty():
    with lowered():
        check(
            lambda a, b, c: torch.cat([a, b, c]), make((2, 3), torch.int32), torch.empty(0), make((1, 3), torch.int64)
        )
        check(lambda a, b: torch.cat([a, b], 1), make((2, 3), torch.bool), make((2, 2), torch.float16))


def test_cat_stack_out_and_grad():
    a, b = make((2, 3)), make((2, 3))
    with lowered():
        out = torch.empty(4, 3, device=DEVICE)
        alias = out[2:]
        torch.cat([dev(a), dev(b)], out=out)
        assert_close(out, torch.cat([a, b]))
        assert_close(alias, b)
        out2 = torch.empty(0, device=DEVICE)  # resized by the out= variant
        torch.stack([dev(a), dev(b)], out=out2)
        assert_close(out2, torch.stack([a, b]))
        check(lambda x, y: torch.cat([x, y * 3], 1), a, b, grad=True)
        check(lambda x, y: torch.stack([x, y], -1), a, b, grad=True)


def test_cat_errors_like_cpu():
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([torch.zeros(2, 3, device=DEVICE), torch.zeros(3, 2, device=DEVICE)])


# ---------------------------------------------------------------- pad, flip, roll, tril/triu, repeat


@pytest.mark.parametrize("dtype", ALL)
def test_pad_flip_roll_dtypes(dtype):
    x = make((3, 4), dtype)
    with lowered():
        check(lambda a: F.pad(a, (1, 2, 0, 1), value=1), x)
        check(lambda a: torch.flip(a, [0, -1]), x)
        check(lambda a: torch.roll(a, (1, -5), (0, 1)), x)
        check(lambda a: torch.roll(a, 7), x)  # flattened


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pad_flip_roll_noncontiguous(layout):
    x = layouts((3, 4))[layout]
    with lowered():
        check(lambda a: F.pad(a, (2, -1, -1, 3), value=-2.5), x)
        check(lambda a: F.pad(a, (-3, 1)), x)  # the crop reaches into the padding
        check(lambda a: torch.flip(a, [1]), x)
        check(lambda a: torch.roll(a, -2, 1), x)
        check(lambda a: torch.roll(a, 5), x)


def test_pad_flip_roll_grad():
    x = make((2, 3, 4))
    with lowered():
        check(lambda a: F.pad(a, (1, -1, 2, 0)), x, grad=True)
        check(lambda a: torch.flip(a, [0, 2]), x, grad=True)
        check(lambda a: torch.roll(a, (1, 2), (1, 2)), x, grad=True)
        check(lambda a: torch.roll(a, -3), x, grad=True)


@pytest.mark.parametrize("dtype", ALL)
def test_tril_triu_dtypes(dtype):
    x = make((2, 4, 5), dtype)
    with lowered():
        for k in (0, 2, -1) if dtype == torch.float32 else (1,):  # k is static: one program per value
            check(lambda a, k=k: (torch.tril(a, k), torch.triu(a, -k)), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tril_triu_noncontiguous_inplace_out(layout):
    x = layouts((4, 5))[layout]
    with lowered():
        check(lambda a: (torch.tril(a, 1), torch.triu(a, -2)), x)

        def inplace(a):
            a = a.clone() if layout == "expanded" else a  # expanded tensors refuse in-place writes
            base = a
            a.t().tril_(1)  # through a transposed view
            return base

        check(inplace, x.clone() if layout == "expanded" else x)

        def out(a):
            o = torch.empty(4, 5, device=a.device)
            torch.triu(a, 1, out=o)
            return o

        check(out, x)
        check(lambda a: torch.tril(a * 1, -1), x, grad=True)
        check(lambda a: torch.triu(a * 1, 2), x, grad=True)


@pytest.mark.parametrize("dtype", ALL)
def test_repeat_dtypes(dtype):
    with lowered():
        check(lambda a: a.repeat(2, 1, 3), make((3, 2), dtype))
        check(lambda a: a.repeat(2), make((), dtype))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_repeat_noncontiguous_and_grad(layout):
    x = layouts((3, 4))[layout]
    with lowered():
        check(lambda a: a.repeat(1, 2), x)
        check(lambda a: a.repeat(2, 1, 2) * 1, x.clone(), grad=True)


# ---------------------------------------------------------------- index_select / gather


def index_dtype_for(dtype):
    """int32 indices for some data dtypes, int64 for the others (both work everywhere)."""
    return torch.int32 if dtype in (torch.int32, torch.bfloat16, torch.bool) else torch.int64


@pytest.mark.parametrize("dtype", ALL)
def test_index_select_dtypes(dtype):
    index_dtype = index_dtype_for(dtype)
    x = make((4, 5), dtype)
    with lowered():
        check(lambda a, i: a.index_select(0, i), x, idx([3, 0, 3], index_dtype))
        check(lambda a, i: a.index_select(-1, i), x, idx([4, 1], index_dtype))
        check(lambda a, i: a.index_select(0, i), make((), dtype), idx([0], index_dtype))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_select_noncontiguous_out_grad(layout):
    x = layouts((4, 5))[layout]
    i = idx([2, 0, 2, 1])
    with lowered():
        check(lambda a, j: a.index_select(1, j), x, i)
        check(lambda a, j: a.index_select(0, j), x, torch.tensor([3, 1, 0, 2])[::2])  # strided index

        def out(a, j):
            o = torch.empty(0, device=a.device)
            return torch.index_select(a, 0, j, out=o)

        check(out, x, i)
        check(lambda a, j: a.index_select(0, j), x.clone(), i, grad=True)


@pytest.mark.parametrize("dtype", ALL)
def test_gather_dtypes(dtype):
    x = make((3, 4), dtype)
    with lowered():
        check(lambda a, i: torch.gather(a, 1, i), x, torch.randint(0, 4, (3, 6)))
        check(lambda a, i: torch.gather(a, 0, i), x, torch.randint(0, 3, (2, 3)).int())  # smaller than self


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_noncontiguous_out_grad(layout):
    x = layouts((3, 4))[layout]
    i = torch.randint(0, 3, (5, 4))
    with lowered():
        check(lambda a, j: torch.gather(a, 0, j), x, i)
        check(lambda a, j: torch.gather(a, 0, j), x, i.t().contiguous().t()[:, :2])  # transposed index

        def out(a, j):
            o = torch.empty(5, 4, device=a.device)
            torch.gather(a, 0, j, out=o)
            return o

        check(out, x, i)
        check(lambda a, j: torch.gather(a, 0, j), x.clone(), i, grad=True)
        check(lambda a, j: torch.take_along_dim(a, j, 1), x.clone(), torch.randint(0, 4, (3, 2)), grad=True)


# ---------------------------------------------------------------- scatter family


def unique_index(rows, cols, size):
    """An index along dim 1 with no duplicates in any row (scatter with duplicates is nondeterministic)."""
    return torch.stack([torch.randperm(size)[:cols] for _ in range(rows)])


@pytest.mark.parametrize("dtype", ALL)
def test_scatter_dtypes(dtype):
    x, src = make((3, 5), dtype), make((3, 4), dtype)
    i = unique_index(3, 3, 5)
    with lowered():
        check(lambda a, j, s: torch.scatter(a, 1, j, s), x, i, src)  # src larger than index
        check(lambda a, j: torch.scatter(a, 1, j, 1), x, i)  # value
        check(lambda a, j, s: torch.scatter_add(a, 1, j, s), x, torch.randint(0, 5, (3, 4)), src)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(dtype, reduce):
    x = make((3, 4), dtype)
    src = make((3, 6), dtype) if dtype.is_floating_point else torch.randint(1, 4, (3, 6), dtype=dtype)
    i = torch.randint(0, 4, (3, 6))  # duplicates, and some elements never hit
    kw = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.float16 and reduce in ("prod", "mean") else {}
    with lowered():
        for include_self in (True, False) if dtype in (torch.float32, torch.bfloat16, torch.int64) else (False,):
            check(
                lambda a, j, s, inc=include_self: a.scatter_reduce(1, j, s, reduce, include_self=inc), x, i, src, **kw
            )
            if dtype != torch.float32:
                continue

            def inplace(a, j, s, inc=include_self):
                v = a[1]
                a.scatter_reduce_(1, j, s, reduce, include_self=inc)
                return a, v

            check(inplace, x.t().contiguous().t(), i, src, **kw)  # into a transposed self


@pytest.mark.parametrize("reduce", ["amax", "amin", "sum", "prod", "mean"])
def test_scatter_reduce_nan_propagates(reduce):
    x = torch.tensor([1.0, float("nan"), 3.0, 4.0, -1.0])
    src = torch.tensor([float("nan"), 5.0, 1.0, -2.0, 7.0, float("nan")])
    i = idx([0, 0, 1, 2, 2, 3])
    with lowered():
        for include_self in (True, False):
            check(lambda a, j, s, inc=include_self: a.scatter_reduce(0, j, s, reduce, include_self=inc), x, i, src)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_scatter_sums_half_in_float(dtype):
    # CPU accumulates float16/bfloat16 scatter sums in float32 and rounds once
    x, src = make((3,), dtype), make((60,), dtype)
    i = torch.zeros(60, dtype=torch.long)
    with lowered():
        check(lambda a, j, s: a.scatter_add(0, j, s), x, i, src)
        check(lambda a, j, s: a.scatter_reduce(0, j, s, "sum"), x, i, src)
        check(lambda a, j, s: a.scatter_reduce(0, j, s, "mean", include_self=False), x, i, src)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_legacy_reduce(dtype):
    x = make((3, 5), dtype)
    src = torch.randint(1, 4, (3, 4)).to(dtype)
    i = torch.randint(0, 5, (3, 4))
    with lowered():
        for reduce in ("add", "multiply"):
            check(lambda a, j, s, r=reduce: a.clone().scatter_(1, j, s, reduce=r), x, i, src)
            check(lambda a, j, r=reduce: a.clone().scatter_(1, j, 3, reduce=r), x, i)


@pytest.mark.parametrize("layout", LAYOUTS[:3])
def test_scatter_inplace_views_and_aliases(layout):
    x = layouts((3, 5))[layout]
    i = unique_index(3, 2, 5)
    src = make((3, 2))

    def scatter_inplace(a, j, s):
        row = a[1]  # every alias must see the write
        a.scatter_(1, j, s)
        return a, row

    def scatter_value_inplace(a, j):
        a.scatter_(1, j, -7.0)
        return a

    def scatter_add_inplace(a, j, s):
        col = a[:, 2]
        a.scatter_add_(1, j, s)
        return a, col

    def scatter_out(a, j, s):
        o = torch.empty(3, 5, device=a.device)
        torch.scatter(a, 1, j, s, out=o)
        return o

    with lowered():
        check(scatter_inplace, x, i, src)
        check(scatter_value_inplace, x, i)
        check(scatter_add_inplace, x, torch.randint(0, 5, (3, 4)), make((3, 4)))
        check(scatter_out, x, i, src)

    # the written tensor is a transposed view of a bigger base
    def through_view(base, j, s):
        view = base[:, 1:].t()  # 5 x 3
        view.scatter_(0, j, s)
        return base

    check(through_view, make((3, 6)), unique_index(3, 2, 5).t(), src.t())


def test_scatter_grads():
    x, src = make((3, 5)), make((3, 4))
    i = unique_index(3, 4, 5)
    with lowered():
        check(lambda a, j, s: torch.scatter(a, 1, j, s), x, i, src, grad=True)
        check(lambda a, j, s: torch.scatter_add(a, 1, j, s), x, torch.randint(0, 5, (3, 4)), src, grad=True)
        check(lambda a, j, s: a.scatter_reduce(1, j, s, "sum"), x, torch.randint(0, 5, (3, 4)), src, grad=True)
        check(lambda a, j, s: a.scatter_reduce(1, j, s, "mean", include_self=False), x, i, src, grad=True)


@pytest.mark.parametrize("dtype", ALL)
def test_index_add(dtype):
    x, src = make((5, 3), dtype), make((4, 3), dtype)
    i = idx([4, 0, 4, 2])
    alpha = True if dtype == torch.bool else 2
    with lowered():
        check(lambda a, j, s: a.index_add(0, j, s), x, i, src)
        check(lambda a, j, s: a.index_add(0, j, s, alpha=alpha), x, i, src)
        check(lambda a, j, s: a.index_add(1, j, s.t()[:, :3]), x.t().contiguous(), i[:3].int(), src)


def test_index_add_inplace_out_noncontiguous_grad():
    x, src = make((3, 5)).t(), make((3, 4)).t()  # both transposed
    i = idx([1, 0, 1, 2])

    def inplace(a, j, s):
        row = a[1]
        a.index_add_(0, j, s, alpha=-1.5)
        return a, row

    def out(a, j, s):
        o = torch.empty(5, 3, device=a.device)
        torch.index_add(a, 0, j, s, out=o)
        return o

    with lowered():
        check(inplace, x, i, src)
        check(out, x, i, src)
        check(lambda a, j, s: a.index_add(0, j, s, alpha=3), x.clone(), i, src, grad=True)


# ---------------------------------------------------------------- advanced indexing


INDEXERS = {
    "one": lambda a, i, j: a[i],
    "two": lambda a, i, j: a[i, j],
    "second_dim": lambda a, i, j: a[:, j],
    "broadcast": lambda a, i, j: a[i[:, None], j[None, :]],
    "nonadjacent": lambda a, i, j: a[i, :, j],
    "adjacent_middle": lambda a, i, j: a[:, i, j],
    "negative": lambda a, i, j: a[-1 - i],
    "with_slice": lambda a, i, j: a[1:, j][i[1:3]],
}


@pytest.mark.parametrize("name", list(INDEXERS))
def test_index_tensor(name):
    x = make((4, 4, 4))
    i, j = idx([3, 0, 2, 0]), idx([1, -2, 3, 1])
    with lowered():
        check(INDEXERS[name], x, i, j)
        check(INDEXERS[name], x.permute(2, 0, 1), i, j)  # non-contiguous self
        check(lambda a, i, j: INDEXERS[name](a * 1, i, j), x, i, j, grad=True)  # duplicates accumulate


@pytest.mark.parametrize("dtype", ALL)
def test_index_tensor_dtypes(dtype):
    index_dtype = index_dtype_for(dtype)
    x = make((4, 3), dtype)
    with lowered():
        check(lambda a, i: a[i], x, idx([[0, 3], [-1, 1]], index_dtype))
        check(lambda a, i: a[i, 2], x, idx([0, 3, 1], index_dtype))


def test_index_tensor_cpu_index_and_scalar_self():
    x = dev(make((4, 3)))
    with lowered():
        i = idx([2, 0])  # CPU index tensor on a tpu tensor moves to tpu
        assert_close(x[i], x.cpu()[i])
        assert_close(x[[1, 3], [0, 2]], x.cpu()[[1, 3], [0, 2]])


@pytest.mark.parametrize("dtype", ALL)
def test_index_put(dtype):
    x = make((4, 3), dtype)
    v = make((3,), dtype)
    with lowered():
        check(lambda a, i, v: a.index_put((i,), v), x, idx([2, 0]), v)
        check(lambda a, i, v: a.index_put((i,), v, accumulate=True), x, idx([2, 0, 2, -1]), v)
        check(lambda a, i, j, v: a.index_put((i, j), v), x, idx([1, 3, 0]), idx([0, 2, 1]), v)
        check(lambda a, i, j, v: a.index_put((i, j), v[0], accumulate=True), x, idx([1, 1, 0]), idx([2, 2, 2]), v)


def test_setitem_and_aliases():
    x = make((4, 5))
    i, j = idx([3, 1]), idx([0, 4])
    v = make((2, 5))

    def setitem(a, i, v):
        row = a[1]
        col = a[:, 0]
        a[i] = v
        return a, row, col

    def setitem_scalar(a, i, j):
        a[i, j] = -3.0
        a[:, j] = 2.0
        return a

    def setitem_broadcast(a, i, v):
        a[i] = v[0]
        return a

    def iadd(a, i, j):
        a[i, j] += 1.5  # index then index_put
        return a

    def slice_assign(a, y):
        col = a[:, 2]
        a[:, 1:] = y
        a[1:3, ::2] = 0.5
        return a, col

    def accumulate_inplace(a, i, v):
        view = a.t()
        a.index_put_((torch.cat([i, i]),), torch.cat([v, v]), accumulate=True)
        return a, view

    with lowered():
        check(setitem, x, i, v)
        check(setitem_scalar, x, i, j)
        check(setitem_broadcast, x, i, v)
        check(iadd, x, i, j)
        check(slice_assign, x, make((4, 4)))
        check(accumulate_inplace, x, i, v)
        check(accumulate_inplace, make((5, 4)).t(), i, v)  # into a transposed self
        # through non-contiguous views of a base
        check(setitem, make((5, 4)).t(), i, v)
        check(setitem, make((6, 10))[1:5, ::2], i, v)
        check(lambda a, i, v: a.index_put((i,), v) * 1, x, i, v, grad=True)
        check(lambda a, i, v: a.index_put((i, i), v[0, :2], accumulate=True) * 1, x, i, v, grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_setitem_with_bool_mask(dtype):
    # x[mask] = v needs no data-dependent shape when v does not depend on the number of true elements
    x = make((4, 5), dtype)
    mask, rows, cols = torch.rand(4, 5) > 0.5, torch.tensor([True, False, True, True]), torch.rand(5) > 0.5

    def put(a, m, v, where=lambda a, m: (m,)):
        alias = a[1]
        a[where(a, m)] = v
        return a, alias

    with lowered():
        check(put, x, mask, make((), dtype))
        check(put, x, rows, make((5,), dtype))  # one value per element of a masked row
        check(put, x, cols, make((4, 1), dtype), where=lambda a, m: (slice(None), m))
        check(put, x.t().contiguous().t(), mask, make((), dtype))  # a transposed self
        check(lambda a, m, v: a.index_put((m,), v, accumulate=True), x, mask, make((), dtype))
        if dtype.is_floating_point:
            check(
                lambda a, m: a.index_put((m,), torch.tensor(0.0, dtype=dtype, device=a.device)) * 2, x, mask, grad=True
            )


def test_bool_mask_refusals():
    # x[mask] and x[mask] = per-element values are supported (the glue expands the
    # mask with nonzero, tests/python/test_ops_data_dependent.py); a mismatched mask is not
    x = dev(make((4, 5)))
    with pytest.raises((IndexError, RuntimeError), match="does not match the shape"):  # CPU: IndexError
        x[torch.tensor([True, False], device=DEVICE)] = 1.0


def test_index_put_values_dtype_must_match():
    # as on CPU; Python numbers are converted by __setitem__ and are fine
    for device in ("cpu", DEVICE):
        x = torch.zeros(3, device=device)
        i = torch.tensor([0], device=device)
        with pytest.raises(RuntimeError, match="dtypes match"):
            x.index_put_((i,), torch.tensor(1.0, dtype=torch.float64, device=device))
        x[i] = 2
        x[i + 1] = True
        assert x.tolist() == [2.0, 1.0, 0.0]


def test_index_put_values_broadcast_error():
    x = torch.zeros(4, 3, device=DEVICE)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[torch.tensor([0, 1], device=DEVICE)] = torch.ones(3, 3, device=DEVICE)


def test_embedding_and_backward():
    w = make((6, 4))
    i = idx([[0, 5, 2], [2, 2, 1]])
    with lowered():
        check(lambda w, i: F.embedding(i, w), w, i, grad=True)
        check(lambda w, i: F.embedding(i, w, padding_idx=2), w, i, grad=True)
        check(lambda w, i: F.embedding(i, w, scale_grad_by_freq=True), w, i, grad=True)
        check(lambda w, i: F.embedding(i, w), w.t().contiguous().t(), i.int(), grad=True)
        check(lambda w, i: F.embedding(i, w), w.to(torch.bfloat16), i, grad=True)


# ---------------------------------------------------------------- sort / topk


@pytest.mark.parametrize("dtype", ALL)
def test_sort_dtypes(dtype):
    x = make((3, 7), dtype, -3, 3)  # ties
    with lowered():
        check(lambda a: torch.sort(a, stable=True), x)
        check(lambda a: torch.sort(a, dim=0, descending=True, stable=True), x)
        check(lambda a: torch.argsort(a, dim=1, stable=True), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sort_noncontiguous_out(layout):
    x = layouts((4, 6))[layout]
    with lowered():
        check(lambda a: torch.sort(a, stable=True), x)
        check(lambda a: torch.sort(a, dim=0, descending=True, stable=True), x)

        def out(a):
            v, i = torch.empty(0, device=a.device), torch.empty(0, dtype=torch.long, device=a.device)
            torch.sort(a, 1, out=(v, i))
            return v, i

        check(out, x)


def test_sort_nan_and_unstable_distinct():
    x = torch.randn(4, 6)
    x[0, 2] = x[1, 0] = x[3, 5] = float("nan")
    x[2, 1] = float("inf")
    x[2, 4] = -float("inf")
    with lowered():
        check(lambda a: torch.sort(a), x)  # distinct values: unstable == stable
        check(lambda a: torch.sort(a, descending=True), x)
        check(lambda a: torch.sort(a, 0), x)
        check(lambda a: torch.sort(a), torch.tensor(1.5))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_topk_dtypes(dtype):
    x = torch.randperm(40).reshape(4, 10).to(dtype)  # distinct in every dtype
    if dtype.is_floating_point:
        x = x - 20.5
    with lowered():
        check(lambda a: torch.topk(a, 3), x)
        check(lambda a: torch.topk(a, 2, dim=0, largest=False), x)
        check(lambda a: torch.topk(a, 10), x)
        check(lambda a: torch.topk(a, 0), x)


def test_topk_noncontiguous_out_nan_grad():
    x = torch.randperm(24).float().reshape(6, 4).t()  # 4 x 6, transposed
    x[1, 2] = float("nan")

    def out(a):
        v, i = torch.empty(0, device=a.device), torch.empty(0, dtype=torch.long, device=a.device)
        torch.topk(a, 2, out=(v, i))
        return v, i

    with lowered():
        check(lambda a: torch.topk(a, 3), x)
        check(lambda a: torch.topk(a, 3, largest=False), x)
        check(out, x)
        y = torch.randperm(24).float().reshape(4, 6) / 7
        check(lambda a: torch.topk(a * 1, 3, dim=0)[0], y, grad=True)
        check(lambda a: torch.sort(a * 1, 1, descending=True)[0], y, grad=True)
        check(lambda a: torch.topk(a, 1), torch.tensor(2.0))
        check(lambda a: torch.topk(a, 0), torch.tensor(2.0))  # CPU gives the element for k = 0 too


A = torch.ops.aten


def out_like(a, dtype=None):
    return torch.empty(0, device=a.device, dtype=dtype or a.dtype)


# out= forms of the lowered shape ops without a Python-level out= (the glue derives them)
SHAPE_OUT = {
    "flip.out": (lambda a: A.flip.out(a, [0], out=out_like(a)), lambda: [make((4, 5))]),
    "roll.out": (lambda a: A.roll.out(a, [1], [1], out=out_like(a)), lambda: [make((4, 5)).t()]),
    "repeat.out": (lambda a: A.repeat.out(a, [2, 1], out=out_like(a)), lambda: [make((4, 5))]),
    "constant_pad_nd.out": (lambda a: A.constant_pad_nd.out(a, [1, -1], 2.0, out=out_like(a)), lambda: [make((4, 5))]),
    "index.Tensor_out": (lambda a, i: A.index.Tensor_out(a, [i], out=out_like(a)), lambda: [make((4, 5)), idx([1, 0])]),
    "index_put.out": (
        lambda a, i, v: A.index_put.out(a, [i], v, True, out=out_like(a)),
        lambda: [make((4, 5)), idx([1, 1]), make((5,))],
    ),
    "scatter_reduce.two_out": (
        lambda a, i, s: A.scatter_reduce.two_out(a, 0, i, s, "amax", out=out_like(a)),
        lambda: [make((4, 5)), torch.randint(0, 4, (2, 5)), make((2, 5))],
    ),
    "scatter.value_out": (
        lambda a, i: A.scatter.value_out(a, 0, i, 2.0, out=out_like(a)),
        lambda: [make((4, 5)), torch.randint(0, 4, (1, 5))],
    ),
    "index_add.out": (
        lambda a, i, s: A.index_add.out(a, 0, i, s, out=out_like(a)),
        lambda: [make((4, 5)), idx([1, 1]), make((2, 5))],
    ),
    "embedding_dense_backward.out": (
        lambda g, i: A.embedding_dense_backward.out(g, i, 6, -1, False, out=out_like(g)),
        lambda: [make((3, 5)), idx([1, 0, 1])],
    ),
    "sort.values_stable": (
        lambda a: A.sort.values_stable(
            a, stable=True, dim=0, descending=True, values=out_like(a), indices=out_like(a, torch.long)
        ),
        lambda: [make((4, 5))],
    ),
}


@pytest.mark.parametrize("name", list(SHAPE_OUT))
def test_aten_out_variants(name):
    fn, args = SHAPE_OUT[name]
    with lowered():
        check(fn, *args())


# ---------------------------------------------------------------- out-of-range indices


IndexCase = {
    "index_select": lambda x, i: x.index_select(0, i),
    "gather": lambda x, i: torch.gather(x, 0, i[:, None].expand(-1, 3)),
    "embedding": lambda x, i: F.embedding(i, x),
    "getitem": lambda x, i: x[i],
    "setitem": lambda x, i: x.index_put_((i,), torch.zeros((), device=x.device)),
    "scatter": lambda x, i: x.scatter_(0, i[:, None].expand(-1, 3), 1.0),
    "index_add": lambda x, i: x.index_add_(0, i, torch.ones(i.numel(), 3, device=x.device)),
    "index_add_1d": lambda x, i: x[:, 0].contiguous().index_add_(0, i, torch.ones(i.numel(), device=x.device)),
}


def cpu_error(fn, x, i):
    """The class CPU raises for fn(x, i): IndexError for most, RuntimeError for gather/scatter's kernels."""
    try:
        fn(x.clone(), i)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    raise AssertionError("CPU accepted the index")


@pytest.mark.parametrize("name", list(IndexCase))
@pytest.mark.parametrize("bad", [4, -5])
def test_out_of_range_raises_at_sync(name, bad):
    fn = IndexCase[name]
    x = torch.arange(12.0).reshape(4, 3)
    good = idx([3, 0, -1]) if name in ("getitem", "setitem") else idx([3, 0, 1])
    xd = dev(x)
    fn(xd, dev(idx([1, bad, 0])))
    with pytest.raises(cpu_error(fn, x, idx([1, bad, 0]))):
        torch_pjrt.synchronize()
    # the next op still works (and the failed check is not raised again)
    assert_close(fn(dev(x), dev(good)), fn(x.clone(), good))
    torch_pjrt.synchronize()


@pytest.mark.parametrize("name", ["index_select", "gather", "getitem"])
def test_out_of_range_raises_at_cpu_and_item(name):
    fn = IndexCase[name]
    xd = dev(torch.arange(12.0).reshape(4, 3))
    expected = cpu_error(fn, xd.cpu(), idx([0, 7]))
    y = fn(xd, dev(idx([0, 7])))
    with pytest.raises(expected):
        y.cpu()
    y = fn(xd, dev(idx([0, 7])))
    with pytest.raises(expected):
        y.sum().item()
    assert fn(xd, dev(idx([2, 1]))).sum().item() == fn(xd.cpu(), idx([2, 1])).sum().item()


@pytest.mark.parametrize("name", list(IndexCase))
def test_out_of_range_raises_at_once_in_debug_mode(name):
    fn = IndexCase[name]
    torch_pjrt.set_eager_mode("debug")
    xd = dev(torch.arange(12.0).reshape(4, 3))
    with pytest.raises(cpu_error(fn, xd.cpu(), idx([0, 9]))):
        fn(xd, dev(idx([0, 9])))
    x = torch.arange(12.0).reshape(4, 3)
    assert_close(fn(dev(x), dev(idx([2, 1]))), fn(x, idx([2, 1])))


def test_out_of_range_reaches_the_sync_through_later_ops_and_backward():
    x = dev(torch.arange(12.0).reshape(4, 3))
    y = x.index_select(0, dev(idx([0, 4]))) * 2 + 1  # later ops run on the clamped result
    with pytest.raises(IndexError, match="index_select"):
        y.sum().item()
    w = dev(torch.randn(4, 3)).requires_grad_()
    w[dev(idx([1, 6]))].sum().backward()
    with pytest.raises(IndexError):
        torch_pjrt.synchronize()
    torch_pjrt.synchronize()  # reported once
    w.grad = None
    w[dev(idx([1, 1, -1]))].sum().backward()
    assert_close(w.grad, torch.tensor([[0.0] * 3, [2.0] * 3, [0.0] * 3, [1.0] * 3]))


def test_nonintegral_and_mask_indices_are_refused():
    x = torch.zeros(4, 3, device=DEVICE)
    with pytest.raises((IndexError, RuntimeError)):
        x.index_select(0, torch.tensor([0.0, 1.0], device=DEVICE))
