"""Train the small GPT of train_gpt.py with DistributedDataParallel, one process per device, as a CUDA script would.

    torchrun --standalone --nproc-per-node=2 examples/ddp_train.py            # tpu, over tpu_dist
    torchrun --standalone --nproc-per-node=2 examples/ddp_train.py --device cpu   # the same run on CPU with Gloo

Each rank takes its share of the global batch; rank 0 prints the loss averaged over ranks. The only line that names
the device is ``--device``: ``init_process_group()`` picks tpu_dist for ``tpu`` (Gloo for ``cpu``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_gpt import GPT, batch  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=16, help="global batch, split over the ranks")
    args = p.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cpu":
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        device = torch.device(args.device, local_rank)
        torch.tpu.set_device(local_rank)
        dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = DDP(GPT().to(device))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(0)
    per_rank = args.batch // world
    t0 = None
    for step in range(args.steps):
        x, y = batch(gen, args.batch, 32, 64)
        x, y = (
            x[rank * per_rank : (rank + 1) * per_rank].to(device),
            y[rank * per_rank : (rank + 1) * per_rank].to(device),
        )
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step:4d}  loss {avg.item():.4f}", flush=True)
        if step == 0:
            t0 = time.perf_counter()
    if rank == 0 and args.steps > 1:
        print(f"{device.type} x {world}: {(args.steps - 1) / (time.perf_counter() - t0):.2f} steps/s after the first")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
