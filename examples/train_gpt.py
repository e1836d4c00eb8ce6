"""Train a small GPT (defined below) on the tpu device.

The model learns a synthetic language: each sequence counts upward modulo the
vocabulary from a random start, so the loss falls quickly. Prints the loss of
every step and the training throughput.

    python examples/train_gpt.py                 # on tpu
    python examples/train_gpt.py --device cpu    # the same run on CPU
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, block: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, block: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 64, heads: int = 4, layers: int = 2, block: int = 32, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, block, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        logits = self.head(self.ln(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def batch(gen: torch.Generator, batch_size: int, block: int, vocab: int):
    start = torch.randint(0, vocab, (batch_size, 1), generator=gen)
    seq = (start + torch.arange(block + 1)) % vocab
    return seq[:, :-1], seq[:, 1:]


def train(device: str, steps: int, seed: int = 0, batch_size: int = 16, log=print) -> list[float]:
    torch.manual_seed(seed)
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    t0 = None
    for step in range(steps):
        x, y = batch(gen, batch_size, 32, 64)
        x, y = x.to(device), y.to(device)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step == 0:
            t0 = time.perf_counter()  # the first step compiles; time the rest
        log(f"step {step:4d}  loss {losses[-1]:.4f}")
    if steps > 1:
        rate = (steps - 1) / (time.perf_counter() - t0)
        log(f"{device}: {rate:.2f} steps/s over {steps - 1} steps after the first")
    return losses


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
