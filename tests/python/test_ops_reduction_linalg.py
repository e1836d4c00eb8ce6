"""Every reduction (csrc/lowering/reduction.cc) and linalg (csrc/lowering/linalg.cc) lowering against CPU PyTorch.

Same approach as test_ops_elementwise.py: each case runs on CPU and on tpu with
the same inputs and compares values, dtypes and shapes (per-dtype tolerances)
and gradients; where CPU refuses an input the tpu must refuse it too; no op
may take the CPU fallback unless a test names it.
"""

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import DEVICE, compare, fallback_guard

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTS = [torch.int64, torch.int32]
DTYPES = FLOATS + INTS + [torch.bool]
NAN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def no_fallback():
    """Fails the test if any op ran through the CPU fallback (tests may allow named ones)."""
    yield from fallback_guard()


def dname(dtype):
    return str(dtype).replace("torch.", "")


def make(shape, dtype, kind="any"):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        x = torch.randn(shape)
        return (x.abs() + 0.5 if kind == "positive" else x).to(dtype)
    lo = 1 if kind == "positive" else -4
    return torch.randint(lo, 5, shape, dtype=dtype)


# ============================================================================= reductions

# name -> fn of one [3, 4, 5] tensor; covers every reduction lowering.
REDUCTIONS = {
    "sum": lambda x: x.sum(),
    "sum_dims": lambda x: x.sum((0, 2)),
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(1),
    "prod": lambda x: x.prod(),
    "prod_dim": lambda x: x.prod(2),
    "amax": lambda x: x.amax((1, 2)),
    "amin": lambda x: x.amin(0),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "max_dim": lambda x: x.max(1),
    "min_dim": lambda x: x.min(-1),
    "argmax": lambda x: x.argmax(),
    "argmin_dim": lambda x: x.argmin(0, keepdim=True),
    "var": lambda x: x.var(1),
    "std": lambda x: x.std(),
    "var_mean": lambda x: torch.var_mean(x, (0, 2)),
    "std_mean": lambda x: torch.std_mean(x, 1, correction=0),
    "any": lambda x: x.any(),
    "any_dims": lambda x: x.any((0, 2)),
    "all_dim": lambda x: x.all(-1),  # all, any.dim, all.dims: test_reduction_dims
    "logsumexp": lambda x: x.logsumexp(1),
    "norm2": lambda x: torch.linalg.vector_norm(x),
    "norm3": lambda x: torch.linalg.vector_norm(x, 3, dim=-1),  # other ords: test_reduction_special_values
    "cumsum": lambda x: x.cumsum(1),
    "cumprod": lambda x: x.cumprod(2),
}


# int32 follows int64's rules here (int32 inputs: test_integer_extremes_and_ties, test_reduction_dtype_argument).
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool], ids=dname)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(name, dtype):
    x = make((3, 4, 5), dtype)
    if name == "prod" and dtype in FLOATS:
        x = (x.float().abs() * 0.5 + 0.6).to(dtype)  # keep 60 factors well inside float16's range
    compare(REDUCTIONS[name], x)


# (dim, keepdim) variants through the dim-taking overloads, float32.
DIM_VARIANTS = {
    "dim0": (0, False),
    "neg_dim_keep": (-1, True),
    "dims_keep": ((2, 0), True),  # unsorted
    "empty_list": ((), False),
    "none": (None, True),
}
DIM_OPS = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k),
    "mean": lambda x, d, k: x.mean(d, keepdim=k),
    "prod": lambda x, d, k: x.prod(d, keepdim=k),
    "amax": lambda x, d, k: x.amax(d if d is not None else (), keepdim=k),
    "amin": lambda x, d, k: x.amin(d if d is not None else (), keepdim=k),
    "max": lambda x, d, k: x.max(d, keepdim=k),
    "argmin": lambda x, d, k: x.argmin(d, keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k, correction=2),
    "std_mean": lambda x, d, k: torch.std_mean(x, d, keepdim=k),
    "any": lambda x, d, k: (x > 0).any(d, keepdim=k) if d is not None else (x > 0).any(),
    "all": lambda x, d, k: (x > -1).all(d, keepdim=k) if d is not None else (x > -1).all(),
    "logsumexp": lambda x, d, k: x.logsumexp(d, keepdim=k),
    "norm": lambda x, d, k: torch.linalg.vector_norm(x, 2, dim=d, keepdim=k),
    "cumsum": lambda x, d, k: x.cumsum(d),
}


