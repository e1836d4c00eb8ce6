"""Runs a benchmark script in N local ranks on loopback (as torchrun would) and returns their exit codes.

A benchmark calls ``launch_or_run(main)``: under torchrun (RANK set) it runs ``main()``; otherwise it starts
``--ranks`` copies of itself with torchrun's environment and waits for them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def launch_or_run(main, ranks: int = 2) -> None:
    if "RANK" in os.environ:
        main()
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(ranks))
        env.update(LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        procs.append(subprocess.Popen([sys.executable, *sys.argv], env=env))
    try:
        codes = [p.wait() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(codes):
        sys.exit(f"a rank failed: exit codes {codes}")
