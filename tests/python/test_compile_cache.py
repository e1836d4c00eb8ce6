"""The persistent compile cache across processes: a second run compiles nothing, concurrent writers, damaged and
foreign files, the size cap, unwritable directories, the warm bundle and ``python -m torch_pjrt cache``.

Each test runs cache_worker.py (a small MLP trained on ``tpu`` and, as the reference, in float64 on the CPU) in fresh
processes with cache directories of its own.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys

import pytest

from torch_pjrt import compile_cache

HERE = os.path.dirname(__file__)
WORKER = os.path.join(HERE, "cache_worker.py")
DROPPED = "dropped the damaged entry"


def env_for(host, shared=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_PJRT_")}
    env["TORCH_PJRT_CACHE_DIR"] = str(host)
    if shared is not None:
        env["TORCH_PJRT_SHARED_CACHE_DIR"] = str(shared)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_worker(env, *args, preexec_fn=None):
    p = subprocess.run(
        [sys.executable, WORKER, *args], env=env, capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def assert_correct(r):
    """float32 training within float32's reach of the float64 reference."""
    for got, want in zip(r["losses"], r["reference"], strict=True):
        assert abs(got - want) <= 1e-4 * max(1.0, abs(want)), (r["losses"], r["reference"])


def fnv1a64(data: bytes) -> int:
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def intact(path) -> bool:
    data = open(path, "rb").read()
    return compile_cache.read_header(path) is not None and struct.unpack("<Q", data[-8:])[0] == fnv1a64(data[:-8])


def tier_files(root):
    subs = compile_cache.fingerprint_dirs(str(root))
    return [os.path.join(s, n) for s in subs for n in os.listdir(s)]


def tpc_files(root):
    return sorted(f for f in tier_files(root) if f.endswith(".tpc"))


@pytest.mark.parametrize("mode", ["strict", "fused", "compiled"])
def test_second_process_compiles_nothing(tmp_path, mode):
    env = env_for(tmp_path / "cache")
    first, _ = run_worker(env, "--mode", mode)
    assert first["compiles"] > 0
    assert first["disk"]["writes"] == first["compiles"]
    second, _ = run_worker(env, "--mode", mode)
    assert second["compiles"] == 0
    assert second["disk"]["host_hits"] == first["compiles"]
    assert second["disk"]["misses"] == 0
    assert second["losses"] == first["losses"]  # the same executables, bit for bit
    assert_correct(second)
    assert len(tpc_files(tmp_path / "cache")) == first["compiles"]


def test_second_process_of_the_compiled_gpt_step_compiles_nothing(tmp_path):
    env = env_for(tmp_path / "cache")
    first, _ = run_worker(env, "--mode", "compiled", "--model", "gpt", "--steps", "3")
    assert first["compiles"] > 0
    second, _ = run_worker(env, "--mode", "compiled", "--model", "gpt", "--steps", "3")
    assert second["compiles"] == 0 and second["disk"]["host_hits"] == first["compiles"]
    assert second["losses"] == first["losses"]
    assert_correct(second)


def test_other_compiler_flags_compile_again(tmp_path):
    # XLA reads XLA_FLAGS as it compiles: a program built under other flags may compute differently (fast math), so
    # the flags are part of every key, as in JAX's cache key.
    env = env_for(tmp_path / "cache")
    env.pop("XLA_FLAGS", None)
    first, _ = run_worker(env)
    assert first["compiles"] > 0
    env["XLA_FLAGS"] = "--xla_cpu_enable_fast_math=false"
    flagged, _ = run_worker(env)
    assert flagged["compiles"] == first["compiles"] and flagged["disk"]["host_hits"] == 0
    again, _ = run_worker(env)
    assert again["compiles"] == 0 and again["disk"]["host_hits"] == first["compiles"]
    assert_correct(again)


