"""The CI shard of the bad-input sweep (tools/bad_input_sweep.py): a fixed, deterministic slice of the lowered ops.

It fails on any signal, hang, exception-class mismatch or broken-after-raise that is not in tools/bad_input_known.txt,
and on a known entry of this shard that no longer fails (remove it from the list). Value mismatches and tpu-only
raises are in the sweep's report but do not fail it.
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "bad_input_sweep.py")
SHARD = ["--shard", "0/6", "--cases-per-op", "6", "--seed", "0", "--workers", "2"]


def test_bad_input_shard(tmp_path):
    report = tmp_path / "bad_input_report.txt"
    command = [sys.executable, TOOL, *SHARD, "--check", "--report", str(report)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    lines = result.stdout.splitlines()
    summary = [line for line in lines if line.startswith("bad_input_sweep ops=")]
    assert summary, f"the sweep did not finish:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    problems = [line for line in lines if line.startswith(("new: ", "stale: "))]
    assert result.returncode == 0, "\n".join([summary[0], f"rerun: {' '.join(command)}", *problems])
