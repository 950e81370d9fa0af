"""A small Qwen3 model with a byte-level BPE tokenizer trained on its world's text (ALFWorld or MiniHouse) and evoh's prompts.

Input embeddings and output head are separate (untied) weights, so LoRA fine-tuning can train both as
saved modules (``sft.train_embeddings``): a random base cannot learn through low-rank updates alone.
The result is an ordinary Hugging Face model directory (config, safetensors weights, tokenizer with the
Qwen special tokens and TRL's Qwen3 training chat template, generation config) that
``AutoModelForCausalLM`` and ``AutoTokenizer`` load offline. Its weights are random: it is the base
model for CPU work and tests, not a pretrained one.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from evoh.config import EnvConfig
from evoh.env.world import game_facts, load_games
from evoh.errors import EvohError
from evoh.harness.prompts import MODES, HarnessModules, system_prompt
from evoh.workspace import share_weights

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
SIZES = {
    # ~1M parameters: for tests
    "tiny": {
        "vocab": 2048,
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
    },
    # about 300M: for checking the GPU path end to end (benchmarks/gpu_smoke.sh), not for learning on a CPU
    "medium": {
        "vocab": 8192,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 64,
    },
    # a few million: for demos
    "small": {
        "vocab": 4096,
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 32,
    },
}


def corpus(env: EnvConfig, games: int = 300, seed: int = 0) -> Iterator[str]:
    """Text in the shape evoh's prompts and responses take: objectives, room descriptions, commands, turns."""
    rng = random.Random(seed)
    for mode in MODES:
        for modules in (HarnessModules(), HarnessModules(False, True, True)):
            for charged in (False, True):
                yield system_prompt(mode, modules, charged)
    tasks = load_games(env, "train", 6 * games if env.kind == "minihouse" else None, spread=True)
    for task in rng.sample(tasks, min(games, len(tasks))):
        facts = game_facts(task)
        goal, objects, places = facts.goal, facts.objects, facts.receptacles
        names = [f"{p} {i}" for p in places for i in range(1, rng.randint(2, 5))]
        things = [f"{o} {rng.randint(1, 4)}" for o in objects]
        yield f"Objective: {goal}"
        yield (
            "You are in the middle of a room. Looking quickly around you, you see "
            + ", ".join(f"a {n}" for n in names[:-1])
            + f", and a {names[-1]}."
        )
        for _ in range(12):
            place, thing = rng.choice(names), rng.choice(things)
            yield rng.choice(
                [
                    f"You arrive at loc {rng.randint(1, 40)}. On the {place}, you see a {thing}, and a {rng.choice(things)}.",
                    f"You open the {place}. The {place} is open. In it, you see a {thing}.",
                    f"You pick up the {thing} from the {place}.",
                    f"You put the {thing} in/on the {place}.",
                    (
                        f"<think>I have not found a {thing.split()[0]} yet; the {place} is a likely place.</think>"
                        f"<action>go to {place}</action>"
                    ),
                    f"<think>There is a {thing} here; I will pick it up.</think><action>take {thing} from {place}</action>",
                    (
                        f"<action>recall [where to find {thing.split()[0]}]</action> "
                        f"<action>commit [find {thing.split()[0]}]</action>"
                    ),
                    f"Admissible commands: go to {place}, take {thing} from {place}, examine {place}, inventory, look",
                    f"Previous actions: 1. go to {place} [ok]; 2. open {place} [ok]; 3. track [{thing}] [done]",
                ]
            )


def build(out: Path, env: EnvConfig | None = None, size: str = "tiny", seed: int = 0) -> dict:
    """Write a fresh model directory to ``out``, its tokenizer trained on the text of ``env``'s world (ALFWorld
    by default); returns its description."""
    import torch
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen3Config,
        Qwen3ForCausalLM,
    )
    from trl.chat_template_utils import qwen3_training_chat_template

    if size not in SIZES:
        raise EvohError(f"unknown size {size!r}", hint=f"use one of {', '.join(SIZES)}")
    shape = dict(SIZES[size])
    vocab = shape.pop("vocab")
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    backend.train_from_iterator(corpus(env or EnvConfig(), seed=seed), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>", "<think>", "</think>"],
        model_max_length=4096,
    )
    tokenizer.chat_template = qwen3_training_chat_template
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **shape,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[config.eos_token_id, tokenizer.convert_tokens_to_ids("<|endoftext|>")],
        pad_token_id=config.pad_token_id,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    share_weights(out)
    parameters = sum(p.numel() for p in model.parameters())
    return {"path": str(out), "size": size, "parameters": parameters, "vocab": len(tokenizer), "seed": seed}
