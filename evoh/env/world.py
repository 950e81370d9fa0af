"""The environment a recipe names (``env.kind``): its games, one game by name, its engines and its pool.

Everything above the environment layer asks here, so the harness, the policies and every stage play
ALFWorld and MiniHouse through the same calls. ALFWorld's games are found in ``ALFWORLD_DATA``;
MiniHouse's are listed from the recipe's size, generated when played.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evoh.config import EnvConfig
from evoh.env import minihouse
from evoh.env.games import SPLITS, Selection, SplitGames, canonical_split, data_root, discover, find_task, select_games
from evoh.env.types import TASK_TYPES, Task
from evoh.errors import EvohError

KINDS = ("alfworld", "minihouse")
ENGINES = ("native", "textworld")
_IN_RECEPTACLE = re.compile(r"\(inReceptacle ([A-Za-z]+)_bar_\S* ([A-Za-z]+)_bar_\S*\)")
_OBJECT = re.compile(r"\(objectType (\w+?)_bar_\S* (\w+)Type\)")
_RECEPTACLE = re.compile(r"\(receptacleType (\w+?)_bar_\S* (\w+)Type\)")
_GOAL = re.compile(r'"rhs": "Your task is to: (.*?)"')


def house_size(env: EnvConfig) -> minihouse.HouseSize:
    """The recipe's MiniHouse size, refused when no game of it can be laid out."""
    m = env.minihouse
    size = minihouse.HouseSize(m.receptacles, m.objects, m.distractors)
    problem = size.problem()
    if problem is None and (m.valid_games < 1 or m.train_games < 1):
        problem = f"valid_games = {m.valid_games} and train_games = {m.train_games} must be at least 1"
    if problem:
        raise EvohError(f"env.minihouse.{problem}", hint="fix [env.minihouse] in the recipe or --set env.minihouse.KEY=VALUE")
    return size


def check_kind(env: EnvConfig) -> str:
    if env.kind not in KINDS:
        raise EvohError(f"unknown env.kind {env.kind!r}", hint=f"use one of {', '.join(KINDS)}")
    if env.kind == "minihouse":
        house_size(env)
    return env.kind


def discover_games(env: EnvConfig, split: str) -> SplitGames:
    """Every playable game of a split (ALFWorld: and every rejected folder, with its reason)."""
    if check_kind(env) == "alfworld":
        return discover(split, data_root(env.data or None))
    split = canonical_split(split)
    size, m = house_size(env), env.minihouse
    per_type = m.train_games if split == "train" else m.valid_games
    tasks = [
        Task(
            id=minihouse.game_id(split, long, i),
            split=split,
            task_type=long,
            game_file=minihouse.game_file(split, long, i, size),
            grammar="2.1.1",
            kind="minihouse",
        )
        for long in TASK_TYPES
        for i in range(per_type)
    ]
    return SplitGames(split=split, directory=Path(f"minihouse/{split}"), tasks=sorted(tasks, key=lambda t: t.id))


def load_games(
    env: EnvConfig,
    split: str,
    limit: int | None = None,
    spread: bool = False,
    types: list[str] | tuple[str, ...] = (),
    ids: list[str] | tuple[str, ...] = (),
) -> list[Task]:
    """``limit`` playable games of a split in id order (see ``choose_games``)."""
    return choose_games(env, split, limit, spread, types, ids).tasks


def choose_games(
    env: EnvConfig,
    split: str,
    limit: int | None = None,
    spread: bool = False,
    types: list[str] | tuple[str, ...] = (),
    ids: list[str] | tuple[str, ...] = (),
) -> Selection:
    """``limit`` games of a split in id order, and the damaged ones among them, skipped with a warning (see
    ``games.select_games`` for ``spread``, ``types`` and ``ids``)."""
    return select_games(discover_games(env, split), limit, spread, types, ids)


def find_game(env: EnvConfig, spec: str) -> Task:
    """One game by task id or ``split:index`` (ALFWorld also takes a trial folder)."""
    if check_kind(env) == "alfworld":
        return find_task(spec, env.data or None)
    split, sep, index = spec.partition(":")
    if sep:
        tasks = discover_games(env, split).tasks
        if not index.isdigit() or int(index) >= len(tasks):
            raise EvohError(f"{spec!r}: index must be 0..{len(tasks) - 1}", hint=f"for example {split}:0")
        return tasks[int(index)]
    split = spec.split("/", 1)[0]
    if split in SPLITS:
        match = [t for t in discover_games(env, split).tasks if t.id == spec]
        if match:
            return match[0]
        short = spec[6:].rpartition("-")[0]
        if split == "train" and short in TASK_TYPES.values() and re.fullmatch(r"train/[a-z0-9]+-\d{5}", spec):  # unbounded
            file = f"{minihouse.GAME_PREFIX}{spec}@{house_size(env).spec()}"
            _, long, _, _ = minihouse.parse_game_file(file)
            return Task(spec, "train", long, file, "2.1.1", "minihouse")
    raise EvohError(f"no MiniHouse game {spec!r}", hint="give a task id like valid_seen/heat-00003, or valid_seen:0")


