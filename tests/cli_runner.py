"""Run `evoh` in-process the way a shell would, for the CLI tests."""

from __future__ import annotations

from typer.testing import CliRunner

from evoh.cli.app import app

_runner = CliRunner()


def evoh(*args: str, **kwargs):
    """``evoh ARGS…``; the result has ``exit_code``, ``stdout`` and ``stderr`` apart."""
    return _runner.invoke(app, list(args), prog_name="evoh", **kwargs)
