"""torch_pjrt: PyTorch's native ``tpu`` device over XLA's PJRT C API.

``import torch_pjrt`` (or just ``import torch``, through the autoload entry
point) registers the ``tpu`` device. Every op on a tpu tensor runs as a
StableHLO program on the PJRT plugin chosen by :func:`platform`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import time

import torch

from . import _platform
from ._version_check import check_torch_version

check_torch_version()

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import _C  # noqa: E402  (must follow the rename and the version check)

_choice = _platform.choose()
_C._configure(_choice.path)
_C._register_ops()

from . import device as _device_module  # noqa: E402

# Raised for an integer division or remainder by zero. CPU raises a
# RuntimeError whose message is "ZeroDivisionError"; this class derives from
# both RuntimeError and Python's ZeroDivisionError.
ZeroDivisionError = _C.ZeroDivisionError  # noqa: A001

torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
torch.set_autocast_dtype("tpu", torch.bfloat16)  # TPUs compute in bfloat16, as TorchTPU's autocast does

from . import dynamo as _dynamo  # noqa: E402

_dynamo.use_for_default_backend()  # torch.compile(model) of a tpu model picks the tpu backend

from . import distributed as _distributed  # noqa: E402

_distributed.register()  # init_process_group() and init_device_mesh("tpu", ...) pick tpu_dist

__all__ = [
    "ZeroDivisionError",
    "eager_mode",
    "get_eager_mode",
    "metrics",
    "platform",
    "reset_metrics",
    "set_async_compile",
    "set_device_timing",
    "set_eager_mode",
    "stablehlo",
    "synchronize",
    "wait_for_compiles",
]

_MODES = ("strict", "debug", "fused")


def platform() -> dict:
    """The PJRT platform in use: its name, plugin path and why it was chosen."""
    info = {"platform": _choice.platform, "plugin_path": _choice.path, "reason": _choice.reason}
    info["available"] = bool(_C._is_available())
    if info["available"]:
        info.update(_C._platform_info())
    else:
        info["error"] = _C._load_error()
    return info


def set_eager_mode(mode: str) -> None:
    """Sets the eager mode: ``"strict"`` (async, default), ``"debug"`` (sync per op) or ``"fused"``."""
    if mode not in _MODES:
        raise ValueError(f"eager mode must be one of {_MODES}, got {mode!r}")
    _C._set_mode(mode)


def get_eager_mode() -> str:
    return _C._get_mode()


@contextlib.contextmanager
def eager_mode(mode: str):
    """Runs the body in ``mode`` and restores the previous mode afterwards."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        _C._set_mode(previous)


def set_async_compile(on: bool) -> None:
    """Fused mode: a region whose program is not compiled yet runs op by op (as strict mode) while its program
    compiles on a background thread; the next run of the same region uses it. Off by default
    (``TORCH_PJRT_ASYNC_COMPILE=1`` turns it on). ``torch.compile(..., options={"async_compile": True})`` does the
    same for one compiled function's graphs."""
    _C._set_async_compile(bool(on))


def wait_for_compiles() -> None:
    """Waits until every program compiling in the background (async compile) is in the cache."""
    _C._wait_for_compiles()


def set_device_timing(on: bool) -> None:
    """Times the device: while on, ``metrics()["device_seconds"]`` adds up the seconds the device spent running
    programs (each from the later of its enqueue and the previous program's end, to its own end). Beside the wall
    time of the same steps it says whether the host or the device bounds them: no eager mode can run a step faster
    than its programs. Off by default: it costs a completion callback per program. ``TORCH_PJRT_DEVICE_TIME=1``
    turns it on at import."""
    _C._set_device_timing(bool(on))


def metrics() -> dict:
    """Counters since the last reset: compiles, cache_hits, executions, syncs, compile_seconds, fallback_ops,
    wait_seconds (host blocked on the device), device_seconds (see ``set_device_timing``), and fused mode's and the
    caches' counters."""
    return _C._metrics()


def reset_metrics() -> None:
    _C._reset_metrics()


def stablehlo(tensor: torch.Tensor) -> str:
    """The StableHLO module that fused mode's open region would run to produce ``tensor``.

    Returns ``""`` when no pending region produces or reads ``tensor`` (strict and debug mode, or
    after a flush).
    """
    return _C._stablehlo(tensor)


def synchronize() -> None:
    """Waits for all queued work and raises any error it hit."""
    _C._synchronize()


def _mode_from_env() -> str | None:
    if os.environ.get("TORCH_TPU_LAUNCH_BLOCKING") == "1":
        return "debug"
    if os.environ.get("TORCH_TPU_DEFER_AND_FUSE") == "1":
        return "fused"
    return os.environ.get("TORCH_PJRT_EAGER_MODE") or None


def _finish_cache_writes_at_exit() -> None:
    # Runs after _drain_at_exit (atexit is last-in, first-out): the programs
    # compiled are written, and this run's counters are recorded for
    # `python -m torch_pjrt cache info`.
    if _C._started():
        try:
            _C._flush_compile_cache()
            from . import compile_cache

            compile_cache.record_run(_C._metrics())
        except Exception:
            pass


atexit.register(_finish_cache_writes_at_exit)


def _drain_at_exit() -> None:
    # Let queued programs finish before the interpreter (and the plugin's
    # thread pools) shut down. Then give torch's autograd device threads a
    # moment to drop their last graph-task references: done during
    # interpreter finalisation, that needs the GIL and aborts the process.
    if _C._started():
        try:
            _C._synchronize()
        except Exception:
            pass
        time.sleep(0.05)


atexit.register(_drain_at_exit)

_env_mode = _mode_from_env()
if _env_mode and _C._is_available():
    set_eager_mode(_env_mode)
if os.environ.get("TORCH_PJRT_ASYNC_COMPILE") == "1" and _C._is_available():
    set_async_compile(True)
if os.environ.get("TORCH_PJRT_DEVICE_TIME") == "1" and _C._is_available():
    set_device_timing(True)
