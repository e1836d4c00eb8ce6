"""The persistent compile cache on disk, and ``python -m torch_pjrt cache ...``.

The engine (``csrc/engine/disk_cache.h``) reads and writes the tiers; this module only looks at them from outside:
where they are, what they hold, pruning, clearing, warming and copying them. It knows the engine's layout, and reads
an entry's header through the engine's own reader (``read_entry_info``, bound as ``_C._read_cache_entry``):

- a tier root (``TORCH_PJRT_CACHE_DIR``, default ``$XDG_CACHE_HOME/torch_pjrt`` or ``~/.cache/torch_pjrt``; the shared
  tier ``TORCH_PJRT_SHARED_CACHE_DIR``) holds one subdirectory per plugin fingerprint, ``<platform>-<16 hex digits>``,
  with a ``FINGERPRINT`` file;
- each compiled program is one ``<key hash>.tpc`` file (format in ``disk_cache.h``);
- ``stats.jsonl`` in the root has one line per process that used the tier: its hits, misses and compile seconds.

Trust follows the engine's rules, through its own checks (``_C._cache_dir_problem``, ``_C._cache_entry_trust``): the
host tier is private (a root that is a link, another user's, or writable by group or others is refused), an entry is
trusted by its owner and mode, and with ``TORCH_PJRT_CACHE_KEY`` (or ``TORCH_PJRT_CACHE_KEY_FILE``) a shared entry by
its HMAC-SHA256 signature. Files are opened without following symbolic links, and written by a new temporary file
renamed within its directory.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import stat
import subprocess
import sys
import time

from . import _C

_SUBDIR = re.compile(r"^[A-Za-z0-9_.]+-[0-9a-f]{16}$")
_OFF = {"", "0", "off", "OFF", "false", "False"}


def host_root() -> str | None:
    """The host tier's root directory, or None when ``TORCH_PJRT_CACHE_DIR`` turns it off."""
    v = os.environ.get("TORCH_PJRT_CACHE_DIR")
    if v is not None:
        return None if v in _OFF else v
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_pjrt")


def shared_root() -> str | None:
    v = os.environ.get("TORCH_PJRT_SHARED_CACHE_DIR")
    return None if v is None or v in _OFF else v


def fingerprint_dirs(root: str) -> list[str]:
    """The fingerprint subdirectories of a tier root."""
    if not root or not os.path.isdir(root):
        return []
    return sorted(os.path.join(root, d) for d in os.listdir(root) if _SUBDIR.match(d))


def read_header(path: str) -> dict | None:
    """Summary, key words and sizes of one entry, or None if its structure does not hold.

    The checksum is the engine's to verify (it drops a damaged entry on load); this checks the magic, the version and
    that the lengths add up to the file's size.
    """
    return _C._read_cache_entry(os.fspath(path))


