"""Run `evoh` in-process the way a shell would, for the CLI tests."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer
from typer.testing import CliRunner

from evoh.cli.app import app

_runner = CliRunner()


def evoh(*args: str, **kwargs):
    """``evoh ARGS…``; the result has ``exit_code``, ``stdout`` and ``stderr`` apart."""
    return _runner.invoke(app, list(args), prog_name="evoh", **kwargs)


def refined_workspace(ws: Path, data: Path, games: int, val_fraction: str, *collect_args: str) -> Path:
    """``ws`` after expert episodes on the first ``games`` valid_seen games and `evoh refine`: SFT data to train on."""
    assert (
        evoh(
            "collect", "-w", str(ws), "--split", "valid_seen", "--limit", str(games), "--data", str(data), *collect_args
        ).exit_code
        == 0
    )
    assert evoh("refine", "-w", str(ws), "--val-fraction", val_fraction).exit_code == 0
    return ws


def commands() -> dict:
    """Every command of the app by its name as typed (``eval``, ``model init``), as click commands."""
    root = typer.main.get_command(app)
    found = {}
    for name, command in root.commands.items():
        if hasattr(command, "commands"):  # a group: its subcommands
            found.update({f"{name} {sub}": c for sub, c in command.commands.items()})
        else:
            found[name] = command
    return found


def parse_command_line(line: str, known: dict | None = None) -> str:
    """Parse a shell line that runs evoh (also ``accelerate launch … -m evoh …``) the way the app would, without
    running it: an unknown command or option, or a value of the wrong type, raises. Returns the command's name."""
    known = known or commands()
    words = shlex.split(line)
    words = words[words.index("evoh") + 1 :]
    named = " ".join(words[:2]) if " ".join(words[:2]) in known else words[0]
    if named not in known:
        raise ValueError(f"{line!r} names no evoh command")
    known[named].make_context(f"evoh {named}", words[len(named.split()) :])
    return named