def make_engine(game_file: str, max_steps: int) -> Any:
    """An engine for any game file: a generated MiniHouse game, else an ALFWorld game.tw-pddl on TextWorld."""
    if game_file.startswith(minihouse.GAME_PREFIX):
        from evoh.env.minihouse_engine import HouseEngine

        return HouseEngine(game_file, max_steps)
    from evoh.env.engine import GameEngine

    return GameEngine(game_file, max_steps)


def make_native_engine(game_file: str, max_steps: int) -> Any:
    """An engine for any game file: a generated MiniHouse game, else an ALFWorld game.tw-pddl on evoh's own engine."""
    if game_file.startswith(minihouse.GAME_PREFIX):
        return make_engine(game_file, max_steps)
    from evoh.env.native import NativeEngine

    return NativeEngine(game_file, max_steps)


def engine_factory(engine: str) -> Any:
    """The engine builder for ``env.engine`` (native or textworld)."""
    return make_native_engine if check_engine(engine) == "native" else make_engine


def played_by(env: EnvConfig) -> str:
    """What answers the commands: minihouse, or ALFWorld's native or textworld engine."""
    return env.kind if check_kind(env) == "minihouse" else check_engine(env.engine)


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise EvohError(f"unknown env.engine {engine!r}", hint=f"use one of {', '.join(ENGINES)}")
    return engine


def open_pool(env: EnvConfig, max_steps: int, workers: int | None = None) -> Any:
    """The pool a recipe's games play on: worker processes for TextWorld, this process otherwise."""
    return pool_for(check_kind(env), max_steps, workers or env.workers, env.step_timeout, env.engine)


def pool_for(kind: str, max_steps: int, workers: int, step_timeout: float, engine: str = "native") -> Any:
    """A pool for games of ``kind``. MiniHouse's engines and native ALFWorld ones are thread-safe and live in this
    process; TextWorld's are neither and each plays in a worker process that a hung or dead game cannot take down."""
    if kind == "minihouse" or check_engine(engine) == "native":
        from evoh.env.inprocess import InProcessPool

        return InProcessPool(engine_factory(engine), max_steps=max_steps)
    from evoh.env.pool import EnvPool

    return EnvPool(workers, max_steps=max_steps, step_timeout=step_timeout, engine=make_engine)


def data_input(env: EnvConfig) -> str:
    """What a stage's manifest records as the games it read."""
    if check_kind(env) == "minihouse":
        return f"minihouse:{house_size(env).spec()}"
    return str(data_root(env.data or None))


@dataclass(frozen=True)
class GameFacts:
    """What a game holds, for statistics over a split (never shown to an agent playing it)."""

    goal: str
    objects: tuple[str, ...]  # object types
    receptacles: tuple[str, ...]  # receptacle types
    placements: tuple[tuple[str, str], ...]  # (object type, receptacle type) where each object starts


def game_facts(task: Task) -> GameFacts:
    if task.game_file.startswith(minihouse.GAME_PREFIX):
        house = minihouse.generate(*minihouse.parse_game_file(task.game_file))
        placements = tuple((minihouse.type_of(t.name), minihouse.type_of(t.where)) for t in house.things)
        return GameFacts(house.goal, tuple(sorted({o for o, _ in placements})), house.layout(), placements)
    game = orjson.loads(Path(task.game_file).read_bytes())
    problem = game["pddl_problem"]
    goal = _GOAL.search(game["grammar"])
    return GameFacts(
        goal.group(1) if goal else "",
        tuple(sorted({t.lower() for _, t in _OBJECT.findall(problem)})),
        tuple(sorted({t.lower() for _, t in _RECEPTACLE.findall(problem)})),
        tuple((o.lower(), p.lower()) for o, p in _IN_RECEPTACLE.findall(problem)),
    )


def placement_counts(tasks: list[Task]) -> dict[str, dict[str, int]]:
    """Object type -> receptacle type -> how many of the games start an object there."""
    counts: dict[str, Counter] = {}
    for task in tasks:
        for obj, place in game_facts(task).placements:
            counts.setdefault(obj, Counter())[place] += 1
    return {k: dict(v) for k, v in counts.items()}
