"""``torch.compile(model, backend="tpu")``: Dynamo → aot_autograd → the eager lowerings → one program per graph.

Dynamo captures an FX graph; aot_autograd (with core-ATen decompositions) splits it into a forward and a backward
graph of ATen ops, or one inference graph under ``no_grad``/``inference_mode``, and functionalises mutations (the
writes into inputs, such as BatchNorm's running statistics, happen after the graph, as ``copy_`` into the input).
Inductor is not involved. Each graph runs as a fused region: its ATen calls go through the same dispatcher entry,
lowering table and program builder as eager ops, and join one region, which runs as one program when the graph
returns. The region's key is its structure, so a graph compiles once (and the persistent cache keeps it for the next
process); runtime values (Python scalars, CPU scalar tensors, RNG state) are program parameters.

From the second call with the same input layout on, a graph runs its captured program directly (``_Replay``): no
node is dispatched, no key is built. A layout holds the values of the graph's Python number inputs (symbolic sizes),
so a graph with symbolic sizes replays a length it has seen. Graphs with random ops or CPU scalar tensors walk their
nodes on every call (their runtime values change per call); their region is still found by its key, with no compile.

With ``options={"async_compile": True}``, a graph whose program is not compiled yet runs op by op (strict, as
eager would) while its program compiles on a background thread; the first call after the compile finished captures
it, and later calls replay it.

Dynamic shapes: a graph traced with symbolic sizes (``dynamic=True``, ``mark_dynamic``, automatic dynamic) walks its
nodes inside a capture that tells the engine so: a size that changes between its calls is dynamic at once, and those
calls join the graph's one program bucketed (docs/architecture.md, "Shape buckets"). Its inputs' symbolic dims mark
the uploads like them, so the next batch lands in a storage of its bucket's capacity. A sweep over lengths compiles a
program per bucket (``bucket_size``: multiples of it instead of powers of two). A length seen before replays its
capture; a new length walks the graph (and finds its bucket's program by its key).

Functional collectives in a graph (``_c10d_functional.all_reduce`` and ``wait_tensor``, which DTensor and traced
``funcol`` calls emit) run through tpu_dist: a collective reads its inputs, which runs the region before it as one
program, and the ops after it join the next region. Such a graph walks its nodes on every call (a captured replay
would skip the collectives).

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


# Keys whose kernel means the op does not take the CPU fallback: ours, and composites, which run as the ops they are
# made of (aten::sym_size.int in a graph with symbolic sizes is one: it reads the tensor's size).
_OWN_KERNELS = (
    "PrivateUse1",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
)


def _unlowered(gm: torch.fx.GraphModule) -> list[str]:
    """ATen ops of the graph with neither a tpu kernel nor a composite one: they run through the CPU fallback."""
    missing = set()
    for node in gm.graph.nodes:
        op = node.target
        if node.op == "call_function" and isinstance(op, torch._ops.OpOverload):
            if not any(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), k) for k in _OWN_KERNELS):
                missing.add(op.name())
    return sorted(missing)


def _collectives(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph calls functional collectives (``_c10d_functional``, as DTensor and traced
    ``funcol.all_reduce`` emit): they run through tpu_dist between the graph's regions, so the graph is never replayed
    as one captured program (a replay would skip them)."""
    return any(
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.namespace in ("_c10d_functional", "c10d_functional", "_dtensor")
        for node in gm.graph.nodes
    )


def _layout(args) -> bytes | None:
    """What a captured program depends on, as bytes: each tensor input's storage (which inputs share one), dtype and
    view, and the value of each Python number input (a symbolic size: the capture freezes it, so a replay needs the
    same value).

    None when an input is something else or a CPU tensor (a CPU scalar tensor is a runtime value of the graph, which
    a capture would freeze).
    """
    from . import _C

    return _C._layout_key(args)


def _has_symbolic_size(val) -> bool:
    if isinstance(val, torch.Tensor):
        return any(isinstance(size, torch.SymInt) for size in val.shape)
    if isinstance(val, (list, tuple)):
        return any(_has_symbolic_size(v) for v in val)
    return False