def entries(subdir: str) -> list[dict]:
    """The entry files of a fingerprint subdirectory (regular files only: a link is not an entry)."""
    out = []
    for name in sorted(os.listdir(subdir)):
        if not name.endswith(".tpc"):
            continue
        path = os.path.join(subdir, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        out.append(
            {
                "path": path,
                "hash": name[:-4],
                "bytes": st.st_size,
                "mtime": st.st_mtime,
                "atime": st.st_atime,
                "uid": st.st_uid,
                "mode": st.st_mode,
            }
        )
    return out


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def tier_trust(label: str, root: str) -> str:
    """How the engine treats tier ``root`` (``label`` "host" or "shared"): "trusted", "signed ...", "trusted as its
    file owners are ..." or "refused: why", by the engine's own checks."""
    if not os.path.lexists(root):
        return "not made yet (made private, 0700, on first use)" if label == "host" else "not made yet"
    problem = _C._cache_dir_problem(root, label != "shared")
    if problem:
        return f"refused: {problem}"
    if label != "shared":
        return "trusted (private: yours, not writable by group or others)"
    key = _C._cache_key()
    if key["problem"]:
        return f"refused: {key['problem']}"
    if key["set"]:
        return f"signed: only entries whose HMAC verifies with {key['source']} are loaded"
    return (
        "trusted as its file owners are (no TORCH_PJRT_CACHE_KEY): only your own entries are loaded; "
        "set a key to share entries between users"
    )


def tier_line(label: str, root: str) -> str:
    """``label tier: root  owner ..., mode ...: trust`` (``cache info`` and ``doctor``)."""
    try:
        st = os.lstat(root)
        who = f"owner {_owner(st.st_uid)}, mode {stat.S_IMODE(st.st_mode):04o}"
    except OSError:
        who = "absent"
    return f"{label} tier: {root}  {who}: {tier_trust(label, root)}"


def record_run(metrics: dict) -> None:
    """Appends this process's cache counters to the host root's ``stats.jsonl`` (one short O_APPEND write)."""
    root = host_root()
    disk = metrics.get("persistent_cache", {})
    if not root or not disk.get("enabled") or _C._cache_dir_problem(root, True):
        return
    line = {
        "time": time.time(),
        "pid": os.getpid(),
        "compiles": metrics["compiles"],
        "compile_seconds": round(metrics["compile_seconds"], 4),
    }
    counters = ("host_hits", "shared_hits", "misses", "load_seconds", "bytes_read", "bytes_written", "corrupt_dropped")
    for k in (*counters, "refused_untrusted", "bad_signature"):
        line[k] = disk[k]
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        fd = os.open(os.path.join(root, "stats.jsonl"), flags, 0o600)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _parse_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (say 500M or 2G)")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()])


def _parse_age(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.]+)\s*([smhd]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not an age: {text!r} (say 3600, 12h or 7d)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _tiers(args) -> list[tuple[str, str]]:
    """(label, root) of the tiers a command acts on: ``--dir``, else the host and shared tiers."""
    if getattr(args, "dir", None):
        return [("dir", args.dir)]
    return [(label, root) for label, root in (("host", host_root()), ("shared", shared_root())) if root]


def cmd_info(args) -> int:
    me = os.geteuid()
    for label, root in _tiers(args):
        print(tier_line(label, root))
        subs = fingerprint_dirs(root)
        if not subs:
            print("  (empty)")
        for sub in subs:
            es = entries(sub)
            foreign = sum(1 for e in es if e["uid"] != me or e["mode"] & 0o022)
            fp = ""
            try:
                with open(os.path.join(sub, "FINGERPRINT")) as f:
                    fp = " ".join(line.split("=", 1)[-1].split(" ")[0] for line in f.read().split("\n")[1:4] if line)
            except OSError:
                pass
            print(f"  {os.path.basename(sub)}: {len(es)} entries, {_human(sum(e['bytes'] for e in es))}  ({fp})")
            if foreign:
                print(
                    f"    {foreign} of them another user's or writable by others (loaded only if signed, shared tier)"
                )
        runs = []
        try:
            with open(os.path.join(root, "stats.jsonl")) as f:
                runs = [json.loads(line) for line in f.read().splitlines()[-args.runs :] if line.strip()]
        except (OSError, ValueError):
            pass
        if runs:
            hits = sum(r["host_hits"] + r["shared_hits"] for r in runs)
            misses = sum(r["misses"] for r in runs)
            total = hits + misses
            rate = f"{100.0 * hits / total:.1f}%" if total else "-"
            print(
                f"  last {len(runs)} runs: {hits} hits, {misses} misses (hit rate {rate}), "
                f"{sum(r['compile_seconds'] for r in runs):.2f} s compiling, "
                f"{sum(r['load_seconds'] for r in runs):.2f} s loading"
            )
            for r in runs[-5:]:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["time"]))
                print(
                    f"    {when} pid {r['pid']}: {r['compiles']} compiles ({r['compile_seconds']:.2f} s), "
                    f"{r['host_hits']} host + {r['shared_hits']} shared hits, {r['misses']} misses"
                )
    return 0


def cmd_ls(args) -> int:
    now = time.time()
    for _, root in _tiers(args):
        for sub in fingerprint_dirs(root):
            print(sub)
            for e in sorted(entries(sub), key=lambda e: -e["atime"]):
                h = read_header(e["path"])
                summary = h["summary"] if h else "(damaged)"
                age = (now - e["mtime"]) / 3600
                used = (now - e["atime"]) / 3600
                print(
                    f"  {e['hash']}  {_human(e['bytes']):>10}  made {age:7.1f} h ago  used {used:7.1f} h ago  {summary}"
                )
    return 0


