"""Playing a list of games into a stage directory: the part `collect` and `eval` share.

Tasks are cut into fixed batches (``batch_size`` in id order). The Experience bank is frozen while a
batch plays and consolidated after it; ``bank.json`` holds the bank and how many batches it has
absorbed, written atomically together, so a killed run resumes at the batch it was in, with the same
bank, skipping the episodes already written: the result is the one an uninterrupted run gives. An
episode that ended in an error (a dead engine, a policy out of retries) is not counted as done: a
rerun plays it again, inside its batch while that batch is open, or else in one extra batch at the end
with the bank as it is then; so is a game of a consolidated batch whose record was lost (a torn line).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evoh.config import EnvConfig, PlayConfig, Recipe, recipe_dict, recipe_toml
from evoh.env.types import Task
from evoh.env.world import choose_games, data_input, open_pool, played_by
from evoh.errors import EvohError
from evoh.harness.episode import EpisodeSettings
from evoh.harness.experience import Bank, consolidate
from evoh.harness.prompts import HarnessModules, demonstrations
from evoh.harness.reward import REWARD_VERSION
from evoh.memory import release_freed_memory
from evoh.policy.base import Policy
from evoh.records import EpisodeRecord
from evoh.rollout import rollout
from evoh.runs.key import check_same_run, record_run, run_key
from evoh.runs.summary import latest, summarize
from evoh.workspace import (
    RECIPE_FILE,
    JsonlLog,
    Workspace,
    atomic_write_bytes,
    atomic_write_json,
    file_sha256,
    fingerprint,
    read_jsonl,
)

log = logging.getLogger(__name__)


def episode_settings(recipe: Recipe) -> EpisodeSettings:
    """The episode loop's settings from a recipe's [env] and [harness] sections."""
    h = recipe.harness
    shots = ""
    if h.few_shot:
        if not h.few_shot_from:
            raise EvohError(
                "harness.few_shot needs harness.few_shot_from", hint="--set harness.few_shot_from=WS/collect/trajectories.jsonl"
            )
        shots = demonstrations(read_jsonl(Path(h.few_shot_from)).records, h.few_shot)
    return EpisodeSettings(
        mode=h.mode,
        modules=HarnessModules(h.belief, h.plan, h.experience),
        max_steps=recipe.env.max_steps,
        charge_meta_actions=h.charge_meta_actions,
        free_meta_cap=h.free_meta_cap,
        recall_k=h.recall_k,
        demonstrations=shots,
        system_style=h.system_prompt,
    )


def play_settings(recipe: Recipe) -> dict[str, Any]:
    """The [env] and [harness] settings that change how episodes play (not how many workers run them). The engine
    is named only where it is the native one: every run made before it existed played on TextWorld, and keeps its
    key, while a native run never resumes into a TextWorld one; MiniHouse has one engine."""
    env = {k: v for k, v in dataclasses.asdict(recipe.env).items() if k not in ("workers", "step_timeout")}
    if recipe.env.kind != "alfworld" or recipe.env.engine == "textworld":
        del env["engine"]
    return {"env": env, "harness": dataclasses.asdict(recipe.harness)}


def model_settings(recipe: Recipe, policy: str) -> dict[str, Any]:
    """The [model] settings that change how ``policy`` plays: ``vllm_memory`` only for the vllm policy (it was
    added later; left out otherwise, so the keys of runs made before it stay the same)."""
    model = dataclasses.asdict(recipe.model)
    if policy != "vllm":
        model.pop("vllm_memory")
    return model


BANK_STAGES = ("collect", "grpo")


def resolve_bank(value: str, workspace: Workspace, stage: str) -> Path | None:
    """Where a stage's Experience bank starts: "" an empty bank; "collect" or "grpo" the bank that stage of this
    workspace ended with (the teacher's, or the one GRPO's rollouts built), so that trained weights play with
    the Experience they were trained alongside; "auto" collect's where this workspace has one, else an empty
    bank; anything else a bank.json path."""
    if value == "auto":
        value = "collect" if workspace.manifest("collect") is not None else ""
    if not value:
        return None
    if value not in BANK_STAGES:
        return Path(value)
    if value == stage:
        raise EvohError(
            f"the {stage} stage cannot start from its own bank",
            hint="name the other stage's bank, a bank.json path, or '' for an empty bank",
        )
    if workspace.manifest(value) is None:
        raise EvohError(
            f"no finished {value} stage in {workspace.root} to take the Experience bank from",
            hint=(
                f"run `evoh {value} -w {workspace.root}` first, pass a bank.json path, "
                f"or --set {stage}.bank='' to start from an empty bank"
            ),
        )
    return workspace.bank(value)


def bank_input(path: Path | None) -> dict[str, str] | None:
    """A starting bank as a stage manifest records it: where it was read and its hash."""
    return {"path": str(path), "sha256": file_sha256(path)} if path else None


def policy_key(identity: dict[str, Any]) -> dict[str, Any]:
    """What identifies a policy's behaviour: its identity without where it is served from."""
    return {k: v for k, v in identity.items() if k != "base_url"}


