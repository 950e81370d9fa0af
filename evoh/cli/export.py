"""`evoh export`: merge the trained adapter into full weights."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json
from evoh.cli.recipe_options import JsonOption, WorkspaceOption


def export(
    workspace: WorkspaceOption,
    source: Annotated[str, typer.Option("--from", help="The stage whose adapter to merge: sft or grpo.")] = "sft",
    dtype: Annotated[str, typer.Option("--dtype", help="Weights of the result: bf16 or fp32.")] = "bf16",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The model directory (default: WS/export/model).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace what a non-empty --out holds.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Merge the trained adapter into full weights: a model directory transformers and vLLM load.

    The merged model is verified against the adapter before it is written.

    Examples:

        evoh export -w runs/tiny --from grpo
        evoh export -w runs/qwen --from sft --dtype bf16 --out models/qwen-evoh
    """
    from evoh.stages import export as stage
    from evoh.workspace import Workspace

    result = stage.run(Workspace(workspace), source, dtype, out, force)
    if as_json:
        print_json(result)
    else:
        typer.echo(
            f"exported {result['from']} ({result['dtype']}) to {result['out']}; largest logit difference against the "
            f"adapter model on {result['prompts']} real prompts: {result['max_logit_difference']:.3g}"
        )