@pytest.mark.parametrize("variant", DIM_VARIANTS)
@pytest.mark.parametrize("name", DIM_OPS)
def test_reduction_dims(name, variant):
    dim, keepdim = DIM_VARIANTS[variant]
    if name == "logsumexp" and variant == "empty_list":
        pytest.skip("CPU logsumexp(x, dim=()) fails inside (output with shape [] vs [1, 1, 1])")
    x = make((3, 4, 5), torch.float32)
    if name == "prod":
        x = x.abs() + 0.5
    compare(lambda t: DIM_OPS[name](t, dim, keepdim), x)


DTYPE_ARG = {
    "sum": lambda x: x.sum(1, dtype=torch.float32),
    "sum_all_int": lambda x: x.sum(dtype=torch.int32),
    "sum_f64": lambda x: x.sum((0, 1), dtype=torch.float64),
    "mean": lambda x: x.mean(dtype=torch.float32),
    "mean_dim": lambda x: x.mean(-1, dtype=torch.float64),
    "prod": lambda x: x.prod(1, dtype=torch.float32),
    "prod_all": lambda x: x.prod(dtype=torch.int64),
    "cumsum": lambda x: x.cumsum(0, dtype=torch.float32),
    "cumprod": lambda x: x.cumprod(1, dtype=torch.float64),
    "norm": lambda x: torch.linalg.vector_norm(x, dim=1, dtype=torch.float64),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.int32, torch.bool], ids=dname)
@pytest.mark.parametrize("name", DTYPE_ARG)
def test_reduction_dtype_argument(name, dtype):
    compare(DTYPE_ARG[name], make((3, 4, 5), dtype))


def special_matrix(dtype):
    """Rows with NaN, +-inf, all -inf, ties and signed zeros."""
    rows = [
        [1.0, NAN, -2.0, 3.0, NAN],
        [INF, 1.0, INF, -INF, 0.0],
        [-INF, -INF, -INF, -INF, -INF],
        [2.0, 5.0, 5.0, -1.0, 5.0],
        [0.0, -0.0, 0.0, -0.0, 0.0],
        [-3.0, -3.0, -7.0, -7.0, 1.0],
    ]
    return torch.tensor(rows).to(dtype)


