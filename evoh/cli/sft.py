"""`evoh sft`: LoRA / QLoRA / full fine-tuning of a base model on WS/refine/."""

from __future__ import annotations

from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.recipe_options import (
    JsonOption,
    RecipeOption,
    SetOption,
    WorkspaceOption,
    resolve,
)
from evoh.cli.tables import action_table


def sft(
    workspace: WorkspaceOption,
    model: Annotated[str | None, typer.Option("--model", "-m", help="The base model directory.")] = None,
    full: Annotated[
        bool | None,
        typer.Option("--full", help="Train every weight (sft/model/) instead of a LoRA adapter: for a small random base."),
    ] = None,
    lora_r: Annotated[int | None, typer.Option("--lora-r", min=1, help="LoRA rank (paper: 64).")] = None,
    lora_alpha: Annotated[int | None, typer.Option("--lora-alpha", min=1, help="LoRA alpha (paper: 128).")] = None,
    target: Annotated[str | None, typer.Option("--target", help="LoRA target modules: all-linear or names.")] = None,
    load_in_4bit: Annotated[bool | None, typer.Option("--load-in-4bit", help="QLoRA: 4-bit NF4 base (CUDA only).")] = None,
    train_embeddings: Annotated[
        bool | None, typer.Option("--train-embeddings", help="Also train embeddings and output head (a random base needs it).")
    ] = None,
    epochs: Annotated[float | None, typer.Option("--epochs", min=0.0, help="Passes over the data (paper: 4).")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Optimizer steps; overrides --epochs when > 0.")] = None,
    lr: Annotated[float | None, typer.Option("--lr", min=0.0, help="Peak learning rate (paper: 1e-5).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the last checkpoint in sft/checkpoints/.")] = False,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    from evoh.distributed import is_main_process
    from evoh.stages import sft as stage
    from evoh.workspace import TRAINED_WEIGHTS, Workspace

    resolved = resolve(
        recipe,
        sets,
        sft__model=model,
        sft__full=full,
        sft__lora_r=lora_r,
        sft__lora_alpha=lora_alpha,
        sft__target=target,
        sft__load_in_4bit=load_in_4bit,
        sft__train_embeddings=train_embeddings,
        sft__epochs=epochs,
        sft__max_steps=max_steps,
        sft__lr=lr,
    )
    result = stage.run(resolved, Workspace(workspace), resume=resume)
    if not is_main_process():
        return  # under torchrun / accelerate launch, one process reports
    if as_json:
        print_json(result)
    else:
        eval_loss = f", validation loss {result['eval_loss']:.4f}" if "eval_loss" in result else ""
        weights = TRAINED_WEIGHTS[resolved.sft.full]
        typer.echo(
            f"sft: {result['global_step']} steps, training loss {result['train_loss']:.4f}{eval_loss}; "
            f"{weights} in {workspace}/sft/{weights}"
        )
        if "val_actions" in result:
            stdout_console().print(action_table(result["val_actions"]))
