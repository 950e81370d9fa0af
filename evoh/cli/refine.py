"""`evoh refine`: teacher episodes into SFT files, with an account of everything dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.recipe_options import RecipeOption, SetOption, WorkspaceOption, resolve


def refine(
    workspace: WorkspaceOption,
    inputs: Annotated[
        list[Path] | None, typer.Option("--input", "-i", help="trajectories.jsonl files (default: WS/collect/).")
    ] = None,
    min_score: Annotated[float | None, typer.Option("--min-score", help="Keep episodes scoring at least this (1: won).")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", min=0, help="Drop longer episodes (0: no cap).")] = None,
    max_prompt_chars: Annotated[
        int | None, typer.Option("--max-prompt-chars", min=0, help="Drop turns with longer prompts.")
    ] = None,
    val_fraction: Annotated[float | None, typer.Option("--val-fraction", min=0.0, max=0.9, help="Episodes held out.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the train/val split.")] = None,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report's counts as JSON.")] = False,
) -> None:
    from evoh.stages import refine as stage
    from evoh.workspace import Workspace

    resolved = resolve(
        recipe,
        sets,
        refine__min_score=min_score,
        refine__max_turns=max_turns,
        refine__max_prompt_chars=max_prompt_chars,
        refine__val_fraction=val_fraction,
        refine__seed=seed,
    )
    report = stage.run(resolved, Workspace(workspace), inputs)
    counts = {"episodes": report["episodes"], "turns": report["turns"]}
    if as_json:
        print_json(counts)
        return
    from rich.table import Table

    table = Table(title=f"refine: {workspace}/refine/", title_justify="left")
    for column in ("", "input", "kept", "train", "val", "dropped (reason: count)"):
        table.add_column(column, justify="left" if column in ("", "dropped (reason: count)") else "right")
    for unit, row in counts.items():
        dropped = "; ".join(f"{reason}: {n}" for reason, n in row["dropped"].items()) or "none"
        table.add_row(unit, str(row["input"]), str(row["kept"]), str(row["train"]), str(row["val"]), dropped)
    stdout_console().print(table)
