"""The two values the environment layer hands upward: a game to play and the result of one step."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# ALFWorld's six task types, long name -> the short name used in tables (the paper's column order)
TASK_TYPES: dict[str, str] = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}
SPLIT_ALIASES = {"eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen"}
GRAMMARS = ("2.1.1", "2.1.2")


@dataclass(frozen=True)
class Task:
    """One game: which world it belongs to, where its file is (or how to generate it) and what kind of task it is."""

    id: str  # "<split>/<game folder>/<trial folder>", stable across machines
    split: str
    task_type: str  # long name, a key of TASK_TYPES
    game_file: str  # absolute path of game.tw-pddl
    grammar: str  # "2.1.1" (put X in/on Y) or "2.1.2" (move X to Y, help)
    kind: str = "alfworld"  # the world: alfworld (game_file is a game.tw-pddl) or minihouse (game_file names a generated game)

    @property
    def short_type(self) -> str:
        return TASK_TYPES[self.task_type]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Step:
    """What the world answered: after a reset (``valid`` is True) or after one command."""

    observation: str
    admissible: tuple[str, ...]  # what may be typed next; the engine's `help` is never listed
    won: bool
    done: bool  # won, out of steps, or failed
    steps: int  # environment steps spent in this episode so far
    valid: bool = True  # the command was one of the admissible commands
    error: str | None = None  # the engine failed this episode (worker died or hung); done is True

    @property
    def score(self) -> float:
        """ALFWorld's score: 1 for a won game, else 0."""
        return 1.0 if self.won else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "admissible": list(self.admissible), "score": self.score}
