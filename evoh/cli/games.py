"""`evoh games`: the games a world holds: ALFWorld's data directory, or MiniHouse's generated splits."""

from __future__ import annotations

from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.recipe_options import RecipeOption, SetOption, flag, resolve
from evoh.env.games import SPLITS, canonical_split
from evoh.env.types import TASK_TYPES
from evoh.env.world import data_input, discover_games
from evoh.errors import EvohError


def games(
    data: flag("env.data", "--data", "-d") = None,
    kind: flag("env.kind") = None,
    split: Annotated[
        str,
        typer.Option("--split", "-s", help="One split (train, valid_seen, valid_unseen, or an eval_* alias); all by default."),
    ] = "",
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Count a world's games per split and task type; for ALFWorld, list every game it cannot play.

    Examples:

        evoh games
        evoh games --kind minihouse
        evoh games --split valid_unseen --json
    """
    env = resolve(recipe, sets, {"env.data": data, "env.kind": kind}).env
    root = data_input(env)
    names = [canonical_split(split)] if split else list(SPLITS)
    found = {}
    for name in names:
        try:
            found[name] = discover_games(env, name)
        except EvohError:
            if split:
                raise
    if not found:
        raise EvohError(
            f"no ALFWorld splits under {root}", hint="point --data or ALFWORLD_DATA at the folder holding json_2.1.1/"
        )
    grammars = sorted({g for result in found.values() for g in result.grammars()})
    report = {
        "kind": env.kind,
        "data": root,
        "grammar": grammars[0] if len(grammars) == 1 else ("mixed: " + ", ".join(grammars) if grammars else "none"),
        "splits": {
            name: {
                "directory": str(result.directory),
                "games": len(result.tasks),
                "by_type": result.by_type(),
                "grammar": result.grammars(),
                "problems": [{"path": p.path, "reason": p.reason} for p in result.problems],
            }
            for name, result in found.items()
        },
        "missing_splits": [name for name in names if name not in found],
    }
    if as_json:
        print_json(report)
        return
    _print_table(report)


def _print_table(report: dict) -> None:
    from rich.table import Table

    out = stdout_console()
    world = (
        "MiniHouse games of size " + report["data"].partition(":")[2]
        if report["kind"] == "minihouse"
        else f"ALFWorld games in {report['data']}"
    )
    table = Table(title=f"{world} (grammar {report['grammar']})", title_justify="left")
    table.add_column("split", no_wrap=True)
    for short in TASK_TYPES.values():
        table.add_column(short, justify="right")
    table.add_column("games", justify="right", style="bold")
    table.add_column("bad", justify="right")
    for name, info in report["splits"].items():
        table.add_row(name, *(str(info["by_type"][t]) for t in TASK_TYPES), str(info["games"]), str(len(info["problems"])))
    out.print(table)
    for name in report["missing_splits"]:
        out.print(f"{name}: no folder found")
    for name, info in report["splits"].items():
        for problem in info["problems"]:
            out.print(f"unplayable {name}/{problem['path']}: {problem['reason']}", markup=False)
