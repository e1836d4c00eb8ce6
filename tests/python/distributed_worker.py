"""One rank of a distributed test scenario (launched by distributed_launch.run_ranks).

Usage: python distributed_worker.py SCENARIO. Each check prints ``RESULT ["name", "ok" | what went wrong]``; the test
asserts on what every rank printed. A scenario compares ``tpu`` against CPU tensors with Gloo in the same processes.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

import torch_pjrt  # noqa: F401  (the tpu device and tpu_dist)

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
TPU = torch.device("tpu", int(os.environ.get("LOCAL_RANK", "0")) % torch.tpu.device_count())


def report(name: str, verdict: str = "ok") -> None:
    print("RESULT " + json.dumps([name, verdict]), flush=True)


def check(name: str, fn) -> None:
    try:
        verdict = fn()
        report(name, "ok" if verdict in (None, True) else str(verdict))
    except Exception as e:  # noqa: BLE001  (reported, and the scenario goes on)
        report(name, f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}")


def init(backend=None, seconds: float = 60) -> None:
    torch.tpu.set_device(TPU)  # one device per process, as CUDA scripts do
    timeout = datetime.timedelta(seconds=seconds)
    if backend is None:
        dist.init_process_group(timeout=timeout)
    else:
        dist.init_process_group(backend, timeout=timeout)


# ---------------------------------------------------------------- collectives

DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.float64,
    torch.int32,
    torch.int64,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


def data(shape, dtype, device, salt: int = 0) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    base = (torch.arange(n).reshape(shape) % 5) + RANK + 1 + salt
    t = (base % 2 == 0) if dtype == torch.bool else base.to(dtype)
    return t.to(device)


def _all_reduce(op):
    def run(dev, dt):
        x = data((3, 4), dt, dev)
        dist.all_reduce(x, op=op)
        return [x]

    return run


def _premul_sum(dev, dt):
    x = data((3, 4), dt, dev)
    if dev == "cpu":  # Gloo has no PREMUL_SUM: the reference is SUM of the scaled inputs
        x.mul_(0.5)
        dist.all_reduce(x)
    else:
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
    return [x]


def _broadcast(dev, dt):
    x = data((5,), dt, dev)
    dist.broadcast(x, src=1)
    return [x]


def _all_gather(dev, dt):
    outs = [torch.zeros(3, dtype=dt, device=dev) for _ in range(WORLD)]
    dist.all_gather(outs, data((3,), dt, dev))
    return outs


def _all_gather_into_tensor(dev, dt):
    out = torch.zeros(WORLD * 2, 3, dtype=dt, device=dev)
    dist.all_gather_into_tensor(out, data((2, 3), dt, dev))
    return [out]


def _reduce_scatter(dev, dt):
    out = torch.zeros(3, dtype=dt, device=dev)
    dist.reduce_scatter(out, [data((3,), dt, dev, salt=i) for i in range(WORLD)])
    return [out]


def _reduce_scatter_tensor(dev, dt):
    out = torch.zeros(2, 3, dtype=dt, device=dev)
    dist.reduce_scatter_tensor(out, data((WORLD * 2, 3), dt, dev))
    return [out]


def _all_to_all_single(dev, dt):
    inp = data((WORLD * 2,), dt, dev)
    out = torch.zeros(WORLD * 2, dtype=dt, device=dev)
    dist.all_to_all_single(out, inp)
    # Uneven splits: rank r sends r + 1 elements to each peer.
    inp2 = data((WORLD * (RANK + 1),), dt, dev)
    out2 = torch.zeros(sum(r + 1 for r in range(WORLD)), dtype=dt, device=dev)
    dist.all_to_all_single(out2, inp2, [r + 1 for r in range(WORLD)], [RANK + 1] * WORLD)
    return [out, out2]


def _all_to_all(dev, dt):
    outs = [torch.zeros(2, dtype=dt, device=dev) for _ in range(WORLD)]
    dist.all_to_all(outs, [data((2,), dt, dev, salt=i) for i in range(WORLD)])
    return outs


def _gather(dev, dt):
    outs = [torch.zeros(3, dtype=dt, device=dev) for _ in range(WORLD)] if RANK == 0 else None
    dist.gather(data((3,), dt, dev), outs, dst=0)
    return outs or []


def _scatter(dev, dt):
    out = torch.zeros(3, dtype=dt, device=dev)
    ins = [data((3,), dt, dev, salt=i) for i in range(WORLD)] if RANK == 0 else None
    dist.scatter(out, ins, src=0)
    return [out]


def _reduce(dev, dt):
    x = data((4,), dt, dev)
    dist.reduce(x, dst=0)
    return [x] if RANK == 0 else []


def _send_recv(dev, dt):
    x = data((4,), dt, dev)
    got = torch.zeros(4, dtype=dt, device=dev)
    peer = (RANK + 1) % WORLD
    if RANK % 2 == 0:
        dist.send(x, peer)
        dist.recv(got, peer)
    else:
        dist.recv(got, (RANK - 1) % WORLD)
        dist.send(x, (RANK - 1) % WORLD)
    return [got]


def _functional(dev, dt):
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    a = funcol.all_reduce(data((3,), dt, dev), "sum", group)
    g = funcol.all_gather_tensor(data((2,), dt, dev), 0, group)
    r = funcol.reduce_scatter_tensor(data((WORLD * 2,), dt, dev), "sum", 0, group)
    gs = funcol.all_gather_into_tensor_coalesced([data((2,), dt, dev), data((1,), dt, dev)], group)
    return [funcol.wait_tensor(t) for t in (a, g, r, *gs)]


COLLECTIVES = {
    "all_reduce_sum": _all_reduce(dist.ReduceOp.SUM),
    "all_reduce_avg": _all_reduce(dist.ReduceOp.AVG),
    "all_reduce_max": _all_reduce(dist.ReduceOp.MAX),
    "all_reduce_min": _all_reduce(dist.ReduceOp.MIN),
    "all_reduce_product": _all_reduce(dist.ReduceOp.PRODUCT),
    "all_reduce_premul_sum": _premul_sum,
    "broadcast": _broadcast,
    "all_gather": _all_gather,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_tensor,
    "all_to_all_single": _all_to_all_single,
    "all_to_all": _all_to_all,
    "gather": _gather,
    "scatter": _scatter,
    "reduce": _reduce,
    "send_recv": _send_recv,
    "functional": _functional,
}


def _outcome(fn, dev, dt):
    try:
        return fn(dev, dt), None
    except Exception as e:  # noqa: BLE001
        return None, e


def _compare(name, fn, dt):
    want, want_err = _outcome(fn, "cpu", dt)
    got, got_err = _outcome(fn, TPU, dt)
    if want_err is not None or got_err is not None:
        if type(want_err) is not type(got_err):
            return f"CPU raised {want_err!r}, tpu raised {got_err!r}"
        return None
    if len(want) != len(got):
        return f"{len(got)} results, CPU gave {len(want)}"
    for w, g in zip(want, got):
        if g.device.type != "tpu" or g.dtype != w.dtype or not torch.equal(g.cpu(), w):
            return f"tpu gave {g.cpu()!r} ({g.dtype}), CPU gave {w!r} ({w.dtype})"
    return None


def scenario_collectives():
    init()
    for dt in DTYPES:
        for name, fn in COLLECTIVES.items():
            if name == "all_reduce_premul_sum" and not (dt.is_floating_point or dt.is_complex):
                continue
            check(f"{name}[{str(dt).removeprefix('torch.')}]", lambda fn=fn, name=name, dt=dt: _compare(name, fn, dt))
    _semantics()
    dist.destroy_process_group()


def _semantics():
    def same_tensor():
        x = data((4,), torch.float32, TPU)
        ident, ptr, storage = id(x), x.data_ptr(), x.untyped_storage().data_ptr()
        dist.all_reduce(x)
        assert id(x) == ident and x.data_ptr() == ptr and x.untyped_storage().data_ptr() == storage

    def view_written_through():
        base = torch.zeros(3, 4, device=TPU)
        view = base[1]
        view.add_(RANK + 1)
        dist.all_reduce(view)
        want = torch.zeros(3, 4)
        want[1] = sum(r + 1 for r in range(WORLD))
        assert torch.equal(base.cpu(), want), base.cpu()

    def non_contiguous():
        x = data((3, 4), torch.float32, TPU).t()
        want = data((3, 4), torch.float32, "cpu").t().contiguous()
        dist.all_reduce(want)
        dist.all_reduce(x)
        assert x.stride() == (1, 4) and torch.equal(x.cpu(), want)

    def zero_dim():
        x = torch.tensor(float(RANK + 1), device=TPU)
        dist.all_reduce(x)
        y = torch.tensor(RANK, device=TPU)
        dist.broadcast(y, src=1)
        assert x.dim() == 0 and x.item() == sum(r + 1 for r in range(WORLD)) and y.item() == 1

    def async_work_and_future():
        x = data((4,), torch.float32, TPU)
        want = data((4,), torch.float32, "cpu")
        dist.all_reduce(want)
        work = dist.all_reduce(x, async_op=True)
        value = work.get_future().wait()
        assert work.wait() and work.is_completed() and value[0] is x and torch.equal(x.cpu(), want)

    def async_p2p():
        x = data((4,), torch.float32, TPU)
        got = torch.zeros(4, device=TPU)
        peer = RANK ^ 1
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, got, peer)])
        for w in works:
            w.wait()
        assert torch.equal(got.cpu(), data((4,), torch.float32, "cpu").add(1 - 2 * RANK))

    def objects_and_barrier():
        objs = [None] * WORLD
        dist.all_gather_object(objs, {"rank": RANK})
        dist.barrier()
        assert objs == [{"rank": r} for r in range(WORLD)]

    def mismatch_raises_and_group_survives():
        x = torch.ones(4 + RANK, device=TPU)
        try:
            dist.all_reduce(x)
        except ValueError as e:
            assert "did not call the same collective" in str(e), e
        else:
            raise AssertionError("a shape mismatch did not raise")
        y = torch.ones(2, device=TPU)
        dist.all_reduce(y)
        assert y.cpu().tolist() == [float(WORLD)] * 2

    def compiled_functional_collectives():
        import torch.distributed._functional_collectives as funcol

        def f(x):
            y = funcol.all_reduce(x * 2, "sum", dist.group.WORLD)
            z = funcol.all_gather_single(y + 1, 0, dist.group.WORLD)
            return funcol.wait_tensor(z).sin()

        compiled = torch.compile(f, backend="tpu")
        torch_pjrt.reset_metrics()
        for i in range(3):  # the later calls must run the collectives again, not replay a program
            x = torch.arange(4.0, device=TPU) * (i + 1) + RANK
            got, want = compiled(x), f(x)
            assert torch.equal(got.cpu(), want.cpu()), (i, got, want)
        assert not torch_pjrt.metrics().get("fallback_ops"), torch_pjrt.metrics().get("fallback_ops")

    for fn in (
        compiled_functional_collectives,
        same_tensor,
        view_written_through,
        non_contiguous,
        zero_dim,
        async_work_and_future,
        async_p2p,
        objects_and_barrier,
        mismatch_raises_and_group_survives,
    ):
        check(fn.__name__, fn)


# ---------------------------------------------------------------- init forms and failures


def scenario_init_forms():
    from torch.distributed.device_mesh import init_device_mesh

    for form in (None, "tpu_dist", "cpu:gloo,tpu:tpu_dist"):

        def run(form=form):
            init(form)
            x = torch.full((2,), float(RANK + 1), device=TPU)
            c = torch.full((2,), float(RANK + 1))
            dist.all_reduce(x)
            dist.all_reduce(c)
            dist.barrier()
            total = float(sum(r + 1 for r in range(WORLD)))
            assert x.cpu().tolist() == [total] * 2 and c.tolist() == [total] * 2
            dist.destroy_process_group()

        check(f"init[{form}]", run)

    def mesh():
        m = init_device_mesh("tpu", (WORLD,))
        x = torch.full((2,), float(RANK + 1), device=TPU)
        dist.all_reduce(x, group=m.get_group())
        assert m.device_type == "tpu" and x.cpu().tolist() == [float(sum(r + 1 for r in range(WORLD)))] * 2
        dist.destroy_process_group()

    check("init_device_mesh", mesh)


def scenario_many_ranks():
    """8 ranks on one host, each on tpu:LOCAL_RANK (a CPU-plugin process offers LOCAL_WORLD_SIZE devices)."""
    from torch.distributed.device_mesh import init_device_mesh

    def run():
        init()
        mesh = init_device_mesh("tpu", (WORLD,))
        x = torch.full((3,), float(RANK), device=TPU)
        dist.all_reduce(x, group=mesh.get_group())
        assert torch.tpu.device_count() >= WORLD and TPU.index == RANK, (torch.tpu.device_count(), TPU)
        assert x.device == TPU and x.cpu().tolist() == [float(sum(range(WORLD)))] * 3
        dist.destroy_process_group()

    check("many_ranks", run)


def scenario_killed_rank():
    init(seconds=8)
    x = torch.ones(2, device=TPU)
    dist.all_reduce(x)
    if RANK == 1:
        os._exit(0)  # dies without a word
    import time

    start = time.monotonic()
    try:
        for _ in range(3):
            dist.all_reduce(x)
        report("survivor_raised", "a dead peer did not make all_reduce raise")
    except Exception as e:  # noqa: BLE001
        took = time.monotonic() - start
        report("survivor_raised", "ok" if took < 30 else f"raised after {took:.1f} s: {e!r}")
    os._exit(0)


# ---------------------------------------------------------------- DDP and MPMD

MODE = os.environ.get("DIST_TEST_MODE", "strict")
STEPS = 10
BATCH = 8


def _mlp(dtype=torch.float32):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(dtype)


def _batches(dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    return [
        (torch.randn(BATCH, 6, generator=g, dtype=dtype), torch.randn(BATCH, 3, generator=g, dtype=dtype))
        for _ in range(STEPS)
    ]


def _reference():
    """One process, the whole batch, float64 on CPU: the losses and parameters DDP must reach."""
    model = _mlp(torch.float64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in _batches():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.double()), y.double())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach() for p in model.parameters()]


def _my_half(t):
    n = t.shape[0] // WORLD
    return t[RANK * n : (RANK + 1) * n]


def _close(got, want, what, rtol=2e-5, atol=2e-6):
    got = got.detach().cpu().double()
    if not torch.allclose(got, want.double(), rtol=rtol, atol=atol):
        raise AssertionError(f"{what}: max error {(got - want).abs().max().item():.3g}")


def _same_on_every_rank(params):
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    everyone = [torch.empty_like(flat) for _ in range(WORLD)]
    dist.all_gather(everyone, flat)
    for r, other in enumerate(everyone):
        if not torch.equal(other.cpu(), flat.cpu()):
            raise AssertionError(f"rank {r}'s parameters differ bitwise from rank {RANK}'s")


def _train_ddp(variant, checkpoint_dir=None):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(_mlp().to(TPU), gradient_as_bucket_view=variant == "bucket_view")
    if variant == "comm_hook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step, (x, y) in enumerate(_batches()):
        x, y = _my_half(x).to(TPU), _my_half(y).to(TPU)
        opt.zero_grad()
        if variant == "no_sync":  # two micro-batches, the first without an allreduce
            half = x.shape[0] // 2
            with model.no_sync():
                (torch.nn.functional.mse_loss(model(x[:half]), y[:half]) / 2).backward()
            loss2 = torch.nn.functional.mse_loss(model(x[half:]), y[half:]) / 2
            loss2.backward()
            with torch.no_grad():
                loss = torch.nn.functional.mse_loss(model(x), y)
        else:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
        opt.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
        losses.append(global_loss.item())
        if checkpoint_dir and RANK == 0:  # MPMD: rank 0 alone saves, mid-loop
            torch.save(model.module.state_dict(), os.path.join(checkpoint_dir, f"step{step}.pt"))
    return losses, list(model.parameters())


def scenario_ddp():
    torch_pjrt.set_eager_mode(MODE)
    init()
    want_losses, want_params = _reference()
    for variant in ("plain", "no_sync", "comm_hook", "bucket_view"):

        def run(variant=variant):
            losses, params = _train_ddp(variant)
            _close(torch.tensor(losses), torch.tensor(want_losses), "losses")
            for i, (p, w) in enumerate(zip(params, want_params)):
                _close(p, w, f"parameter {i}")
            _same_on_every_rank(params)

        check(f"ddp_{variant}", run)
    dist.destroy_process_group()


def scenario_mpmd():
    """Ranks run different code between collectives, in fused mode: rank-divergent eager work, a rank-0-only
    checkpoint inside a DDP loop, and a two-stage pipeline over send/recv."""
    import tempfile

    torch_pjrt.set_eager_mode("fused")
    init()

    def divergent():
        x = torch.arange(6.0, device=TPU)
        for step in range(6):
            if RANK == 0:  # only rank 0 does extra work, with its own syncs and shapes
                for k in range(step + 1):
                    extra = torch.randn(k + 3, device=TPU).sum()
                    _ = extra.item()
            x = x * 2 + RANK
            dist.all_reduce(x)
        want = torch.arange(6.0, dtype=torch.float64)
        for _ in range(6):
            want = (want * 2) * WORLD + sum(range(WORLD))
        _close(x, want, "divergent result", rtol=0, atol=0)

    def rank0_checkpoint_in_ddp():
        want_losses, want_params = _reference()
        with tempfile.TemporaryDirectory() as d:
            losses, params = _train_ddp("plain", checkpoint_dir=d)
            if RANK == 0:
                saved = torch.load(os.path.join(d, f"step{STEPS - 1}.pt"))
                for p, s in zip(params, saved.values()):
                    assert torch.equal(p.detach().cpu(), s.cpu())
        _close(torch.tensor(losses), torch.tensor(want_losses), "losses")
        for i, (p, w) in enumerate(zip(params, want_params)):
            _close(p, w, f"parameter {i}")

    def pipeline():
        full = _mlp()
        stage = (full[:2] if RANK == 0 else full[2:]).to(TPU)
        opt = torch.optim.SGD(stage.parameters(), lr=0.1)
        ref = _mlp(torch.float64)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for x, y in _batches():
            ref_opt.zero_grad()
            ref_loss = torch.nn.functional.mse_loss(ref(x.double()), y.double())
            ref_loss.backward()
            ref_opt.step()
            opt.zero_grad()
            if RANK == 0:
                h = stage(x.to(TPU))
                dist.send(h.detach(), 1)
                grad = torch.empty_like(h)
                dist.recv(grad, 1)
                h.backward(grad)
            else:
                h = torch.empty(BATCH, 16, device=TPU)
                dist.recv(h, 0)
                h.requires_grad_(True)
                loss = torch.nn.functional.mse_loss(stage(h), y.to(TPU))
                loss.backward()
                dist.send(h.grad, 0)
                _close(loss, torch.tensor(ref_loss.item()), "pipeline loss")
            opt.step()
        mine = ref[:2] if RANK == 0 else ref[2:]
        for i, (p, w) in enumerate(zip(stage.parameters(), mine.parameters())):
            _close(p, w, f"stage {RANK} parameter {i}")

    if WORLD == 2:
        for fn in (divergent, rank0_checkpoint_in_ddp, pipeline):
            check(fn.__name__, fn)
    dist.destroy_process_group()


# ---------------------------------------------------------------- FSDP2, DTensor, checkpoints


def _train(model, device, steps=STEPS, opt=None):
    """Trains on this rank's half of each batch; returns the losses averaged over ranks."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in _batches()[:steps]:
        x, y = _my_half(x).to(device), _my_half(y).to(device)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        avg = loss.detach().float().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        losses.append(avg.item())
    return losses


