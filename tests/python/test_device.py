"""The tpu device as torch sees it: device module, accelerator API, RNG, memory, save/load."""

import io
import os
import subprocess
import sys

import pytest
import torch

import torch_pjrt


def default_cpu_devices() -> int:
    # One CPU-plugin device per core this process may use, within [2, 4] (engine.cc's cpu_devices()).
    if os.environ.get("TORCH_PJRT_CPU_DEVICES"):
        return int(os.environ["TORCH_PJRT_CPU_DEVICES"])
    return min(4, max(2, len(os.sched_getaffinity(0))))


def test_device_module_basics():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == default_cpu_devices()
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(1)
    try:
        assert torch.tpu.current_device() == 1
        assert torch.empty(2, device="tpu").device == torch.device("tpu", 1)
    finally:
        torch.tpu.set_device(0)
    torch.tpu.synchronize()


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.accelerator.device_count() == default_cpu_devices()


@pytest.mark.parametrize("count", [1, 3, 4])
def test_cpu_device_count_is_chosen_by_environment(count):
    code = (
        "import torch, torch_pjrt\n"
        "n = torch.tpu.device_count()\n"
        "x = torch.arange(6.0).to(f'tpu:{n - 1}')\n"
        "print(n, (x * 2).sum().item())\n"
    )
    r = _python(code, TORCH_PJRT_CPU_DEVICES=str(count))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(count), "30.0"]
    assert "cpu_device_count" not in r.stderr  # the plugin's INFO line stays out of the user's stderr


def test_tensor_methods():
    x = torch.arange(4.0)
    y = x.tpu()
    assert y.is_tpu and not x.is_tpu
    assert y.device.type == "tpu"
    assert torch.equal(y.cpu(), x)
    m = torch.nn.Linear(2, 2).tpu()
    assert m.weight.device.type == "tpu"


def test_memory_allocated_tracks_storages():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    x = torch.empty(1024, 1024, device="tpu")
    assert torch.tpu.memory_allocated() - before == 4 * 1024 * 1024
    assert torch.accelerator.memory_allocated() - before == 4 * 1024 * 1024
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated()
    del x
    assert torch.tpu.memory_allocated() == before


def test_second_device_runs_ops_and_mixing_devices_raises():
    a = torch.arange(6.0).reshape(2, 3)
    x = a.to("tpu:1")
    assert x.device == torch.device("tpu", 1)
    y = (x * 2 + 1).sum(0)
    assert y.device == torch.device("tpu", 1)
    assert torch.equal(y.cpu(), (a * 2 + 1).sum(0))
    with pytest.raises(RuntimeError, match="same device"):
        x + a.to("tpu:0")
    z = x.to("tpu:0")  # device to device
    assert z.device == torch.device("tpu", 0)
    assert torch.equal(z.cpu(), a)


def test_manual_seed_reproduces_random_tensors():
    torch.manual_seed(123)
    a = torch.rand(100, device="tpu").cpu()
    torch.manual_seed(123)
    b = torch.rand(100, device="tpu").cpu()
    assert torch.equal(a, b)
    torch.tpu.manual_seed(7)
    c = torch.rand(100, device="tpu").cpu()
    assert not torch.equal(a, c)


