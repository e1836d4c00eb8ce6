"""Hugging Face transformers on tpu, against the same models on CPU: config-built tiny GPT-2, Llama, Qwen2 and T5
(random weights, no download) forward, backward and greedy generate(); tied embeddings; from_pretrained with
device_map="tpu"; Trainer and accelerate (told the device by ``ACCELERATE_TORCH_DEVICE=tpu``); generate() of a model
whose forward is compiled with torch.compile(backend="tpu"); examples/hf_llama_tiny.py.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

import torch_pjrt

transformers = pytest.importorskip("transformers")

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..")
VOCAB = 97


def causal_config(kind: str):
    small = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    if kind == "gpt2":
        return transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    if kind == "llama":
        return transformers.LlamaConfig(**small)
    return transformers.Qwen2Config(**small)


def twins(make):
    """The same model (same initial weights) on CPU and on tpu."""
    torch.manual_seed(0)
    cpu = make()
    tpu = make()
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu.to("tpu")


def assert_grads_close(cpu, tpu):
    for (name, p), q in zip(cpu.named_parameters(), tpu.parameters(), strict=True):
        if p.grad is None:
            assert q.grad is None, name
            continue
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen2"])
def test_causal_lm_forward_backward_generate(kind):
    cpu, tpu = twins(lambda: transformers.AutoModelForCausalLM.from_config(causal_config(kind)).eval())
    ids = torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(1))
    torch_pjrt.reset_metrics()
    oc, ot = cpu(ids, labels=ids), tpu(ids.to("tpu"), labels=ids.to("tpu"))
    torch.testing.assert_close(ot.logits.cpu(), oc.logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ot.loss.cpu(), oc.loss, rtol=1e-5, atol=1e-6)
    oc.loss.backward()
    ot.loss.backward()
    assert_grads_close(cpu, tpu)
    prompt = ids[:1, :4]
    kw = dict(max_new_tokens=6, do_sample=False, attention_mask=torch.ones_like(prompt), pad_token_id=0)
    want = cpu.generate(prompt, **kw)
    kw["attention_mask"] = kw["attention_mask"].to("tpu")
    got = tpu.generate(prompt.to("tpu"), **kw)
    assert torch.equal(got.cpu(), want)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_llama_generate_compiles_per_octave_not_per_token(mode):
    """generate() grows the KV cache, the attention mask and the ids by one token per step. After a 32-token run,
    a 64-token run reaches one new octave of lengths (41 to 72): its calls compile a few programs per bucket, not the
    dozen per token that exact shapes need."""
    cfg = causal_config("llama")
    cfg.max_position_embeddings = 128
    cpu, tpu = twins(lambda: transformers.LlamaForCausalLM(cfg).eval())
    prompt = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch_pjrt.eager_mode(mode):
        for n in (32, 64):
            kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
            want = cpu.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)
            torch_pjrt.reset_metrics()
            got = tpu.generate(prompt.to("tpu"), attention_mask=torch.ones_like(prompt).to("tpu"), **kw)
            assert torch.equal(got.cpu(), want)
    by_name = torch_pjrt.metrics()["compiles_by_name"]
    assert sum(by_name.values()) <= 32, by_name


def test_tied_embeddings_stay_tied():
    _, tpu = twins(lambda: transformers.AutoModelForCausalLM.from_config(causal_config("gpt2")))
    assert tpu.get_output_embeddings().weight is tpu.get_input_embeddings().weight
    assert tpu.get_output_embeddings().weight.device.type == "tpu"


def test_t5_forward_backward_generate():
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0
    )
    cpu, tpu = twins(lambda: transformers.AutoModelForSeq2SeqLM.from_config(config).eval())
    gen = torch.Generator().manual_seed(2)
    ids, labels = torch.randint(1, VOCAB, (2, 7), generator=gen), torch.randint(1, VOCAB, (2, 5), generator=gen)
    oc = cpu(input_ids=ids, labels=labels)
    ot = tpu(input_ids=ids.to("tpu"), labels=labels.to("tpu"))
    torch.testing.assert_close(ot.loss.cpu(), oc.loss, rtol=1e-5, atol=1e-6)
    oc.loss.backward()
    ot.loss.backward()
    assert_grads_close(cpu, tpu)
    assert torch.equal(tpu.generate(ids.to("tpu"), max_new_tokens=5).cpu(), cpu.generate(ids, max_new_tokens=5))


def test_from_pretrained_with_device_map(tmp_path):
    pytest.importorskip("accelerate")
    torch.manual_seed(0)
    saved = transformers.AutoModelForCausalLM.from_config(causal_config("llama"))
    saved.save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, device_map="tpu")
    assert {p.device.type for p in loaded.parameters()} == {"tpu"}
    for (name, p), q in zip(saved.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(q.cpu(), p), name


TRAINER = """
import json, sys, tempfile, torch, transformers, accelerate
import torch_pjrt
config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 32
    def __getitem__(self, i):
        x = torch.randint(0, 97, (12,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": x, "labels": x}
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(config)
args = transformers.TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4, max_steps=5,
    logging_steps=1, report_to=[], save_strategy="no", learning_rate=1e-3, seed=0, use_cpu=sys.argv[1] == "cpu",
    disable_tqdm=True)
trainer = transformers.Trainer(model=model, args=args, train_dataset=Data())
trainer.train()
placed = accelerate.Accelerator(cpu=sys.argv[1] == "cpu").prepare(torch.nn.Linear(2, 2))
print(json.dumps({"losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
                  "model": str(next(model.parameters()).device), "accelerate": str(placed.weight.device),
                  "fallbacks": torch_pjrt.metrics()["fallback_ops"]}))
"""


def run_trainer(device: str) -> dict:
    env = dict(os.environ)
    if device == "tpu":
        env["ACCELERATE_TORCH_DEVICE"] = "tpu"
    p = subprocess.run([sys.executable, "-c", TRAINER, device], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_trainer_and_accelerate_run_on_tpu():
    pytest.importorskip("accelerate")
    cpu, tpu = run_trainer("cpu"), run_trainer("tpu")
    assert cpu["model"] == "cpu" and tpu["model"] == "tpu:0"
    assert tpu["accelerate"] == "tpu:0"
    assert tpu["fallbacks"] == {}
    torch.testing.assert_close(torch.tensor(tpu["losses"]), torch.tensor(cpu["losses"]), rtol=1e-4, atol=1e-5)


def test_generate_with_a_compiled_forward():
    torch._dynamo.reset()
    cpu, tpu = twins(lambda: transformers.AutoModelForCausalLM.from_config(causal_config("llama")).eval())
    tpu.forward = torch.compile(tpu.forward, backend="tpu")
    prompt = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(3))
    kw = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    want = cpu.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)
    got = tpu.generate(prompt.to("tpu"), attention_mask=torch.ones_like(prompt).to("tpu"), **kw)
    assert torch.equal(got.cpu(), want)
    torch._dynamo.reset()


def test_generate_with_a_compiled_forward_compiles_per_bucket_not_per_token():
    # Dynamo traces the prefill, then one token, then (automatic dynamic) a graph with a symbolic cache length. That
    # graph's program is bucketed: its KV cache, masks and positions live in storages of their bucket's capacity.
    torch._dynamo.reset()
    cpu, tpu = twins(lambda: transformers.AutoModelForCausalLM.from_config(causal_config("llama")).eval())
    tpu.forward = torch.compile(tpu.forward, backend="tpu")
    prompt = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(4))
    kw = dict(max_new_tokens=32, do_sample=False, pad_token_id=0)
    want = cpu.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)
    torch_pjrt.reset_metrics()
    got = tpu.generate(prompt.to("tpu"), attention_mask=torch.ones_like(prompt).to("tpu"), **kw)
    assert torch.equal(got.cpu(), want)
    m = torch_pjrt.metrics()
    graphs = m["compiles_by_name"].get("fused_region", 0)
    # The prefill and the one-token graph once each; the symbolic graph at most log2(32) + 4 times (lengths 6 to 37).
    assert graphs <= 2 + int(math.log2(32)) + 4, graphs
    # Everything else is generate()'s own eager loop (stopping criteria, the growing mask): about 70 programs, a few
    # per op and bucket. Before the graph ran bucketed, its dynamic ops ran alone: 521 compiles.
    assert m["compiles"] <= 100, m["compiles_by_name"]
    torch._dynamo.reset()


def test_hf_llama_tiny_example():
    p = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "hf_llama_tiny.py"), "--steps", "20", "--new-tokens", "8"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "trained on tpu:0" in p.stdout and "generated:" in p.stdout, p.stdout
