"""Allreduce bus bandwidth of ``tpu`` tensors (tpu_dist) against plain Gloo on CPU tensors, same processes, same run.

    python bench/allreduce.py              # starts 2 ranks on loopback itself
    torchrun --nproc-per-node=2 bench/allreduce.py

For each size (float32, 1 MB to 256 MB) the two kinds alternate, each timed from the call to the result being usable
(tpu: ``torch.tpu.synchronize()``), after a warm-up. Bus bandwidth is NCCL's: bytes / time * 2 (n - 1) / n. Rank 0
prints medians with their ranges and the ratio tpu/cpu; the last line is ``allreduce ratio_at_64MB_plus=X`` (the
geometric mean of the ratios from 64 MB up).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_launch import launch_or_run  # noqa: E402

MB = 1 << 20


def timed_allreduce(t: torch.Tensor) -> float:
    t0 = time.perf_counter()
    dist.all_reduce(t)
    if t.device.type == "tpu":
        torch.tpu.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes-mb", default="1,4,16,64,128,256")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    tpu = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
    torch.tpu.set_device(tpu)
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    factor = 2 * (world - 1) / world
    ratios_big = []
    if rank == 0:
        print(f"{'size':>8} {'cpu GB/s (range)':>24} {'tpu GB/s (range)':>24} {'tpu/cpu':>8}")
    for mb in (int(s) for s in args.sizes_mb.split(",")):
        n = mb * MB // 4
        cpu = torch.ones(n)
        dev = torch.ones(n, device=tpu)
        timed_allreduce(cpu), timed_allreduce(dev)  # warm-up: connections, programs, buffers
        times = {"cpu": [], "tpu": []}
        for _ in range(args.repeats):
            times["cpu"].append(timed_allreduce(cpu))
            times["tpu"].append(timed_allreduce(dev))
        bw = {k: [mb * MB * factor / t / 1e9 for t in v] for k, v in times.items()}
        med = {k: statistics.median(v) for k, v in bw.items()}
        ratio = med["tpu"] / med["cpu"]
        if mb >= 64:
            ratios_big.append(ratio)
        if rank == 0:
            cols = [f"{med[k]:7.2f} ({min(bw[k]):.2f}-{max(bw[k]):.2f})" for k in ("cpu", "tpu")]
            print(f"{mb:>6}MB {cols[0]:>24} {cols[1]:>24} {ratio:8.2f}", flush=True)
        del cpu, dev
    if rank == 0 and ratios_big:
        print(f"allreduce ratio_at_64MB_plus={math.exp(sum(map(math.log, ratios_big)) / len(ratios_big)):.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    launch_or_run(main)
