"""Headline figures of a set of episode records: success overall and per task type, steps, harness usage."""

from __future__ import annotations

from collections.abc import Iterable
from statistics import mean
from typing import Any, TypeVar

from evoh.env.types import TASK_TYPES
from evoh.errors import RUN_FAILED, EvohError
from evoh.harness.turns import META_VERBS, parse_turn
from evoh.records import EpisodeRecord, TurnRecord

_Record = TypeVar("_Record", EpisodeRecord, dict[str, Any])


def latest(records: Iterable[_Record]) -> list[_Record]:
    """One record per fingerprint, the last written (a retried episode supersedes its error record); the
    records as read from a file or typed."""
    by_key: dict[str, _Record] = {}
    for record in records:
        if isinstance(record, EpisodeRecord):
            by_key[record.fingerprint or record.task.id] = record
        else:
            by_key[record.get("fingerprint") or record["task"]["id"]] = record
    return list(by_key.values())


def summarize(records: list[EpisodeRecord]) -> dict[str, Any]:
    finished = [r for r in records if not r.error]
    per_type = {}
    for long_name, short in TASK_TYPES.items():
        group = [r for r in finished if r.task.task_type == long_name]
        per_type[short] = {
            "episodes": len(group),
            "won": sum(r.won for r in group),
            "success": (sum(r.won for r in group) / len(group)) if group else None,
        }

    def avg(values: list[float]) -> float:
        return mean(values) if values else 0.0

    turns = sum(r.turns for r in finished)
    won = [r for r in finished if r.won]
    labelled = [t for r in finished for t in r.trace if t.label is not None]
    return {
        "episodes": len(records),
        "finished": len(finished),
        "errors": len(records) - len(finished),
        "errored": [{"id": r.task.id, "error": r.error} for r in records if r.error],  # for a rerun to retry
        "won": len(won),
        "success": (len(won) / len(finished)) if finished else 0.0,
        "per_type": per_type,
        "env_steps": avg([r.env_steps for r in finished]),
        "turns": avg([r.turns for r in finished]),
        "meta_actions": avg([r.meta_actions for r in finished]),
        # a lost episode runs to its budget and calls the harness all the way: the won ones show its cost alone
        "meta_actions_won": mean([r.meta_actions for r in won]) if won else None,
        "meta_per_episode": {
            verb: {k: avg([r.meta[verb][k] for r in finished]) for k in ("attempted", "executed", "failed")}
            for verb in META_VERBS
        },
        # harness calls that spent a step for nothing (records written before evoh counted them have none)
        "meta_idle": mean(idle) if (idle := [sum(r.idle_meta.values()) for r in finished if r.idle_meta is not None]) else None,
        # environment steps that repeated one already seen, action and observation (earlier records have none)
        "revisits": mean(seen) if (seen := [r.revisits for r in finished if r.revisits is not None]) else None,
        "invalid_rate": (sum(r.invalid_actions for r in finished) / turns) if turns else 0.0,
        "tokens_per_episode": avg([r.usage.get("prompt_tokens", 0) + r.usage.get("completion_tokens", 0) for r in finished]),
        "grammar": sorted({r.task.grammar for r in records}),
        **({"labelled_turns": len(labelled), "label_agreement": label_agreement(labelled)} if labelled else {}),
    }


def label_agreement(turns: list[TurnRecord]) -> float:
    """How often the player did what its labeller answered on the same view: on-policy accuracy."""
    same = sum(1 for t in turns if t.action and t.action == parse_turn(t.label).action)
    return same / len(turns) if turns else 0.0


def errored_run(summary: dict[str, Any], stage: str) -> EvohError | None:
    """The exit-1 error of a run that finished with episodes in errors: their records say so, and a rerun of
    the same command plays them (and only them) again. None for a clean run."""
    if not summary["errors"]:
        return None
    first = (summary.get("errored") or [{"id": "?", "error": "?"}])[0]
    error = first["error"] if len(first["error"]) <= 200 else first["error"][:200] + "…"
    return EvohError(
        f"{stage}: {summary['errors']} of {summary['episodes']} episodes ended in errors (first: {first['id']}: {error})",
        hint="rerun the same command to retry them; the finished episodes are kept",
        exit_code=RUN_FAILED,
    )
