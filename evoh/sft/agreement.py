"""The trained model's greedy action on held-out turns against the teacher's: SFT's early warning."""

from __future__ import annotations

from typing import Any


def action_kind(turn) -> str:
    """A teacher action's class for the per-kind figures: the meta verb, or the command's first word."""
    if turn.kind == "meta":
        return turn.verb
    return turn.action.split(" ", 1)[0] if turn.action else turn.kind


def action_agreement(tokenizer, model, examples: list[dict[str, Any]], batch_size: int = 16) -> dict[str, Any]:
    """How often the trained model's greedy action equals the teacher's on held-out turns, overall and by kind.

    Cheaper than an evaluation on games and an early warning: an episode needs many right actions in a row,
    so a model that agrees with its teacher on few turns cannot win many games."""
    from evoh.config import ModelConfig
    from evoh.harness.turns import parse_turn
    from evoh.policy.local import LocalPolicy

    policy = LocalPolicy(ModelConfig(temperature=0.0, max_tokens=128, batch_size=batch_size), loaded=(tokenizer, model))
    prompts = [tokenizer.apply_chat_template(e["messages"][:-1], tokenize=False, add_generation_prompt=True) for e in examples]
    was_training = model.training
    model.eval()
    try:
        completions = policy.complete(prompts)
    finally:
        model.train(was_training)
    by_kind: dict[str, list[int]] = {}
    for example, completion in zip(examples, completions, strict=True):
        wanted = parse_turn(example["messages"][-1]["content"])
        counts = by_kind.setdefault(action_kind(wanted), [0, 0])
        counts[0] += parse_turn(completion.text).action == wanted.action
        counts[1] += 1
    matched = sum(c[0] for c in by_kind.values())
    return {
        "turns": len(examples),
        "matched": matched,
        "accuracy": matched / len(examples) if examples else 0.0,
        "by_kind": {kind: {"matched": m, "turns": n} for kind, (m, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])},
    }
