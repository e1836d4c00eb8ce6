"""Vision-model lowerings (csrc/lowering/conv.cc, pool.cc, norm.cc) against
CPU PyTorch: convolution (1d/2d/3d, strided, padded, dilated, grouped,
transposed), max/avg/adaptive pooling, batch norm (train/eval, running
statistics), group norm and upsampling, forward and backward, with no CPU
fallback.
"""

import contextlib

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import DEVICE, assert_close, check, to_device


@contextlib.contextmanager
def lowered():
    """Asserts the body ran without the CPU fallback."""
    torch_pjrt.reset_metrics()
    yield
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def dev(x):
    return to_device(x, DEVICE)


def dev_like(t, other):
    """t on other's device."""
    return t.to(other.device)


# ---------------------------------------------------------------- convolution

# name: (fn, input shape, weight shape, bias channels or 0)
CONVS = {
    "conv1d_stride_pad": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), (2, 4, 9), (6, 4, 3), 6),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), (2, 3, 8, 8), (4, 3, 3, 3), 4),
    "conv2d_stride_dilation": (
        lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=2, dilation=2),
        (2, 3, 8, 8),
        (4, 3, 3, 3),
        0,
    ),
    "conv2d_asymmetric": (
        lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=(0, 1)),
        (2, 3, 8, 8),
        (4, 3, 2, 3),
        4,
    ),
    "conv2d_groups": (lambda x, w, b: F.conv2d(x, w, b, stride=2, groups=2), (2, 4, 7, 7), (6, 2, 3, 3), 6),
    "conv2d_depthwise": (lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=4), (2, 4, 7, 7), (4, 1, 3, 3), 0),
    "conv2d_same": (lambda x, w, b: F.conv2d(x, w, b, padding="same"), (2, 3, 8, 8), (4, 3, 3, 3), 4),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, stride=2, padding=1), (1, 2, 5, 5, 5), (3, 2, 3, 3, 3), 3),
    "conv_transpose1d": (
        lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1),
        (2, 4, 9),
        (4, 3, 3),
        3,
    ),
    "conv_transpose2d_groups": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
        (2, 4, 7, 7),
        (4, 3, 3, 3),
        6,
    ),
    "conv_transpose2d_dilation": (  # output_padding >= stride (allowed below the dilation)
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=2, output_padding=2, dilation=3),
        (2, 3, 5, 5),
        (3, 2, 3, 3),
        0,
    ),
    "conv_transpose2d_big_padding": (  # padding larger than the kernel reach: crops the output
        lambda x, w, b: F.conv_transpose2d(x, w, b, padding=2),
        (2, 3, 8, 8),
        (3, 4, 2, 2),
        4,
    ),
    "conv_transpose3d": (
        lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=1, output_padding=1),
        (1, 2, 3, 3, 3),
        (2, 3, 3, 3, 3),
        3,
    ),
}


@pytest.mark.parametrize("name", list(CONVS))
def test_convolution(name):
    fn, xs, ws, bias = CONVS[name]
    x, w = torch.randn(xs), torch.randn(ws)
    b = torch.randn(bias) if bias else None
    with lowered():
        check(fn, x, w, b, grad=True)


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 0, 1)])
def test_convolution_with_a_kernel_larger_than_its_input(dims, stride, padding, dilation):
    """Late layers of a small-image network (1x1 and 2x2 inputs under 3x3 kernels) and their gradients: the
    lowering computes them as a dot of patches where XLA would swap the operands."""
    conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
    for size in (1, 2):
        if size + 2 * padding < dilation * 2 + 1:
            continue
        x = torch.randn(2, 3, *[size] * dims, dtype=torch.float64)
        w = torch.randn(4, 3, *[3] * dims, dtype=torch.float64)
        with lowered():
            check(lambda x, w: conv(x, w, stride=stride, padding=padding, dilation=dilation), x, w, grad=True)


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_of_an_input_with_an_empty_spatial_dim_raises_as_on_cpu(transposed):
    conv = F.conv_transpose2d if transposed else F.conv2d
    padding = 0 if transposed else 1  # a padded 1x1 plain convolution passes CPU's kernel-size check first
    x, w = torch.randn(2, 3, 0, 0), torch.randn(3, 3, 1, 1)
    message = r"Only zero batch or zero channel inputs are supported, but got input shape: \[2, 3, 0, 0\]"
    with pytest.raises(RuntimeError, match=message):
        conv(x, w, padding=padding)
    with pytest.raises(RuntimeError, match=message):
        conv(dev(x), dev(w), padding=padding)
    # An empty batch is an empty result, as on CPU.
    check(lambda x, w: conv(x, w, padding=padding), torch.randn(0, 3, 2, 2), w)


