"""The persistent compile cache on disk, and ``python -m torch_pjrt cache ...``.

The engine (``csrc/engine/disk_cache.h``) reads and writes the tiers; this module only looks at them from outside:
where they are, what they hold, pruning, clearing, warming and copying them. It knows the engine's layout, and reads
an entry's header through the engine's own reader (``read_entry_info``, bound as ``_C._read_cache_entry``):

- a tier root (``TORCH_PJRT_CACHE_DIR``, default ``$XDG_CACHE_HOME/torch_pjrt`` or ``~/.cache/torch_pjrt``; the shared
  tier ``TORCH_PJRT_SHARED_CACHE_DIR``) holds one subdirectory per plugin fingerprint, ``<platform>-<16 hex digits>``,
  with a ``FINGERPRINT`` file;
- each compiled program is one ``<key hash>.tpc`` file (format in ``disk_cache.h``);
- ``stats.jsonl`` in the root has one line per process that used the tier: its hits, misses and compile seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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
    out = []
    for name in sorted(os.listdir(subdir)):
        if not name.endswith(".tpc"):
            continue
        path = os.path.join(subdir, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        out.append({"path": path, "hash": name[:-4], "bytes": st.st_size, "mtime": st.st_mtime, "atime": st.st_atime})
    return out


def record_run(metrics: dict) -> None:
    """Appends this process's cache counters to the host root's ``stats.jsonl`` (one short O_APPEND write)."""
    root = host_root()
    disk = metrics.get("persistent_cache", {})
    if not root or not disk.get("enabled") or not os.path.isdir(root):
        return
    line = {
        "time": time.time(),
        "pid": os.getpid(),
        "compiles": metrics["compiles"],
        "compile_seconds": round(metrics["compile_seconds"], 4),
    }
    for k in ("host_hits", "shared_hits", "misses", "load_seconds", "bytes_read", "bytes_written", "corrupt_dropped"):
        line[k] = disk[k]
    try:
        fd = os.open(os.path.join(root, "stats.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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
    for label, root in _tiers(args):
        print(f"{label} tier: {root}")
        subs = fingerprint_dirs(root)
        if not subs:
            print("  (empty)")
        for sub in subs:
            es = entries(sub)
            fp = ""
            try:
                with open(os.path.join(sub, "FINGERPRINT")) as f:
                    fp = " ".join(line.split("=", 1)[-1].split(" ")[0] for line in f.read().split("\n")[1:4] if line)
            except OSError:
                pass
            print(f"  {os.path.basename(sub)}: {len(es)} entries, {_human(sum(e['bytes'] for e in es))}  ({fp})")
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


def copy_tier(src: str, dst: str) -> int:
    """Copies the well-formed entries of tier root ``src`` into tier root ``dst`` (each by a temporary file and a
    rename, as the engine writes); returns how many were copied. Entries already in ``dst`` are kept."""
    copied = 0
    for sub in fingerprint_dirs(src):
        target = os.path.join(dst, os.path.basename(sub))
        os.makedirs(target, exist_ok=True)
        fp = os.path.join(sub, "FINGERPRINT")
        if os.path.exists(fp) and not os.path.exists(os.path.join(target, "FINGERPRINT")):
            shutil.copyfile(fp, os.path.join(target, "FINGERPRINT"))
        for e in entries(sub):
            out = os.path.join(target, os.path.basename(e["path"]))
            if os.path.exists(out) or read_header(e["path"]) is None:
                continue
            tmp = os.path.join(target, f".{e['hash']}.tmp.{os.getpid()}.copy")
            shutil.copyfile(e["path"], tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, out)
            copied += 1
    return copied


def _copy_with_host(args, exporting: bool) -> int:
    root = host_root()
    verb = "export" if exporting else "import"
    if not root:
        print(f"{verb}: the host tier is off (TORCH_PJRT_CACHE_DIR)", file=sys.stderr)
        return 1
    src, dst = (root, args.dir) if exporting else (args.dir, root)
    print(f"{verb}ed {copy_tier(src, dst)} entries from {src} to {dst}")
    return 0


def cmd_export(args) -> int:
    return _copy_with_host(args, exporting=True)


def cmd_import(args) -> int:
    return _copy_with_host(args, exporting=False)


def cmd_warm(args) -> int:
    """Runs a script with ``--out`` as its host tier (and the usual host tier as its shared one, so what this host
    has already compiled is copied rather than compiled again): ``--out`` then holds every program the script
    compiled, for another host to copy, import or mount as its shared tier."""
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
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
    print(f"warm: {out} holds {n} programs; use it as TORCH_PJRT_SHARED_CACHE_DIR or `cache import` it")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="inspect and manage the persistent compile cache")
    c = p.add_subparsers(dest="cache_command", required=True)
    info = c.add_parser("info", help="location, entries, bytes, and hit rates of the last runs")
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
    im = c.add_parser("import", help="copy the entries of DIR into the host tier")
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
