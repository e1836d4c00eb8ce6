"""Soak test: long training runs on tpu keep host and device memory flat.

Trains the MLP of tests/python/test_training.py (SGD with momentum, a sync
every step) for --mlp-steps steps, then the GPT of examples/train_gpt.py
(AdamW) for --gpt-steps steps, on tpu, printing at intervals the host's
resident set (VmRSS of /proc/self/status), the bytes malloc has handed out
and not had back (glibc's mallinfo2, "heap") and torch.tpu.memory_allocated().

Each phase's growth compares two windows of --window of its steps: the first
after warm-up (the first --warmup fraction of its steps, which compile and
fill allocators and caches) and its last. The level of a window is its
smallest value: a step's transient allocations raise RSS only for a moment,
a leak raises the level. RSS also moves with what malloc keeps of freed
memory; the heap is what a leak grows. Ends with the line

    soak steps=N rss_growth_mb=X device_growth_bytes=Y

(N: all steps; X and Y: the growths of the phases, summed) and exits 1 when X
exceeds --max-rss-growth-mb, Y exceeds --max-device-growth-bytes, or (when
given) the heap growth exceeds --max-heap-growth-mb.

Known growth: AdamW's bias corrections ((1 - beta2**t) ** 0.5, and lr / (1 - beta1**t)
while it is not yet 1.0) are Python floats that change every step, and the
engine keeps an uploaded buffer for every distinct runtime scalar until it
has 4096 of them (Engine::scalar_buffer), each holding ~1.3 KB plus ~0.15 KB
per op that read it (29 div.Scalar and addcdiv ops a GPT step). So the GPT
phase's heap grows ~7 KB and its RSS ~17 KB a step until the cache is
cleared; the MLP (SGD, constant scalars) stays flat.

    python bench/soak.py                                   # 10,000 MLP + 1,000 GPT steps
    python bench/soak.py --mlp-steps 1500 --gpt-steps 100  # a short one
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import torch

import torch_pjrt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))


def rss_mb() -> float:
    """The process's resident set size in MiB (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


def _heap_reader():
    """A function returning the MiB malloc has allocated and not had freed (glibc), or None without glibc 2.33+."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    mallinfo2.restype = _Mallinfo2

    def heap_mb() -> float:
        info = mallinfo2()
        return (info.uordblks + info.hblkhd) / 2**20  # in use in the arenas, and in mmapped chunks

    return heap_mb


heap_mb = _heap_reader()


class Phase:
    """Host and device memory after the steps of one phase; prints them at intervals."""

    def __init__(self, name: str, steps: int, warmup: float, samples: int, window: float):
        self.name, self.steps = name, steps
        self.window = max(1, int(steps * window))
        self.warm = min(max(1, int(steps * warmup)), max(0, steps - 2 * self.window))
        self.every = max(1, steps // samples)
        self.first = {"rss": [], "heap": [], "device": []}  # over the window after warm-up
        self.last = {"rss": [], "heap": [], "device": []}  # over the last window
        self.t_warm = time.perf_counter()

    def after_step(self, i: int, loss: float) -> None:
        """Called after step i (0-based) has finished (its loss is on the host)."""
        in_first, in_last = self.warm <= i < self.warm + self.window, i >= self.steps - self.window
        windows = [w for w, inside in ((self.first, in_first), (self.last, in_last)) if inside]
        printed = (i + 1) % self.every == 0 or i == self.warm
        if not (windows or printed):
            return
        now = {"rss": rss_mb(), "heap": heap_mb() if heap_mb else 0.0, "device": torch.tpu.memory_allocated()}
        for w in windows:
            for key, value in now.items():
                w[key].append(value)
        if i == self.warm:
            self.t_warm = time.perf_counter()
        if printed:
            rate = f"  {(i - self.warm) / (time.perf_counter() - self.t_warm):6.1f} steps/s" if i > self.warm else ""
            print(
                f"{self.name} step {i + 1:6d}/{self.steps}  rss_mb {now['rss']:7.1f}  heap_mb {now['heap']:7.1f}"
                f"  device_bytes {now['device']:9d}  compiles {torch_pjrt.metrics()['compiles']:4d}"
                f"  loss {loss:.4f}{rate}",
                flush=True,
            )

    def growth(self) -> dict:
        """{'rss': MiB, 'heap': MiB, 'device': bytes}: the last window's level less the first's."""
        if not self.first["rss"] or len(self.last["rss"]) < self.window:
            return {"rss": 0.0, "heap": 0.0, "device": 0}
        return {key: min(self.last[key]) - min(self.first[key]) for key in self.first}


def soak_mlp(phase: Phase, device: str = "tpu") -> None:
    """The MLP of tests/python/test_training.py: SGD with momentum, .item() of the loss every step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for i in range(phase.steps):
        x = torch.randn(64, 16, generator=gen).to(device)
        y = torch.randint(0, 4, (64,), generator=gen).to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        phase.after_step(i, loss.item())


