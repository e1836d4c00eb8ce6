"""Checks the TorchTitan runs of run.sh: python compare.py WORKDIR [--rtol R] [--atol A]

Reads the per-step global_avg_loss that TorchTitan logs to TensorBoard (float32)
for the 1-rank run (WORKDIR/out1) and the 2-rank FSDP run (WORKDIR/out2), and
torch_pjrt's metrics written by pjrt_report.py. Prints the losses side by side;
exits 1 unless: every loss is finite, the first is within 1 of ln(2048), the
loss falls (mean of the last 3 steps below the mean of the first 3, last below
first), the 2-rank loss equals the 1-rank loss at every step within
|a - b| <= atol + rtol * |b|, and no op fell back to the CPU on any rank.
"""

import argparse
import glob
import json
import math
import os
import sys

TAG = "loss_metrics/global_avg_loss"


def losses(out_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(glob.glob(os.path.join(out_dir, "tb", "**", "events.out.tfevents.*"), recursive=True))
    if not files:
        sys.exit(f"no TensorBoard events under {out_dir}/tb")
    by_step = {}
    for f in files:
        ea = EventAccumulator(f, size_guidance={"scalars": 0})
        ea.Reload()
        if TAG in ea.Tags()["scalars"]:
            for e in ea.Scalars(TAG):
                by_step[e.step] = e.value
    return [by_step[s] for s in sorted(by_step)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()

    l1 = losses(os.path.join(a.workdir, "out1"))
    l2 = losses(os.path.join(a.workdir, "out2"))
    ok = True
    print(f"{'step':>4}  {'1 rank (batch 4)':>17}  {'2 ranks FSDP (2+2)':>18}  {'|diff|':>9}")
    for i in range(max(len(l1), len(l2))):
        x = l1[i] if i < len(l1) else float("nan")
        y = l2[i] if i < len(l2) else float("nan")
        print(f"{i + 1:>4}  {x:17.7f}  {y:18.7f}  {abs(x - y):9.2e}")
    maxdiff = max((abs(x - y) for x, y in zip(l1, l2)), default=float("nan"))
    print(
        f"ln({a.vocab}) = {math.log(a.vocab):.4f}; max |diff| = {maxdiff:.2e} "
        f"(tolerance {a.atol:g} + {a.rtol:g}*|loss|)"
    )

    def fail(msg):
        nonlocal ok
        ok = False
        print("FAIL:", msg)

    for name, series in (("1-rank", l1), ("2-rank", l2)):
        if len(series) != a.steps:
            fail(f"{name}: {len(series)} steps logged, expected {a.steps}")
            continue
        if not all(math.isfinite(v) for v in series):
            fail(f"{name}: a loss is not finite")
            continue
        if abs(series[0] - math.log(a.vocab)) > 1.0:
            fail(f"{name}: first loss {series[0]:.4f} is not about ln({a.vocab})")
        if not (sum(series[-3:]) < sum(series[:3]) and series[-1] < series[0]):
            fail(f"{name}: loss does not fall")
    for i, (x, y) in enumerate(zip(l1, l2)):
        if not abs(x - y) <= a.atol + a.rtol * abs(x):
            fail(f"step {i + 1}: 1-rank {x:.7f} vs 2-rank {y:.7f}")

    for run in ("out1", "out2"):
        reps = sorted(glob.glob(os.path.join(a.workdir, run, "pjrt_rank*.json")))
        if not reps:
            fail(f"{run}: no torch_pjrt metrics written")
        for r in reps:
            m = json.load(open(r))
            print(
                f"{run}/{os.path.basename(r)}: device {m['device_type']}, "
                f"{m['op_calls']} op calls ({m['distinct_ops']} ops), "
                f"{m['compiles']} compiles, fallback_ops {m['fallback_ops'] or 'none'}"
            )
            if m["device_type"] != "tpu":
                fail(f"{r}: TorchTitan picked {m['device_type']}, not tpu")
            if m["fallback_ops"]:
                fail(f"{r}: ops ran on the CPU: {m['fallback_ops']}")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
