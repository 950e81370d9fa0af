"""Run `evoh` in-process the way a shell would, for the CLI tests."""

from __future__ import annotations

from pathlib import Path

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
