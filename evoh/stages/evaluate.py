"""`evoh eval`: any policy through the shared episode loop, measured the way the paper measures.

Writes ``eval/<name>/episodes.jsonl`` (resumable by fingerprint), ``summary.json`` (success overall and
per task type, steps, turns, meta-actions per episode by verb, invalid-action rate, tokens, and the
full protocol) and ``stage.json``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from evoh.config import Recipe
from evoh.runs.episodes import Callbacks, model_settings, play_settings, run_split
from evoh.workspace import Workspace


def run_name(recipe: Recipe) -> str:
    """``--name``, or one made from what sets the run apart: policy, split, mode and ablations."""
    e, h = recipe.eval, recipe.harness
    if e.name:
        return e.name
    parts = [e.policy, e.split] + ([h.mode] if h.mode != "inline" else [])
    parts += [f"no-{m}" for m in ("belief", "plan", "experience") if not getattr(h, m)]
    return "-".join(parts)


def settings(recipe: Recipe, workspace: Workspace) -> dict[str, Any]:
    """What an evaluation's episodes depend on: `evoh run` keys it on this, and stage.json records it. The
    weights are named by their paths relative to the workspace, so a moved or copied workspace does not measure
    the same weights again (what they hold is keyed by the stage that made them)."""
    where = {"model": workspace.relative(recipe.model.model), "adapter": workspace.relative(recipe.model.adapter)}
    return {
        **play_settings(recipe),
        "eval": dataclasses.asdict(recipe.eval),
        "model": {**model_settings(recipe, recipe.eval.policy), **where},
    }


def run(recipe: Recipe, workspace: Workspace, callbacks: Callbacks | None = None) -> dict[str, Any]:
    name = run_name(recipe)
    declared = settings(recipe, workspace)
    return run_split(recipe, workspace, f"eval/{name}", recipe.eval, callbacks, {"name": name}, declared=declared)
