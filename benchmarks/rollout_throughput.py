"""Batched lock-step generation against one episode at a time, and the size of each turn's prompt.

    ALFWORLD_DATA=../shared/alfworld python benchmarks/rollout_throughput.py [--model DIR] [--max-tokens 32 128 256]
        [--dtype auto float32]

1. A small local model (built here with `evoh model init --size small` unless --model is given) plays the
   same episodes twice through the shared rollout: all in lock-step with one batched generate() per step,
   then one episode at a time. Prints generated tokens/s and turns/s of each. Target: >= 4x on CPU.
   A random model never stops early, so every response is exactly that many tokens long. ``--dtype``
   defaults to evoh's own choice (``model.dtype = auto``: bf16 on a CPU with AVX512-BF16 or AMX, else
   fp32) and prints what it resolved to; ``--dtype float32 bfloat16`` measures both.
2. Prompt tokens at turns 1, 10, 30 and 50 of one 50-step episode: evoh's per-turn prompt (inline
   harness) against a ReAct transcript that carries every earlier observation and action.
3. With ``--in-flight 16 32 64``, only this: how many turns a second the rollout plays with that many
   episodes in flight, one batched generate() per step for all of them, under a recipe's model and
   harness settings (``--recipe``, default recipes/tiny-cpu.toml; pass a trained ``--model``, since a
   random one never wins or stops early). This is what a larger GRPO update (tasks_per_update x
   group_size) buys per second of rollout on this machine.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from evoh.config import ModelConfig, load_recipe
from evoh.env.games import load_tasks
from evoh.env.pool import EnvPool
from evoh.harness.episode import EpisodeSettings
from evoh.harness.experience import Bank
from evoh.harness.turns import format_turn
from evoh.policy.base import Completion
from evoh.policy.local import LocalPolicy
from evoh.rollout import rollout
from evoh.stages.grpo import rollout_sampling, rollout_settings


class Timed:
    """Wraps a policy to time its act() calls: the generation side of a rollout."""

    def __init__(self, policy: LocalPolicy) -> None:
        self.policy = policy
        self.seconds = 0.0

    def identity(self) -> dict:
        return self.policy.identity()

    def forget(self, key) -> None:
        self.policy.forget(key)

    def act(self, views):
        started = time.perf_counter()
        try:
            return self.policy.act(views)
        finally:
            self.seconds += time.perf_counter() - started


def play(policy: LocalPolicy, tasks, max_steps: int, active: int, settings: EpisodeSettings | None = None) -> dict[str, float]:
    tokens = turns = 0
    timed = Timed(policy)

    def finish(episode, usage) -> None:
        nonlocal tokens, turns
        tokens += usage["completion_tokens"]
        turns += episode.turns

    with EnvPool(2, max_steps=max_steps) as pool:
        pool.reset({"warm": tasks[0]})
        pool.release(["warm"])
        started = time.perf_counter()
        settings = settings or EpisodeSettings(max_steps=max_steps)
        rollout([(t.id, t) for t in tasks], timed, pool, settings, Bank(), finish, max_active=active)
        elapsed = time.perf_counter() - started
    return {
        "seconds": elapsed,
        "turns_per_s": turns / elapsed,
        "turns": turns,
        "tokens_per_s": tokens / timed.seconds,
        "generation_seconds": timed.seconds,
    }


class RandomWalker:
    """Random admissible commands: a long episode to measure prompt growth on."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def identity(self) -> dict:
        return {"policy": "random"}

    def forget(self, key) -> None:
        pass

    def act(self, views):
        return [Completion(format_turn("I will try something.", self.rng.choice(v.admissible))) for v in views]