def test_rng_state_round_trip():
    state = torch.tpu.get_rng_state()
    a = torch.randn(50, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    b = torch.randn(50, device="tpu").cpu()
    assert torch.equal(a, b)


def test_save_load_round_trip():
    x = torch.randn(3, 4).to("tpu")
    buf = io.BytesIO()
    torch.save({"x": x, "view": x[1:, ::2]}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["x"].device.type == "tpu"
    assert torch.equal(loaded["x"].cpu(), x.cpu())
    assert torch.equal(loaded["view"].cpu(), x[1:, ::2].cpu())
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert torch.equal(on_cpu["x"], x.cpu())


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)


def test_import_torch_is_enough_through_autoload():
    r = _python("import torch; x = torch.ones(2, device='tpu'); print((x + 1).cpu().tolist())")
    assert r.returncode == 0, r.stderr
    assert "[2.0, 2.0]" in r.stdout


def test_autoload_can_be_disabled():
    r = _python("import torch; torch.ones(2, device='tpu')", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode != 0


def test_missing_plugin_raises_clear_error_and_process_survives():
    code = (
        "import torch, torch_pjrt\n"
        "assert not torch.tpu.is_available()\n"
        "try:\n"
        "    torch.ones(2, device='tpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n"
        "print('alive', torch.ones(2).sum().item())\n"
    )
    r = _python(code, TORCH_PJRT_PLATFORM="/nonexistent.so")
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "/nonexistent.so" in r.stdout
    assert "alive 2.0" in r.stdout


def test_doctor_reports_platform_and_smoke_test():
    r = subprocess.run([sys.executable, "-m", "torch_pjrt", "doctor"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "platform : cpu" in r.stdout
    assert "smoke    : ok" in r.stdout
    assert f"tpu:{torch.tpu.device_count() - 1}" in r.stdout


def test_version_mismatch_message(monkeypatch):
    from torch_pjrt import _version_check

    monkeypatch.setattr(torch, "__version__", "1.0.0")
    try:
        _version_check.check_torch_version()
    except ImportError as e:
        assert "1.0.0" in str(e) and "Rebuild" in str(e)
    else:
        from torch_pjrt import _build_info  # noqa: F401  (only reachable without build info)

        pytest.fail("a mismatched torch version must raise ImportError")


def test_platform_reports_choice():
    info = torch_pjrt.platform()
    assert info["platform"] == "cpu"
    assert info["available"]
    assert info["api_version"].startswith("0.")
    assert len(info["devices"]) == default_cpu_devices()


def test_clean_exit_after_backward():
    # torch's autograd device thread used to drop its last graph-task reference
    # during interpreter shutdown and abort the process (about half the runs).
    code = "import torch, torch_pjrt; x = torch.randn(3, device='tpu', requires_grad=True); (x * 2).sum().backward()"
    for _ in range(5):
        r = _python(code)
        assert r.returncode == 0, r.stderr[-500:]


def test_memory_stats_and_summary_follow_live_buffers():
    torch_pjrt.synchronize()
    before = torch.tpu.memory_stats()["allocated_bytes.all.current"]
    assert before == torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    x = torch.ones(1 << 18, device="tpu")  # 1 MiB
    x.add_(1)
    torch_pjrt.synchronize()
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == before + (1 << 20)
    assert stats["allocated_bytes.all.peak"] >= before + (1 << 20)
    assert torch.accelerator.memory_allocated("tpu") == stats["allocated_bytes.all.current"]
    assert "allocated memory" in torch.tpu.memory_summary()
    del x
    assert torch.tpu.memory_stats()["allocated_bytes.all.current"] == before


def test_memory_info_and_device_properties_as_cuda_reports_them():
    """torch.tpu.mem_get_info, torch.accelerator.get_memory_info and torch.tpu.get_device_properties (what
    accelerate's device_map="auto" and TorchTitan's metrics ask): total is the device's memory (the host's physical
    memory on the CPU plugin), and free drops by a new storage's bytes."""
    import os

    import torch_pjrt

    free, total = torch.tpu.mem_get_info(0)
    assert torch.accelerator.get_memory_info(0) == (free, total)
    assert 0 < free <= total
    props = torch.tpu.get_device_properties(0)
    assert props.total_memory == total and props.index == 0 and props.name == torch.tpu.get_device_name(0)
    if torch_pjrt.platform()["platform"] == "cpu":
        assert total == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        a = torch.empty(1 << 20, device="tpu")
        assert torch.tpu.mem_get_info(0) == (free - a.nbytes, total)
        del a
        assert torch.tpu.mem_get_info(0) == (free, total)
    with pytest.raises(RuntimeError, match="Invalid device"):
        torch.tpu.mem_get_info(torch.tpu.device_count())
