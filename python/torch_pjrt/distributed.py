"""``tpu_dist``: the c10d backend of ``tpu`` tensors, registered with ``torch.distributed``.

After ``import torch_pjrt`` (or ``import torch``, through the autoload entry point), each of these works and gives one
process group whose collectives take ``tpu`` and CPU tensors::

    dist.init_process_group()                          # the accelerator's default backend: tpu_dist
    dist.init_process_group("tpu_dist")
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    init_device_mesh("tpu", (world_size,))

A collective on ``tpu`` tensors is staged to host memory, carried out by a Gloo process group that torch builds over
the group's store (TCP, multi-host), and its result is written back into the same tensors
(``csrc/torch/distributed/process_group.h``). A group's CPU tensors go to that Gloo group unchanged.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from . import _C

BACKEND = "tpu_dist"


def _create(store, rank: int, size: int, timeout):
    """``register_backend``'s creator: a Gloo group over the group's store, under a tpu_dist backend."""
    from torch.distributed import ProcessGroupGloo

    gloo = ProcessGroupGloo(store, rank, size, timeout)
    gloo._set_sequence_number_for_group()
    return _C._new_process_group_tpu(gloo, rank, size)


def _is_tpu_dist(pg) -> bool:
    try:
        return pg._get_backend(torch.device("tpu")).name() == BACKEND
    except (RuntimeError, AttributeError):
        return False


def _complete(pg) -> None:
    """Gives a group whose tpu backend is tpu_dist what torch 2.13's backend resolution leaves out.

    ``init_process_group()`` (no backend) registers only the accelerator's backend and names GLOO, which it did not
    create, as the default; ``"cpu:gloo,tpu:tpu_dist"`` names no default (it compares upper-case plugin names with
    lower-case backend names). Then ``barrier()``, DDP's logger and every collective of CPU tensors fail. Here CPU
    tensors, when no backend takes them, go to tpu_dist (which hands them to its Gloo group), and tpu_dist is the
    group's default backend.
    """
    backend = pg._get_backend(torch.device("tpu"))
    if torch.device("cpu") not in pg._device_types:
        pg._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.CUSTOM, backend)
    pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)


def _completing(helper):
    @functools.wraps(helper)
    def new_group_helper(*args, **kwargs):
        result = helper(*args, **kwargs)
        pg = result[0] if isinstance(result, tuple) else result
        if isinstance(pg, dist.ProcessGroup) and _is_tpu_dist(pg):
            _complete(pg)
        return result

    new_group_helper._tpu_dist_completing = True
    return new_group_helper


def register() -> None:
    """Registers tpu_dist as the backend of device ``tpu`` (called at import; idempotent)."""
    if not dist.is_available():
        return
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, devices=["tpu", "cpu"])
    c10d = dist.distributed_c10d
    if not getattr(c10d._new_process_group_helper, "_tpu_dist_completing", False):
        c10d._new_process_group_helper = _completing(c10d._new_process_group_helper)
