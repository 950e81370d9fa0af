"""`evoh report`: compare eval runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console


def report(
    runs: Annotated[list[Path], typer.Argument(help="Eval run folders (WS/eval/<name>) or their summary.json files.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where report.png and report.md go.")] = Path("report"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    from rich.table import Table

    from evoh.stages import report as stage

    result = stage.run(runs, out)
    if as_json:
        print_json(result)
        return
    table = Table(title="evaluation runs (success %)", title_justify="left")
    for column in ("run", "split", *stage.COLUMNS, "avg", "env steps", "meta/ep"):
        table.add_column(column, justify="left" if column in ("run", "split") else "right")
    for row in result["rows"]:
        cells = ["-" if row[c] is None else f"{row[c]:.1f}" for c in (*stage.COLUMNS, "avg")]
        table.add_row(row["run"], row["split"], *cells, f"{row['env_steps']:.1f}", f"{row['meta']:.2f}")
    table.caption = f"chart: {result['png']}   markdown: {result['markdown']}"
    table.caption_justify = "left"
    stdout_console().print(table)
