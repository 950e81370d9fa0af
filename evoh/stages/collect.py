"""`evoh collect`: teacher trajectories through the shared episode loop into ``WS/collect/``."""

from __future__ import annotations

import dataclasses
from typing import Any

from evoh.config import Recipe
from evoh.errors import EvohError
from evoh.policy.base import Policy
from evoh.policy.expert import style_key
from evoh.runs.episodes import Callbacks, model_settings, play_settings, run_split
from evoh.workspace import Workspace

STAGE = "collect"


def build_collector(recipe: Recipe) -> Policy:
    """The policy that plays; with ``collect.label = "expert"`` it plays and the expert labels every turn."""
    from evoh.policy.factory import build_policy

    c = recipe.collect
    player = build_policy(c.policy, recipe, c.seed)
    if not c.label:
        return player
    if c.policy == "expert":
        raise EvohError(
            "collect.label=expert relabels another player's turns, but the expert is the player here",
            hint="pass --policy local --model DIR (the student) with --label expert, or drop --label",
        )
    from evoh.policy.labelled import LabelledPolicy

    # a label is what the student should have written: never a deliberate slip
    labeller = build_policy("expert", dataclasses.replace(recipe, expert=dataclasses.replace(recipe.expert, slip=0.0)), c.seed)
    return LabelledPolicy(player, labeller)


def settings(recipe: Recipe, workspace: Workspace) -> dict[str, Any]:
    """What collect's episodes depend on: `evoh run` keys the stage on it, and stage.json records it."""
    declared = {
        **play_settings(recipe),
        "expert": style_key(recipe.expert),
        "collect": dataclasses.asdict(recipe.collect),
    }
    if recipe.collect.policy != "expert":
        declared["model"] = model_settings(recipe, recipe.collect.policy)
    return declared


def inputs(recipe: Recipe) -> list[str]:
    """The stages whose outputs it reads: none."""
    return []


def run(recipe: Recipe, workspace: Workspace, callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Collect teacher episodes; returns the summary (also written to ``collect/summary.json``)."""
    policy = build_collector(recipe)
    return run_split(recipe, workspace, STAGE, recipe.collect, callbacks, policy=policy, declared=settings(recipe, workspace))
