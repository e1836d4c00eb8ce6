"""The seed models of op coverage (examples/) train and infer on tpu as on CPU, with no CPU fallback.

Training in float32 is chaotic: two correct float32 implementations round
differently (another summation order, another CPU's vector width, another
thread count), and training amplifies those last-bit differences. ResNet-18
even meets near-ties (its max pools and ReLUs) that the rounding decides: at
step 3 one stem weight's gradient differs by 12% between float32 CPU's runs
with one thread and with two, whose parameters differ only by rounding, and
from then on the runs differ in the second digit (see TRAJECTORY_FLOOR). So
no test here compares two float32 trajectories with a fixed tolerance. Every
comparison is against float64 CPU, and tpu may be at most RATIO times as far
from float64 as float32 CPU is, plus a small floor for what float32 CPU
happens to get almost exactly:

- test_training_steps_match_float64: the example's own trainer runs STEPS
  steps on tpu; each step is replayed on float32 CPU and on float64 CPU from
  tpu's state before it (parameters, buffers, optimizer state) with the same
  batch. The loss, the gradients the optimizer sees, the change of every
  parameter and buffer (BatchNorm running statistics) and the new optimizer
  state must be as close to float64's as float32 CPU's are. This is where a
  wrong lowering shows: an error of 1e-3 relative in one op is far beyond
  float32's ~1e-6.
- test_training_tracks_float64: the whole run on tpu is finite, lowers the
  loss, and its losses stay as close to float64's own run as RATIO times the
  largest deviation of float32 CPU's run so far, or TRAJECTORY_FLOOR.
- eval-mode inference gives close outputs; no op ran through the CPU fallback.

The tests pass with one torch CPU thread (the default here) and with two:
TORCH_PJRT_TEST_THREADS=1,2 runs each with both (the module's `threads`
fixture), since float32 CPU's rounding depends on the thread count.
Also DLRM's embedding bag on its own, in every mode, with its backward ops.
"""

import contextlib
import importlib
import inspect
import math
import os
import sys
from unittest import mock

import pytest
import torch
from torch.overrides import TorchFunctionMode

import torch_pjrt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

MODELS = ["mingpt", "llama", "qwen", "resnet18", "dlrm", "unet"]
STEPS = 10
# tpu may be RATIO times as far from float64 as float32 CPU is ...
RATIO = 10.0
# ... plus FLOOR relative to the float64 value's norm (float32 CPU can be
# almost exact by luck: a one-element gradient that rounds to the nearest
# float32, or the loss of the very first step) ...
FLOOR = 1e-5
# ... plus, for a parameter's change in one step, ULPS float32 units in the
# last place of the parameter (the resolution float32 stores it with at all).
ULPS = 2.0
EPS32 = torch.finfo(torch.float32).eps
# float32 CPU's error over all gradients (or changes, ...) of a step is ~1e-6;
# beyond SANE the float64 replay is not the same computation (a broken test).
SANE = 1e-2
# Free-running runs: a tie flipped by rounding sends a run elsewhere. Of 60
# float32 CPU runs of ResNet-18 dithered by half an ulp per step, 58 stay within
# 6e-6 of float64's losses for 10 steps and 2 are 7e-2 off (the undithered run
# with one thread: 3e-4 at step 4, 5e-2 at step 9). The other models' dithered
# runs all stay within 5e-7.
TRAJECTORY_FLOOR = {"resnet18": 0.15}
TRAJECTORY_FLOOR_SMOOTH = 1e-4


# torch CPU thread counts to run every test with, e.g. TORCH_PJRT_TEST_THREADS=1,2 (float32 CPU's
# rounding, the reference's, depends on it; tpu's does not).
THREADS = [int(n) for n in os.environ.get("TORCH_PJRT_TEST_THREADS", "1").split(",")]


