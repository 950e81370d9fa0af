"""`evoh refine`: teacher episodes → SFT examples in the chat ``messages`` form TRL's SFTTrainer reads.

One example per kept turn: the episode's system prompt + that turn's prompt → the teacher's response,
exactly the text the student will see and must write. Episodes below the minimum score are dropped;
in kept episodes, malformed turns, invalid actions and failed meta-actions are dropped, then optional
caps and duplicate (prompt, response) pairs. Train/val is split by episode with a seed. ``report.json``
accounts for every input episode and turn: kept, or dropped with its reason.

An episode whose turns carry labels (`evoh collect --label expert`) was played by a student and
answered turn by turn by the expert: its examples are the labels, whatever the student wrote and
whether or not it won, since the point is to teach the right move in the states the student reaches.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from evoh.config import Recipe, RefineConfig, recipe_dict
from evoh.errors import EvohError
from evoh.records import EpisodeRecord, TurnRecord
from evoh.runs.summary import latest
from evoh.workspace import (
    Workspace,
    atomic_write_bytes,
    atomic_write_json,
    file_sha256,
    read_jsonl,
)

STAGE = "refine"


def _turn_drop_reason(turn: TurnRecord, max_prompt_chars: int, labelled: bool) -> str | None:
    """Why a turn teaches nothing; a labelled turn is judged by its label, not by what the player did."""
    if labelled:
        if turn.label is None:
            return "no label"
    elif turn.kind == "malformed":
        return "malformed turn"
    elif turn.kind == "env" and not turn.valid:
        return "invalid action"
    elif turn.kind == "meta" and not turn.executed:
        return "failed meta-action"
    if max_prompt_chars and len(turn.user) > max_prompt_chars:
        return "prompt over max_prompt_chars"
    return None


def refine(records: list[EpisodeRecord], recipe: Recipe) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Pure core: (train examples, val examples, report) from episode records."""
    r = recipe.refine
    episodes = sorted(latest(records), key=lambda e: e.task.id)
    report_episodes = []
    kept: list[tuple[str, list[dict]]] = []
    seen_pairs: set[tuple[str, str, str]] = set()
    turn_drops: Counter = Counter()
    episode_drops: Counter = Counter()
    for record in episodes:
        episode_id, turns = record.task.id, record.trace
        labelled = record.labelled
        reason = _episode_drop_reason(record, r, labelled)
        if reason:
            episode_drops[reason] += 1
            turn_drops[f"episode dropped: {reason}"] += len(turns)
            report_episodes.append({"episode": episode_id, "kept": False, "reason": reason, "turns": len(turns)})
            continue
        examples, dropped = _examples(record, labelled, r.max_prompt_chars, seen_pairs)
        turn_drops.update(dropped)
        kept.append((episode_id, examples))
        report_episodes.append(
            {
                "episode": episode_id,
                "kept": True,
                "labelled": labelled,
                "turns": len(turns),
                "examples": len(examples),
                "dropped": dict(dropped),
            }
        )
    val_ids = _held_out([episode_id for episode_id, _ in kept], r.val_fraction, r.seed)
    train = [ex for episode_id, exs in kept if episode_id not in val_ids for ex in exs]
    val = [ex for episode_id, exs in kept if episode_id in val_ids for ex in exs]
    for entry in report_episodes:
        if entry["kept"]:
            entry["split"] = "val" if entry["episode"] in val_ids else "train"
    report = {
        "episodes": {
            "input": len(episodes),
            "kept": len(kept),
            "train": len(kept) - len(val_ids),
            "val": len(val_ids),
            "dropped": dict(sorted(episode_drops.items())),
        },
        "turns": {
            "input": sum(len(e.trace) for e in episodes),
            "kept": len(train) + len(val),
            "train": len(train),
            "val": len(val),
            "dropped": dict(sorted(turn_drops.items())),
        },
        "settings": recipe_dict(recipe)["refine"],
        "per_episode": report_episodes,
    }
    return train, val, report


