"""Guards the OpInfos that match CPU natively against regressions.

``op_coverage_native.txt`` lists the OpInfos of PyTorch's op database whose samples (and
gradients) match CPU on tpu without any CPU fallback; ``python tools/op_coverage.py --update``
rewrites it (and docs/op_coverage.md) on request. This test re-checks a fixed shard of that list,
every ``STEP``-th entry, the same way the sweep does, and fails if one no longer passes natively.
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import op_coverage  # noqa: E402

STEP = 1  # every entry; raise it if the list outgrows the CI time budget
MAX_SAMPLES = 3  # samples per OpInfo and dtype (the sweep runs every float32 sample)
NATIVE = op_coverage.read_native_list()[::STEP]

_ops = {}


def _op(name):
    if not _ops:
        _ops.update({op_coverage.key(op): op for op in op_coverage.op_db()})
    return _ops[name]


@pytest.mark.parametrize("name", NATIVE)
def test_still_native(name):
    status, detail = op_coverage.check_op(_op(name), MAX_SAMPLES)
    assert status == "native", f"{name} is no longer native: {status}: {detail}"
