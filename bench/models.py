"""Training throughput of the seed models (examples/) on strict-mode tpu against native CPU eager.

For each model, first the check the tests make: 10 training steps on CPU and
on tpu, matched when every tpu loss is within 1e-4 relative of CPU's and no op
ran through the CPU fallback. Then steps/s on both devices, measured side by
side: after warm-up steps (the first tpu steps compile), blocks of steps
alternate between CPU and tpu, each block ending in a sync, and each device's
rate is the median over the blocks. Prints a table and ends with the line
``models matched=N/6 geomean_tpu_over_cpu=X`` (X: geometric mean over the
models of tpu steps/s / cpu steps/s).

    python bench/models.py                       # all six models
    python bench/models.py --models dlrm unet    # some of them
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import statistics
import sys
import time

import torch

import torch_pjrt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

MODELS = ["mingpt", "llama", "qwen", "resnet18", "dlrm", "unet"]
MATCH_STEPS = 10
LOSS_RTOL = 1e-4


def quiet(*_):
    pass


def check_match(model) -> tuple[bool, float, dict]:
    """(matched, worst relative loss difference, fallback ops) of 10 steps on tpu against CPU."""
    cpu = model.train("cpu", MATCH_STEPS, log=quiet)
    torch_pjrt.reset_metrics()
    tpu = model.train("tpu", MATCH_STEPS, log=quiet)
    fallbacks = dict(torch_pjrt.metrics()["fallback_ops"])
    worst = max(abs(c - t) / abs(c) for c, t in zip(cpu, tpu))
    return worst <= LOSS_RTOL and not fallbacks, worst, fallbacks


def timed_block(step, steps: int, device: str) -> float:
    """Seconds for `steps` training steps, with all of the device's work finished."""
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()
    if device == "tpu":
        torch_pjrt.synchronize()
    return time.perf_counter() - t0


def throughput(model, repeats: int, steps: int, warmup: int) -> tuple[float, float]:
    """(cpu steps/s, tpu steps/s): medians over `repeats` interleaved blocks of `steps` steps."""
    trainers = {device: model.make_trainer(device)[1] for device in ("cpu", "tpu")}
    for device, step in trainers.items():
        timed_block(step, warmup, device)  # compiles (tpu) and warms allocators and caches
    rates = {"cpu": [], "tpu": []}
    for _ in range(repeats):  # interleave so machine noise hits both sides alike
        for device, step in trainers.items():
            rates[device].append(steps / timed_block(step, steps, device))
    return statistics.median(rates["cpu"]), statistics.median(rates["tpu"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--repeats", type=int, default=5, help="interleaved timing blocks per device")
    p.add_argument("--steps", type=int, default=5, help="training steps per timing block")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per device first (the tpu compiles)")
    p.add_argument("--cpu-threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    args = p.parse_args()
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    torch_pjrt.set_eager_mode("strict")

    print(f"{'model':10} {'matched':>8} {'loss rel diff':>14} {'cpu steps/s':>12} {'tpu steps/s':>12} {'tpu/cpu':>8}")
    matched, ratios = 0, []
    for name in args.models:
        model = importlib.import_module(name)
        ok, worst, fallbacks = check_match(model)
        matched += ok
        cpu, tpu = throughput(model, args.repeats, args.steps, args.warmup)
        ratios.append(tpu / cpu)
        row = f"{name:10} {'yes' if ok else 'no':>8} {worst:14.1e} {cpu:12.2f} {tpu:12.2f} {tpu / cpu:8.2f}"
        print(row, flush=True)
        if fallbacks:
            print(f"{'':10} fallbacks: " + ", ".join(f"{op} x{n}" for op, n in sorted(fallbacks.items())))
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"models matched={matched}/{len(args.models)} geomean_tpu_over_cpu={geomean:.3f}")


if __name__ == "__main__":
    main()
