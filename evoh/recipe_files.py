"""Where a recipe comes from: a TOML file's path, or the name of one that ships inside the package.

The recipes live in ``evoh/recipes/`` so that an installed evoh finds them without a clone; in a clone,
``recipes/`` at the top points there, so ``recipes/tiny-cpu.toml`` and ``tiny-cpu`` name the same file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from evoh.errors import EvohError


def shipped_recipes() -> dict[str, Path]:
    """The recipes that ship with evoh, by name (the file name without ``.toml``), sorted."""
    folder = Path(str(resources.files("evoh") / "recipes"))
    return {file.stem: file for file in sorted(folder.glob("*.toml"))}


def recipe_summary(path: Path) -> str:
    """A recipe's first sentence, from the comment at its top (up to the first command line it shows)."""
    words = []
    for line in path.read_text().splitlines():
        if not line.startswith("#") or line.startswith("#   "):
            break
        words.append(line.lstrip("#").strip())
    sentence = " ".join(words).split(". ")[0]
    return sentence.rstrip(":").rstrip(".")


def find_recipe(given: Path | str) -> Path:
    """The file ``given`` names: a path that exists, else a shipped recipe of that name (``tiny-cpu``,
    ``tiny-cpu.toml`` or, outside a clone of the repository, ``recipes/tiny-cpu.toml``); anything else is an
    error that lists the shipped names."""
    path = Path(given)
    if path.is_file():
        return path
    shipped = shipped_recipes()
    name = path.name.removesuffix(".toml")
    if path.parent in (Path("."), Path("recipes")) and name in shipped:
        return shipped[name]
    names = ", ".join(shipped)
    what = (
        f"recipe file {given} does not exist"
        if path.suffix or path.parent != Path(".")
        else f"recipe {given} is not one of evoh's"
    )
    raise EvohError(what, hint=f"pass a TOML file's path or one of: {names} (`evoh recipes` says what each is for)")
