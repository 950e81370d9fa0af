"""MiniHouse: small procedural household games in ALFWorld's 2.1.1 command grammar and text, played in-process.

A game is a pure function of its id and size: the split, task type and index seed a private random
generator that lays out a room (receptacles, some of them closed), hides the task's object(s) among
other objects, and writes the objective with ALFWorld's templates. Everything above the environment
layer (the harness, the expert teacher, the prompts) reads MiniHouse text exactly as it reads
ALFWorld's: the same room description, the same arrival, open, take, put, heat/cool/clean and lamp
sentences, the same alphabetical list of admissible commands.

The room is a third of an ALFWorld room by default, so a turn's prompt is too, and a step is a few
dictionary updates: thousands of steps a second on one core, with no worker process and no lock (each
engine owns its state; generation touches no shared state).

Splits. ``train`` is unbounded (any index is a game); ``valid_seen`` and ``valid_unseen`` are fixed
lists. Unseen games use room layouts (the set of receptacle types in the room) that the generator
never gives train or valid_seen games, decided by a hash of the layout.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

from evoh.env.types import TASK_TYPES

GAME_PREFIX = "minihouse:"

# receptacle type -> can be opened and closed
RECEPTACLES: dict[str, bool] = {
    "armchair": False,
    "bed": False,
    "cabinet": True,
    "coffeetable": False,
    "countertop": False,
    "desk": False,
    "diningtable": False,
    "drawer": True,
    "dresser": False,
    "fridge": True,
    "garbagecan": False,
    "microwave": True,
    "safe": True,
    "shelf": False,
    "sidetable": False,
    "sinkbasin": False,
    "sofa": False,
    "toilet": False,
}
MULTIPLE = ("cabinet", "drawer", "shelf", "countertop", "sidetable")  # types a room may hold several of
APPLIANCE = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
LAMP, LAMP_HOLDERS = "desklamp", ("desk", "dresser", "sidetable")

# object type -> (the state changes it allows, the receptacle types it is found in)
OBJECTS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "apple": (frozenset({"clean", "heat", "cool"}), ("fridge", "countertop", "diningtable", "garbagecan")),
    "potato": (frozenset({"clean", "heat", "cool"}), ("fridge", "countertop", "diningtable", "garbagecan")),
    "tomato": (frozenset({"clean", "heat", "cool"}), ("fridge", "countertop", "diningtable")),
    "egg": (frozenset({"heat", "cool"}), ("fridge", "countertop", "garbagecan")),
    "lettuce": (frozenset({"clean", "cool"}), ("fridge", "countertop", "diningtable")),
    "bread": (frozenset({"heat", "cool"}), ("countertop", "diningtable", "fridge")),
    "mug": (frozenset({"clean", "heat", "cool"}), ("cabinet", "countertop", "shelf", "coffeetable", "sidetable")),
    "cup": (frozenset({"clean", "heat", "cool"}), ("cabinet", "countertop", "fridge", "shelf")),
    "plate": (frozenset({"clean", "heat", "cool"}), ("cabinet", "countertop", "diningtable", "fridge")),
    "bowl": (frozenset({"clean", "heat", "cool"}), ("cabinet", "shelf", "diningtable", "fridge")),
    "pan": (frozenset({"clean", "cool"}), ("cabinet", "countertop")),
    "fork": (frozenset({"clean"}), ("drawer", "countertop", "diningtable")),
    "spoon": (frozenset({"clean"}), ("drawer", "countertop", "diningtable")),
    "knife": (frozenset({"clean"}), ("drawer", "countertop", "diningtable")),
    "cloth": (frozenset({"clean"}), ("cabinet", "drawer", "countertop", "toilet")),
    "soapbar": (frozenset({"clean"}), ("cabinet", "countertop", "toilet", "sinkbasin")),
    "book": (frozenset(), ("desk", "shelf", "bed", "sofa", "sidetable", "dresser", "coffeetable")),
    "pen": (frozenset(), ("desk", "drawer", "sidetable", "shelf", "dresser")),
    "pencil": (frozenset(), ("desk", "drawer", "sidetable", "shelf")),
    "cd": (frozenset(), ("desk", "drawer", "shelf", "safe", "sidetable")),
    "cellphone": (frozenset(), ("desk", "bed", "sofa", "sidetable", "dresser", "drawer")),
    "keychain": (frozenset(), ("drawer", "dresser", "sidetable", "safe", "coffeetable")),
    "creditcard": (frozenset(), ("drawer", "desk", "sidetable", "dresser", "countertop")),
    "remotecontrol": (frozenset(), ("sofa", "coffeetable", "sidetable", "armchair", "dresser")),
    "pillow": (frozenset(), ("sofa", "bed", "armchair")),
    "alarmclock": (frozenset(), ("desk", "sidetable", "dresser", "shelf")),
    "vase": (frozenset(), ("shelf", "sidetable", "safe", "coffeetable", "dresser")),
    "watch": (frozenset(), ("drawer", "dresser", "safe", "sidetable", "shelf")),
    "statue": (frozenset(), ("shelf", "sidetable", "coffeetable", "dresser")),
    "candle": (frozenset(), ("shelf", "countertop", "toilet", "sidetable", "cabinet")),
    "spraybottle": (frozenset(), ("cabinet", "toilet", "garbagecan", "countertop")),
    "toiletpaper": (frozenset(), ("toilet", "cabinet", "shelf", "drawer")),
}
LOOKABLE = (
    "book",
    "pen",
    "pencil",
    "cd",
    "cellphone",
    "keychain",
    "creditcard",
    "remotecontrol",
    "alarmclock",
    "vase",
    "watch",
    "statue",
    "mug",
    "bowl",
)
STATE_WORD = {"clean": "clean", "heat": "hot", "cool": "cool"}
_UNSEEN_SHARE = 5  # one layout in this many belongs to valid_unseen only
VALID_SPLITS = ("valid_seen", "valid_unseen")


@dataclass(frozen=True)
class HouseSize:
    """How big a MiniHouse room is; every game of a run shares one size."""

    receptacles: int = 6  # receptacles in the room, closed ones included
    objects: int = 4  # objects besides the task's own
    distractors: int = 1  # of those, how many lie beside the task's object, so the take list there is longer

    def problem(self) -> str | None:
        """Why no game of this size can be laid out, or None."""
        if not 4 <= self.receptacles <= 40:
            return (
                f"receptacles = {self.receptacles} must be from 4 to 40 "
                "(the task needs an object's place, a target, an appliance and a lamp's table)"
            )
        if not 0 <= self.objects <= 60:
            return f"objects = {self.objects} must be from 0 to 60"
        if not 0 <= self.distractors <= self.objects:
            return (
                f"distractors = {self.distractors} must be from 0 to objects ({self.objects}): "
                "distractors are some of the objects"
            )
        return None

    def spec(self) -> str:
        return f"{self.receptacles},{self.objects},{self.distractors}"


@dataclass
class Thing:
    name: str  # "apple 2"
    where: str  # a receptacle's name, or "" while held
    states: set[str] = field(default_factory=set)  # hot, cool, clean; on for a lamp


@dataclass
class House:
    """One game: the room, where everything starts, and the goal."""

    task_type: str  # long name
    goal: str  # the objective's text
    object: str  # the goal's object type
    target: str  # receptacle type to put it in (the lamp type for look)
    state: str | None  # clean, heat or cool
    count: int
    receptacles: list[str]  # in the room description's order
    openable: dict[str, bool]
    loc: dict[str, int]  # receptacle -> its "loc N" number
    things: list[Thing]

    def layout(self) -> tuple[str, ...]:
        return tuple(sorted({type_of(r) for r in self.receptacles}))


def type_of(name: str) -> str:
    return name.rsplit(" ", 1)[0]


def listing_order(names) -> list[str]:
    """ALFWorld's listing order: types alphabetically, a type's numbers from highest to lowest."""
    return sorted(names, key=lambda n: (type_of(n), -int(n.rsplit(" ", 1)[1])))


def unseen_layout(types: tuple[str, ...]) -> bool:
    return zlib.crc32(",".join(types).encode()) % _UNSEEN_SHARE == 0


def game_id(split: str, task_type: str, index: int) -> str:
    return f"{split}/{TASK_TYPES[task_type]}-{index:05d}"


def game_file(split: str, task_type: str, index: int, size: HouseSize) -> str:
    """What a MiniHouse Task carries as its game file: everything needed to build the game again."""
    return f"{GAME_PREFIX}{game_id(split, task_type, index)}@{size.spec()}"


def parse_game_file(text: str) -> tuple[str, str, int, HouseSize]:
    body = text.removeprefix(GAME_PREFIX)
    ident, _, spec = body.partition("@")
    split, _, rest = ident.partition("/")
    short, _, index = rest.rpartition("-")
    long_name = {v: k for k, v in TASK_TYPES.items()}[short]
    receptacles, objects, distractors = (int(v) for v in spec.split(","))
    return split, long_name, int(index), HouseSize(receptacles, objects, distractors)


def _goal(rng: random.Random, short: str) -> tuple[str, str | None, str, int, str]:
    """(object type, state, target type, count, objective text) for a task type."""
    if short == "look":
        obj = rng.choice(LOOKABLE)
        return obj, None, LAMP, 1, rng.choice([f"look at {obj} under the {LAMP}.", f"examine the {obj} with the {LAMP}."])
    state = short if short in APPLIANCE else None
    kinds = [o for o, (states, _) in OBJECTS.items() if state is None or state in states]
    obj = rng.choice(kinds)
    homes = OBJECTS[obj][1]
    targets = [
        t
        for t in (*homes, "countertop", "shelf", "diningtable", "sidetable", "cabinet", "dresser", "desk")
        if t != APPLIANCE.get(state)
    ]
    target = rng.choice(sorted(set(targets)))
    if short == "pick2":
        text = rng.choice([f"put two {obj} in {target}.", f"find two {obj} and put them in {target}."])
        return obj, None, target, 2, text
    if state:
        word = STATE_WORD[state]
        text = rng.choice([f"put a {word} {obj} in {target}.", f"{state} some {obj} and put it in {target}."])
        return obj, state, target, 1, text
    return obj, None, target, 1, rng.choice([f"put a {obj} in {target}.", f"put some {obj} on {target}."])


def _layout(rng: random.Random, size: HouseSize, required: list[str], unseen: bool) -> list[str]:
    """Receptacle names for a room holding the required types, whose layout falls on the split's side."""
    for _ in range(400):
        types = list(dict.fromkeys(required))
        others = [t for t in RECEPTACLES if t not in types]
        rng.shuffle(others)
        counts = {t: 1 for t in types}
        while sum(counts.values()) < size.receptacles:
            if others and (rng.random() < 0.6 or not any(t in counts for t in MULTIPLE)):
                counts[others.pop()] = 1
            else:
                counts[rng.choice([t for t in MULTIPLE if t in counts] or list(counts))] += 1
        if unseen_layout(tuple(sorted(counts))) == unseen:
            return [f"{t} {n}" for t, c in counts.items() for n in range(1, c + 1)]
    raise RuntimeError("no room layout fits this split and size")  # 400 draws at a one-in-five share: never in practice