def prune(root: str, max_bytes: int | None = None, older_than: float | None = None) -> tuple[int, int]:
    """Evicts entries unused for ``older_than`` seconds, then the least recently used until the tier holds at most
    ``max_bytes``. Returns (entries removed, bytes freed)."""
    removed = freed = 0
    now = time.time()
    for sub in fingerprint_dirs(root):
        es = sorted(entries(sub), key=lambda e: e["atime"])
        total = sum(e["bytes"] for e in es)
        for e in es:
            stale = older_than is not None and now - e["atime"] > older_than
            over = max_bytes is not None and total > max_bytes
            if not (stale or over):
                continue
            try:
                os.unlink(e["path"])
            except OSError:
                continue
            removed += 1
            freed += e["bytes"]
            total -= e["bytes"]
    return removed, freed


def cmd_prune(args) -> int:
    if args.max_bytes is None and args.older_than is None:
        print("prune: give --max-bytes and/or --older-than", file=sys.stderr)
        return 2
    for _, root in _tiers(args):
        removed, freed = prune(root, args.max_bytes, args.older_than)
        print(f"{root}: removed {removed} entries, {_human(freed)}")
    return 0


def clear(root: str) -> int:
    """Removes every entry, lock, temporary file and fingerprint directory of a tier (nothing else in ``root``)."""
    removed = 0
    for sub in fingerprint_dirs(root):
        for name in os.listdir(sub):
            if name.endswith((".tpc", ".lock")) or ".tmp." in name or name == "FINGERPRINT":
                try:
                    os.unlink(os.path.join(sub, name))
                    removed += name.endswith(".tpc")
                except OSError:
                    pass
        try:
            os.rmdir(sub)
        except OSError:
            pass
    try:
        os.unlink(os.path.join(root, "stats.jsonl"))
    except OSError:
        pass
    return removed


def cmd_clear(args) -> int:
    for _, root in _tiers(args):
        print(f"{root}: removed {clear(root)} entries")
    return 0


