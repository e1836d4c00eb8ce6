"""Hugging Face transformers 5 and accelerate on tpu, against the same models on CPU: config-built tiny GPT-2, Llama,
Qwen2 and T5 (random weights, no download) forward, backward and greedy generate(); generate() greedy on a left-padded
batch, beam search, sampling with a seed, and the static cache (which transformers compiles with backend "tpu"); tied
embeddings; from_pretrained of a saved directory with device_map="tpu" and "auto"; Trainer in float32 and with
bf16=True, which finds tpu by itself through torch.accelerator (accelerate 1.16; older releases such as 1.10 need
``ACCELERATE_TORCH_DEVICE=tpu``, which these tests then set); generate() of a model whose forward is compiled with
torch.compile(backend="tpu"); examples/hf_llama_tiny.py.
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


SMALL = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def causal_config(kind: str):
    if kind == "gpt2":
        return transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    if kind == "llama":
        return transformers.LlamaConfig(**SMALL)
    return transformers.Qwen2Config(**SMALL)


def llama_config(**kw):
    return transformers.LlamaConfig(**{**SMALL, **kw})


def accelerate_finds_tpu() -> bool:
    """accelerate 1.16 asks torch.accelerator for the device (get_torch_accelerator_backend in
    accelerate/utils/imports.py); older releases (1.10.1, the previous pin) use tpu only when told:
    ``ACCELERATE_TORCH_DEVICE=tpu``."""
    import accelerate.utils.imports

    return hasattr(accelerate.utils.imports, "get_torch_accelerator_backend")


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


@pytest.fixture(scope="module")
def saved_llama(tmp_path_factory):
    """A config-built Llama with tied embeddings, saved (safetensors) to a directory, and the CPU model it was saved
    from."""
    pytest.importorskip("accelerate")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(llama_config(tie_word_embeddings=True)).eval()
    path = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(path, safe_serialization=True)
    assert (path / "model.safetensors").exists()
    return path, model


@pytest.mark.parametrize("device_map", ["tpu", "auto"])
def test_from_pretrained_with_device_map(saved_llama, device_map):
    """from_pretrained of a saved directory onto tpu: every parameter lands there, the tied lm_head stays the
    embedding's tensor, and the outputs are the CPU model's. "auto" asks accelerate how much memory each device has
    (torch.accelerator.get_memory_info, torch.tpu.get_device_properties); without an answer it would map everything to
    the CPU. transformers 5 always builds the model on the meta device and ignores low_cpu_mem_usage (passed as users
    do)."""
    path, cpu = saved_llama
    if device_map == "auto":
        if not accelerate_finds_tpu():
            pytest.skip("this accelerate (1.10 or so) sizes only the devices it names and maps the model to the CPU")
        from transformers.integrations.accelerate import get_max_memory

        budget = get_max_memory()
        assert budget.get(torch.tpu.current_device(), 0) > 0, budget
    loaded = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=device_map, low_cpu_mem_usage=True)
    assert {p.device.type for p in loaded.parameters()} == {"tpu"}
    assert {b.device.type for b in loaded.buffers()} <= {"tpu"}
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    for (name, p), q in zip(cpu.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert q.device.type == "tpu" and torch.equal(q.cpu(), p), name
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want, got = cpu(ids).logits, loaded(ids.to("tpu")).logits
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def llama_twins():
    return twins(lambda: transformers.LlamaForCausalLM(llama_config()).eval())


def test_generate_greedy_left_padded_batch(llama_twins):
    cpu, tpu = llama_twins
    prompt = torch.randint(1, VOCAB, (2, 6), generator=torch.Generator().manual_seed(6))
    mask = torch.ones_like(prompt)
    prompt[1, :2], mask[1, :2] = 0, 0  # the second prompt is two tokens shorter, padded on the left
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    want = cpu.generate(prompt, attention_mask=mask, **kw)
    got = tpu.generate(prompt.to("tpu"), attention_mask=mask.to("tpu"), **kw)
    assert torch.equal(got.cpu(), want)


def test_generate_beam_search(llama_twins):
    cpu, tpu = llama_twins
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(3))
    kw = dict(max_new_tokens=6, do_sample=False, num_beams=3, num_return_sequences=2, pad_token_id=0)
    want = cpu.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)
    torch_pjrt.reset_metrics()
    got = tpu.generate(prompt.to("tpu"), attention_mask=torch.ones_like(prompt).to("tpu"), **kw)
    assert torch.equal(got.cpu(), want)
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def test_generate_sampling_with_a_seed(llama_twins):
    """tpu draws from its own generator, so the tokens are not CPU's; the same seed gives the same tokens."""
    _, tpu = llama_twins
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(3)).to("tpu")
    kw = dict(max_new_tokens=6, do_sample=True, top_k=20, attention_mask=torch.ones_like(prompt), pad_token_id=0)
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        runs.append(tpu.generate(prompt, **kw).cpu())
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0][:, :5], prompt.cpu()) and runs[0].shape == (2, 11)


