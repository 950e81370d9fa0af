"""The options every stage command shares: the workspace, a recipe, and --set overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from evoh.config import Recipe, load_recipe

WorkspaceOption = Annotated[Path, typer.Option("--workspace", "-w", help="The workspace directory of this experiment.")]
RecipeOption = Annotated[Path | None, typer.Option("--recipe", "-r", help="A TOML recipe (default: built-in defaults).")]
SetOption = Annotated[list[str] | None, typer.Option("--set", help="Override a setting: section.key=value (repeatable).")]
ModelOption = Annotated[str | None, typer.Option("--model", "-m", help="openai: the model's name; local: a model directory.")]
BaseUrlOption = Annotated[str | None, typer.Option("--base-url", help="openai: the endpoint, e.g. http://localhost:8000/v1.")]
AdapterOption = Annotated[str | None, typer.Option("--adapter", help="local: a PEFT adapter directory on top of --model.")]
LimitOption = Annotated[
    int | None, typer.Option("--limit", "-n", min=0, help="N games of the split, evenly spaced over its task types (0: all).")
]
SpreadOption = Annotated[
    bool | None,
    typer.Option(
        "--spread/--first", help="With --limit: N games spread over every task type (default), or the first N in id order."
    ),
]
GamesOption = Annotated[
    str | None,
    typer.Option("--games", help="A file of task ids, one per line (task.id in episodes.jsonl): only those games of the split."),
]
WorkersOption = Annotated[int | None, typer.Option("--workers", "-k", min=1, help="Engine processes.")]
ModeOption = Annotated[str | None, typer.Option("--mode", help="Harness mode: inline, always_on or env_only.")]
MaxStepsOption = Annotated[int | None, typer.Option("--max-steps", min=1, help="Environment steps per episode.")]
BankOption = Annotated[
    str | None,
    typer.Option(
        "--bank", help="Start from this Experience bank: a bank.json, or collect / grpo for that stage's bank in the workspace."
    ),
]
FreezeBankOption = Annotated[bool | None, typer.Option("--freeze-bank", help="Never consolidate the bank.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
DataOption = Annotated[
    str | None, typer.Option("--data", "-d", help="ALFWorld data directory (default: $ALFWORLD_DATA, else ~/.cache/alfworld).")
]
KindOption = Annotated[
    str | None, typer.Option("--kind", help="The world (env.kind): alfworld, or minihouse (procedural, no data needed).")
]


def resolve(recipe: Path | None, sets: list[str] | None, **options: Any) -> Recipe:
    """Recipe, then the command's own options (``section__key=value``, None = not given), then --set."""
    given = [f"{name.replace('__', '.')}={_toml(value)}" for name, value in options.items() if value is not None]
    return load_recipe(recipe, given + list(sets or []))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
