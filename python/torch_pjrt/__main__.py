"""``python -m torch_pjrt doctor``: report the platform and run a smoke test.

``python -m torch_pjrt cache info|ls|prune|clear|warm|export|import``: the persistent compile cache
(``torch_pjrt/compile_cache.py``).
"""

from __future__ import annotations

import argparse
import sys

from . import compile_cache


def doctor() -> int:
    import torch

    import torch_pjrt

    info = torch_pjrt.platform()
    print(f"torch_pjrt doctor (torch {torch.__version__})")
    print(f"  platform : {info['platform']}")
    print(f"  reason   : {info['reason']}")
    print(f"  plugin   : {info['plugin_path'] or '-'}")
    if not info["available"]:
        print(f"  status   : UNAVAILABLE: {info.get('error')}")
        return 1
    print(f"  PJRT API : {info['api_version']}")
    print(f"  runtime  : {info['platform_name']} {info['platform_version']}")
    for i, d in enumerate(info["devices"]):
        print(f"  tpu:{i}    : {d}")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = (x.to("tpu") * 2 + 1).sum(dim=1).cpu()
    ok = torch.equal(y, (x * 2 + 1).sum(dim=1))
    print(f"  smoke    : {'ok' if ok else 'MISMATCH'} ({y.tolist()})")
    tiers = (("host", compile_cache.host_root()), ("shared", compile_cache.shared_root()))
    for label, root in tiers:
        print(f"  cache    : {compile_cache.tier_line(label, root) if root else f'{label} tier: off'}")
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_pjrt")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="report the PJRT platform and run a smoke test")
    compile_cache.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor()
    if args.command == "cache":
        return compile_cache.run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
