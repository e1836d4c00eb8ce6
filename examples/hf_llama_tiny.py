"""A tiny Llama built from a config (random weights, no download) trained with Hugging Face's Trainer on tpu, then
asked to generate text.

The text is a few sentences with a character vocabulary, so no tokenizer is downloaded either. Trainer runs on tpu by
itself: accelerate 1.16 asks ``torch.accelerator`` for the device, which is tpu once torch_pjrt is installed. Older
accelerate releases (such as 1.10) pick the CPU unless told the device: run them with ``ACCELERATE_TORCH_DEVICE=tpu``.
``--device cpu`` trains on the CPU instead, with ``use_cpu=True``.

    python examples/hf_llama_tiny.py --steps 60

generate() grows the sequence by one token a step, and each new length compiles its own programs the first time
(about 20 per token here: shape buckets are not built yet); the persistent compile cache keeps them, so a second run
compiles nothing.
"""

from __future__ import annotations

import argparse
import tempfile

TEXT = (
    "the quick brown fox jumps over the lazy dog. "
    "a tiny llama learns to spell on a tpu. "
    "every op becomes a stablehlo program. "
) * 8


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--prompt", default="the quick ")
    p.add_argument("--new-tokens", type=int, default=40)
    args = p.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Trainer, TrainingArguments

    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in TEXT])
    block = 32

    class Chunks(torch.utils.data.Dataset):
        def __len__(self):
            return len(data) - block

        def __getitem__(self, i):
            x = data[i : i + block]
            return {"input_ids": x, "labels": x}

    config = LlamaConfig(
        vocab_size=len(chars),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    targs = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="hf_llama_tiny_"),
        per_device_train_batch_size=16,
        max_steps=args.steps,
        learning_rate=3e-3,
        warmup_steps=5,
        logging_steps=10,
        report_to=[],
        save_strategy="no",
        seed=0,
        use_cpu=args.device == "cpu",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=targs, train_dataset=Chunks())
    trainer.train()
    losses = [round(h["loss"], 4) for h in trainer.state.log_history if "loss" in h]
    device = next(model.parameters()).device
    print(f"trained on {device}: losses {losses}")

    model.eval()
    prompt = torch.tensor([[stoi[c] for c in args.prompt]], device=device)
    out = model.generate(
        prompt, max_new_tokens=args.new_tokens, do_sample=False, attention_mask=torch.ones_like(prompt)
    )
    print("generated:", repr("".join(chars[i] for i in out[0].tolist())))


if __name__ == "__main__":
    main()
