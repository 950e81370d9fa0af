"""How a recipe setting is declared: its default, its one description and the values it may take.

A section is a dataclass whose fields are made by ``setting`` (a value) or ``section`` (a nested table). The
description written there is the only one: `--help`, `evoh config` and docs/settings.md are built from it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Range:
    """The values a number setting may take; a recipe, ``--set`` and a command-line flag all meet it."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # the bound itself is excluded
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"


AT_LEAST_1 = Range(1)
NON_NEGATIVE = Range(0)
POSITIVE = Range(0, low_open=True)
TOP_P = Range(0, 1, low_open=True)


def setting(default: Any, help: str, within: Range | None = None) -> Any:
    """A section's field: its default, what it does (one description, written once) and, for a number, its range."""
    metadata = {"help": " ".join(help.split()), "range": within}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def section(cls: type) -> Any:
    """A field holding a nested section (a TOML table); its description is the class's docstring."""
    return field(default_factory=cls, metadata={"help": (cls.__doc__ or "").strip()})


@dataclass(frozen=True)
class Setting:
    """One leaf setting of a recipe, as the CLI and the settings reference show it."""

    key: str  # section.key, as --set and the TOML recipe write it
    type: Any
    default: Any
    help: str
    within: Range | None

    @property
    def type_name(self) -> str:
        if typing.get_origin(self.type) is typing.Literal:
            return " | ".join(map(repr, typing.get_args(self.type))).replace("'", '"')
        return str(self.type).replace("typing.", "") if not isinstance(self.type, type) else self.type.__name__


def settings_of(cls: type, prefix: str = "") -> Iterator[Setting]:
    """Every leaf setting of a section class and its nested sections, in declaration order."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from settings_of(hints[f.name], f"{prefix}{f.name}.")
            continue
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        yield Setting(f"{prefix}{f.name}", hints[f.name], default, f.metadata.get("help", ""), f.metadata.get("range"))