def test_four_processes_share_one_empty_directory(tmp_path):
    solo, _ = run_worker(env_for(tmp_path / "solo"))
    env = env_for(tmp_path / "cache")
    procs = [
        subprocess.Popen([sys.executable, WORKER], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        assert_correct(r)
        assert r["disk"]["corrupt_dropped"] == 0
    # Each program was compiled by one of the four (the others waited on its lock, then loaded it).
    assert sum(r["compiles"] for r in results) == solo["compiles"]
    files = tier_files(tmp_path / "cache")
    assert not [f for f in files if ".tmp." in f or f.endswith(".lock")], files
    assert len(tpc_files(tmp_path / "cache")) == solo["compiles"]
    assert all(intact(f) for f in tpc_files(tmp_path / "cache"))


def refingerprint(path, old: bytes, new: bytes):
    """Rewrites an entry as another plugin version would have written it: a valid file with another fingerprint."""
    data = open(path, "rb").read()[:-8]
    (fp_len,) = struct.unpack_from("<I", data, 12)
    fp = data[16 : 16 + fp_len]
    assert old in fp
    fp = fp.replace(old, new)
    body = data[:12] + struct.pack("<I", len(fp)) + fp + data[16 + fp_len :]
    open(path, "wb").write(body + struct.pack("<Q", fnv1a64(body)))


def test_damaged_and_foreign_entries_are_recompiled_and_reported_once(tmp_path):
    env = env_for(tmp_path / "cache")
    first, _ = run_worker(env)
    files = tpc_files(tmp_path / "cache")
    assert len(files) >= 3
    truncated, flipped, foreign = files[:3]
    data = open(truncated, "rb").read()
    open(truncated, "wb").write(data[: len(data) // 2])
    data = bytearray(open(flipped, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(flipped, "wb").write(bytes(data))
    refingerprint(foreign, b"platform_version=", b"platform_version=older-")

    second, err = run_worker(env)
    assert second["compiles"] == 3  # exactly the three, none of them loaded
    assert second["disk"]["corrupt_dropped"] == 3
    assert err.count(DROPPED) == 1, err
    assert second["losses"] == first["losses"]
    assert all(intact(f) for f in (truncated, flipped, foreign))  # written again, whole

    third, err = run_worker(env)
    assert third["compiles"] == 0 and third["disk"]["corrupt_dropped"] == 0
    assert DROPPED not in err


def test_size_cap_evicts_least_recently_used(tmp_path):
    first, _ = run_worker(env_for(tmp_path / "full"))
    total = sum(os.path.getsize(f) for f in tpc_files(tmp_path / "full"))
    cap = total // 2
    r, _ = run_worker(env_for(tmp_path / "capped", TORCH_PJRT_CACHE_MAX_BYTES=cap))
    assert_correct(r)
    kept = tpc_files(tmp_path / "capped")
    assert r["disk"]["evicted"] > 0
    assert 0 < len(kept) < first["compiles"]
    assert sum(os.path.getsize(f) for f in kept) <= cap

    # `cache prune` evicts by access time too: the entries used last survive.
    files = tpc_files(tmp_path / "full")
    for i, f in enumerate(files):
        os.utime(f, (1_000_000 + i, 1_000_000))
    removed, _ = compile_cache.prune(str(tmp_path / "full"), max_bytes=os.path.getsize(files[-1]))
    assert removed == len(files) - 1
    assert tpc_files(tmp_path / "full") == files[-1:]


def test_unwritable_cache_directory_trains_and_says_so_once(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    r, err = run_worker(env_for(blocker / "cache"))
    assert_correct(r)
    assert r["compiles"] > 0 and not r["disk"]["enabled"]
    assert err.count("cannot be created") == 1, err

    if os.geteuid() != 0:  # root writes through permission bits
        ro = tmp_path / "read_only"
        ro.mkdir()
        ro.chmod(0o555)
        r, err = run_worker(env_for(ro))
        assert_correct(r)
        assert err.count("torch_pjrt: compile cache:") == 1, err


def test_full_disk_trains_and_says_so_once(tmp_path):
    # A file size limit makes every write of a cache entry fail as a full disk would (Python ignores SIGXFSZ, so the
    # write returns EFBIG).
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    r, err = run_worker(env_for(tmp_path / "cache"), preexec_fn=limit)
    assert_correct(r)
    assert r["compiles"] > 0
    assert r["disk"]["writes"] == 0 and r["disk"]["write_failures"] == 1  # the tier is not tried again
    assert err.count("cannot write to") == 1, err
    assert not [f for f in tier_files(tmp_path / "cache") if ".tmp." in f]


def test_warm_bundle_serves_a_fresh_host(tmp_path):
    bundle = tmp_path / "bundle"
    p = subprocess.run(
        [sys.executable, "-m", "torch_pjrt", "cache", "warm", "--out", str(bundle), WORKER],
        env=env_for(tmp_path / "warming_host"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "holds" in p.stdout
    r, _ = run_worker(env_for(tmp_path / "fresh_host", shared=bundle))
    assert r["compiles"] == 0
    assert r["disk"]["shared_hits"] > 0 and r["disk"]["host_hits"] == 0
    assert_correct(r)
    # Shared hits were copied to the host tier: the next run reads only the host tier.
    r, _ = run_worker(env_for(tmp_path / "fresh_host", shared=bundle))
    assert r["compiles"] == 0 and r["disk"]["shared_hits"] == 0 and r["disk"]["host_hits"] > 0


def test_writes_reach_the_shared_tier(tmp_path):
    first, _ = run_worker(env_for(tmp_path / "host_a", shared=tmp_path / "shared"))
    assert len(tpc_files(tmp_path / "shared")) == first["compiles"]
    r, _ = run_worker(env_for(tmp_path / "host_b", shared=tmp_path / "shared"))
    assert r["compiles"] == 0 and r["disk"]["shared_hits"] == first["compiles"]


def cli(env, *args):
    p = subprocess.run(
        [sys.executable, "-m", "torch_pjrt", "cache", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_cache_command_line(tmp_path):
    env = env_for(tmp_path / "cache")
    first, _ = run_worker(env)
    n = first["compiles"]
    info = cli(env, "info")
    assert f"{n} entries" in info and "last 1 runs" in info
    listing = cli(env, "ls")
    assert "aten::addmm" in listing or "aten::mm" in listing
    assert len([line for line in listing.splitlines() if line.startswith("  ")]) == n
    cli(env, "export", str(tmp_path / "exported"))
    assert len(tpc_files(tmp_path / "exported")) == n
    assert "removed" in cli(env, "prune", "--older-than", "0")
    assert tpc_files(tmp_path / "cache") == []
    cli(env, "import", str(tmp_path / "exported"))
    assert len(tpc_files(tmp_path / "cache")) == n
    r, _ = run_worker(env)
    assert r["compiles"] == 0
    cli(env, "clear")
    assert tier_files(tmp_path / "cache") == []
    assert os.listdir(tmp_path / "cache") == []


def test_a_hung_shared_tier_loses_the_race_to_compiling(tmp_path):
    # Each shared entry is a FIFO that no one writes: opening it blocks forever, as a read from a hung mount does.
    first, _ = run_worker(env_for(tmp_path / "host_a", shared=tmp_path / "shared"))
    for f in tpc_files(tmp_path / "shared"):
        os.unlink(f)
        os.mkfifo(f)
    r, _ = run_worker(env_for(tmp_path / "host_b", shared=tmp_path / "shared"))
    assert_correct(r)
    assert r["compiles"] == first["compiles"]
    assert r["disk"]["misses"] == first["compiles"] and r["disk"]["shared_hits"] == 0
