"""Neural-network lowerings (csrc/lowering/activation.cc, loss.cc, norm.cc) and the user-level nn ops
built on them, against CPU PyTorch: activations, softmax, layer and batch
norm, losses, dropout's backward, through autograd and in every float dtype.
"""

import contextlib

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import DEVICE, assert_close, check, to_device

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
NAN, INF = float("nan"), float("inf")


@contextlib.contextmanager
def lowered():
    """Asserts the body ran without the CPU fallback."""
    torch_pjrt.reset_metrics()
    yield
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def dev(x):
    return to_device(x, DEVICE)


def x45(dtype=torch.float32):
    return torch.randn(4, 5).to(dtype)


def transposed(dtype=torch.float32):
    return torch.randn(5, 4).to(dtype).t()


# ---------------------------------------------------------------- activations

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
    "silu": F.silu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "leaky_relu": lambda a: F.leaky_relu(a, 0.2),
    "hardtanh": lambda a: F.hardtanh(a, -0.7, 1.1),
    "relu6": F.relu6,
    "elu": lambda a: F.elu(a, 0.8),
    "selu": F.selu,
    "celu": lambda a: F.celu(a, 1.3),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_forward_and_grad(name, dtype):
    fn = ACTIVATIONS[name]
    x = x45(dtype) * 3
    with lowered():
        check(fn, x, grad=True)
        if dtype == torch.float32:
            check(lambda a: fn(a * 1), transposed(dtype) * 3, grad=True)  # non-contiguous


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "hardtanh", "relu6", "elu", "selu", "celu", "tanh", "silu"])
def test_activation_special_values(name):
    x = torch.tensor([NAN, -INF, INF, 0.0, -0.0, -0.7, 1.1, 6.0, -30.0, 30.0])
    with lowered():
        check(ACTIVATIONS[name], x)


def test_hardtanh_boundaries_and_grad():
    # the gradient is 0 at and beyond the bounds, 1 strictly inside
    x = torch.tensor([-1.0, -0.5, -0.2, 0.0, 0.5, 0.7])
    with lowered():
        check(lambda a: F.hardtanh(a, -0.5, 0.5), x, grad=True)
        check(lambda a: F.hardtanh(a, -2, 2), torch.arange(-4, 5))  # integers
        check(lambda a: F.leaky_relu(a, 0.1), torch.tensor([-1.0, 0.0, 1.0]), grad=True)
        check(lambda a: F.elu(a), torch.tensor([-1.0, 0.0, 1.0]), grad=True)


INPLACE = {
    "relu_": lambda a: F.relu_(a),
    "leaky_relu_": lambda a: F.leaky_relu_(a, 0.3),
    "hardtanh_": lambda a: F.hardtanh_(a, -0.5, 0.25),
    "elu_": lambda a: F.elu_(a, 0.7),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_activation_inplace_on_views(name):
    fn = INPLACE[name]

    def on_view(base):
        alias = base[:, 1]
        view = base.t()[1:]  # a strided view of base
        fn(view)
        return base, alias

    with lowered():
        check(lambda a: fn(a), x45())
        check(on_view, x45())


@pytest.mark.parametrize("name", ["elu", "leaky_relu", "hardtanh", "relu", "silu"])
def test_activation_inplace_autograd(name):
    # inplace=True on a non-leaf: elu's backward then works from the result
    kw = {"inplace": True}
    fns = {
        "elu": lambda a: F.elu(a * 1, 0.9, **kw),
        "leaky_relu": lambda a: F.leaky_relu(a * 1, 0.3, **kw),
        "hardtanh": lambda a: F.hardtanh(a * 1, -0.5, 0.5, **kw),
        "relu": lambda a: F.relu(a * 1, **kw),
        "silu": lambda a: F.silu(a * 1, **kw),
    }
    with lowered():
        check(fns[name], x45(), grad=True)


def test_activation_out_variants():
    def outs(a):
        o1, o2, o3 = (torch.empty(0, device=a.device) for _ in range(3))
        torch._C._nn.elu(a, 0.5, out=o1)
        torch._C._nn.leaky_relu(a, 0.1, out=o2)
        torch._C._nn.hardtanh(a, -0.3, 0.3, out=o3)
        return o1, o2, o3

    with lowered():
        check(outs, x45())
        check(outs, transposed())


# ---------------------------------------------------------------- softmax


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dtype, log):
    fn = F.log_softmax if log else F.softmax
    x = torch.randn(3, 4, 5).to(dtype) * 4
    with lowered():
        check(lambda a: fn(a, -1), x, grad=True)
        check(lambda a: fn(a, 1), x.permute(2, 0, 1), grad=True)  # non-contiguous, a middle dim
        if dtype == torch.float32:
            check(lambda a: fn(a, 0), torch.tensor(1.5, dtype=dtype), grad=True)  # 0-d
        else:
            check(lambda a: fn(a, 1, dtype=torch.float32), x, grad=True)  # upcast first