def test_convolution_bfloat16():
    fn, xs, ws, _ = CONVS["conv2d"]
    args = [t.to(torch.bfloat16) for t in (torch.randn(xs), torch.randn(ws), torch.randn(ws[0]))]
    with lowered():
        check(fn, *args, rtol=2e-2, atol=3e-2)
    # Gradients against float64: tpu may be at most twice as far from float64's as bfloat16 CPU is. (A fused
    # region rounds to bfloat16 only where a value leaves the program, so it need not match CPU's per-op rounding.)
    grads = {}
    for key, device, dtype in (("f64", "cpu", torch.float64), ("cpu", "cpu", None), ("tpu", "tpu", None)):
        leaves = [a.detach().to(device=device, dtype=dtype).requires_grad_() for a in args]
        out = fn(*leaves)
        out.backward(torch.ones_like(out))
        grads[key] = [leaf.grad.to("cpu", torch.float64) for leaf in leaves]
    for g64, g_cpu, g_tpu in zip(grads["f64"], grads["cpu"], grads["tpu"]):
        err_cpu = (g_cpu - g64).abs().max().item()
        err_tpu = (g_tpu - g64).abs().max().item()
        assert err_tpu <= 2 * err_cpu + 1e-2 * g64.abs().max().item(), (err_tpu, err_cpu)


def test_convolution_channels_last_input():
    fn, xs, ws, _ = CONVS["conv2d"]
    x = torch.randn(xs).to(memory_format=torch.channels_last)
    assert not x.is_contiguous()
    with lowered():
        check(fn, x, torch.randn(ws), torch.randn(ws[0]), grad=True)


