"""Training steps/s of the eager modes (debug, strict, fused) against native CPU eager, in one run.

Workloads: the GPT of examples/train_gpt.py (AdamW, as there) at two sizes,
"gpt-tiny" (d_model 128, 2 layers, T 64, batch 8) and "gpt-small" (d_model 256,
4 layers, T 128, batch 16), in cpu, debug, strict and fused; and the six seed
models of examples/ (their own trainers and small configs, as bench/models.py
runs them) in cpu, strict and fused. "cpu" is native CPU eager; the other
modes run on the tpu device under ``torch_pjrt.eager_mode(mode)``. Each
workload starts with the shape history of a fresh process
(``torch_pjrt._C._forget_shapes()``), as if it ran alone.

The timed steps make no host tensors: each trainer's first --batches batches
are made once (with its own seeded generator, so every mode sees the same
data) and then cycled, as a DataLoader's workers would hand them over. A
parallel torch CPU op makes torch's OpenMP pool spin for milliseconds after it
(about 7 ms per op on a 2-core AMD EPYC), and on the CPU plugin that spin takes
a core from the device; --data-in-step makes the batches inside the timed
steps instead, as the examples' trainers do. Each timed block also starts
--settle seconds after the previous one, so no mode runs while the threads
of the mode before it still spin.

Each (workload, mode) gets its own trainer (same seed) and untimed warm-up
first, where the compiles happen: one block of --warmup steps, then blocks as
long as the timed ones (on tpu at least two blocks in all, and more while a
block compiled, up to --warmup-blocks). Then --repeats
rounds, each timing one block of --steps steps per mode, the modes interleaved
within the round so machine noise hits them alike; a block ends with
``loss.item()`` and, on tpu, ``torch_pjrt.synchronize()``. A cell is the
median steps/s over the blocks with [min-max]. ops/region is fused mode's mean
ops per region over the timed blocks (max in parentheses), from ``metrics()``
once fused mode reports it. Notes below the table: compiles during the timed
blocks, CPU fallback ops, the share of each tpu mode's time the host spent
waiting for the device (metrics' wait_seconds: near 100% means the device's
programs bound the step), fused mode's flushes per step by reason. A mode that
raises NotImplementedError (fused, until it lands) is skipped and shows "-".

Fused mode's timed blocks run with ``torch_pjrt.set_device_timing(True)``
(a completion callback per program: a few per step), and after the timed
rounds debug and strict run one more block with it (not counted in their
rates, as a callback per op would slow them). The notes give each mode's
device ms/step (the seconds the device ran programs; fused: the median over
its blocks), and the column "device bound" is strict's median step time over
fused mode's device time per step: the fused/strict that a host costing
nothing would reach, since no mode runs a step faster than its programs.
Ends with the line ``eager_modes models=N geomean_fused_over_strict=X
geomean_fused_over_cpu=Y geomean_strict_over_cpu=Z geomean_device_bound=B``
(geometric means over the six seed models; "-" where a mode did not run).

    python bench/eager_modes.py                          # everything (a few minutes on 2 cores)
    python bench/eager_modes.py --modes cpu strict debug # without fused
    python bench/eager_modes.py --only gpt-tiny dlrm --repeats 3 --steps 3
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import faulthandler
import importlib
import math
import os
import statistics
import sys
import time

import torch

import torch_pjrt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import brief, in_mode, timed  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

MODES = ["cpu", "debug", "strict", "fused"]
GPT_VOCAB = 64
# name: (d_model, layers, T, batch)
GPTS = {"gpt-tiny": (128, 2, 64, 8), "gpt-small": (256, 4, 128, 16)}
SEED_MODELS = ["llama", "qwen", "resnet18", "dlrm", "mingpt", "unet"]
WORKLOADS = list(GPTS) + SEED_MODELS


def gpt_trainer(
    device: str, dim: int, layers: int, block: int, batch_size: int, seed: int = 0, compile_backend: str | None = None
):
    """step(): one training step of examples/train_gpt.py's GPT at this size, returning the loss tensor.

    compile_backend: compile the model in place and the optimizer step with torch.compile(backend=...)
    (bench/compile.py). AdamW is then capturable, so that its step count lives on the device and the step is
    one graph of device tensors.
    """
    train_gpt = importlib.import_module("train_gpt")
    torch.manual_seed(seed)
    model = train_gpt.GPT(vocab=GPT_VOCAB, dim=dim, layers=layers, block=block).to(device)
    if compile_backend:
        model.compile(backend=compile_backend)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, capturable=bool(compile_backend))
    if compile_backend:
        opt.step = torch.compile(opt.step, backend=compile_backend)
    gen = torch.Generator().manual_seed(seed)

    def step() -> torch.Tensor:
        x, y = (t.to(device) for t in train_gpt.batch(gen, batch_size, block, GPT_VOCAB))
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


class PremadeBatches:
    """Stands in for an example's ``batch(gen, *sizes)``: each generator's first `count` batches are made once, then
    cycled. Trainers of one workload seed their generators alike, so the first one to ask makes the batches that
    every mode then trains on."""

    def __init__(self, make, count: int):
        self.make, self.count = make, count
        self.made: dict[tuple, object] = {}
        self.calls: collections.Counter = collections.Counter()

    def __call__(self, gen, *sizes):
        i = self.calls[id(gen)] % self.count
        self.calls[id(gen)] += 1
        if (sizes, i) not in self.made:
            self.made[(sizes, i)] = self.make(gen, *sizes)
        return self.made[(sizes, i)]


def premade_batches(module, count: int) -> None:
    """Makes `module`'s trainers cycle premade batches (idempotent)."""
    if not isinstance(module.batch, PremadeBatches):
        module.batch = PremadeBatches(module.batch, count)


