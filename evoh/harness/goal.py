"""What an ALFWorld objective asks for, read from its text alone (the agent never sees traj_data)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

_W = r"([a-z]+)"
# (pattern, task, state) in the order they must be tried: "put a hot X" before "put a X"
_TEMPLATES = [
    (rf"^put two {_W} in {_W}$", "pick2", None),
    (rf"^find two {_W} and put them in {_W}$", "pick2", None),
    (rf"^put a (clean|hot|cool) {_W} in {_W}$", None, None),
    (rf"^(clean|heat|cool) some {_W} and put it in {_W}$", None, None),
    (rf"^put (?:a|some) {_W} (?:in|on) {_W}$", "pick", None),
    (rf"^look at {_W} under the {_W}$", "look", None),
    (rf"^examine the {_W} with the {_W}$", "look", None),
]
_STATE_OF = {"clean": "clean", "hot": "hot", "heat": "hot", "cool": "cool"}
_TASK_OF = {"clean": "clean", "hot": "heat", "cool": "cool"}
APPLIANCE = {"clean": "sinkbasin", "hot": "microwave", "cool": "fridge"}
VERB = {"clean": "clean", "hot": "heat", "cool": "cool"}


@dataclass(frozen=True)
class Goal:
    text: str
    task: str  # short task type: pick, look, clean, heat, cool, pick2
    object: str  # object type, e.g. "apple"
    target: str  # receptacle type to place it in, or the lamp type for look tasks
    state: str | None = None  # "hot", "cool" or "clean" when the object must be changed first
    count: int = 1

    def milestones(self) -> list[str]:
        """The subgoals a good plan commits to, in order, in the words Progress recognises."""
        o, t = self.object, self.target
        if self.task == "look":
            return [f"find {o}", f"take {o}", f"find {t}", f"turn on {t}"]
        steps = [f"find {o}", f"take {o}"]
        if self.state:
            steps.append(f"{VERB[self.state]} {o}")
        steps.append(f"put {o} in {t}")
        if self.count == 2:
            steps += [f"take second {o}", f"put two {o} in {t}"]
        return steps

    def to_dict(self) -> dict:
        return asdict(self)


def goal_text(observation: str) -> str:
    marker = "Your task is to:"
    if marker not in observation:
        return ""
    return observation[observation.index(marker) + len(marker) :].strip().splitlines()[0].strip()


def parse_goal(text: str) -> Goal | None:
    """The structured goal, or None for a text no ALFWorld template produces."""
    clean = text.strip().lower().rstrip(".")
    for pattern, task, _ in _TEMPLATES:
        match = re.match(pattern, clean)
        if not match:
            continue
        groups = match.groups()
        if task is None:  # the state-changing templates: (verb/adjective, object, target)
            word, obj, target = groups
            state = _STATE_OF[word]
            return Goal(text, _TASK_OF[state], obj, target, state)
        obj, target = groups
        return Goal(text, task, obj, target, None, 2 if task == "pick2" else 1)
    return None
