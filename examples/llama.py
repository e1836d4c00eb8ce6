"""Train a small Llama-style decoder (defined below) on the tpu device.

The architecture of Llama: pre-RMSNorm blocks, rotary position embeddings
(RoPE) on queries and keys, grouped-query attention (fewer key/value heads
than query heads, each shared by a group of query heads) through
torch.nn.functional.scaled_dot_product_attention, a SwiGLU feed-forward, no
biases, and an untied output head. The synthetic language is a hidden random
permutation of the vocabulary: each token is followed by its image, so the
loss falls quickly.

    python examples/llama.py                 # on tpu
    python examples/llama.py --device cpu    # the same run on CPU
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab: int = 96
    dim: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    hidden: int = 172  # SwiGLU width: about 8/3 * dim
    max_seq: int = 32
    rope_theta: float = 10000.0
    eps: float = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim: int, seq: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape [seq, head_dim] (each frequency twice, for the rotate-half layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """[b, kv_heads, t, d] -> [b, kv_heads * groups, t, d], each kv head shared by `groups` query heads."""
    if groups == 1:
        return x
    b, h, t, d = x.shape
    return x[:, :, None].expand(b, h, groups, t, d).reshape(b, h * groups, t, d)


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.kv_heads = cfg.heads, cfg.kv_heads
        self.head_dim = cfg.dim // cfg.heads
        self.wq = nn.Linear(cfg.dim, cfg.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(cfg.heads * self.head_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        groups = self.heads // self.kv_heads
        y = F.scaled_dot_product_attention(q, repeat_kv(k, groups), repeat_kv(v, groups), is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.eps)
        self.feed_forward = FeedForward(cfg.dim, cfg.hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: Config | None = None):
        super().__init__()
        self.cfg = cfg = cfg or Config()
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.dim)
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.layers)])
        self.norm = RMSNorm(cfg.dim, cfg.eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        cos, sin = rope_tables(cfg.dim // cfg.heads, cfg.max_seq, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None):
        t = tokens.shape[1]
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin)
        logits = self.output(self.norm(h))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def build_model() -> Llama:
    return Llama()


def batch(gen: torch.Generator, batch_size: int = 8, seq: int = 32, vocab: int = 96):
    """(inputs, targets) from the permutation language: token -> perm[token] (perm fixed by seed 1234)."""
    perm = torch.randperm(vocab, generator=torch.Generator().manual_seed(1234))
    tok = torch.empty(batch_size, seq + 1, dtype=torch.long)
    tok[:, 0] = torch.randint(0, vocab, (batch_size,), generator=gen)
    for i in range(seq):
        tok[:, i + 1] = perm[tok[:, i]]
    return tok[:, :-1], tok[:, 1:]


def make_trainer(device: str, seed: int = 0):
    """(model, step): step() runs one training step on `device` and returns the loss tensor."""
    torch.manual_seed(seed)
    model = build_model().to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(seed)

    def step() -> torch.Tensor:
        x, y = (t.to(device) for t in batch(gen))
        _, loss = model(x, y)
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
    """Logits (on CPU) of the eval-mode model for a batch of the language."""
    torch.manual_seed(seed)
    model = build_model().to(device).eval()
    x, _ = batch(torch.Generator().manual_seed(seed + 1))
    logits, _ = model(x.to(device))
    return logits.cpu()


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