@pytest.mark.parametrize("log", [False, True])
def test_softmax_special_rows_and_out(log):
    fn = torch._log_softmax if log else torch._softmax
    x = torch.tensor([[-INF, -INF, 0.0], [0.0, -INF, 1.0], [NAN, 1.0, 2.0], [100.0, -100.0, 0.0]])

    def out(a):
        o = torch.empty(0, device=a.device)
        torch._softmax(a, 1, False, out=o) if not log else torch._log_softmax(a, 1, False, out=o)
        return o

    with lowered():
        check(lambda a: fn(a, 1, False), x)
        check(out, x)
        check(lambda a: fn(a, 1, False), torch.zeros(0, 3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_half_to_float(dtype):
    # CPU refuses half_to_float=True; the reference is softmax of the float input
    x = x45(dtype) * 4
    with lowered():
        for log in (False, True):
            op = torch._log_softmax if log else torch._softmax
            ref = (F.log_softmax if log else F.softmax)(x.float(), 1)
            got = op(dev(x), 1, True)
            assert got.dtype == torch.float32
            assert_close(got, ref)


# ---------------------------------------------------------------- layer norm / batch norm


# Half-precision weight and bias gradients sum over the batch; CPU sums them
# in the low precision, so they differ from float32 sums by a few ulps.
LN_TOL = {torch.float32: {}, torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2}, torch.float16: {"rtol": 5e-3, "atol": 5e-3}}


@pytest.mark.parametrize(
    "dtype,affine",
    [
        (torch.float32, "none"),
        (torch.float32, "weight"),
        (torch.float32, "both"),
        (torch.bfloat16, "both"),
        (torch.float16, "both"),
        (torch.float16, "none"),
    ],
)
def test_layer_norm(dtype, affine):
    x = torch.randn(3, 4, 5).to(dtype) * 2 + 1
    w = torch.randn(4, 5).to(dtype) if affine != "none" else None
    b = torch.randn(4, 5).to(dtype) if affine == "both" else None
    args = [a for a in (w, b) if a is not None]
    tol = LN_TOL[dtype]

    def ln(shape):
        return lambda a, *wb: F.layer_norm(a, shape, *wb, eps=1e-3)

    with lowered():
        check(ln((4, 5)), x, *args, grad=True, **tol)
        if dtype == torch.float32:
            check(ln((5,)), x.transpose(0, 1), *[a[0] for a in args], grad=True)  # non-contiguous input
        check(
            lambda a, *wb: torch.ops.aten.native_layer_norm(a, (4, 5), *wb, *([None] * (2 - len(wb))), 1e-5),
            x,
            *args,
            **tol,
        )


def test_layer_norm_mixed_dtypes():
    # bfloat16 input with float32 weight and bias: mean and rstd are float32
    x, w, b = x45(torch.bfloat16), torch.randn(5), torch.randn(5)
    tol = {"rtol": 1.6e-2, "atol": 1e-2}
    with lowered():
        check(lambda a, w, b: torch.ops.aten.native_layer_norm(a, (5,), w, b, 1e-5), x, w, b, **tol)
        check(lambda a, w, b: F.layer_norm(a, (5,), w, b), x, w, b, grad=True, **tol)


def test_layer_norm_constant_rows_and_backward_mask():
    x = torch.ones(2, 5) * 3
    with lowered():
        check(lambda a: F.layer_norm(a, (5,)), x, grad=True)
        x, w, b = x45(), torch.randn(5), torch.randn(5)
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, (5,), w, b, 1e-5)
        g = torch.randn(4, 5)
        for mask in ([True, True, True], [True, False, False], [False, True, False], [False, False, True]):
            # CPU leaves the outputs not asked for undefined; compare the others
            check(
                lambda g, x, m, r, w, b, mask=mask: [
                    o
                    for o, want in zip(torch.ops.aten.native_layer_norm_backward(g, x, (5,), m, r, w, b, mask), mask)
                    if want
                ],
                g,
                x,
                mean,
                rstd,
                w,
                b,
            )
        check(
            lambda g, x, m, r: torch.ops.aten.native_layer_norm_backward(
                g, x, (5,), m, r, None, None, [True, False, False]
            )[0],
            g,
            x,
            mean,
            rstd,
        )


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_no_training(dtype):
    op = torch.ops.aten._native_batch_norm_legit_no_training
    x = torch.randn(2, 3, 4).to(dtype)
    w, b, m = (torch.randn(3).to(dtype) for _ in range(3))
    v = (torch.rand(3) + 0.5).to(dtype)
    with lowered():
        check(lambda x, w, b, m, v: op(x, w, b, m, v, 0.1, 1e-5), x, w, b, m, v)
        check(lambda x, m, v: op(x, None, None, m, v, 0.1, 1e-3), torch.randn(4, 3, 2).to(dtype).permute(2, 1, 0), m, v)
        check(
            lambda x, w, b, m, v: op(x, w, b, m, v, 0.1, 1e-5), x[:, :, 0], w.float(), b.float(), m.float(), v.float()
        )


