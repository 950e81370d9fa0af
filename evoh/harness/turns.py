"""The turn format: ``<think>…</think><action>…</action>``, parsed without ever raising.

Every string, however broken, becomes a :class:`Turn` that says whether it is well formed and, if not,
why. An action is lower-cased and trimmed; a meta-action is one of the four verbs with its argument in
square brackets; anything else is an environment action, valid only if it equals an admissible command.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

PARSER_VERSION = "turn/1"
META_VERBS = ("track", "commit", "recall", "note")
MAX_ARGUMENT_CHARS = 200

# tags are found one at a time: a pattern like ``<action>(.*?)</action>`` rescans the rest of the text
# from every unclosed opening tag, quadratic in a reply that repeats one
_OPEN_THINK = re.compile(r"<think>", re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think>", re.IGNORECASE)
_OPEN_ACTION = re.compile(r"<action>", re.IGNORECASE)
_CLOSE_ACTION = re.compile(r"</action>", re.IGNORECASE)
_META = re.compile(r"^(track|commit|recall|note)\s*\[(.*)\]$", re.DOTALL)
_META_WORD = re.compile(r"^(track|commit|recall|note)\b")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Turn:
    """What one model response asks for."""

    kind: str  # "env", "meta" or "malformed"
    action: str = ""  # the lower-cased action text ("" when malformed)
    think: str = ""
    verb: str = ""  # for meta-actions
    argument: str = ""  # for meta-actions
    valid: bool = False  # env: admissible; meta: well formed; malformed: never
    reason: str = ""  # why the turn is malformed or invalid

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def _blocks(text: str, opening: re.Pattern[str], closing: re.Pattern[str]) -> list[str]:
    """What ``opening(.*?)closing`` with DOTALL would find, in one pass: each block runs from an opening tag
    to the first closing tag after it, and the next block is looked for after that closing tag."""
    found, position = [], 0
    while start := opening.search(text, position):
        end = closing.search(text, start.end())
        if end is None:
            break  # no closing tag after this opening one, so none after any later one either
        found.append(text[start.end() : end.start()])
        position = end.end()
    return found


def parse_turn(text: Any, admissible: tuple[str, ...] | list[str] = ()) -> Turn:
    """Parse a model response against the admissible commands of this turn. Never raises."""
    if not isinstance(text, str):
        return Turn("malformed", reason=f"response is not text ({type(text).__name__})")
    actions = _blocks(text, _OPEN_ACTION, _CLOSE_ACTION)
    thinks = _blocks(text, _OPEN_THINK, _CLOSE_THINK)
    think = thinks[0].strip() if thinks else ""
    if not actions:
        reason = "unclosed <action> tag" if _OPEN_ACTION.search(text) else "no <action>…</action> tag"
        return Turn("malformed", think=think, reason=reason)
    if len(actions) > 1:
        return Turn("malformed", think=think, reason=f"{len(actions)} actions in one turn (exactly one allowed)")
    if len(thinks) > 1:
        return Turn("malformed", think=think, reason="more than one <think> block")
    action = normalize(actions[0])
    if not action:
        return Turn("malformed", think=think, reason="empty action")
    meta = _META.match(action)
    if meta:
        verb, argument = meta.group(1), normalize(meta.group(2))
        if not argument:
            return Turn("meta", action, think, verb, "", False, f"{verb} needs an argument inside [ ]")
        if len(argument) > MAX_ARGUMENT_CHARS:
            return Turn("meta", action, think, verb, argument[:MAX_ARGUMENT_CHARS], False, "argument too long")
        return Turn("meta", action, think, verb, argument, True)
    word = _META_WORD.match(action)
    if word and not any(c.lower() == action for c in admissible):
        verb = word.group(1)
        return Turn("meta", action, think, verb, "", False, f"write {verb} [argument] with square brackets")
    if any(normalize(c) == action for c in admissible):
        return Turn("env", action, think, valid=True)
    return Turn("env", action, think, valid=False, reason="not an admissible command")


def format_turn(think: str, action: str) -> str:
    """The canonical text of a turn: what teachers write and what models are trained to write."""
    return f"<think>{think.strip()}</think><action>{action.strip()}</action>"
