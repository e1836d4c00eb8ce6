"""A short soak (bench/soak.py): training keeps device memory flat and host memory within bounds.

1,500 MLP steps (SGD with momentum) and 100 GPT steps (AdamW) on tpu, in a
fresh process. The full soak (10,000 + 1,000 steps) allows 20 MB of RSS
growth; this one allows its proportion of that to the heap (the bytes malloc
has handed out and not had back, which is what a leak grows) and the full 20
MB to RSS, which over 90 GPT steps moves by several MB with what malloc keeps
of freed memory (+4.7 to +5.6 MB in repeated runs, against +1.81 MB of heap
every time). Device memory must not grow at all.
"""

import os
import re
import subprocess
import sys

SOAK = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "soak.py")
MLP_STEPS, GPT_STEPS = 1500, 100
FULL_STEPS, FULL_RSS_MB = 11_000, 20.0


def test_short_soak_memory_is_flat():
    heap_limit = FULL_RSS_MB * (MLP_STEPS + GPT_STEPS) / FULL_STEPS
    args = [
        f"--mlp-steps={MLP_STEPS}",
        f"--gpt-steps={GPT_STEPS}",
        f"--max-rss-growth-mb={FULL_RSS_MB}",
        f"--max-heap-growth-mb={heap_limit:.2f}",
        "--max-device-growth-bytes=0",
    ]
    run = subprocess.run([sys.executable, SOAK, *args], capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    last = re.search(r"^soak steps=(\d+) rss_growth_mb=(\S+) device_growth_bytes=(-?\d+)$", run.stdout, re.M)
    assert last, out
    assert int(last[1]) == MLP_STEPS + GPT_STEPS, out
    assert int(last[3]) == 0, out
    assert run.returncode == 0, out
    assert "fallback_ops {}" in run.stdout, out
