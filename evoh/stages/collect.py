"""`evoh collect`: teacher trajectories through the shared episode loop into ``WS/collect/``."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from evoh import __version__
from evoh.config import Recipe, recipe_dict, recipe_toml
from evoh.env.games import data_root, load_tasks
from evoh.harness.reward import REWARD_VERSION
from evoh.policy.factory import build_policy
from evoh.stages.episodes import Callbacks, check_same_run, episode_settings, play_tasks
from evoh.stages.summary import summarize
from evoh.workspace import RECIPE_FILE, Workspace, atomic_write_bytes, atomic_write_json, file_sha256

STAGE = "collect"


def run(recipe: Recipe, workspace: Workspace, callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Collect teacher episodes; returns the summary (also written to ``collect/summary.json``)."""
    c = recipe.collect
    data = data_root(recipe.env.data or None)
    tasks = load_tasks(c.split, data, c.limit or None)
    settings = episode_settings(recipe)
    policy = build_policy(c.policy, recipe, c.seed)
    run_key = recipe_dict(recipe) | {"collect": {k: v for k, v in dataclasses.asdict(c).items() if k != "limit"}}
    run_key.pop("eval", None)
    started = time.time()
    with workspace.writing(STAGE) as directory:
        check_same_run(directory, run_key)
        atomic_write_bytes(workspace.root / RECIPE_FILE, recipe_toml(recipe).encode())
        records, bank = play_tasks(
            tasks, policy, settings, recipe.env, directory, "trajectories.jsonl", start_bank=c.bank,
            batch_size=c.batch_size, max_active=c.max_active, freeze_bank=c.freeze_bank, callbacks=callbacks,
        )
        summary = {
            **summarize(records),
            "split": c.split,
            "protocol": settings.protocol(),
            "policy": policy.identity(),
            "reward": REWARD_VERSION,
            "bank": bank.digest(),
            "evoh_version": __version__,
        }
        atomic_write_json(directory / "summary.json", summary)
        workspace.finish(
            STAGE,
            {
                "config": recipe_dict(recipe),
                "inputs": {"data": str(data), "bank": {"path": c.bank, "sha256": file_sha256(Path(c.bank))} if c.bank else None},
                "seed": c.seed,
                "seconds": time.time() - started,
                "episodes": summary["episodes"],
                "success": summary["success"],
                "grammar": summary["grammar"],
            },
        )
    return summary
