"""The progress bar of commands that play episodes (on stderr, and only on a terminal)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from evoh.cli.output import stderr_console


@contextlib.contextmanager
def episode_bar(label: str) -> Iterator[object]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from evoh.stages.episodes import Callbacks

    console = stderr_console()
    with Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("won {task.fields[won]}"),
        TimeElapsedColumn(), console=console, disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("episodes", total=None, won=0)
        won = 0

        def started(total: int, already: int) -> None:
            bar.update(task, total=total, completed=already)

        def finished(record: dict) -> None:
            nonlocal won
            won += bool(record["won"])
            bar.update(task, advance=1, won=won)

        yield Callbacks(started, finished)
