"""`evoh view`: runs' episodes as one HTML page to read in a browser."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json


def view(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help=(
                "Eval run folders (WS/eval/<name>), WS/collect, or their episodes files; "
                "two or more are shown side by side game by game."
            )
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("view.html"),
    prompts: Annotated[
        bool,
        typer.Option(
            "--prompts",
            help="Keep every turn's whole prompt in the page (by default only the first turn's; the others show what changed).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was written as JSON.")] = False,
) -> None:
    """Write one HTML page of runs' episodes, turn by turn, side by side game by game.

    Examples:

        evoh view runs/tiny/eval/sft-valid_seen runs/tiny/eval/grpo-valid_seen --out compare.html
    """
    from evoh.inspection import page

    result = page.write(runs, out, prompts)
    if as_json:
        print_json(result)
        return
    shown = ", ".join(f"{r['label']} ({r['episodes']} episodes)" for r in result["runs"])
    typer.echo(
        f"wrote {out} ({result['bytes'] / 1e6:.1f} MB): {result['games']} games of {shown}; "
        f"open {out.resolve().as_uri()} in a browser"
    )
