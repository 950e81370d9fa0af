"""``NativeEngine``: an ALFWorld game played from its own ``game.tw-pddl`` in pure Python, answering exactly what
the TextWorld engine answers (the intro and feedback text, the sorted admissible commands, whether it is won).

The parsed domain and grammar are shared between games through a cache keyed by their text; each
engine keeps its own state, so engines in different threads never touch each other's data.
"""

from __future__ import annotations

import json
from pathlib import Path

from evoh.env.engine import CheckedEngine
from evoh.env.native.ground import applicable, apply, goal_reached
from evoh.env.native.logic import CompiledAction, World, rules_for
from evoh.env.native.names import Entity, display_names
from evoh.env.native.pddl import PddlError, parse_problem
from evoh.env.native.state import State
from evoh.env.native.text import Writer
from evoh.errors import EvohError

INTRO = "intro"


def _unplayable(game_file: str, error: Exception) -> EvohError:
    return EvohError(
        f"the native engine cannot play {game_file}: {error}",
        hint="play this game on the TextWorld engine, or teach evoh/env/native the construct",
    )


def load_world(game_file: str) -> World:
    try:
        data = json.loads(Path(game_file).read_text())
    except (OSError, ValueError) as error:
        raise EvohError(f"cannot read the game {game_file}: {error}") from error
    missing = [key for key in ("pddl_domain", "pddl_problem", "grammar") if key not in data]
    if missing:
        raise EvohError(f"the game {game_file} has no {', '.join(missing)}")
    try:
        return World(rules_for(data["pddl_domain"], data["grammar"]), parse_problem(data["pddl_problem"]))
    except PddlError as error:
        raise _unplayable(game_file, error) from error


class NativeEngine(CheckedEngine):
    """An ALFWorld game on the native engine."""

    def __init__(self, game_file: str, max_steps: int) -> None:
        super().__init__(game_file, max_steps)
        self._world = load_world(game_file)
        ids = {arg for _, args in self._world.problem.init for arg in args}
        names = display_names(ids)
        self._entities = {i: Entity(i, self._world.object_types[i], names[i]) for i in ids}
        self._state: State | None = None
        self._options: dict[str, tuple[CompiledAction, dict[str, str]]] = {}
        self._commands: dict[tuple[str, ...], str] = {}  # the words of commands that never change
        self._found: dict[str, tuple[tuple[int, ...], list[dict[str, str]]]] = {}  # per action: (versions read, bindings)

    def _writer(self) -> Writer:
        return Writer(self._world.rules.text_rules, self._state, self._entities)

    def _begin(self) -> tuple[str, list[str], bool]:
        world = self._world
        try:
            self._state = State(world.problem.init, world.object_types, world.rules.types)
            self._found = {}
            feedback = self._writer().expand(INTRO, {})
            return feedback, self._offer(), False
        except PddlError as error:
            raise _unplayable(self.game_file, error) from error

    def _run(self, command: str) -> tuple[str, list[str], bool]:
        action, binding = self._options[command]
        try:
            apply(self._state, self._world, action, binding)
            context = {key: binding[name] for key, (name, _) in zip(action.mapping_keys, action.action.params)}
            feedback = self._writer().write(action.text.feedback, context)
            return feedback, self._offer(), goal_reached(self._state, self._world)
        except PddlError as error:
            raise _unplayable(self.game_file, error) from error

    def _offer(self) -> list[str]:
        """The admissible commands, sorted; where two actions read the same, the first found is the one run."""
        writer = self._writer()
        options: dict[str, tuple[CompiledAction, dict[str, str]]] = {}
        state = self._state
        for action in self._world.rules.actions:
            # an action's bindings change only when a predicate its precondition reads does
            stamp = tuple(state.version.get(p, 0) for p in action.reads)
            found = self._found.get(action.action.name)
            if found is None or found[0] != stamp:
                found = self._found[action.action.name] = (stamp, list(applicable(state, self._world, action)))
            for binding in found[1]:
                key = (action.action.name, *binding.values())
                command = self._commands.get(key)
                if command is None:
                    context = {key: binding[name] for key, (name, _) in zip(action.mapping_keys, action.action.params)}
                    command = writer.write(action.text.template, context)
                    if action.static_template:
                        self._commands[key] = command
                options.setdefault(command, (action, binding))
        self._options = options
        return sorted(options)
