"""The options every stage command shares (the workspace, a recipe, --set) and ``flag``: a recipe setting as a
command-line option, its help the setting's own description with its default and its recipe key.

A command declares ``lr: flag("grpo.lr") = None`` and passes ``flags_given(command, locals())`` (``{"grpo.lr": lr}``)
to ``resolve``: a flag left out is None and leaves the recipe's value alone; a given one goes into the recipe as
the typed value it is, checked against the setting's type and range like any other value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from evoh.config import Recipe, Setting, load_recipe, recipe_settings
from evoh.errors import EvohError

WorkspaceOption = Annotated[Path, typer.Option("--workspace", "-w", help="The workspace directory of this experiment.")]
RecipeOption = Annotated[
    Path | None,
    typer.Option("--recipe", "-r", help="A recipe: a TOML file, or a shipped recipe's name (evoh recipes); default: none."),
]
SetOption = Annotated[list[str] | None, typer.Option("--set", help="Override any setting: section.key=value (repeatable).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]


def flag(key: str, *names: str) -> Any:
    """The option for recipe setting ``key`` (``grpo.tasks_per_update`` → ``--tasks-per-update``, a switch
    ``--full/--no-full`` for a bool, unless ``names`` are given), typed as the setting is; its value is None when
    the command line leaves it out."""
    setting = recipe_settings()[key]
    if not names:
        name = key.rsplit(".", 1)[-1].replace("_", "-")
        names = (f"--{name}/--no-{name}",) if setting.type is bool else (f"--{name}",)
    kind, metavar = setting.type, None
    if typing.get_origin(kind) is typing.Literal:  # the recipe checks the choice: one error line, as for --set
        kind, metavar = str, "|".join(choice or '""' for choice in typing.get_args(kind))
    option = typer.Option(*names, help=flag_help(setting), show_default=False, metavar=metavar)
    return Annotated[kind | None, option, SettingKey(key)]


@dataclasses.dataclass(frozen=True)
class SettingKey:
    """The recipe key a flag sets, kept on its annotation so that the command need not name it again."""

    key: str


def flags_given(command: Callable[..., Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``{recipe key: value}`` of ``command``'s flags, from its arguments (``locals()`` at its start); a flag
    left out is None and leaves the recipe's value alone."""
    hints = typing.get_type_hints(command, include_extras=True)
    keys = {name: m.key for name, hint in hints.items() for m in getattr(hint, "__metadata__", ()) if isinstance(m, SettingKey)}
    return {key: values[name] for name, key in keys.items()}


# the recipe named on a `--help` command line (`evoh grpo -r tiny-cpu --help`): its values join the defaults shown
_help_recipe: tuple[str, Recipe] | None = None


def show_recipe_in_help(argv: list[str]) -> None:
    """Before the app is built: when ``argv`` asks for help and names a recipe (and --set overrides), each flag's
    help also shows that recipe's value. A recipe that does not load is left out; the command itself reports it."""
    global _help_recipe
    if not {"-h", "--help"} & set(argv):
        return
    named = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word in ("-r", "--recipe")]
    sets = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "--set"]
    if named:
        with contextlib.suppress(EvohError):
            _help_recipe = (Path(named[-1]).stem, load_recipe(Path(named[-1]), sets))


def flag_help(setting: Setting) -> str:
    """The setting's description, then its key and its built-in default, and a recipe's value where --help was
    asked with one (the square brackets escaped: Typer reads help as rich markup). The description keeps its
    first letter: it often starts with a value's name."""
    text = setting.help if setting.help.endswith(".") else setting.help + "."
    facts = f"{setting.key}; default: {shown(setting.default)}" + (f"; must be {setting.within}" if setting.within else "")
    if _help_recipe is not None:
        name, recipe = _help_recipe
        value = functools.reduce(getattr, setting.key.split("."), recipe)
        if value != setting.default:
            facts += f"; {name}: {shown(value)}"
    return f"{text} [{facts}]".replace("[", "\\[")


def shown(value: Any) -> str:
    """A default as a recipe writes it: true, 1e-06, "" (an empty string), ["sft", "grpo"]."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else shown(v) for v in value) + "]"
    if value == "":
        return '""'
    return str(value)


def resolve(recipe: Path | None, sets: list[str] | None, given: Mapping[str, Any] | None = None) -> Recipe:
    """The recipe, then the command's own flags (``{"grpo.lr": 1e-4}``; None: not given), then --set."""
    return load_recipe(recipe, list(sets or []), given)