def test_generate_static_cache_compiles_with_the_tpu_backend():
    """cache_implementation="static" on a model on a device of type "tpu": transformers compiles the decoding steps
    itself, with torch.compile(backend="tpu", dynamic=False) (PreTrainedModel._default_compile_config); CPU runs the
    same cache uncompiled."""
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 4 does not compile generate() on tpu")
    torch._dynamo.reset()
    cpu, tpu = twins(lambda: transformers.LlamaForCausalLM(llama_config()).eval())
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(3))
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0, cache_implementation="static")
    want = cpu.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)
    torch_pjrt.reset_metrics()
    got = tpu.generate(prompt.to("tpu"), attention_mask=torch.ones_like(prompt).to("tpu"), **kw)
    assert torch.equal(got.cpu(), want)
    assert tpu._last_compile_config.backend == "tpu" and tpu._last_compile_config.dynamic is False
    m = torch_pjrt.metrics()
    assert m["compiles_by_name"].get("fused_region", 0) >= 1, m["compiles_by_name"]
    assert m["fallback_ops"] == {}
    torch._dynamo.reset()


# Trainer in float32 and with bf16=True, on CPU and on tpu, in one process: accelerate's state is a process-wide
# singleton, reset between runs. The data is learnable (each sequence counts up by 3), so the loss falls over the steps.
TRAINER = """
import json, os, sys, tempfile, torch, transformers, accelerate
from accelerate.state import AcceleratorState
import torch_pjrt
config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 32
    def __getitem__(self, i):
        x = (5 * i + 3 * torch.arange(12)) % 97
        return {"input_ids": x, "labels": x}
out = {}
# transformers 4's TrainingArguments refuses bf16=True on a device it does not know ("doesn't support bf16/gpu")
precisions = (False, True) if int(transformers.__version__.split(".")[0]) >= 5 else (False,)
for device in ("cpu", "tpu"):
    for bf16 in precisions:
        AcceleratorState._reset_state(reset_partial_state=True)
        if sys.argv[1] == "tell":  # an older accelerate: told the device, for the tpu runs only
            os.environ.pop("ACCELERATE_TORCH_DEVICE", None)
            if device == "tpu":
                os.environ["ACCELERATE_TORCH_DEVICE"] = "tpu"
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config)
        dtypes = set()
        model.lm_head.register_forward_hook(lambda m, i, o: dtypes.add(str(o.dtype)))
        args = transformers.TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4,
            max_steps=6, logging_steps=1, report_to=[], save_strategy="no", learning_rate=1e-2, seed=0,
            use_cpu=device == "cpu", bf16=bf16, disable_tqdm=True)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Data())
        trainer.train()
        out[device + ("-bf16" if bf16 else "")] = {
            "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
            "model": str(next(model.parameters()).device), "param_dtype": str(next(model.parameters()).dtype),
            "lm_head_out": sorted(dtypes), "mixed_precision": trainer.accelerator.mixed_precision}
AcceleratorState._reset_state(reset_partial_state=True)
placed = accelerate.Accelerator().prepare(torch.nn.Linear(2, 2))
out["accelerate"] = str(placed.weight.device)
out["fallbacks"] = torch_pjrt.metrics()["fallback_ops"]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def trainer_runs() -> dict:
    pytest.importorskip("accelerate")
    env = dict(os.environ)
    env.pop("ACCELERATE_TORCH_DEVICE", None)
    how = "find" if accelerate_finds_tpu() else "tell"
    p = subprocess.run([sys.executable, "-c", TRAINER, how], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_trainer_and_accelerate_pick_tpu_by_themselves(trainer_runs):
    """No ACCELERATE_TORCH_DEVICE: Trainer and a bare Accelerator place the model on tpu, and float32 training
    matches CPU's step for step."""
    cpu, tpu = trainer_runs["cpu"], trainer_runs["tpu"]
    assert cpu["model"] == "cpu" and tpu["model"] == "tpu:0"
    assert trainer_runs["accelerate"] == "tpu:0"
    assert trainer_runs["fallbacks"] == {}
    assert len(tpu["losses"]) == 6 and tpu["losses"][-1] < tpu["losses"][0] - 0.1, tpu["losses"]
    torch.testing.assert_close(torch.tensor(tpu["losses"]), torch.tensor(cpu["losses"]), rtol=1e-4, atol=1e-5)