def test_convolution_backward_masks():
    """Only the gradients asked for are computed; masked-off ones are zeros of the right shape."""
    g, x, w = torch.randn(2, 4, 8, 8), torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    op = torch.ops.aten.convolution_backward
    args = ([4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    with lowered():
        for mask in ([True, False, False], [False, True, True]):
            expected = op(g, x, w, *args, mask)
            actual = op(dev(g), dev(x), dev(w), *args, mask)
            for a, e in zip(actual, expected):
                if e is None:
                    assert a.shape in (x.shape, w.shape, (4,)) and not a.cpu().any()
                else:
                    assert_close(a, e)
    # _convolution (the older entry point) takes the same first nine arguments
    expected = torch.ops.aten._convolution(
        x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, False, False, True, True
    )
    with lowered():
        actual = torch.ops.aten._convolution(
            dev(x), dev(w), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, False, False, True, True
        )
    assert_close(actual, expected)
    # weight-only gradient through autograd (input does not require grad)
    wd = dev(w).requires_grad_()
    F.conv2d(dev(x), wd, padding=1).sum().backward()
    wc = w.clone().requires_grad_()
    F.conv2d(x, wc, padding=1).sum().backward()
    assert_close(wd.grad, wc.grad)


# ---------------------------------------------------------------- pooling

MAX_POOLS = {
    "k2": lambda x: F.max_pool2d(x, 2, return_indices=True),
    "k3_s2_p1": lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True),
    "k3_s2_ceil": lambda x: F.max_pool2d(x, 3, stride=2, ceil_mode=True, return_indices=True),
    "k2_dilation2_ceil": lambda x: F.max_pool2d(x, 2, stride=2, dilation=2, ceil_mode=True, return_indices=True),
    "k2x3_s1x2": lambda x: F.max_pool2d(x, (2, 3), stride=(1, 2), padding=(1, 0), return_indices=True),
}


@pytest.mark.parametrize("name", list(MAX_POOLS))
def test_max_pool2d(name):
    with lowered():
        check(MAX_POOLS[name], torch.randn(2, 3, 9, 9), grad=True)


def test_max_pool_1d_3d_unbatched_and_bfloat16():
    with lowered():
        check(lambda x: F.max_pool1d(x, 3, stride=2, padding=1, return_indices=True), torch.randn(2, 3, 9), grad=True)
        check(
            lambda x: F.max_pool3d(x, 2, stride=2, ceil_mode=True, return_indices=True),
            torch.randn(1, 2, 5, 5, 5),
            grad=True,
        )
        check(lambda x: F.max_pool2d(x, 2), torch.randn(3, 8, 8), grad=True)  # [C, H, W]
        check(lambda x: F.max_pool2d(x, 3, stride=2, padding=1), torch.randn(2, 3, 9, 9).bfloat16(), grad=True)


def test_max_pool_ties_and_infinities():
    """Ties go to the first index in the window, as on CPU; -inf inputs are not beaten by padding."""
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = 1.0
    x[0, 0, 2:, 2:] = float("-inf")
    with lowered():
        check(lambda t: F.max_pool2d(t, 2, stride=1, padding=1, return_indices=True), x, grad=True)


AVG_POOLS = {
    "k2": lambda x: F.avg_pool2d(x, 2),
    "k3_s2_p1": lambda x: F.avg_pool2d(x, 3, stride=2, padding=1),
    "k3_s2_p1_exclude_pad": lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
    "k3_s2_p1_ceil": lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
    "k3_s2_p1_ceil_exclude_pad": lambda x: F.avg_pool2d(
        x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False
    ),
    "k2x3_divisor": lambda x: F.avg_pool2d(x, (2, 3), stride=(2, 1), divisor_override=4),
}


@pytest.mark.parametrize("name", list(AVG_POOLS))
def test_avg_pool2d(name):
    with lowered():
        check(AVG_POOLS[name], torch.randn(2, 3, 9, 9), grad=True)


def test_avg_pool_1d_3d_and_bfloat16():
    with lowered():
        check(lambda x: F.avg_pool1d(x, 3, stride=2, padding=1, ceil_mode=True), torch.randn(2, 3, 9), grad=True)
        check(lambda x: F.avg_pool3d(x, 2, stride=2, ceil_mode=True), torch.randn(1, 2, 5, 5, 5), grad=True)
        check(AVG_POOLS["k3_s2_p1"], torch.randn(2, 3, 9, 9).bfloat16(), grad=True)


@pytest.mark.parametrize("size", [(3, 3), (5, 7), (9, 4)])
def test_adaptive_avg_pool2d(size):
    with lowered():
        check(lambda x: F.adaptive_avg_pool2d(x, size), torch.randn(2, 3, 9, 9), grad=True)


def test_adaptive_avg_pool_1d_3d_and_bfloat16():
    with lowered():
        check(lambda x: F.adaptive_avg_pool1d(x, 4), torch.randn(2, 3, 9), grad=True)
        check(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), torch.randn(1, 2, 5, 5, 5), grad=True)
        check(lambda x: F.adaptive_avg_pool2d(x, (3, 3)), torch.randn(2, 3, 9, 9).bfloat16(), grad=True)
        check(lambda x: F.adaptive_avg_pool2d(x, 1), torch.randn(2, 3, 9, 9), grad=True)  # global: mean