SPECIAL_OPS = {
    "sum": lambda x: x.sum(1),
    "mean": lambda x: x.mean(1),
    "prod": lambda x: x.prod(1),
    "amax": lambda x: x.amax(1),
    "amin": lambda x: x.amin(1),
    "max_all": lambda x: x[1:].max(),
    "max_all_nan": lambda x: x.max(),
    "min_all": lambda x: x.min(),
    "max_dim": lambda x: x.max(1),
    "min_dim": lambda x: x.min(1),
    "argmax": lambda x: x.argmax(1),
    "argmin": lambda x: x.argmin(1),
    "argmax_flat": lambda x: x[1:].argmax(),
    "argmin_flat_nan": lambda x: x.argmin(),
    "var": lambda x: x.var(1),
    # CPU's Welford update makes the mean of an all -inf row NaN (mean() gives -inf): leave that row out.
    "std_mean": lambda x: torch.std_mean(torch.cat([x[:2], x[3:]]), 1),
    "logsumexp": lambda x: x.logsumexp(1),
    "norm2": lambda x: torch.linalg.vector_norm(x, dim=1),
    "norm_inf": lambda x: torch.linalg.vector_norm(x, INF, dim=1),
    "norm_neg_inf": lambda x: torch.linalg.vector_norm(x, -INF, dim=1),
    "norm0": lambda x: torch.linalg.vector_norm(x, 0, dim=1),
    "norm1": lambda x: torch.linalg.vector_norm(x, 1, dim=1),
    "norm_half": lambda x: torch.linalg.vector_norm(x, 0.5, dim=1),
    "cumsum": lambda x: x.cumsum(1),
    "cumprod": lambda x: x.cumprod(1),
    "any": lambda x: x.any(1),
    "all": lambda x: x.all(1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dname)
@pytest.mark.parametrize("name", SPECIAL_OPS)
def test_reduction_special_values(name, dtype):
    compare(SPECIAL_OPS[name], special_matrix(dtype))


def test_vector_norm_orders_with_kernels_of_their_own_are_constants():
    x = make((4, 6), torch.float32).to(DEVICE)
    with torch_pjrt.eager_mode("fused"):  # the pending program's text
        for ord in (2, 1, 0, INF, -INF):  # one reduction each, no power
            assert "stablehlo.power" not in torch_pjrt.stablehlo(torch.linalg.vector_norm(x, ord, dim=1))
            torch_pjrt.synchronize()
        assert "stablehlo.power" in torch_pjrt.stablehlo(torch.linalg.vector_norm(x, 3.0, dim=1))
    torch_pjrt.synchronize()
    torch.linalg.vector_norm(x, 3.0, dim=1).cpu()
    torch_pjrt.reset_metrics()
    torch.linalg.vector_norm(x, 4.5, dim=1).cpu()  # any other order is a runtime parameter
    assert torch_pjrt.metrics()["compiles"] == 0


def test_integer_extremes_and_ties():
    big = torch.tensor(
        [[torch.iinfo(torch.int64).min, 0, torch.iinfo(torch.int64).max, 5], [3, 3, -3, -3]], dtype=torch.int64
    )
    for dtype in INTS:
        x = big.to(dtype) if dtype == torch.int64 else big.clamp(-(2**31), 2**31 - 1).to(dtype)
        for fn in (
            lambda t: t.amax(1),
            lambda t: t.amin(0),
            lambda t: t.max(1),
            lambda t: t.min(1),
            lambda t: t.argmax(1),
            lambda t: t.argmin(1),
            lambda t: t.max(),
            lambda t: t.min(),
            lambda t: t.sum(1),
            lambda t: t.cumsum(1),
        ):
            compare(fn, x)
    b = torch.tensor([[False, True, True], [False, False, False]])
    for fn in (
        lambda t: t.max(1),
        lambda t: t.amin(1),
        lambda t: t.max(),
        lambda t: t.sum(1),
        lambda t: t.cumsum(1),
        lambda t: t.prod(1),
    ):
        compare(fn, b)


def test_reduced_precision_accumulates_in_float32():
    # 512 values: accumulating in bfloat16/float16 would lose several digits.
    for dtype in (torch.bfloat16, torch.float16):
        x = (torch.rand(4, 512) + 0.5).to(dtype)
        compare(lambda t: t.sum(1), x)
        compare(lambda t: t.mean(), x)
        compare(lambda t: t.var(1), x)
        compare(lambda t: torch.linalg.vector_norm(t, dim=1), x)
        compare(lambda t: t.logsumexp(1), x)
        compare(lambda t: t.cumsum(1), x, rtol=2e-2 if dtype == torch.bfloat16 else 2e-3)


@pytest.mark.filterwarnings("ignore:var.*degrees of freedom")
def test_empty_and_zero_dim_inputs():
    e = torch.randn(0, 4)
    for fn in (
        lambda t: t.sum(0),
        lambda t: t.sum(),
        lambda t: t.prod(0),
        lambda t: t.mean(0),
        lambda t: t.amax(1),
        lambda t: t.any(0),
        lambda t: t.all(1),
        lambda t: t.cumsum(0),
        lambda t: t.var(0),
        lambda t: torch.linalg.vector_norm(t, dim=0),
        lambda t: t.logsumexp(0),
        lambda t: t.max(1),
    ):
        compare(fn, e)
    assert compare(lambda t: t.amax(0), e) is not None
    assert compare(lambda t: t.max(), e) is RuntimeError
    assert compare(lambda t: t.argmax(), e) is not None
    assert compare(lambda t: t.max(0), e) is not None
    s = torch.tensor(2.5)
    for fn in (
        lambda t: t.sum(),
        lambda t: t.sum(0),
        lambda t: t.mean(-1),
        lambda t: t.prod(0),
        lambda t: t.amax(),
        lambda t: t.max(),
        lambda t: t.max(0),
        lambda t: t.argmax(0),
        lambda t: t.argmin(),
        lambda t: t.var(),
        lambda t: t.std(0, correction=0),
        lambda t: t.cumsum(0),
        lambda t: t.cumprod(-1),
        lambda t: t.logsumexp(0),
        lambda t: torch.linalg.vector_norm(t),
        lambda t: t.any(0),
        lambda t: t.all(),
        lambda t: t.min(0, keepdim=True),
    ):
        compare(fn, s)
    compare(lambda t: t.var(), torch.tensor([2.0]))  # N - correction == 0: NaN
    compare(lambda t: t.var(0, correction=5), torch.randn(3, 2))  # clamped to 0 divisor: inf


def test_reduction_errors_match_cpu():
    x = make((3, 4), torch.float32)
    assert compare(lambda t: t.sum((0, 0)), x) is RuntimeError
    assert compare(lambda t: t.sum(2), x) is IndexError
    assert compare(lambda t: t.long().mean(), x) is RuntimeError
    assert compare(lambda t: t.long().var(), x) is RuntimeError
    assert compare(lambda t: (t > 0).argmax(), x) is RuntimeError
    assert compare(lambda t: torch.linalg.vector_norm(t.long()), x) is RuntimeError


# ----------------------------------------------------------------------------- layouts, out=, in-place

LAYOUTS = {
    "transposed": ((5, 4, 3), lambda t: t.permute(2, 1, 0)),
    "stepped": ((6, 8, 10), lambda t: t[::2, 1::2, ::2]),
    "expanded": ((1, 4, 5), lambda t: t.expand(3, 4, 5)),
    "offset": ((3, 6, 5), lambda t: t[:, 2:]),
}
LAYOUT_OPS = {
    "sum": lambda x: x.sum((0, 1)),
    "amax": lambda x: x.amax(1),
    "max_dim": lambda x: x.max(0),
    "var_mean": lambda x: torch.var_mean(x, 2),
    "norm": lambda x: torch.linalg.vector_norm(x, dim=(1, 2)),
    "cumsum": lambda x: x.cumsum(0),
}


@pytest.mark.parametrize("op", LAYOUT_OPS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_reduction_noncontiguous(layout, op):
    shape, view = LAYOUTS[layout]

    def fn(base):
        v = view(base)
        assert not v.is_contiguous() and v.shape == (3, 4, 5)
        return LAYOUT_OPS[op](v)

    compare(fn, torch.randn(shape), grad=op in ("sum", "max_dim", "norm"))


REDUCTION_OUT = {
    "sum": lambda x, o: torch.sum(x, 1, out=o),
    "mean": lambda x, o: torch.mean(x, 1, out=o),
    "prod": lambda x, o: torch.prod(x, 1, out=o),
    "amax": lambda x, o: torch.amax(x, 1, out=o),
    "amin": lambda x, o: torch.amin(x, 1, out=o),
    "var": lambda x, o: torch.var(x, 1, out=o),
    "std": lambda x, o: torch.std(x, 1, out=o),
    "logsumexp": lambda x, o: torch.logsumexp(x, 1, out=o),
    "norm": lambda x, o: torch.linalg.vector_norm(x, 3, dim=1, out=o),
    "max_dim": lambda x, o: torch.max(x, 1, out=(o, torch.empty(4, 5, dtype=torch.long, device=x.device))),
    "min_dim": lambda x, o: torch.min(x, 1, out=(o, torch.empty(0, dtype=torch.long, device=x.device))),
    "argmax": lambda x, o: torch.argmax(x, 1, out=torch.empty(4, 5, dtype=torch.long, device=x.device)),
    "any": lambda x, o: torch.any(x > 0, 1, out=torch.empty(4, 5, dtype=torch.bool, device=x.device)),
    "all": lambda x, o: torch.all(x > -1, 1, out=torch.empty(0, dtype=torch.bool, device=x.device)),
    "sum_into_f64": lambda x, o: torch.sum(x, 1, out=torch.empty(4, 5, dtype=torch.float64, device=x.device)),
    "sum_resized": lambda x, o: torch.sum(x, 1, out=torch.empty(0, device=x.device)),
}


@pytest.mark.parametrize("name", REDUCTION_OUT)
def test_reduction_out(name):
    def fn(x, base):
        base = base.clone()
        out = base[1:, ::2]  # [4, 5] strided view of [5, 10]
        r = REDUCTION_OUT[name](x, out)
        return base, r

    compare(fn, make((4, 3, 5), torch.float32), make((5, 10), torch.float32))


def test_cumulative_out_and_inplace_on_views():
    x = make((4, 6), torch.float32)
    compare(lambda t: (t[1:, ::2].cumsum_(0), t)[1], x.clone())
    compare(lambda t: (t.t()[1:].cumprod_(1), t)[1], x.clone())
    compare(lambda t: (t[:, 1:].cumsum_(1, dtype=torch.float32), t)[1], x.clone())
    compare(lambda t: torch.cumsum(t, 1, out=torch.empty(0, device=t.device)), x)
    compare(
        lambda t: (lambda base: (torch.cumprod(t, 0, out=base[:, :6]), base)[1])(torch.zeros(4, 8, device=t.device)), x
    )
    i = make((4, 6), torch.int32)
    compare(lambda t: (t[1:].cumsum_(1), t)[1], i.clone())  # int32 stays int32 in place
    compare(lambda t: torch.cumsum(t, 0, out=torch.empty(4, 6, dtype=torch.int64, device=t.device)), i)


# ----------------------------------------------------------------------------- gradients

REDUCTION_GRAD = {
    "sum": lambda x: x.sum((0, 2)),
    "sum_all": lambda x: x.sum(),
    "mean": lambda x: x.mean(1, keepdim=True),
    "prod": lambda x: x.prod(1),
    "prod_all": lambda x: (x * 0.5 + 1).prod(),
    "amax": lambda x: x.amax((1, 2)),
    "amin": lambda x: x.amin(0),
    "max": lambda x: x.max(),
    "min_dim": lambda x: x.min(1)[0],
    "max_dim_keep": lambda x: x.max(-1, keepdim=True)[0],
    "var": lambda x: x.var(1),
    "std": lambda x: x.std((0, 2)),
    "var_mean": lambda x: torch.var_mean(x, 2),
    "std_mean": lambda x: torch.std_mean(x, 1),
    "logsumexp": lambda x: x.logsumexp(1),
    "norm2": lambda x: torch.linalg.vector_norm(x, dim=1),
    "norm3": lambda x: torch.linalg.vector_norm(x, 3, dim=-1),
    "norm_inf": lambda x: torch.linalg.vector_norm(x, INF, dim=2),
    "norm1": lambda x: torch.linalg.vector_norm(x, 1, dim=0),
    "cumsum": lambda x: x.cumsum(1),
    "cumprod": lambda x: x.cumprod(2),
    "softmax_like": lambda x: x - x.logsumexp(-1, keepdim=True),
}
# The derivatives of |x| (vector norms with ord 1 and inf) use sgn, which has no lowering yet.
# prod()'s derivative looks for zeros with nonzero (data-dependent shape, no lowering).
REDUCTION_GRAD_FALLBACKS = {
    "norm1": {"aten::sgn.out"},
    "norm_inf": {"aten::sgn.out"},
    "norm3": {"aten::sgn.out"},
    "prod_all": {"aten::nonzero"},
}


@pytest.mark.parametrize("name", REDUCTION_GRAD)
def test_reduction_grad(name, no_fallback):
    no_fallback.update(REDUCTION_GRAD_FALLBACKS.get(name, ()))
    compare(REDUCTION_GRAD[name], make((3, 4, 5), torch.float32), grad=True)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "var", "logsumexp", "norm2", "cumsum"])
