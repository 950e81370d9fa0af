"""Finding ALFWorld games in an ``ALFWORLD_DATA`` directory, with alfworld's own selection rule.

A folder holding ``traj_data.json`` is a game when (as alfworld's ``AlfredTWEnv.collect_game_files``
decides) its path names neither a "movable" nor a "Sliced" variant, its task type is one of the six,
``game.tw-pddl`` exists, and that file says ``"solvable": true``. evoh also checks that the grammar is a
known version and reports every folder it rejects with the reason. Games are sorted by id, so a
selection (``--limit``) is the same on every machine.

A folder alfworld's rule leaves out (a variant, an unsolvable game) is not part of the split. One whose files
are damaged (truncated, missing, of no known grammar) is: a selection that reaches it skips it, says so
and counts it, and never swaps in another game, so that success keeps the denominator that was asked for.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from evoh.env.types import SPLIT_ALIASES, TASK_TYPES, Task
from evoh.errors import EvohError

log = logging.getLogger(__name__)

SPLITS = ("train", "valid_seen", "valid_unseen")
_PUT_2_1_1 = 'template :: "put {o} in/on {r}"'
_MOVE_2_1_2 = 'template :: "move {o} to {r}"'


@dataclass(frozen=True)
class GameProblem:
    """A folder that looks like a game but is not playable, and why."""

    path: str
    reason: str
    by_rule: bool = False  # left out by alfworld's own selection (a variant, an unsolvable game), not damaged


@dataclass
class SplitGames:
    split: str
    directory: Path
    tasks: list[Task] = field(default_factory=list)
    problems: list[GameProblem] = field(default_factory=list)

    def by_type(self) -> dict[str, int]:
        counts = Counter(t.task_type for t in self.tasks)
        return {name: counts.get(name, 0) for name in TASK_TYPES}

    def grammars(self) -> list[str]:
        return sorted({t.grammar for t in self.tasks})

    def unplayable(self) -> list[SkippedGame]:
        """The damaged games of the split (alfworld's own exclusions are not games of it)."""
        return [SkippedGame(f"{self.split}/{p.path}", p.reason) for p in self.problems if not p.by_rule]


@dataclass(frozen=True)
class SkippedGame:
    """A game of the split that a selection reached but could not play."""

    id: str  # as a Task's id would be
    reason: str

    @property
    def task_type(self) -> str | None:
        """From the folder name, which ALFWorld starts with the task type: the file that says it may be damaged."""
        prefix = self.id.partition("/")[2].split("-")[0]
        return prefix if prefix in TASK_TYPES else None


@dataclass(frozen=True)
class Selection:
    """The games a request chose: those to play, and those it reached that are unplayable (not replaced)."""

    tasks: list[Task]
    skipped: list[SkippedGame] = field(default_factory=list)

    @property
    def requested(self) -> int:
        return len(self.tasks) + len(self.skipped)


# where `alfworld-download` puts the data when ALFWORLD_DATA is not set
DOWNLOAD_HOME = Path("~/.cache/alfworld")


def data_root(data: str | Path | None = None) -> Path:
    """The ALFWorld data directory: ``data`` if given, else ``$ALFWORLD_DATA``, else ``~/.cache/alfworld`` when
    ``alfworld-download`` has filled it."""
    value = str(data) if data else os.environ.get("ALFWORLD_DATA", "")
    if not value:
        home = DOWNLOAD_HOME.expanduser()
        if not any(home.glob("json_*")):
            raise EvohError(
                f"no ALFWorld data: --data and ALFWORLD_DATA are not set and {home} holds no json_2.1.1/",
                hint="run `alfworld-download` (it fills ~/.cache/alfworld), or pass --data DIR / set ALFWORLD_DATA "
                'to a folder holding json_2.1.1/; MiniHouse needs no data (env.kind = "minihouse")',
            )
        return home.resolve()
    root = Path(value).expanduser()
    if not root.is_dir():
        raise EvohError(f"ALFWorld data directory {root} does not exist", hint="pass --data DIR or fix ALFWORLD_DATA")
    return root.resolve()


def canonical_split(split: str) -> str:
    name = SPLIT_ALIASES.get(split, split)
    if name not in SPLITS:
        options = ", ".join([*SPLITS, *SPLIT_ALIASES])
        raise EvohError(f"unknown split {split!r}", hint=f"use one of {options}")
    return name


def split_directory(root: Path, split: str) -> Path:
    """``root/json_*/<split>`` (the standard layout), or ``root/<split>`` when root is the json folder itself."""
    candidates = [root / split, *sorted(root.glob(f"json_*/{split}"))]
    found = [c for c in candidates if c.is_dir()]
    if not found:
        raise EvohError(
            f"no {split} games under {root} (looked for {root}/json_2.1.1/{split})",
            hint="point --data or ALFWORLD_DATA at the folder that holds json_2.1.1/",
        )
    if len(found) > 1:
        raise EvohError(
            f"several {split} folders under {root}: {', '.join(str(f) for f in found)}",
            hint="point --data at the one json_* folder you mean",
        )
    return found[0]


def grammar_version(grammar: str) -> str | None:
    """2.1.1 writes ``put X in/on Y``; 2.1.2 and later write ``move X to Y`` (and add ``help``)."""
    if _MOVE_2_1_2 in grammar:
        return "2.1.2"
    if _PUT_2_1_1 in grammar:
        return "2.1.1"
    return None


def _read_json(path: Path) -> dict | str:
    """The parsed object, or a string saying why it could not be read."""
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        return f"unreadable {path.name}: {exc.strerror}"
    except orjson.JSONDecodeError as exc:
        return f"{path.name} is not valid JSON ({exc})"
    return data if isinstance(data, dict) else f"{path.name} is not a JSON object"


def _check_game(folder: Path, split: str, split_dir: Path) -> Task | GameProblem:
    rel = folder.relative_to(split_dir).as_posix()
    if "movable" in rel or "Sliced" in rel:
        return GameProblem(rel, "movable-receptacle and sliced variants are not supported by alfworld", by_rule=True)
    traj = _read_json(folder / "traj_data.json")
    if isinstance(traj, str):
        return GameProblem(rel, traj)
    task_type = traj.get("task_type")
    if task_type not in TASK_TYPES:
        return GameProblem(rel, f"unknown task type {task_type!r}")
    game_file = folder / "game.tw-pddl"
    if not game_file.exists():
        return GameProblem(rel, "game.tw-pddl is missing")
    game = _read_json(game_file)
    if isinstance(game, str):
        return GameProblem(rel, game)
    if "solvable" not in game:
        return GameProblem(rel, "game.tw-pddl has no 'solvable' key")
    if not game["solvable"]:
        return GameProblem(rel, "game.tw-pddl is marked unsolvable", by_rule=True)
    grammar = grammar_version(str(game.get("grammar", "")))
    if grammar is None:
        return GameProblem(rel, "game.tw-pddl has a grammar of no known version (neither 2.1.1 nor 2.1.2)")
    return Task(id=f"{split}/{rel}", split=split, task_type=task_type, game_file=str(game_file), grammar=grammar)


def discover(split: str, data: str | Path | None = None) -> SplitGames:
    """Every playable game of a split, and every rejected game folder with its reason."""
    split = canonical_split(split)
    directory = split_directory(data_root(data), split)
    result = SplitGames(split=split, directory=directory)
    folders = sorted(Path(root) for root, _, files in os.walk(directory) if "traj_data.json" in files)
    for folder in folders:
        checked = _check_game(folder, split, directory)
        (result.tasks if isinstance(checked, Task) else result.problems).append(checked)
    return result


def task_type_names(names: list[str] | tuple[str, ...]) -> set[str]:
    """The long names of task types given by short (``pick``) or long (``pick_and_place_simple``) name."""
    by_short = {short: long for long, short in TASK_TYPES.items()}
    unknown = [n for n in names if n not in TASK_TYPES and n not in by_short]
    if unknown:
        raise EvohError(f"unknown task type {unknown[0]!r}", hint=f"use any of {', '.join(by_short)} (or their long names)")
    return {by_short.get(n, n) for n in names}


def read_game_list(path: str | Path) -> list[str]:
    """The task ids a game list names: one per line as records write them (``valid_seen/<game>/<trial>``:
    ``task.id`` in episodes.jsonl, ``task`` in grpo's rollouts.jsonl), blank lines and ``#`` comments skipped."""
    file = Path(path).expanduser()
    try:
        lines = file.read_text().splitlines()
    except OSError as error:
        raise EvohError(
            f"cannot read the game list {file}: {error.strerror}", hint="give a text file with one task id per line"
        ) from None
    ids = [line.split("#", 1)[0].strip() for line in lines]
    ids = [i for i in ids if i]
    if not ids:
        raise EvohError(f"the game list {file} names no game", hint="write one task id per line, e.g. valid_seen/<game>/<trial>")
    return ids


def load_tasks(
    split: str,
    data: str | Path | None = None,
    limit: int | None = None,
    spread: bool = False,
    types: list[str] | tuple[str, ...] = (),
    ids: list[str] | tuple[str, ...] = (),
) -> list[Task]:
    """``limit`` playable ALFWorld games of a split (all when None); see ``select_games``."""
    return select_games(discover(split, data), limit, spread, types, ids).tasks


def select_games(
    games: SplitGames,
    limit: int | None = None,
    spread: bool = False,
    types: list[str] | tuple[str, ...] = (),
    ids: list[str] | tuple[str, ...] = (),
) -> Selection:
    """``limit`` of a split's games in id order: the first ones, or with ``spread`` ones evenly spaced over the
    split, which (ids start with the task type) covers every task type. ``types`` (short or long names) and
    ``ids`` (task ids, a game list) keep only those games, before the limit is taken. A damaged game the
    choice reaches is skipped with a warning, not replaced: the selection is the one an intact split gives."""
    split, wanted = games.split, task_type_names(types) if types else None
    chosen: list[Task | SkippedGame] = sorted([*games.tasks, *games.unplayable()], key=lambda g: g.id)
    chosen = [g for g in chosen if wanted is None or g.task_type in wanted]
    if ids:
        known = {g.id for g in chosen}
        unknown = [i for i in dict.fromkeys(ids) if i not in known]
        if unknown:
            raise EvohError(
                f"{len(unknown)} of the listed games are not playable {split} games{' of the chosen types' if wanted else ''} "
                f"(first: {unknown[0]})",
                hint=(
                    f"list task ids of the {split} split as episodes.jsonl writes them, "
                    "or choose the split they belong to (--split; grpo.split for grpo)"
                ),
            )
        listed = set(ids)
        chosen = [g for g in chosen if g.id in listed]
    if not chosen:
        kinds = f" {', '.join(sorted(TASK_TYPES[t] for t in wanted))}" if wanted else ""
        raise EvohError(f"no playable{kinds} {split} games found", hint="run `evoh games` to see why each folder was rejected")
    if limit and limit < len(chosen):
        chosen = [chosen[i * len(chosen) // limit] for i in range(limit)] if spread else chosen[:limit]
    selection = Selection([g for g in chosen if isinstance(g, Task)], [g for g in chosen if isinstance(g, SkippedGame)])
    if selection.skipped:
        _warn_skipped(split, selection)
    return selection


def _warn_skipped(split: str, selection: Selection, named: int = 10) -> None:
    skipped, fix = selection.skipped, f"`evoh games --split {split}` lists them; restore them from the ALFWorld download"
    if not selection.tasks:
        first = skipped[0]
        raise EvohError(
            f"every one of the {selection.requested} {split} games asked for is unplayable (first: {first.id}: {first.reason})",
            hint=f"{fix}, or choose other games (--limit, --games)",
        )
    lines = [f"  {g.id}: {g.reason}" for g in skipped[:named]]
    lines += [f"  and {len(skipped) - named} more"] if len(skipped) > named else []
    head = f"skipping {len(skipped)} of the {selection.requested} {split} games asked for, whose files are damaged ({fix}):"
    log.warning("\n".join([head, *lines]))


def find_task(spec: str, data: str | Path | None = None) -> Task:
    """One game, named by a path (trial folder or game.tw-pddl), a task id, or ``split:index``."""
    path = Path(spec).expanduser()
    if path.exists():
        folder = path.parent if path.is_file() else path
        if not (folder / "traj_data.json").exists():
            raise EvohError(f"{path} is not an ALFWorld game", hint="give a trial folder holding traj_data.json and game.tw-pddl")
        split = next((p for p in folder.parts[::-1] if p in SPLITS), "custom")
        checked = _check_game(folder.resolve(), split, folder.resolve().parent.parent)
        if isinstance(checked, GameProblem):
            raise EvohError(f"{path}: {checked.reason}", hint="pick another game; `evoh games` lists the playable ones")
        return checked
    if ":" in spec:
        split, _, index = spec.partition(":")
        tasks = discover(split, data).tasks  # an index counts playable games: a damaged one is not one to warn of here
        if not tasks:
            raise EvohError(f"no playable {split} games found", hint="run `evoh games` to see why each folder was rejected")
        if not index.isdigit() or int(index) >= len(tasks):
            raise EvohError(f"{spec!r}: index must be 0..{len(tasks) - 1}", hint=f"for example {split}:0")
        return tasks[int(index)]
    split = spec.split("/", 1)[0]
    if split in SPLITS or split in SPLIT_ALIASES:
        for task in discover(split, data).tasks:
            if task.id == spec or task.id.startswith(spec.rstrip("/") + "/"):
                return task
    raise EvohError(f"no game {spec!r}", hint="give a trial folder, a task id like valid_seen/<game>/<trial>, or valid_seen:0")
