"""``torch.tpu``: the device module of the tpu backend."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import sys
import types

import torch

from . import _C


def is_available() -> bool:
    return bool(_C._is_available()) and _C._device_count() > 0


def device_count() -> int:
    return int(_C._device_count())


def current_device() -> int:
    return int(_C._current_device())


def set_device(device) -> None:
    _C._set_device(_index(device))


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {d}")
    return current_device() if d.index is None else d.index


@contextlib.contextmanager
def device(d):
    """Context manager that makes ``d`` the current tpu device."""
    previous = current_device()
    set_device(d)
    try:
        yield
    finally:
        set_device(previous)


def synchronize(device=None) -> None:
    _C._synchronize()


def is_initialized() -> bool:
    return is_available()


def _lazy_init() -> None:
    if not is_available():
        raise RuntimeError(f"tpu device unavailable: {_C._load_error()}")


def init() -> None:
    _lazy_init()


def manual_seed(seed: int) -> None:
    _C._manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


manual_seed_all = manual_seed


def seed() -> None:
    import random

    manual_seed(random.getrandbits(63))


seed_all = seed


def initial_seed() -> int:
    return default_generators[current_device()].initial_seed()


def get_rng_state(device="tpu") -> torch.Tensor:
    return _C._default_generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    _C._default_generator(_index(device)).set_state(new_state)


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states) -> None:
    for i, s in enumerate(states):
        set_rng_state(s, i)


class _Generators:
    def __getitem__(self, i: int) -> torch.Generator:
        return _C._default_generator(i)

    def __len__(self) -> int:
        return device_count()


default_generators = _Generators()


def memory_allocated(device=None) -> int:
    return int(_C._memory_allocated(_index(device)))


def max_memory_allocated(device=None) -> int:
    return int(_C._max_memory_allocated(_index(device)))


def reset_peak_memory_stats(device=None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def memory_reserved(device=None) -> int:
    return memory_allocated(device)


def empty_cache() -> None:
    pass


def max_memory_reserved(device=None) -> int:
    return max_memory_allocated(device)


def memory_stats(device=None) -> dict:
    """torch.cuda.memory_stats' keys for the live device buffers (``allocated_bytes.all.current``, ``.peak``, ...).

    There is no caching allocator: reserved, active and requested bytes equal the allocated ones.
    """
    return torch.accelerator.memory_stats(torch.device("tpu", _index(device)))


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A short table of the device's memory, as torch.cuda.memory_summary prints it."""
    idx = _index(device)
    stats = memory_stats(idx)

    def mib(key):
        return f"{stats.get(key, 0) / 2**20:12.2f} MiB"

    rows = [
        f"|  tpu:{idx} memory summary (live device buffers; no caching allocator)",
        "|  metric                     current          peak",
        f"|  allocated memory      {mib('allocated_bytes.all.current')}  {mib('allocated_bytes.all.peak')}",
        f"|  reserved memory       {mib('reserved_bytes.all.current')}  {mib('reserved_bytes.all.peak')}",
    ]
    return "\n".join(rows) + "\n"


# ---- streams and events (csrc/torch/guard.cc maps them onto PJRT).
#
# Every stream of a device feeds its one PJRT device, which orders work by data: a program or copy waits for the
# buffers it reads. So work is ordered on a stream and across streams that wait for each other, with no device-side
# wait, and an event completes once all the work enqueued on the device before it (on any stream) is done. PJRT's C
# API has no queue argument, so several streams do not run concurrently on the device; on the CPU plugin, programs
# run on its thread pool as their inputs become ready.


class Stream(torch.Stream):
    """``torch.cuda.Stream``'s interface for tpu: ``query``, ``synchronize``, ``wait_event``, ``wait_stream``,
    ``record_event``, and ``with stream:``."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if kwargs:  # stream_id, device_index, device_type: an existing stream
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)


class Event(torch.Event):
    """``torch.cuda.Event``'s interface for tpu: ``record``, ``wait``, ``query``, ``synchronize`` and
    ``elapsed_time`` (milliseconds between the host times at which the two events completed)."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return super().__new__(
            cls, device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
        )


def _as_tpu_stream(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None) -> Stream:
    return _as_tpu_stream(torch.accelerator.current_stream(torch.device("tpu", _index(device))))


def default_stream(device=None) -> Stream:
    return Stream(stream_id=0, device_index=_index(device), device_type=current_stream(device).device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(s: torch.Stream | None):
    """Makes ``s`` the current stream of its device inside the block (``None`` changes nothing)."""
    if s is None:
        yield
        return
    previous = torch.accelerator.current_stream(s.device)
    torch.accelerator.set_stream(s)
    try:
        yield
    finally:
        torch.accelerator.set_stream(previous)


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


# ---- autocast: torch.autocast("tpu") casts with PyTorch's op lists (csrc/torch/autocast.cc), to bfloat16 unless
# set otherwise


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("tpu")


def set_autocast_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled("tpu", enabled)


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("tpu")


def set_autocast_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype("tpu", dtype)


# Google TorchTPU's names for the same (its users call them).
_is_autocast_enabled = is_autocast_enabled
_set_autocast_enabled = set_autocast_enabled
_get_autocast_dtype = get_autocast_dtype
_set_autocast_dtype = set_autocast_dtype


def _is_in_bad_fork() -> bool:
    return False


def get_device_name(device=None) -> str:
    from . import platform

    info = platform()
    return f"{info.get('platform_name', 'pjrt')} ({info.get('platform')})"


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of a tpu device, as torch.cuda.mem_get_info: total is the device's memory (the host's
    physical memory on the CPU plugin), free is total less what is in use."""
    return torch.accelerator.get_memory_info(torch.device("tpu", _index(device)))


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What torch.tpu.get_device_properties reports (the fields CUDA's properties share: name, total_memory)."""

    name: str
    platform: str
    index: int
    total_memory: int


def get_device_properties(device=None) -> DeviceProperties:
    """The properties of a tpu device, as torch.cuda.get_device_properties: its name, platform and total memory."""
    from . import platform

    index = _index(device)
    return DeviceProperties(
        name=get_device_name(index),
        platform=str(platform().get("platform")),
        index=index,
        total_memory=mem_get_info(index)[1],
    )


# ---- eager modes, with the names Google's TorchTPU uses


class EagerMode(enum.Enum):
    DEFER_NEVER = "strict"
    DEFER_AND_FUSE = "fused"
    DEFER_NEVER_AND_LAUNCH_BLOCKING = "debug"


def _mode_name(mode) -> str:
    return mode.value if isinstance(mode, EagerMode) else str(mode)


class _ModeScope:
    """Sets the mode at once; as a context manager, restores the old one on exit."""

    def __init__(self, mode):
        from . import get_eager_mode, set_eager_mode

        self._previous = get_eager_mode()
        set_eager_mode(_mode_name(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_mode(self._previous)
        return False


def set_eager_mode(mode) -> _ModeScope:
    return _ModeScope(mode)


def get_eager_mode() -> EagerMode:
    from . import get_eager_mode as _get

    return EagerMode(_get())


class _DeviceModule(types.ModuleType):
    @property
    def eager_mode(self) -> EagerMode:
        return get_eager_mode()

    @eager_mode.setter
    def eager_mode(self, mode) -> None:
        from . import set_eager_mode as _set

        _set(_mode_name(mode))


sys.modules[__name__].__class__ = _DeviceModule
