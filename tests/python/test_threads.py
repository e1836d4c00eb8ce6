"""Several Python threads and autograd's device thread run ops, backward passes
and syncs on shared tpu tensors at once.

The engine's contract (csrc/engine/engine.h): every public call may come from
any thread; a storage read while another thread writes it is either the old or
the new buffer, never a torn one. Each check below is deterministic whatever
the interleaving, and is compared with a float64 CPU reference.
"""

import threading

import pytest
import torch

TPU = "tpu"
THREADS = 4


def _run_threads(target, n=THREADS):
    errors = []
    barrier = threading.Barrier(n)

    def wrapped(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def _mlp(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(8, 16, generator=g) * 0.3, torch.randn(16, 4, generator=g) * 0.3]


def _train(params, x, y, steps, device, dtype):
    ws = [p.to(device, dtype).requires_grad_() for p in params]
    x, y = x.to(device, dtype), y.to(device, dtype)
    losses = []
    for _ in range(steps):
        loss = ((torch.tanh(x @ ws[0]) @ ws[1] - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for w in ws:
                w -= 0.1 * w.grad
                w.grad = None
        losses.append(loss.detach())
    return [float(v) for v in losses], [w.detach().cpu().double() for w in ws]


@pytest.mark.parametrize("round", range(2))
def test_independent_training_in_threads(round):
    """Each thread trains its own MLP (forward, backward on autograd's device
    thread, in-place SGD, .item()); each must match its float64 reference."""
    steps = 15
    data = []
    for i in range(THREADS):
        g = torch.Generator().manual_seed(100 + i + 10 * round)
        data.append((_mlp(i + round), torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)))
    refs = [_train(p, x, y, steps, "cpu", torch.float64) for p, x, y in data]
    results = [None] * THREADS

    def work(i):
        p, x, y = data[i]
        results[i] = _train(p, x, y, steps, TPU, torch.float32)

    _run_threads(work)
    for (ref_losses, ref_ws), (losses, ws) in zip(refs, results):
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-4, atol=1e-6)
        for w, r in zip(ws, ref_ws):
            torch.testing.assert_close(w, r, rtol=1e-4, atol=1e-5)


def test_shared_weights_backward_in_threads():
    """Threads run backward through one shared weight at once; its gradient
    is the sum of theirs."""
    g = torch.Generator().manual_seed(0)
    w_cpu = torch.randn(16, 16, generator=g, dtype=torch.float64)
    xs = [torch.randn(8, 16, generator=g, dtype=torch.float64) for _ in range(THREADS)]
    reps = 5
    w_ref = w_cpu.clone().requires_grad_()
    for x in xs:
        for _ in range(reps):
            torch.sin(x @ w_ref).sum().backward()

    w = w_cpu.float().to(TPU).requires_grad_()

    def work(i):
        x = xs[i].float().to(TPU)
        for _ in range(reps):
            torch.sin(x @ w).sum().backward()
            torch.tpu.synchronize()

    _run_threads(work)
    torch.testing.assert_close(w.grad.cpu().double(), w_ref.grad, rtol=1e-4, atol=1e-4)


def test_readers_see_whole_writes():
    """One thread adds 1 in place to a shared tensor; readers sum it at the
    same time. Every sum they see is that of a whole state (all elements
    equal), and the final value counts every write."""
    n, writes = 4096, 200
    shared = torch.zeros(n, device=TPU)
    seen = []

    def work(i):
        if i == 0:
            for _ in range(writes):
                shared.add_(1)
            torch.tpu.synchronize()
        else:
            for _ in range(60):
                view = shared.clone()
                lo, hi = view.min().item(), view.max().item()
                seen.append((lo, hi))
                (view[: n // 2] * 2).sum().item()

    _run_threads(work)
    assert all(lo == hi for lo, hi in seen), [s for s in seen if s[0] != s[1]][:5]
    assert torch.equal(shared.cpu(), torch.full((n,), float(writes)))


def test_views_written_from_threads():
    """Threads write disjoint rows of one storage through views (each write
    makes a new buffer for the whole storage). Writes to one storage from
    several threads race as on CPU: each thread's row keeps a value the
    thread wrote, and no buffer is torn or lost."""
    rows = THREADS
    table = torch.zeros(rows, 64, device=TPU)
    lock = threading.Lock()

    def work(i):
        for k in range(1, 31):
            with lock:  # the writes are ordered; the reads below are not
                table[i].fill_(k)
            assert table[i].sum().item() == 64 * k

    _run_threads(work)
    torch.testing.assert_close(table.cpu(), torch.full((rows, 64), 30.0))


def test_syncs_and_metrics_from_threads():
    """synchronize(), metrics() and small programs from every thread at once."""
    import torch_pjrt

    def work(i):
        x = torch.full((3,), float(i), device=TPU)
        for k in range(50):
            x = x + 1
            if k % 7 == 0:
                torch.tpu.synchronize()
            if k % 11 == 0:
                torch_pjrt.metrics()
        assert x.cpu().tolist() == [float(i + 50)] * 3

    _run_threads(work, n=6)


def test_mode_switches_from_another_thread_lose_no_values():
    """One thread flips the eager mode between fused and strict while another accumulates: a call planned in fused
    mode that joins after the switch still runs, and no later strict call reads its result as a never-written
    storage (zeros). Whatever the interleaving, the sums are exact small integers."""
    import torch_pjrt

    stop = threading.Event()

    def toggle():
        i = 0
        while not stop.is_set():
            torch_pjrt.set_eager_mode(("fused", "strict")[i % 2])
            i += 1
            stop.wait(0.0005)

    toggler = threading.Thread(target=toggle)
    toggler.start()
    try:
        sums = []
        for _ in range(6):
            a = torch.ones(4, device=TPU)
            acc = torch.zeros(4, device=TPU)
            for i in range(300):
                acc = acc + a * (i % 5)
            sums.append(acc.cpu())
    finally:
        stop.set()
        toggler.join()
        torch_pjrt.set_eager_mode("strict")
    for s in sums:
        assert s.tolist() == [600.0] * 4


def test_a_region_that_compiles_does_not_block_another_threads_ops_and_syncs():
    """Fused mode compiles a region's program with the region lock released (csrc/engine/fused.h): while thread A's
    region compiles a program no cache holds, thread B's ops join a new region, run, sync and read back, without
    waiting for that compile. Both threads' values match a float64 CPU reference."""
    import os
    import time

    import torch_pjrt

    n = 48 + os.getpid() % 97  # a structure no earlier test compiled
    gen = torch.Generator().manual_seed(0)
    a64 = torch.randn(n, n, generator=gen, dtype=torch.float64)
    w64 = torch.randn(n, n, generator=gen, dtype=torch.float64) / n**0.5
    b64 = torch.randn(16, generator=gen, dtype=torch.float64)
    # Distinct ops, so that no period cuts the region: one region, one compile of about a second.
    funcs = [torch.sin, torch.cos, torch.tanh, torch.sigmoid, torch.atan, torch.erf, torch.asinh, torch.log1p]
    funcs += [torch.abs, torch.relu, torch.neg, torch.square, torch.sqrt, torch.expm1, torch.sinh, torch.erfc]

    def chain(y, w):
        for f in funcs:
            y = f((y @ w).abs() + 0.5) * 0.5
        return y

    def b_step(t):
        return (t * 2 + 1).sin()

    with torch_pjrt.eager_mode("fused"):
        a, w, b = a64.float().to(TPU), w64.float().to(TPU), b64.float().to(TPU)
        b_step(b).cpu()  # B's program is compiled before A's region starts
        built, results, errors = threading.Event(), {}, []

        def thread_a():
            try:
                y = chain(a, w)
                built.set()
                results["a"] = y.cpu()  # seals the region and compiles it
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                built.set()

        sealed_before = torch_pjrt.metrics()["regions_sealed"]
        t = threading.Thread(target=thread_a)
        t.start()
        built.wait(timeout=120)
        deadline = time.monotonic() + 60
        while torch_pjrt.metrics()["regions_compiling"] == 0 and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)
        # B's steps, each read back and synced; compared once A is done (a first comparison imports lazily).
        got, compiling_after = [], []
        for _ in range(5):
            got.append(b_step(b).cpu())
            torch.tpu.synchronize()
            compiling_after.append(torch_pjrt.metrics()["regions_compiling"])
        t.join(timeout=300)
    assert not t.is_alive(), "thread A hung"
    if errors:
        raise errors[0]
    assert torch_pjrt.metrics()["regions_sealed"] > sealed_before
    assert compiling_after[:2] == [1, 1], f"thread B waited for thread A's compile: {compiling_after}"
    for g in got:
        torch.testing.assert_close(g.double(), b_step(b64), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results["a"].double(), chain(a64, w64), rtol=1e-4, atol=1e-5)
