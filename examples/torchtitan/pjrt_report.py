"""Imported into each TorchTitan process with --experimental.custom-import pjrt_report.

It changes nothing in TorchTitan: at exit it writes torch_pjrt.metrics() (CPU
fallbacks, op counts, compiles) to $TITAN_PJRT_REPORT_DIR/pjrt_rank<RANK>.json,
so that run.sh can show that no op ran on the CPU.
"""

import atexit
import json
import os

import torch

import torch_pjrt


def _write():
    d = os.environ.get("TITAN_PJRT_REPORT_DIR")
    if not d:
        return
    m = torch_pjrt.metrics()
    rep = {
        "device_type": torch._utils._get_available_device_type(),
        "fallback_ops": m.get("fallback_ops", {}),
        "op_calls": sum(m.get("op_calls", {}).values()),
        "distinct_ops": len(m.get("op_calls", {})),
        "compiles": m.get("compiles"),
        "compile_seconds": m.get("compile_seconds"),
        "persistent_cache": {k: m.get("persistent_cache", {}).get(k) for k in ("host_hits", "misses")},
    }
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"pjrt_rank{os.environ.get('RANK', '0')}.json"), "w") as f:
        json.dump(rep, f, indent=1)


atexit.register(_write)
