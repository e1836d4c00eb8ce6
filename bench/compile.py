"""One GPT training step under torch.compile against the eager modes, in one run.

Workloads: the GPT of examples/train_gpt.py at the two sizes of bench/eager_modes.py ("gpt-tiny", "gpt-small"),
trained with AdamW. Modes:

- ``cpu``: native CPU eager;
- ``inductor``: ``model.compile()`` with Inductor on the CPU;
- ``strict``, ``fused``: tpu eager modes;
- ``compiled``: ``model.compile(backend="tpu")`` and ``torch.compile(opt.step, backend="tpu")`` (a capturable AdamW)
  on tpu: forward, backward and the optimizer step are one program each, and from the second step on each runs its
  captured program without dispatching the graph's nodes (the replay path of torch_pjrt/dynamo.py); the inductor
  column compiles the same two;
- ``jax``: the same model and AdamW step as one ``jax.jit`` program (bench/jax_gpt.py), compiled and run by the
  PJRT plugin torch_pjrt uses (JAX loads it as a backend of its own): the same XLA build, which is the target;
- ``jaxlib``: the same jitted step on jaxlib's built-in CPU client, a newer XLA build (on CPU it runs matmuls and
  reductions as YNNPACK kernels, which the xla-cpu-pjrt plugin lacks), for reference.

Both JAX columns need jax installed (it is not part of this project's dependencies; shown as "-" otherwise).

For each (workload, mode): the first step's seconds (compiles included), then untimed warm-up steps, then --repeats
rounds that time one block of --steps steps per mode, interleaved so machine noise hits the modes alike. A cell is
the median steps/s over the blocks with [min-max]. Ends with the ratios compiled/strict, compiled/fused, compiled/cpu,
compiled/inductor, compiled/jax and compiled/jaxlib per workload.

    python bench/compile.py --repeats 5 --steps 3
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import sys
import time

import torch_pjrt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import eager_modes  # noqa: E402  (bench/: the GPT trainer and its sizes)

MODES = ["cpu", "inductor", "strict", "fused", "compiled", "jax", "jaxlib"]
JAX_MODES = ("jax", "jaxlib")


def make_step(workload: str, mode: str):
    if mode in JAX_MODES:
        import jax_gpt

        backend = jax_gpt.PLUGIN if mode == "jax" else "cpu"
        return jax_gpt.gpt_trainer(*eager_modes.GPTS[workload], vocab=eager_modes.GPT_VOCAB, backend=backend)
    device = "cpu" if mode in ("cpu", "inductor") else "tpu"
    backend = {"inductor": "inductor", "compiled": "tpu"}.get(mode)
    return eager_modes.gpt_trainer(device, *eager_modes.GPTS[workload], compile_backend=backend)


def eager_mode_of(mode: str):
    if mode in ("cpu", "inductor") + JAX_MODES:
        return contextlib.nullcontext()
    return torch_pjrt.eager_mode("strict" if mode == "compiled" else mode)


def block(step, steps: int, mode: str) -> float:
    with eager_mode_of(mode):
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = step()
        if mode in JAX_MODES:
            loss.block_until_ready()
        else:
            loss.item()
        if mode not in ("cpu", "inductor") + JAX_MODES:
            torch_pjrt.synchronize()
        return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", default=list(eager_modes.GPTS), choices=list(eager_modes.GPTS))
    p.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=4)
    args = p.parse_args()
    modes = list(args.modes)
    if importlib.util.find_spec("jax") is None:
        if any(m in modes for m in JAX_MODES):
            print("jax is not installed: its columns show '-'")
        modes = [m for m in modes if m not in JAX_MODES]
    elif "jax" in modes:
        import jax_gpt

        info = torch_pjrt.platform()
        jax_gpt.use_plugin(info["plugin_path"], len(info["devices"]) if info["platform"] == "cpu" else None)

    results = {}
    for workload in args.only:
        steps = {m: make_step(workload, m) for m in modes}
        first = {m: block(steps[m], 1, m) for m in modes}
        for m in modes:
            block(steps[m], args.warmup, m)
        rates = {m: [] for m in modes}
        for _ in range(args.repeats):
            for m in modes:
                rates[m].append(args.steps / block(steps[m], args.steps, m))
        results[workload] = (first, rates)

    print(f"\n{'workload':10} " + " ".join(f"{m:>22}" for m in MODES))
    for workload, (first, rates) in results.items():
        cells = []
        for m in MODES:
            if m in rates:
                r = rates[m]
                cells.append(f"{statistics.median(r):7.2f} [{min(r):.2f}-{max(r):.2f}]")
            else:
                cells.append("-")
        print(f"{workload:10} " + " ".join(f"{c:>22}" for c in cells) + "   steps/s")
        print(
            f"{'':10} "
            + " ".join(f"{first[m]:21.2f}s" if m in first else f"{'-':>22}" for m in MODES)
            + "   first step"
        )
    print()
    for workload, (_, rates) in results.items():
        med = {m: statistics.median(r) for m, r in rates.items()}
        if "compiled" not in med:
            continue
        ratios = [
            f"compiled/{m}={med['compiled'] / med[m]:.2f}"
            for m in ("strict", "fused", "cpu", "inductor") + JAX_MODES
            if m in med
        ]
        print(f"compile {workload} " + " ".join(ratios))


if __name__ == "__main__":
    main()
