"""Train a small DLRM (defined below) on synthetic click logs, on the tpu device.

The architecture of the deep learning recommendation model: dense features go
through a bottom MLP; each sparse feature is a bag of ids (a variable number
per sample, possibly none) that an nn.EmbeddingBag(mode="sum") reduces to one
vector (one table also weights its ids per sample); the pairwise dot products
of all these vectors (the feature interaction) join the bottom MLP's output
in the top MLP, which predicts the click probability. The synthetic labels
come from a hidden linear rule over the dense features and the ids, so the
loss falls. Trained with SGD, as the reference DLRM is.

    python examples/dlrm.py                 # on tpu
    python examples/dlrm.py --device cpu    # the same run on CPU
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DENSE = 13  # dense features, as in Criteo
TABLES = [1000, 500, 200, 100, 50, 20, 10, 4]  # rows of each sparse feature's table
DIM = 16  # embedding dimension
IDS_PER_BAG = 3  # average ids per sample and sparse feature
WEIGHTED = 2  # the table whose ids carry per-sample weights


def mlp(sizes: list[int], sigmoid_last: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        layers.append(nn.Sigmoid() if sigmoid_last and i == len(sizes) - 2 else nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, dense: int = DENSE, tables: list[int] = TABLES, dim: int = DIM):
        super().__init__()
        self.bot_l = mlp([dense, 64, dim])
        self.emb_l = nn.ModuleList([nn.EmbeddingBag(n, dim, mode="sum") for n in tables])
        n = len(tables) + 1
        li, lj = torch.tril_indices(n, n, offset=-1)  # each pair of distinct vectors once
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.top_l = mlp([dim + n * (n - 1) // 2, 64, 32, 1], sigmoid_last=True)
        for t in self.emb_l:  # the reference DLRM's uniform init of the tables
            nn.init.uniform_(t.weight, -(t.num_embeddings**-0.5), t.num_embeddings**-0.5)

    def interact(self, x: torch.Tensor, ly: list[torch.Tensor]) -> torch.Tensor:
        b, d = x.shape
        t = torch.cat([x] + ly, dim=1).view(b, -1, d)  # [b, tables + 1, dim]
        z = torch.bmm(t, t.transpose(1, 2))
        return torch.cat([x, z[:, self.li, self.lj]], dim=1)

    def forward(self, dense: torch.Tensor, sparse: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]):
        x = self.bot_l(dense)
        ly = [emb(ids, offsets, per_sample_weights=w) for emb, (ids, offsets, w) in zip(self.emb_l, sparse)]
        return self.top_l(self.interact(x, ly)).squeeze(1)


def build_model() -> DLRM:
    return DLRM()


def batch(gen: torch.Generator, batch_size: int = 64):
    """(dense, sparse, clicks); sparse holds (ids, offsets, per_sample_weights or None) per table.

    Each table gets batch_size * IDS_PER_BAG ids cut into bags at random
    points, so shapes stay fixed while bag sizes vary (empty bags included).
    """
    dense = torch.randn(batch_size, DENSE, generator=gen)
    hidden = torch.Generator().manual_seed(2024)  # the hidden rule, the same for every batch
    w_dense = torch.randn(DENSE, generator=hidden)
    score = dense @ w_dense / DENSE**0.5
    sparse = []
    n = batch_size * IDS_PER_BAG
    for k, rows in enumerate(TABLES):
        w_ids = torch.randn(rows, generator=hidden)
        ids = torch.randint(0, rows, (n,), generator=gen)
        cuts = torch.sort(torch.randint(0, n + 1, (batch_size - 1,), generator=gen)).values
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), cuts])
        weights = torch.rand(n, generator=gen) if k == WEIGHTED else None
        sparse.append((ids, offsets, weights))
        bag = torch.bucketize(torch.arange(n), offsets, right=True) - 1
        score = score + torch.zeros(batch_size).index_add_(0, bag, w_ids[ids]) / IDS_PER_BAG
    clicks = (score > 0).float()
    return dense, sparse, clicks


def to_device(dense, sparse, clicks, device: str):
    sparse = [(i.to(device), o.to(device), None if w is None else w.to(device)) for i, o, w in sparse]
    return dense.to(device), sparse, clicks.to(device)


def make_trainer(device: str, seed: int = 0):
    """(model, step): step() runs one training step on `device` and returns the loss tensor."""
    torch.manual_seed(seed)
    model = build_model().to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(seed)

    def step() -> torch.Tensor:
        dense, sparse, clicks = to_device(*batch(gen), device)
        loss = F.binary_cross_entropy(model(dense, sparse), clicks)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return model, step


def train(device: str, steps: int, seed: int = 0, log=print, return_model: bool = False):
    """Trains for `steps` steps; returns the losses (and the model when return_model)."""
    model, step = make_trainer(device, seed)
    losses = []
    t0 = None
    for i in range(steps):
        losses.append(step().item())
        if i == 0:
            t0 = time.perf_counter()  # the first step compiles; time the rest
        log(f"step {i:4d}  loss {losses[-1]:.4f}")
    if steps > 1:
        log(f"{device}: {(steps - 1) / (time.perf_counter() - t0):.2f} steps/s over {steps - 1} steps after the first")
    return (losses, model) if return_model else losses


@torch.no_grad()
def infer(device: str, seed: int = 0) -> torch.Tensor:
    """Click probabilities (on CPU) of the eval-mode model for a batch."""
    torch.manual_seed(seed)
    model = build_model().to(device).eval()
    dense, sparse, _ = to_device(*batch(torch.Generator().manual_seed(seed + 1)), device)
    return model(dense, sparse).cpu()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu")
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    if args.device.startswith("tpu"):
        import torch_pjrt  # noqa: F401  (import torch already autoloads it; explicit for clarity)
    train(args.device, args.steps)


if __name__ == "__main__":
    main()
