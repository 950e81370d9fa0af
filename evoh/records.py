"""Schema versions of everything evoh writes, and the checks every reader applies.

A record written by a newer evoh (or by hand) with a version this evoh does not know is
rejected with a clear error instead of being half-understood; so is a record of a known version
that lacks a field its readers use, or holds one of the wrong type.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

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


# -- the typed episode record -------------------------------------------------------------------------

_R = TypeVar("_R", bound="_Keyed")


@dataclass(frozen=True, kw_only=True)
class _Keyed:
    """A JSON object as typed fields plus ``extra``, the keys this evoh has no field for (what a newer writer
    or a caller's ``record(extra)`` added), so that nothing read is lost when it is written again. ``keys`` is
    the order the object was read in: ``to_dict`` writes that order back, so a record read and written again
    is the same bytes. A record built here has none and follows the fields' order, then ``extra``'s."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _OMITTED_IF_NONE: ClassVar[frozenset[str]] = frozenset()  # fields a writer leaves out rather than writes null

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in ("extra", "keys"))

    @classmethod
    def _split(cls: type[_R], data: dict[str, Any], **typed: Any) -> _R:
        """The instance of ``data``, its known keys as fields (``typed`` overriding those that nest), the rest
        kept in ``extra``."""
        names = cls._names()
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names}
        return cls(**{**known, **typed}, extra=extra, keys=tuple(data))

    @classmethod
    def from_dict(cls: type[_R], data: dict[str, Any]) -> _R:
        return cls._split(data)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (nested dicts and lists are shared with this record, not copied)."""
        values = {name: _plain(getattr(self, name)) for name in self._names()}
        if not self.keys:
            values = {k: v for k, v in values.items() if v is not None or k not in self._OMITTED_IF_NONE}
            return {**values, **self.extra}
        out = {key: values[key] if key in values else self.extra[key] for key in self.keys if key in values or key in self.extra}
        out.update({k: v for k, v in values.items() if k not in out and v is not None})  # set since it was read
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, _Keyed):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, kw_only=True)
class TaskRef(_Keyed):
    """The game an episode played, as the record names it (the environment layer's Task, as data)."""

    id: str
    split: str | None = None
    task_type: str
    game_file: str | None = None
    grammar: str
    kind: str | None = None  # absent from records written before MiniHouse

    _OMITTED_IF_NONE = frozenset({"kind"})


@dataclass(frozen=True, kw_only=True)
class TurnRecord(_Keyed):
    """One turn of an episode's trace: the prompt, the response, what it did and what came back."""

    user: str
    response: str
    action: str
    kind: str  # env, meta or malformed
    verb: str | None = None
    valid: bool
    executed: bool
    outcome: str
    result: str
    reason: str | None = None
    label: str | None = None  # another policy's answer to the same prompt, where one labelled the turn

    _OMITTED_IF_NONE = frozenset({"label"})


@dataclass(frozen=True, kw_only=True)
class EpisodeRecord(_Keyed):
    """One line of trajectories.jsonl or episodes.jsonl, typed. The fields follow the writer's order; those
    records of earlier evoh versions lack are None. Nested state (goal, belief, plan) stays plain JSON."""

    schema: str = f"episode/{SCHEMAS['episode']}"
    task: TaskRef
    objective: str
    goal: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None
    bank: str | None = None  # the digest of the Experience bank it played with
    won: bool
    error: str | None = None
    turns: int
    env_steps: int
    spent: int | None = None
    invalid_actions: int
    meta: dict[str, dict[str, int]]  # verb -> attempted / executed / failed
    meta_actions: int
    idle_meta: dict[str, int] | None = None
    repeats: int | None = None
    max_repeat: int | None = None
    revisits: int | None = None
    notes: list[str] | None = None
    recalled: list[str] | None = None
    found_at: dict[str, list[str]] | None = None
    state_done: bool | None = None
    procedure: str | None = None
    belief: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    system: str
    trace: tuple[TurnRecord, ...]

    @classmethod
    def from_dict(cls, data: Any, source: str = "the episode record") -> EpisodeRecord:
        """The record of ``data``, refused as :func:`check` and :func:`validate` refuse it (``source`` names
        where it came from in the one-line error)."""
        validate(check("episode", data, source), source)
        return cls._split(data, task=TaskRef.from_dict(data["task"]), trace=tuple(TurnRecord.from_dict(t) for t in data["trace"]))

    @property
    def fingerprint(self) -> str | None:
        """What a rerun resumes by, where the stage that wrote the record gave one."""
        return self.extra.get("fingerprint")

    @property
    def usage(self) -> dict[str, int]:
        """The policy's token counts, where it reported them."""
        return self.extra.get("usage") or {}

    @property
    def labelled(self) -> bool:
        return any(turn.label is not None for turn in self.trace)


def _version() -> str:
    from evoh import __version__

    return __version__
