"""Per-op latency of strict-mode tpu against native CPU eager, side by side.

Prints a table of medians over repeated runs and ends with the line
``op_overhead small_add_ratio=X large_matmul_ratio=Y large_add_ratio=Z large_inplace_add_ratio=W``
(tpu time / cpu time; the in-place add donates its buffer).
Each tpu measurement ends with ``torch_pjrt.synchronize()``, so queued work is counted.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import torch_pjrt


def per_op_seconds(fn, sync, iters: int) -> float:
    fn()  # warm-up: compile and fill caches
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t0) / iters


def measure(op: str, n: int, device: str, iters: int) -> float:
    a = torch.randn(n, n).to(device)
    b = torch.randn(n, n).to(device)
    ops = {"add": lambda: a + b, "add_": lambda: a.add_(b), "matmul": lambda: a @ b}
    fn = ops[op]
    if device == "tpu":
        # Keep the last result alive: torch_pjrt.synchronize() waits for the programs whose results are alive (the
        # device runs its programs in order, so that covers the earlier ones), as torch.cuda.synchronize() waits
        # for a stream. Reading the result back with .cpu() would time a 16 MiB copy that the CPU side never makes.
        last = {}

        def fn_tpu():
            last["r"] = fn()

        return per_op_seconds(fn_tpu, torch_pjrt.synchronize, iters)
    return per_op_seconds(fn, lambda: None, iters)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    cases = [("add", 16, 20000), ("matmul", 16, 20000), ("add", 2048, 40), ("add_", 2048, 40), ("matmul", 2048, 5)]
    print(f"{'op':8} {'size':>10} {'cpu us':>10} {'tpu us':>10} {'ratio':>7}")
    ratios = {}
    for op, n, iters in cases:
        cpu, tpu = [], []
        for _ in range(args.repeats):  # interleave so machine noise hits both sides alike
            cpu.append(measure(op, n, "cpu", iters))
            tpu.append(measure(op, n, "tpu", iters))
        c, t = statistics.median(cpu), statistics.median(tpu)
        ratios[(op, n)] = t / c
        print(f"{op:8} {f'{n}x{n}':>10} {c * 1e6:10.2f} {t * 1e6:10.2f} {t / c:7.2f}")
    print(
        f"op_overhead small_add_ratio={ratios[('add', 16)]:.2f} large_matmul_ratio={ratios[('matmul', 2048)]:.2f}"
        f" large_add_ratio={ratios[('add', 2048)]:.2f} large_inplace_add_ratio={ratios[('add_', 2048)]:.2f}"
    )


if __name__ == "__main__":
    main()
