import os
import sys

import pytest
import torch

import torch_pjrt

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _strict_mode_and_seed():
    """Every test starts in strict mode with a fixed seed."""
    torch_pjrt.set_eager_mode("strict")
    torch.manual_seed(0)
    yield
    torch_pjrt.set_eager_mode("strict")


def pytest_terminal_summary(terminalreporter):
    """Lists lowerings that no test ran (the acceptance asks for a test of every lowering)."""
    import torch_pjrt._C as C

    lowered = set(C._lowered_ops())
    ran = set(torch_pjrt.metrics().get("op_calls", {})) | _ran_before_reset
    missing = sorted(lowered - ran)
    terminalreporter.write_line(
        f"torch_pjrt: {len(lowered) - len(missing)}/{len(lowered)} lowerings ran in this session"
    )
    if 0 < len(missing) <= 40:  # a full run: name the stragglers
        terminalreporter.write_line("  never ran: " + ", ".join(missing))


_ran_before_reset: set = set()
_reset = torch_pjrt.reset_metrics


def _reset_keeping_coverage():
    _ran_before_reset.update(torch_pjrt.metrics().get("op_calls", {}))
    _reset()


torch_pjrt.reset_metrics = _reset_keeping_coverage