# ---------------------------------------------------------------- nll_loss / cross_entropy


REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction,weighted", [("none", True), ("mean", True), ("sum", False)])
def test_nll_loss(reduction, weighted):
    target = torch.tensor([0, 3, 1, 3, 4, 2])
    w = torch.rand(5) + 0.1 if weighted else None

    def nll(a, t, ignore=-100):
        return F.nll_loss(a, t, None if w is None else w.to(a.device), reduction=reduction, ignore_index=ignore)

    with lowered():
        check(lambda a, t: nll(a, t), torch.randn(6, 5), target, grad=True)
        check(lambda a, t: nll(a, t, 3), torch.randn(6, 5), target, grad=True)  # ignore_index
        check(lambda a, t: nll(a, t), torch.randn(5, 6).t(), target, grad=True)  # non-contiguous
        check(lambda a, t: nll(a, t), torch.randn(5), torch.tensor(2), grad=True)  # 1-D input
        check(
            lambda a, t: nll(a, t, 1), torch.randn(2, 5, 3, 4), torch.randint(0, 5, (2, 3, 4)), grad=True
        )  # nll_loss2d
        check(lambda a, t: nll(a, t), torch.randn(2, 5, 3), torch.randint(0, 5, (2, 3)), grad=True)  # K-dim


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_nll_loss_half(dtype):
    target = torch.tensor([0, 3, 1, 3])
    with lowered():
        for reduction in REDUCTIONS:
            check(
                lambda a, t, reduction=reduction: F.nll_loss(a, t, reduction=reduction), x45(dtype), target, grad=True
            )
        check(lambda a, t: F.nll_loss(a, t), x45(), target, grad=True)  # mean without weight


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_empty_batch(reduction):
    # nothing to gather: mean is nan, sum 0, none empty; the gradient is empty
    empty = torch.zeros(0, dtype=torch.long)
    with lowered():
        check(lambda a, t: F.nll_loss(a, t, reduction=reduction), torch.randn(0, 5), empty, grad=True)
        check(
            lambda a, t: F.cross_entropy(a, t, torch.rand(5, device=a.device), reduction=reduction),
            torch.randn(0, 5),
            empty,
            grad=True,
        )
        if reduction == "mean":
            check(
                lambda a, t: F.nll_loss(a, t, reduction=reduction),
                torch.randn(2, 5, 0, 3),
                torch.zeros(2, 0, 3).long(),
                grad=True,
            )


def test_nll_loss_all_ignored():
    # mean over zero total weight is nan, as on CPU
    with lowered():
        check(lambda a, t: F.nll_loss(a, t, ignore_index=2), x45(), torch.full((4,), 2), grad=True)


