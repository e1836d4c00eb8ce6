"""``torch.compile(model, backend="tpu")``: Dynamo → aot_autograd → the eager lowerings → one program per graph.

Dynamo captures an FX graph; aot_autograd (with core-ATen decompositions) splits it into a forward and a backward
graph of ATen ops, or one inference graph under ``no_grad``/``inference_mode``, and functionalises mutations (the
writes into inputs, such as BatchNorm's running statistics, happen after the graph, as ``copy_`` into the input).
Inductor is not involved. Each graph runs as a fused region: its ATen calls go through the same dispatcher entry,
lowering table and program builder as eager ops, and join one region, which runs as one program when the graph
returns. The region's key is its structure, so a graph compiles once (and the persistent cache keeps it for the next
process); runtime values (Python scalars, CPU scalar tensors, RNG state) are program parameters.

What is not built yet: shape buckets for dynamic dimensions, ``async_compile``, and running a graph without walking
its nodes in Python on every call (the region is found by its key, with no lowering or compiling, but each node is
still dispatched).

The backend is registered under the name ``tpu`` through the ``torch_dynamo_backends`` entry point, so
``torch.compile(m, backend="tpu")`` works after a plain ``import torch``. ``torch.compile(m)`` with no backend (that
is, Inductor's) uses this one for a graph whose inputs are on tpu, and leaves every other graph to Inductor
(``use_for_default_backend``).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch

_warned: set[str] = set()


_OWN_KERNELS = ("PrivateUse1", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def _unlowered(gm: torch.fx.GraphModule) -> list[str]:
    """ATen ops of the graph with neither a tpu kernel nor a composite one: they run through the CPU fallback."""
    missing = set()
    for node in gm.graph.nodes:
        op = node.target
        if node.op == "call_function" and isinstance(op, torch._ops.OpOverload):
            if not any(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), k) for k in _OWN_KERNELS):
                missing.add(op.name())
    return sorted(missing)


def _graph_runner(gm: torch.fx.GraphModule, kind: str, debug_callback: Callable | None, fullgraph: bool) -> Callable:
    from . import get_eager_mode, set_eager_mode, stablehlo

    missing = _unlowered(gm)
    if missing and fullgraph:
        raise RuntimeError(
            f"torch.compile(backend='tpu', fullgraph=True): {', '.join(missing)} has no lowering, so the {kind} graph "
            "cannot run as one program; drop fullgraph=True to run it on the CPU between programs"
        )
    for op in missing:
        if op not in _warned:
            _warned.add(op)
            warnings.warn(
                f"torch.compile(backend='tpu'): {op} has no lowering; it runs on the CPU between programs", stacklevel=2
            )
    reported = [debug_callback is None]

    def run(args):
        before = get_eager_mode()
        set_eager_mode("fused")  # runs what the caller had open; the graph starts a region of its own
        try:
            out = gm(*args)
            args.clear()  # boxed: the inputs die as soon as the program no longer needs them
            if not reported[0]:
                tensors = [t for t in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(t, torch.Tensor)]
                text = next((s for s in (stablehlo(t) for t in tensors if t.device.type == "tpu") if s), "")
                debug_callback(kind, text)
                reported[0] = True
        finally:
            set_eager_mode(before)  # the region runs here: one program for the graph
        return out

    run._boxed_call = True
    return run


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """The ``tpu`` Dynamo backend. Options (``torch.compile(..., options={...})``):

    - ``debug_callback(kind, stablehlo_text)``: called once per graph with ``kind`` "forward", "backward" or
      "inference" and the StableHLO module of its program.
    """
    from torch._dynamo.backends.common import aot_autograd

    options = dict(options or {})
    debug_callback = options.pop("debug_callback", None)
    unknown = set(options)
    if unknown:
        raise ValueError(f"torch.compile(backend='tpu'): unknown options {sorted(unknown)}")

    fullgraph = _fullgraph()

    def compiler(kind):
        return lambda g, _inputs: _graph_runner(g, kind, debug_callback, fullgraph)

    return aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=_decompositions(),
        keep_inference_input_mutations=True,
    )(gm, example_inputs)


def _fullgraph() -> bool:
    """Whether the graph being compiled was asked for with ``fullgraph=True`` (Dynamo's translator knows)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
    except Exception:  # called outside Dynamo (a backend test, torch.export): no graph breaks are possible anyway
        return False
    return bool(getattr(tx, "one_graph", False))


@functools.cache
def _decompositions() -> dict:
    from torch._decomp import core_aten_decompositions

    return core_aten_decompositions()


def use_for_default_backend() -> None:
    """Makes ``torch.compile``'s default backend hand graphs with tpu inputs to ``tpu_backend``.

    Inductor has no tpu code generator, so without this ``torch.compile(model)`` of a tpu model fails. The default
    backend is ``torch._TorchCompileInductorWrapper``; its call is wrapped once, and a graph with no tpu input goes to
    Inductor exactly as before.
    """
    wrapper = torch._TorchCompileInductorWrapper
    if getattr(wrapper.__call__, "_tpu_default", False):
        return
    inductor_call = wrapper.__call__

    def __call__(self, model_, inputs_, **kwargs):
        if any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in inputs_):
            return tpu_backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, **kwargs)

    __call__._tpu_default = True
    wrapper.__call__ = __call__
