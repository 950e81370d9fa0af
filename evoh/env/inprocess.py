"""The pool's interface over engines that live in this process: for worlds that need no worker process.

MiniHouse's engines and the native ALFWorld engine are pure Python and own their state, so the episodes of a
rollout step one after another here, far faster than a message to a worker would travel. An engine exception fails only its
episode, with the error recorded, as in the process pool.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from evoh.env.pool import EngineFactory
from evoh.env.types import Step, Task


class InProcessPool:
    """``EnvPool``'s ``reset``/``step``/``release`` over engines built by ``engine(game_file, max_steps)``."""

    def __init__(self, engine: EngineFactory, *, max_steps: int = 50) -> None:
        self.max_steps = max_steps
        self.replaced_workers = 0  # there are none to replace
        self._engine = engine
        self._active: dict[Hashable, Any] = {}

    def reset(self, tasks: Mapping[Hashable, Task]) -> dict[Hashable, Step]:
        results = {}
        for key, task in tasks.items():
            try:
                self._active[key] = engine = self._engine(task.game_file, self.max_steps)
                results[key] = engine.reset()
            except Exception as exc:  # a game that cannot start fails its episode only
                results[key] = self._failed(key, exc)
        return results

    def step(self, commands: Mapping[Hashable, str]) -> dict[Hashable, Step]:
        results = {}
        for key, command in commands.items():
            if key not in self._active:
                raise KeyError(f"no running episode {key!r}: reset it first")
            try:
                results[key] = self._active[key].step(command)
            except Exception as exc:
                results[key] = self._failed(key, exc)
        return results

    def release(self, keys) -> None:
        for key in keys:
            self._active.pop(key, None)

    def _failed(self, key: Hashable, exc: Exception) -> Step:
        self._active.pop(key, None)
        return Step("", (), won=False, done=True, steps=0, valid=False, error=f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._active.clear()

    def __enter__(self) -> InProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