@pytest.mark.parametrize("bad", [5, -1])
def test_nll_loss_target_out_of_range(bad):
    x = dev(x45())
    F.nll_loss(x, dev(torch.tensor([0, bad, 1, 2])))
    with pytest.raises(IndexError):
        torch_pjrt.synchronize()
    # an ignored target may be out of range; the next op works
    loss = F.nll_loss(x, dev(torch.tensor([0, -100, 1, 2])))
    assert_close(loss, F.nll_loss(x.cpu(), torch.tensor([0, -100, 1, 2])))
    with torch_pjrt.eager_mode("debug"), pytest.raises(IndexError):
        F.nll_loss(x, dev(torch.tensor([0, bad, 1, 2])))


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy(dtype):
    target = torch.tensor([0, 3, 1, 3])
    w = (torch.rand(5) + 0.1).to(dtype)
    with lowered():
        check(lambda a, t: F.cross_entropy(a, t, w.to(a.device), ignore_index=1), x45(dtype), target, grad=True)
        if dtype == torch.float32:
            check(lambda a, t: F.cross_entropy(a, t, label_smoothing=0.2), x45(dtype), target, grad=True)
            check(lambda a, p: F.cross_entropy(a, p), x45(dtype), torch.rand(4, 5).softmax(1).to(dtype), grad=True)
            check(lambda a, t: F.cross_entropy(a, t, reduction="none"), x45(dtype), target, grad=True)
            check(lambda a, t: F.cross_entropy(a, t), torch.randn(2, 5, 3), torch.randint(0, 5, (2, 3)), grad=True)


@pytest.mark.filterwarnings("ignore:torch_pjrt.*masked_select")
def test_cross_entropy_label_smoothing_with_weight():
    # PyTorch's composite masks out ignored targets with masked_select (a
    # data-dependent shape): the one op allowed to fall back here
    target = torch.tensor([0, 3, 1, 3])
    w = torch.rand(5) + 0.1
    torch_pjrt.reset_metrics()
    check(
        lambda a, t: F.cross_entropy(a, t, w.to(a.device), ignore_index=1, label_smoothing=0.2),
        x45(),
        target,
        grad=True,
    )
    assert set(torch_pjrt.metrics()["fallback_ops"]) <= {"aten::masked_select"}


# ---------------------------------------------------------------- mse / binary cross entropy


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss(dtype, reduction):
    with lowered():
        check(lambda a, b: F.mse_loss(a, b, reduction=reduction), transposed(dtype), x45(dtype), grad=True)


def test_mse_loss_broadcast_mixed_and_out():
    def out(a, b):
        o = torch.empty(0, device=a.device)
        torch._C._nn.mse_loss(a, b, 0, out=o)  # reduction none
        return o

    with lowered():
        check(lambda a, b: F.mse_loss(a, b.expand(4, 5)), x45(), torch.randn(5), grad=True)  # expanded target
        check(lambda a, b: F.mse_loss(a, b), x45(torch.float16), x45(), grad=True)  # promotes to float32
        check(out, x45(), transposed())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(dtype, reduction):
    target = torch.rand(4, 5).to(dtype)
    w = torch.rand(5).to(dtype)
    with lowered():
        # the target and weight are constants: BCE's target gradient is another op family's
        check(
            lambda a: F.binary_cross_entropy(a, target.to(a.device), reduction=reduction),
            torch.rand(4, 5).to(dtype),
            grad=True,
        )
        check(
            lambda a: F.binary_cross_entropy(a, target.to(a.device), w.to(a.device), reduction=reduction),
            torch.rand(5, 4).to(dtype).t(),
            grad=True,
        )


def test_binary_cross_entropy_edges_and_out():
    # log is clamped at -100 and the backward's denominator at 1e-12, as on CPU
    x = torch.tensor([0.0, 1.0, 0.0, 1.0, 1e-8, 1 - 1e-7, 0.5])
    t = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.3])

    def out(a):
        o = torch.empty(7, device=a.device)  # CPU does not resize this out= for reduction none
        torch._C._nn.binary_cross_entropy(a, t.to(a.device), None, 0, out=o)
        return o

    with lowered():
        check(lambda a: F.binary_cross_entropy(a, t.to(a.device), reduction="none"), x, grad=True)
        check(lambda a: F.binary_cross_entropy(a, t.to(a.device)), x, grad=True)
        check(out, x)


A = torch.ops.aten


def empty_like_out(a, dtype=None):
    return torch.empty(0, device=a.device, dtype=dtype or a.dtype)


