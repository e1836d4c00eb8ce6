"""Host<->device copy bandwidth and overlap on tpu, against a plain host memcpy in the same run.

For each repeat (interleaved): a host memcpy (libc's, through ``ctypes.memmove``, between two warm CPU
tensors), a non-blocking host->device copy from pinned memory, a non-blocking device->host copy into pinned
memory, and blocking copies from and to pageable memory. A copy's time runs from its call to
``torch.tpu.synchronize()``; its return time is the call alone. Overlap: a device computation alone, a copy
alone, and both issued together; overlap is the part of the shorter one hidden by running them together
(1.0: fully hidden).

Ends with the line ``transfer h2d_vs_memcpy=X d2h_vs_memcpy=Y return_ms=Z overlap=W`` (medians; return_ms is the
slower direction's).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import torch

import torch_pjrt  # noqa: F401


def timed(fn) -> tuple[float, float]:
    """(seconds until fn returns, seconds until the device is idle)."""
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    torch.tpu.synchronize()
    return t1 - t0, time.perf_counter() - t0


def med(xs):
    return statistics.median(xs), min(xs), max(xs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mbytes", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    n = args.mbytes * 2**20 // 4
    src_pinned = torch.randn(n).pin_memory()
    dst_pinned = torch.empty(n, pin_memory=True)
    src_pageable, dst_pageable = torch.randn(n), torch.empty(n)
    dev = src_pageable.to("tpu")
    a = torch.randn(1024, 1024, device="tpu")

    def compute():
        y = a
        for _ in range(8):
            y = torch.tanh(y @ a)
        return y

    results = {
        k: [] for k in ("memcpy", "h2d", "d2h", "h2d_pageable", "d2h_pageable", "return_h2d", "return_d2h", "overlap")
    }
    keep = []
    for r in range(args.repeats + 1):  # the first round warms caches (pinned staging blocks, programs)
        row = {}
        row["memcpy"] = timed(lambda: ctypes.memmove(dst_pageable.data_ptr(), src_pageable.data_ptr(), 4 * n))[1]
        ret_h2d, row["h2d"] = timed(lambda: keep.append(src_pinned.to("tpu", non_blocking=True)))
        ret_d2h, row["d2h"] = timed(lambda: dst_pinned.copy_(dev, non_blocking=True))
        row["h2d_pageable"] = timed(lambda: keep.append(src_pageable.to("tpu")))[1]
        row["d2h_pageable"] = timed(lambda: dst_pageable.copy_(dev))[1]
        row["return_h2d"], row["return_d2h"] = ret_h2d, ret_d2h
        keep.clear()
        t_compute = timed(compute)[1]
        t_copy = timed(lambda: dst_pinned.copy_(dev, non_blocking=True))[1]

        def both():
            compute()
            dst_pinned.copy_(dev, non_blocking=True)

        t_both = timed(both)[1]
        row["overlap"] = max(0.0, min(1.0, (t_compute + t_copy - t_both) / min(t_compute, t_copy)))
        if r > 0:
            for k, v in row.items():
                results[k].append(v)
    assert torch.equal(dst_pinned, src_pageable)

    gb = args.mbytes / 1024
    print(f"{args.mbytes} MB, {args.repeats} interleaved repeats; median [min-max]")
    print(f"{'copy':<28}{'GB/s':>24}{'vs memcpy':>12}")
    memcpy = med(results["memcpy"])[0]
    for key, label in [
        ("memcpy", "host memcpy"),
        ("h2d", "host->tpu, pinned, async"),
        ("d2h", "tpu->host, pinned, async"),
        ("h2d_pageable", "host->tpu, pageable"),
        ("d2h_pageable", "tpu->host, pageable"),
    ]:
        m, lo, hi = med(results[key])
        print(f"{label:<28}{gb / m:>8.2f} [{gb / hi:.2f}-{gb / lo:.2f}]{memcpy / m:>12.2f}")
    returns = {}
    for key in ("return_h2d", "return_d2h"):
        returns[key] = med([x * 1e3 for x in results[key]])
        m, lo, hi = returns[key]
        print(f"non-blocking {key[7:]} call returns in {m:.3f} ms [{lo:.3f}-{hi:.3f}]")
    rm = max(m for m, _, _ in returns.values())
    om, olo, ohi = med(results["overlap"])
    print(f"overlap of a d2h copy with compute: {om:.2f} [{olo:.2f}-{ohi:.2f}]")
    h2d, d2h = (memcpy / med(results[k])[0] for k in ("h2d", "d2h"))
    print(f"transfer h2d_vs_memcpy={h2d:.2f} d2h_vs_memcpy={d2h:.2f} return_ms={rm:.3f} overlap={om:.2f}")


if __name__ == "__main__":
    main()
