"""Progress of commands that play episodes, on stderr: a bar with rate and ETA on a terminal, and off one
(a log file, a pipe, a batch job) a plain heartbeat line at most every ``HEARTBEAT_SECONDS`` and at the end."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from evoh.cli.output import stderr_console

# off a terminal, the longest a run stays silent while episodes finish: a log read with `tail -f` moves
HEARTBEAT_SECONDS = 30.0


class Heartbeat:
    """The tally of a run's episodes, and off a terminal its ``eval 16/140 won 9 (56%) 3.1 min`` lines: one when
    due, never more often than ``every`` seconds (``printing`` false: the tally alone, for a terminal's bar).
    Wins and their share count this run's episodes (a resumed run's earlier outcomes are not re-read)."""

    def __init__(self, label: str, console, every: float = HEARTBEAT_SECONDS, printing: bool = True) -> None:
        self.label, self.console, self.every, self.printing = label, console, every, printing
        self.start = self.last = time.monotonic()
        self.done = self.won = self.played = 0
        self.total: int | None = None

    def started(self, total: int, already: int) -> None:
        self.total, self.done = total, already
        if already:
            self.line(f"resuming, {already} of {total} already played")

    def finished(self, won: bool) -> None:
        self.done += 1
        self.played += 1
        self.won += won
        now = time.monotonic()
        if now - self.last >= self.every or self.done == self.total:
            self.last = now
            share = f" ({100 * self.won / self.played:.0f}%)"
            self.line(f"{self.done}/{self.total} won {self.won}{share} {(now - self.start) / 60:.1f} min")

    def per_minute(self) -> float:
        """Episodes this run has played per minute."""
        return self.played / max(time.monotonic() - self.start, 1e-9) * 60

    def line(self, text: str) -> None:
        if self.printing:
            self.console.print(f"{self.label} {text}", markup=False, highlight=False)


class PhaseTicker:
    """Off a terminal, the phase a long step is in (``grpo update 3/8: rollouts …``) as a line when it begins, and
    ``… still, 2.0 min`` every ``every`` seconds while it lasts, from a daemon thread; a context manager."""

    def __init__(self, label: str, console, every: float = 2 * HEARTBEAT_SECONDS) -> None:
        self.label, self.console, self.every = label, console, every
        self.current: str | None = None
        self.since = time.monotonic()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._tick, name=f"evoh-{label}-heartbeat", daemon=True)

    def __enter__(self) -> PhaseTicker:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def phase(self, what: str | None) -> None:
        """Begin ``what`` (None: between phases, nothing to repeat)."""
        with self.lock:
            self.current, self.since = what, time.monotonic()
        if what:
            self.console.print(f"{self.label} {what}", markup=False, highlight=False)

    def _tick(self) -> None:
        while not self.stop.wait(self.every):
            with self.lock:
                what, since = self.current, self.since
            if what:
                self.console.print(
                    f"{self.label} {what}: still, {(time.monotonic() - since) / 60:.1f} min", markup=False, highlight=False
                )


@contextlib.contextmanager
def episode_bar(label: str) -> Iterator[object]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from evoh.runs.episodes import Callbacks

    console = stderr_console()
    tally = Heartbeat(label, console, printing=not console.is_terminal)
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("won {task.fields[won]}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("episodes", total=None, won=0, rate="")

        def started(total: int, already: int) -> None:
            bar.update(task, total=total, completed=already)
            tally.started(total, already)

        def finished(record: dict) -> None:
            tally.finished(bool(record["won"]))
            bar.update(task, advance=1, won=tally.won, rate=f"{tally.per_minute():.1f}/min")

        yield Callbacks(started, finished)
