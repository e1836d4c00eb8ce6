"""More neural-network lowerings against CPU PyTorch: hardswish/hardsigmoid,
glu, prelu, logsigmoid, mish, softplus, threshold, soft/hard shrink, huber
and smooth L1 losses, reflection/replication padding, channel shuffle and
batch norm with update. Each runs on CPU and tpu with the same inputs, in
float32 and bfloat16, forward and backward, without the CPU fallback.
"""

import contextlib

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import check

DTYPES = [torch.float32, torch.bfloat16]
NAN, INF = float("nan"), float("inf")


@contextlib.contextmanager
def lowered():
    """Asserts the body ran without the CPU fallback."""
    torch_pjrt.reset_metrics()
    yield
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def randn(*shape, dtype=torch.float32, scale=3.0):
    return (torch.randn(*shape) * scale).to(dtype)


def transposed(dtype=torch.float32):
    return randn(6, 4, dtype=dtype).t()


# ---------------------------------------------------------------- activations

ACTIVATIONS = {
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "glu": lambda a: F.glu(a, -1),
    "glu_dim0": lambda a: F.glu(a, 0),
    "logsigmoid": F.logsigmoid,
    "mish": F.mish,
    "softplus": F.softplus,
    "softplus_beta": lambda a: F.softplus(a, beta=2.0, threshold=3.0),
    "threshold": lambda a: F.threshold(a, 0.5, -2.0),
    "softshrink": lambda a: F.softshrink(a, 0.7),
    "hardshrink": lambda a: F.hardshrink(a, 0.7),
    "prelu": lambda a: F.prelu(a, torch.linspace(-0.5, 2.0, a.shape[1], dtype=a.dtype).to(a.device)),
    "prelu_single": lambda a: F.prelu(a, torch.tensor([0.3], dtype=a.dtype, device=a.device)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_forward_and_grad(name, dtype):
    fn = ACTIVATIONS[name]
    with lowered():
        check(fn, randn(4, 4, dtype=dtype), grad=True)
        check(fn, transposed(dtype), grad=True)  # non-contiguous


def test_prelu_weight_grad():
    w = torch.tensor([0.25, -0.5, 0.1])
    x = randn(2, 3, 4)
    with lowered():
        check(F.prelu, x, w, grad=True)


@pytest.mark.parametrize(
    "name", ["hardswish", "hardsigmoid", "logsigmoid", "mish", "softplus", "threshold", "softshrink", "hardshrink"]
)
def test_activation_special_values(name):
    x = torch.tensor([NAN, -INF, INF, 0.0, -0.0, -3.0, 3.0, -0.7, 0.7, 0.5, 25.0, -25.0, 100.0])
    with lowered():
        check(ACTIVATIONS[name], x)


def test_activation_inplace_and_out():
    def inplace(a):
        b = a * 1
        F.hardswish(b, inplace=True)
        c = a * 1
        F.hardsigmoid(c, inplace=True)
        d = a * 1
        F.threshold_(d, 0.1, 20.0)
        return b, c, d

    def outs(a):
        o = [torch.empty(0, device=a.device) for _ in range(5)]
        torch._C._nn.softplus(a, 1.0, 20.0, out=o[0])
        torch._C._nn.softshrink(a, 0.5, out=o[1])
        torch._C._nn.glu(a, 0, out=o[2])
        torch._C._nn.hardsigmoid(a, out=o[3])
        torch.threshold(a, 0.0, 1.0, out=o[4])
        return o

    with lowered():
        check(inplace, randn(4, 6))
        check(outs, randn(4, 6))
        check(outs, transposed())


def test_threshold_integers():
    with lowered():
        check(lambda a: F.threshold(a, 2, -1), torch.arange(-4, 6))


def test_glu_odd_dim_raises():
    x = torch.randn(3, 5, device="tpu")
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(x, -1)


# ---------------------------------------------------------------- losses


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("loss", ["huber", "smooth_l1", "smooth_l1_beta0"])
def test_regression_losses(loss, reduction, dtype):
    fns = {
        "huber": lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.8),
        "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.6),
        "smooth_l1_beta0": lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.0),
    }
    a, b = randn(5, 4, dtype=dtype, scale=1.0), randn(5, 4, dtype=dtype, scale=1.0)
    b[0, :2] = a[0, :2]  # exact ties: x - y == 0
    with lowered():
        check(fns[loss], a, b, grad=True)
        check(fns[loss], transposed(dtype), randn(4, 6, dtype=dtype), grad=True)