def test_adaptive_max_pool():
    with lowered():
        check(lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), torch.randn(2, 3, 9, 9), grad=True)
        check(lambda x: F.adaptive_max_pool1d(x, 4), torch.randn(2, 3, 9), grad=True)
        check(lambda x: F.adaptive_max_pool3d(x, 2, return_indices=True), torch.randn(1, 2, 5, 5, 5), grad=True)


# ---------------------------------------------------------------- batch norm


def batch_norm_train(rm, rv, momentum=0.1):
    """F.batch_norm in training mode on copies of the running stats (on the input's device); returns them too."""

    def fn(x, w=None, b=None):
        stats = [None if s is None else s.to(x.device, copy=True) for s in (rm, rv)]
        y = F.batch_norm(x, stats[0], stats[1], w, b, training=True, momentum=momentum, eps=1e-5)
        return y, stats[0], stats[1]

    return fn


@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 4), (2, 3, 2, 3, 2)])
def test_batch_norm_train_updates_running_stats(shape):
    c = shape[1]
    x, w, b = torch.randn(shape) * 2 + 1, torch.randn(c), torch.randn(c)
    with lowered():
        check(batch_norm_train(torch.randn(c), torch.rand(c) + 0.5), x, w, b, grad=True)


def test_batch_norm_eval_no_affine_no_stats_and_bfloat16():
    x, rm, rv, w, b = torch.randn(2, 3, 4, 4), torch.randn(3), torch.rand(3) + 0.5, torch.randn(3), torch.randn(3)
    with lowered():
        check(
            lambda x, w, b: F.batch_norm(x, dev_like(rm, x), dev_like(rv, x), w, b, False, 0.1, 1e-3),
            x,
            w,
            b,
            grad=True,
        )
        check(batch_norm_train(None, None), x, w, b, grad=True)
        check(batch_norm_train(rm, rv, momentum=0.3), x, grad=True)
        xb = x.bfloat16()
        check(batch_norm_train(rm.bfloat16(), rv.bfloat16()), xb, w.bfloat16(), b.bfloat16(), grad=True)
        # mixed precision: bfloat16 input, float32 parameters and statistics
        check(batch_norm_train(rm, rv), xb, w, b, grad=True)


def test_batch_norm_legit_variants():
    x, w, b = torch.randn(2, 3, 4, 4), torch.randn(3), torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    aten = torch.ops.aten
    with lowered():
        for training in (True, False):
            rm_c, rv_c, rm_d, rv_d = rm.clone(), rv.clone(), dev(rm), dev(rv)
            expected = aten._native_batch_norm_legit(x, w, b, rm_c, rv_c, training, 0.1, 1e-5)
            actual = aten._native_batch_norm_legit(dev(x), dev(w), dev(b), rm_d, rv_d, training, 0.1, 1e-5)
            assert_close(actual, expected)
            assert_close([rm_d, rv_d], [rm_c, rv_c])
        expected = aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)
        assert_close(aten._native_batch_norm_legit.no_stats(dev(x), dev(w), dev(b), True, 0.1, 1e-5), expected)
        expected = aten._native_batch_norm_legit_functional(x, w, b, rm, rv, True, 0.1, 1e-5)
        actual = aten._native_batch_norm_legit_functional(dev(x), dev(w), dev(b), dev(rm), dev(rv), True, 0.1, 1e-5)
        assert_close(actual, expected)


