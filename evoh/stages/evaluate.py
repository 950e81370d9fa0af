"""`evoh eval`: any policy through the shared episode loop, measured the way the paper measures.

Writes ``eval/<name>/episodes.jsonl`` (resumable by fingerprint), ``summary.json`` (success overall and
per task type, steps, turns, meta-actions per episode by verb, invalid-action rate, tokens, and the
full protocol) and ``stage.json``.
"""

from __future__ import annotations

from typing import Any

from evoh.config import Recipe
from evoh.runs.episodes import Callbacks, run_split
from evoh.workspace import Workspace


def run_name(recipe: Recipe) -> str:
    """``--name``, or one made from what sets the run apart: policy, split, mode and ablations."""
    e, h = recipe.eval, recipe.harness
    if e.name:
        return e.name
    parts = [e.policy, e.split] + ([h.mode] if h.mode != "inline" else [])
    parts += [f"no-{m}" for m in ("belief", "plan", "experience") if not getattr(h, m)]
    return "-".join(parts)


def run(recipe: Recipe, workspace: Workspace, callbacks: Callbacks | None = None) -> dict[str, Any]:
    name = run_name(recipe)
    return run_split(recipe, workspace, f"eval/{name}", recipe.eval, callbacks, {"name": name})