def _sharded_mlp(device, **kw):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if str(device) == "cpu":  # without a mesh, FSDP2 shards onto the accelerator
        kw["mesh"] = init_device_mesh("cpu", (WORLD,))
    model = _mlp().to(device)
    for layer in (model[0], model[2]):
        fully_shard(layer, **kw)
    return fully_shard(model, **kw)


def scenario_fsdp_dtensor():
    from torch.distributed.fsdp import MixedPrecisionPolicy

    init()
    want_losses, want_params = _reference()

    for reshard in (True, False):

        def fsdp(reshard=reshard):
            model = _sharded_mlp(TPU, reshard_after_forward=reshard)
            losses = _train(model, TPU)
            _close(torch.tensor(losses), torch.tensor(want_losses), "losses")
            for i, (p, w) in enumerate(zip(model.parameters(), want_params)):
                _close(p.full_tensor(), w, f"parameter {i}")

        check(f"fsdp2_reshard_after_forward_{reshard}", fsdp)

    def fsdp_mixed_precision():
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        got = _train(_sharded_mlp(TPU, mp_policy=policy), TPU)
        want = _train(_sharded_mlp("cpu", mp_policy=policy), "cpu")  # the same on CPU tensors with Gloo
        _close(torch.tensor(got), torch.tensor(want), "bf16 losses against CPU's", rtol=2e-2, atol=2e-3)

    def memory_drops_after_reshard():
        model = _sharded_mlp(TPU, reshard_after_forward=True)
        for layer in (model[0], model[2]):
            layer.unshard()
        unsharded = torch.tpu.memory_allocated(TPU)
        for layer in (model[0], model[2]):
            layer.reshard()
        sharded = torch.tpu.memory_allocated(TPU)
        full_bytes = sum(p.numel() * 4 for p in _mlp().parameters())
        assert unsharded - sharded >= full_bytes // 2, (unsharded, sharded, full_bytes)

    def dtensor_redistribute():
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

        mesh = init_device_mesh("tpu", (WORLD,))
        full = torch.arange(24.0).reshape(4, 6)
        d = distribute_tensor(full.to(TPU), mesh, [Shard(0)])
        assert d.to_local().device.type == "tpu" and torch.equal(
            d.redistribute(mesh, [Replicate()]).to_local().cpu(), full
        )
        assert torch.equal(d.redistribute(mesh, [Shard(1)]).full_tensor().cpu(), full)
        local = torch.full((4, 6), float(RANK + 1), device=TPU)
        partial = DTensor.from_local(local, mesh, [Partial()])
        total = float(sum(r + 1 for r in range(WORLD)))
        assert torch.equal(partial.redistribute(mesh, [Replicate()]).to_local().cpu(), torch.full((4, 6), total))
        shard = partial.redistribute(mesh, [Shard(0)]).to_local().cpu()
        assert torch.equal(shard, torch.full((4 // WORLD, 6), total))

    def tensor_parallel_mlp():
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("tpu", (WORLD,))
        model = parallelize_module(_mlp().to(TPU), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        ref = _mlp(torch.float64)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        for x, y in _batches():  # tensor parallel: every rank sees the whole batch
            opt.zero_grad()
            ref_opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x.to(TPU)), y.to(TPU))
            loss.backward()
            opt.step()
            ref_loss = torch.nn.functional.mse_loss(ref(x.double()), y.double())
            ref_loss.backward()
            ref_opt.step()
            _close(loss, torch.tensor(ref_loss.item()), "tp loss")
        for i, (p, w) in enumerate(zip(model.parameters(), ref.parameters())):
            _close(p.full_tensor(), w, f"tp parameter {i}")

    for fn in (fsdp_mixed_precision, memory_drops_after_reshard, dtensor_redistribute, tensor_parallel_mlp):
        check(fn.__name__, fn)
    dist.destroy_process_group()


def _checkpoint_dir():
    return os.environ["DIST_TEST_CHECKPOINT"]


def scenario_checkpoint_save():
    """Two ranks train an FSDP2 model 3 steps, save model and optimizer with torch.distributed.checkpoint, and rank 0
    writes the full parameters for the loads to compare with."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    init()

    def save():
        model = _sharded_mlp(TPU)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        _train(model, TPU, steps=3, opt=opt)
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=_checkpoint_dir())
        full = [p.full_tensor().cpu() for p in model.parameters()]
        if RANK == 0:
            torch.save(full, os.path.join(_checkpoint_dir(), "full_params.pt"))

    check("dcp_save", save)
    dist.destroy_process_group()


def scenario_checkpoint_load():
    """Loads the checkpoint into this world size (1: a plain model; 2: FSDP2, resharded), checks the parameters, and
    trains one more step with the loaded optimizer."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    init()

    def load():
        model = _sharded_mlp(TPU) if WORLD > 1 else _mlp().to(TPU)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        _train(model, TPU, steps=1, opt=opt)  # the optimizer gets its state, to be overwritten
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=_checkpoint_dir())
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        full = torch.load(os.path.join(_checkpoint_dir(), "full_params.pt"))
        for i, (p, w) in enumerate(zip(model.parameters(), full)):
            got = p.full_tensor() if hasattr(p, "full_tensor") else p
            assert torch.equal(got.detach().cpu(), w), f"parameter {i} differs after load"
        step = {k: v["step"] for k, v in opt.state_dict()["state"].items()}
        assert all(float(s) == 3 for s in step.values()), step

    check(f"dcp_load_into_{WORLD}", load)
    dist.destroy_process_group()


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]]()