def make_step(workload: str, device: str, batches: int = 0):
    """step() of `workload` on `device`; with batches > 0 its trainer cycles that many premade batches."""
    module = importlib.import_module("train_gpt" if workload in GPTS else workload)
    if batches:
        premade_batches(module, batches)
    if workload in GPTS:
        return gpt_trainer(device, *GPTS[workload])
    return module.make_trainer(device)[1]


def workload_modes(workload: str) -> list[str]:
    return MODES if workload in GPTS else ["cpu", "strict", "fused"]


def timed_block(step, steps: int, mode: str) -> tuple[float, dict | None]:
    """(seconds for `steps` steps with all their work finished, tpu metrics of just those steps)."""

    def block():
        for _ in range(steps):
            loss = step()
        loss.item()

    seconds, _, met = timed(block, mode)
    return seconds, met


def warm_up(step, mode: str, args) -> bool:
    """Untimed blocks of --warmup steps (compiles, caches, optimizer state), more while a block compiled.

    False when the last block still compiled.
    """
    blocks = 0
    while blocks < max(1, args.warmup_blocks):
        # After the first block, blocks as long as the timed ones: a loop whose step is cut by the size cap ends each
        # block at another phase of its period, and that last region is a program of its own.
        _, met = timed_block(step, args.warmup if blocks == 0 else args.steps, mode)
        blocks += 1
        if met is None or (blocks > 1 and not met.get("compiles")):
            return True
    return met is None or not met.get("compiles")


def recover() -> None:
    """After a failed step: drain whatever the failure left queued, ignoring its error."""
    with contextlib.suppress(Exception):
        torch_pjrt.synchronize()


def mode_available(mode: str) -> str | None:
    """None when `mode` can be set, else why not."""
    if mode == "cpu":
        return None
    try:
        with torch_pjrt.eager_mode(mode):
            pass
    except NotImplementedError as e:
        return str(e)
    return None


def region_stats(mets: list[dict]) -> tuple[float, int] | None:
    """(mean ops per region weighted by regions, max ops in a region) over blocks, or None if not reported."""
    total_ops = total_regions = 0.0
    means, peak = [], 0
    for m in mets:
        opr = m.get("ops_per_region")
        if not opr:
            continue
        means.append(opr.get("mean", 0.0))
        peak = max(peak, int(opr.get("max", 0)))
        regions = m.get("regions", 0)
        total_ops += opr.get("mean", 0.0) * regions
        total_regions += regions
    if not means:
        return None
    return (total_ops / total_regions if total_regions else statistics.mean(means)), peak


