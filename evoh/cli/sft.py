"""`evoh sft`: LoRA / QLoRA / full fine-tuning of a base model on WS/refine/."""

from __future__ import annotations

from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.recipe_options import JsonOption, RecipeOption, SetOption, WorkspaceOption, flag, flags_given, resolve
from evoh.cli.tables import action_table


def sft(
    workspace: WorkspaceOption,
    model: flag("sft.model", "--model", "-m") = None,
    full: flag("sft.full") = None,
    lora_r: flag("sft.lora_r") = None,
    lora_alpha: flag("sft.lora_alpha") = None,
    target: flag("sft.target") = None,
    load_in_4bit: flag("sft.load_in_4bit") = None,
    train_embeddings: flag("sft.train_embeddings") = None,
    epochs: flag("sft.epochs") = None,
    max_steps: flag("sft.max_steps") = None,
    lr: flag("sft.lr") = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue from the last checkpoint in sft/checkpoints/ (refused if made with other settings or inputs).",
        ),
    ] = False,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stage one: LoRA, QLoRA or full fine-tuning on WS/refine/ with TRL's SFTTrainer (--resume).

    Examples:

        evoh sft -w runs/tiny -r tiny-cpu
        evoh sft -w runs/qwen --model Qwen/Qwen3-8B --load-in-4bit --lr 1e-5
        accelerate launch -m evoh sft -w runs/qwen -r paper-alfworld
    """
    from evoh.distributed import is_main_process
    from evoh.stages import sft as stage
    from evoh.workspace import TRAINED_WEIGHTS, Workspace

    given = flags_given(sft, locals())
    resolved = resolve(recipe, sets, given)
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
