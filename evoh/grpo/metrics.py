"""What a GRPO run writes about itself: one line of metrics.jsonl per update, one line of rollouts.jsonl per
episode, and the episode figures training rollouts and validation share."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any

import orjson

from evoh import tracking
from evoh.grpo.objective import group_ends
from evoh.grpo.state import TrainState
from evoh.harness.reward import REWARD_PARTS
from evoh.harness.turns import META_VERBS
from evoh.records import EpisodeRecord
from evoh.runs.summary import summarize  # shared with collect and eval; it belongs below the stages

TOKEN_FIGURES = ("loss", "pg_loss", "kl", "kl_capped", "clip_fraction", "entropy", "ratio")  # means over trained tokens


def episode_figures(records: list[EpisodeRecord]) -> dict[str, Any]:
    """Success and harness usage of a set of episodes, as training rollouts and validation both report them."""
    summary = summarize(records)
    return {
        "episodes": summary["episodes"],
        "errors": summary["errors"],
        "success": summary["success"],
        "meta_actions": summary["meta_actions"],
        "meta_actions_won": summary["meta_actions_won"],
        "meta_per_episode": {v: summary["meta_per_episode"][v]["attempted"] for v in META_VERBS},
        "meta_idle": summary["meta_idle"],
        "revisits": summary["revisits"],
        "invalid_rate": summary["invalid_rate"],
        "env_steps": summary["env_steps"],
        "turns": summary["turns"],
    }


def rollout_figures(records: list[EpisodeRecord], rewards: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-update metrics that describe the episodes: success, reward and its parts, harness usage."""
    totals = [r["total"] for r in rewards]
    return {
        **episode_figures(records),
        "reward_mean": fmean(totals) if totals else 0.0,
        "reward_std": pstdev(totals) if totals else 0.0,
        "reward": {k: fmean(r[k] for r in rewards) if rewards else 0.0 for k in REWARD_PARTS},
        "lambda_div": rewards[0]["lambda_div"] if rewards else None,
        "prompt_tokens": sum(r.usage.get("prompt_tokens", 0) for r in records),
        "completion_tokens": sum(r.usage.get("completion_tokens", 0) for r in records),
    }


def update_metrics(
    state: TrainState,
    update: int,
    records: list[EpisodeRecord],
    rewards: list[dict[str, Any]],
    trained: tuple[int, int],
    stats: dict[str, float | None],
    seconds: dict[str, float],
) -> dict[str, Any]:
    """One line of metrics.jsonl: the episodes of every process, the optimisation figures averaged over them
    (null when the update made no optimizer step), and how many turns and games it trained on."""
    samples, groups = trained
    return {
        "update": update,
        **rollout_figures(records, state.gather([{**x, "weights": None} for x in rewards])),
        **{k: None if v is None else state.reduce(v) for k, v in stats.items()},
        "samples": int(state.reduce(samples, "sum")),
        "groups_trained": int(state.reduce(groups, "sum")),
        **seconds,
    }


def meta_pressure(lines: list[dict[str, Any]]) -> dict[str, float | None]:
    """Which way an update pushes the policy's harness use, from its rollouts.jsonl lines. Every token of a trained
    rollout moves with the rollout's advantage, so the share of turns that call the harness rises when the turns
    pushed up hold more calls per turn (``meta_rate_reinforced``, weighted by advantage) than the policy played
    (``meta_rate``), and falls when the turns pushed down hold more (``meta_rate_suppressed``). Fewer calls per
    episode can hide a rising rate: won episodes are shorter."""

    def rate(rows: list[dict[str, Any]], weight) -> float | None:
        turns = sum(weight(r) * r["turns"] for r in rows)
        return sum(weight(r) * sum(r["meta"].values()) for r in rows) / turns if turns else None

    scored = [r for r in lines if "advantage" in r]
    trained = [r for r in scored if r["trained"]]
    return {
        "meta_rate": rate(scored, lambda r: 1),
        "meta_rate_reinforced": rate([r for r in trained if r["advantage"] > 0], lambda r: r["advantage"]),
        "meta_rate_suppressed": rate([r for r in trained if r["advantage"] < 0], lambda r: -r["advantage"]),
    }


def group_outcomes(lines: list[dict[str, Any]]) -> dict[str, int]:
    """How an update's games ended, from its rollouts.jsonl lines: ``all_lost``, ``contrasting`` (some rollouts
    won, some lost) and ``all_won``; rollouts an engine error cut short are left out, and a game with none left is
    not counted. Only in the all-won games does the efficiency term (with the spam, invalid and idle terms) decide
    which rollouts are pushed up; where some lost, the success term decides it, and a leaner win only gains
    a little advantage over a longer one (the paper's harness annealing came at high training success)."""
    scored = [line for line in lines if "advantage" in line]
    ends = group_ends([line["won"] for line in scored], [line["task"] for line in scored]).values()
    return {
        "all_lost": sum(e == {False} for e in ends),
        "contrasting": sum(len(e) == 2 for e in ends),
        "all_won": sum(e == {True} for e in ends),
    }


def episode_line(
    update: int, key: tuple[str, int], record: EpisodeRecord, score: dict[str, Any], greedy: bool = False
) -> dict[str, Any]:
    """One rollout in rollouts.jsonl: which game, whether it was decoded greedily, how it went, what it spent, and
    what the update made of it (its reward and the reward's parts, its advantage in its group, whether its turns
    were trained; absent after an engine error)."""
    return {
        "update": update,
        "task": key[0],
        "rollout": key[1],
        "greedy": greedy,
        "won": record.won,
        "error": record.error,
        "turns": record.turns,
        "meta": {v: record.meta[v]["attempted"] for v in META_VERBS},
        "idle_meta": record.idle_meta,
        "invalid_actions": record.invalid_actions,
        "repeats": record.repeats,  # what the spam term counts, as spam_counts picks
        "revisits": record.revisits,
        "bank": record.bank,  # the digest of the Experience bank it played with: one per update, frozen
        **score,
    }


def append_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "ab") as f:
        for row in rows:
            f.write(orjson.dumps(row) + b"\n")


def start_tracking(state: TrainState, settings: dict[str, Any], run: str, resumed: bool) -> None:
    """Open the trackers of ``grpo.report_to`` with the run's settings as its configuration; a resumed run
    continues its trackio run. trackio and W&B print where they log to: onto stderr, as stdout carries only
    results."""
    if not state.g.report_to:
        return
    names = {"trackio": {"name": run, "resume": "allow" if resumed else "never"}, "wandb": {"name": run}}
    with contextlib.redirect_stdout(sys.stderr):
        state.accelerator.init_trackers(tracking.PROJECT, config=tracking.settings_record(settings), init_kwargs=names)


def track(state: TrainState, metrics: dict[str, Any], update: int) -> None:
    """One update's figures to the trackers, at step ``update`` (a resumed run continues the same curves)."""
    if state.g.report_to:
        with contextlib.redirect_stdout(sys.stderr):
            state.accelerator.log(tracking.scalars(metrics), step=update)


def end_tracking(state: TrainState) -> None:
    if state.g.report_to:
        with contextlib.redirect_stdout(sys.stderr):
            state.accelerator.end_training()
        tracking.close_trackio()
