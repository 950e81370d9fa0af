"""`evoh report`: compare eval runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.tables import report_table


def report(
    runs: Annotated[list[Path], typer.Argument(help="Eval run folders (WS/eval/<name>) or their summary.json files.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where report.png and report.md go.")] = Path("report"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Put eval runs side by side: a table with McNemar's test game by game, a PNG chart and a Markdown file.

    Examples:

        evoh report runs/tiny/eval/sft-valid_seen runs/tiny/eval/grpo-valid_seen
        evoh report runs/*/eval/grpo-valid_unseen --out reports/unseen
    """
    from evoh.inspection import report as stage

    result = stage.run(runs, out)
    if as_json:
        print_json(result)
        return
    stdout_console().print(report_table(result))
