"""Greedy decoding with a KV cache on a small minGPT, per eager mode: tokens/s, compiles, tokens against strict and CPU.

The model is examples/mingpt.py's GPT (2 layers, 4 heads, 64 channels, vocab
64, a block long enough for the prompt and --tokens new tokens), trained for
--train-steps steps on native CPU on train_gpt.py's counting language so that
greedy decoding has clear winners (rounding does not flip near-ties). Decoding
runs the model's own modules incrementally: a prefill of the prompt, then one
token per step whose keys and values are appended to a per-layer cache with
``torch.cat`` (so every step has new shapes). The next token stays on the
device (argmax, fed back), and a run ends with the tokens' copy to the host and
``torch_pjrt.synchronize()``.

Per mode (native CPU eager is "cpu"; the others run on tpu under
``torch_pjrt.eager_mode``): a first run (compiles), then --repeats timed runs,
interleaved across the modes. tokens/s is the median over the timed runs
[min-max]. "compiles first" and "compiles later" come from
``metrics()["compiles"]`` (reset before every run) of the first run and the
most of any later run; the modes share the compile cache, so the first runs go
strict, fused, debug, cpu, and each counts only what no earlier mode compiled.
"= strict" and "= cpu" say whether the first run's tokens equal strict mode's
and native CPU's (CPU's are computed even when "cpu" is not among --modes).
ops/region is fused mode's, from a later run. A mode that raises
NotImplementedError shows "-". Ends with the line ``decode tokens=N
fused_over_strict=X fused_tokens_match_strict=yes|no
fused_tokens_match_cpu=yes|no``.

    python bench/decode.py                       # strict and fused, 128 tokens
    python bench/decode.py --modes cpu strict debug --tokens 32 --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import faulthandler
import importlib
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

import torch_pjrt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import brief, in_mode, timed  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

MODES = ["cpu", "debug", "strict", "fused"]
FIRST_RUN_ORDER = ["strict", "fused", "debug", "cpu"]
VOCAB = 64


def build_model(block: int, train_steps: int, seed: int = 0):
    """minGPT's GPT on CPU in eval mode, trained `train_steps` steps on the counting language."""
    mingpt = importlib.import_module("mingpt")
    train_gpt = importlib.import_module("train_gpt")
    torch.manual_seed(seed)
    model = mingpt.GPT(vocab=VOCAB, block=block, n_layer=2, n_head=4, n_embd=64)
    if train_steps:
        opt = model.configure_optimizers(lr=3e-3, weight_decay=0.1)
        gen = torch.Generator().manual_seed(seed)
        model.train()
        for _ in range(train_steps):
            x, y = (t.contiguous() for t in train_gpt.batch(gen, 16, block, VOCAB))
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.eval()


