"""Fused eager mode: ops join a region that runs as one program at a flush, with strict mode's semantics.

Each test compares with CPU PyTorch or with strict mode on the same inputs, and asserts what the region
machinery did through torch_pjrt.metrics(): regions, flush_reasons, compiles, donations.
"""

import importlib
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import torch_pjrt

TPU = torch.device("tpu")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


@pytest.fixture(autouse=True)
def fused():
    torch_pjrt.set_eager_mode("fused")
    torch_pjrt.reset_metrics()
    yield
    torch_pjrt.set_eager_mode("strict")
    assert torch_pjrt.metrics()["region_replays"] == 0


def m():
    return torch_pjrt.metrics()


def test_a_chain_with_in_place_ops_on_views_matches_cpu():
    a, b = torch.randn(6, 6, dtype=torch.float64), torch.randn(6, 6, dtype=torch.float64)
    x, y = a.to(TPU), b.to(TPU)

    def run(x, y):
        z = (x @ y).relu() * 2 + x
        z[1].add_(1)
        z[:, 2].mul_(3)
        z.t()[0].sub_(y[0])
        w = z.sum(0) - z[2:4].mean()
        x.add_(w)  # an input written in place
        return z, w

    z, w = run(x, y)
    rz, rw = run(a.clone(), b)
    assert m()["executions"] == 0  # nothing ran yet
    torch.testing.assert_close(z.cpu(), rz)
    torch.testing.assert_close(w.cpu(), rw)
    torch.testing.assert_close(x.cpu(), a + rw)
    assert m()["regions"] == 1 and m()["flush_reasons"] == {"read": 1}
    assert m()["ops_per_region"]["max"] >= 8


def _results_of(text: str) -> int:
    """The number of results of the module's main function."""
    sig = next(line for line in text.splitlines() if "func.func" in line and "main" in line)
    tail = sig.split("->", 1)[1]
    return tail.count("tensor<")


def test_only_live_values_leave_a_region():
    x = torch.randn(8, 8).to(TPU)
    y = x * 2
    z = y + 1
    kept = _results_of(torch_pjrt.stablehlo(z))
    del y
    assert _results_of(torch_pjrt.stablehlo(z)) == kept - 1
    torch.testing.assert_close(z.cpu(), x.cpu() * 2 + 1)
    assert torch_pjrt.stablehlo(z) == ""  # nothing pending after the flush


def test_an_overwritten_buffer_is_donated():
    x = torch.randn(64, 64).to(TPU)
    torch_pjrt.synchronize()
    before = m()["donations"]
    x.add_(1).mul_(2)
    torch_pjrt.synchronize()
    assert m()["donations"] == before + 1


def test_flush_reasons():
    x = torch.randn(4, 4).to(TPU)
    torch_pjrt.synchronize()
    torch_pjrt.reset_metrics()
    y = x + 1
    torch_pjrt.synchronize()  # sync
    y = y * 2
    y.cpu()  # read
    y = y + 1
    y.copy_(torch.ones(4, 4))  # upload into a storage the region wrote
    y = y + 1
    out = torch.empty(4, 4, device=TPU)
    torch.index_select(y, 0, torch.arange(4, device=TPU), out=out)  # out= with runtime checks cannot fuse
    out.add_(1)
    y = y + 1
    with torch_pjrt.eager_mode("strict"):  # mode switch
        pass
    y = y + 1
    y.to("tpu:1")  # another device reads it on the host
    y = y + 1
    y.view(torch.int32).add_(1)  # the same storage as another dtype
    y = y + 1
    torch.nonzero(y)  # data-dependent size
    reasons = m()["flush_reasons"]
    for r in ("sync", "read", "upload", "unfusable", "mode", "dtype_view"):
        assert reasons.get(r, 0) >= 1, (r, reasons)
    expected = torch.ones(4, 4) + 2
    torch.testing.assert_close(out.cpu(), expected)


def test_out_calls_join_the_region_and_a_refused_one_writes_nothing():
    a = torch.randn(4, 4, dtype=torch.float64)
    x = a.to(TPU)
    torch_pjrt.synchronize()
    torch_pjrt.reset_metrics()
    y = x * 2
    out = torch.empty(4, 4, dtype=torch.float64, device=TPU)
    torch.add(y, 1, out=out)
    grown = torch.empty(0, dtype=torch.float64, device=TPU)  # resized by the out= call
    torch.mul(out, y, out=grown)
    kept = torch.arange(16, device=TPU).view(4, 4)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        torch.add(y, 0.5, out=kept)  # CPU refuses it before it writes
    torch.where(y > 0, y, out, out=out)  # aten::where.self_out, as SDPA's masked softmax calls it
    z = out * 3 + grown
    assert m()["executions"] == 0  # nothing ran yet
    ra = a * 2
    rout = torch.where(ra > 0, ra, ra + 1)
    torch.testing.assert_close(z.cpu(), rout * 3 + (ra + 1) * ra)
    torch.testing.assert_close(kept.cpu(), torch.arange(16).view(4, 4))
    assert m()["regions"] == 1 and "unfusable" not in m()["flush_reasons"]


