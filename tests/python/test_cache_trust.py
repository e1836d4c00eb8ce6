"""Who the persistent compile cache trusts (issue 45), across processes: a host tier writable by others is refused,
entries of another owner, writable by others or replaced by a symbolic link are not loaded, and with
``TORCH_PJRT_CACHE_KEY`` the shared tier loads only entries whose HMAC-SHA256 verifies; the CLI shows and applies the
same rules.

As in test_compile_cache.py, each test runs cache_worker.py in fresh processes with cache directories of its own.
Another owner is simulated with ``os.chown`` to an unused uid (as root, as CI runs; elsewhere that part is skipped).
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
import sys

from test_compile_cache import WORKER, assert_correct, env_for, fnv1a64, run_worker, tpc_files

from torch_pjrt import compile_cache
from torch_pjrt.__main__ import doctor

OTHER_UID = 54321
AS_ROOT = os.geteuid() == 0
KEY = {"TORCH_PJRT_CACHE_KEY": "team secret"}
TRAILER = 40  # HMAC-SHA256 and the "TPJRTSG1" magic (csrc/engine/entry_signing.h)
NOT_LOADED = "did not load"


def cli(env, *args, rc=0):
    p = subprocess.run(
        [sys.executable, "-m", "torch_pjrt", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == rc, p.stdout + p.stderr
    return p.stdout + p.stderr


def test_host_tier_writable_by_others_is_refused_once_and_training_compiles(tmp_path):
    host = tmp_path / "cache"
    host.mkdir()
    host.chmod(0o777)
    env = env_for(host)
    r, err = run_worker(env)
    assert_correct(r)
    assert r["compiles"] > 0 and not r["disk"]["enabled"]
    assert r["disk"]["refused_untrusted"] == 1 and r["disk"]["host_hits"] == 0
    assert err.count("refused the host compile cache directory") == 1, err
    assert str(host) in err and "writable by group or others" in err
    assert os.listdir(host) == []  # nothing was made or written in it
    # `cache info`'s line for it (in this process: the same code, without another start of torch).
    assert "mode 0777: refused: it is writable by group or others" in compile_cache.tier_line("host", str(host))


def test_entries_of_another_owner_writable_by_others_or_linked_are_not_loaded(tmp_path):
    env = env_for(tmp_path / "cache")
    first, _ = run_worker(env)
    files = tpc_files(tmp_path / "cache")
    assert all(stat.S_IMODE(os.lstat(f).st_mode) == 0o600 for f in files)
    assert stat.S_IMODE(os.lstat(tmp_path / "cache").st_mode) == 0o700
    writable, linked, foreign = files[:3]
    os.chmod(writable, 0o606)
    # A link to an intact copy of the entry itself: loaded if it were followed.
    elsewhere = tmp_path / "elsewhere.tpc"
    shutil.copyfile(linked, elsewhere)
    kept = elsewhere.read_bytes()
    os.unlink(linked)
    os.symlink(elsewhere, linked)
    refused = 2
    if AS_ROOT:
        os.chown(foreign, OTHER_UID, OTHER_UID)
        refused = 3

    second, err = run_worker(env)
    assert second["compiles"] == refused
    assert second["disk"]["refused_untrusted"] == refused
    assert second["disk"]["host_hits"] == first["compiles"] - refused
    assert second["disk"]["corrupt_dropped"] == 0
    assert err.count(NOT_LOADED) == 1, err
    assert second["losses"] == first["losses"]
    assert_correct(second)
    # The compiles' writes replaced them with this user's private files; the link's target was never written.
    for f in files[:refused]:
        st = os.lstat(f)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600
    assert elsewhere.read_bytes() == kept


def resign_changed(path):
    """Changes one byte of a signed entry's executable and recomputes its checksum, keeping the old HMAC."""
    data = open(path, "rb").read()
    body = bytearray(data[: -TRAILER - 8])
    body[-5] ^= 0x01
    assert struct.unpack("<Q", data[-TRAILER - 8 : -TRAILER])[0] == fnv1a64(data[: -TRAILER - 8])
    open(path, "wb").write(bytes(body) + struct.pack("<Q", fnv1a64(bytes(body))) + data[-TRAILER:])
    assert compile_cache.read_header(path) is not None