def test_reduction_grad_bfloat16(name):
    compare(REDUCTION_GRAD[name], make((3, 4, 5), torch.bfloat16), grad=True, rtol=2e-2, atol=2e-2)


def test_max_grad_with_ties_goes_like_cpu():
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    for fn in (lambda t: t.amax(1), lambda t: t.max(1)[0], lambda t: t.max(), lambda t: t.amin(0)):
        compare(fn, x, grad=True)


# ============================================================================= linalg

LINALG = {
    "mm": (lambda a, b, c: torch.mm(a, b), ((3, 4), (4, 5), None)),
    "bmm": (lambda a, b, c: torch.bmm(a, b), ((2, 3, 4), (2, 4, 5), None)),
    "mv": (lambda a, b, c: torch.mv(a, b), ((3, 4), (4,), None)),
    "dot": (lambda a, b, c: torch.dot(a, b), ((4,), (4,), None)),
    "addmm": (lambda a, b, c: torch.addmm(c, a, b), ((3, 4), (4, 5), (3, 5))),
    "addmm_scaled": (lambda a, b, c: torch.addmm(c, a, b, beta=2, alpha=-3), ((3, 4), (4, 5), (5,))),
    "baddbmm": (lambda a, b, c: torch.baddbmm(c, a, b, beta=3, alpha=2), ((2, 3, 4), (2, 4, 5), (2, 3, 5))),
    "addbmm": (lambda a, b, c: torch.addbmm(c, a, b, alpha=2), ((2, 3, 4), (2, 4, 5), (3, 5))),
    "addmv": (lambda a, b, c: torch.addmv(c, a, b, beta=-1), ((3, 4), (4,), (3,))),
    "matmul_nd": (lambda a, b, c: torch.matmul(a, b), ((2, 3, 4), (4, 5), None)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("name", LINALG)
def test_linalg(name, dtype):
    fn, shapes = LINALG[name]
    args = [make(s, dtype) if s is not None else None for s in shapes]
    compare(fn, *args)


# beta / alpha as floats, ints, zero (beta=0 ignores NaN and inf in self); self broadcast from [5], [3, 1], 0-dim.
SCALED = {
    "beta0_nan": lambda c, a, b: torch.addmm(torch.full_like(c, NAN), a, b, beta=0),
    "beta0_inf_alpha2": lambda c, a, b: torch.addmm(torch.full_like(c, INF), a, b, beta=0, alpha=2),
    "alpha0": lambda c, a, b: torch.addmm(c, a, b, alpha=0),
    "beta_half": lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=1.5),
    "self_row": lambda c, a, b: torch.addmm(c[0], a, b, beta=2),
    "self_col": lambda c, a, b: torch.addmm(c[:, :1], a, b),
    "self_0dim": lambda c, a, b: torch.addmm(c[0, 0], a, b, alpha=-1),
    "baddbmm_beta0": lambda c, a, b: torch.baddbmm(
        torch.full((2, 3, 5), NAN, device=c.device), a.expand(2, 3, 4), b.expand(2, 4, 5), beta=0
    ),
    "baddbmm_bcast_self": lambda c, a, b: torch.baddbmm(c, a.expand(2, 3, 4), b.expand(2, 4, 5)),
    "addbmm_beta0": lambda c, a, b: torch.addbmm(c * NAN, a.expand(2, 3, 4), b.expand(2, 4, 5), beta=0),
    "addmv_beta0": lambda c, a, b: torch.addmv(c[:, 0] * NAN, a, b[:, 0], beta=0, alpha=3),
    "addmv_bcast": lambda c, a, b: torch.addmv(c[0, :1], a, b[:, 1], beta=2),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=dname)
@pytest.mark.parametrize("name", SCALED)
def test_linalg_beta_alpha(name, dtype):
    c, a, b = make((3, 5), dtype), make((3, 4), dtype), make((4, 5), dtype)
    if not dtype.is_floating_point and ("nan" in name or "inf" in name or "half" in name or "beta0" in name):
        pytest.skip("NaN, inf and fractional scalars are float cases")
    compare(SCALED[name], c, a, b)


def test_linalg_int_scalars_and_overflow():
    a, b, c = make((3, 4), torch.int32) * 1000, make((4, 5), torch.int32) * 1000, make((3, 5), torch.int32)
    compare(lambda x, y, z: torch.addmm(z, x, y, beta=3, alpha=-2), a, b, c)
    big = torch.full((2, 2), 2**40, dtype=torch.int64)
    compare(torch.mm, big, big)  # wraps like CPU


MM_LAYOUTS = {
    "a_transposed": (((4, 3), (4, 5)), lambda a, b: (a.t(), b)),
    "b_transposed": (((3, 4), (5, 4)), lambda a, b: (a, b.t())),
    "stepped": (((6, 8), (8, 10)), lambda a, b: (a[::2, ::2], b[::2, 1::2])),
    "expanded": (((1, 4), (4, 1)), lambda a, b: (a.expand(3, 4), b.expand(4, 5))),
}
MM_OPS = {
    "mm": lambda a, b: torch.mm(a, b),
    "addmm": lambda a, b: torch.addmm(b[0, :1], a, b, beta=0.5),
    "mv": lambda a, b: torch.mv(a, b[:, 0]),
    "addmv": lambda a, b: torch.addmv(a[:, 1], a, b[:, 2]),
    "bmm": lambda a, b: torch.bmm(a.expand(2, 3, 4), b.expand(2, 4, 5)),
    "baddbmm": lambda a, b: torch.baddbmm(a[:, :1], torch.stack([a, a * 2]), b.expand(2, 4, 5)),
}


@pytest.mark.parametrize("op", MM_OPS)
@pytest.mark.parametrize("layout", MM_LAYOUTS)
def test_linalg_noncontiguous(layout, op):
    shapes, view = MM_LAYOUTS[layout]

    def fn(x, y):
        a, b = view(x, y)
        assert a.shape == (3, 4) and b.shape == (4, 5)
        assert not (a.is_contiguous() and b.is_contiguous())
        return MM_OPS[op](a, b)

    compare(fn, torch.randn(shapes[0]), torch.randn(shapes[1]), grad=op in ("mm", "addmm"))


LINALG_OUT = {
    "mm": lambda a, b, c, o: torch.mm(a, b, out=o),
    "addmm": lambda a, b, c, o: torch.addmm(c, a, b, beta=2, out=o),
    "bmm": lambda a, b, c, o: torch.bmm(a.unsqueeze(0), b.unsqueeze(0), out=o.unsqueeze(0)),
    "baddbmm": lambda a, b, c, o: torch.baddbmm(c, a.unsqueeze(0), b.unsqueeze(0), out=o.unsqueeze(0)),
    "addbmm": lambda a, b, c, o: torch.addbmm(c, a.unsqueeze(0), b.unsqueeze(0), alpha=0.5, out=o),
    "mv": lambda a, b, c, o: torch.mv(a, b[:, 0], out=o[:, 0]),
    "addmv": lambda a, b, c, o: torch.addmv(c[:, 1], a, b[:, 0], out=o[:, 1]),
    "dot": lambda a, b, c, o: torch.dot(a[0], b[:, 0], out=o[0, 0]),
    "mm_resized": lambda a, b, c, o: torch.mm(a, b, out=torch.empty(0, device=a.device)),
    "mm_transposed_out": lambda a, b, c, o: torch.mm(a, b, out=torch.empty(5, 3, device=a.device).t()),
}


@pytest.mark.parametrize("name", LINALG_OUT)
def test_linalg_out(name):
    def fn(a, b, c, base):
        base = base.clone()
        out = base[1:, ::2]  # [3, 5] strided view of [4, 10]
        r = LINALG_OUT[name](a, b, c, out)
        return base, r

    compare(
        fn,
        make((3, 4), torch.float32),
        make((4, 5), torch.float32),
        make((3, 5), torch.float32),
        make((4, 10), torch.float32),
    )


LINALG_INPLACE = {
    "addmm_": lambda v, a, b: v.addmm_(a, b, beta=0.5),
    "addmm_bcast_": lambda v, a, b: v.addmm_(a, b[:, :1].expand(4, 5)),
    "baddbmm_": lambda v, a, b: v.unsqueeze(0).baddbmm_(a.unsqueeze(0), b.unsqueeze(0), alpha=2),
    "addbmm_": lambda v, a, b: v.addbmm_(torch.stack([a, a]), torch.stack([b, -b * 2])),
    "addmv_": lambda v, a, b: v[:, 0].addmv_(a, b[:, 1], beta=3),
}


@pytest.mark.parametrize("name", LINALG_INPLACE)
def test_linalg_inplace_on_view(name):
    def fn(base, a, b):
        base = base.clone()
        v = base[1:, 1::2]  # [3, 5]
        LINALG_INPLACE[name](v, a, b)
        return base, v

    compare(fn, make((4, 10), torch.float32), make((3, 4), torch.float32), make((4, 5), torch.float32))


# name -> fn of (a [3, 4], b [4, 5], c [3, 5]); the inputs a function does not use are not passed.
LINALG_GRAD = {
    "mm": lambda a, b: torch.mm(a, b),
    "addmm": lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2),
    "addmm_bcast": lambda a, b, c: torch.addmm(c[0], a, b),
    "bmm": lambda a, b: torch.bmm(torch.stack([a, a * 2]), torch.stack([b, b + 1])),
    "baddbmm": lambda a, b, c: torch.baddbmm(c, torch.stack([a, -a]), torch.stack([b, b]), beta=2),
    "addbmm": lambda a, b, c: torch.addbmm(c, torch.stack([a, a]), torch.stack([b, -b]), alpha=0.5),
    "mv": lambda a, b: torch.mv(a, b[:, 0]),
    "addmv": lambda a, b, c: torch.addmv(c[:, 0], a, b[:, 1], beta=2),
    "dot": lambda a, b: torch.dot(a[0], b[:, 0]),
    "matmul_1d_2d": lambda a, b: torch.matmul(a[0], b),
    "matmul_2d_1d": lambda a, b: torch.matmul(a, b[:, 0]),
    "matmul_batched_bcast": lambda a, b: torch.matmul(a.expand(2, 3, 4), b.expand(1, 2, 4, 5)),
    "linear": lambda a, b, c: F.linear(a.expand(2, 3, 4), b.t(), c[0]),
    "einsum": lambda a, b, c: torch.einsum("ij,jk,ik->k", a, b, c),
    "chain": lambda a, b, c: (a.t() @ c) @ b.t(),
}


