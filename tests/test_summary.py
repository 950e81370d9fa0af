"""Headline figures of episode records: meta-actions per won episode apart from the average over all."""

from __future__ import annotations

from typing import Any

from evoh.harness.turns import META_VERBS
from evoh.inspection import report
from evoh.records import EpisodeRecord
from evoh.runs.summary import summarize as runs_summarize


def record(won: bool, meta: dict[str, int], turns: int) -> dict[str, Any]:
    return {
        "schema": "episode/1",
        "task": {"id": f"g{turns}", "task_type": "pick_and_place_simple", "grammar": "2.1.1"},
        "objective": "put a pen on the shelf",
        "won": won,
        "error": None,
        "turns": turns,
        "env_steps": turns - sum(meta.values()),
        "invalid_actions": 0,
        "meta_actions": sum(meta.values()),
        "meta": {v: {"attempted": n, "executed": n, "failed": 0} for v, n in meta.items()},
        "system": "",
        "trace": [],
    }


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    return runs_summarize([EpisodeRecord.from_dict(r) for r in records])


def test_meta_actions_per_won_episode_leave_out_the_lost_ones():
    won = [record(True, dict(zip(META_VERBS, (0, 3, 1, 1))), 12), record(True, dict(zip(META_VERBS, (1, 4, 1, 1))), 15)]
    lost = record(False, dict(zip(META_VERBS, (9, 6, 2, 3))), 70)
    summary = summarize([*won, lost])
    assert summary["meta_actions"] == (5 + 7 + 20) / 3 and summary["meta_actions_won"] == 6.0
    assert summarize([lost])["meta_actions_won"] is None  # no win: nothing to average, not a zero


def test_idle_harness_calls_average_over_the_records_that_count_them():
    counted = [
        {**record(False, dict(zip(META_VERBS, (9, 6, 2, 3))), 70), "idle_meta": dict(zip(META_VERBS, (4, 2, 0, 1)))},
        {**record(True, dict(zip(META_VERBS, (0, 3, 1, 1))), 12), "idle_meta": dict(zip(META_VERBS, (0, 1, 0, 0)))},
    ]
    older = record(True, dict(zip(META_VERBS, (1, 4, 1, 1))), 15)  # written before evoh counted them
    assert summarize([*counted, older])["meta_idle"] == 4.0
    assert summarize([older])["meta_idle"] is None  # unknown, not zero


def test_report_reads_summaries_with_and_without_the_won_figure():
    idle = {"idle_meta": dict(zip(META_VERBS, (0, 1, 0, 2)))}
    summary = summarize(
        [
            {**record(True, dict(zip(META_VERBS, (0, 3, 1, 1))), 12), **idle},
            {**record(False, dict(zip(META_VERBS, (2, 2, 2, 2))), 60), **idle},
        ]
    )
    older = {k: v for k, v in summary.items() if k not in ("meta_actions_won", "meta_idle")}  # written before the figures existed
    rows = report.rows([{"label": "now", "summary": summary}, {"label": "before", "summary": older}])
    text = report.markdown(rows, None)
    assert text.splitlines()[0].endswith(
        "| meta-actions / episode | meta-actions / won episode | idle / episode | games vs the split's first run |"
    )
    now, before = text.splitlines()[2:4]
    assert now.startswith("| now |") and now.endswith("| 6.50 (1.00 / 2.50 / 1.50 / 1.50) | 5.00 | 3.00 | - |")
    assert before.startswith("| before |") and before.endswith("| - | - | - |")  # no episodes to pair either
