"""Schema versions of everything evoh writes, and the check every reader applies.

A record written by a newer evoh (or by hand) with a version this evoh does not know is
rejected with a clear error instead of being half-understood.
"""

from __future__ import annotations

from typing import Any

from evoh.errors import EvohError

# kind -> the schema version this evoh writes and reads
SCHEMAS: dict[str, int] = {
    "stage": 1,
    "episode": 1,
}


def stamp(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    """Return ``record`` with its ``schema`` field set first, for writing."""
    return {"schema": f"{kind}/{SCHEMAS[kind]}", **record}


def check(kind: str, record: Any, source: str) -> dict[str, Any]:
    """Raise unless ``record`` is a dict carrying the schema version this evoh reads for ``kind``."""
    expected = f"{kind}/{SCHEMAS[kind]}"
    found = record.get("schema") if isinstance(record, dict) else None
    if found != expected:
        raise EvohError(
            f"{source}: schema {found!r} is not the {expected!r} this evoh {_version()} reads",
            hint="rerun the stage that wrote it with this evoh, or install the evoh version that wrote it",
        )
    return record


def _version() -> str:
    from evoh import __version__

    return __version__
