"""Eager modes (ours and TorchTPU's names) and the structure-keyed compile cache."""

import os
import subprocess
import sys
import time

import pytest
import torch

import torch_pjrt

TPU = torch.device("tpu")


def test_set_and_scope_modes():
    assert torch_pjrt.get_eager_mode() == "strict"
    torch_pjrt.set_eager_mode("debug")
    assert torch_pjrt.get_eager_mode() == "debug"
    with torch_pjrt.eager_mode("strict"):
        assert torch_pjrt.get_eager_mode() == "strict"
    assert torch_pjrt.get_eager_mode() == "debug"
    with pytest.raises(ValueError):
        torch_pjrt.set_eager_mode("eager")


def test_fused_mode_can_be_set_and_scoped():
    with torch_pjrt.eager_mode("fused"):
        assert torch_pjrt.get_eager_mode() == "fused"
    assert torch_pjrt.get_eager_mode() == "strict"


def test_debug_mode_gives_same_results():
    x = torch.randn(8, 8)
    expected = (x @ x).softmax(-1)
    with torch_pjrt.eager_mode("debug"):
        got = (x.to(TPU) @ x.to(TPU)).softmax(-1).cpu()
    torch.testing.assert_close(got, expected)


def test_torchtpu_names():
    EagerMode = torch.tpu.EagerMode
    torch.tpu.eager_mode = EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    assert torch_pjrt.get_eager_mode() == "debug"
    assert torch.tpu.eager_mode == EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    with torch.tpu.set_eager_mode(EagerMode.DEFER_NEVER):
        assert torch_pjrt.get_eager_mode() == "strict"
    assert torch_pjrt.get_eager_mode() == "debug"
    torch.tpu.eager_mode = EagerMode.DEFER_NEVER
    assert torch_pjrt.get_eager_mode() == "strict"


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"TORCH_PJRT_EAGER_MODE": "debug"}, "debug"),
        ({"TORCH_TPU_LAUNCH_BLOCKING": "1"}, "debug"),
        ({"TORCH_TPU_LAUNCH_BLOCKING": "1", "TORCH_TPU_DEFER_AND_FUSE": "1"}, "debug"),  # launch-blocking wins
        ({}, "strict"),
    ],
)
def test_mode_from_environment(env, expected):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TPU_", "TORCH_PJRT_EAGER"))}
    r = subprocess.run(
        [sys.executable, "-c", "import torch_pjrt; print(torch_pjrt.get_eager_mode())"],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expected


def test_metrics_keys_and_reset():
    torch_pjrt.reset_metrics()
    (torch.ones(3, device=TPU) * 2).cpu()
    m = torch_pjrt.metrics()
    for key in (
        "compiles",
        "cache_hits",
        "executions",
        "syncs",
        "compile_seconds",
        "wait_seconds",
        "device_seconds",
        "fallback_ops",
    ):
        assert key in m
    assert m["executions"] >= 1 and m["syncs"] >= 1
    torch_pjrt.reset_metrics()
    assert torch_pjrt.metrics()["executions"] == 0


def test_wait_seconds_counts_the_host_blocked_on_device_work():
    """A sync behind long device work waits; a sync with nothing left to run waits (almost) not at all."""
    x = torch.randn(1024, 1024, device=TPU)
    work = lambda: [x @ x @ x @ x for _ in range(4)]  # noqa: E731
    work()
    torch_pjrt.synchronize()  # compiled and run once
    torch_pjrt.reset_metrics()
    assert torch_pjrt.metrics()["wait_seconds"] == 0
    start = time.perf_counter()
    results = work()  # alive, so the sync waits for them
    torch_pjrt.synchronize()
    elapsed = time.perf_counter() - start
    waited = torch_pjrt.metrics()["wait_seconds"]
    assert 0 < waited <= elapsed
    del results
    torch_pjrt.reset_metrics()
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["wait_seconds"] < waited


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_device_seconds_count_the_programs_not_the_host(mode):
    """device_seconds counts only while timing is on, never exceeds the wall time around the work (queued programs
    are counted from the previous one's end, not from their enqueue), and leaves out the host's pauses between them."""
    x = torch.randn(512, 512, device=TPU)
    chain = lambda: x @ x @ x @ x @ x @ x  # noqa: E731
    with torch_pjrt.eager_mode(mode):
        for _ in range(2):  # compiled, and fused mode's region seen twice
            chain().cpu()
        torch_pjrt.reset_metrics()
        chain().cpu()
        assert torch_pjrt.metrics()["device_seconds"] == 0  # off by default
        torch_pjrt.set_device_timing(True)
        try:
            torch_pjrt.reset_metrics()
            start = time.perf_counter()
            results = [chain() for _ in range(8)]  # enqueued faster than they run
            torch_pjrt.synchronize()
            elapsed = time.perf_counter() - start
            busy = torch_pjrt.metrics()["device_seconds"]
            assert 0 < busy <= elapsed
            del results
            torch_pjrt.reset_metrics()
            active = 0.0
            for _ in range(4):
                start = time.perf_counter()
                chain().cpu()
                active += time.perf_counter() - start
                time.sleep(0.05)  # the device idles: not counted
            busy = torch_pjrt.metrics()["device_seconds"]
            assert 0 < busy <= active + 0.01  # a completion callback may run a moment after the host resumed
        finally:
            torch_pjrt.set_device_timing(False)


def test_changing_python_scalars_never_recompiles():
    x = torch.randn(5, 7, device=TPU)
    (x * 1.5 + 2.0).cpu()  # warm up
    torch_pjrt.reset_metrics()
    for i in range(20):
        (x * (1.0 + i / 10) + float(i)).cpu()
    m = torch_pjrt.metrics()
    assert m["compiles"] == 0
    assert m["cache_hits"] >= 40


def test_changing_learning_rate_never_recompiles():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(TPU)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    x, y = torch.randn(8, 4).to(TPU), torch.randn(8, 3).to(TPU)

    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    for _ in range(3):  # warm-up: AdamW's first steps take other paths
        step()
    torch_pjrt.reset_metrics()
    for _ in range(10):
        step()
    assert opt.param_groups[0]["lr"] < 1e-3  # the rate really changed
    assert torch_pjrt.metrics()["compiles"] == 0


def test_shapes_and_dtypes_are_in_the_key():
    torch_pjrt.reset_metrics()
    a = torch.ones(123, 7, device=TPU)
    (a + 1).cpu()
    compiles = torch_pjrt.metrics()["compiles"]
    (a.to(torch.float16) + 1).cpu()
    (torch.ones(124, 7, device=TPU) + 1).cpu()
    assert torch_pjrt.metrics()["compiles"] > compiles