def test_a_device_change_flushes():
    a = torch.ones(3, device="tpu:0") + 1
    b = torch.ones(3, device="tpu:1") + 2
    torch.testing.assert_close(a.cpu() + b.cpu(), torch.full((3,), 5.0))
    assert m()["flush_reasons"].get("device", 0) >= 1


def test_the_call_cap_cuts_a_region():
    # Sums over a slice that grows by one: no two calls alike, so no period to cut on. Shape buckets are off, or
    # the growing calls would leave the region (test_buckets.py covers that).
    code = (
        "import torch, torch_pjrt\n"
        "torch_pjrt.set_eager_mode('fused')\n"
        "x = torch.randn(700, dtype=torch.float64)\n"
        "t = x.to('tpu')\n"
        "torch_pjrt.synchronize()\n"
        "torch_pjrt.reset_metrics()\n"
        "sums = [t[: i + 1].sum() for i in range(600)]\n"
        "torch.testing.assert_close(torch.stack(sums).cpu(), x.cumsum(0)[:600])\n"
        "m = torch_pjrt.metrics()\n"
        "assert m['flush_reasons'].get('cap_calls', 0) == 1, m['flush_reasons']\n"
        "assert m['ops_per_region']['max'] == 512, m['ops_per_region']\n"
    )
    env = dict(os.environ, TORCH_PJRT_SHAPE_BUCKETS="0")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


_lib = torch.library.Library("pjrt_fused_test", "DEF")
_lib.define("twice(Tensor x) -> Tensor")
_lib.impl("twice", lambda x: x * 2, "CPU")


def test_the_cpu_fallback_flushes_and_sees_pending_values():
    x = torch.randn(5, dtype=torch.float64)
    t = x.to(TPU) * 3
    r = torch.ops.pjrt_fused_test.twice(t + 1)
    assert m()["fallback_ops"] == {"pjrt_fused_test::twice": 1}
    assert r.device.type == "tpu"
    torch.testing.assert_close((r + 1).cpu(), (x * 3 + 1) * 2 + 1)
    assert m()["flush_reasons"].get("unfusable", 0) >= 1


def test_random_numbers_are_the_same_as_strict():
    def draw():
        torch.manual_seed(123)
        a = torch.randn(16, device=TPU)
        b = torch.nn.functional.dropout(torch.ones(32, device=TPU), 0.5)
        c = torch.rand(3, 3, device=TPU)
        return [t.cpu() for t in (a, b, c)]

    fused = draw()
    with torch_pjrt.eager_mode("strict"):
        strict = draw()
    for f, s in zip(fused, strict):
        torch.testing.assert_close(f, s, rtol=0, atol=0)


def test_an_index_error_inside_a_region_names_the_op_and_the_line():
    x = torch.randn(4, 4).to(TPU)
    idx = torch.tensor([0, 9]).to(TPU)
    u = x * 3
    v = u.index_select(0, idx)  # the line the error must name
    line = sys._getframe().f_lineno - 1
    s = v + 1
    with pytest.raises(IndexError, match=rf"aten::index_select.*test_fused\.py:{line}"):
        s.cpu()
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)  # the process keeps working


def _sgd_losses(
    steps: int, sync_every: int, device, prologue: bool = False, compiles_at: tuple = ()
) -> tuple[list[float], list[int]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).double().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(32, 8, dtype=torch.float64)
    target = data.sum(1, keepdim=True).sin()
    x, y = data.to(device), target.to(device)
    if prologue:  # calls that never repeat, with no sync point before the loop
        for k in range(1, 9):
            (x[:k] * k).sum(0)
    losses, compiles = [], []
    for i in range(steps):
        if i in compiles_at:
            compiles.append(torch_pjrt.metrics()["compiles"])
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if prologue:
            x.mul(0.5)  # a dead value: 17 calls per step, so the call cap (512) cuts each step at a new phase
        if (i + 1) % sync_every == 0:
            losses.append(loss.item())
            compiles.append(torch_pjrt.metrics()["compiles"])
    return losses, compiles


def test_a_loop_that_syncs_every_100_steps_runs_a_bounded_set_of_regions():
    losses, compiles = _sgd_losses(300, 100, TPU)
    assert compiles[-1] - compiles[0] <= 3, compiles
    assert m()["flush_reasons"].get("period", 0) > 0, m()["flush_reasons"]
    ref, _ = _sgd_losses(300, 100, "cpu")
    torch.testing.assert_close(losses, ref, rtol=1e-9, atol=0)


def test_a_loop_entered_after_other_work_is_cut_at_the_period_of_its_recent_calls():
    # The stream since the last sync point starts with calls that never repeat, so it has no period as a whole.
    # Once the call cap cut it, regions follow the period of its recent calls; the cap alone would cut the loop at a
    # new phase each time (a new program every 30 steps here).
    losses, compiles = _sgd_losses(200, 200, TPU, prologue=True, compiles_at=(80, 195))
    assert compiles[1] == compiles[0], compiles
    assert m()["flush_reasons"].get("period", 0) > 0, m()["flush_reasons"]
    ref, _ = _sgd_losses(200, 200, "cpu", prologue=True)
    torch.testing.assert_close(losses, ref, rtol=1e-9, atol=0)