def fmt_rate(x: float) -> str:
    return f"{x:.1f}" if x >= 100 else f"{x:.2f}"


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def run_workload(workload: str, modes: list[str], args, notes: list[str]) -> dict:
    """{"rates": {mode: [steps/s per block]}, "mets": {mode: [metrics per block]}, "cells": {mode: str}}."""
    steppers, cells = {}, {}
    # Each workload starts with the shape history of a fresh process, as a user training this one model would: the
    # sizes the models before it gave the same op structures would otherwise count as sizes that change, and its
    # fused calls would run alone until they settle again (unet after the other seven: 0.7 steps/s, not 31).
    torch_pjrt._C._forget_shapes()
    for mode in modes:
        try:
            with in_mode(mode):
                step = make_step(workload, "cpu" if mode == "cpu" else "tpu", 0 if args.data_in_step else args.batches)
            if not warm_up(step, mode, args):
                notes.append(f"{workload} {mode}: still compiling after {args.warmup_blocks} warm-up blocks")
            steppers[mode] = step
        except NotImplementedError:
            cells[mode] = "-"
            recover()
        except Exception as e:  # keep the other modes' results; say what went wrong below the table
            cells[mode] = "err"
            notes.append(f"{workload} {mode}: warm-up failed: {brief(e)}")
            recover()
    rates = {mode: [] for mode in steppers}
    mets = {mode: [] for mode in steppers}
    for _ in range(args.repeats):  # interleave the modes so machine noise hits them alike
        for mode in list(steppers):
            time.sleep(args.settle)
            # Fused mode's few programs per step are timed in its timed blocks; a completion callback per op
            # would slow strict and debug, which get one extra block below instead.
            torch_pjrt.set_device_timing(mode == "fused")
            try:
                seconds, met = timed_block(steppers[mode], args.steps, mode)
            except NotImplementedError:
                cells[mode] = "-"
                del steppers[mode]
                recover()
                continue
            except Exception as e:
                cells[mode] = "err"
                notes.append(f"{workload} {mode}: timed step failed: {brief(e)}")
                del steppers[mode]
                recover()
                continue
            finally:
                torch_pjrt.set_device_timing(False)
            rates[mode].append(args.steps / seconds)
            if met is not None:
                mets[mode].append({**met, "block_seconds": seconds})
    rates = {mode: r for mode, r in rates.items() if mode in steppers and r}
    # ms/step the device ran programs: fused mode's median over its timed blocks, the other tpu modes' from one
    # more block with device timing on (not in their rates)
    device = {}
    if mets.get("fused"):
        device["fused"] = statistics.median(1e3 * m["device_seconds"] / args.steps for m in mets["fused"])
    for mode in [m for m in rates if m not in ("cpu", "fused")]:
        time.sleep(args.settle)
        torch_pjrt.set_device_timing(True)
        try:
            seconds, met = timed_block(steppers[mode], args.steps, mode)
            device[mode] = 1e3 * met["device_seconds"] / args.steps
        except Exception as e:
            notes.append(f"{workload} {mode}: device-timed block failed: {brief(e)}")
            recover()
        finally:
            torch_pjrt.set_device_timing(False)
    if device:
        listed = ", ".join(f"{mode} {ms:.2f}" for mode, ms in device.items())
        notes.append(f"{workload}: device ms/step (programs running): {listed}")
    for mode, r in rates.items():
        cells[mode] = f"{fmt_rate(statistics.median(r))} [{fmt_rate(min(r))}-{fmt_rate(max(r))}]"
        recompiles = sum(m.get("compiles", 0) for m in mets[mode])
        if recompiles:
            notes.append(f"{workload} {mode}: {recompiles} compiles during the timed blocks (after warm-up)")
        fallbacks = collections.Counter()
        for m in mets[mode]:
            fallbacks.update(m.get("fallback_ops", {}))
        if fallbacks:
            listed = ", ".join(f"{k} x{v}" for k, v in fallbacks.items())
            notes.append(f"{workload} {mode}: CPU fallback ops: {listed}")
    waits = {
        mode: statistics.median(m["wait_seconds"] / m["block_seconds"] for m in ms)
        for mode, ms in mets.items()
        if ms and all("wait_seconds" in m for m in ms)
    }
    if waits:  # near 100%: the device bounds the step, and no mode can beat its programs' time
        listed = ", ".join(f"{mode} {100 * w:.0f}%" for mode, w in waits.items())
        notes.append(f"{workload}: share of the time the host waited for the device (median): {listed}")
    flushes = collections.Counter()
    for m in mets.get("fused", []):
        flushes.update(m.get("flush_reasons", {}) or {})
    if flushes:
        timed_steps = args.steps * len(mets["fused"])
        per_step = ", ".join(f"{k} {v / timed_steps:.1f}" for k, v in flushes.most_common())
        notes.append(f"{workload} fused: flushes per step: {per_step}")
    return {"rates": rates, "mets": mets, "cells": cells, "device": device}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", default=WORKLOADS, choices=WORKLOADS, metavar="NAME", help=" ".join(WORKLOADS))
    p.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    p.add_argument("--repeats", type=int, default=5, help="interleaved timing blocks per mode")
    p.add_argument("--steps", type=int, default=5, help="training steps per timing block")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps of the first warm-up block (compiles)")
    p.add_argument(
        "--warmup-blocks", type=int, default=3, help="at most this many warm-up blocks, more while they compile"
    )
    p.add_argument("--batches", type=int, default=8, help="premade batches each trainer cycles")
    p.add_argument("--data-in-step", action="store_true", help="make each batch inside the timed step instead")
    p.add_argument("--settle", type=float, default=0.05, help="seconds between timed blocks")
    p.add_argument("--cpu-threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    args = p.parse_args()
    faulthandler.enable()  # a crash in the backend still says which workload and mode
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)

    modes = [m for m in MODES if m in args.modes]
    unavailable = {m: why for m in modes if (why := mode_available(m)) is not None}
    print(
        f"platform {torch_pjrt.platform()['platform']}, torch threads {torch.get_num_threads()},"
        f" {args.repeats} timed blocks of {args.steps} steps after warm-up blocks of {args.warmup},"
        f" {'batches made in each step' if args.data_in_step else f'{args.batches} premade batches cycled'};"
        " steps/s median [min-max]"
    )
    for m, why in unavailable.items():
        print(f"mode {m} skipped: NotImplementedError: {why}")
    print()
    print("| workload | cpu | debug | strict | fused | ops/region | fused/strict | fused/cpu | device bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    notes: list[str] = []
    ratios = {"fused/strict": [], "fused/cpu": [], "strict/cpu": [], "bound": []}
    for workload in [w for w in WORKLOADS if w in args.only]:
        run_modes = [m for m in workload_modes(workload) if m in modes and m not in unavailable]
        res = run_workload(workload, run_modes, args, notes)
        med = {m: statistics.median(r) for m, r in res["rates"].items()}
        stats = region_stats(res["mets"].get("fused", []))
        row = [workload] + [res["cells"].get(m, "-") for m in MODES]
        row.append(f"{stats[0]:.1f} (max {stats[1]})" if stats else "-")
        for num, den in (("fused", "strict"), ("fused", "cpu")):
            row.append(f"{med[num] / med[den]:.2f}" if num in med and den in med else "-")
        # The most fused/strict could be with a free host: strict's step time over fused mode's device time.
        fused_device = res["device"].get("fused")
        bound = 1e3 / med["strict"] / fused_device if fused_device and "strict" in med else None
        row.append(f"{bound:.2f}" if bound else "-")
        if bound and workload in SEED_MODELS:
            ratios["bound"].append(bound)
        print("| " + " | ".join(row) + " |", flush=True)
        if workload in SEED_MODELS:
            for key in ("fused/strict", "fused/cpu", "strict/cpu"):
                num, den = key.split("/")
                if num in med and den in med:
                    ratios[key].append(med[num] / med[den])
        del res
    geo = {k: geomean(v) for k, v in ratios.items()}

    def g(key: str) -> str:
        return f"{geo[key]:.3f}" if geo[key] is not None else "-"

    n_models = len([w for w in args.only if w in SEED_MODELS])
    if n_models:
        print()
        print(
            "geomean over the seed models: "
            + ", ".join(f"{key} {g(key)} (n={len(ratios[key])})" for key in ("fused/strict", "fused/cpu", "strict/cpu"))
            + f"; device bound on fused/strict {g('bound')} (n={len(ratios['bound'])})"
        )
    if notes:
        print()
        for note in notes:
            print(f"- {note}")
    print(
        f"eager_modes models={n_models} geomean_fused_over_strict={g('fused/strict')}"
        f" geomean_fused_over_cpu={g('fused/cpu')} geomean_strict_over_cpu={g('strict/cpu')}"
        f" geomean_device_bound={g('bound')}"
    )


if __name__ == "__main__":
    main()