def generate(split: str, task_type: str, index: int, size: HouseSize) -> House:
    """The game ``(split, task type, index)`` at ``size``, the same on every machine and every call."""
    rng = random.Random(f"minihouse/{split}/{task_type}/{index}/{size.spec()}")
    short = TASK_TYPES[task_type]
    obj, state, target, count, text = _goal(rng, short)
    homes = [h for h in OBJECTS[obj][1] if h != target]
    home = rng.choice(homes or list(OBJECTS[obj][1]))
    required = [target if short != "look" else rng.choice(LAMP_HOLDERS), home]
    if state:
        required.append(APPLIANCE[state])
    names = _layout(rng, size, required, unseen=split == "valid_unseen")
    holders = [n for n in names if type_of(n) != target or short == "look"]
    numbers: dict[str, list[int]] = {}

    def new(kind: str, where: str) -> Thing:  # a type's instances are numbered 1, 2, ... as they are placed
        taken = numbers.setdefault(kind, [])
        taken.append(len(taken) + 1)
        return Thing(f"{kind} {taken[-1]}", where)

    home_names = [n for n in holders if type_of(n) == home] or holders
    spot = rng.choice(home_names)
    things = [new(obj, spot)]
    if count == 2:  # the second one is elsewhere, so a pick-two game is a search for two
        things.append(new(obj, rng.choice([n for n in holders if type_of(n) in OBJECTS[obj][1]] or holders)))
    if short == "look":
        things.append(new(LAMP, rng.choice([n for n in names if type_of(n) in LAMP_HOLDERS])))
    others = [k for k in OBJECTS if k != obj]
    for i in range(size.objects):
        kind = rng.choice(others)
        if i < size.distractors:
            where = spot
        else:
            fitting = [n for n in names if type_of(n) in OBJECTS[kind][1]]
            where = rng.choice(fitting or names)
        things.append(new(kind, where))
    locs = rng.sample(range(1, 3 * len(names) + 1), len(names))
    return House(
        task_type=task_type,
        goal=text,
        object=obj,
        target=target,
        state=state,
        count=count,
        receptacles=listing_order(names),
        openable={n: RECEPTACLES[type_of(n)] for n in names},
        loc=dict(zip(names, locs)),
        things=things,
    )
