"""Device memory of in-place updates and of an AdamW step, as tpu reports it and as the process's peak RSS shows it.

On the CPU plugin device memory is host memory, so the peak RSS (VmHWM, reset before each part) is the ground truth
that torch.tpu.max_memory_allocated() must agree with. Prints one line per part and ends with
``memory inplace_rss_peak_mb=A inplace_reported_peak_mb=B adamw_peak_over_params=C adamw_rss_peak_over_params=D``.
"""

from __future__ import annotations

import argparse
import os

import torch

import torch_pjrt


def status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(key))


def reset_rss_peak() -> None:
    with open(f"/proc/{os.getpid()}/clear_refs", "w") as f:
        f.write("5")


def inplace(mb: int, steps: int) -> tuple[float, float]:
    x = torch.zeros(mb * 1024 * 1024 // 4, device="tpu")
    x.add_(1)
    torch_pjrt.synchronize()
    reset_rss_peak()
    base, live = status_mb("VmRSS"), torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    for _ in range(steps):
        x.add_(1)
    torch_pjrt.synchronize()
    rss = status_mb("VmHWM") - base
    reported = (torch.tpu.max_memory_allocated() - live) / 2**20
    print(f"inplace: {steps} x add_ on {mb} MB: peak RSS +{rss:.1f} MB, max_memory_allocated +{reported:.1f} MB")
    return rss, reported


def adamw(width: int, depth: int, batch: int) -> tuple[float, float]:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width).to("tpu")
    params = sum(p.numel() * p.element_size() for p in model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    step()  # creates the moments
    torch_pjrt.synchronize()
    reset_rss_peak()
    rss_base = status_mb("VmRSS") - torch.tpu.memory_allocated() / 2**20  # RSS without the device buffers
    torch.tpu.reset_peak_memory_stats()
    step()
    torch_pjrt.synchronize()
    peak = torch.tpu.max_memory_allocated() / params
    rss = (status_mb("VmHWM") - rss_base) * 2**20 / params
    print(
        f"adamw: {params / 2**20:.1f} MB of parameters (P); peak reported {peak:.2f} P, peak RSS above the"
        f" host baseline {rss:.2f} P; activations {batch * width * depth * 4 / params:.2f} P"
    )
    return peak, rss


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=int, default=512)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    rss, reported = inplace(args.mb, args.steps)
    peak, adam_rss = adamw(args.width, args.depth, args.batch)
    print(
        f"memory inplace_rss_peak_mb={rss:.1f} inplace_reported_peak_mb={reported:.1f}"
        f" adamw_peak_over_params={peak:.2f} adamw_rss_peak_over_params={adam_rss:.2f}"
    )


if __name__ == "__main__":
    main()
