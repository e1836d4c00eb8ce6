"""Train a minGPT-style model (defined below) to sort digits, on the tpu device.

minGPT's classic demo: the input is a random sequence of digits followed by
the same digits sorted; the model sees the whole sequence shifted by one and
is trained only on predicting the sorted half (the rest of the targets are -1,
ignored by the loss). The model follows minGPT: fused qkv attention with a
causal mask buffer, NewGELU, pre-LayerNorm blocks, dropout modules, and AdamW
with weight decay only on the matmul weights.

    python examples/mingpt.py                 # on tpu
    python examples/mingpt.py --device cpu    # the same run on CPU
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

LENGTH = 6  # digits to sort
DIGITS = 3  # vocabulary: 0, 1, 2
BLOCK = 2 * LENGTH - 1
BATCH = 32


class NewGELU(nn.Module):
    """The tanh approximation of GELU, written out as in minGPT."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block: int, pdrop: float):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(pdrop)
        self.resid_dropout = nn.Dropout(pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block), persistent=False)
        self.n_head = n_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block: int, pdrop: float):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block, pdrop)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(
            dict(
                c_fc=nn.Linear(n_embd, 4 * n_embd),
                c_proj=nn.Linear(4 * n_embd, n_embd),
                act=NewGELU(),
                dropout=nn.Dropout(pdrop),
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.mlp
        x = x + self.attn(self.ln_1(x))
        return x + m.dropout(m.c_proj(m.act(m.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    """minGPT's 'gpt-nano': 3 layers, 3 heads, 48 channels."""

    def __init__(
        self,
        vocab: int = DIGITS,
        block: int = BLOCK,
        n_layer: int = 3,
        n_head: int = 3,
        n_embd: int = 48,
        pdrop: float = 0.0,
    ):
        super().__init__()
        self.block = block
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, n_embd),
                wpe=nn.Embedding(block, n_embd),
                drop=nn.Dropout(pdrop),
                h=nn.ModuleList([Block(n_embd, n_head, block, pdrop) for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd),
            )
        )
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        tr = self.transformer
        x = tr.drop(tr.wte(idx) + tr.wpe(pos))
        for block in tr.h:
            x = block(x)
        logits = self.lm_head(tr.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, lr: float, weight_decay: float) -> torch.optim.Optimizer:
        """AdamW that decays Linear weights only (not biases, LayerNorm or embeddings), as minGPT does."""
        decay = set()
        for mn, m in self.named_modules():
            for pn, _ in m.named_parameters(recurse=False):
                if pn == "weight" and isinstance(m, nn.Linear):
                    decay.add(f"{mn}.{pn}" if mn else pn)
        params = dict(self.named_parameters())
        groups = [
            {"params": [params[n] for n in sorted(decay)], "weight_decay": weight_decay},
            {"params": [params[n] for n in sorted(params.keys() - decay)], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def build_model() -> GPT:
    return GPT()


def batch(gen: torch.Generator, batch_size: int = BATCH, length: int = LENGTH, digits: int = DIGITS):
    """(inputs, targets): digits then their sorted order, shifted by one; targets -1 where not scored."""
    inp = torch.randint(0, digits, (batch_size, length), generator=gen)
    seq = torch.cat([inp, torch.sort(inp, dim=1).values], dim=1)
    x, y = seq[:, :-1].clone(), seq[:, 1:].clone()
    y[:, : length - 1] = -1
    return x, y


def make_trainer(device: str, seed: int = 0):
    """(model, step): step() runs one training step on `device` and returns the loss tensor."""
    torch.manual_seed(seed)
    model = build_model().to(device)
    model.train()
    opt = model.configure_optimizers(lr=5e-4, weight_decay=0.1)
    gen = torch.Generator().manual_seed(seed)

    def step() -> torch.Tensor:
        x, y = (t.to(device) for t in batch(gen))
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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
    """Logits (on CPU) of the eval-mode model for a batch of digit sequences and their sorted order."""
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
