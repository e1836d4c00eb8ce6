"""The GPT of examples/train_gpt.py and its AdamW step in JAX, jitted as one program (bench/compile.py's ``jax``).

The parameters are copied from the torch model built with the same seed, and the batches come from the same torch
generator, so the step computes what the torch step does. Everything (forward, backward, AdamW with torch's
defaults) is one ``jax.jit`` program.

Two backends: ``use_plugin(path)`` registers torch_pjrt's own PJRT plugin with JAX, so ``gpt_trainer(...,
backend=PLUGIN)`` compiles with the same XLA build torch_pjrt uses (what the same compiler can do with the whole
step on this machine); ``backend="cpu"`` is jaxlib's built-in CPU client, another XLA build (jaxlib 0.10's fuses
matmuls and reductions into YNNPACK kernels, which the xla-cpu-pjrt plugin lacks).
"""

from __future__ import annotations

import importlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

PLUGIN = "torch_pjrt_plugin"


def use_plugin(path: str, cpu_devices: int | None = None) -> None:
    """Registers the PJRT plugin at `path` as JAX backend PLUGIN, next to jaxlib's "cpu". Call before JAX starts.

    cpu_devices: the CPU plugin's device count (pass torch_pjrt's, so that both clients size their thread pools alike).
    """
    from jax._src import xla_bridge

    options = {"cpu_device_count": cpu_devices} if cpu_devices else None
    xla_bridge.register_plugin(PLUGIN, library_path=path, options=options)
    jax.config.update("jax_platforms", f"{PLUGIN},cpu")


def _layer_norm(x, p, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * p["weight"] + p["bias"]


def _linear(x, p):
    y = x @ p["weight"].T
    return y + p["bias"] if "bias" in p else y


def _forward_loss(params, idx, targets, heads: int):
    b, t = idx.shape
    x = params["tok"]["weight"][idx] + params["pos"]["weight"][jnp.arange(t)]
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))
    for blk in params["blocks"]:
        h = _layer_norm(x, blk["ln1"])
        c = h.shape[-1]
        q, k, v = jnp.split(_linear(h, blk["attn"]["qkv"]), 3, axis=-1)
        q, k, v = (z.reshape(b, t, heads, c // heads).transpose(0, 2, 1, 3) for z in (q, k, v))
        att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(c // heads)
        att = jnp.where(mask, att, -jnp.inf)
        y = jax.nn.softmax(att, axis=-1) @ v
        x = x + _linear(y.transpose(0, 2, 1, 3).reshape(b, t, c), blk["attn"]["proj"])
        h = _layer_norm(x, blk["ln2"])
        h = jax.nn.gelu(_linear(h, blk["mlp"]["0"]), approximate=False)
        x = x + _linear(h, blk["mlp"]["2"])
    logits = _linear(_layer_norm(x, params["ln"]), params["head"])
    logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]), axis=-1)
    return -jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=-1).mean()


def _params_of(model: torch.nn.Module) -> dict:
    """The torch model's parameters as a nested dict of jax arrays (blocks as a list)."""
    tree: dict = {}
    for name, p in model.named_parameters():
        *path, leaf = name.split(".")
        node = tree
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = jnp.asarray(p.detach().cpu().numpy())
    tree["blocks"] = [tree["blocks"][str(i)] for i in range(len(tree["blocks"]))]
    return tree


def gpt_trainer(
    dim: int, layers: int, block: int, batch_size: int, vocab: int = 64, seed: int = 0, backend: str | None = None
):
    """step(): one jitted training step on `backend`'s first device (JAX's default backend when None); returns the
    loss (a jax array: block_until_ready() waits for it)."""
    train_gpt = importlib.import_module("train_gpt")
    torch.manual_seed(seed)
    heads = 4
    device = jax.devices(backend)[0]
    params = jax.device_put(_params_of(train_gpt.GPT(vocab=vocab, dim=dim, layers=layers, block=block)), device)
    lr, beta1, beta2, eps, wd = 3e-3, 0.9, 0.999, 1e-8, 0.01
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = {"params": params, "m": zeros, "v": zeros, "t": jax.device_put(jnp.zeros((), jnp.float32), device)}

    @jax.jit
    def train_step(state, idx, targets):
        loss, grads = jax.value_and_grad(_forward_loss)(state["params"], idx, targets, heads)
        t = state["t"] + 1
        m = jax.tree_util.tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
        v = jax.tree_util.tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
        c1, c2 = 1 - beta1**t, 1 - beta2**t

        def update(p, m, v):  # torch.optim.AdamW: decoupled weight decay, then the Adam step
            p = p * (1 - lr * wd)
            return p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps)

        new = jax.tree_util.tree_map(update, state["params"], m, v)
        return {"params": new, "m": m, "v": v, "t": t}, loss

    gen = torch.Generator().manual_seed(seed)
    box = {"state": state}

    def step():
        x, y = train_gpt.batch(gen, batch_size, block, vocab)
        x, y = (jax.device_put(np.asarray(t), device) for t in (x, y))
        box["state"], loss = train_step(box["state"], x, y)
        return loss

    return step
