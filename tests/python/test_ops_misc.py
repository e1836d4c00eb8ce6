"""Creation, random, reduction and index lowerings added for linspace/logspace/eye,
nansum/count_nonzero/aminmax/trace/norm/renorm, cummax/cummin/logcumsumexp,
index_fill/index_copy/index_reduce/take/put, unfold_backward, kthvalue/median/
nanmedian/mode, searchsorted/bucketize/histc and the tensor normal, cauchy,
log_normal, geometric and multinomial draws.

Deterministic ops run on CPU and on tpu with the same inputs (contiguous and
non-contiguous, float32 and bfloat16, in-place/out= variants, autograd) and are
compared; random ops are checked by shape, dtype, range and moments.
"""

import contextlib
import math

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


def noncontig(shape, dtype=torch.float32):
    """A transposed (non-contiguous) tensor of `shape`."""
    t = torch.randn(tuple(reversed(shape))).to(dtype).t()
    assert not t.is_contiguous()
    return t


# ---------------------------------------------------------------- creation


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int32])
@pytest.mark.parametrize("args", [(0, 1, 5), (-3.5, 7.25, 11), (10, -10, 64), (2, 2, 1), (1, 5, 0), (-7.9, 9.9, 9)])
def test_linspace(dtype, args):
    with lowered():
        out = torch.linspace(*args, dtype=dtype, device=DEVICE)
    assert_close(out, torch.linspace(*args, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("args", [(0, 2, 5), (-1.5, 1.5, 7, 2.0), (1, 3, 20, 3), (2, 2, 1)])
def test_logspace(dtype, args):
    with lowered():
        out = torch.logspace(*args, dtype=dtype, device=DEVICE)
    assert_close(out, torch.logspace(*args, dtype=dtype))


def test_linspace_out_and_tensor_overload():
    out = torch.empty(0, device=DEVICE)
    with lowered():
        torch.linspace(-2, 3, 9, out=out)
    assert_close(out, torch.linspace(-2, 3, 9))
    start, end = torch.tensor(1.5), torch.tensor(-4.0)
    assert_close(torch.linspace(start.to(DEVICE), end.to(DEVICE), 6, device=DEVICE), torch.linspace(start, end, 6))
    assert_close(torch.logspace(start.to(DEVICE), end.to(DEVICE), 6, device=DEVICE), torch.logspace(start, end, 6))


def test_signal_windows():
    with lowered():
        got = [
            torch.signal.windows.hann(10, device=DEVICE),
            torch.signal.windows.gaussian(7, std=1.5, device=DEVICE),
            torch.signal.windows.cosine(8, sym=False, device=DEVICE),
        ]
    want = [
        torch.signal.windows.hann(10),
        torch.signal.windows.gaussian(7, std=1.5),
        torch.signal.windows.cosine(8, sym=False),
    ]
    assert_close(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("nm", [(3,), (3, 5), (4, 2), (0,), (0, 3)])
def test_eye(dtype, nm):
    with lowered():
        out = torch.eye(*nm, dtype=dtype, device=DEVICE)
    assert_close(out, torch.eye(*nm, dtype=dtype))
    o = torch.empty(7, dtype=dtype, device=DEVICE)
    torch.eye(*nm, out=o)
    assert_close(o, torch.eye(*nm, dtype=dtype))


# ---------------------------------------------------------------- reductions


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nansum_nanmean(dtype):
    x = torch.randn(4, 6).to(dtype)
    x[0, 1] = x[2, 3] = x[3, 0] = float("nan")
    with lowered():
        check(torch.nansum, x, grad=True)
        check(lambda t: torch.nansum(t, dim=1, keepdim=True), x)
        check(lambda t: torch.nansum(t, dim=0, dtype=torch.float32), x)
        check(lambda t: torch.nanmean(t, dim=1), x)
    check(lambda t: torch.nansum(t, 0), noncontig((5, 3)))
    check(torch.nansum, torch.randint(-5, 5, (3, 4)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_count_nonzero(dtype):
    x = (torch.randint(-2, 3, (4, 5, 3))).to(dtype)
    with lowered():
        check(torch.count_nonzero, x)
        check(lambda t: torch.count_nonzero(t, dim=1), x)
        check(lambda t: torch.count_nonzero(t, dim=(0, 2)), x)
    check(torch.count_nonzero, noncontig((4, 3)).round())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_aminmax(dtype):
    x = (torch.randn(4, 5) * 5).to(dtype)
    with lowered():
        check(torch.aminmax, x)
        check(lambda t: torch.aminmax(t, dim=1), x)
        check(lambda t: torch.aminmax(t, dim=0, keepdim=True), x)
        check(lambda t: torch.aminmax(t, dim=0), torch.empty(3, 0, dtype=dtype))
    y = torch.randn(3, 4)
    y[1, 2] = float("nan")
    check(lambda t: torch.aminmax(t, dim=1), y)
    check(torch.aminmax, noncontig((3, 4)))
    mn, mx = torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE)
    torch.aminmax(x.float().to(DEVICE), dim=1, out=(mn, mx))
    ref = torch.aminmax(x.float(), dim=1)
    assert_close((mn, mx), (ref.min, ref.max))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_trace(dtype):
    with lowered():
        check(torch.trace, (torch.randn(4, 6) * 4).to(dtype), grad=dtype.is_floating_point)
    check(torch.trace, noncontig((5, 3)), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [2, 1, 3, 0.5, float("inf"), 0])
def test_norm(dtype, p):
    x = torch.randn(3, 4, 5).to(dtype)
    with lowered():
        check(lambda t: torch.norm(t, p), x, grad=p not in (0, float("inf")))
        check(lambda t: torch.norm(t, p, dim=1, keepdim=True), x)
        check(lambda t: torch.norm(t, p, dim=(0, 2), dtype=torch.float32), x)
        check(lambda a, b: torch.dist(a, b, p), x, torch.randn(3, 4, 5).to(dtype))
    check(lambda t: torch.norm(t, p, dim=0), noncontig((4, 3)))
    check(lambda a, b: torch.nn.functional.pairwise_distance(a, b), torch.randn(5, 3), torch.randn(5, 3), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 2.5), (3, 1, 0.5)])
def test_renorm(dtype, p, dim, maxnorm):
    x = torch.randn(4, 5).to(dtype)
    with lowered():
        check(lambda t: torch.renorm(t, p, dim, maxnorm), x, grad=True)
    check(lambda t: torch.renorm(t, p, dim, maxnorm), noncontig((4, 5)), grad=True)
    y = x.to(DEVICE)
    y.renorm_(p, dim, maxnorm)
    assert_close(y, torch.renorm(x, p, dim, maxnorm))


# ---------------------------------------------------------------- scans


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_cummax_cummin(op, dtype):
    x = torch.randint(-3, 4, (4, 7)).to(dtype)  # many ties: indices move to the latest
    with lowered():
        check(lambda t: op(t, 1), x)
        check(lambda t: op(t, 0), x)
    y = torch.randn(3, 8)
    y[0, 2] = y[1, 5] = y[1, 6] = float("nan")
    check(lambda t: op(t, 1), y, grad=True)
    check(lambda t: op(t, 0), noncontig((5, 4)), grad=True)
    check(lambda t: op(t, 0), torch.tensor(2.5))


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("n", [17, 100, 512, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_cummax_cummin_long_scans(op, n, dtype):
    """Scans longer than 16 (XLA's CPU pipeline rewrites them into trees: a two-result scan did not compile for
    lengths that are not a power of two, and crashed the process at 512)."""
    x = torch.randint(-50, 50, (3, n)).to(dtype)  # ties: indices move to the latest
    if dtype.is_floating_point:
        x[1, n // 3] = x[1, n // 2] = float("nan")
    with lowered():
        check(lambda t: op(t, 1), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logcumsumexp(dtype):
    x = (torch.randn(4, 6) * 3).to(dtype)
    x[0, 1] = float("-inf")
    x[1, 0] = x[1, 1] = float("-inf")
    x[2, 3] = float("inf")
    with lowered():
        check(lambda t: torch.logcumsumexp(t, 1), x)
        check(lambda t: torch.logcumsumexp(t, 0), torch.randn(5, 3).to(dtype), grad=True)
    check(lambda t: torch.logcumsumexp(t, 1), noncontig((4, 5)), grad=True)
    big = torch.randn(3, 5) * 5
    big[1, 2] = 10000.0
    check(lambda t: torch.logcumsumexp(t, 1), big, grad=True)


# ---------------------------------------------------------------- index ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_fill(dtype):
    x = (torch.randn(4, 5) * 5).to(dtype)
    idx = torch.tensor([0, -1, 2, 2])
    with lowered():
        check(lambda t, i: t.index_fill(1, i, 3), x, idx)
        check(lambda t, i: t.index_fill(0, i, torch.tensor(-2, dtype=dtype)), x, torch.tensor([1, 3]))
        check(lambda t, i: t.clone().index_fill_(0, i, 7), x, torch.tensor([0]))
    check(lambda t, i: t.index_fill(0, i, 1.5), noncontig((4, 3)), torch.tensor([2, 0]), grad=True)
    check(lambda t: torch.trace(t), noncontig((4, 4)), grad=True)  # trace's backward fills the diagonal


def test_index_fill_out_of_range():
    x = torch.zeros(3, device=DEVICE)
    with pytest.raises(IndexError):
        x.index_fill(0, torch.tensor([3], device=DEVICE), 1.0).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_copy(dtype):
    x = (torch.randn(5, 4) * 5).to(dtype)
    src = (torch.randn(3, 4) * 5).to(dtype)
    idx = torch.tensor([4, 0, 2])
    with lowered():
        check(lambda t, i, s: t.index_copy(0, i, s), x, idx, src, grad=dtype.is_floating_point)
        check(
            lambda t, i, s: t.clone().index_copy_(1, i, s), x, torch.tensor([3, 1]), (torch.randn(5, 2) * 3).to(dtype)
        )
    check(lambda t, i, s: t.index_copy(1, i, s), noncontig((3, 4)), torch.tensor([1, 0]), noncontig((3, 2)), grad=True)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    x = (torch.randn(5, 3) * 4).to(dtype)
    src = (torch.randn(6, 3) * 4).to(dtype)
    idx = torch.tensor([0, 4, 0, 2, 4, 4])
    grad = dtype.is_floating_point and reduce in ("mean", "prod")
    with lowered():
        check(lambda t, i, s: t.index_reduce(0, i, s, reduce, include_self=include_self), x, idx, src, grad=grad)
    check(
        lambda t, i, s: t.index_reduce(1, i, s, reduce, include_self=include_self),
        noncontig((3, 4)),
        torch.tensor([3, 3, 0]),
        noncontig((3, 3)),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_take_put(dtype):
    x = (torch.randn(3, 4) * 5).to(dtype)
    idx = torch.tensor([[0, -1], [5, 11], [3, 3]])
    src = (torch.randn(3, 2) * 5).to(dtype)
    g = dtype.is_floating_point
    with lowered():
        check(torch.take, x, idx, grad=g)
        check(lambda t, i, s: torch.put(t, i, s), x, torch.tensor([1, -2, 7]), src.flatten()[:3], grad=g)
        check(lambda t, i, s: torch.put(t, i, s, accumulate=True), x, idx, src, grad=g)
        check(lambda t, i, s: t.clone().put_(i, s, accumulate=True), x, idx, src)
    check(torch.take, noncontig((4, 3)), idx, grad=True)


def test_take_out_of_range():
    x = torch.zeros(2, 3, device=DEVICE)
    with pytest.raises(IndexError):
        torch.take(x, torch.tensor([6], device=DEVICE)).cpu()


@pytest.mark.parametrize("size,step", [(2, 1), (3, 2), (2, 3), (1, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unfold_backward(size, step, dtype):
    x = torch.randn(3, 8).to(dtype)
    with lowered():
        check(lambda t: t.unfold(1, size, step), x, grad=True)
        check(lambda t: t.unfold(0, 2, 1), x, grad=True)
    check(lambda t: t.unfold(0, size, step), noncontig((8, 2)), grad=True)
    check(lambda t: t.unfold(0, 1, 1), torch.tensor(1.5), grad=True)


# ---------------------------------------------------------------- order statistics


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_kthvalue(dtype):
    # Distinct values: among ties CPU's quickselect picks an index that depends on its pivots.
    x = (torch.randperm(28).reshape(4, 7) - 10).to(dtype)
    with lowered():
        check(lambda t: torch.kthvalue(t, 3, 1), x, grad=dtype.is_floating_point)
        check(lambda t: torch.kthvalue(t, 1, 0, keepdim=True), x)
    check(lambda t: torch.kthvalue(t, 2, 0), noncontig((4, 3)), grad=True)
    y = torch.randn(3, 5)
    y[1, 1] = float("nan")
    check(lambda t: torch.kthvalue(t, 5, 1), y)
    values, indices = torch.empty(0, dtype=dtype, device=DEVICE), torch.empty(0, dtype=torch.long, device=DEVICE)
    torch.kthvalue(x.to(DEVICE), 2, 1, out=(values, indices))
    assert_close((values, indices), tuple(torch.kthvalue(x, 2, 1)))


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_median(op, dtype):
    x = (torch.randn(4, 7) * 5).to(dtype)
    with lowered():
        check(op, x, grad=dtype.is_floating_point)
        check(lambda t: op(t, 1), x, grad=dtype.is_floating_point)
        check(lambda t: op(t, 0, keepdim=True), torch.randn(6, 3).to(dtype))
    y = torch.randn(4, 6)
    y[0, 2] = y[0, 4] = float("nan")
    y[3, 0] = float("nan")
    check(op, y)
    check(lambda t: op(t, 1), y)
    # An all-NaN row gives NaN; CPU's index for it comes from std::nth_element's
    # internals, so only the value is compared.
    y[1, :] = float("nan")
    check(lambda t: op(t, 1).values, y)
    check(lambda t: op(t, 0), noncontig((5, 3)), grad=True)
    check(op, torch.empty(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_mode(dtype):
    x = torch.randint(-2, 3, (5, 9)).to(dtype)  # plenty of repeated values
    with lowered():
        check(lambda t: torch.mode(t, 1), x)
        check(lambda t: torch.mode(t, 0, keepdim=True), x)
    check(lambda t: torch.mode(t, 1), torch.randn(3, 6), grad=True)
    check(lambda t: torch.mode(t, 0), noncontig((4, 3)).round())
    check(lambda t: torch.mode(t), torch.tensor(3.0))


# ---------------------------------------------------------------- search and histograms


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_searchsorted_bucketize(right, dtype):
    bounds = torch.tensor([-3, -1, 0, 0, 2, 5]).to(dtype)
    v = torch.tensor([[-4, -1, 0, 1], [2, 5, 6, 0]]).to(dtype)
    with lowered():
        check(lambda s, t: torch.searchsorted(s, t, right=right), bounds, v)
        check(lambda s, t: torch.searchsorted(s, t, side="right" if right else "left", out_int32=True), bounds, v)
        check(lambda t, s: torch.bucketize(t, s, right=right), v, bounds)
        check(lambda s: torch.searchsorted(s, 0, right=right), bounds)
        check(lambda s: torch.bucketize(1, s, right=right), bounds)
    rows = torch.sort(torch.randn(3, 5), dim=1).values
    check(lambda s, t: torch.searchsorted(s, t, right=right), rows, torch.randn(3, 4))
    perm = torch.randperm(6)
    check(lambda s, t, p: torch.searchsorted(s, t, sorter=p), bounds[perm], v, torch.argsort(bounds[perm], stable=True))
    f = torch.tensor([0.0, 1.0, 2.0])
    check(lambda s, t: torch.searchsorted(s, t, right=right), f, torch.tensor([float("nan"), 1.0, -1.0]))
    check(lambda s, t: torch.bucketize(t, s), f, noncontig((3, 2)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bins,lo,hi", [(10, 0, 0), (7, -1, 1), (4, 0.5, 0.5), (100, -2, 3)])
def test_histc(dtype, bins, lo, hi):
    x = torch.randn(50).to(dtype)
    x[3] = 1.0
    x[4] = -1.0
    with lowered():
        check(lambda t: torch.histc(t, bins, lo, hi), x)
    check(lambda t: torch.histc(t, bins, lo, hi), noncontig((6, 5)))
    check(lambda t: torch.histc(t, bins, lo, hi), torch.full((4,), 2.0))


# ---------------------------------------------------------------- random


def host(x):
    assert x.device.type == "tpu"
    return x.cpu().double()


def test_normal_tensor_mean_std():
    mean = torch.linspace(-5, 5, 8).reshape(8, 1)
    std = torch.linspace(0.5, 2, 4)
    with lowered():
        a = torch.normal(mean.to(DEVICE).expand(8, 4096), 2.0)
        b = torch.normal(3.0, std.to(DEVICE).reshape(4, 1).expand(4, 4096))
        c = torch.normal(mean.to(DEVICE), std.to(DEVICE))
        d = torch.normal(mean.to(DEVICE).bfloat16(), 1.0)
    assert a.shape == (8, 4096) and b.shape == (4, 4096) and c.shape == (8, 4) and d.dtype == torch.bfloat16
    ha, hb = host(a), host(b)
    for i in range(8):
        assert abs(ha[i].mean() - mean[i].item()) < 6 * 2 / 64
        assert abs(ha[i].std() - 2) < 0.15
    for i in range(4):
        assert abs(hb[i].mean() - 3) < 6 * std[i].item() / 64
        assert abs(hb[i].std() - std[i].item()) < 0.1 * std[i].item()
    out = torch.empty(0, device=DEVICE)
    torch.normal(mean.to(DEVICE), std.to(DEVICE), out=out)
    assert out.shape == (8, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cauchy_log_normal_geometric(dtype):
    x = torch.empty(64, 1024, dtype=dtype, device=DEVICE)
    with lowered():
        c = host(x.clone().cauchy_(1.0, 2.0))
        ln = host(x.clone().log_normal_(0.5, 0.25))
        g = host(x.clone().geometric_(0.3))
    n = c.numel()
    # Cauchy: median 1, quartiles at 1 -+ 2.
    assert abs(c.median() - 1) < 0.06
    assert abs(((c > -1) & (c < 3)).double().mean() - 0.5) < 0.02
    # log-normal: log is N(0.5, 0.25^2).
    assert (ln > 0).all()
    assert abs(ln.log().mean() - 0.5) < 6 * 0.25 / math.sqrt(n) + 0.01
    assert abs(ln.log().std() - 0.25) < 0.01
    # geometric(p): integers >= 1 with mean 1/p.
    assert (g >= 1).all() and (g == g.round()).all()
    assert abs(g.mean() - 1 / 0.3) < 0.05
    gi = torch.empty(1000, dtype=torch.int64, device=DEVICE).geometric_(0.5)
    assert gi.dtype == torch.int64 and (gi.cpu() >= 1).all()


def test_multinomial():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]])
    with lowered():
        r = torch.multinomial(p.to(DEVICE), 20000, replacement=True)
        w = torch.multinomial(p.to(DEVICE), 3)
        one = torch.multinomial(p[0].to(DEVICE), 2)
    assert r.shape == (2, 20000) and r.dtype == torch.int64
    freq = torch.stack([torch.bincount(row, minlength=4) for row in r.cpu()]).double() / 20000
    assert (freq - p / p.sum(1, keepdim=True)).abs().max() < 0.02
    assert w.shape == (2, 3) and one.shape == (2,)
    for row in w.cpu():
        assert len(set(row.tolist())) == 3
    assert 1 not in w.cpu()[0].tolist()  # zero weight is never drawn without replacement
    first = torch.stack([torch.multinomial(p[0].to(DEVICE), 1) for _ in range(400)]).cpu().flatten()
    assert abs((first == 2).double().mean() - 0.6) < 0.1


# ---------------------------------------------------------------- triangle indices, segment_reduce


@pytest.mark.parametrize("op", [torch.triu_indices, torch.tril_indices])
@pytest.mark.parametrize("args", [(3, 3), (4, 6, 1), (5, 3, -2), (0, 4), (3, 3, 9), (3, 4, -9)])
def test_triangle_indices(op, args):
    with lowered():
        out = op(*args, device=DEVICE)
        out32 = op(*args, dtype=torch.int32, device=DEVICE)
    assert_close(out, op(*args))
    assert_close(out32, op(*args, dtype=torch.int32))


# Dtypes the CPU kernels of the factory ops do not dispatch over, and Scalars that do not fit the output's dtype:
# the same error class as CPU.
FACTORY_REFUSALS = {
    "arange_bool_out": lambda d: torch.arange(0, 4, out=torch.empty(0, dtype=torch.bool, device=d)),
    "arange_complex_out": lambda d: torch.arange(0, 4, out=torch.empty(0, dtype=torch.complex64, device=d)),
    "linspace_bool_out": lambda d: torch.linspace(0, 1, 3, out=torch.empty(3, dtype=torch.bool, device=d)),
    "logspace_bool_out": lambda d: torch.logspace(0, 1, 3, out=torch.empty(3, dtype=torch.bool, device=d)),
    "linspace_complex_start_float_out": lambda d: torch.linspace(3 + 1j, 1, 3, out=torch.empty(3, device=d)),
    "linspace_int8_out_300": lambda d: torch.linspace(300, 1, 3, out=torch.empty(3, dtype=torch.int8, device=d)),
    "linspace_one_step_int8_out_300": lambda d: torch.linspace(
        300, 1, 1, out=torch.empty(1, dtype=torch.int8, device=d)
    ),
    "tril_indices_float": lambda d: torch.tril_indices(3, 3, dtype=torch.float32, device=d),
    "triu_indices_int16": lambda d: torch.triu_indices(3, 3, dtype=torch.int16, device=d),
}


@pytest.mark.parametrize("name", sorted(FACTORY_REFUSALS))
def test_factory_refusals_match_cpu(name):
    fn = FACTORY_REFUSALS[name]
    try:
        fn("cpu")
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        expected = type(e)
    else:
        raise AssertionError("CPU accepted the input")
    with pytest.raises(expected):
        fn(DEVICE)
        torch_pjrt.synchronize()


def test_one_step_spaces_into_bool_match_cpu():
    # A single step is a fill on CPU, which takes bool outputs (only two steps or more dispatch over dtypes).
    for fn in (torch.linspace, torch.logspace):
        out = torch.empty(1, dtype=torch.bool, device=DEVICE)
        fn(1, 1, 1, out=out)
        assert_close(out, fn(1, 1, 1, out=torch.empty(1, dtype=torch.bool)))


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("initial", [None, 0.5])
def test_segment_reduce(reduce, dtype, initial):
    data = torch.randn(7, 3).to(dtype)
    data[1, 0] = 0.0  # prod's backward takes the explicit product at zeros
    data[4, 2] = data[5, 2]  # a tie for max/min
    lengths = torch.tensor([2, 0, 3, 2])
    offsets = torch.tensor([0, 2, 2, 5, 7])
    fn = torch._segment_reduce
    with lowered():
        check(lambda d, ln: fn(d, reduce, lengths=ln, initial=initial), data, lengths, grad=True)
        check(lambda d, off: fn(d, reduce, offsets=off, initial=initial), data, offsets, grad=True)
    batched = torch.randn(2, 6).to(dtype)
    check(
        lambda d, ln: fn(d, reduce, lengths=ln, axis=1, initial=initial),
        batched,
        torch.tensor([[1, 2, 3], [0, 4, 2]]),
        grad=True,
    )
    check(lambda d, ln: fn(d, reduce, lengths=ln, initial=initial), noncontig((6, 2)), torch.tensor([3, 3]), grad=True)


def test_norm_scalaropt_dtype_overloads():
    x = torch.randn(4, 5)
    check(lambda x: torch.ops.aten.norm.ScalarOpt_dtype(x, 3, dtype=torch.float32), x)
    check(lambda x: torch.ops.aten.norm.ScalarOpt_dim_dtype(x, 2, [1], True, dtype=torch.float32), x.t())