def _episode_drop_reason(record: EpisodeRecord, r: RefineConfig, labelled: bool) -> str | None:
    if record.error:
        return "episode error"
    if (1.0 if record.won else 0.0) < r.min_score and not labelled:
        return "below min_score"
    if r.max_turns and record.turns > r.max_turns:
        return "over max_turns"
    return None


def _examples(
    record: EpisodeRecord, labelled: bool, max_prompt_chars: int, seen_pairs: set[tuple[str, str, str]]
) -> tuple[list[dict], Counter]:
    """An episode's turns as chat examples (the label's answer where the expert labelled them), and the count of
    turns dropped by reason; ``seen_pairs`` carries the (system, prompt, response) triples across episodes."""
    examples, dropped = [], Counter()
    for index, turn in enumerate(record.trace):
        why = _turn_drop_reason(turn, max_prompt_chars, labelled)
        response = turn.label if labelled else turn.response  # an unlabelled turn is dropped below
        pair = (record.system, turn.user, response)
        if why is None and pair in seen_pairs:
            why = "duplicate (prompt, response)"
        if why:
            dropped[why] += 1
            continue
        seen_pairs.add(pair)
        examples.append(
            {
                "messages": [
                    {"role": "system", "content": record.system},
                    {"role": "user", "content": turn.user},
                    {"role": "assistant", "content": response},
                ],
                "source": {"episode": record.task.id, "turn": index},
            }
        )
    return examples, dropped


def _held_out(episode_ids: list[str], val_fraction: float, seed: int) -> set[str]:
    """The episodes held out for validation: a seeded share, at least one and never all when any is asked for."""
    order = list(episode_ids)
    random.Random(seed).shuffle(order)
    n_val = round(len(order) * val_fraction)
    if val_fraction > 0 and len(order) >= 2:
        n_val = max(1, min(n_val, len(order) - 1))
    return set(order[:n_val])


def settings(recipe: Recipe, workspace: Workspace) -> dict[str, Any]:
    """What refine's examples depend on: `evoh run` keys the stage on it, and stage.json records it."""
    return dataclasses.asdict(recipe.refine)


def inputs(recipe: Recipe) -> list[str]:
    """The stages whose outputs it reads."""
    return ["collect"]


def run(recipe: Recipe, workspace: Workspace, from_files: list[Path] | None = None) -> dict[str, Any]:
    """Refine ``from_files`` (trajectories.jsonl files), or by default collect's episodes in this workspace."""
    started = time.time()
    if from_files:
        files = [Path(p) for p in from_files]
        for file in files:
            if not file.is_file():
                raise EvohError(f"input {file} does not exist", hint="pass trajectories.jsonl files written by evoh collect")
    else:
        workspace.require("collect")
        files = [workspace.episodes("collect")]
    records = [EpisodeRecord.from_dict(r, str(file)) for file in files for r in read_jsonl(file).records]
    if not records:
        raise EvohError("no episodes in the input", hint="run `evoh collect` first, or pass --input FILE")
    train, val, report = refine(records, recipe)
    if not train:
        raise EvohError("no training examples survived refining", hint="collect more episodes, or lower refine.min_score")
    with workspace.writing(STAGE) as directory:
        for name, examples in (("train", train), ("val", val)):
            lines = b"".join(orjson.dumps({"messages": ex["messages"]}) + b"\n" for ex in examples)
            atomic_write_bytes(directory / f"{name}.jsonl", lines)
        report["examples"] = {name: [ex["source"] for ex in exs] for name, exs in (("train", train), ("val", val))}
        atomic_write_json(directory / "report.json", report)
        workspace.finish(
            STAGE,
            {
                "config": recipe_dict(recipe)["refine"],
                "settings": settings(recipe, workspace),
                "inputs": [{"path": str(f), "sha256": file_sha256(f)} for f in files],
                "outputs": {name: file_sha256(directory / f"{name}.jsonl") for name in ("train", "val")},
                "seconds": time.time() - started,
                "examples": {"train": len(train), "val": len(val)},
            },
        )
    return report
