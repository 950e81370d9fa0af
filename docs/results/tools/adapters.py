"""Two measurements behind docs/results/2026-12-06-minihouse.md ("A random step of the same size").

    python docs/results/tools/adapters.py random ADAPTER OUT --scale 8 --seed 1
        OUT: ADAPTER with every lora_B matrix replaced by a Gaussian one of `scale` times its norm
        (a random direction of a chosen size; lora_A and the adapter's config are kept).
    python docs/results/tools/adapters.py drift MODEL REFINE_VAL ADAPTER [ADAPTER ...] --examples 60
        For each adapter on MODEL: the share of the held-out examples' response tokens whose most likely
        token differs from MODEL's alone, and the mean KL(adapter ‖ MODEL) per response token, both under
        teacher forcing on the examples' reference answers.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def random_adapter(adapter: Path, out: Path, scale: float, seed: int) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(adapter, out)
    weights = out / "adapter_model.safetensors"
    tensors = load_file(weights)
    generator = torch.Generator().manual_seed(seed)
    for name, value in tensors.items():
        if "lora_B" in name:
            direction = torch.randn(value.shape, generator=generator)
            tensors[name] = (direction * (scale * value.float().norm() / direction.norm())).to(value.dtype)
    save_file(tensors, weights, metadata={"format": "pt"})


def response_positions(tokenizer, examples: list[dict]) -> list[tuple[list[int], int]]:
    """(token ids of the whole conversation, where its last answer starts) for each chat example."""
    encoded = []
    for example in examples:
        messages = example["messages"]
        prompt = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=True, return_dict=True)
        full = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)
        encoded.append((full["input_ids"], len(prompt["input_ids"])))
    return encoded


def answer_logprobs(model, encoded) -> list:
    import torch

    with torch.no_grad():
        return [torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, start - 1 : -1].float(), -1) for ids, start in encoded]


def drift(model_dir: Path, refine_val: Path, adapters: list[Path], examples: int) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = [json.loads(line) for line in refine_val.read_text().splitlines()][:examples]
    encoded = response_positions(tokenizer, rows)
    base = answer_logprobs(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval(), encoded)
    tokens = sum(b.shape[0] for b in base)
    for adapter in adapters:
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), adapter)
        moved = answer_logprobs(model.eval(), encoded)
        changed = sum(int((b.argmax(-1) != m.argmax(-1)).sum()) for b, m in zip(base, moved, strict=True))
        kl = sum(float((m.exp() * (m - b)).sum()) for b, m in zip(base, moved, strict=True)) / tokens
        print(f"{adapter}: most likely token changed at {changed}/{tokens} ({100 * changed / tokens:.2f}%), KL per token {kl:.5f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("random")
    made.add_argument("adapter", type=Path)
    made.add_argument("out", type=Path)
    made.add_argument("--scale", type=float, default=1.0)
    made.add_argument("--seed", type=int, default=1)
    measured = commands.add_parser("drift")
    measured.add_argument("model", type=Path)
    measured.add_argument("refine_val", type=Path)
    measured.add_argument("adapters", type=Path, nargs="+")
    measured.add_argument("--examples", type=int, default=60)
    args = parser.parse_args()
    if args.command == "random":
        random_adapter(args.adapter, args.out, args.scale, args.seed)
    else:
        drift(args.model, args.refine_val, args.adapters, args.examples)


if __name__ == "__main__":
    main()