def soak_gpt(phase: Phase, device: str = "tpu") -> None:
    """examples/train_gpt.py's own training loop; its per-step log line says which step has finished."""
    from train_gpt import train

    def log(message: str) -> None:
        words = message.split()
        if len(words) == 4 and words[0] == "step":  # "step {i}  loss {loss}"
            phase.after_step(int(words[1]), float(words[3]))

    train(device, phase.steps, log=log)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mlp-steps", type=int, default=10_000)
    p.add_argument("--gpt-steps", type=int, default=1_000)
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of each phase's steps before growth counts")
    p.add_argument("--window", type=float, default=0.05, help="fraction of each phase's steps a level is taken over")
    p.add_argument("--samples", type=int, default=10, help="memory lines printed per phase")
    p.add_argument("--max-rss-growth-mb", type=float, default=20.0)
    p.add_argument("--max-device-growth-bytes", type=int, default=0)
    p.add_argument("--max-heap-growth-mb", type=float, default=None)
    args = p.parse_args(argv)
    torch_pjrt.set_eager_mode("strict")

    print(f"start rss_mb {rss_mb():.1f}  heap_mb {heap_mb() if heap_mb else 0.0:.1f}", flush=True)
    total = {"rss": 0.0, "heap": 0.0, "device": 0}
    for name, run, steps in (("mlp", soak_mlp, args.mlp_steps), ("gpt", soak_gpt, args.gpt_steps)):
        if steps <= 0:
            continue
        phase = Phase(name, steps, args.warmup, args.samples, args.window)
        run(phase)
        growth = phase.growth()
        total = {key: total[key] + growth[key] for key in total}
        measured = max(1, steps - phase.warm - phase.window)
        print(
            f"{name} growth over steps {phase.warm + 1}-{steps} (windows of {phase.window}):"
            f" rss {growth['rss']:+.2f} MB ({1000 * growth['rss'] / measured:+.2f} MB per 1000 steps),"
            f" heap {growth['heap']:+.2f} MB ({1000 * growth['heap'] / measured:+.2f} MB per 1000 steps),"
            f" device {growth['device']:+d} bytes",
            flush=True,
        )
    m = torch_pjrt.metrics()
    print(f"compiles {m['compiles']}  executions {m['executions']}  fallback_ops {dict(m['fallback_ops'])}")
    print(f"heap_growth_mb={total['heap']:.2f}")
    over = []
    if total["rss"] > args.max_rss_growth_mb:
        over.append(f"rss growth {total['rss']:.2f} MB > {args.max_rss_growth_mb} MB")
    if total["device"] > args.max_device_growth_bytes:
        over.append(f"device growth {total['device']} bytes > {args.max_device_growth_bytes} bytes")
    if args.max_heap_growth_mb is not None and total["heap"] > args.max_heap_growth_mb:
        over.append(f"heap growth {total['heap']:.2f} MB > {args.max_heap_growth_mb} MB")
    if over:
        print("soak: over the limits: " + "; ".join(over), file=sys.stderr, flush=True)
    steps = max(0, args.mlp_steps) + max(0, args.gpt_steps)
    print(f"soak steps={steps} rss_growth_mb={total['rss']:.2f} device_growth_bytes={total['device']}", flush=True)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