def attend(attn, x: torch.Tensor, cache: list, i: int) -> torch.Tensor:
    """minGPT's CausalSelfAttention over the cached keys and values plus x's; appends x's to cache[i]."""
    b, n, c = x.size()
    h = attn.n_head
    q, k, v = attn.c_attn(x).split(c, dim=2)
    q, k, v = (z.view(b, n, h, c // h).transpose(1, 2) for z in (q, k, v))
    if cache[i] is not None:
        k = torch.cat([cache[i][0], k], dim=2)
        v = torch.cat([cache[i][1], v], dim=2)
    cache[i] = (k, v)
    t = k.size(2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if n > 1:  # the prefill: causal within the new tokens (one new token sees everything)
        att = att.masked_fill(attn.bias[:, :, t - n : t, :t] == 0, float("-inf"))
    y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, n, c)
    return attn.c_proj(y)


def forward_cached(model, idx: torch.Tensor, past: int, cache: list) -> torch.Tensor:
    """Logits of tokens `idx` at positions past.. given the cache of the `past` tokens before them."""
    tr = model.transformer
    pos = torch.arange(past, past + idx.size(1), dtype=torch.long, device=idx.device).unsqueeze(0)
    x = tr.wte(idx) + tr.wpe(pos)
    for i, block in enumerate(tr.h):
        x = x + attend(block.attn, block.ln_1(x), cache, i)
        m = block.mlp
        x = x + m.c_proj(m.act(m.c_fc(block.ln_2(x))))
    return model.lm_head(tr.ln_f(x))


@torch.no_grad()
def decode(model, prompt: torch.Tensor, tokens: int) -> torch.Tensor:
    """`tokens` greedily decoded tokens after `prompt` (batch, new tokens), on prompt's device."""
    cache = [None] * len(model.transformer.h)
    out, idx, past = [], prompt, 0
    for _ in range(tokens):
        nxt = forward_cached(model, idx, past, cache)[:, -1].argmax(-1, keepdim=True)
        out.append(nxt)
        past += idx.size(1)
        idx = nxt
    return torch.cat(out, dim=1)


@torch.no_grad()
def decode_full(model, prompt: torch.Tensor, tokens: int) -> torch.Tensor:
    """The same greedy decoding with the model's own forward over the whole sequence (no cache)."""
    seq = prompt
    for _ in range(tokens):
        logits, _ = model(seq)
        seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq[:, prompt.size(1) :]


def run_once(mode: str, model, prompt: torch.Tensor, tokens: int) -> tuple[float, torch.Tensor, dict | None]:
    """(seconds, tokens on CPU, tpu metrics of just this run)."""
    return timed(lambda: decode(model, prompt, tokens).cpu(), mode)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", nargs="+", default=["strict", "fused"], choices=MODES)
    p.add_argument("--tokens", type=int, default=128, help="new tokens per run")
    p.add_argument("--prompt", type=int, default=8, help="prompt tokens")
    p.add_argument("--batch", type=int, default=1, help="sequences decoded together")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per mode after the first")
    p.add_argument("--train-steps", type=int, default=100, help="CPU training steps before decoding (0: random init)")
    p.add_argument("--cpu-threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    args = p.parse_args()
    faulthandler.enable()  # a crash in the backend still says which mode and step
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    modes = [m for m in MODES if m in args.modes]

    train_gpt = importlib.import_module("train_gpt")
    block = args.prompt + args.tokens
    model = build_model(block, args.train_steps)
    prompt = train_gpt.batch(torch.Generator().manual_seed(1), args.batch, args.prompt, VOCAB)[0].contiguous()
    cpu_tokens = decode(model, prompt, args.tokens)
    cached_ok = torch.equal(cpu_tokens, decode_full(model, prompt, args.tokens))
    print(
        f"platform {torch_pjrt.platform()['platform']}, torch threads {torch.get_num_threads()}; minGPT 2x64,"
        f" {args.train_steps} training steps; batch {args.batch}, prompt {args.prompt}, {args.tokens} new tokens;"
        f" cpu: KV-cache decode equals full-forward decode: {'yes' if cached_ok else 'NO'}"
    )

    runs, cells, notes = {}, {}, []
    # The first run of each mode (its compiles; the tokens compared), strict's first: the modes share
    # the compile cache, so a mode's first run only compiles what no earlier mode did.
    for mode in sorted(modes, key=FIRST_RUN_ORDER.index):
        try:
            with in_mode(mode):
                m = copy.deepcopy(model).to("cpu" if mode == "cpu" else "tpu")
                x = prompt.to("cpu" if mode == "cpu" else "tpu")
            seconds, out, met = run_once(mode, m, x, args.tokens)
            runs[mode] = {"model": m, "prompt": x, "first_s": seconds, "tokens": out, "first": met}
            runs[mode].update(rates=[], later=[])
        except NotImplementedError:
            cells[mode] = "-"
        except Exception as e:
            cells[mode] = "err"
            notes.append(f"{mode}: first run failed: {brief(e)}")
            with contextlib.suppress(Exception):
                torch_pjrt.synchronize()
    for _ in range(args.repeats):  # interleave the modes so machine noise hits them alike
        for mode in list(runs):
            r = runs[mode]
            try:
                seconds, out, met = run_once(mode, r["model"], r["prompt"], args.tokens)
            except Exception as e:
                cells[mode] = "err"
                notes.append(f"{mode}: timed run failed: {brief(e)}")
                del runs[mode]
                continue
            r["rates"].append(args.batch * args.tokens / seconds)
            r["later"].append(met)
            if not torch.equal(out, r["tokens"]):
                notes.append(f"{mode}: a later run's tokens differ from its first run's")

    def same(mode: str, ref: torch.Tensor | None) -> str:
        return "-" if ref is None else ("yes" if torch.equal(runs[mode]["tokens"], ref) else "no")

    strict_tokens = runs["strict"]["tokens"] if "strict" in runs else None
    print()
    print("| mode | tokens/s | first run s | compiles first | compiles later | ops/region | = strict | = cpu |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for mode in modes:
        if mode not in runs or not runs[mode]["rates"]:
            print(f"| {mode} | {cells.get(mode, '-')} | - | - | - | - | - | - |")
            continue
        r = runs[mode]
        rates = r["rates"]
        med[mode] = statistics.median(rates)
        first, later = r["first"], [m for m in r["later"] if m is not None]
        compiles_first = str(first["compiles"]) if first else "-"
        compiles_later = str(max(m["compiles"] for m in later)) if later else "-"
        opr = (later[-1].get("ops_per_region") if later and mode == "fused" else None) or {}
        ops = f"{opr['mean']:.1f} (max {opr['max']})" if opr else "-"
        print(
            f"| {mode} | {med[mode]:.1f} [{min(rates):.1f}-{max(rates):.1f}] | {r['first_s']:.2f} | {compiles_first}"
            f" | {compiles_later} | {ops} | {same(mode, strict_tokens)} | {same(mode, cpu_tokens)} |"
        )
        if mode == "fused" and later and later[-1].get("flush_reasons"):
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(later[-1]["flush_reasons"].items()))
            notes.append(f"{mode}: flushes in a later run: {reasons}")
    ratio = f"{med['fused'] / med['strict']:.3f}" if "fused" in med and "strict" in med else "-"
    print()
    print(f"fused/strict tokens/s: {ratio}")
    for note in notes:
        print(f"- {note}")
    fused_strict = same("fused", strict_tokens) if "fused" in runs else "-"
    fused_cpu = same("fused", cpu_tokens) if "fused" in runs else "-"
    print(
        f"decode tokens={args.tokens} fused_over_strict={ratio}"
        f" fused_tokens_match_strict={fused_strict} fused_tokens_match_cpu={fused_cpu}"
    )


if __name__ == "__main__":
    main()
