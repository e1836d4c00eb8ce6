"""A 2-rank DDP training step of the GPT example on ``tpu`` (tpu_dist) against the same DDP on CPU tensors with Gloo,
in the same processes, interleaved.

    python bench/ddp.py [--mode strict|fused]     # starts 2 ranks on loopback itself
    torchrun --nproc-per-node=2 bench/ddp.py

Each rank trains on half of the global batch, with torch's CPU threads set to its share of the cores. Blocks of
``--steps`` steps alternate between CPU and tpu after a warm-up; rank 0 prints each side's steps/s (median and range
over the blocks) and the line
``ddp tpu_steps_per_s=X cpu_steps_per_s=Y ratio=Z``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from dist_launch import launch_or_run  # noqa: E402

from train_gpt import GPT, batch  # noqa: E402


def make(device):
    torch.manual_seed(0)
    model = DDP(GPT().to(device))
    return model, torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)


def step(model, opt, x, y):
    _, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", default="strict", choices=["strict", "fused"])
    p.add_argument("--batch", type=int, default=16, help="global batch")
    p.add_argument("--steps", type=int, default=10, help="steps per timed block")
    p.add_argument("--blocks", type=int, default=5)
    args = p.parse_args()
    import torch_pjrt

    # One torch CPU thread per rank's share of the cores: the ranks and the device share them, and torch's idle OpenMP
    # threads spin for milliseconds after each parallel op (README, "Platform").
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // int(os.environ["LOCAL_WORLD_SIZE"])))
    tpu = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
    torch.tpu.set_device(tpu)
    torch_pjrt.set_eager_mode(args.mode)
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    per = args.batch // world
    gen = torch.Generator().manual_seed(0)
    data = []
    for _ in range(args.steps):
        x, y = batch(gen, args.batch, 32, 64)
        data.append((x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]))
    sides = {"cpu": (torch.device("cpu"), *make("cpu")), "tpu": (tpu, *make(tpu))}
    on_device = {k: [(x.to(d), y.to(d)) for x, y in data] for k, (d, _, _) in sides.items()}

    def block(kind):
        _, model, opt = sides[kind]
        t0 = time.perf_counter()
        for x, y in on_device[kind]:
            loss = step(model, opt, x, y)
        loss.item()  # the step's result is on the host: the block is done
        return args.steps / (time.perf_counter() - t0)

    block("cpu"), block("tpu")  # warm-up: compiles, buckets, connections
    rates = {"cpu": [], "tpu": []}
    for _ in range(args.blocks):
        for kind in ("cpu", "tpu"):
            rates[kind].append(block(kind))
    if rank == 0:
        med = {k: statistics.median(v) for k, v in rates.items()}
        for k, v in rates.items():
            print(f"{k}: {med[k]:.2f} steps/s ({min(v):.2f}-{max(v):.2f}) over {args.blocks} blocks of {args.steps}")
        print(
            f"ddp tpu_steps_per_s={med['tpu']:.2f} cpu_steps_per_s={med['cpu']:.2f} ratio={med['tpu'] / med['cpu']:.2f}"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    launch_or_run(main)
