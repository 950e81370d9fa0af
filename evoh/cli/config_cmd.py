"""`evoh config`: resolve a recipe and its overrides, exactly as the stages will see them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json
from evoh.config import load_recipe, recipe_dict, recipe_toml


def config(
    recipe: Annotated[Path | None, typer.Argument(help="A TOML recipe (default: evoh's built-in defaults).")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override one setting: section.key=value (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of TOML.")] = False,
) -> None:
    """Show a recipe's resolved settings after --set overrides, or report its errors.

    Examples:

        evoh config minihouse-cpu
        evoh config recipes/tiny-cpu.toml --set grpo.updates=4 --json
    """
    resolved = load_recipe(recipe, overrides or [])
    if as_json:
        print_json(recipe_dict(resolved))
    else:
        typer.echo(recipe_toml(resolved), nl=False)
