"""How every command talks to people and scripts: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import typer

from evoh.errors import EvohError

F = TypeVar("F", bound=Callable[..., Any])
INTERRUPTED = 130


def debug() -> bool:
    return os.environ.get("EVOH_DEBUG", "") not in ("", "0")


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console():
    """Tables on stdout; when piped, wide enough that no column is cut (rich would assume 80)."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    return console if console.is_terminal else Console(highlight=False, soft_wrap=True, width=160)


def print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def report_error(message: str, hint: str | None = None) -> None:
    err = stderr_console()
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    if hint:
        err.print(f"  hint: {hint}", markup=False)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time, so a replaced stream (tests, pipes) still works."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(self.format(record) + "\n")


def setup_logging() -> None:
    """evoh's own log lines (warnings such as a dropped torn JSONL line) go to stderr."""
    logger = logging.getLogger("evoh")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if debug() else logging.INFO)


def quiet_libraries() -> None:
    """Library noise that tells a user nothing: deprecation notices about arguments evoh does not pass (they
    come from inside transformers), and, off a terminal, the libraries' progress bars, which a log file keeps
    as hundreds of carriage-return lines (evoh prints its own progress there). Set before they are imported."""
    import warnings

    warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed in v6", category=FutureWarning)
    if not sys.stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # the hub's bars, and transformers' at import
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # datasets' map and load bars (SFT's tokenizing)
        # any other tqdm bar (transformers re-enables its own after a trainer's run, e.g. export's "Writing model shards")
        os.environ.setdefault("TQDM_DISABLE", "1")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def guarded(command: F) -> F:
    """Turn an ``EvohError`` into ``error: …`` plus its hint and the error's exit code (traceback only with EVOH_DEBUG=1)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        setup_logging()
        quiet_libraries()
        try:
            return command(*args, **kwargs)
        except EvohError as exc:
            if debug():
                raise
            report_error(exc.message, exc.hint)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            if debug():
                raise
            report_error("interrupted", "rerun the same command to resume where it stopped")
            raise typer.Exit(INTERRUPTED) from None

    return run  # type: ignore[return-value]
