"""One GRPO update: rollouts → rewards → advantages → samples → optimizer steps → the consolidated bank.

T train games × G rollouts each play through the shared episode loop with the Experience bank frozen; each
finished episode keeps its turns' token ids beside its record. The cost-aware reward scores every episode,
advantages compare the rollouts of one game, and every turn of a trained episode becomes a sample carrying
that episode's advantage. Under several processes each plays its share of the games.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evoh.env.types import Task
from evoh.grpo.metrics import episode_figures, episode_line, group_outcomes, meta_pressure, update_metrics
from evoh.grpo.objective import Sample, group_advantages, groups_to_train, rollouts_to_train
from evoh.grpo.optimise import optimise
from evoh.grpo.policies import Generators, is_greedy_rollout
from evoh.grpo.state import TrainState
from evoh.harness.episode import Episode, EpisodeSettings, TurnTokens
from evoh.harness.experience import Bank, consolidate
from evoh.harness.reward import REWARD_PARTS, reward
from evoh.memory import release_freed_memory
from evoh.records import EpisodeRecord
from evoh.rollout import rollout


@dataclass
class Rollout:
    """A finished episode: its key (game, index), its record, and beside it each turn's tokens."""

    key: tuple[str, int]
    record: EpisodeRecord
    tokens: list[TurnTokens | None]


@dataclass
class Played:
    """This process's share of one update's rollouts and what the update makes of them."""

    rollouts: list[Rollout]  # by key
    rewards: list[dict[str, Any]]  # of the rollouts without an engine error, in the same order
    samples: list[Sample]  # the turns to train on
    groups: int  # games trained
    scores: dict[tuple[str, int], dict[str, Any]]  # each scored rollout's reward, advantage and whether it was trained


def tasks_for_update(tasks: list[Task], update: int, g) -> list[Task]:
    """The T games of update ``u``: a function of (seed, u) only, so a resumed run draws the same ones."""
    rng = random.Random(f"{g.seed}:{update}")
    return rng.sample(tasks, min(g.tasks_per_update, len(tasks)))


def play_update(state: TrainState, policy, pool, settings: EpisodeSettings, bank: Bank, tasks: list[Task], update: int) -> Played:
    """Play this process's games of update ``update`` and turn them into samples."""
    g = state.g
    chosen = tasks_for_update(tasks, update, g)
    mine = chosen[state.accelerator.process_index :: state.accelerator.num_processes]
    jobs = [((t.id, k), t) for t in mine for k in range(g.group_size)]
    rollouts: list[Rollout] = []

    def finished(episode: Episode, usage: dict[str, int]) -> None:
        rollouts.append(Rollout(episode.key, episode.typed_record({"usage": usage}), episode.tokens))

    with state.accelerator.autocast():  # generation runs the inner model, which prepare() did not wrap
        rollout(jobs, policy, pool, settings, bank, finished, max_active=max(1, len(jobs)))
    rollouts.sort(key=lambda r: r.key)
    good = [r for r in rollouts if not r.record.error]  # an engine failure is no evidence about the policy
    rewards = [reward(r.record, g.reward, update) for r in good]
    games = [r.key[0] for r in good]
    advantages = group_advantages([x["total"] for x in rewards], games, g.std_normalize)
    trained = groups_to_train([r.record.won for r in good], games, g.train_groups)
    selected = rollouts_to_train(advantages, g.train_rollouts)
    kept = [r.key[0] in trained and keep for r, keep in zip(good, selected, strict=True)]
    samples = [
        Sample(t.prompt, t.completion, advantage, t.choices, episode=r.key)
        for r, advantage, keep in zip(good, advantages, kept, strict=True)
        if keep
        for t in r.tokens
        if t is not None and t.completion
    ]
    scores = {
        r.key: {
            "reward": round(x["total"], 4),
            "reward_parts": {part: round(x[part], 4) for part in REWARD_PARTS},
            "advantage": round(advantage, 4),
            "trained": keep,
        }
        for r, x, advantage, keep in zip(good, rewards, advantages, kept, strict=True)
    }
    return Played(rollouts, rewards, samples, len(trained), scores)


def run_update(
    state: TrainState,
    generators: Generators,
    pool,
    settings: EpisodeSettings,
    bank: Bank,
    tasks: list[Task],
    update: int,
    on_phase: Callable[[str], None] = lambda phase: None,
) -> tuple[dict[str, Any], Bank, list[dict[str, Any]]]:
    """One whole update: (its line of metrics.jsonl, the bank consolidated from its episodes, its rollouts.jsonl lines);
    ``on_phase`` hears what it is doing, for progress displays."""
    g = state.g
    tick = time.time()
    generators.sync()
    games = min(g.tasks_per_update, len(tasks))
    on_phase(f"rollouts: {games * g.group_size} episodes ({games} games × {g.group_size}), up to {settings.max_steps} turns each")
    played = play_update(state, generators.rollouts, pool, settings, bank, tasks, update)
    rollout_seconds = time.time() - tick
    tick = time.time()
    on_phase(f"optimising: {len(played.samples)} turns of {played.groups} games")
    stats = optimise(state, played.samples, g.seed * 100_003 + update)
    seconds = {"rollout_seconds": rollout_seconds, "update_seconds": time.time() - tick}
    release_freed_memory()  # the optimisation's activations, before validation plays on
    records = state.gather([r.record for r in played.rollouts])
    if not g.freeze_bank:
        bank, _ = consolidate(bank, [r.to_dict() for r in records if not r.error])
    metrics = update_metrics(state, update, records, played.rewards, (len(played.samples), played.groups), stats, seconds)
    if g.greedy_rollout:  # the games as evaluation would play them, before this update's step
        metrics["greedy"] = episode_figures(state.gather([r.record for r in played.rollouts if is_greedy_rollout(r.key, g)]))
    lines = state.gather(
        [
            episode_line(update, r.key, r.record, played.scores.get(r.key, {}), is_greedy_rollout(r.key, g))
            for r in played.rollouts
        ]
    )
    metrics.update(meta_pressure(lines), groups=group_outcomes(lines))
    return metrics, bank, lines
