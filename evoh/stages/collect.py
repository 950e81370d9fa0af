"""`evoh collect`: teacher trajectories through the shared episode loop, with the Experience bank between batches.

Tasks are cut into fixed batches (``batch_size`` in id order). The bank is frozen while a batch plays and
consolidated after it; ``collect/bank.json`` holds the bank and how many batches it has absorbed, written
atomically together, so a killed run resumes at the batch it was in, with the same bank, skipping the
episodes already written: the result is the one an uninterrupted run gives.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from evoh import __version__
from evoh.config import Recipe, recipe_dict, recipe_toml
from evoh.env.games import data_root, load_tasks
from evoh.env.pool import EnvPool
from evoh.env.types import Task
from evoh.errors import EvohError
from evoh.harness.episode import EpisodeSettings
from evoh.harness.experience import Bank, consolidate
from evoh.harness.prompts import HarnessModules, demonstrations
from evoh.harness.reward import REWARD_VERSION
from evoh.policy.expert import ExpertPolicy
from evoh.policy.search_prior import SearchPrior
from evoh.rollout import rollout
from evoh.stages.summary import latest, summarize
from evoh.workspace import RECIPE_FILE, JsonlLog, Workspace, atomic_write_bytes, atomic_write_json, file_sha256, fingerprint, read_jsonl

log = logging.getLogger(__name__)
STAGE = "collect"


def episode_settings(recipe: Recipe) -> EpisodeSettings:
    h = recipe.harness
    shots = ""
    if h.few_shot:
        if not h.few_shot_from:
            raise EvohError("harness.few_shot needs harness.few_shot_from", hint="--set harness.few_shot_from=WS/collect/trajectories.jsonl")
        shots = demonstrations(read_jsonl(Path(h.few_shot_from)).records, h.few_shot)
    return EpisodeSettings(
        mode=h.mode,
        modules=HarnessModules(h.belief, h.plan, h.experience),
        max_steps=recipe.env.max_steps,
        charge_meta_actions=h.charge_meta_actions,
        free_meta_cap=h.free_meta_cap,
        recall_k=h.recall_k,
        demonstrations=shots,
    )


def expert_policy(recipe: Recipe, seed: int) -> ExpertPolicy:
    """The expert with its search ranking learned from the train split (empty when there is no train split)."""
    try:
        train = load_tasks("train", recipe.env.data or None)
    except EvohError:
        log.warning("no train split found: the expert searches without its learned ranking")
        train = []
    return ExpertPolicy(SearchPrior.from_games(train), recipe.expert, seed)


def _batches(tasks: list[Task], size: int) -> list[list[Task]]:
    return [tasks[i : i + size] for i in range(0, len(tasks), max(1, size))]


def run(
    recipe: Recipe,
    workspace: Workspace,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Collect teacher episodes into ``WS/collect/``; returns the summary."""
    c = recipe.collect
    data = data_root(recipe.env.data or None)
    tasks = load_tasks(c.split, data, c.limit or None)
    settings = episode_settings(recipe)
    policy = expert_policy(recipe, c.seed)
    identity = policy.identity()
    run_key = {k: v for k, v in recipe_dict(recipe).items() if k != "collect"} | {
        "collect": {k: v for k, v in dataclasses.asdict(c).items() if k != "limit"},
    }
    started = time.time()
    with workspace.writing(STAGE) as directory:
        _check_same_run(directory, run_key)
        atomic_write_bytes(workspace.root / RECIPE_FILE, recipe_toml(recipe).encode())
        bank, batches_done = _load_state(directory, c.bank)
        with JsonlLog(directory / "trajectories.jsonl") as trajectories, EnvPool(
            recipe.env.workers, max_steps=recipe.env.max_steps, step_timeout=recipe.env.step_timeout
        ) as pool:
            done = {r["fingerprint"] for r in trajectories.records if not r.get("error")}
            if on_start:
                on_start(len(tasks), sum(1 for r in latest(trajectories.records) if not r.get("error")))
            for index, batch in enumerate(_batches(tasks, c.batch_size)):
                if index < batches_done:
                    continue
                digest = bank.digest()

                def key(task: Task, digest: str = digest) -> str:
                    return fingerprint({"task": task.id, "protocol": settings.protocol(), "bank": digest, "policy": identity})

                def finish(episode, usage, key=key) -> None:
                    record = episode.record({"fingerprint": key(episode.task), "policy": identity, "usage": usage})
                    trajectories.append(record)
                    if on_episode:
                        on_episode(record)

                jobs = [(t.id, t) for t in batch if key(t) not in done]
                rollout(jobs, policy, pool, settings, bank, finish, max_active=c.max_active)
                wanted = {key(t) for t in batch}
                played = [r for r in latest(trajectories.records) if r["fingerprint"] in wanted]
                if not c.freeze_bank:
                    bank, refused = consolidate(bank, played)
                    for reason in refused:
                        log.info("bank edit refused: %s", reason)
                _save_state(directory, bank, index + 1)
        records = _records_for(directory, tasks)
        summary = {
            **summarize(records),
            "split": c.split,
            "protocol": settings.protocol(),
            "policy": identity,
            "reward": REWARD_VERSION,
            "bank": bank.digest(),
            "evoh_version": __version__,
        }
        atomic_write_json(directory / "summary.json", summary)
        workspace.finish(
            STAGE,
            {
                "config": recipe_dict(recipe),
                "inputs": {"data": str(data), "bank": {"path": c.bank, "sha256": file_sha256(Path(c.bank))} if c.bank else None},
                "seed": c.seed,
                "seconds": time.time() - started,
                "episodes": summary["episodes"],
                "success": summary["success"],
                "grammar": summary["grammar"],
            },
        )
    return summary


def _records_for(directory: Path, tasks: list[Task]) -> list[dict[str, Any]]:
    ids = {t.id for t in tasks}
    records = [r for r in latest(read_jsonl(directory / "trajectories.jsonl").records) if r["task"]["id"] in ids]
    by_task = {r["task"]["id"]: r for r in records}  # the last record of each task (batches only move forward)
    return list(by_task.values())


def _check_same_run(directory: Path, run_key: dict[str, Any]) -> None:
    """A stage directory resumes only the run that made it: other settings would mix two experiments."""
    path = directory / "run.json"
    if path.exists():
        previous = orjson.loads(path.read_bytes())
        if previous != orjson.loads(orjson.dumps(run_key)):
            changed = sorted(
                f"{section}.{k}" for section in run_key for k in run_key[section]
                if previous.get(section, {}).get(k) != run_key[section][k]
            )
            raise EvohError(
                f"{directory} holds a collection made with other settings ({', '.join(changed) or 'sections'})",
                hint="use a new workspace (-w), or delete that collect/ folder to start over",
            )
    else:
        atomic_write_json(path, run_key)


def _load_state(directory: Path, start_bank: str) -> tuple[Bank, int]:
    state = directory / "bank.json"
    if state.exists():
        bank = Bank.load(state)
        return bank, int(orjson.loads(state.read_bytes()).get("batches_done", 0))
    return (Bank.load(Path(start_bank)) if start_bank else Bank()), 0


def _save_state(directory: Path, bank: Bank, batches_done: int) -> None:
    atomic_write_json(directory / "bank.json", {**bank.to_dict(), "batches_done": batches_done})
