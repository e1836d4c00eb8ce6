"""Runs a scenario of distributed_worker.py in N real processes on loopback and collects what each rank reported.

Each rank is a fresh Python process with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...),
Gloo bound to ``lo``, and a compile cache shared by the ranks and the scenarios of one pytest process. A rank that
outlives ``timeout`` is killed with its process group, and so are the others.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_worker.py")
_CACHE = tempfile.mkdtemp(prefix="torch-pjrt-dist-cache-")


@dataclass
class Rank:
    rc: int | None
    out: str
    err: str
    results: dict = field(default_factory=dict)  # check name -> "ok" or what went wrong

    def failures(self) -> dict:
        return {k: v for k, v in self.results.items() if v != "ok"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parse(out: str) -> dict:
    results = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            name, verdict = json.loads(line[len("RESULT ") :])
            results[name] = verdict
    return results


def run_ranks(scenario: str, world_size: int = 2, timeout: float = 240, env: dict | None = None) -> list[Rank]:
    port = free_port()
    procs = []
    for rank in range(world_size):
        e = dict(os.environ)
        e.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world_size),
            LOCAL_WORLD_SIZE=str(world_size),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            GLOO_SOCKET_IFNAME="lo",
            TORCH_PJRT_CACHE_DIR=_CACHE,
            OMP_NUM_THREADS="1",
        )
        e.update(env or {})
        procs.append(
            subprocess.Popen(
                [sys.executable, WORKER, scenario],
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    deadline = time.monotonic() + timeout
    ranks = []
    try:
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(procs)
                out, err = p.communicate()
                err += f"\n[killed after {timeout} s]"
            ranks.append(Rank(p.returncode, out, err, _parse(out)))
    finally:
        _kill(procs)
    return ranks


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def explain(ranks: list[Rank]) -> str:
    return "\n".join(f"--- rank {i} rc={r.rc}\n{r.out[-3000:]}\n{r.err[-3000:]}" for i, r in enumerate(ranks))