@dataclass
class Callbacks:
    on_start: Callable[[int, int], None] | None = None  # (episodes in all, already done)
    on_episode: Callable[[dict[str, Any]], None] | None = None


def play_tasks(
    tasks: list[Task],
    policy: Policy,
    settings: EpisodeSettings,
    env: EnvConfig,
    directory: Path,
    records_file: str,
    *,
    start_bank: Path | None = None,
    batch_size: int = 16,
    max_active: int = 16,
    freeze_bank: bool = False,
    callbacks: Callbacks | None = None,
) -> tuple[list[dict[str, Any]], Bank]:
    """Play every task once into ``directory/records_file``; returns the latest record of each task and the bank."""
    callbacks = callbacks or Callbacks()
    identity = policy.identity()
    bank, batches_done = _load_state(directory, start_bank)
    path = directory / records_file
    with JsonlLog(path) as records, open_pool(env, env.max_steps) as pool:
        done = {r["fingerprint"] for r in records.records if not r.get("error")}
        finished_ids = {r["task"]["id"] for r in records.records if not r.get("error")}
        if callbacks.on_start:
            callbacks.on_start(len(tasks), len(finished_ids & {t.id for t in tasks}))
        batches = _batches(tasks, batch_size)
        # a game of a batch already consolidated without a finished record (its episode ended in an error,
        # or its record was lost, e.g. a torn last line dropped) is played again at the end, with the bank
        # as it is now, as one more batch
        repair = [t for batch in batches[:batches_done] for t in batch if t.id not in finished_ids]
        plan = [(i, b) for i, b in enumerate(batches) if i >= batches_done] + ([(None, repair)] if repair else [])
        for index, batch in plan:
            digest = bank.digest()

            def key(task: Task, digest: str = digest) -> str:
                return fingerprint(
                    {"task": task.id, "protocol": settings.protocol(), "bank": digest, "policy": policy_key(identity)}
                )

            def finish(episode, usage, key=key) -> None:
                record = episode.record({"fingerprint": key(episode.task), "policy": identity, "usage": usage})
                records.append(record)
                if callbacks.on_episode:
                    callbacks.on_episode(record)

            rollout([(t.id, t) for t in batch if key(t) not in done], policy, pool, settings, bank, finish, max_active=max_active)
            wanted = {key(t) for t in batch}
            played = [r for r in latest(records.records) if r["fingerprint"] in wanted]
            if not freeze_bank:
                bank, refused = consolidate(bank, [r for r in played if not r.get("error")])
                for reason in refused:
                    log.info("bank edit refused: %s", reason)
            _save_state(directory, bank, index + 1 if index is not None else batches_done)
            release_freed_memory()
    by_task = {r["task"]["id"]: r for r in latest(read_jsonl(path).records)}
    return [by_task[t.id] for t in tasks if t.id in by_task], bank


def _run_key(stage: str, recipe: Recipe, play: PlayConfig, listed, policy: Policy) -> dict[str, Any]:
    """What makes a run of episodes this run: how episodes play, which games, and the policy's behaviour (not
    how many games at a time, nor where the game list lies)."""
    settings = {
        **play_settings(recipe),
        "play": {
            **{k: v for k, v in dataclasses.asdict(play).items() if k not in ("limit", "max_active")},
            "games": fingerprint(list(listed)) if listed else "",
        },
        "policy": policy_key(policy.identity()),
    }
    return run_key(stage, settings, inputs={})