# out= forms of the lowered nn ops (the glue derives them from the functional lowering)
NN_OUT = {
    "_softmax.out": (lambda a: A._softmax.out(a, 1, False, out=empty_like_out(a)), lambda: [x45()]),
    "_log_softmax_backward_data.out": (
        lambda g, o: A._log_softmax_backward_data.out(g, o, 1, torch.float32, out=empty_like_out(g)),
        lambda: [x45(), x45().log_softmax(1)],
    ),
    "native_layer_norm.out": (
        lambda a, w: A.native_layer_norm.out(
            a, [5], w, None, 1e-5, out0=empty_like_out(a), out1=empty_like_out(a), out2=empty_like_out(a)
        ),
        lambda: [x45(), torch.randn(5)],
    ),
    "nll_loss_forward.output": (
        lambda a, t: A.nll_loss_forward.output(
            a, t, None, 1, -100, output=empty_like_out(a), total_weight=empty_like_out(a)
        ),
        lambda: [x45(), torch.tensor([0, 1, 4, 3])],
    ),
    "nll_loss_backward.grad_input": (
        lambda g, a, t: A.nll_loss_backward.grad_input(
            g, a, t, None, 2, -100, torch.tensor(4.0), grad_input=empty_like_out(a)
        ),
        lambda: [torch.tensor(1.5), x45(), torch.tensor([0, 1, 4, 3])],
    ),
    "mse_loss_backward.grad_input": (
        lambda g, a, b: A.mse_loss_backward.grad_input(g, a, b, 1, grad_input=empty_like_out(a)),
        lambda: [torch.tensor(1.0), x45(), x45()],
    ),
    "elu_backward.grad_input": (
        lambda g, a: A.elu_backward.grad_input(g, 1.0, 1.0, 1.0, False, a, grad_input=empty_like_out(a)),
        lambda: [x45(), x45()],
    ),
    "leaky_relu_backward.grad_input": (
        lambda g, a: A.leaky_relu_backward.grad_input(g, a, 0.1, False, grad_input=empty_like_out(a)),
        lambda: [x45(), x45()],
    ),
    "hardtanh_backward.grad_input": (
        lambda g, a: A.hardtanh_backward.grad_input(g, a, -1.0, 1.0, grad_input=empty_like_out(a)),
        lambda: [x45(), x45()],
    ),
    "native_dropout_backward.out": (
        lambda g, m: A.native_dropout_backward.out(g, m, 2.0, out=empty_like_out(g)),
        lambda: [x45(), torch.rand(4, 5) > 0.5],
    ),
}


@pytest.mark.parametrize("name", list(NN_OUT))
def test_aten_out_variants(name):
    fn, make = NN_OUT[name]
    with lowered():
        check(fn, *make())


# ---------------------------------------------------------------- dropout backward


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_backward_follows_the_mask(dtype):
    p = 0.3
    x = dev(torch.rand(64, 32).to(dtype) + 0.5).requires_grad_()  # no zeros: the mask shows in the output
    g = torch.randn(64, 32).to(dtype)
    with lowered():
        y = F.dropout(x, p)
        y.backward(dev(g))
    y, grad, xc = y.detach().cpu().float(), x.grad.cpu().float(), x.detach().cpu().float()
    mask = y != 0
    assert 0.6 < mask.float().mean() < 0.8
    scale = 1 / (1 - p)
    r, a = (1e-5, 1e-5) if dtype == torch.float32 else (1e-2, 1e-2)
    torch.testing.assert_close(y, (xc * mask * scale).to(dtype).float(), rtol=r, atol=a)
    torch.testing.assert_close(grad, (g.float() * mask * scale).to(dtype).float(), rtol=r, atol=a)


def test_native_dropout_backward_direct():
    g, mask = x45(), torch.rand(4, 5) > 0.5
    with lowered():
        check(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 2.0), g, mask)
        check(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 1.25), transposed(), mask.t().contiguous().t())


def test_dropout_edge_probabilities_and_eval():
    x = x45()
    with lowered():
        check(lambda a: F.dropout(a, 0.0), x, grad=True)
        check(lambda a: F.dropout(a, 1.0), x, grad=True)
        check(lambda a: F.dropout(a, 0.5, training=False), x, grad=True)
