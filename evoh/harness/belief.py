"""Belief: what this episode has seen of the world, kept up to date from every valid environment step.

It is built from the text the agent itself saw, in either grammar version, never from the game's
hidden state: objects and where each was last seen, their states (hot, cool, clean, sliced, lamps on),
what each receptacle held when last seen, which receptacles are open or closed, the places visited,
and the inventory. ``track`` answers questions about it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

INVENTORY = "inventory"

_ROOM = re.compile(r"Looking quickly around you, you see (.+?)\.\s*(?:\n|$)")
_ON = re.compile(r"On the ([a-z]+ \d+), you see (.+?)\.(?:\s|$)")
_IN = re.compile(r"The ([a-z]+ \d+) is open\. In it, you see (.+?)\.(?:\s|$)")
_CLOSED = re.compile(r"The ([a-z]+ \d+) is closed\.")
_TAKE = re.compile(r"You pick up the ([a-z]+ \d+) from the ([a-z]+ \d+)\.")
_PUT = re.compile(r"You (?:put|move) the ([a-z]+ \d+) (?:in/on|to) the ([a-z]+ \d+)\.")
_CHANGE = re.compile(r"You (heat|cool|clean) the ([a-z]+ \d+) using the ([a-z]+ \d+)\.")
_TOGGLE = re.compile(r"You turn (on|off) the ([a-z]+ \d+)\.")
_SLICE = re.compile(r"You sliced the ([a-z]+ \d+) with the ([a-z]+ \d+)\.")
_CARRY = re.compile(r"You are carrying: (.+?)\.$")
_EXAMINE = re.compile(r"This is an? ((?:hot|cool|cold|clean|sliced| and )+) ([a-z]+ \d+)\.")
_LAMP = re.compile(r"This ([a-z]+ \d+) is (on|off)\.")
_CHANGED_STATE = {"heat": "hot", "cool": "cool", "clean": "clean"}


def object_type(name: str) -> str:
    """``"apple 1"`` -> ``"apple"``."""
    return name.rsplit(" ", 1)[0] if name[-1:].isdigit() else name


def split_list(text: str) -> list[str]:
    """``"a cd 1, a pen 2, and a mug 1"`` -> ``["cd 1", "pen 2", "mug 1"]``; ``"nothing"`` -> ``[]``."""
    text = text.strip()
    if text in ("", "nothing"):
        return []
    items = re.split(r",\s+and\s+|,\s+|\s+and\s+", text)
    return [re.sub(r"^(?:an?|some)\s+", "", item.strip()) for item in items if item.strip()]


@dataclass
class SeenObject:
    name: str
    where: str | None  # a receptacle, INVENTORY, or None when it was last seen somewhere it no longer is
    step: int  # the env step at which it was last seen
    states: set[str] = field(default_factory=set)


@dataclass
class SeenReceptacle:
    name: str
    contents: list[str] | None = None  # None: never seen inside
    closed: bool | None = None
    visited: bool = False
    step: int | None = None


class Belief:
    """The episode's picture of the world; ``update`` it with each valid step's command and observation."""

    def __init__(self, first_observation: str = "") -> None:
        self.receptacles: dict[str, SeenReceptacle] = {}
        self.objects: dict[str, SeenObject] = {}
        self.location: str | None = None
        self.visited: list[str] = []
        self.inventory: list[str] = []
        self.placed: set[str] = set()  # objects this episode put somewhere
        self.first_seen: dict[str, str] = {}  # object -> the receptacle it was first seen in
        self.step = 0
        if first_observation:
            room = _ROOM.search(first_observation)
            for name in split_list(room.group(1)) if room else []:
                self.receptacles[name] = SeenReceptacle(name)

    # -- updating ---------------------------------------------------------------------------------

    def update(self, command: str, observation: str, step: int) -> None:
        self.step = step
        command = command.strip().lower()
        if command.startswith("go to "):
            self._arrive(command[6:])
        elif command.startswith("open "):
            self._receptacle(command[5:]).closed = False
        elif command.startswith("close "):
            self._receptacle(command[6:]).closed = True
        for name, listed in _ON.findall(observation):
            self._contents(name, split_list(listed))
        for name, listed in _IN.findall(observation):
            self._contents(name, split_list(listed))
            self._receptacle(name).closed = False
        for name in _CLOSED.findall(observation):
            self._receptacle(name).closed = True
        for obj, place in _TAKE.findall(observation):
            self._move(obj, INVENTORY, place)
        for obj, place in _PUT.findall(observation):
            self._move(obj, place, INVENTORY)
            self.placed.add(obj)
        for verb, obj, _ in _CHANGE.findall(observation):
            states = self._object(obj).states
            states.discard("hot" if verb == "cool" else "cool")
            states.add(_CHANGED_STATE[verb])
        for on_off, obj in _TOGGLE.findall(observation):
            self._set_switch(obj, on_off == "on")
        for obj, _ in _SLICE.findall(observation):
            self._object(obj).states.add("sliced")
        carrying = _CARRY.search(observation)
        if carrying or observation.startswith("You are not carrying anything"):
            held = split_list(carrying.group(1)) if carrying else []
            for name in held:
                self._move(name, INVENTORY, None)
            self.inventory = held
        for states, obj in _EXAMINE.findall(observation):
            words = {"cool" if w == "cold" else w for w in re.split(r"\s+and\s+|\s+", states) if w}
            self._object(obj).states |= words
        for obj, on_off in _LAMP.findall(observation):
            self._set_switch(obj, on_off == "on")

    def _receptacle(self, name: str) -> SeenReceptacle:
        return self.receptacles.setdefault(name, SeenReceptacle(name))

    def _object(self, name: str) -> SeenObject:
        return self.objects.setdefault(name, SeenObject(name, None, self.step))

    def _set_switch(self, name: str, on: bool) -> None:
        states = self._object(name).states
        states.discard("on" if not on else "off")
        states.add("on" if on else "off")

    def _arrive(self, place: str) -> None:
        self.location = place
        receptacle = self._receptacle(place)
        receptacle.visited = True
        receptacle.step = self.step
        if place not in self.visited:
            self.visited.append(place)

    def _contents(self, place: str, names: list[str]) -> None:
        receptacle = self._receptacle(place)
        for gone in set(receptacle.contents or []) - set(names):
            seen = self.objects.get(gone)
            if seen is not None and seen.where == place:
                seen.where = None
        receptacle.contents = names
        receptacle.step = self.step
        for name in names:
            seen = self._object(name)
            seen.where, seen.step = place, self.step
            self.first_seen.setdefault(name, place)

    def _move(self, name: str, to: str, source: str | None) -> None:
        seen = self._object(name)
        seen.where, seen.step = to, self.step
        if source and source != INVENTORY and source in self.receptacles:
            contents = self.receptacles[source].contents
            if contents and name in contents:
                contents.remove(name)
        if to == INVENTORY:
            if name not in self.inventory:
                self.inventory.append(name)
        else:
            if name in self.inventory:
                self.inventory.remove(name)
            receptacle = self._receptacle(to)
            if receptacle.contents is None:
                receptacle.contents = []
            if name not in receptacle.contents:
                receptacle.contents.append(name)

    # -- reading ----------------------------------------------------------------------------------

    def objects_of(self, kind: str) -> list[SeenObject]:
        return [o for o in self.objects.values() if object_type(o.name) == kind]

    def receptacles_of(self, kind: str) -> list[SeenReceptacle]:
        return [r for r in self.receptacles.values() if object_type(r.name) == kind]

    def unvisited(self) -> list[str]:
        return [name for name, r in self.receptacles.items() if not r.visited]

    def _match(self, query: str) -> tuple[list[SeenObject], list[SeenReceptacle]]:
        query = re.sub(r"^(?:the|a|an|some)\s+", "", query.strip().lower())
        names = set(self.objects) | set(self.receptacles)
        kinds = {object_type(n) for n in names}
        wanted = {query} if query in names or query in kinds else set()
        if not wanted and query.endswith("s") and query[:-1] in kinds:
            wanted = {query[:-1]}
        if not wanted:
            wanted = set(difflib.get_close_matches(query, sorted(names | kinds), n=2, cutoff=0.75))
        objects = [o for o in self.objects.values() if o.name in wanted or object_type(o.name) in wanted]
        places = [r for r in self.receptacles.values() if r.name in wanted or object_type(r.name) in wanted]
        return objects, places

    def track(self, query: str) -> str:
        """Where an object or receptacle was seen, its state, and what is still unsearched."""
        objects, places = self._match(query)
        lines = [self._describe_object(o) for o in sorted(objects, key=lambda o: o.name)]
        lines += [self._describe_place(r) for r in sorted(places, key=lambda r: r.name)]
        if not lines:
            lines.append(f"no {query} seen yet.")
        unvisited = self.unvisited()
        lines.append("not yet visited: " + (", ".join(unvisited) if unvisited else "none") + ".")
        return "\n".join(lines)

    def _describe_object(self, seen: SeenObject) -> str:
        if seen.where == INVENTORY:
            where = "in your hands"
        elif seen.where:
            where = f"in/on {seen.where} (seen at step {seen.step})"
        else:
            where = f"moved from where it was seen at step {seen.step}"
        states = f"; {', '.join(sorted(seen.states))}" if seen.states else ""
        return f"{seen.name}: {where}{states}."

    def _describe_place(self, place: SeenReceptacle) -> str:
        status = []
        if place.closed is not None:
            status.append("closed" if place.closed else "open")
        if place.contents is not None:
            status.append("holds " + (", ".join(place.contents) if place.contents else "nothing"))
        visited = "visited" if place.visited else "not visited"
        return f"{place.name}: {visited}" + (f", {', '.join(status)}" if status else "") + "."

    def to_dict(self) -> dict:
        return {
            "location": self.location,
            "inventory": list(self.inventory),
            "visited": list(self.visited),
            "objects": {
                n: {"where": o.where, "step": o.step, "states": sorted(o.states)} for n, o in sorted(self.objects.items())
            },
            "receptacles": {
                n: {"contents": r.contents, "closed": r.closed, "visited": r.visited} for n, r in sorted(self.receptacles.items())
            },
        }
