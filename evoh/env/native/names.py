"""What the player reads for an object's id: ``mug_bar__minus_02_dot_53_bar_...`` becomes ``mug 3``.

An id's kind is the text before its first ``_bar_`` (``sink`` ids that mention ``basin`` are ``sinkbasin``). The
ids of one kind are numbered in sorted order counting down, so the first id of three is ``3`` and the last ``1``.
An id with no ``_bar_`` keeps its text and an empty number (``agent1 `` with its trailing space).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Entity:
    """What a grammar expression can read of an object (the fields TextWorld's entity records carry)."""

    id: str
    type: str
    name: str
    definite: str = "the"
    indefinite: str = "a"
    noun: None = None
    adj: None = None
    synonyms: None = None
    desc: None = None
    room_type: None = None

    def __str__(self) -> str:
        return self.name


def _kind(object_id: str) -> str | None:
    head, sep, _ = object_id.partition("_bar_")
    if not sep:
        return None
    return head + "basin" if "basin" in object_id else head


def _readable(text: str) -> str:
    return text.replace("_bar_", "|").replace("_minus_", "-").replace("_plus_", "+").replace("_dot_", ".").replace("_comma_", ",")


def display_names(ids) -> dict[str, str]:
    ordered = sorted(ids)
    left = Counter(kind for kind in map(_kind, ordered) if kind is not None)
    names = {}
    for object_id in ordered:
        kind = _kind(object_id)
        if kind is None:
            names[object_id] = _readable(object_id) + " "
        else:
            names[object_id] = f"{_readable(object_id).split('|', 1)[0] + ('basin' if 'basin' in object_id else '')} {left[kind]}"
            left[kind] -= 1
    return names