def test_logits_losses():
    x, y = randn(4, 5), torch.rand(4, 5)
    with lowered():
        check(F.binary_cross_entropy_with_logits, x, y, grad=True)
        check(lambda a, b: F.multilabel_soft_margin_loss(a, b), x, (y > 0.5).float(), grad=True)


# ---------------------------------------------------------------- padding

PADS = [
    ((2, 5), (1, 3)),
    ((2, 3, 5), (2, 1)),
    ((2, 4, 5), (1, 2, 3, 0)),
    ((2, 3, 4, 5), (1, 3, 2, 0)),
    ((3, 4, 3, 4), (2, 1, 0, 2, 1, 1)),
    ((2, 2, 3, 4, 3), (1, 2, 3, 0, 2, 1)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", PADS)
def test_pad_modes(shape, pad, mode, dtype):
    # CPU's backward accumulates bfloat16 gradients in bfloat16; ours sums in
    # float32 and rounds once, so sums of several terms differ by a bf16 ulp.
    tol = {"rtol": 2e-2, "atol": 0.1} if dtype == torch.bfloat16 else {}
    with lowered():
        check(lambda a: F.pad(a, pad, mode=mode), randn(*shape, dtype=dtype), grad=True, **tol)


def test_pad_non_contiguous_and_negative():
    x = randn(2, 6, 5).transpose(1, 2)  # [2, 5, 6], non-contiguous
    with lowered():
        check(lambda a: F.pad(a, (2, 3), mode="reflect"), x, grad=True)
        check(lambda a: F.pad(a, (3, 1, 0, 2), mode="replicate"), x, grad=True)
        check(lambda a: F.pad(a, (-1, 2, 1, -2), mode="replicate"), x, grad=True)
        check(lambda a: F.pad(a, (-2, 1), mode="reflect"), x, grad=True)
        check(lambda a: F.pad(a, (1, 1), mode="replicate"), torch.arange(12).reshape(2, 6))  # integers


def test_pad_out_variants():
    def outs(a):
        o1, o2 = torch.empty(0, device=a.device), torch.empty(0, device=a.device)
        torch._C._nn.reflection_pad1d(a, (2, 1), out=o1)
        torch._C._nn.replication_pad2d(a, (1, 1, 2, 0), out=o2)
        return o1, o2

    with lowered():
        check(outs, randn(2, 4, 5))


def test_reflect_pad_too_large_raises():
    x = torch.randn(1, 2, 3, device="tpu")
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x, (3, 0), mode="reflect")


# ---------------------------------------------------------------- channel shuffle and batch norm


@pytest.mark.parametrize("dtype", DTYPES)
def test_channel_shuffle(dtype):
    x = randn(2, 6, 3, 4, dtype=dtype)
    with lowered():
        check(lambda a: F.channel_shuffle(a, 3), x, grad=True)
        check(lambda a: F.channel_shuffle(a, 2), x.transpose(2, 3), grad=True)  # non-contiguous
        check(lambda a: F.channel_shuffle(a, 2), torch.arange(24).reshape(1, 4, 6))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(torch.randn(1, 5, 2, device="tpu"), 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_with_update(affine, dtype):
    running = torch.randn(3).to(dtype), torch.rand(3).to(dtype) + 0.5

    def fn(x, w, b):
        rm, rv = (r.clone().to(x.device) for r in running)  # written in place, no grad
        out = torch.ops.aten._batch_norm_with_update(x, w if affine else None, b if affine else None, rm, rv, 0.2, 1e-3)
        return out[:3] + (out[3].shape, rm, rv)

    x = randn(4, 3, 5, 2, dtype=dtype)
    w, b = torch.randn(3).to(dtype), torch.randn(3).to(dtype)
    # without weight, batch_norm_backward refuses an undefined weight (on CPU too)
    with lowered():
        check(fn, x, w, b, grad=affine)
        check(fn, x.transpose(2, 3), w, b, grad=affine)  # non-contiguous


def test_batch_norm_training_running_stats():
    def fn(x, w, b):
        rm, rv = torch.zeros(4, device=x.device), torch.ones(4, device=x.device)
        y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)
        return y, rm, rv

    with lowered():
        check(fn, randn(5, 4), torch.rand(4), torch.randn(4), grad=True)


# ---------------------------------------------------------------- unfold / fold and max_unpool

UNFOLDS = [
    dict(kernel_size=2),
    dict(kernel_size=(2, 3), stride=(2, 1)),
    dict(kernel_size=3, padding=1, dilation=(1, 2)),
    dict(kernel_size=(1, 2), padding=(2, 0), stride=2),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", UNFOLDS)
def test_unfold_fold(kw, dtype):
    x = randn(2, 3, 6, 7, dtype=dtype)
    cols = F.unfold(x, **kw)
    with lowered():
        check(lambda a: F.unfold(a, **kw), x, grad=True)
        check(lambda a: F.unfold(a, **kw), x.transpose(2, 3), grad=True)  # non-contiguous
        check(lambda a: F.unfold(a, **kw), x[0], grad=True)  # unbatched
        check(lambda a: F.fold(a, (6, 7), **kw), cols, grad=True)
        check(lambda a: F.fold(a, (6, 7), **kw), cols[0], grad=True)


def test_fold_bad_blocks_raises():
    with pytest.raises(RuntimeError, match="sliding blocks"):
        F.fold(torch.randn(1, 4, 5, device="tpu"), (4, 4), kernel_size=2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_max_unpool(k, dtype):
    shape = {1: (2, 3, 8), 2: (2, 3, 6, 4), 3: (1, 2, 4, 4, 6)}[k]
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[k]
    unpool = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[k]
    x = randn(*shape, dtype=dtype)
    y, idx = pool(x, 2, return_indices=True)

    def fn(a, i):
        return unpool(a, i, 2)

    with lowered():
        check(fn, y, idx, grad=True)
        check(lambda a, i: unpool(a, i, 2, output_size=[s + 1 for s in shape[2:]]), y, idx, grad=True)
        check(fn, y[0], idx[0], grad=True)  # unbatched
        if k == 2:
            check(fn, y.transpose(2, 3), idx.transpose(2, 3))  # non-contiguous


def test_max_unpool_bad_index_raises():
    y = torch.randn(1, 1, 2, 2, device="tpu")
    idx = torch.tensor([[[[0, 1], [2, 99]]]], device="tpu")
    with pytest.raises((IndexError, RuntimeError), match="invalid max index"):
        F.max_unpool2d(y, idx, 2).cpu()


# ---------------------------------------------------------------- margin losses


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(p, reduction):
    x, y = randn(5, 4, scale=1.0), torch.tensor([0, 3, 1, 1, 2])
    w = torch.rand(4) + 0.5

    def fn(a, t):
        return F.multi_margin_loss(a, t, p=p, margin=0.7, reduction=reduction)

    with lowered():
        check(fn, x, y, grad=True)
        check(fn, randn(4, 5, scale=1.0).t(), y, grad=True)  # non-contiguous
        check(fn, x[0], y[:1], grad=True)  # one sample
        check(lambda a, t: F.multi_margin_loss(a, t, p=p, weight=w.to(a.device), reduction=reduction), x, y, grad=True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = randn(3, 5, scale=1.0)
    y = torch.tensor([[3, 0, -1, 1, 2], [1, 4, 2, 0, 3], [-1, 2, 0, 0, 0]])

    def fn(a, t):
        return F.multilabel_margin_loss(a, t, reduction=reduction)

    with lowered():
        check(fn, x, y, grad=True)
        check(fn, randn(5, 3, scale=1.0).t(), y, grad=True)  # non-contiguous
        check(fn, x[0], y[0], grad=True)  # one sample


# ---------------------------------------------------------------- bicubic


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "kw",
    [
        dict(size=(7, 5), align_corners=False),
        dict(size=(3, 9), align_corners=True),
        dict(scale_factor=1.7, align_corners=False),
        dict(scale_factor=(0.6, 2.5), align_corners=False, recompute_scale_factor=False),
        dict(size=(1, 1), align_corners=True),
    ],
)
def test_interpolate_bicubic(kw, dtype):
    x = randn(2, 3, 4, 6, dtype=dtype)
    with lowered():
        check(lambda a: F.interpolate(a, mode="bicubic", **kw), x, grad=True)
        check(lambda a: F.interpolate(a, mode="bicubic", **kw), x.transpose(2, 3), grad=True)  # non-contiguous


def test_upsample_bicubic_out():
    def fn(a):
        o = torch.empty(0, device=a.device)
        torch._C._nn.upsample_bicubic2d(a, (5, 5), False, out=o)
        return o

    with lowered():
        check(fn, randn(1, 2, 3, 4))


# ---------------------------------------------------------------- distances

PS = [0.0, 1.0, 1.5, 2.0, 3.0, INF]


@pytest.mark.parametrize("p", PS)
def test_cdist(p):
    x1, x2 = randn(2, 4, 3, scale=1.0), randn(2, 5, 3, scale=1.0)
    x2[0, 1] = x1[0, 2]  # a zero distance
    with lowered():
        check(lambda a, b: torch.cdist(a, b, p=p), x1, x2, grad=p != 0.0)
        check(lambda a, b: torch.cdist(a, b, p=p), randn(3, 4, scale=1.0).t(), randn(6, 3, scale=1.0), grad=True)
        check(lambda a, b: torch.cdist(a, b, p=p), randn(1, 4, 3), randn(3, 2, 3), grad=True)  # batch broadcast


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
def test_cdist_compute_modes(mode):
    x1, x2 = randn(30, 4, scale=1.0), randn(27, 4, scale=1.0)
    with lowered():
        check(lambda a, b: torch.cdist(a, b, compute_mode=mode), x1, x2, grad=True, atol=1e-4)
        check(lambda a, b: torch.cdist(a, b), x1, x2, grad=True, atol=1e-4)  # > 25 rows: mm


@pytest.mark.parametrize("n", [2, 5, 9])
@pytest.mark.parametrize("p", PS)
def test_pdist(p, n):
    x = randn(n, 3, scale=1.0)
    with lowered():
        check(lambda a: F.pdist(a, p=p), x, grad=p != 0.0)
        check(lambda a: F.pdist(a, p=p), randn(3, n, scale=1.0).t(), grad=p != 0.0)  # non-contiguous


# ---------------------------------------------------------------- rrelu


@pytest.mark.parametrize("dtype", DTYPES)
def test_rrelu_eval(dtype):
    with lowered():
        check(lambda a: F.rrelu(a, 0.1, 0.4, training=False), randn(4, 5, dtype=dtype), grad=True)
        check(lambda a: F.rrelu(a, 0.1, 0.4, training=False), transposed(dtype), grad=True)


def test_rrelu_training_slopes_in_range_and_grad_is_noise():
    x = torch.randn(200, 3, device="tpu").requires_grad_()
    with lowered():
        y = F.rrelu(x, 0.2, 0.3, training=True)
        y.sum().backward()
        xc, yc, gc = x.detach().cpu(), y.detach().cpu(), x.grad.cpu()
    neg = xc <= 0
    slope = yc[neg] / xc[neg]
    assert ((slope >= 0.2 - 1e-6) & (slope <= 0.3 + 1e-6)).all()
    assert slope.std() > 0  # really random
    assert torch.equal(yc[~neg], xc[~neg])
    torch.testing.assert_close(gc[neg], slope)
    assert (gc[~neg] == 1).all()


def test_rrelu_with_noise_writes_noise():
    x = torch.randn(50, device="tpu")
    noise = torch.zeros(50, device="tpu")
    with lowered():
        y = torch.ops.aten.rrelu_with_noise(x, noise, 0.1, 0.5, True)
        torch_pjrt.synchronize()
    xc, nc = x.cpu(), noise.cpu()
    assert torch.equal(nc[xc > 0], torch.ones(int((xc > 0).sum())))
    torch.testing.assert_close(y.cpu(), xc * nc)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # CPU has no bfloat16 antialias kernel
@pytest.mark.parametrize(
    "kw",
    [
        dict(size=(3, 2), align_corners=False),
        dict(size=(9, 13), align_corners=False),
        dict(size=(2, 5), align_corners=True),
        dict(scale_factor=0.45, align_corners=False),
        dict(scale_factor=(0.3, 1.6), align_corners=False, recompute_scale_factor=False),
    ],
)
def test_interpolate_bilinear_antialias(kw, dtype):
    x = randn(2, 3, 8, 7, dtype=dtype)
    with lowered():
        check(lambda a: F.interpolate(a, mode="bilinear", antialias=True, **kw), x, grad=True)
        check(lambda a: F.interpolate(a, mode="bilinear", antialias=True, **kw), x.transpose(2, 3), grad=True)
