"""One game played command by command through the pool, the same API the agents use."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from evoh.env.types import Step, Task
from evoh.env.world import pool_for


@dataclass
class Transcript:
    task: Task
    start: Step
    turns: list[tuple[str, Step]] = field(default_factory=list)
    unplayed: list[str] = field(default_factory=list)  # commands left over once the episode ended

    @property
    def last(self) -> Step:
        return self.turns[-1][1] if self.turns else self.start

    @property
    def goal(self) -> str:
        marker = "Your task is to:"
        text = self.start.observation
        return text[text.index(marker) + len(marker) :].strip() if marker in text else ""

    def to_dict(self) -> dict:
        return {
            "task": self.task.to_dict(),
            "goal": self.goal,
            "start": self.start.to_dict(),
            "turns": [{"command": c, **s.to_dict()} for c, s in self.turns],
            "won": self.last.won,
            "steps": self.last.steps,
            "unplayed": self.unplayed,
        }


class GameSession:
    """A single episode (on a one-worker pool for TextWorld, in this process otherwise): ``start()``, then
    ``send(command)`` until ``done``."""

    KEY = "play"

    def __init__(self, task: Task, max_steps: int = 50, step_timeout: float = 60.0, engine: str = "native") -> None:
        self.task = task
        self._pool = pool_for(task.kind, max_steps, 1, step_timeout, engine)
        self.transcript: Transcript | None = None

    def start(self) -> Step:
        step = self._pool.reset({self.KEY: self.task})[self.KEY]
        self.transcript = Transcript(self.task, step)
        return step

    def send(self, command: str) -> Step:
        assert self.transcript is not None, "start() first"
        step = self._pool.step({self.KEY: command})[self.KEY]
        self.transcript.turns.append((command, step))
        return step

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> GameSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_commands(lines: Iterable[str]) -> list[str]:
    """Commands from a file: one per line; blank lines and `#` comments are skipped."""
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def replay(task: Task, commands: list[str], max_steps: int = 50, engine: str = "native") -> Transcript:
    """Play ``commands`` in order until they run out or the episode ends."""
    with GameSession(task, max_steps=max_steps, engine=engine) as session:
        step = session.start()
        for index, command in enumerate(commands):
            if step.done:
                session.transcript.unplayed = commands[index:]
                break
            step = session.send(command)
        return session.transcript
