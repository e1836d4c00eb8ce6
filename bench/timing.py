"""What the benchmarks share: running a block of work in an eager mode, timed with all its work finished."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import torch_pjrt


def in_mode(mode: str):
    """The context of a benchmark mode: "cpu" (native eager) or a tpu eager mode."""
    return contextlib.nullcontext() if mode == "cpu" else torch_pjrt.eager_mode(mode)


def timed(work: Callable[[], object], mode: str) -> tuple[float, object, dict | None]:
    """(seconds for `work()` with all its tpu work finished, its result, tpu metrics of just that work)."""
    tpu = mode != "cpu"
    with in_mode(mode):
        if tpu:
            torch_pjrt.synchronize()
            torch_pjrt.reset_metrics()
        t0 = time.perf_counter()
        result = work()
        if tpu:
            torch_pjrt.synchronize()
        return time.perf_counter() - t0, result, (torch_pjrt.metrics() if tpu else None)


def brief(e: Exception) -> str:
    """The first line of an error, for a table cell."""
    first = (str(e).splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:200]}"
