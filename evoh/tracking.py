"""Experiment trackers that SFT and GRPO can send their figures to (``sft.report_to``, ``grpo.report_to``):
TensorBoard and trackio log offline to local files, Weights & Biases to its service (or offline with
``WANDB_MODE=offline``). None is required; a name is checked before a stage starts, so a missing package
stops the run with the command that installs it rather than after the first hours of training."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evoh.errors import EvohError

TRACKERS = {  # name -> (the module it needs, how to get it)
    "tensorboard": ("tensorboard", "pip install 'evoh[track]'"),
    "trackio": ("trackio", "pip install 'evoh[track]'"),
    "wandb": ("wandb", "pip install wandb, then `wandb login` (or set WANDB_MODE=offline)"),
}
PROJECT = "evoh"  # trackio's and W&B's project; each stage's run is named after its workspace


def check_trackers(names: Iterable[str], setting: str) -> None:
    """Every name is a tracker evoh knows and its package is installed, or a one-line error naming the fix."""
    for name in names:
        if name not in TRACKERS:
            raise EvohError(
                f"{setting} names {name!r}, which is not a tracker evoh knows",
                hint=f"use any of {', '.join(TRACKERS)}, or [] for none",
            )
        module, install = TRACKERS[name]
        if importlib.util.find_spec(module) is None:
            raise EvohError(f"{setting} names {name}, but the {module} package is not installed", hint=install)


def run_name(workspace_root: Path, stage: str) -> str:
    """``<workspace folder>/<stage>``: runs of one workspace sort together in a tracker's list."""
    return f"{workspace_root.resolve().name}/{stage}"


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record's leaves keyed ``outer/inner``, as trackers name them."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def scalars(values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers in a (nested) metrics record: what a tracker can plot."""
    return {name: float(value) for name, value in flatten(values).items() if isinstance(value, int | float)}


def settings_record(values: Mapping[str, Any]) -> dict[str, Any]:
    """A stage's settings flattened to the plain values trackers store as a run's configuration."""
    return {name: v if isinstance(v, str | int | float | bool) else str(v) for name, v in flatten(values).items()}


def close_trackio() -> None:
    """Finish trackio's current run now, its farewell on stderr. TRL's callback and accelerate's tracker finish
    their run but leave it trackio's current one, which trackio finishes again at exit, printing onto stdout
    after a command's result."""
    trackio = sys.modules.get("trackio")
    if trackio is None:
        return
    with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(RuntimeError):  # RuntimeError: no current run
        trackio.finish()
