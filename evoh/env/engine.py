"""One game in this process: the step rules every world shares, and ALFWorld games on TextWorld's PDDL engine.

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
from evoh.errors import EvohError

NOTHING_HAPPENS = "Nothing happens."
HIDDEN_COMMANDS = frozenset({"help"})


def _start(game_file: str) -> Any:
    # alfworld creates ~/.cache/alfworld on import unless ALFWORLD_DATA is set
    os.environ.setdefault("ALFWORLD_DATA", str(Path(game_file).resolve().parent))
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    except ImportError as exc:
        raise EvohError(
            f"env.engine = textworld needs alfworld and textworld ({exc})",
            hint="pip install 'evoh[textworld]', or play on the native engine (env.engine = \"native\", the default)",
        ) from None

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    return textworld.start(game_file, infos, wrappers=[AlfredDemangler(), AlfredInfos])


class CheckedEngine:
    """Validity and the step budget, the same for every world: ``reset()`` starts an episode,
    ``step(command)`` advances it. A world supplies ``_begin()`` and ``_run(command)``, each answering
    (feedback, admissible commands, won); it is only ever asked to run an admissible command."""

    def __init__(self, game_file: str, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.game_file = game_file
        self.max_steps = max_steps
        self._admissible: tuple[str, ...] = ()
        self._steps = 0
        self._won = False

    def _begin(self) -> tuple[str, list[str], bool]:
        raise NotImplementedError

    def _run(self, command: str) -> tuple[str, list[str], bool]:
        raise NotImplementedError

    def reset(self) -> Step:
        feedback, admissible, _ = self._begin()
        self._steps, self._won = 0, False
        return self._answer(feedback, admissible)

    def step(self, command: str) -> Step:
        if self._won or self._steps >= self.max_steps:
            raise RuntimeError("the episode is over: reset before stepping again")
        self._steps += 1
        wanted = command.strip().lower()
        match = next((c for c in self._admissible if c.lower() == wanted), None)
        if match is None:
            return Step(NOTHING_HAPPENS, self._admissible, False, self._steps >= self.max_steps, self._steps, valid=False)
        feedback, admissible, won = self._run(match)
        self._won = won
        return self._answer(feedback, admissible)

    def _answer(self, feedback: str, admissible: list[str]) -> Step:
        self._admissible = tuple(c for c in admissible if c not in HIDDEN_COMMANDS)
        done = self._won or self._steps >= self.max_steps
        return Step(feedback.strip(), self._admissible, self._won, done, self._steps, valid=True)

    def close(self) -> None:
        pass


class GameEngine(CheckedEngine):
    """An ALFWorld game on TextWorld."""

    def __init__(self, game_file: str, max_steps: int) -> None:
        super().__init__(game_file, max_steps)
        self._env = _start(game_file)

    def _begin(self) -> tuple[str, list[str], bool]:
        state = self._env.reset()
        return state["feedback"], state["admissible_commands"], False

    def _run(self, command: str) -> tuple[str, list[str], bool]:
        state, _, _ = self._env.step(command)
        return state["feedback"], state["admissible_commands"], bool(state["won"])

    def close(self) -> None:
        self._env.close()