def test_signed_shared_tier_loads_only_entries_whose_hmac_verifies(tmp_path):
    shared = tmp_path / "shared"
    first, _ = run_worker(env_for(tmp_path / "host_a", shared=shared, **KEY))
    files = tpc_files(shared)
    assert len(files) == first["compiles"]
    assert all(compile_cache.read_header(f)["signed"] for f in files)
    second, _ = run_worker(env_for(tmp_path / "host_b", shared=shared, **KEY))
    assert second["compiles"] == 0 and second["disk"]["shared_hits"] == first["compiles"]
    assert second["disk"]["bad_signature"] == 0

    wrong, missing, changed = files[:3]
    data = bytearray(open(wrong, "rb").read())
    data[-TRAILER] ^= 0x80  # the HMAC's first byte
    open(wrong, "wb").write(bytes(data))
    open(missing, "wb").write(open(missing, "rb").read()[:-TRAILER])  # an intact unsigned entry
    resign_changed(changed)
    if AS_ROOT:  # with a key, the owner does not matter: a teammate's signed entry loads
        for f in files[3:]:
            os.chown(f, OTHER_UID, OTHER_UID)

    third, err = run_worker(env_for(tmp_path / "host_c", shared=shared, **KEY))
    assert third["compiles"] == 3
    assert third["disk"]["bad_signature"] == 3 and third["disk"]["corrupt_dropped"] == 0
    assert third["disk"]["shared_hits"] == first["compiles"] - 3
    assert err.count(NOT_LOADED) == 1, err
    assert third["losses"] == first["losses"]
    assert_correct(third)


def test_cli_signs_the_warm_bundle_verifies_imports_and_says_how_tiers_are_trusted(tmp_path, monkeypatch, capsys):
    bundle = tmp_path / "bundle"
    out = cli(env_for(tmp_path / "warming", **KEY), "cache", "warm", "--out", str(bundle), WORKER)
    assert "signed with TORCH_PJRT_CACHE_KEY" in out
    n = len(tpc_files(bundle))
    assert n > 0 and all(compile_cache.read_header(f)["signed"] for f in tpc_files(bundle))

    out = cli(env_for(tmp_path / "host", TORCH_PJRT_CACHE_KEY="another key"), "cache", "import", str(bundle), rc=1)
    assert f"refused {n} entries" in out and "imported 0 entries" in out
    assert tpc_files(tmp_path / "host") == []

    key_file = tmp_path / "key"
    key_file.write_text("team secret\n")
    keyed = env_for(tmp_path / "host", shared=bundle, TORCH_PJRT_CACHE_KEY_FILE=key_file)
    info = cli(keyed, "cache", "info")
    assert f"host tier: {tmp_path / 'host'}  owner {compile_cache._owner(os.geteuid())}, mode 0700: trusted" in info
    assert "signed: only entries whose HMAC verifies with TORCH_PJRT_CACHE_KEY_FILE" in info
    assert f"imported {n} entries" in cli(keyed, "cache", "import", str(bundle))
    assert len(tpc_files(tmp_path / "host")) == n

    # Without a key, the shared tier is trusted as its file owners are, and doctor says so (run in this process, whose
    # engine has the disk tiers off; doctor reads the variables).
    monkeypatch.setenv("TORCH_PJRT_SHARED_CACHE_DIR", str(bundle))
    monkeypatch.delenv("TORCH_PJRT_CACHE_KEY", raising=False)
    monkeypatch.delenv("TORCH_PJRT_CACHE_KEY_FILE", raising=False)
    assert doctor() == 0
    out = capsys.readouterr().out
    assert f"shared tier: {bundle}" in out and "trusted as its file owners are" in out, out
