"""One ALFWorld game on the real TextWorld PDDL engine, in this process.

The engine is loaded the way alfworld's ``AlfredTWEnv`` loads it (``AlfredDemangler`` names, the game
file in the infos) but one game at a time, so that a pool of processes can each host several.
Validity is decided here, exactly: a command runs only if it equals an admissible command after
trimming and lower-casing; anything else answers ``Nothing happens.``, spends a step and leaves the
world untouched. The 2.1.2 ``help`` command is never offered and never run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evoh.env.types import Step

NOTHING_HAPPENS = "Nothing happens."
HIDDEN_COMMANDS = frozenset({"help"})


def _start(game_file: str) -> Any:
    # alfworld creates ~/.cache/alfworld on import unless ALFWORLD_DATA is set
    os.environ.setdefault("ALFWORLD_DATA", str(Path(game_file).resolve().parent))
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    return textworld.start(game_file, infos, wrappers=[AlfredDemangler(), AlfredInfos])


class GameEngine:
    """A playable game: ``reset()`` starts an episode, ``step(command)`` advances it."""

    def __init__(self, game_file: str, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.game_file = game_file
        self.max_steps = max_steps
        self._env = _start(game_file)
        self._admissible: tuple[str, ...] = ()
        self._steps = 0
        self._won = False

    def reset(self) -> Step:
        state = self._env.reset()
        self._steps, self._won = 0, False
        return self._answer(state["feedback"], state, valid=True)

    def step(self, command: str) -> Step:
        if self._won or self._steps >= self.max_steps:
            raise RuntimeError("the episode is over: reset before stepping again")
        self._steps += 1
        wanted = command.strip().lower()
        match = next((c for c in self._admissible if c.lower() == wanted), None)
        if match is None:
            return Step(NOTHING_HAPPENS, self._admissible, False, self._steps >= self.max_steps, self._steps, valid=False)
        state, _, _ = self._env.step(match)
        self._won = bool(state["won"])
        return self._answer(state["feedback"], state, valid=True)

    def _answer(self, feedback: str, state: Any, valid: bool) -> Step:
        self._admissible = tuple(c for c in state["admissible_commands"] if c not in HIDDEN_COMMANDS)
        done = self._won or self._steps >= self.max_steps
        return Step(feedback.strip(), self._admissible, self._won, done, self._steps, valid=valid)

    def close(self) -> None:
        self._env.close()
