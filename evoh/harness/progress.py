"""Progress: a short plan of committed subgoals, advanced by ``commit`` and by what the Belief proves.

``commit [x]`` registers subgoal x, or marks it done if it is already on the plan. After every valid
environment step the plan also absorbs what the Belief can prove, for all six task types: the target
found, held, heated/cooled/cleaned, the lamp on, the object placed (twice for pick-two).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from evoh.harness.belief import INVENTORY, Belief, object_type
from evoh.harness.turns import normalize

MAX_SUBGOALS = 8

_FIND = re.compile(r"^(?:find|locate|search for|look for) (?:the |a |an |some )?(?:second |another )?([a-z]+)(?: \d+)?$")
_TAKE = re.compile(r"^(?:take|pick up|get|grab|hold) (?:the |a |an |some )?(second |another )?([a-z]+)(?: \d+)?$")
_CHANGE = re.compile(r"^(heat|cool|clean|chill|wash|warm) (?:the |a |an |some )?([a-z]+)(?: \d+)?$")
_LAMP = re.compile(r"^(?:turn on|use|switch on|toggle) (?:the |a )?([a-z]+)(?: \d+)?$")
_PUT = re.compile(
    r"^(?:put|place|move) (?:the |a |an |some )?(two |both )?(?:hot |cool |clean |cold )?([a-z]+)(?: \d+)? "
    r"(?:in/on|in|on|into|onto|to) (?:the |a )?([a-z]+)(?: \d+)?$"
)
_STATE = {"heat": "hot", "warm": "hot", "cool": "cool", "chill": "cool", "clean": "clean", "wash": "clean"}


@dataclass
class Subgoal:
    text: str
    done: bool = False
    step: int | None = None  # the turn at which it was done


def proven(text: str, belief: Belief) -> bool:
    """Whether the Belief shows subgoal ``text`` achieved (False for a subgoal it cannot judge)."""
    text = normalize(text)
    if m := _FIND.match(text):
        return bool(belief.objects_of(m.group(1)) or belief.receptacles_of(m.group(1)))
    if m := _TAKE.match(text):
        second, kind = m.groups()
        if second:  # the second one is in hand while another of its kind is already placed
            return any(object_type(n) == kind for n in belief.inventory) and any(
                o.where not in (None, INVENTORY) and _was_placed(belief, o.name) for o in belief.objects_of(kind)
            )
        return any(object_type(n) == kind for n in belief.inventory)
    if m := _CHANGE.match(text):
        state = _STATE[m.group(1)]
        return any(state in o.states for o in belief.objects_of(m.group(2)))
    if m := _LAMP.match(text):
        return any("on" in o.states for o in belief.objects_of(m.group(1)))
    if m := _PUT.match(text):
        two, kind, place = m.groups()
        placed = [o for o in belief.objects_of(kind) if o.where and object_type(o.where) == place and _was_placed(belief, o.name)]
        return len(placed) >= (2 if two else 1)
    return False


def _was_placed(belief: Belief, name: str) -> bool:
    return name in belief.placed


class Progress:
    """The plan checklist; bounded to ``MAX_SUBGOALS`` entries."""

    def __init__(self) -> None:
        self.subgoals: list[Subgoal] = []

    def commit(self, text: str, turn: int) -> tuple[bool, str]:
        """Add subgoal ``text`` or mark it done; returns (executed, message shown next turn)."""
        text = normalize(text)
        for subgoal in self.subgoals:
            if subgoal.text == text:
                if subgoal.done:
                    return True, f"'{text}' was already done."
                subgoal.done, subgoal.step = True, turn
                return True, f"marked '{text}' done."
        if len(self.subgoals) >= MAX_SUBGOALS:
            return False, f"the plan is full ({MAX_SUBGOALS} subgoals): commit an existing subgoal to mark it done."
        self.subgoals.append(Subgoal(text))
        return True, f"added '{text}' to the plan."

    def absorb(self, belief: Belief, turn: int) -> list[str]:
        """Mark done every open subgoal the Belief proves; returns their texts."""
        done = []
        for subgoal in self.subgoals:
            if not subgoal.done and proven(subgoal.text, belief):
                subgoal.done, subgoal.step = True, turn
                done.append(subgoal.text)
        return done

    def checklist(self) -> str:
        if not self.subgoals:
            return "(no subgoals committed)"
        return "\n".join(f"[{'x' if s.done else ' '}] {s.text}" for s in self.subgoals)

    def to_dict(self) -> list[dict]:
        return [asdict(s) for s in self.subgoals]
