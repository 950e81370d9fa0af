"""`evoh recipes`: the recipes that ship with evoh, each with what it is for; any command takes the name."""

from __future__ import annotations

from evoh.cli.output import print_json, stdout_console
from evoh.cli.recipe_options import JsonOption
from evoh.recipe_files import recipe_summary, shipped_recipes


def recipes(as_json: JsonOption = False) -> None:
    """List evoh's recipes. A name stands for its file wherever a recipe is asked for.

    Examples:

        evoh recipes
        evoh run minihouse-cpu -w runs/minihouse
        evoh config tiny-cpu --set grpo.updates=4
    """
    from rich.table import Table

    found = {name: {"path": str(path), "about": recipe_summary(path)} for name, path in shipped_recipes().items()}
    if as_json:
        print_json(found)
        return
    table = Table(title="evoh's recipes (pass the name, e.g. `evoh run tiny-cpu -w WS`)", title_justify="left")
    for column in ("name", "what it is for"):
        table.add_column(column)
    for name, entry in found.items():
        table.add_row(name, entry["about"])
    stdout_console().print(table)
