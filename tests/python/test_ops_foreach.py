"""Foreach ops (torch._foreach_*) run as one program per call and match CPU, in strict and fused mode."""

import os
import sys

import pytest
import torch
from torch.testing._internal import common_methods_invocations as cmi

import torch_pjrt
from compare import DEVICE, assert_close, to_device

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
import op_coverage  # noqa: E402

MAX_SAMPLES = 2  # per OpInfo and dtype
FOREACH_OPINFOS = {
    op_coverage.key(op): op
    for db in ("foreach_unary_op_db", "foreach_binary_op_db", "foreach_pointwise_op_db", "foreach_reduce_op_db")
    for op in getattr(cmi, db)
    if op.name != "_foreach_zero"  # its samples make CPU raise (an in-place op on a leaf that requires grad)
}


@pytest.mark.parametrize("name", sorted(FOREACH_OPINFOS))
def test_opinfo_samples_match_cpu(name):
    """PyTorch's own foreach samples (every dtype CPU takes, gradients included), compared as op_coverage does."""
    status, detail = op_coverage.check_op(FOREACH_OPINFOS[name], MAX_SAMPLES)
    assert status == "native", f"{name}: {status}: {detail}"


def tensors(dtype=torch.float32, seed=0):
    """Three CPU tensors of different shapes, the last a non-contiguous view."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(4, 6, generator=g).to(dtype)
    return [torch.randn(3, 4, generator=g).to(dtype), torch.randn(5, generator=g).to(dtype), base[:, ::2].t()]


def adam_like_step(ts, ms, vs, grads, step_size, denom_scale):
    """The foreach calls of torch.optim.AdamW's step, in place."""
    torch._foreach_mul_(ts, 1 - 0.01 * 0.1)
    torch._foreach_lerp_(ms, grads, 0.1)
    torch._foreach_mul_(vs, 0.999)
    torch._foreach_addcmul_(vs, grads, grads, 1 - 0.999)
    denom = torch._foreach_sqrt(vs)
    torch._foreach_div_(denom, denom_scale)
    torch._foreach_add_(denom, 1e-8)
    torch._foreach_addcdiv_(ts, ms, denom, step_size)
    return ts + ms + vs


def test_in_place_forms_write_every_tensor_of_the_list_as_on_cpu():
    def run(device):
        ts, ms, grads = (to_device(tensors(seed=s), device) for s in (0, 1, 2))
        vs = [g.abs() for g in to_device(tensors(seed=3), device)]
        return adam_like_step(ts, ms, vs, grads, [-0.1, -0.2, -0.3], [0.5, 0.7, 0.9])

    assert_close(run(DEVICE), run(torch.device("cpu")))


def test_each_tensor_keeps_its_dtype_and_promotion():
    def run(device):
        ts = [torch.arange(6, device=device), torch.arange(4, device=device, dtype=torch.float64)]
        ts.append(torch.tensor([True, False], device=device))
        other = [torch.ones(6, device=device), torch.full((4,), 2, device=device), torch.tensor([1, 2], device=device)]
        return torch._foreach_add(ts, 1) + torch._foreach_mul(ts, 1.5) + torch._foreach_add(ts, other, alpha=3)

    assert_close(run(DEVICE), run(torch.device("cpu")))


def test_one_program_per_call_and_scalars_stay_parameters():
    expected, ds_cpu = tensors(), [t.abs() + 1 for t in tensors(seed=1)]
    ts, ds = to_device(expected, DEVICE), to_device(ds_cpu, DEVICE)
    for block in range(2):  # the first compiles (in fused mode a region of three calls)
        torch_pjrt.reset_metrics()
        for step in range(3):
            scalars = [0.01 * step + block, -0.5 * step, 2.0 + step * block]
            torch._foreach_addcdiv_(ts, ts, ds, scalars)
            torch._foreach_addcdiv_(expected, expected, ds_cpu, scalars)
        torch_pjrt.synchronize()
    met = torch_pjrt.metrics()
    assert met["compiles"] == 0, "a new scalar list value compiled again"
    assert met["op_calls"] == {"aten::_foreach_addcdiv.ScalarList": 3}
    if torch_pjrt.get_eager_mode() == "strict":
        assert met["executions"] == 3
    assert_close(ts, expected)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda a, b: torch._foreach_add(a, b[:2]), "Tensor lists must have the same number of tensors, got 3 and 2"),
        (lambda a, b: torch._foreach_mul(a, [1.0, 2.0]), "Tensor list must have same number of elements as scalar"),
        (lambda a, b: torch._foreach_lerp_(a, b[:1], 0.5), "Tensor lists must have the same number of tensors"),
        (lambda a, b: torch._foreach_mul(a, b[0]), "scalar tensor expected to be 0 dim but it has 2 dimensions"),
        (
            lambda a, b: torch._foreach_add_([x.long() for x in a], 1.5),
            "result type Float can't be cast to the desired output type Long",
        ),
    ],
)
def test_bad_lists_raise_as_on_cpu_and_the_device_keeps_working(call, message):
    for device in (torch.device("cpu"), DEVICE):
        a, b = to_device(tensors(), device), to_device(tensors(seed=1), device)
        with pytest.raises(RuntimeError, match=message):
            call(a, b)
            torch_pjrt.synchronize()
    ts = [t.to(DEVICE) for t in tensors()]
    assert_close(torch._foreach_neg(ts), torch._foreach_neg(tensors()))


def test_zero_and_max_of_each_tensor_match_cpu():
    """_foreach_max reduces each tensor whole; _foreach_zero_ zeroes each, a non-contiguous view included."""

    def run(device):
        ts = to_device(tensors(), device)
        base = torch.zeros(4, 6, device=device)
        view = base[:, 1::2]
        view.copy_(ts[2].t())
        maxes = torch._foreach_max(ts + [view])
        torch._foreach_zero_(ts + [view])
        return list(maxes) + ts + [base]

    torch_pjrt.reset_metrics()
    assert_close(run(DEVICE), run(torch.device("cpu")))
    calls = torch_pjrt.metrics()["op_calls"]
    assert calls.get("aten::_foreach_max") == 1 and calls.get("aten::_foreach_zero") == 1, (
        calls
    )  # in-place calls count as their functional op
