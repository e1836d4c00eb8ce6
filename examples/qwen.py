"""Train a small Qwen-style decoder (defined below) on the tpu device.

The architecture of Qwen3: pre-RMSNorm blocks; attention with QK-norm (an
RMSNorm over each head's queries and keys, before RoPE), rotary position
embeddings, grouped-query attention through
torch.nn.functional.scaled_dot_product_attention with enable_gqa; a SwiGLU
MLP; and the output head tied to the input embedding. The synthetic task
copies: each sequence is a random prefix, a separator, and the prefix again,
and only the copy is scored.

    python examples/qwen.py                 # on tpu
    python examples/qwen.py --device cpu    # the same run on CPU
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
    vocab: int = 64  # token 0 is the separator
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    max_positions: int = 32
    rope_theta: float = 1000000.0
    eps: float = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, max_positions: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos[positions], self.sin[positions]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.eps)  # QK-norm: per head, over head_dim
        self.k_norm = RMSNorm(cfg.head_dim, cfg.eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [b, 1, t, head_dim]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen(nn.Module):
    def __init__(self, cfg: Config | None = None):
        super().__init__()
        self.cfg = cfg = cfg or Config()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.eps)
        self.rotary_emb = RotaryEmbedding(cfg.head_dim, cfg.max_positions, cfg.rope_theta)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        b, t = input_ids.shape
        positions = torch.arange(t, device=input_ids.device).unsqueeze(0).expand(b, t)
        cos, sin = self.rotary_emb(positions)
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = layer(h, cos, sin)
        # Tied embeddings: the output head is the input embedding matrix.
        logits = F.linear(self.norm(h), self.embed_tokens.weight)
        if labels is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


def build_model() -> Qwen:
    return Qwen()


def batch(gen: torch.Generator, batch_size: int = 8, prefix: int = 12, vocab: int = 64):
    """(input_ids, labels) for the copy task: prefix, separator 0, prefix; labels -100 outside the copy."""
    p = torch.randint(1, vocab, (batch_size, prefix), generator=gen)
    seq = torch.cat([p, torch.zeros(batch_size, 1, dtype=torch.long), p], dim=1)
    x, y = seq[:, :-1].clone(), seq[:, 1:].clone()
    y[:, :prefix] = -100
    return x, y


def make_trainer(device: str, seed: int = 0):
    """(model, step): step() runs one training step on `device` and returns the loss tensor."""
    torch.manual_seed(seed)
    model = build_model().to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
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
    """Logits (on CPU) of the eval-mode model for a batch of the copy task."""
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