def _read_nofollow(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def write_atomically(directory: str, name: str, data: bytes, mode: int) -> None:
    """Writes ``directory/name`` as the engine does: a new temporary file there (``O_EXCL | O_NOFOLLOW``: never a
    planted link), fsynced, then renamed within the directory."""
    tmp = os.path.join(directory, f".{name}.tmp.{os.getpid()}.{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, os.path.join(directory, name))


def entry_refusal(path: str) -> str | None:
    """Why the engine would not load the entry at ``path`` from a shared tier under this environment's key (or, with
    none, as this user), or None: with a key its signature must verify; without one it must be this user's own."""
    trust = _C._cache_entry_trust(path)
    if trust["signature"] != "no key":
        return None if trust["signature"] == "valid" else f"signature {trust['signature']}"
    return trust["owner_problem"] or None


def copy_tier(src: str, dst: str, private: bool = False, verify: bool = False) -> tuple[int, int]:
    """Copies the well-formed entries of tier root ``src`` into tier root ``dst`` (each by a temporary file and a
    rename, as the engine writes); ``private``: as the host tier (directories 0700, files 0600). ``verify``: only
    entries the engine would load from a shared tier (see ``entry_refusal``). Returns (copied, refused). Entries
    already in ``dst`` are kept."""
    copied = refused = 0
    dir_mode, file_mode = (0o700, 0o600) if private else (0o755, 0o644)
    for sub in fingerprint_dirs(src):
        target = os.path.join(dst, os.path.basename(sub))
        os.makedirs(target, mode=dir_mode, exist_ok=True)
        fp = os.path.join(sub, "FINGERPRINT")
        if not os.path.lexists(os.path.join(target, "FINGERPRINT")):
            try:
                write_atomically(target, "FINGERPRINT", _read_nofollow(fp), file_mode)
            except OSError:
                pass  # missing, or a link: the engine writes its own
        for e in entries(sub):
            out = os.path.join(target, os.path.basename(e["path"]))
            if os.path.lexists(out) or read_header(e["path"]) is None:
                continue
            if verify and (why := entry_refusal(e["path"])):
                refused += 1
                if refused == 1:
                    print(f"refused {e['path']}: {why} (further refusals are counted)", file=sys.stderr)
                continue
            write_atomically(target, os.path.basename(e["path"]), _read_nofollow(e["path"]), file_mode)
            copied += 1
    return copied, refused


def _copy_with_host(args, exporting: bool) -> int:
    root = host_root()
    verb = "export" if exporting else "import"
    if not root:
        print(f"{verb}: the host tier is off (TORCH_PJRT_CACHE_DIR)", file=sys.stderr)
        return 1
    src, dst = (root, args.dir) if exporting else (args.dir, root)
    if not exporting:
        os.makedirs(root, mode=0o700, exist_ok=True)
        if problem := _C._cache_dir_problem(root, True):
            print(f"import: the host tier {root} is refused: {problem}", file=sys.stderr)
            return 1
    copied, refused = copy_tier(src, dst, private=not exporting, verify=not exporting)
    print(f"{verb}ed {copied} entries from {src} to {dst}")
    if refused:
        key = _C._cache_key()
        rule = (
            f"whose HMAC verifies with {key['source']}" if key["set"] else "of your own (or set TORCH_PJRT_CACHE_KEY)"
        )
        print(f"{verb}: refused {refused} entries: only entries {rule} are imported", file=sys.stderr)
        return 1
    return 0


def cmd_export(args) -> int:
    return _copy_with_host(args, exporting=True)


def cmd_import(args) -> int:
    return _copy_with_host(args, exporting=False)


def cmd_warm(args) -> int:
    """Runs a script with ``--out`` as its host tier (and the usual host tier as its shared one, so what this host
    has already compiled is copied rather than compiled again): ``--out`` then holds every program the script
    compiled, for another host to copy, import or mount as its shared tier. With ``TORCH_PJRT_CACHE_KEY`` set the
    script's engine signs every entry it writes, so the bundle is signed; entries of the usual host tier that were
    written without that key are then not trusted as a shared tier, and are compiled again."""
    out = os.path.abspath(args.out)
    os.makedirs(out, mode=0o700, exist_ok=True)  # the script's host tier: private, or the engine refuses it
    env = dict(os.environ, TORCH_PJRT_CACHE_DIR=out)
    host = host_root()
    if host and os.path.abspath(host) != out:
        env["TORCH_PJRT_SHARED_CACHE_DIR"] = host
    else:
        env.pop("TORCH_PJRT_SHARED_CACHE_DIR", None)
    rc = subprocess.call([sys.executable, args.script, *args.script_args], env=env)
    if rc != 0:
        print(f"warm: {args.script} exited with {rc}", file=sys.stderr)
        return rc
    n = sum(len(entries(sub)) for sub in fingerprint_dirs(out))
    key = _C._cache_key()
    signed = f", signed with {key['source']}" if key["set"] else " (unsigned: set TORCH_PJRT_CACHE_KEY to share it)"
    print(f"warm: {out} holds {n} programs{signed}; use it as TORCH_PJRT_SHARED_CACHE_DIR or `cache import` it")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="inspect and manage the persistent compile cache")
    c = p.add_subparsers(dest="cache_command", required=True)
    info = c.add_parser("info", help="location, owner, mode and trust, entries, bytes, and hit rates of the last runs")
    info.add_argument("--dir", help="a tier root (default: the host and shared tiers)")
    info.add_argument("--runs", type=int, default=20, help="how many recent runs to summarise")
    ls = c.add_parser("ls", help="list entries with size, age and op summary")
    ls.add_argument("--dir")
    pr = c.add_parser("prune", help="evict to a size and/or an age")
    pr.add_argument("--dir")
    pr.add_argument("--max-bytes", type=_parse_bytes)
    pr.add_argument("--older-than", type=_parse_age, help="unused for this long (3600, 12h, 7d)")
    cl = c.add_parser("clear", help="remove every entry")
    cl.add_argument("--dir")
    w = c.add_parser("warm", help="run a script and keep every program it compiles in --out")
    w.add_argument("--out", default="torch_pjrt_warm")
    w.add_argument("script")
    w.add_argument("script_args", nargs=argparse.REMAINDER)
    ex = c.add_parser("export", help="copy the host tier into DIR")
    ex.add_argument("dir")
    im = c.add_parser(
        "import", help="copy the entries of DIR into the host tier: signed ones that verify with a key, else yours"
    )
    im.add_argument("dir")


COMMANDS = {
    "info": cmd_info,
    "ls": cmd_ls,
    "prune": cmd_prune,
    "clear": cmd_clear,
    "warm": cmd_warm,
    "export": cmd_export,
    "import": cmd_import,
}


def run(args) -> int:
    return COMMANDS[args.cache_command](args)
