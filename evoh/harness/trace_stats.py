"""What an episode's trace shows about how it played, for its record: repeated actions, revisited places,
where objects were found, and a won episode's procedure with its objects named by role."""

from __future__ import annotations

import re
from typing import Any

from evoh.harness.belief import object_type
from evoh.harness.goal import Goal


def max_repeat(actions: list[str]) -> int:
    """The longest run of one action repeated back to back, minus one (0: no repeats)."""
    longest = run = 0
    for previous, current in zip(actions, actions[1:]):
        run = run + 1 if current and current == previous else 0
        longest = max(longest, run)
    return longest


def repeats(actions: list[str]) -> int:
    """Turns whose action equals the turn before's: the S of the spam penalty."""
    return sum(1 for a, b in zip(actions, actions[1:]) if b and a == b)


def revisits(trace: list[dict[str, Any]]) -> int:
    """Environment steps whose action and observation this episode had already seen: a walk back to a place
    where nothing changed, a receptacle reopened. They cost a step and show nothing new; a walk between two
    places, the way small policies lose games, repeats no action back to back."""
    seen: set[tuple[str, str]] = set()
    count = 0
    for entry in trace:
        if entry["kind"] != "env" or not entry["executed"]:
            continue
        key = (entry["action"], entry["result"])
        count += key in seen
        seen.add(key)
    return count


def found_at(first_seen: dict[str, str]) -> dict[str, list[str]]:
    """Object type -> receptacle types where this episode first saw objects of that type."""
    found: dict[str, set[str]] = {}
    for name, place in first_seen.items():
        found.setdefault(object_type(name), set()).add(object_type(place))
    return {k: sorted(v) for k, v in sorted(found.items())}


def procedure(goal: Goal | None, won: bool, trace: list[dict[str, Any]]) -> str:
    """The won episode's key actions with the goal's object and target named by role.

    Only the steps that act on the goal's object (and a look task's lamp) are kept: a detour through other
    objects (``take soapbar from countertop``) would otherwise be stored as the task's skill, and a policy
    that recalls it copies those objects' names into its next ``recall [where to find …]``. For the same
    reason the object's own detours go too: a set-down it undid (put it somewhere else, take it again) and
    a heat, cool or clean the task does not ask for."""
    if not goal or not won:
        return ""
    obj, target = goal.object, goal.target
    steps = []
    for entry in trace:
        action = entry["action"]
        if entry["kind"] != "env" or not entry["valid"]:
            continue
        verb = action.split(" ", 1)[0]
        if verb in ("go", "open", "close", "look", "inventory", "examine"):
            continue
        words = re.sub(r" \d+", "", action)
        words = re.sub(rf"\b{obj}\b", "the object", words)
        words = re.sub(rf"\b{target}\b", "the target", words)
        words = words.replace(" in/on ", " in ").replace("move the object to", "put the object in")
        words = re.sub(r"^take the object from .*$", "take the object", words)
        words = re.sub(r"^use the target$", "turn on the target lamp", words)
        if "the object" not in words and words != "turn on the target lamp":
            continue
        if verb in ("heat", "cool", "clean") and verb != goal.task:
            continue
        last = steps[-1] if steps else ""
        if words == "take the object" and last.startswith("put the object in ") and last != "put the object in the target":
            steps.pop()  # the set-down was undone
            continue
        if words != last:
            steps.append(words)
    return f"{goal.task} task: find the object (open closed receptacles), " + ", then ".join(steps)
