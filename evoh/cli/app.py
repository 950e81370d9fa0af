"""The one place where every `evoh` command is registered.

Command modules import only light things at the top, so `evoh --help` and `evoh --version` start
without torch, transformers or alfworld.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from evoh import __version__
from evoh.cli import (
    collect,
    config_cmd,
    evaluate,
    export,
    games,
    grpo,
    model,
    play,
    plot,
    recipes_cmd,
    refine,
    report,
    run_cmd,
    sft,
    show,
    view,
)
from evoh.cli.output import guarded
from evoh.cli.recipe_options import show_recipe_in_help

app = typer.Typer(
    name="evoh",
    help="Train small language models to act as long-horizon agents with a Belief/Progress/Experience harness.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evoh {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Pipeline: collect → refine → sft → grpo → eval → export, each reading and writing a workspace directory."""


app.command("games")(guarded(games.games))
app.command("play")(guarded(play.play))
app.command("collect")(guarded(collect.collect))
app.command("refine")(guarded(refine.refine))
app.command("sft")(guarded(sft.sft))
app.command("grpo")(guarded(grpo.grpo))
app.command("plot")(guarded(plot.plot))
app.command("eval")(guarded(evaluate.evaluate))
app.command("export")(guarded(export.export))
app.command("report")(guarded(report.report))
app.command("show")(guarded(show.show))
app.command("view")(guarded(view.view))
app.command("run")(guarded(run_cmd.run))
model_app = typer.Typer(help="Local base models.", no_args_is_help=True)
model_app.command("init")(guarded(model.init))
model_app.command("import")(guarded(model.import_))
app.add_typer(model_app, name="model")
app.command("recipes")(guarded(recipes_cmd.recipes))
app.command("config")(guarded(config_cmd.config))


def _leave_process_group() -> None:
    """End a torchrun/accelerate process group before the interpreter does: left to exit, gloo's threads can
    outlive it and abort the process ("terminate called without an active exception") after the work is done."""
    torch = sys.modules.get("torch")  # never import torch just to find out: `evoh --help` stays light
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def main() -> None:
    show_recipe_in_help(sys.argv[1:])
    try:
        app(prog_name="evoh")
    finally:
        _leave_process_group()
