"""Engines that fail on purpose, for the pool's fault tests. They run the real game otherwise."""

from __future__ import annotations

import os
import time

from evoh.env.engine import GameEngine


class FaultyEngine(GameEngine):
    """The real engine, except that `crash!` kills its worker process and `hang!` never answers."""

    def step(self, command: str):
        if command == "crash!":
            os._exit(3)
        if command == "hang!":
            time.sleep(3600)
        if command == "raise!":
            raise ValueError("the engine refused")
        return super().step(command)
