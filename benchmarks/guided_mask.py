"""Guided decoding's cost per generated token: the hand-written decoder against the turn grammar compiled by xgrammar.

    python benchmarks/guided_mask.py [--model DIR | --vocab 49152] [--games 8] [--steps 4] [--batch 1 16]

Both logits processors (``evoh.policy.guided.GuidedActions`` and ``evoh.policy.turn_grammar.XGrammarActions``) mask
the same responses on the same real MiniHouse turns: each turn's admissible commands and every meta-action verb,
and a response per turn of about 40 tokens of thought, then its action (an admissible command, or every third turn
a meta-action with an argument). The processors are called as ``generate`` calls them, one step per token, on a
batch of rows in lock-step (rows that have ended are padded, as ``generate`` pads them), with zero logits standing
in for the model's. Printed per batch size: the mask time per generated token; and once per turn, what each
builds before the first token (the hand-written decoder's openers and reserve, xgrammar's compiled grammar).
``--model`` defaults to evoh's tiny model with a MiniHouse tokenizer (938 tokens), built here. Nothing can be
downloaded here, so ``--vocab N`` stands in for a real model's vocabulary (SmolLM2's has 49,152 tokens): a byte-level
BPE tokenizer of N tokens trained here on the Python standard library's source and MiniHouse text, with evoh's
special tokens.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path


def turns(games: int, steps: int, seed: int = 0) -> list[tuple[tuple[str, ...], str]]:
    """(admissible commands, observation) along seeded random walks through MiniHouse valid_seen games."""
    from evoh.config import EnvConfig
    from evoh.env.world import load_games, make_engine

    rng, found = random.Random(seed), []
    for task in load_games(EnvConfig(kind="minihouse"), "valid_seen")[:games]:
        engine = make_engine(task.game_file, 100)
        step = engine.reset()
        for _ in range(steps):
            found.append((step.admissible, step.observation))
            step = engine.step(rng.choice(step.admissible))
    return found


def stand_in_tokenizer(size: int, out: Path) -> Path:
    """A byte-level BPE tokenizer of ``size`` tokens, trained on text this machine has: for timing, not for a model."""
    import sysconfig

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from evoh.config import EnvConfig
    from evoh.models.tiny import SPECIAL_TOKENS, corpus

    def texts():
        yield from corpus(EnvConfig(kind="minihouse"))
        for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))[:3000]:
            yield path.read_text(errors="ignore")

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=SPECIAL_TOKENS, initial_alphabet=alphabet, show_progress=False)
    backend.train_from_iterator(texts(), trainer=trainer)
    special = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, additional_special_tokens=SPECIAL_TOKENS[1:], **special)
    tokenizer.save_pretrained(out)
    return out


def response(admissible: tuple[str, ...], observation: str, index: int, rng: random.Random) -> str:
    words = observation.replace(".", " ").replace(",", " ").split()
    thought = " ".join(rng.choice(words) for _ in range(30))
    action = f"recall [where the {rng.choice(words)} is]" if index % 3 == 2 else rng.choice(admissible).lower()
    return f"<think>{thought}</think>\n<action>{action}</action>"


def run(processor, rows: list[list[int]], prompt_width: int, vocab_size: int, pad: int) -> tuple[float, int]:
    """Seconds spent in ``processor`` over the batch's steps, and the tokens generated (rows that had not ended)."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    prompt = torch.zeros((len(rows), prompt_width), dtype=torch.long)
    spent = 0.0
    for k in range(width):
        scores = torch.zeros((len(rows), vocab_size))
        started = time.perf_counter()
        processor(torch.cat([prompt, ids[:, :k]], dim=1), scores)
        spent += time.perf_counter() - started
    return spent, sum(len(r) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path)
    parser.add_argument("--vocab", type=int, help="time on a stand-in tokenizer of this many tokens instead of a model's")
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()

    import xgrammar  # noqa: F401  (loaded before the clock starts: its first import takes half a second)
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    from evoh.harness.turns import META_VERBS, parse_turn
    from evoh.policy.guided import ActionGrammar, GuidedActions, Vocabulary
    from evoh.policy.turn_grammar import TurnCompiler, XGrammarActions

    model = args.model
    if args.vocab:
        model = stand_in_tokenizer(args.vocab, Path(tempfile.mkdtemp()) / f"vocab-{args.vocab}")
    elif model is None:
        from evoh.config import EnvConfig
        from evoh.models.tiny import build

        model = Path(tempfile.mkdtemp()) / "tiny"
        build(model, EnvConfig(kind="minihouse"), "tiny", seed=0)
    tokenizer = AutoTokenizer.from_pretrained(model)
    stop_ids = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|endoftext|>")}
    size = len(tokenizer)
    if (model / "config.json").exists():  # a model: its own vocabulary rows and stop tokens, as LocalPolicy takes them
        size = AutoConfig.from_pretrained(model).vocab_size
        stop = GenerationConfig.from_pretrained(model).eos_token_id
        stop_ids = set(stop if isinstance(stop, list) else [stop]) | {tokenizer.eos_token_id}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    started = time.perf_counter()
    vocab = Vocabulary(tokenizer, size, stop_ids)
    vocab_s = time.perf_counter() - started
    started = time.perf_counter()
    compiler = TurnCompiler(tokenizer, size, stop_ids)
    info_s = time.perf_counter() - started

    rng = random.Random(0)
    found = turns(args.games, args.steps)
    grammars = [ActionGrammar(admissible, META_VERBS) for admissible, _ in found]
    texts = [response(admissible, observation, i, rng) for i, (admissible, observation) in enumerate(found)]
    assert all(parse_turn(t, a).kind != "malformed" for t, (a, _) in zip(texts, found, strict=True))
    rows = [tokenizer(t, add_special_tokens=False).input_ids for t in texts]
    mean = sum(map(len, rows)) / len(rows)
    print(f"model {model}: vocabulary {size}, {len(found)} MiniHouse turns, {mean:.1f} tokens a response")
    print(f"once per policy: hand-written Vocabulary {vocab_s * 1e3:.1f} ms, xgrammar TokenizerInfo {info_s * 1e3:.1f} ms")

    started = time.perf_counter()
    for g in grammars:
        GuidedActions(vocab, [g], 0, 256)
    hand_setup = (time.perf_counter() - started) / len(grammars)
    started = time.perf_counter()
    for g in grammars:
        compiler.compile(g)
    xgrammar_setup = (time.perf_counter() - started) / len(grammars)
    print(f"per turn before its first token: hand-written {hand_setup * 1e3:.2f} ms, xgrammar {xgrammar_setup * 1e3:.2f} ms")

    print("| rows in lock-step | hand-written ms/token | xgrammar ms/token | hand-written / xgrammar |")
    print("|---:|---:|---:|---:|")
    for batch in args.batch:
        totals = {"hand": [0.0, 0], "xgrammar": [0.0, 0]}
        for start in range(0, len(rows), batch):
            chunk, chunk_grammars = rows[start : start + batch], grammars[start : start + batch]
            processors = {
                "hand": GuidedActions(vocab, chunk_grammars, 8, 10_000),  # a budget never spent, as xgrammar has none
                "xgrammar": XGrammarActions(compiler, chunk_grammars, 8),
            }
            for name, processor in processors.items():
                spent, tokens = run(processor, chunk, 8, size, pad)
                totals[name][0] += spent
                totals[name][1] += tokens
        hand_ms, xgrammar_ms = (totals[n][0] / totals[n][1] * 1e3 for n in ("hand", "xgrammar"))
        print(f"| {batch} | {hand_ms:.3f} | {xgrammar_ms:.3f} | {hand_ms / xgrammar_ms:.1f}× |")


if __name__ == "__main__":
    main()
