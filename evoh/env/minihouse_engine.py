"""Playing a MiniHouse game: ALFWorld 2.1.1's rules and sentences over the room ``minihouse.generate`` lays out.

The rules are ALFWorld's: one object in hand at a time; closed receptacles hide their contents until
opened and take nothing in or out while closed; heat, cool and clean need the object in hand at a
microwave, fridge or sinkbasin (open or not); a desk lamp is used where it stands. Admissible commands
come sorted, as TextWorld lists them.
"""

from __future__ import annotations

import copy

from evoh.env.engine import CheckedEngine
from evoh.env.minihouse import LAMP, STATE_WORD, House, Thing, generate, listing_order, parse_game_file, type_of

_INTRO = "-= Welcome to TextWorld, ALFRED! =-\n\n{room}\n\nYour task is to: {goal}"
_CHANGE = {"heat": "microwave", "cool": "fridge", "clean": "sinkbasin"}


def listing(names: list[str]) -> str:
    """ALFWorld's list: ``a cd 1, a pen 2, and a mug 1``; ``nothing`` when empty."""
    items = [f"a {n}" for n in names]
    if not items:
        return "nothing"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", and " + items[-1]


class HouseEngine(CheckedEngine):
    """One MiniHouse game; ``game_file`` is a MiniHouse Task's game file (``minihouse:<id>@<size>``)."""

    def __init__(self, game_file: str, max_steps: int) -> None:
        super().__init__(game_file, max_steps)
        self.house: House = generate(*parse_game_file(game_file))
        self._things: dict[str, Thing] = {}
        self._open: dict[str, bool] = {}
        self._at: str | None = None
        self._held: str | None = None

    # -- the world's answers --------------------------------------------------------------------------

    def _begin(self) -> tuple[str, list[str], bool]:
        self._things = {t.name: copy.deepcopy(t) for t in self.house.things}
        self._open = {name: False for name, openable in self.house.openable.items() if openable}
        self._at, self._held = None, None
        intro = _INTRO.format(room=self._room(), goal=self.house.goal)
        return intro, self._admissible_now(), False

    def _run(self, command: str) -> tuple[str, list[str], bool]:
        verb, _, rest = command.partition(" ")
        if command.startswith("go to "):
            self._at = command[6:]
            feedback = f"You arrive at loc {self.house.loc[self._at]}. {self._describe(self._at)}"
        elif verb == "open":
            self._open[rest] = True
            feedback = f"You open the {rest}. {self._describe(rest)}"
        elif verb == "close":
            self._open[rest] = False
            feedback = f"You close the {rest}."
        elif verb == "take":
            name, _, place = rest.partition(" from ")
            self._things[name].where, self._held = "", name
            feedback = f"You pick up the {name} from the {place}."
        elif verb == "put":
            name, _, place = rest.partition(" in/on ")
            self._things[name].where, self._held = place, None
            feedback = f"You put the {name} in/on the {place}."
        elif verb in _CHANGE:
            name, _, place = rest.partition(" with ")
            states = self._things[name].states
            states.discard({"heat": "cool", "cool": "hot"}.get(verb, ""))
            states.add(STATE_WORD[verb])
            feedback = f"You {verb} the {name} using the {place}."
        elif verb == "use":
            lamp = self._things[rest]
            lamp.states ^= {"on"}
            feedback = f"You turn {'on' if 'on' in lamp.states else 'off'} the {rest}."
        elif verb == "examine":
            feedback = self._describe(rest) if rest in self.house.openable else self._examine(rest)
        elif command == "inventory":
            feedback = f"You are carrying: {listing([self._held])}." if self._held else "You are not carrying anything."
        else:  # look
            feedback = self._room() if self._at is None else f"You are facing the {self._at}. Next to it, you see nothing."
        return feedback, self._admissible_now(), self._won_now()

    def _room(self) -> str:
        return f"You are in the middle of a room. Looking quickly around you, you see {listing(self.house.receptacles)}."

    def _visible(self, place: str) -> bool:
        return self._open.get(place, True)

    def _contents(self, place: str) -> list[str]:
        return listing_order([t.name for t in self._things.values() if t.where == place])

    def _describe(self, place: str) -> str:
        if place in self._open:
            if not self._open[place]:
                return f"The {place} is closed."
            return f"The {place} is open. In it, you see {listing(self._contents(place))}."
        return f"On the {place}, you see {listing(self._contents(place))}."

    def _examine(self, name: str) -> str:
        states = self._things[name].states
        if type_of(name) == LAMP:
            return f"This {name} is {'on' if 'on' in states else 'off'}."
        hot, cool, clean = "hot" in states, "cool" in states, "clean" in states
        if clean and (hot or cool):
            return f"This is a {'hot' if hot else 'cool'} and clean {name}."
        if hot or clean:
            return f"This is a {'hot' if hot else 'clean'} {name}."
        return f"This is a cold {name}." if cool else f"There's nothing special about {name}."

    # -- what may be typed, and the goal ----------------------------------------------------------------

    def _admissible_now(self) -> list[str]:
        here = self._at
        commands = [f"go to {r}" for r in self.house.receptacles if r != here] + ["inventory", "look"]
        if self._held:
            commands.append(f"examine {self._held}")
        if here is not None:
            commands.append(f"examine {here}")
            if here in self._open:
                commands.append(f"close {here}" if self._open[here] else f"open {here}")
            if self._visible(here):
                contents = self._contents(here)
                if self._held is None:
                    commands += [f"take {name} from {here}" for name in contents]
                else:
                    commands.append(f"put {self._held} in/on {here}")
                commands += [f"use {name}" for name in contents if type_of(name) == LAMP]
            kind = type_of(here)
            if self._held:
                commands += [f"{verb} {self._held} with {here}" for verb, appliance in _CHANGE.items() if appliance == kind]
        return sorted(set(commands))

    def _won_now(self) -> bool:
        house = self.house
        if house.target == LAMP:
            lamps_on = any(type_of(t.name) == LAMP and t.where == self._at and "on" in t.states for t in self._things.values())
            return lamps_on and self._held is not None and type_of(self._held) == house.object
        state = STATE_WORD[house.state] if house.state else None
        placed = [
            t
            for t in self._things.values()
            if type_of(t.name) == house.object
            and t.where
            and type_of(t.where) == house.target
            and (state is None or state in t.states)
        ]
        return len(placed) >= house.count
