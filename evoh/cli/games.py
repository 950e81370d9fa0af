"""`evoh games`: what an ALFWorld data directory holds."""

from __future__ import annotations

from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.env.games import SPLITS, canonical_split, data_root, discover
from evoh.env.types import TASK_TYPES
from evoh.errors import EvohError


def games(
    data: Annotated[str, typer.Option("--data", "-d", help="ALFWorld data directory (default: $ALFWORLD_DATA).")] = "",
    split: Annotated[
        str, typer.Option("--split", "-s", help="One split (train, valid_seen, valid_unseen, or an eval_* alias); all by default.")
    ] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    root = data_root(data)
    names = [canonical_split(split)] if split else list(SPLITS)
    found = {}
    for name in names:
        try:
            found[name] = discover(name, root)
        except EvohError:
            if split:
                raise
    if not found:
        raise EvohError(f"no ALFWorld splits under {root}", hint="point --data or ALFWORLD_DATA at the folder holding json_2.1.1/")
    grammars = sorted({g for result in found.values() for g in result.grammars()})
    report = {
        "data": str(root),
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
    table = Table(title=f"ALFWorld games in {report['data']} (grammar {report['grammar']})", title_justify="left")
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
