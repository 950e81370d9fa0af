"""`evoh collect`: teacher trajectories through the shared episode loop into ``WS/collect/``."""

from __future__ import annotations

from typing import Any

from evoh.config import Recipe
from evoh.stages.episodes import Callbacks, run_split
from evoh.workspace import Workspace

STAGE = "collect"


def run(recipe: Recipe, workspace: Workspace, callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Collect teacher episodes; returns the summary (also written to ``collect/summary.json``)."""
    return run_split(recipe, workspace, STAGE, recipe.collect, "trajectories.jsonl", callbacks)