def linalg_grad_inputs(name, dtype):
    inputs = [make((3, 4), dtype), make((4, 5), dtype), make((3, 5), dtype)]
    return inputs[: LINALG_GRAD[name].__code__.co_argcount]


@pytest.mark.parametrize("name", LINALG_GRAD)
def test_linalg_grad(name):
    compare(LINALG_GRAD[name], *linalg_grad_inputs(name, torch.float32), grad=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16], ids=dname)
@pytest.mark.parametrize("name", ["addmm", "bmm"])
def test_linalg_grad_reduced_precision(name, dtype):
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
    compare(LINALG_GRAD[name], *linalg_grad_inputs(name, dtype), grad=True, rtol=tol, atol=tol)


def test_linalg_reduced_precision_accumulates_in_float32():
    # K = 1024: a bfloat16/float16 accumulator would be off by far more than one rounding.
    for dtype in (torch.bfloat16, torch.float16):
        a, b = (torch.rand(4, 1024) + 0.5).to(dtype), (torch.rand(1024, 3) + 0.5).to(dtype)
        compare(torch.mm, a, b)
        compare(lambda x, y: torch.mv(x, y[:, 0]), a, b)
        compare(lambda x, y: torch.dot(x[0], y[:, 1]), a, b)
        compare(lambda x, y: torch.addmm(x[:, :3], x, y, beta=0.5), a, b)


def test_linalg_errors_match_cpu():
    a, b = make((3, 4), torch.float32), make((4, 5), torch.float32)
    assert compare(lambda x, y: torch.mm(x, y.double()), a, b) is RuntimeError
    assert compare(lambda x, y: torch.mm(x, y.t()), a, b) is RuntimeError
    assert compare(lambda x, y: torch.mm(x.unsqueeze(0), y), a, b) is RuntimeError
    assert compare(lambda x, y: torch.bmm(x.unsqueeze(0), y.unsqueeze(0).expand(2, 4, 5)), a, b) is RuntimeError
    assert compare(lambda x, y: torch.mv(x, y[0]), a, b) is RuntimeError
    assert compare(lambda x, y: torch.dot(x[0], y[0]), a, b) is RuntimeError
    assert compare(lambda x, y: torch.dot(x[0], y[:, 0].half()), a, b) is RuntimeError
    assert compare(lambda x, y: torch.addmm(x[:, :1].expand(3, 2), x, y), a, b) is RuntimeError
    assert compare(lambda x, y: torch.addmm(x.double()[:, :1], x, y), a, b) is RuntimeError
