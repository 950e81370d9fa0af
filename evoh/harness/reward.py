"""The cost-aware reward of EvoHarness-RL, as a pure function that returns its components.

R = 10·won + λ_eff·R_eff + λ_div(u)·R_div − λ_spam·min(S, cap) − λ_inv·I − λ_idle·N, with
R_eff = won·(T_max − |τ|)/T_max (every turn counts in |τ|), R_div the fraction of the four verbs used
("bpe_coverage") or the unique-verb ratio of the meta-actions ("verb_ratio"),
λ_div(u) = λ_div_max·(1 + cos(π·min(u, U)/U))/2, S the turns that repeat the turn before, I the invalid
actions (malformed turns included). N, evoh's own term, off by default (λ_idle = 0), counts the harness
calls that spent a step for nothing: refused (a new subgoal for a full plan), a commit, note or recall
that left the harness as it was, a track whose question got the same answer before. The paper charges
such calls only through R_eff, which a lost episode does not have, and S counts only back-to-back
repeats: a lost rollout that commits a done subgoal every few turns costs no more than one that does not.
With ``spam_counts = "seen_before"`` (evoh's, off by default) S counts instead the environment steps whose
action and observation the episode had already seen: a small policy loses games walking between two places,
which repeats no action back to back.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from evoh.config import RewardConfig
from evoh.harness.turns import META_VERBS
from evoh.records import EpisodeRecord

REWARD_VERSION = "reward/1"
REWARD_PARTS = ("success", "efficiency", "diversity", "spam", "invalid", "idle_meta")  # they sum to the total


def diversity_weight(update: int, weights: RewardConfig) -> float:
    """λ_div(u): cosine annealing from λ_div_max at update 0 to 0 at update U and after."""
    horizon = max(1, weights.diversity_horizon)
    return weights.diversity_max * (1 + math.cos(math.pi * min(update, horizon) / horizon)) / 2


def diversity(meta: dict[str, dict[str, int]], mode: str) -> float:
    executed = {v: meta.get(v, {}).get("executed", 0) for v in META_VERBS}
    used = [v for v, n in executed.items() if n > 0]
    if mode == "bpe_coverage":
        return len(used) / len(META_VERBS)
    calls = sum(executed.values())
    return len(used) / calls if calls else 0.0


def reward(episode: EpisodeRecord, weights: RewardConfig, update: int = 0) -> dict[str, Any]:
    """Components and total for one episode (it needs the counts of records written since evoh counted
    repeats, revisits and idle calls)."""
    won = 1.0 if episode.won else 0.0
    t_max = episode.protocol["max_steps"]
    efficiency = won * max(0, t_max - episode.turns) / t_max
    lam_div = diversity_weight(update, weights)
    div = diversity(episode.meta, weights.diversity)
    repeats = episode.revisits if weights.spam_counts == "seen_before" else episode.repeats
    spam = min(repeats, weights.spam_cap)
    invalid = episode.invalid_actions
    idle = sum(episode.idle_meta.values())
    parts = {
        "success": weights.success * won,
        "efficiency": weights.efficiency * efficiency,
        "diversity": lam_div * div,
        "spam": -weights.spam * spam,
        "invalid": -weights.invalid * invalid,
        "idle_meta": -weights.idle_meta * idle,
    }
    return {"version": REWARD_VERSION, "total": sum(parts.values()), "lambda_div": lam_div, **parts, "weights": asdict(weights)}
