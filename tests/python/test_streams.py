"""Streams, events, pinned host memory, non-blocking copies and profiler spans on tpu, compared with CPU."""

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_pjrt  # noqa: F401

DEV = "tpu"


def small_ints(*shape, seed=0):
    # Integer values: float32 matmuls of them are exact, so the CPU result is the reference bit for bit.
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-2, 3, shape, generator=g).float()


def slow_chain(x, n=4):
    # Enough device work (several 1024^2 matmuls) that a copy enqueued behind it is still pending when it returns.
    y = x
    for _ in range(n):
        y = torch.clamp(y @ x, -64, 64)
    return y


def test_stream_api():
    s = torch.tpu.Stream()
    assert isinstance(s, torch.Stream) and s.device_type == torch.Stream(DEV).device_type
    assert s.stream_id != 0 and torch.Stream(DEV).stream_id not in (0, s.stream_id)
    assert torch.tpu.default_stream().stream_id == 0
    assert torch.tpu.current_stream() == torch.tpu.default_stream()
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.tpu.current_stream().stream_id == 0
    torch.tpu.set_stream(s)
    try:
        assert torch.tpu.current_stream() == s
    finally:
        torch.tpu.set_stream(torch.tpu.default_stream())
    with s:
        assert torch.tpu.current_stream() == s
    s.synchronize()
    assert s.query()


def test_event_record_query_synchronize_elapsed():
    x = small_ints(1024, 1024).to(DEV)
    start, end = torch.tpu.Event(enable_timing=True), torch.Event(DEV, enable_timing=True)
    start.record()
    y = slow_chain(x)
    end.record()
    end.synchronize()
    assert end.query() and start.query()
    ms = start.elapsed_time(end)
    assert ms > 0
    assert torch.equal(y.cpu(), slow_chain(x.cpu()))


def test_ordering_across_two_streams():
    a, b = small_ints(1024, 1024, seed=1), small_ints(1024, 1024, seed=2)
    s1, s2 = torch.tpu.Stream(), torch.tpu.Stream()
    da, db = a.to(DEV), b.to(DEV)
    with torch.tpu.stream(s1):
        y = slow_chain(da)
        done = s1.record_event()
    with torch.tpu.stream(s2):
        s2.wait_event(done)
        z = y @ db + 1
        s2.wait_stream(s1)
        w = z.sum(0)
    s2.synchronize()
    ref_y = slow_chain(a)
    ref_z = ref_y @ b + 1
    assert torch.equal(z.cpu(), ref_z)
    assert torch.equal(w.cpu(), ref_z.sum(0))


def test_pinned_memory_is_real():
    assert not torch.randn(4).is_pinned()
    p = torch.randn(4).pin_memory()
    assert p.is_pinned()
    assert torch.empty(16, pin_memory=True).is_pinned()
    assert p[1:].is_pinned()  # a view into a pinned block
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(8.0)), batch_size=4, pin_memory=True
    )
    batches = list(loader)
    assert all(b[0].is_pinned() for b in batches)
    assert torch.equal(torch.cat([b[0] for b in batches]), torch.arange(8.0))


def test_non_blocking_device_to_host_returns_before_the_data_is_ready():
    x = small_ints(1024, 1024, seed=3)
    y = slow_chain(x.to(DEV), n=6)
    out = torch.empty(1024, 1024, pin_memory=True)
    out.copy_(y, non_blocking=True)  # returns with the chain still running
    pending = torch.tpu.Event()
    pending.record()
    assert not pending.query()
    torch.tpu.synchronize()
    assert torch.equal(out, slow_chain(x, n=6))


def test_to_cpu_non_blocking_gives_pinned_memory():
    x = small_ints(64, 64)
    host = (x.to(DEV) * 2).to("cpu", non_blocking=True)
    assert host.is_pinned()
    torch.tpu.current_stream().synchronize()
    assert torch.equal(host, x * 2)


def test_non_blocking_host_to_device():
    src = small_ints(256, 256, seed=4).pin_memory()
    ref = src.clone()
    d = src.to(DEV, non_blocking=True)
    e = d * 3 + 1  # reads wait for the copy
    torch.tpu.synchronize()
    src.fill_(7)  # the copy is complete: the source is free again
    assert torch.equal(d.cpu(), ref)
    assert torch.equal(e.cpu(), ref * 3 + 1)


def test_non_blocking_upload_then_in_place_update_keeps_its_memory():
    # An in-place op donates the uploaded buffer; its memory must not be handed to the next upload.
    a = small_ints(512, 512, seed=5).pin_memory()
    d = a.to(DEV, non_blocking=True)
    d.add_(1)
    b = small_ints(512, 512, seed=6).pin_memory()
    d2 = b.to(DEV, non_blocking=True)
    d2.mul_(2)
    torch.tpu.synchronize()
    assert torch.equal(d.cpu(), a + 1)
    assert torch.equal(d2.cpu(), b * 2)


@pytest.mark.parametrize("case", ["pageable", "dtype_change", "view_destination", "non_contiguous_source"])
def test_non_blocking_falls_back_to_a_blocking_copy(case):
    x = small_ints(32, 32, seed=7)
    if case == "pageable":
        assert torch.equal(x.to(DEV, non_blocking=True).cpu(), x)
        out = torch.empty(32, 32)  # pageable: the copy is done when copy_ returns
        out.copy_(x.to(DEV), non_blocking=True)
        assert torch.equal(out, x)
        # (.to("cpu", non_blocking=True) allocates pinned memory instead: test_to_cpu_non_blocking_gives_pinned_memory)
    elif case == "dtype_change":
        assert torch.equal(x.pin_memory().to(DEV, torch.float64, non_blocking=True).cpu(), x.double())
    elif case == "view_destination":
        d = torch.zeros(64, 32, device=DEV)
        d[16:48].copy_(x.pin_memory(), non_blocking=True)
        ref = torch.zeros(64, 32)
        ref[16:48] = x
        assert torch.equal(d.cpu(), ref)
    else:
        d = x.to(DEV).t()
        out = torch.empty(32, 32, pin_memory=True)
        out.copy_(d, non_blocking=True)
        torch.tpu.synchronize()
        assert torch.equal(out, x.t())


def test_non_blocking_copy_in_fused_mode():
    x = small_ints(128, 128, seed=8)
    with torch_pjrt.eager_mode("fused"):
        y = (x.to(DEV) @ x.to(DEV)).relu() - 1
        out = torch.empty(128, 128, pin_memory=True)
        out.copy_(y, non_blocking=True)
        torch.tpu.synchronize()
    assert torch.equal(out, (x @ x).relu() - 1)


def test_profiler_shows_engine_spans(tmp_path):
    x = torch.randn(33, 17, device=DEV)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = (x * 2.5).sum()
        y.item()
        torch.randn(16).pin_memory().to(DEV, non_blocking=True)
        torch.tpu.synchronize()
    names = {e.key for e in prof.key_averages()}
    for span in ("tpu::execute (aten::sum)", "tpu::sync", "tpu::copy_to_host", "tpu::copy_from_host_async"):
        assert span in names, sorted(n for n in names if n.startswith("tpu::"))
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert any(str(e.get("name", "")).startswith("tpu::execute") for e in events)
