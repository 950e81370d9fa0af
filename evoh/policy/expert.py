"""The expert teacher: plays ALFWorld from what its Belief has seen, and uses the harness as a good teacher would.

It never reads the game's hidden state. It parses the objective, searches receptacles in order of where
the object tends to be (recalled search priorities when the Experience bank has them, pooled with its
own ranking learned from the train split), opens closed receptacles, and handles all six task types.
Harness use is scripted and tunable: recall at the start and before heat/cool/clean, commit each
milestone of the plan, track the second object of a pick-two task (and, if asked, what is left to search
after each place that did not hold the object), note where the object was found.
With ``slip`` > 0 it sometimes sends a command one detail off before the right one, so its traces
also show how to recover from the mistakes a student makes.
"""

from __future__ import annotations

import random
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from evoh.config import ExpertConfig
from evoh.errors import EvohError
from evoh.harness.belief import INVENTORY, SeenObject, object_type
from evoh.harness.episode import TurnView
from evoh.harness.goal import APPLIANCE, VERB, Goal
from evoh.harness.turns import format_turn
from evoh.policy.base import Completion
from evoh.policy.search_prior import SearchPrior

EXPERT_VERSION = "expert/1"


@dataclass
class _Memory:
    rng: random.Random
    next_milestone: int = 0  # milestones considered for a commit so far
    committed: list[str] = field(default_factory=list)  # milestones actually committed
    recalled_start: bool = False
    recalled_where: bool = False
    recalled_change: bool = False
    tracked: bool = False
    searched_when_tracked: int = 0  # places searched when the search last asked Belief what is left
    noted: bool = False
    unreachable: set[str] = field(default_factory=set)  # objects whose take was not admissible
    slipped: str = ""  # the mistaken command just sent, if the last environment action was a slip


def style_key(style: ExpertConfig) -> dict[str, float]:
    """The style as episodes and stages are keyed on it; ``search_track``, added later, is left out at its
    default so that earlier teacher episodes and collect stages keep their keys."""
    key = asdict(style)
    if not style.search_track:
        del key["search_track"]
    return key