def _symbolic_dims(gm: torch.fx.GraphModule) -> tuple[bool, list[tuple[int, list[int]]]]:
    """Whether some value of the graph has a symbolic size, and per tensor input with some: (input index, its symbolic
    dims).

    Only sizes count. Automatic dynamic also makes strides symbolic (an input that was a strided view in one call and
    contiguous in the next), and passes their values as SymInt inputs; with every size static the graph is static: the
    layout key holds the strides and those values, so each layout replays its own capture of fixed-size programs.
    """
    dims = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(placeholders):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            symbolic = [d for d, size in enumerate(val.shape) if isinstance(size, torch.SymInt)]
            if symbolic:
                dims.append((i, symbolic))
    dynamic = bool(dims) or any(_has_symbolic_size(n.meta.get("val")) for n in gm.graph.nodes)
    return dynamic, dims


class _Replay:
    """A graph's captured program, and how one call binds its storages and makes its results.

    Built after a call that ran as one region (``_C._end_capture``). Every capture slot is either an input's storage
    (bound to that input), a result's storage or a temporary that died inside the graph (both new storages per call).
    Results are views of those storages with the layout the first call gave them. A slot that is none of these (a
    tensor the graph reached that is neither an input nor a result) makes the graph unreplayable.
    """

    def __init__(self, capture, bound_args, outs, results, precision):
        from . import _C

        self.plan = _C._GraphReplay(capture, bound_args, outs)
        self.results, self.precision = results, precision

    @classmethod
    def build(cls, capture, arg_of_id: dict[int, int], out, precision):
        from . import _C

        slot_index = {sid: j for j, sid in enumerate(capture.slot_ids)}
        seq = out if isinstance(out, (list, tuple)) else [out]
        outs, results = [], []  # results: per element, ("out", k), ("arg", spec), ("const", value)
        out_slots = set()
        for t in seq:
            if isinstance(t, torch.Tensor):
                if t.device.type != "tpu":
                    return None
                sid = _C._slot_id(t)
                spec = (t.dtype, list(t.shape), list(t.stride()), t.storage_offset())
                if sid in slot_index:
                    out_slots.add(sid)
                    results.append(("out", len(outs)))
                    outs.append((slot_index[sid],) + spec)
                elif sid in arg_of_id:
                    results.append(("arg", (arg_of_id[sid],) + spec))
                else:
                    return None  # a result no program wrote (an untouched empty tensor): walk the graph instead
            elif t is None or isinstance(t, (int, float, bool)):
                results.append(("const", t))
            else:
                return None
        bound_args = []
        for j, sid in enumerate(capture.slot_ids):
            if sid in arg_of_id:
                bound_args.append(arg_of_id[sid])
            elif sid in out_slots or capture.dead[j]:
                bound_args.append(None)
            else:
                return None
        return cls(capture, bound_args, outs, results, precision)

    def run(self, args):
        made = self.plan.run(args)
        seq = []
        for kind, v in self.results:
            if kind == "out":
                seq.append(made[v])
            elif kind == "arg":
                i, dtype, sizes, strides, offset = v
                seq.append(
                    torch.empty(0, dtype=dtype, device=args[i].device).set_(
                        args[i].untyped_storage(), offset, sizes, strides
                    )
                )
            else:
                seq.append(v)
        args.clear()
        return seq


# Input layouts a graph keeps replays for (a new layout beyond them walks the graph). A graph with symbolic sizes
# meets a layout per length; each replay holds its program's parameters for that length.
_MAX_LAYOUTS = 8
_MAX_DYNAMIC_LAYOUTS = 64