@pytest.fixture(scope="module", autouse=True, params=THREADS, ids=lambda n: f"{n}thread")
def threads(request):
    """Every test runs with torch's CPU thread pool at each of THREADS (default one thread).

    One thread is the fast case on a busy 2-core machine, where the pool
    spinning against other processes makes CPU eager several times slower.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def _to(obj, device, dtype=None):
    """obj (tensors in tuples, lists and dicts) copied to `device`, floating tensors as `dtype`."""
    if isinstance(obj, dict):
        return {k: _to(v, device, dtype) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to(o, device, dtype) for o in obj)
    if isinstance(obj, torch.Tensor):
        return obj.detach().to(device, dtype if dtype is not None and obj.is_floating_point() else None, copy=True)
    return obj


class _Float32AsFloat64(TorchFunctionMode):
    """Makes explicit float32 requests float64 (unet's timestep embedding asks for float32 by name)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        swap = lambda v: torch.float64 if v is torch.float32 else v
        return func(*(swap(a) for a in args), **{k: swap(v) for k, v in (kwargs or {}).items()})


@contextlib.contextmanager
def _float64():
    """Inside, the models compute in float64 throughout (given float64 parameters and inputs)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with _Float32AsFloat64():
            yield
    finally:
        torch.set_default_dtype(before)


class _Trainer:
    """The example's own trainer (make_trainer) on `device`, in float32 or (CPU only) float64.

    Records what each step did: the batch it drew, and, just before the
    optimizer's update, the gradients the optimizer sees and its state.
    step(batch) makes the step use `batch` instead of drawing its own; a
    float64 trainer casts it exactly, so that all runs see the same data.
    """

    def __init__(self, module, device: str, float64: bool = False, compiled: bool = False):
        self.module, self.float64, self.supply, self.batches, self.grads, self.opt_states = (
            module,
            float64,
            [],
            [],
            [],
            [],
        )
        batch = module.batch

        def draw(*args, **kwargs):
            b = self.supply.pop(0) if self.supply else batch(*args, **kwargs)
            self.batches.append(b)
            return _to(b, "cpu", torch.float64) if float64 else b

        self.draw = draw
        build = module.build_model  # a float64 trainer starts from the float32 initial parameters, cast exactly
        if float64:
            build = _cast_double(build)
        if compiled:
            build = _compiled(build)
        with mock.patch.object(module, "build_model", build):
            self.model, self.step_fn = module.make_trainer(device)
        self.opt = inspect.getclosurevars(self.step_fn).nonlocals["opt"]
        names = {id(p): n for n, p in self.model.named_parameters()}
        self.opt_names = [names[id(p)] for group in self.opt.param_groups for p in group["params"]]

        def before_update(opt, *_):
            params = (p for group in opt.param_groups for p in group["params"] if p.grad is not None)
            self.grads.append({names[id(p)]: p.grad.detach().cpu() for p in params})
            self.opt_states.append(_to(opt.state_dict()["state"], "cpu"))

        self.opt.register_step_pre_hook(before_update)

    def step(self, batch=None) -> float:
        if batch is not None:
            self.supply.append(batch)
        with mock.patch.object(self.module, "batch", self.draw):
            with _float64() if self.float64 else contextlib.nullcontext():
                return self.step_fn().item()

    def state(self) -> dict:
        """Parameters and buffers, copied to CPU."""
        return _to(self.model.state_dict(), "cpu")

    def opt_state(self) -> dict:
        """The optimizer's state now, copied to CPU: {'parameter name.exp_avg': tensor, ...}."""
        return {
            f"{self.opt_names[i]}.{k}": v
            for i, s in _to(self.opt.state_dict()["state"], "cpu").items()
            for k, v in s.items()
        }

    def load(self, state: dict, opt_state: dict, opt_groups: list) -> None:
        self.model.load_state_dict(state)
        # A copy: load_state_dict keeps tensors of the right dtype and device as they are, and step() updates them.
        self.opt.load_state_dict({"state": _to(opt_state, "cpu"), "param_groups": opt_groups})


def _cast_double(build):
    return lambda: build().double()


def _compiled(build):
    """build_model, with the model compiled in place by torch.compile(backend="tpu")."""

    def compiled_build():
        model = build()
        model.compile(backend="tpu")
        return model

    return compiled_build


@pytest.fixture(params=[False, True], ids=["eager", "compiled"])
def compiled(request, eager_mode_name):
    """Eager, and under torch.compile(backend="tpu") (whose graphs run fused whatever the eager mode around them)."""
    if request.param:
        if eager_mode_name != "strict":
            pytest.skip("torch.compile runs in strict mode only here")
        torch._dynamo.reset()
    yield request.param
    if request.param:
        torch._dynamo.reset()


def _norm(t: torch.Tensor) -> float:
    return torch.linalg.vector_norm(t.detach().cpu().double()).item()


def _check(failures: list, what: str, tpu, cpu32, ref, ulp_of=None) -> None:
    """tpu no farther from ref (float64) than RATIO times float32 CPU, plus the floors; else a failure line.

    ulp_of: the parameter before the step, when the values are its change.
    """
    if not ref.is_floating_point():
        if not torch.equal(tpu.cpu(), ref):
            failures.append(f"{what}: tpu {tpu.tolist()} float64 CPU {ref.tolist()}")
        return
    scale = max(_norm(ref), 1e-30)
    e_tpu, e_cpu = _norm(tpu.cpu().double() - ref), _norm(cpu32.double() - ref)
    limit = RATIO * e_cpu + FLOOR * scale + (0.0 if ulp_of is None else ULPS * EPS32 * _norm(ulp_of))
    if not e_tpu <= limit:  # NaN fails too
        failures.append(
            f"{what}: relative error to float64 tpu {e_tpu / scale:.2e}, float32 CPU {e_cpu / scale:.2e}"
            f" (limit {limit / scale:.2e})"
        )


def _check_all(failures: list, what: str, tpu: dict, cpu32: dict, ref: dict, ulp_of=None) -> None:
    """_check for each entry; and float32 CPU within SANE of float64 over all of them (else the test is broken)."""
    assert tpu.keys() == cpu32.keys() == ref.keys(), what
    for key in ref:
        _check(failures, f"{what} {key}", tpu[key], cpu32[key], ref[key], None if ulp_of is None else ulp_of[key])
    floats = [k for k, v in ref.items() if v.is_floating_point()]
    e_cpu = math.hypot(*(_norm(cpu32[k].double() - ref[k]) for k in floats))
    scale = math.hypot(*(_norm(ref[k]) for k in floats))
    assert e_cpu <= SANE * scale, f"{what}: float32 CPU is {e_cpu / scale:.1e} from float64, not the same computation"


def _change(after: dict, before: dict) -> dict:
    """What one step changed: after - before for floating tensors, the integer ones (step counts) as they are."""
    return {k: v - before[k] if v.is_floating_point() else v for k, v in after.items()}


@pytest.mark.parametrize("name", MODELS)
def test_training_steps_match_float64(name, threads, compiled):
    """Each step of tpu's run, replayed on float32 and float64 CPU from tpu's state before it."""
    module = importlib.import_module(name)
    torch_pjrt.reset_metrics()
    tpu = _Trainer(module, "tpu", compiled=compiled)
    replays = {"cpu32": _Trainer(module, "cpu"), "cpu64": _Trainer(module, "cpu", float64=True)}
    groups = tpu.opt.state_dict()["param_groups"]
    failures, losses = [], []
    before = tpu.state()
    for i in range(STEPS):
        losses.append(tpu.step())
        out = {"tpu": (losses[-1], tpu.grads[-1], tpu.state(), tpu.opt_state())}
        for kind, replay in replays.items():
            replay.load(before, tpu.opt_states[-1], groups)
            loss = replay.step(tpu.batches[-1])
            out[kind] = (loss, replay.grads[-1], replay.state(), replay.opt_state())
        (lt, gt, st, ot), (l32, g32, s32, o32), (l64, g64, s64, o64) = out["tpu"], out["cpu32"], out["cpu64"]
        _check_all(failures, f"step {i}", *({"loss": torch.tensor(v, dtype=torch.float64)} for v in (lt, l32, l64)))
        _check_all(failures, f"step {i} gradient of", gt, g32, g64)
        changes = (_change(s, before) for s in (st, s32, s64))
        _check_all(failures, f"step {i} change of", *changes, ulp_of=before)
        _check_all(failures, f"step {i} optimizer state", ot, o32, o64)
        before = st
    fallbacks = dict(torch_pjrt.metrics()["fallback_ops"])
    if compiled:  # at least a forward and a backward program per step, walked or replayed
        m = torch_pjrt.metrics()
        assert m["regions"] + m["graph_replays"] >= 2 * STEPS
    assert not failures, f"{name}, {len(failures)} checks failed:\n" + "\n".join(failures[:20])
    assert all(math.isfinite(t) for t in losses) and losses[-1] < losses[0], losses
    assert fallbacks == {}, f"{name} ran ops through the CPU fallback: {fallbacks}"


@pytest.mark.parametrize("name", MODELS)
def test_training_tracks_float64(name, threads):
    """The example's STEPS-step run on tpu stays as close to float64's run as float32 CPU's does."""
    module = importlib.import_module(name)
    cpu32 = _Trainer(module, "cpu")
    losses32 = [cpu32.step() for _ in range(STEPS)]
    cpu64 = _Trainer(module, "cpu", float64=True)
    losses64 = [cpu64.step(b) for b in cpu32.batches]
    torch_pjrt.reset_metrics()
    tpu = _Trainer(module, "tpu")
    losses_tpu = [tpu.step() for _ in range(STEPS)]
    fallbacks = dict(torch_pjrt.metrics()["fallback_ops"])

    assert all(math.isfinite(t) for t in losses_tpu), losses_tpu
    assert losses_tpu[-1] < losses_tpu[0], losses_tpu
    table = f"float64 {losses64}\nfloat32 CPU {losses32}\ntpu {losses_tpu}"
    assert abs(losses32[0] - losses64[0]) <= 1e-5 * abs(losses64[0]), f"float64's run starts elsewhere\n{table}"
    worst32 = 0.0
    for i, (c, t, r) in enumerate(zip(losses32, losses_tpu, losses64)):
        worst32 = max(worst32, abs(c - r) / abs(r))
        limit = max(RATIO * worst32, TRAJECTORY_FLOOR.get(name, TRAJECTORY_FLOOR_SMOOTH))
        assert abs(t - r) / abs(r) <= limit, f"{name} step {i}: tpu {abs(t - r) / abs(r):.2e} > {limit:.2e}\n{table}"
    for key, value in tpu.model.state_dict().items():
        assert value.device.type == "tpu", key
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
def test_inference_matches_cpu(name, compiled):
    model = importlib.import_module(name)
    cpu = model.infer("cpu")
    torch_pjrt.reset_metrics()
    with (
        mock.patch.object(model, "build_model", _compiled(model.build_model)) if compiled else contextlib.nullcontext()
    ):
        tpu = model.infer("tpu")
    fallbacks = dict(torch_pjrt.metrics()["fallback_ops"])
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    tpu = tpu if isinstance(tpu, tuple) else (tpu,)
    assert len(cpu) == len(tpu)
    for c, t in zip(cpu, tpu):
        assert t.device.type == "cpu" and t.shape == c.shape
        torch.testing.assert_close(t, c, rtol=1e-4, atol=1e-5)
    assert fallbacks == {}, f"{name} ran ops through the CPU fallback: {fallbacks}"
