"""Fused optimizers (Adam, AdamW, SGD with fused=True) run natively on tpu and match CPU."""

import pytest
import torch

import torch_pjrt
from compare import DEVICE, TOLERANCES

RTOL, ATOL = 1e-5, 1e-6


def train(device, make_opt, steps=5, scheduler=None, after_warmup=None):
    """Trains Linear(8,4)->ReLU->Linear(4,2) with MSE for `steps`; returns (losses, final params on CPU)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).to(device)
    opt = make_opt(model.parameters())
    sched = scheduler(opt) if scheduler else None
    gen = torch.Generator().manual_seed(1)
    losses = []
    for i in range(steps):
        x = torch.randn(16, 8, generator=gen).to(device)
        y = torch.randn(16, 2, generator=gen).to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched:
            sched.step()
        losses.append(loss.item())
        if after_warmup and i == 1:
            after_warmup()
    return losses, [p.detach().cpu() for p in model.parameters()]


def assert_runs_close(actual, expected):
    (la, pa), (le, pe) = actual, expected
    for a, e in zip(la, le):
        assert abs(a - e) <= 1e-5 * abs(e), (la, le)
    for a, e in zip(pa, pe):
        torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL)


CONFIGS = {
    "adam": (torch.optim.Adam, dict(lr=0.01)),
    "adam_amsgrad_wd": (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    "adam_maximize": (torch.optim.Adam, dict(lr=0.01, maximize=True, betas=(0.8, 0.95))),
    "adam_beta1_large_lerp": (torch.optim.Adam, dict(lr=0.01, betas=(0.3, 0.9))),
    "adamw_wd": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    "adamw_amsgrad_maximize": (torch.optim.AdamW, dict(lr=0.01, amsgrad=True, maximize=True, weight_decay=0.05)),
    "sgd": (torch.optim.SGD, dict(lr=0.05)),
    "sgd_momentum_dampening_wd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    "sgd_nesterov_maximize": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fused_matches_cpu_fused_and_tpu_foreach(name):
    cls, kw = CONFIGS[name]
    cpu = train("cpu", lambda ps: cls(ps, fused=True, **kw))
    torch_pjrt.reset_metrics()
    tpu = train("tpu", lambda ps: cls(ps, fused=True, **kw))
    assert torch_pjrt.metrics()["fallback_ops"] == {}
    assert_runs_close(tpu, cpu)
    foreach = train("tpu", lambda ps: cls(ps, foreach=True, **kw))
    assert_runs_close(tpu, foreach)


@pytest.mark.parametrize(
    "cls,kw",
    [
        (torch.optim.Adam, dict(lr=torch.tensor(0.01))),
        (torch.optim.AdamW, dict(lr=torch.tensor(0.01), weight_decay=0.1)),
        (torch.optim.SGD, dict(lr=torch.tensor(0.05), momentum=0.5)),
    ],
    ids=["adam", "adamw", "sgd"],
)
def test_tensor_lr(cls, kw):
    cpu = train("cpu", lambda ps: cls(ps, fused=True, **kw))
    torch_pjrt.reset_metrics()
    tpu = train("tpu", lambda ps: cls(ps, fused=True, **kw))
    assert torch_pjrt.metrics()["fallback_ops"] == {}
    assert_runs_close(tpu, cpu)


@pytest.mark.parametrize(
    "cls,kw",
    [(torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)), (torch.optim.SGD, dict(lr=0.05, momentum=0.9))],
    ids=["adamw", "sgd"],
)
def test_lr_scheduler_does_not_recompile(cls, kw):
    def sched(opt):
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (1 + i))

    cpu = train("cpu", lambda ps: cls(ps, fused=True, **kw), steps=6, scheduler=sched)
    tpu = train(
        "tpu", lambda ps: cls(ps, fused=True, **kw), steps=6, scheduler=sched, after_warmup=torch_pjrt.reset_metrics
    )
    m = torch_pjrt.metrics()
    assert m["compiles"] == 0, m
    assert m["fallback_ops"] == {}
    assert_runs_close(tpu, cpu)


def _state(dtype, shapes=((5, 7), (33,)), amsgrad=True, sgd=False):
    """Random fused-optimizer arguments: params, grads and state lists (the steps stay float32)."""
    gen = torch.Generator().manual_seed(3)

    def rand(pos=False):
        return [(torch.rand if pos else torch.randn)(s, generator=gen).to(dtype) for s in shapes]

    if sgd:
        return [rand(), rand(), rand()]
    steps = [torch.tensor(float(3 + i)) for i in range(len(shapes))]
    return [rand(), rand(), rand(), rand(pos=True), rand(pos=True) if amsgrad else [], steps]


def _run_op(op, lists, device, **kw):
    lists = [[t.clone().to(device) for t in lst] for lst in lists]
    kw = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    op(*lists, **kw)
    return [[t.cpu() for t in lst] for lst in lists]


ADAM_KW = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8, amsgrad=True, maximize=False)
SGD_KW = dict(
    weight_decay=0.01, momentum=0.9, lr=0.05, dampening=0.1, nesterov=True, maximize=False, is_first_step=False
)


@pytest.mark.parametrize(
    "op,kw,sgd",
    [
        (torch.ops.aten._fused_adam, ADAM_KW, False),
        (torch.ops.aten._fused_adamw, ADAM_KW, False),
        (torch.ops.aten._fused_sgd, SGD_KW, True),
    ],
    ids=["adam", "adamw", "sgd"],
)
def test_functional_forms_return_lists_as_long_as_their_arguments(op, kw, sgd):
    # The functional forms return new lists (what torch.compile's graphs call). In fused mode the call joins a
    # region, and the lengths of its results must not be read from the call after it moved there.
    lists = _state(torch.float32, sgd=sgd)
    expected = op(*lists, **kw)
    actual = op(*[[t.to(DEVICE) for t in lst] for lst in lists], **kw)
    assert [len(lst) for lst in actual] == [len(lst) for lst in expected]
    for a_list, e_list in zip(actual, expected):
        for a, e in zip(a_list, e_list):
            torch.testing.assert_close(a.cpu(), e, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize(
    "op,kw,sgd",
    [(torch._fused_adam_, ADAM_KW, False), (torch._fused_adamw_, ADAM_KW, False), (torch._fused_sgd_, SGD_KW, True)],
    ids=["adam", "adamw", "sgd"],
)
def test_grad_scale_and_found_inf(op, kw, sgd, found_inf):
    lists = _state(torch.float32, sgd=sgd)
    scales = dict(grad_scale=torch.tensor(4.0), found_inf=torch.tensor(found_inf))
    expected = _run_op(op, lists, "cpu", **kw, **scales)
    torch_pjrt.reset_metrics()
    actual = _run_op(op, lists, DEVICE, **kw, **scales)
    assert torch_pjrt.metrics()["fallback_ops"] == {}
    for a_list, e_list, before in zip(actual, expected, lists):
        for a, e, b in zip(a_list, e_list, before):
            torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL)
            if found_inf == 1.0:
                torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize(
    "op,kw,sgd",
    [(torch._fused_adamw_, ADAM_KW, False), (torch._fused_sgd_, SGD_KW, True)],
    ids=["adamw", "sgd"],
)
def test_other_dtypes(op, kw, sgd, dtype):
    # Ten elements: PyTorch's CPU kernels then run only their scalar loop. (In torch 2.13 the vectorized
    # loop of the bf16/f16 fused SGD kernel never stores the params and misreads the momentum buffer.)
    lists = _state(dtype, shapes=((2, 5),), sgd=sgd)
    expected = _run_op(op, lists, "cpu", **kw)
    actual = _run_op(op, lists, DEVICE, **kw)
    rtol, atol = TOLERANCES[dtype]
    for a_list, e_list in zip(actual, expected):
        for a, e in zip(a_list, e_list):
            assert a.dtype == e.dtype
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol)