class ExpertPolicy:
    """A scripted teacher over the harness; deterministic for a given style and seed."""

    def __init__(self, prior: SearchPrior, style: ExpertConfig | None = None, seed: int = 0) -> None:
        self.prior = prior
        self.style = style or ExpertConfig()
        for name, rate in asdict(self.style).items():
            if not 0 <= rate <= 1:
                raise EvohError(
                    f"expert.{name} = {rate} must be a chance from 0 to 1",
                    hint=f"set expert.{name} between 0 (never) and 1 (at every chance)",
                )
        self.seed = seed
        self._memory: dict[Any, _Memory] = {}

    def identity(self) -> dict[str, Any]:
        return {"policy": "expert", "version": EXPERT_VERSION, "style": style_key(self.style), "seed": self.seed}

    def forget(self, key: Any) -> None:
        self._memory.pop(key, None)

    def act(self, views: list[TurnView]) -> list[Completion]:
        return [Completion(format_turn(*self.decide(view))) for view in views]

    # -- one decision -----------------------------------------------------------------------------

    def decide(self, view: TurnView) -> tuple[str, str]:
        memory = self._memory.get(view.key)
        if memory is None:
            seed = zlib.crc32(f"{self.seed}:{view.key}".encode())
            memory = self._memory[view.key] = _Memory(random.Random(seed))
        goal = view.goal
        if goal is None:
            return "I cannot read this objective, so I will look around.", "look"
        return self._meta(view, goal, memory) or self._act(view, goal, memory)

    def _chance(self, memory: _Memory, rate: float) -> bool:
        return rate > 0 and memory.rng.random() < rate

    def _meta(self, view: TurnView, goal: Goal, memory: _Memory) -> tuple[str, str] | None:
        allowed = view.meta_allowed
        if not allowed or view.steps_left <= 2:
            return None
        if "recall" in allowed and not memory.recalled_start:
            memory.recalled_start = True
            if self._chance(memory, self.style.recall):
                return (
                    "Before starting, I will check what I learned about this kind of task.",
                    f"recall [how to do {goal.task} task]",
                )
        if "recall" in allowed and not memory.recalled_where:
            memory.recalled_where = True
            if self._chance(memory, self.style.recall):
                return f"I will check where {goal.object} has been found before.", f"recall [where to find {goal.object}]"
        milestones = goal.milestones()
        if "commit" in allowed and memory.next_milestone < len(milestones):
            done = {s.text for s in view.progress.subgoals if s.done}
            if all(m in done for m in memory.committed):  # commit the next one once the last is done
                step = milestones[memory.next_milestone]
                memory.next_milestone += 1
                if self._chance(memory, self.style.commit):
                    memory.committed.append(step)
                    return f"My next subgoal is to {step}.", f"commit [{step}]"
        found = self._lying(view, goal.object)
        if "note" in allowed and found and not memory.noted:
            memory.noted = True
            place = object_type(found[0].where)
            if self._chance(memory, self.style.note):
                return f"I found {goal.object} in the {place}; worth remembering.", f"note [{goal.object} was in the {place}]"
        held = self._held(view, goal)
        if "recall" in allowed and goal.state and held and goal.state not in held.states and not memory.recalled_change:
            memory.recalled_change = True
            if self._chance(memory, self.style.recall):
                return (
                    f"Before I {VERB[goal.state]} the {goal.object}, I will recall how that is done.",
                    f"recall [how to {VERB[goal.state]} {goal.object}]",
                )
        if "track" in allowed and goal.count == 2 and not memory.tracked and self._placed(view, goal) and not held:
            memory.tracked = True
            if self._chance(memory, self.style.track):
                return f"One {goal.object} is placed; I will check where I saw another.", f"track [{goal.object}]"
        if "track" in allowed and self.style.search_track and (sought := self._sought(view, goal, held)):
            searched = sum(r.contents is not None for r in view.belief.receptacles.values())
            if searched > memory.searched_when_tracked and view.belief.unvisited():
                # a place searched in vain since the last look at what is left: the moment a student needs the list
                memory.searched_when_tracked = searched
                if self._chance(memory, self.style.search_track):
                    return f"I have not seen a {sought} yet; I will check which places I have not visited.", f"track [{sought}]"
        return None

    def _sought(self, view: TurnView, goal: Goal, held: SeenObject | None) -> str | None:
        """What the expert is searching for, not having seen one: the goal's object, or, holding it in a
        look task, the lamp."""
        belief = view.belief
        if not held:
            return None if any(o.name not in belief.placed for o in belief.objects_of(goal.object)) else goal.object
        return goal.target if goal.task == "look" and not self._lying(view, goal.target) else None

    @staticmethod
    def _lying(view: TurnView, kind: str) -> list[SeenObject]:
        """The objects of a kind seen lying somewhere: neither held nor moved from where they were seen."""
        return [o for o in view.belief.objects_of(kind) if o.where not in (None, INVENTORY)]

    # -- environment actions ----------------------------------------------------------------------

    def _held(self, view: TurnView, goal: Goal) -> SeenObject | None:
        for name in view.belief.inventory:
            if object_type(name) == goal.object:
                return view.belief.objects.get(name) or SeenObject(name, INVENTORY, 0)
        return None

    def _placed(self, view: TurnView, goal: Goal) -> list[SeenObject]:
        return [
            o
            for o in view.belief.objects_of(goal.object)
            if o.name in view.belief.placed and o.where and object_type(o.where) == goal.target
        ]

    def _command(self, view: TurnView, *prefixes: str) -> str | None:
        for prefix in prefixes:
            for command in view.admissible:
                if command.startswith(prefix):
                    return command
        return None

    def _act(self, view: TurnView, goal: Goal, memory: _Memory) -> tuple[str, str]:
        think, action = self._choose(view, goal, memory)
        if action not in view.admissible:
            # never send what the world would refuse: look around instead (it spends the step honestly)
            think, action = "I am not sure what to do next, so I will look around.", "look"
        if memory.slipped:
            memory.slipped = ""
            think = f"That command was not admissible, so I will copy one from the list. {think}"
        elif self._chance(memory, self.style.slip):
            memory.slipped = self._slip(view, action, memory.rng)
            if memory.slipped:
                return think, memory.slipped
        return think, action

    @staticmethod
    def _slip(view: TurnView, action: str, rng: random.Random) -> str:
        """The right command one detail off, as a weak student writes it: another number, or a trip to
        the place it already stands at. Empty when no such command is inadmissible."""
        slips = []
        location = view.belief.location
        if location and not action.startswith("go to "):
            slips.append(f"go to {location}")
        words = action.split(" ")
        for index, word in enumerate(words):
            if word.isdigit():
                for number in (int(word) + 1, int(word) - 1, int(word) + 2):
                    if number > 0:
                        slips.append(" ".join(words[:index] + [str(number)] + words[index + 1 :]))
        slips = [s for s in slips if s not in view.admissible]
        return rng.choice(slips) if slips else ""

    def _choose(self, view: TurnView, goal: Goal, memory: _Memory) -> tuple[str, str]:
        if goal.task == "look":
            return self._look(view, goal, memory)
        held = self._held(view, goal)
        if held and (not goal.state or goal.state in held.states):
            return self._place(view, goal, held.name)
        if held:
            return self._change(view, goal, held.name)
        other = [n for n in view.belief.inventory if object_type(n) != goal.object]
        if other:
            put = self._command(view, f"put {other[0]} in/on ", f"move {other[0]} to ")
            if put:
                return f"I am holding {other[0]}, which I do not need; I will put it down.", put
        return self._acquire(view, goal, goal.object, memory)

    def _go(self, view: TurnView, place: str) -> str | None:
        """``go to place`` if the world offers it (it does not for a receptacle at the current location)."""
        command = f"go to {place}"
        return command if command in view.admissible else None

    def _look(self, view: TurnView, goal: Goal, memory: _Memory) -> tuple[str, str]:
        if not self._held(view, goal):
            return self._acquire(view, goal, goal.object, memory)
        for lamp in self._lying(view, goal.target):
            use = self._command(view, f"use {lamp.name}")
            if use:
                return f"I am holding the {goal.object} next to the {lamp.name}; I will turn it on.", use
            go = self._go(view, lamp.where)
            if go:
                return f"I saw a {goal.target} in/on the {lamp.where}; I will take the {goal.object} there.", go
        return self._search(view, goal.target, memory, avoid=None)

    def _place(self, view: TurnView, goal: Goal, name: str) -> tuple[str, str]:
        targets = sorted(
            view.belief.receptacles_of(goal.target), key=lambda r: (r.name != view.belief.location, r.closed is not False, r.name)
        )
        for target in targets:
            put = self._command(view, f"put {name} in/on {target.name}", f"move {name} to {target.name}")
            if put:
                return f"I have the {goal.object} ready; I will put it in/on the {target.name}.", put
        for target in targets:
            if f"open {target.name}" in view.admissible and target.closed is not False:
                return f"The {target.name} is closed; I will open it to put the {goal.object} inside.", f"open {target.name}"
        for target in targets:
            go = self._go(view, target.name)
            if go:
                return f"I have the {goal.object} ready; I will take it to the {target.name}.", go
        return f"I cannot reach a {goal.target} from here, so I will look around.", "look"

    def _change(self, view: TurnView, goal: Goal, name: str) -> tuple[str, str]:
        verb, appliance = VERB[goal.state], APPLIANCE[goal.state]
        change = self._command(view, f"{verb} {name} with ")
        if change:
            return f"I am at the {change.rsplit(' with ', 1)[1]} with the {goal.object}; I will {verb} it.", change
        places = view.belief.receptacles_of(appliance) or view.belief.receptacles_of("sink")
        for place in sorted(places, key=lambda r: r.name):
            go = self._go(view, place.name)
            if go:
                return f"I need to {verb} the {goal.object}, so I will go to the {place.name}.", go
        return f"I see no {appliance} I can reach, so I will look around.", "look"

    def _acquire(self, view: TurnView, goal: Goal, kind: str, memory: _Memory) -> tuple[str, str]:
        belief = view.belief
        keep_in_target = goal.task in ("pick", "pick2")  # an object already in the target counts there
        candidates = [
            o
            for o in self._lying(view, kind)
            if o.name not in belief.placed
            and o.name not in memory.unreachable
            and not (keep_in_target and object_type(o.where) == goal.target)
        ]
        candidates.sort(key=lambda o: (o.where != belief.location, -o.step, o.name))
        for seen in candidates:
            take = self._command(view, f"take {seen.name} from {seen.where}")
            if take:
                return f"There is a {seen.name} in/on the {seen.where} right here; I will pick it up.", take
            go = self._go(view, seen.where)
            if go:
                return f"I saw a {seen.name} in/on the {seen.where}; I will go and get it.", go
            memory.unreachable.add(seen.name)
        return self._search(view, kind, memory, avoid=goal.target if keep_in_target else None)

    def _search(self, view: TurnView, kind: str, memory: _Memory, avoid: str | None) -> tuple[str, str]:
        belief = view.belief
        recalled = {}
        for entry in view.recalled:
            if entry.category == "search" and entry.key == kind:
                recalled = entry.places
        unsearched = [n for n, r in belief.receptacles.items() if r.contents is None and n not in memory.unreachable]
        options = [n for n in unsearched if object_type(n) != avoid] or unsearched
        bank_total = sum(recalled.values()) or 1
        instances = Counter(object_type(n) for n in belief.receptacles)

        def rank(name: str) -> tuple:
            # the chance that this very receptacle holds one: a type's share spread over its instances here
            place_type = object_type(name)
            share = self.prior.score(kind, place_type) + recalled.get(place_type, 0) / bank_total
            score = share / instances[place_type]
            number = int(name.rsplit(" ", 1)[1]) if name[-1].isdigit() else 0
            return (-score, place_type, number)

        for best in sorted(options, key=rank):
            place = belief.receptacles[best]
            if place.closed and f"open {best}" in view.admissible:
                return f"The {best} is closed; I will open it to look inside for a {kind}.", f"open {best}"
            go = self._go(view, best)
            if go:
                return f"I have not found a {kind} yet; the {best} is a likely place, so I will go there.", go
            if f"examine {best}" in view.admissible:
                return f"The {best} is right here; I will examine it for a {kind}.", f"examine {best}"
            if f"open {best}" in view.admissible:
                return f"The {best} is right here; I will open it to look for a {kind}.", f"open {best}"
            memory.unreachable.add(best)
        return f"I have searched everywhere I can for a {kind}; I will look around once more.", "look"
