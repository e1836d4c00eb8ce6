"""Warm start: the GPT example's first steps in two fresh processes that share one empty compile cache.

The first process compiles every program and writes it to the cache; the second should load them all. Prints, for each
process, its compile seconds, the seconds it spent loading programs from disk, its compiles and its time to the first
step (from the start of training to the first step's loss on the host; the imports, torch._dynamo's included, are
shown apart), and the ratios second/first, as medians over
``--repeats`` pairs, each on a fresh cache directory. Targets (issue 11): compile seconds of the second ≤ 5% of the
first, and time to first step ≤ 25%.

``--signed-shared``: the two processes have host tiers of their own and share a shared tier with a signing key
(``TORCH_PJRT_CACHE_KEY``): the first writes signed entries there, the second verifies each HMAC and loads them.
Target (issue 45): its time to the first step ≤ 10% of the first's.

    python bench/warm_start.py --repeats 3
    python bench/warm_start.py --repeats 3 --signed-shared
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


def child(steps: int) -> None:
    t_import = time.perf_counter()
    import torch_pjrt

    sys.path.insert(0, EXAMPLES)
    # torch.optim's first optimizer imports torch._dynamo (about 1.3 s here, in any process, on any device): it is
    # counted as import time, not as time to the first step.
    import torch._dynamo  # noqa: F401

    import train_gpt

    marks = []
    t0 = time.perf_counter()
    train_gpt.train("tpu", steps, log=lambda _line: marks.append(time.perf_counter()))
    m = torch_pjrt.metrics()
    out = {
        "import_s": t0 - t_import,
        "first_step_s": marks[0] - t0,
        "steps_s": marks[steps - 1] - t0,
        "compiles": m["compiles"],
        "compile_s": m["compile_seconds"],
        "load_s": m["persistent_cache"]["load_seconds"],
        "loads": m["persistent_cache"]["loads"],
        "shared_hits": m["persistent_cache"]["shared_hits"],
        "bad_signature": m["persistent_cache"]["bad_signature"],
    }
    print(json.dumps(out))


def run_child(cache_dir: str, steps: int, shared: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_PJRT_")}
    env["TORCH_PJRT_CACHE_DIR"] = cache_dir
    if shared:
        env["TORCH_PJRT_SHARED_CACHE_DIR"] = shared
        env["TORCH_PJRT_CACHE_KEY"] = "bench warm_start team key"
    p = subprocess.run(
        [sys.executable, __file__, "--child", "--steps", str(steps)], env=env, capture_output=True, text=True
    )
    if p.returncode != 0:
        sys.exit(f"child failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--signed-shared", action="store_true", help="share a signed shared tier, host tiers apart")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.steps)
        return
    pairs = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="torch_pjrt_warm_") as d:
            if args.signed_shared:
                shared = os.path.join(d, "shared")
                first = run_child(os.path.join(d, "host_a"), args.steps, shared)
                second = run_child(os.path.join(d, "host_b"), args.steps, shared)
                if second["shared_hits"] != first["compiles"] or second["bad_signature"]:
                    sys.exit(f"the second process did not load every signed entry: {second}")
                pairs.append((first, second))
            else:
                pairs.append((run_child(d, args.steps), run_child(d, args.steps)))

    def med(values):
        return statistics.median(values), min(values), max(values)

    def row(name, key, fmt="{:.3f}"):
        a = med([f[key] for f, _ in pairs])
        b = med([s[key] for _, s in pairs])
        cells = " ".join(fmt.format(v) for v in a), " ".join(fmt.format(v) for v in b)
        print(f"{name:<18} first {cells[0]:<26} second {cells[1]}")

    tiers = "a signed shared tier, host tiers apart" if args.signed_shared else "one host tier"
    print(f"GPT example, first {args.steps} steps, {args.repeats} pairs of fresh processes on {tiers} (median min max)")
    row("import s", "import_s")
    row("compiles", "compiles", "{:.0f}")
    row("compile s", "compile_s")
    row("disk load s", "load_s")
    row("first step s", "first_step_s")
    row(f"{args.steps} steps s", "steps_s")
    ratios_compile = [s["compile_s"] / f["compile_s"] for f, s in pairs]
    ratios_first = [s["first_step_s"] / f["first_step_s"] for f, s in pairs]
    c, f = med(ratios_compile), med(ratios_first)
    print(f"second/first compile seconds  {c[0]:.3f} (range {c[1]:.3f}-{c[2]:.3f})  target <= 0.05")
    target = 0.1 if args.signed_shared else 0.25
    print(f"second/first time to step 1   {f[0]:.3f} (range {f[1]:.3f}-{f[2]:.3f})  target <= {target}")


if __name__ == "__main__":
    main()
