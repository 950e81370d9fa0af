"""`evoh refine`: teacher episodes into SFT files, with an account of everything dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.recipe_options import RecipeOption, SetOption, WorkspaceOption, flag, flags_given, resolve


def refine(
    workspace: WorkspaceOption,
    inputs: Annotated[
        list[Path] | None, typer.Option("--input", "-i", help="trajectories.jsonl files (default: WS/collect/).")
    ] = None,
    min_score: flag("refine.min_score") = None,
    max_turns: flag("refine.max_turns") = None,
    max_prompt_chars: flag("refine.max_prompt_chars") = None,
    val_fraction: flag("refine.val_fraction") = None,
    seed: flag("refine.seed") = None,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report's counts as JSON.")] = False,
) -> None:
    """Turn teacher episodes into SFT train/val files (WS/refine/) in the chat format TRL reads.

    Prints an account of everything dropped and why.

    Examples:

        evoh refine -w runs/tiny
        evoh refine -w runs/tiny --val-fraction 0.05 --max-turns 40
    """
    from evoh.stages import refine as stage
    from evoh.workspace import Workspace

    given = flags_given(refine, locals())
    resolved = resolve(recipe, sets, given)
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