def _summary(
    recipe: Recipe, play: PlayConfig, chosen, policy: Policy, bank: Bank, bank_path: Path | None,
    extra: dict[str, Any] | None, path: Path, records: list[dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    """summary.json: the records' figures, the games asked for and skipped, and how the episodes played."""
    from evoh import __version__

    identity = policy.identity()
    return {
        **summarize([EpisodeRecord.from_dict(r, str(path)) for r in records]),
        **(extra or {}),
        # success is over the games played: the games asked for, less the unplayable ones skipped
        "requested": chosen.requested,
        "skipped_games": [{"id": g.id, "reason": g.reason} for g in chosen.skipped],
        "split": play.split,
        "protocol": {
            **episode_settings(recipe).protocol(),
            "grammar": sorted({t.grammar for t in chosen.tasks}),
            "engine": played_by(recipe.env),
            "bank": bank.digest(),
            "start_bank": str(bank_path) if bank_path else None,
            "freeze_bank": play.freeze_bank,
            "policy": identity,
            "reward": REWARD_VERSION,
        },
        "policy": identity,
        "evoh_version": __version__,
    }


def _batches(tasks: list[Task], size: int) -> list[list[Task]]:
    return [tasks[i : i + size] for i in range(0, len(tasks), max(1, size))]


def _load_state(directory: Path, start_bank: Path | None) -> tuple[Bank, int]:
    state = directory / "bank.json"
    if state.exists():
        return Bank.load(state), int(orjson.loads(state.read_bytes()).get("batches_done", 0))
    return (Bank.load(start_bank) if start_bank else Bank()), 0


def _save_state(directory: Path, bank: Bank, batches_done: int) -> None:
    atomic_write_json(directory / "bank.json", {**bank.to_dict(), "batches_done": batches_done})


def run_split(
    recipe: Recipe,
    workspace: Workspace,
    stage: str,
    play: PlayConfig,
    callbacks: Callbacks | None = None,
    extra: dict[str, Any] | None = None,
    policy: Policy | None = None,
    declared: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One policy over one split into ``WS/<stage>/``: records, ``summary.json`` and ``stage.json``.
    ``policy`` defaults to the one ``play.policy`` names; ``declared``: the stage's settings, for its stage.json."""
    from evoh.env.games import read_game_list
    from evoh.policy.factory import build_policy

    records_file = workspace.episodes(stage).name  # the workspace owns the layout

    data = data_input(recipe.env)
    listed = read_game_list(play.games) if play.games else ()
    chosen = choose_games(recipe.env, play.split, play.limit or None, play.spread, ids=listed)
    tasks = chosen.tasks
    settings = episode_settings(recipe)
    policy = policy or build_policy(play.policy, recipe, play.seed)
    bank_path = resolve_bank(play.bank, workspace, stage.partition("/")[0])
    started = time.time()
    with workspace.writing(stage, unfinish=False) as directory:
        hint = f"use a new workspace (-w) or another --name, or delete {directory} to start over"
        key = _run_key(stage, recipe, play, listed, policy)
        if not check_same_run(directory, key, hint):
            record_run(directory, key)
        # the records to resume are input: a damaged one is refused before a finished stage is touched
        read_jsonl(directory / records_file, warn_torn=False)  # opening them drops a torn line, and says so
        _load_state(directory, bank_path)
        workspace.unfinish(stage)
        atomic_write_bytes(workspace.root / RECIPE_FILE, recipe_toml(recipe).encode())
        records, bank = play_tasks(
            tasks,
            policy,
            settings,
            recipe.env,
            directory,
            records_file,
            start_bank=bank_path,
            batch_size=play.batch_size,
            max_active=play.max_active,
            freeze_bank=play.freeze_bank,
            callbacks=callbacks,
        )
        summary = _summary(recipe, play, chosen, policy, bank, bank_path, extra, directory / records_file, records)
        atomic_write_json(directory / "summary.json", summary)
        workspace.finish(
            stage,
            {
                "config": recipe_dict(recipe),
                "settings": declared,
                "inputs": {"data": data, "bank": bank_input(bank_path)},
                "seed": play.seed,
                "seconds": time.time() - started,
                "episodes": summary["episodes"],
                "success": summary["success"],
                "grammar": summary["protocol"]["grammar"],
            },
        )
    return summary
