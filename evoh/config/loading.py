"""Reading a recipe: a TOML file or a shipped recipe's name, then typed values from a command's flags, then
``--set section.key=value`` overrides; every key, type and range is checked against the sections.

Unknown sections and keys are errors that name the nearest valid one, so a typo never silently falls back to a
default.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from evoh.config.fields import Setting, settings_of
from evoh.config.sections import Recipe
from evoh.errors import EvohError
from evoh.recipe_files import find_recipe


def _nearest(name: str, options: list[str]) -> str:
    match = difflib.get_close_matches(name, options, n=1, cutoff=0.5)
    return f"did you mean '{match[0]}'?" if match else f"valid names: {', '.join(sorted(options))}"


def _coerce(value: Any, kind: Any, where: str) -> Any:
    """Check (and where lossless, convert) a TOML value against a dataclass field's type."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, where)
            except EvohError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is Literal:
        choices = typing.get_args(kind)
        if value not in choices:
            raise EvohError(f"{where} = {value!r} is not one of {', '.join(map(repr, choices))}", hint="pick one of those")
        return value
    if origin is list:
        (item,) = typing.get_args(kind)
        if not isinstance(value, list):
            raise EvohError(f"{where} must be a list, got {value!r}", hint='write it as ["a", "b"]')
        return [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind in (int, float, str, bool) and (type(value) is not kind):
        raise EvohError(f"{where} must be {kind.__name__}, got {value!r}", hint="fix the value's type in the recipe or --set")
    return value


def _build(cls: type, table: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key, value in table.items():
        if key not in fields:
            raise EvohError(f"unknown setting '{where}{key}'", hint=_nearest(key, list(fields)))
        if dataclasses.is_dataclass(hints[key]):
            if not isinstance(value, dict):
                raise EvohError(f"'{where}{key}' is a section", hint=f"write it as [{where}{key}]")
            values[key] = _build(hints[key], value, f"{where}{key}.")
            continue
        values[key] = _coerce(value, hints[key], f"{where}{key}")
        allowed = fields[key].metadata.get("range")
        if allowed is not None and values[key] not in allowed:
            raise EvohError(
                f"{where}{key} = {value!r} is out of range: it must be {allowed}",
                hint=f"set a value {allowed}, e.g. --set {where}{key}={getattr(cls(), key)!r}",
            )
    return cls(**values)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``section.key=value``; the value is read as TOML (``70``, ``true``, ``["a"]``) or else as a string."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip():
        raise EvohError(f"--set {text!r} is not section.key=value", hint="for example --set env.max_steps=70")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return path.strip().split("."), value


def _place(table: dict[str, Any], keys: list[str], value: Any, source: str) -> None:
    node = table
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise EvohError(f"{source}: '{key}' is a value, not a section", hint="use section.key=value")
    node[keys[-1]] = value


def load_recipe(
    path: Path | None = None, overrides: list[str] | tuple[str, ...] = (), values: Mapping[str, Any] | None = None
) -> Recipe:
    """Read a recipe (a file, or a shipped recipe's name; or start from the defaults), then apply ``values``
    (``{"grpo.lr": 1e-4}``: a command's typed flags, None meaning not given), then ``--set`` overrides, and
    check every key and type."""
    table: dict[str, Any] = {}
    if path is not None:
        path = find_recipe(path)
        try:
            table = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise EvohError(f"{path}: not valid TOML ({exc})", hint="fix the line it names") from None
    for key, value in (values or {}).items():
        if value is not None:
            _place(table, key.split("."), value, key)
    for text in overrides:
        _place(table, *parse_override(text), f"--set {text!r}")
    return _build(Recipe, table, "")


@functools.cache
def recipe_settings() -> dict[str, Setting]:
    """Every leaf setting of a recipe by its key (``grpo.lr``), in the order the sections declare them."""
    return {s.key: s for s in settings_of(Recipe)}


def recipe_dict(recipe: Recipe) -> dict[str, Any]:
    return dataclasses.asdict(recipe)


def recipe_toml(recipe: Recipe) -> str:
    import tomli_w

    return tomli_w.dumps(recipe_dict(recipe))