def _graph_runner(
    gm: torch.fx.GraphModule,
    kind: str,
    debug_callback: Callable | None,
    fullgraph: bool,
    async_compile: bool,
    bucket_size: int,
) -> Callable:
    from . import _C, get_eager_mode, set_eager_mode, stablehlo

    missing = _unlowered(gm)
    collectives = _collectives(gm)
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
    dynamic, symbolic_inputs = _symbolic_dims(gm)
    reported = [debug_callback is None]
    replays: dict[bytes, _Replay | None] = {}  # by input layout; None: this layout cannot be replayed

    def run(args):
        layout = _layout(args) if not (missing or collectives) else None
        precision = _C._matmul_precision()
        if layout is not None:
            r = replays.get(layout)
            if r is not None and r.precision == precision:
                return r.run(args)
        replayable = layout is not None and (layout not in replays or replays[layout] is not None)
        replayable = replayable and len(replays) < (_MAX_DYNAMIC_LAYOUTS if dynamic else _MAX_LAYOUTS)
        for i, dims in symbolic_inputs:  # the next batch's upload gets a storage of its bucket
            a = args[i]
            if isinstance(a, torch.Tensor) and a.device.type == "tpu":
                _C._mark_dynamic_upload(a, dims, bucket_size)
        arg_of_id = {}
        if replayable:
            for i, a in enumerate(args):
                if isinstance(a, torch.Tensor):
                    arg_of_id.setdefault(_C._slot_id(a), i)
        before = get_eager_mode()
        set_eager_mode("fused")  # runs what the caller had open; the graph starts a region of its own
        async_before = _C._async_compile()
        _C._set_async_compile(async_compile)
        captured, compiling = None, False
        try:
            # The graph runs as one region (a capture), also when it cannot be replayed: its calls whose sizes
            # change from call to call (dynamic=True, a sweep over lengths) join it bucketed.
            capture = _C._begin_capture(dynamic, bucket_size)  # False while another thread captures a graph
            try:
                out = gm(*args)
                args.clear()  # boxed: the inputs die as soon as the program no longer needs them
                if not reported[0]:
                    seq = out if isinstance(out, (list, tuple)) else [out]
                    tensors = [t for t in seq if isinstance(t, torch.Tensor) and t.device.type == "tpu"]
                    debug_callback(kind, next((s for s in map(stablehlo, tensors) if s), ""))
                    reported[0] = True
            finally:
                if capture:
                    captured, compiling = _C._end_capture()  # the graph's region runs here, as one program
        finally:
            set_eager_mode(before)  # without a capture, the region runs here
            _C._set_async_compile(async_before)
        if replayable and capture and not compiling:  # a program compiling in the background: a later call
            replays[layout] = captured and _Replay.build(captured, arg_of_id, out, precision)
        return out

    run._boxed_call = True
    return run


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """The ``tpu`` Dynamo backend. Options (``torch.compile(..., options={...})``):

    - ``debug_callback(kind, stablehlo_text)``: called once per graph with ``kind`` "forward", "backward" or
      "inference" and the StableHLO module of its program.
    - ``async_compile`` (bool, default False): a graph whose program is not compiled yet runs op by op while its
      program compiles in the background (``torch_pjrt.wait_for_compiles()`` waits for them).
    - ``bucket_size`` (int > 0, default None): a graph with symbolic sizes pads them to multiples of it, not to powers
      of two (fewer programs over a wide range of lengths, more padding over a narrow one).
    """
    from torch._dynamo.backends.common import aot_autograd

    options = dict(options or {})
    debug_callback = options.pop("debug_callback", None)
    async_compile = bool(options.pop("async_compile", False))
    bucket_size = options.pop("bucket_size", None)
    positive_int = isinstance(bucket_size, int) and not isinstance(bucket_size, bool) and bucket_size > 0
    if bucket_size is not None and not positive_int:
        raise ValueError(f"torch.compile(backend='tpu'): bucket_size must be a positive int, got {bucket_size!r}")
    unknown = set(options)
    if unknown:
        raise ValueError(f"torch.compile(backend='tpu'): unknown options {sorted(unknown)}")

    fullgraph = _fullgraph()

    def compiler(kind):
        return lambda g, _inputs: _graph_runner(g, kind, debug_callback, fullgraph, async_compile, bucket_size or 0)

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