def test_trainer_bf16(trainer_runs):
    """bf16=True: accelerate runs the forward under torch.autocast("tpu", torch.bfloat16) (lm_head's output is
    bfloat16; the parameters and the optimizer stay float32).

    Tolerance: bfloat16 keeps 8 significant bits, so each matmul output is rounded to within 2**-9 of its value; CPU and
    tpu round at the same ops (PyTorch's autocast lists) but accumulate in different orders, so their logits differ by
    up to about one bfloat16 ulp, a relative 2**-8. The loss is float32 cross-entropy of those logits, and its change is
    bounded by the largest logit change; over six Adam steps the difference stays at that level. So bf16 losses must
    agree with CPU's bf16 run and with the float32 run within rtol=2**-8 (about 0.017 for a loss of 4.3-4.6), while the
    float32 runs agree to 1e-4. Measured: tpu's bf16 losses within 6e-4 of CPU's bf16 ones and 6e-3 of float32's."""
    if "tpu-bf16" not in trainer_runs:
        pytest.skip("transformers 4's TrainingArguments refuses bf16=True on tpu")
    cpu, tpu, f32 = trainer_runs["cpu-bf16"], trainer_runs["tpu-bf16"], trainer_runs["tpu"]
    assert tpu["model"] == "tpu:0" and tpu["mixed_precision"] == "bf16"
    assert tpu["lm_head_out"] == ["torch.bfloat16"] and tpu["param_dtype"] == "torch.float32"
    assert cpu["lm_head_out"] == ["torch.bfloat16"] and f32["lm_head_out"] == ["torch.float32"]
    losses = torch.tensor(tpu["losses"])
    assert losses.isfinite().all() and losses[-1] < losses[0] - 0.1, tpu["losses"]
    torch.testing.assert_close(losses, torch.tensor(cpu["losses"]), rtol=2**-8, atol=0)
    torch.testing.assert_close(losses, torch.tensor(f32["losses"]), rtol=2**-8, atol=0)


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
    pytest.importorskip("accelerate")
    env = dict(os.environ)
    env.pop("ACCELERATE_TORCH_DEVICE", None)
    if not accelerate_finds_tpu():
        env["ACCELERATE_TORCH_DEVICE"] = "tpu"  # as the example's docstring tells users of older accelerate
    p = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "hf_llama_tiny.py"), "--steps", "20", "--new-tokens", "8"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "trained on tpu:0" in p.stdout and "generated:" in p.stdout, p.stdout
