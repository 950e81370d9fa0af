"""Schema versions of everything evoh writes, and the checks every reader applies.

A record written by a newer evoh (or by hand) with a version this evoh does not know is
rejected with a clear error instead of being half-understood; so is a record of a known version
that lacks a field its readers use, or holds one of the wrong type.
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


# what evoh's readers of an episode record (refine, show, collect's resume, summaries, reports) look up
# without a default, with its JSON type
_OBJECT, _LIST, _TEXT, _COUNT, _FLAG = (
    (dict, "an object"),
    (list, "a list"),
    (str, "text"),
    (int, "a whole number"),
    (bool, "true or false"),
)
_EPISODE_FIELDS = {
    "task": _OBJECT,
    "objective": _TEXT,
    "won": _FLAG,
    "turns": _COUNT,
    "env_steps": _COUNT,
    "invalid_actions": _COUNT,
    "meta_actions": _COUNT,
    "meta": _OBJECT,
    "system": _TEXT,
    "trace": _LIST,
}
_TASK_FIELDS = {"id": _TEXT, "task_type": _TEXT, "grammar": _TEXT}
_TURN_FIELDS = {
    "user": _TEXT,
    "response": _TEXT,
    "action": _TEXT,
    "kind": _TEXT,
    "valid": _FLAG,
    "executed": _FLAG,
    "outcome": _TEXT,
    "result": _TEXT,
}


_MESSAGE_FIELDS = {"role": _TEXT, "content": _TEXT}


def _described(value: Any) -> str:
    """What a JSON value is, in the words the errors use."""
    return {dict: "an object", list: "a list", str: "text", bool: "true or false", type(None): "null"}.get(
        type(value), "a number"
    )


def _check_fields(record: Any, fields: dict[str, tuple[type, str]], where: str) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{where} is {_described(record)}, not an object")
    for name, (kind, described) in fields.items():
        if name not in record:
            raise ValueError(f"{where} has no {name!r}")
        value = record[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{where}'s {name!r} is {_described(value)}, not {described}")


def validate(record: dict[str, Any], source: str) -> dict[str, Any]:
    """Raise unless an episode record of the version this evoh reads has every field its readers use, with
    its type, so that no reader meets a half-formed one. Other records (and other versions) pass as they are:
    :func:`check` refuses versions."""
    if record.get("schema") != f"episode/{SCHEMAS['episode']}":
        return record
    try:
        _check_fields(record, _EPISODE_FIELDS, "the episode")
        _check_fields(record["task"], _TASK_FIELDS, "its 'task'")
        for number, turn in enumerate(record["trace"]):
            _check_fields(turn, _TURN_FIELDS, f"turn {number} of its 'trace'")
        if not isinstance(record.get("error"), str | None):
            raise ValueError(f"its 'error' is {_described(record['error'])}, not text or null")
    except ValueError as exc:
        raise EvohError(
            f"{source}: {exc}",
            hint="the line was edited or written by another program: restore the file, delete that line, "
            "or rerun the stage that wrote it (evoh collect, evoh eval)",
        ) from None
    return record


def validate_example(record: Any, source: str, hint: str) -> dict[str, Any]:
    """Raise unless an SFT example (refine's train.jsonl and val.jsonl) is chat messages, each a role and its
    text, ending with the assistant's answer: what the trainer's chat template and its loss mask read."""
    try:
        _check_fields(record, {"messages": _LIST}, "the example")
        for number, message in enumerate(record["messages"]):
            _check_fields(message, _MESSAGE_FIELDS, f"message {number} of its 'messages'")
        if not record["messages"] or record["messages"][-1]["role"] != "assistant":
            raise ValueError("the example does not end with the assistant's message, the answer it trains")
    except ValueError as exc:
        raise EvohError(f"{source}: {exc}", hint=hint) from None
    return record


def _version() -> str:
    from evoh import __version__

    return __version__
