"""The engine's contracts seen from PyTorch: view offsets are runtime parameters (loops over rows, cache positions and
narrowed windows compile once), program keys are the same in every process, and in-place updates donate their old
buffer (memory stays flat, and the reported peak is the peak that happened)."""

import os
import subprocess
import sys
import textwrap

import torch

import torch_pjrt


def compiles() -> int:
    return torch_pjrt.metrics()["compiles"]


def test_row_reads_compile_one_program():
    a = torch.randn(64, 16, dtype=torch.float64)
    t = a.to("tpu")
    torch.testing.assert_close((t[0] * 2).cpu(), a[0] * 2)
    before = compiles()
    for i in range(1, 32):
        torch.testing.assert_close((t[i] * 2).cpu(), a[i] * 2)
    assert compiles() == before


def test_kv_cache_writes_compile_one_program():
    cache = torch.zeros(2, 4, 32, 8, dtype=torch.float64)
    steps = torch.randn(32, 2, 4, 1, 8, dtype=torch.float64)
    cache_t = cache.to("tpu")
    steps_t = steps.to("tpu")
    cache[:, :, 0:1] = steps[0]
    cache_t[:, :, 0:1] = steps_t[0]
    torch_pjrt.synchronize()
    before = compiles()
    for pos in range(1, 32):
        cache[:, :, pos : pos + 1] = steps[pos]
        cache_t[:, :, pos : pos + 1] = steps_t[pos]
    torch_pjrt.synchronize()
    assert compiles() == before
    torch.testing.assert_close(cache_t.cpu(), cache, rtol=0, atol=0)


def test_narrow_windows_compile_one_program():
    x = torch.randn(40, 8, dtype=torch.float64)
    t = x.to("tpu")
    torch.testing.assert_close((t.narrow(0, 0, 4) * 3).cpu(), x.narrow(0, 0, 4) * 3)
    before = compiles()
    for i in range(1, 32):
        torch.testing.assert_close((t.narrow(0, i, 4) * 3).cpu(), x.narrow(0, i, 4) * 3)
    assert compiles() == before


def test_column_and_strided_views_still_read_and_write_right():
    x = torch.randn(6, 5, dtype=torch.float64)
    t = x.to("tpu")
    for j in range(5):
        torch.testing.assert_close((t[:, j] + 1).cpu(), x[:, j] + 1)
        torch.testing.assert_close((t[1::2, j:] * 2).cpu(), x[1::2, j:] * 2)
    for j in range(5):
        x[:, j].mul_(j)
        t[:, j].mul_(j)
    torch.testing.assert_close(t.cpu(), x, rtol=0, atol=0)


KEY_SCRIPT = textwrap.dedent(
    """
    import torch, torch_pjrt
    x = torch.ones(4, 8, device="tpu")
    y = (x[1] * 2.5 + x[2]).sum()
    x.add_(1)
    y.cpu()
    print(" ".join(sorted(torch_pjrt._C._program_keys())))
    """
)


def test_program_keys_are_the_same_in_two_processes():
    env = dict(os.environ)
    runs = [
        subprocess.run([sys.executable, "-c", KEY_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
    keys = [r.stdout.split() for r in runs]
    print("program keys:", keys[0])
    assert len(keys[0]) >= 3
    assert keys[0] == keys[1]


def test_inplace_updates_donate_and_keep_memory_flat():
    x = torch.zeros(1 << 18, device="tpu")
    y = x[10:20]  # a view shares the storage: it must see every update
    x.add_(1)
    torch_pjrt.synchronize()
    live = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    donations = torch_pjrt.metrics()["donations"]
    for _ in range(1000):
        x.add_(1)
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["donations"] - donations == 1000
    assert torch.tpu.memory_allocated() == live
    assert torch.tpu.max_memory_allocated() - live <= 64 * 1024
    torch.testing.assert_close(y.cpu(), torch.full((10,), 1001.0), rtol=0, atol=0)


def test_peak_counts_transient_buffers():
    x = torch.zeros(1 << 18, device="tpu")
    x.add_(1)
    torch_pjrt.synchronize()
    live = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    (x * 2).sum().cpu()  # x * 2 lives only until the sum has read it
    assert torch.tpu.memory_allocated() - live <= 1024
    assert torch.tpu.max_memory_allocated() - live >= x.numel() * 4


DONATION_RSS_SCRIPT = textwrap.dedent(
    """
    import os, torch, torch_pjrt
    def status(key):
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) // 1024 for l in f if l.startswith(key))
    x = torch.zeros(128 * 1024 * 1024, device="tpu")  # 512 MB
    x.add_(1)
    torch_pjrt.synchronize()
    with open(f"/proc/{os.getpid()}/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM, the peak RSS
    base = status("VmRSS")
    live = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    for _ in range(50):
        x.add_(1)
    torch_pjrt.synchronize()
    assert x[-1].item() == 51.0
    print(status("VmHWM") - base, torch.tpu.max_memory_allocated() - live)
    """
)


def test_fifty_updates_of_a_512mb_tensor_hold_one_copy():
    r = subprocess.run([sys.executable, "-c", DONATION_RSS_SCRIPT], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rss_growth_mb, peak_growth_bytes = (int(v) for v in r.stdout.split())
    print(f"peak RSS growth {rss_growth_mb} MB, max_memory_allocated growth {peak_growth_bytes} B")
    assert rss_growth_mb <= 128
    assert peak_growth_bytes <= 1024 * 1024
