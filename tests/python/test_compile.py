"""``torch.compile(backend="tpu")``: graphs of the eager lowerings, each run as one program, compared with CPU eager.

The six seed models under torch.compile are in test_models.py (its ``compiled`` variants); the second process that
compiles nothing is in test_compile_cache.py.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_pjrt


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def assert_accumulated_grads_near_float64(tpu, cpu, exact, passes):
    """tpu's gradients, accumulated over `passes` backward passes, against float64 (`exact`, one pass): at most a few
    times as far from it as CPU float32's one pass times `passes` (summation orders differ by platform and CPU
    model)."""
    for p, q, e in zip(tpu.parameters(), cpu.parameters(), exact.parameters(), strict=True):
        cpu_error = (passes * q.grad.double() - passes * e.grad).abs().max().item()
        tpu_error = (p.grad.cpu().double() - passes * e.grad).abs().max().item()
        assert tpu_error <= 4 * cpu_error + 1e-6 * e.grad.abs().max().item(), (tpu_error, cpu_error)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))


def test_forward_and_backward_match_cpu_as_one_program_each():
    cpu, tpu = mlp(), mlp().to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    x = torch.randn(8, 16)
    for step in range(3):  # the first call compiles, the second accumulates gradients; the third compiles nothing
        torch_pjrt.reset_metrics()
        out = compiled(x.to("tpu"))
        out.square().sum().backward()
        torch_pjrt.synchronize()
        m = torch_pjrt.metrics()
        if step == 0:  # the graphs' nodes ran once, as one region each
            assert m["regions"] == 2 and m["ops_per_region"]["max"] > 5
    assert m["compiles"] == 0
    assert m["regions"] == 0 and m["graph_replays"] == 2  # the forward and backward programs ran with no node walked
    ref = cpu(x)
    ref.square().sum().backward()
    torch.testing.assert_close(out.cpu(), ref)
    exact = mlp().double()
    exact(x.double()).square().sum().backward()
    assert_accumulated_grads_near_float64(tpu, cpu, exact, passes=3)


def test_non_contiguous_and_in_place_inputs():
    def f(a, b):
        a.mul_(2)
        return (a.t() @ b).relu(), a[:, 1]

    a, b = torch.randn(6, 4), torch.randn(6, 3)
    ta, tb = a.to("tpu"), b.to("tpu")
    out = torch.compile(f, backend="tpu")(ta, tb[:, :])
    ref = f(a, b)
    torch.testing.assert_close(out[0].cpu(), ref[0])
    torch.testing.assert_close(out[1].cpu(), ref[1])
    torch.testing.assert_close(ta.cpu(), a)  # the mutation reached the input


def test_a_graph_first_run_on_a_never_written_input_reads_later_inputs():
    """Eager programs read a never-written storage as zeros of their own; a compiled graph runs again with other
    inputs, so it reads each input, even one that was never written when the graph was captured."""

    def f(buf, a):
        buf[:4].copy_(a)
        return buf * 2

    g = torch.compile(f, backend="tpu")
    a = torch.arange(4.0) + 1
    g(torch.empty(8, device="tpu"), a.to("tpu"))
    for fill in (5.0, 7.0):
        buf = torch.full((8,), fill).to("tpu")
        out = g(buf, a.to("tpu"))
        ref = torch.full((8,), fill)
        expected = f(ref, a)
        torch.testing.assert_close(out.cpu(), expected)
        torch.testing.assert_close(buf.cpu(), ref)


def test_cpu_scalar_tensor_and_python_scalar_are_parameters():
    def f(x, scale, shift: float):
        return x * scale + shift

    compiled = torch.compile(f, backend="tpu")
    x = torch.randn(5)
    tx = x.to("tpu")
    out = compiled(tx, torch.tensor(2.0), 0.5)
    torch.testing.assert_close(out.cpu(), f(x, torch.tensor(2.0), 0.5))
    torch_pjrt.reset_metrics()
    out = compiled(tx, torch.tensor(-3.0), 0.5)
    torch.testing.assert_close(out.cpu(), f(x, torch.tensor(-3.0), 0.5))
    assert torch_pjrt.metrics()["compiles"] == 0  # a new value of the CPU scalar tensor is not a new program


def test_inference_mode_and_no_grad():
    cpu, tpu = mlp().eval(), mlp().eval().to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    x = torch.randn(3, 16)
    with torch.inference_mode():
        out = compiled(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), cpu(x).detach())
    with torch.no_grad():
        out = compiled(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), cpu(x).detach())


def test_batchnorm_running_stats_are_written_back():
    def net():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())

    cpu, tpu = net(), net().to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    for i in range(3):
        x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(i))
        compiled(x.to("tpu")).sum().backward()
        cpu(x).sum().backward()
    bn_cpu, bn_tpu = cpu[1], tpu[1]
    torch.testing.assert_close(bn_tpu.running_mean.cpu(), bn_cpu.running_mean)
    torch.testing.assert_close(bn_tpu.running_var.cpu(), bn_cpu.running_var)
    assert bn_tpu.num_batches_tracked.item() == 3


def test_whole_train_step_with_the_optimizer():
    cpu, tpu = mlp(), mlp().to("tpu")
    opts = {m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (cpu, tpu)}

    def step(model, x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opts[model].step()
        opts[model].zero_grad()
        return loss

    compiled = torch.compile(step, backend="tpu")
    gen = torch.Generator().manual_seed(0)
    for _ in range(4):
        x, y = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
        lt = compiled(tpu, x.to("tpu"), y.to("tpu"))
        lc = step(cpu, x, y)
        torch.testing.assert_close(lt.cpu(), lc.detach(), rtol=1e-5, atol=1e-6)
    for p, q in zip(tpu.parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)


def test_a_changing_learning_rate_never_recompiles_the_compiled_optimizer_step():
    # Dynamo guards on the learning rate and traces the step again for each new value; the scalar stays a program
    # parameter, so every trace finds the program the first one compiled. The parameters match a float64 AdamW on
    # the CPU (after 5 steps float32 stays within 2e-7 of it here; the smallest gradient is 1.5e-4, far from eps).
    cpu, tpu = mlp().double(), mlp().to("tpu")
    opts = {m: torch.optim.AdamW(m.parameters(), lr=1e-3, capturable=m is tpu) for m in (cpu, tpu)}
    step = torch.compile(opts[tpu].step, backend="tpu")
    gen = torch.Generator().manual_seed(0)
    for i in range(5):
        if i == 2:
            torch_pjrt.synchronize()
            torch_pjrt.reset_metrics()
        x = torch.randn(8, 16, generator=gen)
        for m, run in ((cpu, opts[cpu].step), (tpu, step)):
            for g in opts[m].param_groups:
                g["lr"] = 1e-3 * (i + 1)
            p0 = next(m.parameters())
            m(x.to(p0.device, p0.dtype)).square().sum().backward()
            run()
            opts[m].zero_grad()
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["compiles_by_name"].get("fused_region", 0) == 0
    for p, q in zip(tpu.parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(p.detach().cpu().double(), q.detach(), rtol=1e-5, atol=1e-6)


def test_debug_callback_receives_forward_and_backward_stablehlo():
    seen = {}
    compiled = torch.compile(
        mlp().to("tpu"), backend="tpu", options={"debug_callback": lambda kind, text: seen.setdefault(kind, text)}
    )
    compiled(torch.randn(4, 16).to("tpu")).sum().backward()
    assert set(seen) == {"forward", "backward"}
    assert all("stablehlo." in text and "func.func public @main" in text for text in seen.values()), seen


def test_unknown_option_is_a_clear_error():
    with pytest.raises(Exception, match="unknown options"):
        torch.compile(lambda x: x + 1, backend="tpu", options={"no_such_option": 1})(torch.ones(2, device="tpu"))


def test_op_without_lowering_warns_and_is_correct():
    def f(x):
        return torch.linalg.eigvals(x @ x.t() + torch.eye(4, device=x.device)).real.sort().values + 1

    x = torch.randn(4, 4, dtype=torch.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(f, backend="tpu")(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x))
    assert any("linalg_eig" in str(w.message) and "no lowering" in str(w.message) for w in caught), [
        str(w.message) for w in caught
    ]


def test_fullgraph_with_an_op_without_lowering_is_a_clear_error():
    def f(x):
        return torch.linalg.eigvals(x @ x.t()).real + 1

    x = torch.randn(4, 4, dtype=torch.float64, device="tpu")
    with pytest.raises(Exception, match=r"fullgraph=True.*linalg_eig.*no lowering"):
        torch.compile(f, backend="tpu", fullgraph=True)(x)
    torch._dynamo.reset()
    assert torch.compile(f, backend="tpu")(x).shape == (4,)  # without fullgraph it runs, with a warning
    torch.tpu.synchronize()


def test_default_backend_picks_tpu_for_tpu_inputs_only():
    def f(x):
        return (x * 3).relu().sum(0)

    x = torch.randn(5, 4)
    torch_pjrt.reset_metrics()
    out = torch.compile(f)(x.to("tpu"))  # no backend named: Inductor's default, which hands tpu graphs to tpu
    torch.testing.assert_close(out.cpu(), f(x))
    assert torch_pjrt.metrics()["regions"] == 1  # the graph ran on tpu
    torch._dynamo.reset()
    torch_pjrt.reset_metrics()
    out_cpu = torch.compile(f)(x)  # CPU inputs: Inductor, untouched
    torch.testing.assert_close(out_cpu, f(x))
    assert torch_pjrt.metrics()["regions"] == 0


@torch.library.custom_op("torch_pjrt_test::scaled_gelu", mutates_args=())
def scaled_gelu(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * scale


@scaled_gelu.register_fake
def _(x, scale):
    return torch.empty_like(x)


@scaled_gelu.register_kernel("tpu")
def _(x, scale):
    # The tpu lowering of the custom op: eager tpu ops, which join the graph's program.
    return torch.nn.functional.gelu(x) * scale


def test_custom_op_with_a_tpu_kernel_runs_inside_the_compiled_program():
    def f(x):
        return scaled_gelu(x @ x.t(), 0.5).sum(1) + 1

    x = torch.randn(6, 5)
    torch_pjrt.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "has no lowering" warning: the op has a tpu kernel
        out = torch.compile(f, backend="tpu", fullgraph=True)(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x))
    m = torch_pjrt.metrics()
    assert m["regions"] == 1 and m["fallback_ops"] == {}  # one program, the custom op's ops included


def test_a_short_last_batch_compiles_one_more_program_per_graph_once():
    model = mlp().to("tpu")
    step = torch.compile(lambda x: model(x).square().mean(), backend="tpu", dynamic=False)
    batches = [torch.randn(8, 16) for _ in range(3)] + [torch.randn(5, 16)]
    compiles = []
    for _epoch in range(2):
        for x in batches:
            torch_pjrt.reset_metrics()
            step(x.to("tpu")).backward()
            torch_pjrt.synchronize()
            compiles.append(torch_pjrt.metrics()["compiles"])
    # Epoch 1: the full batch compiles its forward and backward programs (and step 2 the eager gradient
    # accumulation); the short batch compiles a second forward and backward once.
    assert compiles[2] == 0 and 0 < compiles[3] <= 2, compiles
    assert compiles[4:] == [0, 0, 0, 0], compiles  # epoch 2 compiles nothing


class _AttentionBlock(torch.nn.Module):
    """Layer norm, one attention head over the sequence dim and a mean over it: every reduction meets the length."""

    def __init__(self, d=32):
        super().__init__()
        self.ln, self.q, self.k = torch.nn.LayerNorm(d), torch.nn.Linear(d, d), torch.nn.Linear(d, d)
        self.v, self.o = torch.nn.Linear(d, d), torch.nn.Linear(d, d)

    def forward(self, x):
        h = self.ln(x)
        a = torch.softmax(self.q(h) @ self.k(h).transpose(-1, -2) / 4.0, -1)
        return (x + self.o(a @ self.v(h))).mean(1)


def _blocks():
    torch.manual_seed(0)
    exact = _AttentionBlock().double()
    tpu = _AttentionBlock().to("tpu")
    tpu.load_state_dict({k: v.float() for k, v in exact.state_dict().items()})
    return exact, tpu


# 32 lengths in an order where no two neighbours are one apart at first (so only the graph's symbolic sizes, not a
# growing length, tell the engine that the length is dynamic); their buckets are 1, 2, 4, 8, 16 and 32.
_LENGTHS = [
    4,
    8,
    30,
    21,
    20,
    6,
    1,
    11,
    15,
    27,
    18,
    22,
    28,
    24,
    3,
    23,
    5,
    26,
    7,
    19,
    12,
    31,
    10,
    13,
    16,
    17,
    9,
    2,
    14,
    29,
    32,
    25,
]


def _region_compiles(m):
    return m["compiles_by_name"].get("fused_region", 0)


def test_a_sweep_over_32_sequence_lengths_compiles_a_program_per_bucket():
    exact, tpu = _blocks()
    compiled = torch.compile(tpu, backend="tpu", dynamic=True)
    g = torch.Generator().manual_seed(1)
    torch_pjrt.reset_metrics()
    with torch.no_grad():
        for n in _LENGTHS:
            x = torch.randn(2, n, 32, generator=g, dtype=torch.float64)
            torch.testing.assert_close(compiled(x.float().to("tpu")).cpu().double(), exact(x), rtol=1e-5, atol=1e-5)
    m = torch_pjrt.metrics()
    # The first length's program, then one per bucket: the inputs' uploads land in storages of their bucket's
    # capacity, and every op of the graph joins its one program bucketed.
    assert _region_compiles(m) <= 6 + 1, m["compiles_by_name"]
    assert m["compiles"] == _region_compiles(m), m["compiles_by_name"]
    assert m["regions"] == len(_LENGTHS) and m["bucket_hits"] > 0 and m["padded_elements"] > 0

    # The same lengths again: each replays the capture its first call made (the length is a key word of the
    # layout), with no node walked and nothing compiled.
    torch_pjrt.reset_metrics()
    with torch.no_grad():
        for n in _LENGTHS[:12]:
            x = torch.randn(2, n, 32, generator=g, dtype=torch.float64)
            torch.testing.assert_close(compiled(x.float().to("tpu")).cpu().double(), exact(x), rtol=1e-5, atol=1e-5)
    m = torch_pjrt.metrics()
    assert (m["graph_replays"], m["regions"], m["compiles"]) == (12, 0, 0), m


def test_a_sweep_over_sequence_lengths_trains_with_a_program_per_bucket():
    exact, tpu = _blocks()
    compiled = torch.compile(tpu, backend="tpu", dynamic=True)
    g = torch.Generator().manual_seed(2)

    def train(lengths):
        for n in lengths:
            x = torch.randn(2, n, 32, generator=g, dtype=torch.float64)
            compiled(x.float().to("tpu")).square().sum().backward()
            exact(x).square().sum().backward()
            scale = max(p.grad.abs().max().item() for p in exact.parameters())
            for p, e in zip(tpu.parameters(), exact.parameters(), strict=True):
                torch.testing.assert_close(p.grad.cpu().double(), e.grad, rtol=1e-4, atol=1e-5 * scale)
                p.grad, e.grad = None, None

    torch_pjrt.reset_metrics()
    train(_LENGTHS[:16])
    m = torch_pjrt.metrics()
    # 16 lengths in buckets 1 to 32: a forward and a backward program for the first length and per bucket, and the
    # eager loss and its gradient (static sizes) once.
    assert _region_compiles(m) <= 2 * (6 + 1), m["compiles_by_name"]
    assert m["compiles"] - _region_compiles(m) <= 8, m["compiles_by_name"]
    # Lengths seen before: their forward and backward graphs replay.
    torch_pjrt.reset_metrics()
    train(_LENGTHS[4:8])
    m = torch_pjrt.metrics()
    assert m["graph_replays"] == 8 and _region_compiles(m) == 0, m


def test_a_new_shape_recompiles_visibly():
    compiled = torch.compile(lambda x: (x * 2).sum(0), backend="tpu", dynamic=False)
    compiled(torch.ones(4, 3, device="tpu"))
    torch_pjrt.reset_metrics()
    out = compiled(torch.ones(6, 3, device="tpu"))
    torch.testing.assert_close(out.cpu(), torch.full((3,), 12.0))
    assert torch_pjrt.metrics()["compiles"] >= 1


def test_backend_name_works_after_plain_import_torch():
    code = (
        "import torch\n"
        "f = torch.compile(lambda x: x * 3 + 1, backend='tpu')\n"
        "print(f(torch.arange(3.0, device='tpu')).cpu().tolist())\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "[1.0, 4.0, 7.0]"


def test_cpu_tensors_are_untouched_by_the_backend():
    out = torch.compile(lambda x: x.sin() * 2, backend="tpu")(torch.arange(4.0))
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, torch.arange(4.0).sin() * 2)


def test_repeated_calls_replay_the_captured_program():
    def f(a, b):
        a.add_(1)  # a mutated input, written back by the program
        y = (a @ b).tanh()
        return y, y.t(), a[1:], b.view(-1)  # two views of one result, a view of a mutated input, one of an input

    compiled = torch.compile(f, backend="tpu")
    for i in range(5):
        g = torch.Generator().manual_seed(i)
        a, b = torch.randn(4, 3, generator=g), torch.randn(3, 5, generator=g)
        ta, tb = a.to("tpu"), b.to("tpu")
        torch_pjrt.reset_metrics()
        out = compiled(ta, tb)
        ref = f(a, b)
        for o, r in zip(out, ref, strict=True):
            torch.testing.assert_close(o.cpu(), r)
        torch.testing.assert_close(ta.cpu(), a)
        assert out[0].untyped_storage().data_ptr() == out[1].untyped_storage().data_ptr()
        assert out[2].untyped_storage().data_ptr() == ta.untyped_storage().data_ptr()
        out[0].mul_(0)  # results are tensors of their own: an in-place update reaches the view only
        assert out[1].abs().sum().item() == 0 and ta.abs().sum().item() > 0
        m = torch_pjrt.metrics()
        if i > 0:  # no node of the graph is dispatched again
            assert (m["graph_replays"], m["regions"], m["compiles"]) == (1, 0, 0)


def test_a_new_input_layout_or_storage_sharing_captures_again():
    def f(a, b):
        return a * 2 + b

    compiled = torch.compile(f, backend="tpu")
    x = torch.randn(4, 4)
    layouts = [
        lambda ta: ta.t(),  # a transposed view of the first input: one storage
        lambda ta: ta.t().contiguous(),  # two storages
        lambda ta: ta,  # the same tensor twice
    ]
    for _ in range(2):
        for second in layouts:
            ta = x.to("tpu")
            tb = second(ta)
            torch.testing.assert_close(compiled(ta, tb).cpu(), f(x, tb.cpu()))
    torch_pjrt.reset_metrics()
    ta = x.to("tpu")
    torch.testing.assert_close(compiled(ta, ta).cpu(), f(x, x))
    assert torch_pjrt.metrics()["graph_replays"] == 1


def test_a_stride_made_symbolic_by_automatic_dynamic_keeps_fixed_size_programs():
    # examples/train_gpt.py's GPT called on contiguous uploads and then on row slices of one upload (stride 17):
    # automatic dynamic recompiles with a symbolic stride and every size static. The graph is static: fixed-size
    # programs, no bucket and no masking (before, its calls joined bucketed, 36 of them padded).
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import train_gpt

    def gpt():
        torch.manual_seed(0)
        return train_gpt.GPT(vocab=64, dim=32, layers=1, block=16)

    cpu, exact, tpu = gpt(), gpt().double(), gpt().to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    x, y = train_gpt.batch(torch.Generator().manual_seed(0), 4, 16, 64)
    compiled(x.contiguous().to("tpu"), y.contiguous().to("tpu"))
    seq = torch.randint(0, 64, (4, 17), generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        torch_pjrt.reset_metrics()
        on_tpu = seq.to("tpu")
        tpu.zero_grad(set_to_none=True)
        _, loss = compiled(on_tpu[:, :-1], on_tpu[:, 1:])
        loss.backward()
        torch_pjrt.synchronize()
        m = torch_pjrt.metrics()
        assert m["bucket_hits"] == 0 and m["padded_elements"] == 0, m
    assert m["graph_replays"] == 2 and m["compiles"] == 0
    _, ref = exact(seq[:, :-1], seq[:, 1:])
    ref.backward()
    cpu(seq[:, :-1], seq[:, 1:])[1].backward()
    assert abs(loss.item() - ref.item()) <= 1e-5 * abs(ref.item())
    assert_accumulated_grads_near_float64(tpu, cpu, exact, passes=1)


def test_a_graph_with_random_ops_draws_new_numbers_each_call():
    def f(x):
        return torch.nn.functional.dropout(x, 0.5, training=True)

    compiled = torch.compile(f, backend="tpu")
    x = torch.ones(64, 64, device="tpu")
    torch_pjrt.reset_metrics()
    masks = [compiled(x).cpu() != 0 for _ in range(3)]
    assert not torch.equal(masks[1], masks[2])  # a replay with the RNG state frozen would repeat the mask
    assert all(0.4 < m.float().mean().item() < 0.6 for m in masks)
    assert torch_pjrt.metrics()["graph_replays"] == 0  # its nodes run each call: the RNG state is a parameter


def test_async_compile_runs_op_by_op_until_the_graph_program_is_ready():
    def net():  # widths no other test uses, so that no program is in the cache yet
        return torch.nn.Sequential(torch.nn.Linear(12, 36), torch.nn.Tanh(), torch.nn.Linear(36, 3))

    torch.manual_seed(3)
    cpu = net()
    tpu = net().to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(tpu, backend="tpu", options={"async_compile": True})
    x = torch.randn(5, 12)
    metrics = []
    for step in range(3):
        torch_pjrt.reset_metrics()
        out = compiled(x.to("tpu"))
        out.square().sum().backward()
        torch_pjrt.synchronize()
        metrics.append(torch_pjrt.metrics())
        if step == 0:
            torch_pjrt.wait_for_compiles()
    # First call: the forward and the backward graph ran op by op while their programs compiled.
    assert metrics[0]["regions_run_while_compiling"] == 2 and metrics[0]["graph_replays"] == 0
    # Second call: both programs were ready (compiled in the background), and were captured.
    # (Its compiles are the eager adds that accumulate .grad from the second backward on.)
    assert metrics[1]["regions_run_while_compiling"] == 0 and "fused_region" not in metrics[1]["compiles_by_name"]
    assert metrics[2]["graph_replays"] == 2 and metrics[2]["compiles"] == 0
    assert not torch_pjrt._C._async_compile()  # the option is the graphs' own, not left on for eager code
    ref = cpu(x)
    ref.square().sum().backward()
    torch.testing.assert_close(out.cpu(), ref)
    exact = net().double()
    exact.load_state_dict({k: v.double() for k, v in cpu.state_dict().items()})
    exact(x.double()).square().sum().backward()
    assert_accumulated_grads_near_float64(tpu, cpu, exact, passes=3)


def test_async_compile_is_a_bool_option():
    f = torch.compile(lambda x: x + 1, backend="tpu", options={"async_compile": False})
    torch.testing.assert_close(f(torch.ones(3, device="tpu")).cpu(), torch.full((3,), 2.0))


def test_bucket_size_pads_symbolic_sizes_to_its_multiples():
    exact, tpu = _blocks()
    compiled = torch.compile(tpu, backend="tpu", dynamic=True, options={"bucket_size": 16})
    g = torch.Generator().manual_seed(3)
    torch_pjrt.reset_metrics()
    with torch.no_grad():
        for i, n in enumerate(_LENGTHS):
            x = torch.randn(2, n, 32, generator=g, dtype=torch.float64)
            xt = x.float().to("tpu")
            if i > 0:  # the first call declared the length symbolic: later uploads have its bucket's capacity
                assert xt.untyped_storage().nbytes() == 2 * math.ceil(n / 16) * 16 * 32 * 4
            torch.testing.assert_close(compiled(xt).cpu().double(), exact(x), rtol=1e-5, atol=1e-5)
    m = torch_pjrt.metrics()
    # Every size rounds up to a multiple of 16, also the batch × length rows that the linear layers read, so a
    # program serves each pair (bucket of n, bucket of 2n); a length of 1 is read exactly, and the first length
    # compiles before the graph is known to be dynamic.
    pairs = {(math.ceil(n / 16), math.ceil(2 * n / 16)) for n in _LENGTHS if n > 1}
    assert _region_compiles(m) <= 1 + len(pairs) + 1, m["compiles_by_name"]
    assert m["compiles"] == _region_compiles(m), m["compiles_by_name"]


@pytest.mark.parametrize("bad", [0, -4, 2.5, True, "128"])
def test_bucket_size_must_be_a_positive_int(bad):
    compiled = torch.compile(lambda x: x * 2, backend="tpu", options={"bucket_size": bad})
    with pytest.raises(Exception, match="bucket_size must be a positive int"):
        compiled(torch.ones(3, device="tpu"))


def test_symbolic_size_nodes_are_not_called_cpu_fallbacks():
    """A decode step recompiled with symbolic sizes (automatic dynamic: its KV cache grows each call) reads them with
    aten::sym_size.int, a composite that asks the tensor: no "has no lowering" warning, and no fallback."""
    from torch_pjrt import dynamo

    torch._dynamo.reset()
    dynamo._warned.clear()

    def step(x, kc, vc, weights):
        wq, wk, wv, wo = weights
        kc = torch.cat([kc, x @ wk], 1)
        vc = torch.cat([vc, x @ wv], 1)
        att = torch.softmax((x @ wq) @ kc.transpose(1, 2) / 4.0, -1)
        return torch.tanh((att @ vc) @ wo + x), kc, vc

    weights = [torch.randn(16, 16) * 0.3 for _ in range(4)]
    x, kc, vc = torch.randn(1, 1, 16), torch.zeros(1, 0, 16), torch.zeros(1, 0, 16)
    compiled = torch.compile(step, backend="tpu")
    on_tpu = [t.to("tpu") for t in (x, kc, vc)]
    tpu_weights = [w.to("tpu") for w in weights]
    torch_pjrt.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for _ in range(6):
            x, kc, vc = step(x, kc, vc, weights)
            on_tpu = compiled(*on_tpu, tpu_weights)
            torch.testing.assert_close(on_tpu[0].cpu(), x)
    assert torch_pjrt.metrics()["fallback_ops"] == {}