def test_small_cnn_train_step():
    """Conv -> BatchNorm -> ReLU -> MaxPool -> Conv -> GroupNorm -> AdaptiveAvgPool -> Linear, one SGD step:
    the parameters, running statistics and batch counter match CPU."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
        torch.nn.GroupNorm(4, 8),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 5),
    )
    x, target = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    models = {"cpu": model, "tpu": __import__("copy").deepcopy(model).to(DEVICE)}
    with lowered():
        for device, m in models.items():
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            for _ in range(2):
                loss = F.cross_entropy(m(x.to(device)), target.to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
        m_cpu, m_dev = models["cpu"], models["tpu"]
        for (name, a), (_, e) in zip(m_dev.state_dict().items(), m_cpu.state_dict().items()):
            assert_close(a, e, rtol=1e-4, atol=1e-5, msg=name)
        m_cpu.eval(), m_dev.eval()
        assert_close(m_dev(dev(x)), m_cpu(x), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- group norm


@pytest.mark.parametrize("groups,shape", [(3, (2, 6, 4, 4)), (1, (2, 6, 5)), (6, (2, 6, 3, 2, 2))])
def test_group_norm(groups, shape):
    c = shape[1]
    with lowered():
        check(
            lambda x, w, b: F.group_norm(x, groups, w, b, eps=1e-4),
            torch.randn(shape) * 3 + 1,
            torch.randn(c),
            torch.randn(c),
            grad=True,
        )


def test_group_norm_no_affine_and_bfloat16():
    x = torch.randn(2, 6, 4, 4)
    with lowered():
        check(lambda x: F.group_norm(x, 2), x, grad=True)
        check(
            lambda x, w, b: F.group_norm(x, 3, w, b),
            x.bfloat16(),
            torch.randn(6).bfloat16(),
            torch.randn(6).bfloat16(),
            grad=True,
        )


def test_native_group_norm_outputs():
    x, w, b = torch.randn(2, 6, 4, 4), torch.randn(6), torch.randn(6)
    with lowered():
        check(lambda x, w, b: torch.ops.aten.native_group_norm(x, w, b, 2, 6, 16, 3, 1e-5), x, w, b)


# ---------------------------------------------------------------- upsampling

UPSAMPLES = {
    "nearest_scale2": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    "nearest_size": lambda x: F.interpolate(x, size=(7, 11), mode="nearest"),
    "nearest_scale1.7": lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest"),
    "nearest_down": lambda x: F.interpolate(x, size=(3, 4), mode="nearest"),
    "nearest_exact": lambda x: F.interpolate(x, size=(7, 11), mode="nearest-exact"),
    "bilinear_size": lambda x: F.interpolate(x, size=(7, 11), mode="bilinear", align_corners=False),
    "bilinear_size_align": lambda x: F.interpolate(x, size=(7, 11), mode="bilinear", align_corners=True),
    "bilinear_scale": lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear", align_corners=False),
    "bilinear_scale_align": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
    "bilinear_down": lambda x: F.interpolate(x, size=(3, 4), mode="bilinear", align_corners=False),
}


@pytest.mark.parametrize("name", list(UPSAMPLES))
def test_upsample2d(name):
    with lowered():
        check(UPSAMPLES[name], torch.randn(2, 3, 5, 6), grad=True)


def test_upsample_1d_3d_and_bfloat16():
    with lowered():
        check(lambda x: F.interpolate(x, scale_factor=2.5, mode="nearest"), torch.randn(2, 3, 5), grad=True)
        check(lambda x: F.interpolate(x, size=8, mode="nearest-exact"), torch.randn(2, 3, 5), grad=True)
        check(lambda x: F.interpolate(x, size=8, mode="linear", align_corners=False), torch.randn(2, 3, 5), grad=True)
        check(lambda x: F.interpolate(x, size=(4, 6, 5), mode="nearest"), torch.randn(1, 2, 3, 3, 4), grad=True)
        check(lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest-exact"), torch.randn(1, 2, 3, 3, 4), grad=True)
        check(
            lambda x: F.interpolate(x, scale_factor=2, mode="trilinear", align_corners=True),
            torch.randn(1, 2, 3, 3, 4),
            grad=True,
        )
        check(UPSAMPLES["bilinear_scale"], torch.randn(2, 3, 5, 6).bfloat16(), grad=True)
        check(UPSAMPLES["nearest_size"], torch.randn(2, 3, 5, 6).to(memory_format=torch.channels_last), grad=True)
