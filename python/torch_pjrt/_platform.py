"""Choosing the PJRT plugin: TORCH_PJRT_PLATFORM, else TPU, else CUDA, else CPU."""

from __future__ import annotations

import glob
import importlib.util
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    platform: str  # "tpu", "cuda", "cpu" or "custom"
    path: str  # the plugin shared library ("" when none was found)
    reason: str  # why this one was picked, for `doctor`


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _cpu_plugin() -> str | None:
    d = _package_dir("xla_plugins.xla_cpu_pjrt")
    path = d and os.path.join(d, "xla_cpu_pjrt.so")
    return path if path and os.path.exists(path) else None


def _cuda_plugin() -> str | None:
    for pkg in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
        d = _package_dir(pkg)
        if d:
            found = sorted(glob.glob(os.path.join(d, "xla_cuda_plugin.so")) + glob.glob(os.path.join(d, "*.so")))
            if found:
                return found[0]
    return None


def _tpu_plugin() -> str | None:
    d = _package_dir("libtpu")
    path = d and os.path.join(d, "libtpu.so")
    return path if path and os.path.exists(path) else None


def _has_tpu_hardware() -> bool:
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def _has_nvidia_gpu() -> bool:
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def choose() -> Choice:
    wanted = os.environ.get("TORCH_PJRT_PLATFORM", "").strip()
    finders = {"tpu": _tpu_plugin, "cuda": _cuda_plugin, "cpu": _cpu_plugin}
    if wanted in finders:
        path = finders[wanted]()
        if path is None:
            return Choice(wanted, "", f"TORCH_PJRT_PLATFORM={wanted} but its plugin package is not installed")
        return Choice(wanted, path, f"TORCH_PJRT_PLATFORM={wanted}")
    if wanted:
        return Choice("custom", wanted, f"TORCH_PJRT_PLATFORM={wanted}")
    tpu = _tpu_plugin()
    if tpu and _has_tpu_hardware():
        return Choice("tpu", tpu, "libtpu is installed and TPU devices are present")
    cuda = _cuda_plugin()
    if cuda and _has_nvidia_gpu():
        return Choice("cuda", cuda, "the JAX CUDA plugin is installed and an NVIDIA GPU is present")
    cpu = _cpu_plugin()
    if cpu:
        return Choice("cpu", cpu, "no TPU or GPU plugin with hardware found; using XLA's CPU plugin")
    return Choice("none", "", "no PJRT plugin found: pip install xla-cpu-pjrt==0.0.1 (or libtpu / jax-cuda12-pjrt)")
