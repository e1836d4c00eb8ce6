"""The seed models of op coverage (examples/) train and infer on tpu as on CPU, with no CPU fallback.

For each model: the same 10 training steps on CPU and on tpu give losses
within 1e-4 relative and close final parameters and buffers; eval-mode
inference gives close outputs; and no op ran through the CPU fallback. Also
DLRM's embedding bag on its own, in every mode, with its backward ops.
"""

import importlib
import os
import sys

import pytest
import torch

import torch_pjrt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

STEPS = 10
LOSS_RTOL = 1e-4

# Tolerances of the final parameters (torch.testing.assert_close).
STRICT = dict(rtol=1e-4, atol=1e-5)
# AdamW divides each gradient element by its own running RMS, so an element
# whose true gradient is ~0 and whose computed gradient is float32 rounding
# noise moves by about lr * g / (|g| + eps) whatever its size: two correct
# implementations whose noise differs (2.07e-8 on CPU, 1.81e-8 on tpu for an
# element of unet's mid.conv1.weight at step 0) then move it by visibly
# different fractions of lr (3e-5 apart with lr 1e-3). Losses still agree to
# ~1e-7; only such elements need the looser atol, a tenth of lr.
ADAMW_NOISE = dict(rtol=1e-4, atol=1e-4)
PARAM_TOL = {
    "mingpt": STRICT,
    "llama": STRICT,
    "qwen": ADAMW_NOISE,
    "resnet18": STRICT,
    "dlrm": STRICT,
    "unet": ADAMW_NOISE,
}
MODELS = list(PARAM_TOL)


@pytest.fixture(scope="module", autouse=True)
def _one_cpu_thread():
    """The CPU reference runs on one thread: on a busy 2-core machine, torch's
    thread pool spinning against other processes makes CPU eager several
    times slower. Numerics are compared with tolerances either way."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _quiet(*_):
    pass


@pytest.mark.parametrize("name", MODELS)
def test_training_matches_cpu(name):
    model = importlib.import_module(name)
    cpu_losses, cpu_model = model.train("cpu", STEPS, log=_quiet, return_model=True)
    torch_pjrt.reset_metrics()
    tpu_losses, tpu_model = model.train("tpu", STEPS, log=_quiet, return_model=True)
    fallbacks = dict(torch_pjrt.metrics()["fallback_ops"])

    for step, (c, t) in enumerate(zip(cpu_losses, tpu_losses)):
        assert abs(c - t) <= LOSS_RTOL * abs(c), f"step {step}: cpu {cpu_losses} tpu {tpu_losses}"
    assert tpu_losses[-1] < tpu_losses[0], tpu_losses
    cpu_state, tpu_state = cpu_model.state_dict(), tpu_model.state_dict()
    assert cpu_state.keys() == tpu_state.keys()
    for key, c in cpu_state.items():
        t = tpu_state[key]
        assert t.device.type == "tpu", key
        tol = PARAM_TOL[name] if c.is_floating_point() else dict(rtol=0, atol=0)
        torch.testing.assert_close(t.cpu(), c, **tol, msg=lambda m, key=key: f"{name} {key}: {m}")
    assert fallbacks == {}, f"{name} ran ops through the CPU fallback: {fallbacks}"


def _embedding_bag_run(device, weight, ids, offsets, mode, psw, padding_idx, include_last, grad):
    w = weight.clone().to(device).requires_grad_(grad)
    p = None if psw is None else psw.clone().to(device).requires_grad_(grad)
    out = torch.nn.functional.embedding_bag(
        ids.to(device),
        w,
        offsets.to(device),
        mode=mode,
        per_sample_weights=p,
        padding_idx=padding_idx,
        include_last_offset=include_last,
    )
    results = [out]
    if grad:
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device))
        results += [w.grad] + ([p.grad] if p is not None else [])
    return [r.detach().cpu() for r in results]


# (mode, per_sample_weights, padding_idx, include_last_offset)
EMBEDDING_BAG_CASES = [
    ("sum", False, None, False),
    ("sum", True, 2, False),
    ("mean", False, 2, True),
    ("max", False, None, True),
    ("max", False, 2, False),
]


@pytest.mark.parametrize("grad", [True, False], ids=["train", "forward_only"])
def test_embedding_bag_matches_cpu(grad):
    """DLRM's op on its own, in every mode: outputs and both gradients (weight, per-sample weights)."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(7, 5, generator=gen)
    ids = torch.randint(0, 7, (12,), generator=gen)
    psw = torch.rand(12, generator=gen)
    torch_pjrt.reset_metrics()
    for mode, weighted, padding_idx, include_last in EMBEDDING_BAG_CASES:
        offsets = torch.tensor([0, 3, 3, 8, 12 if include_last else 10])  # bag 1 is empty
        args = (weight, ids, offsets, mode, psw if weighted else None, padding_idx, include_last, grad)
        cpu, tpu = _embedding_bag_run("cpu", *args), _embedding_bag_run("tpu", *args)
        for c, t in zip(cpu, tpu):
            torch.testing.assert_close(t, c, rtol=1e-5, atol=1e-6, msg=lambda m, a=args[3:7]: f"{a}: {m}")
    ops = torch_pjrt.metrics()["op_calls"]
    assert ("aten::_embedding_bag" if grad else "aten::_embedding_bag_forward_only") in ops
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_embedding_bag_dense_backward_called_directly():
    """The dense backward as _embedding_bag_backward calls it, with CPU's offset2bag and bag_size."""
    gen = torch.Generator().manual_seed(1)
    weight, grad = torch.randn(6, 3, generator=gen), torch.randn(3, 3, generator=gen)
    ids, offsets = torch.tensor([0, 5, 5, 2, 1, 5]), torch.tensor([0, 2, 2])
    _, offset2bag, bag_size, max_indices = torch.ops.aten._embedding_bag(weight, ids, offsets, False, 1)
    args = (ids, offset2bag, bag_size, max_indices, 6, False, 1, None, -1)
    cpu = torch.ops.aten._embedding_bag_dense_backward(grad, *args)
    torch_pjrt.reset_metrics()
    on_tpu = (a.to("tpu") if torch.is_tensor(a) else a for a in args)
    tpu = torch.ops.aten._embedding_bag_dense_backward(grad.to("tpu"), *on_tpu)
    torch.testing.assert_close(tpu.cpu(), cpu)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_cpu(name):
    model = importlib.import_module(name)
    cpu = model.infer("cpu")
    torch_pjrt.reset_metrics()
    tpu = model.infer("tpu")
    fallbacks = dict(torch_pjrt.metrics()["fallback_ops"])
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    tpu = tpu if isinstance(tpu, tuple) else (tpu,)
    assert len(cpu) == len(tpu)
    for c, t in zip(cpu, tpu):
        assert t.device.type == "cpu" and t.shape == c.shape
        torch.testing.assert_close(t, c, rtol=1e-4, atol=1e-5)
    assert fallbacks == {}, f"{name} ran ops through the CPU fallback: {fallbacks}"
