"""What a GRPO run reads from the workspace (the weights it starts from, the bank, refine's examples), each
refused before anything loads when it is missing, and what those inputs hold, for the run's key."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoh.config import Recipe
from evoh.errors import EvohError
from evoh.models.hub import model_directory
from evoh.runs.episodes import resolve_bank
from evoh.runs.key import file_key, weights_key
from evoh.workspace import Workspace

STAGE = "grpo"


@dataclass(frozen=True)
class Inputs:
    """What the run reads from the workspace, refused before anything loads when missing."""

    base: Path  # the base model directory
    adapter: Path | None  # the adapter to continue (the SFT stage's), or None for a fresh one
    bank: Path | None  # the Experience the rollouts start from; None: an empty bank
    anchor: Path | None  # refine's training examples, with grpo.sft_weight
    heldout: Path | None  # refine's held-out examples, the drift's, where validation runs and the workspace has them


def run_inputs(read: Inputs) -> dict[str, Any]:
    """What the inputs hold, for the run's key: a run resumes only on the weights, bank and examples it began with."""
    return {
        "base_model": weights_key(read.base),
        "start_adapter": weights_key(read.adapter),
        "start_bank": file_key(read.bank),
        "anchor": file_key(read.anchor),  # the held-out examples are left out: they feed the drift figure alone
    }


def read_inputs(recipe: Recipe, workspace: Workspace) -> Inputs:
    g = recipe.grpo
    base, adapter = starting_point(recipe, workspace)
    heldout = workspace.examples("val")
    return Inputs(
        base,
        adapter,
        resolve_bank(g.bank, workspace, STAGE),
        sft_examples_file(workspace) if g.sft_weight > 0 else None,
        heldout if g.val_every and g.drift_examples and heldout.exists() else None,
    )


def starting_point(recipe: Recipe, workspace: Workspace) -> tuple[Path, Path | None]:
    """(base model directory, adapter to continue or None)."""
    g = recipe.grpo
    if g.start == "sft":
        base, adapter = workspace.trained_weights("sft")  # a fully fine-tuned model gets a fresh adapter
        base = model_directory(g.model, "grpo.model") if g.model else base
    else:
        if not g.model:
            raise EvohError(
                "grpo.start = 'none' needs a base model", hint="pass --model DIR (an exported SFT model, or evoh model init's)"
            )
        base, adapter = model_directory(g.model, "grpo.model"), None
    if not (base / "config.json").exists():
        raise EvohError(f"{base} is not a model directory", hint="pass --model DIR")
    return base, adapter


def sft_examples_file(workspace: Workspace) -> Path:
    """refine's training examples, the anchor of ``grpo.sft_weight``; refused before anything loads when absent."""
    path = workspace.examples("train")
    if not path.exists():
        raise EvohError(
            f"grpo.sft_weight needs the SFT examples at {path}", hint="run `evoh refine` first, or set grpo.sft_weight = 0"
        )
    return path