def test_a_training_loop_compiles_nothing_after_warm_up_and_matches_strict():
    losses, compiles = _sgd_losses(12, 1, TPU)
    assert compiles[-1] == compiles[2], compiles
    with torch_pjrt.eager_mode("strict"):
        strict, _ = _sgd_losses(12, 1, TPU)
    torch.testing.assert_close(losses, strict, rtol=1e-12, atol=0)


KEY_SCRIPT = textwrap.dedent(
    """
    import torch, torch_pjrt
    torch_pjrt.set_eager_mode("fused")
    x = torch.ones(4, 8, device="tpu")
    torch_pjrt.synchronize()
    y = (x[1] * 2.5 + x[2]).sum()
    x.add_(1)
    y.cpu()
    print(" ".join(sorted(torch_pjrt._C._program_keys())))
    """
)


def test_region_keys_are_the_same_in_two_processes():
    runs = [subprocess.run([sys.executable, "-c", KEY_SCRIPT], capture_output=True, text=True) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split() and runs[0].stdout == runs[1].stdout


def test_runtime_offset_writes_in_a_region():
    cache = torch.zeros(2, 16, 4, dtype=torch.float64)
    steps = torch.randn(16, 2, 1, 4, dtype=torch.float64)
    c = cache.to(TPU)
    s = steps.to(TPU)
    for pos in range(16):
        cache[:, pos : pos + 1] = steps[pos]
        c[:, pos : pos + 1] = s[pos]
    torch.testing.assert_close(c.cpu(), cache, rtol=0, atol=0)


def test_backward_on_the_autograd_thread_and_python_threads():
    def work(seed, out):
        g = torch.Generator().manual_seed(seed)
        a = torch.randn(8, 8, dtype=torch.float64, generator=g)
        w = a.to(TPU).requires_grad_()
        loss = (w.tanh() @ w).sum()
        loss.backward()
        ref = a.clone().requires_grad_()
        (ref.tanh() @ ref).sum().backward()
        out[seed] = torch.allclose(w.grad.cpu(), ref.grad, rtol=1e-10, atol=1e-12)

    out = {}
    threads = [threading.Thread(target=work, args=(i, out)) for i in range(4)]
    for t in threads:
        t.start()
    work(4, out)
    for t in threads:
        t.join()
    assert out == {i: True for i in range(5)}


def test_dead_pending_results_free_their_memory():
    x = torch.randn(256, 256).to(TPU)
    torch_pjrt.synchronize()
    base = torch.tpu.memory_allocated()
    for _ in range(20):
        y = x * 2  # each y dies at the next assignment, unread
        del y
    torch_pjrt.synchronize()
    assert torch.tpu.memory_allocated() == base


@pytest.mark.parametrize("name", ["mingpt", "llama", "qwen", "resnet18", "dlrm", "unet"])
def test_seed_models_train_as_in_strict_mode(name):
    """4 steps in fused and in strict mode: float32 losses within 1e-5 relative (4 steps are too few for
    float32's rounding differences between two programs to grow chaotically), no fallback, no compile
    in step 4 (resnet18's shape history settles in step 3: its first steps run calls of changing sizes alone)."""
    module = importlib.import_module(name)

    def run():
        torch.manual_seed(0)
        model, step = module.make_trainer("tpu")
        losses, compiles = [], []
        for _ in range(4):
            losses.append(step().item())
            compiles.append(torch_pjrt.metrics()["compiles"])
        return losses, compiles

    torch_pjrt.reset_metrics()
    fused, compiles = run()
    assert torch_pjrt.metrics()["fallback_ops"] == {}
    assert compiles[3] == compiles[2], compiles
    with torch_pjrt.eager_mode("strict"):
        strict, _ = run()
    torch.testing.assert_close(fused, strict, rtol=1e-5, atol=0)


def test_async_compile_runs_a_new_region_op_by_op_while_it_compiles():
    a = torch.randn(7, 11)
    ref = ((a * 3 + 1).tanh() - a).sum(0)
    torch_pjrt.set_async_compile(True)
    try:
        got = []
        for step in range(2):
            torch_pjrt.reset_metrics()
            x = a.to(TPU)
            got.append(((x * 3 + 1).tanh() - x).sum(0).cpu())
            got_m = m()
            if step == 0:
                assert got_m["regions_run_while_compiling"] == 1
                torch_pjrt.wait_for_compiles()
            else:  # the region's program, compiled in the background, runs now
                assert got_m["regions_run_while_compiling"] == 0 and got_m["compiles"] == 0
                assert got_m["regions"] == 1 and got_m["cache_hits"] >= 1
    finally:
        torch_pjrt.set_async_compile(False)
    for g in got:
        torch.testing.assert_close(g, ref)
