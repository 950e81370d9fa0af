"""`evoh eval`: any policy through the shared episode loop, measured the way the paper measures.

Writes ``eval/<name>/episodes.jsonl`` (resumable by fingerprint), ``summary.json`` (success overall and
per task type, steps, turns, meta-actions per episode by verb, invalid-action rate, tokens, and the
full protocol) and ``stage.json``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from evoh import __version__
from evoh.config import Recipe, recipe_dict
from evoh.env.games import data_root, load_tasks
from evoh.harness.reward import REWARD_VERSION
from evoh.policy.factory import build_policy
from evoh.stages.episodes import Callbacks, check_same_run, episode_settings, play_tasks, policy_key
from evoh.stages.summary import summarize
from evoh.workspace import Workspace, atomic_write_json, file_sha256


def run_name(recipe: Recipe) -> str:
    """``--name``, or one made from what sets the run apart: policy, split, mode and ablations."""
    e, h = recipe.eval, recipe.harness
    if e.name:
        return e.name
    parts = [e.policy, e.split] + ([h.mode] if h.mode != "inline" else [])
    parts += [f"no-{m}" for m in ("belief", "plan", "experience") if not getattr(h, m)]
    return "-".join(parts)


def run(recipe: Recipe, workspace: Workspace, callbacks: Callbacks | None = None) -> dict[str, Any]:
    e = recipe.eval
    name = run_name(recipe)
    stage = f"eval/{name}"
    data = data_root(recipe.env.data or None)
    tasks = load_tasks(e.split, data, e.limit or None)
    settings = episode_settings(recipe)
    policy = build_policy(e.policy, recipe, e.seed)
    run_key = {
        "env": {k: v for k, v in dataclasses.asdict(recipe.env).items() if k not in ("workers", "step_timeout")},
        "harness": dataclasses.asdict(recipe.harness),
        "eval": {k: v for k, v in dataclasses.asdict(e).items() if k not in ("limit", "max_active")},
        "policy": policy_key(policy.identity()),
    }
    started = time.time()
    with workspace.writing(stage) as directory:
        check_same_run(directory, run_key)
        records, bank = play_tasks(
            tasks, policy, settings, recipe.env, directory, "episodes.jsonl", start_bank=e.bank,
            batch_size=e.batch_size, max_active=e.max_active, freeze_bank=e.freeze_bank, callbacks=callbacks,
        )
        summary = {
            **summarize(records),
            "name": name,
            "split": e.split,
            "protocol": {
                **settings.protocol(),
                "grammar": sorted({t.grammar for t in tasks}),
                "bank": bank.digest(),
                "start_bank": e.bank or None,
                "freeze_bank": e.freeze_bank,
                "policy": policy.identity(),
                "reward": REWARD_VERSION,
            },
            "policy": policy.identity(),
            "evoh_version": __version__,
        }
        atomic_write_json(directory / "summary.json", summary)
        workspace.finish(
            stage,
            {
                "config": recipe_dict(recipe),
                "inputs": {"data": str(data), "bank": {"path": e.bank, "sha256": file_sha256(Path(e.bank))} if e.bank else None},
                "seed": e.seed,
                "seconds": time.time() - started,
                "episodes": summary["episodes"],
                "success": summary["success"],
            },
        )
    return summary
