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


app.command("games", help="Count a world's games per split and task type (ALFWorld: and list every unplayable one).")(
    guarded(games.games)
)
app.command("play", help="Play one game (ALFWorld or MiniHouse) in the terminal, or replay a file of commands.")(
    guarded(play.play)
)
app.command("collect", help="Play teacher episodes on a split and write WS/collect/ (resumable).")(guarded(collect.collect))
app.command("refine", help="Turn teacher episodes into SFT train/val files in the chat format TRL reads.")(guarded(refine.refine))
app.command("sft", help="Stage one: LoRA/QLoRA fine-tuning on WS/refine/ with TRL's SFTTrainer (resumable).")(guarded(sft.sft))
app.command("grpo", help="Stage two: cost-aware multi-turn GRPO over whole episodes (resumable).")(guarded(grpo.grpo))
app.command("plot", help="Draw a GRPO run's harness-annealing and success curves (PNG).")(guarded(plot.plot))
app.command("eval", help="Measure a policy on a split: success per task type and harness usage (resumable).")(
    guarded(evaluate.evaluate)
)
app.command("export", help="Merge the trained adapter into full weights: a model directory verified against it.")(
    guarded(export.export)
)
app.command("report", help="Put eval runs side by side: a table, a PNG chart and a Markdown file.")(guarded(report.report))
app.command("show", help="List a file's episodes (filter them, write their game list), or print one turn by turn.")(
    guarded(show.show)
)
app.command("view", help="Write one HTML page of runs' episodes, turn by turn, side by side game by game.")(guarded(view.view))
app.command("run", help="Run a recipe's pipeline end to end, skipping stages already done with its settings.")(
    guarded(run_cmd.run)
)
model_app = typer.Typer(help="Local base models.", no_args_is_help=True)
model_app.command(
    "init", help="Build a small Qwen3 model with a BPE tokenizer trained on its world's text (ALFWorld or MiniHouse)."
)(guarded(model.init))
model_app.command("import", help="A GGUF checkpoint as a model directory (fp32 safetensors, tokenizer) that every stage takes.")(
    guarded(model.import_)
)
app.add_typer(model_app, name="model")
app.command("recipes", help="List the recipes that ship with evoh; a command takes a recipe's name or a file.")(
    guarded(recipes_cmd.recipes)
)
app.command("config", help="Show a recipe's resolved settings after --set overrides, or report its errors.")(
    guarded(config_cmd.config)
)


def _leave_process_group() -> None:
    """End a torchrun/accelerate process group before the interpreter does: left to exit, gloo's threads can
    outlive it and abort the process ("terminate called without an active exception") after the work is done."""
    torch = sys.modules.get("torch")  # never import torch just to find out: `evoh --help` stays light
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def main() -> None:
    try:
        app(prog_name="evoh")
    finally:
        _leave_process_group()