def prompt_growth(tokenizer, task, checkpoints=(1, 10, 30, 50)) -> list[tuple[int, int, int]]:
    records = []
    with EnvPool(1, max_steps=50) as pool:
        rollout(
            [(task.id, task)],
            RandomWalker(),
            pool,
            EpisodeSettings(max_steps=50),
            Bank(),
            lambda e, u: records.append(e.record()),
        )
    record = records[0]
    rows = []
    transcript = [{"role": "system", "content": record["system"]}, {"role": "user", "content": record["objective"]}]
    for number, turn in enumerate(record["trace"], start=1):
        if number in checkpoints:
            per_turn = len(
                tokenizer.apply_chat_template(
                    [{"role": "system", "content": record["system"]}, {"role": "user", "content": turn["user"]}],
                    tokenize=True,
                    add_generation_prompt=True,
                    return_dict=True,
                )["input_ids"]
            )
            react = len(
                tokenizer.apply_chat_template(transcript, tokenize=True, add_generation_prompt=True, return_dict=True)[
                    "input_ids"
                ]
            )
            rows.append((number, per_turn, react))
        transcript += [{"role": "assistant", "content": turn["response"]}, {"role": "user", "content": turn["result"]}]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model directory (default: build a `small` one)")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=6, help="turns per episode in the throughput runs")
    parser.add_argument(
        "--max-tokens",
        type=int,
        nargs="+",
        default=[32, 128, ModelConfig.max_tokens],
        help=f"response lengths to measure (evoh's default cap, model.max_tokens, is {ModelConfig.max_tokens})",
    )
    parser.add_argument(
        "--dtype", nargs="+", default=["auto"], choices=["auto", "float32", "bfloat16"], help="weights' dtypes to measure"
    )
    parser.add_argument("--in-flight", type=int, nargs="+", help="only measure turns/s with this many train episodes in flight")
    parser.add_argument("--recipe", default="recipes/tiny-cpu.toml", help="model and harness settings for --in-flight")
    args = parser.parse_args()
    if args.in_flight:
        if not args.model:
            parser.error("--in-flight needs --model, a trained model directory such as WS/sft/model")
        in_flight_scaling(args.model, args.in_flight, args.max_steps, Path(args.recipe))
        return
    model = args.model
    if not model:
        from evoh.models.tiny import build

        model = str(Path(tempfile.mkdtemp()) / "small")
        info = build(Path(model), size="small")
        print(f"built a small model: {info['parameters']:,} parameters")
    tasks = load_tasks("valid_seen")[: args.episodes]
    print(f"{len(tasks)} episodes x {args.max_steps} turns on CPU; tokens/s counts generation time, turns/s the whole rollout")
    for dtype in args.dtype:
        for max_tokens in args.max_tokens:
            results = {}
            for name, batch, active in (("lock-step, batched", args.episodes, args.episodes), ("one episode at a time", 1, 1)):
                policy = LocalPolicy(ModelConfig(model=model, max_tokens=max_tokens, batch_size=batch, dtype=dtype))
                results[name] = play(policy, tasks, args.max_steps, active)
            resolved = policy.identity()["dtype"]
            report(f"{resolved}{' (auto)' if dtype == 'auto' else ''}, responses of up to {max_tokens} tokens:", results)
    print("prompt tokens at turn: evoh per-turn prompt (inline harness) vs a ReAct transcript")
    for number, per_turn, react in prompt_growth(policy.tokenizer, tasks[0]):
        print(f"  turn {number:>2}: {per_turn:6d} vs {react:6d}")


def in_flight_scaling(model: str, counts: list[int], max_steps: int, recipe_path: Path) -> None:
    """Turns/s with ``count`` train episodes in flight, played and sampled as stage two's rollouts are (harness
    calls spend steps). Each count plays the first ``count`` games of one spread list, so a larger count
    adds games to a smaller one's rather than swapping them."""
    recipe = load_recipe(recipe_path)
    settings = replace(rollout_settings(recipe), max_steps=max_steps)
    config = rollout_sampling(recipe, model)
    tasks = load_tasks("train", limit=max(counts), spread=True)
    print(
        f"{config.model}: up to {max_steps} turns an episode, guided={config.guided}, "
        f"temperature {config.temperature}, up to {config.max_tokens} tokens"
    )
    for count in counts:
        result = play(LocalPolicy(replace(config, batch_size=count)), tasks[:count], max_steps, count, settings)
        print(
            f"  {count:3d} in flight: {result['turns']:5d} turns in {result['seconds']:6.1f} s "
            f"= {result['turns_per_s']:5.2f} turns/s "
            f"({result['generation_seconds']:.1f} s generating, {result['tokens_per_s']:.0f} tokens/s)"
        )


def report(title: str, results: dict[str, dict[str, float]]) -> None:
    base = results["one episode at a time"]
    print(title)
    for name, r in results.items():
        print(
            f"  {name:<22} {r['tokens_per_s']:8.1f} tokens/s ({r['tokens_per_s'] / base['tokens_per_s']:.1f}x) "
            f"{r['turns_per_s']:7.2f} turns/s ({r['turns_per_s'] / base['turns_per_s']:.1f}x)"
        )


if __name__ == "__main__":
    main()
