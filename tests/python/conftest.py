import os
import sys

# The persistent compile cache is off in the test process (set before torch
# autoloads torch_pjrt and starts the engine), so that compile counts never
# depend on what an earlier run left on disk. test_compile_cache.py runs its
# processes with cache directories of their own.
os.environ["TORCH_PJRT_CACHE_DIR"] = os.environ.get("TORCH_PJRT_TEST_CACHE_DIR", "off")
os.environ.pop("TORCH_PJRT_SHARED_CACHE_DIR", None)

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_pjrt  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))


# The mode every test runs in: strict, unless TORCH_PJRT_TEST_MODE names another.
DEFAULT_MODE = os.environ.get("TORCH_PJRT_TEST_MODE", "strict")

# Modules whose tests run in strict and in fused mode (fused must keep strict's
# semantics op for op): the op tests, models, training, optimizers and views.
BOTH_MODES = ("test_ops_", "test_models", "test_training", "test_optim", "test_views")


def pytest_generate_tests(metafunc):
    name = metafunc.module.__name__.rpartition(".")[2]
    if DEFAULT_MODE == "strict" and name.startswith(BOTH_MODES) and "eager_mode_name" in metafunc.fixturenames:
        metafunc.parametrize("eager_mode_name", ["strict", "fused"])


@pytest.fixture
def eager_mode_name():
    return DEFAULT_MODE


@pytest.fixture(autouse=True)
def _mode_and_seed(eager_mode_name):
    """Every test starts in its mode (strict unless parametrized) with a fixed seed, and with no shape history (which
    sizes changed in earlier tests, and so which calls fused mode runs alone)."""
    torch_pjrt._C._forget_shapes()
    torch_pjrt.set_eager_mode(eager_mode_name)
    torch.manual_seed(0)
    yield
    torch_pjrt.set_eager_mode("strict")


def _ops_ran():
    return set(torch_pjrt.metrics().get("op_calls", {})) | _ran_before_reset


_ran_on_workers: set = set()


def pytest_sessionfinish(session):
    """An xdist worker hands the ops it ran to the controller, which prints the summary."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["torch_pjrt_ops_ran"] = sorted(_ops_ran())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _ran_on_workers.update(getattr(node, "workeroutput", {}).get("torch_pjrt_ops_ran", ()))


def pytest_terminal_summary(terminalreporter):
    """Lists lowerings that no test ran (the acceptance asks for a test of every lowering)."""
    import torch_pjrt._C as C

    lowered = set(C._lowered_ops())
    ran = _ops_ran() | _ran_on_workers
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
