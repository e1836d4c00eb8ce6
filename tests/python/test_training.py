"""Whole training runs on tpu match the same runs on CPU."""

import os
import sys

import torch

import torch_pjrt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def mlp_losses(device: str, steps: int = 20) -> list[float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(64, 16, generator=gen).to(device)
        y = torch.randint(0, 4, (64,), generator=gen).to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_mlp_20_steps_matches_cpu():
    cpu = mlp_losses("cpu")
    torch_pjrt.reset_metrics()
    tpu = mlp_losses("tpu")
    for c, t in zip(cpu, tpu):
        assert abs(c - t) <= 1e-5 * abs(c), (cpu, tpu)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_gpt_example_matches_cpu_with_adamw():
    from train_gpt import train

    cpu = train("cpu", 6, log=lambda *_: None)
    torch_pjrt.reset_metrics()
    tpu = train("tpu", 6, log=lambda *_: None)
    for c, t in zip(cpu, tpu):
        assert abs(c - t) <= 1e-4 * abs(c), (cpu, tpu)
    assert tpu[-1] < tpu[0]
    assert torch_pjrt.metrics()["fallback_ops"] == {}
