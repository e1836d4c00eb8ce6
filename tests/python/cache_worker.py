"""A small training run for the persistent compile cache tests (test_compile_cache.py), in a process of its own.

Trains an MLP with SGD and momentum on ``tpu`` in float32 (eagerly, or under ``torch.compile(backend="tpu")``)
and, from the same initial weights, on the CPU in float64 (the reference its losses are compared with). Prints one
JSON line: both loss curves and the engine's metrics.
"""

from __future__ import annotations

import argparse
import json

import torch

import torch_pjrt


def train(device: str, dtype: torch.dtype, steps: int, width: int, compiled: bool = False) -> list[float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, width),
        torch.nn.Tanh(),
        torch.nn.Linear(width, width),
        torch.nn.Tanh(),
        torch.nn.Linear(width, 4),
    ).to(dtype)
    model.to(device)
    if compiled:
        model.compile(backend="tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 16, generator=gen).to(dtype).to(device)
        y = torch.randn(32, 4, generator=gen).to(dtype).to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def train_gpt_model(device: str, dtype: torch.dtype, steps: int, compiled: bool = False) -> list[float]:
    """examples/train_gpt.py's GPT and AdamW, as there."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
    import train_gpt

    torch.manual_seed(0)
    model = train_gpt.GPT().to(dtype).to(device)
    if compiled:
        model.compile(backend="tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        x, y = (t.to(device) for t in train_gpt.batch(gen, 16, 32, 64))
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--mode", default="strict", help="an eager mode, or 'compiled' for torch.compile(backend='tpu')")
    p.add_argument("--model", default="mlp", choices=["mlp", "gpt"])
    args = p.parse_args()
    compiled = args.mode == "compiled"
    torch_pjrt.set_eager_mode("strict" if compiled else args.mode)
    if args.model == "gpt":
        losses = train_gpt_model("tpu", torch.float32, args.steps, compiled)
    else:
        losses = train("tpu", torch.float32, args.steps, args.width, compiled)
    torch_pjrt.synchronize()
    m = torch_pjrt.metrics()
    torch_pjrt._C._flush_compile_cache()
    disk = torch_pjrt.metrics()["persistent_cache"]  # with the writes of the programs above
    if args.model == "gpt":
        reference = train_gpt_model("cpu", torch.float64, args.steps)
    else:
        reference = train("cpu", torch.float64, args.steps, args.width)
    print(json.dumps({"losses": losses, "reference": reference, "compiles": m["compiles"], "disk": disk}))


if __name__ == "__main__":
    main()
