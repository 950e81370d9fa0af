"""The game-by-game comparison `evoh report` makes between eval runs on the same split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoh.inspection.report import load_runs, mcnemar_p, p_value, paired, versus_cell


def test_mcnemar_p_is_the_exact_two_sided_binomial_tail():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(4, 4) == 1.0
    assert mcnemar_p(0, 5) == pytest.approx(2 / 32)  # five games changed hands, all one way
    assert mcnemar_p(1, 5) == pytest.approx(2 * (1 + 6) / 64)
    assert mcnemar_p(5, 1) == mcnemar_p(1, 5)
    assert mcnemar_p(0, 10) < 0.01 < mcnemar_p(2, 8) < 0.2


def test_paired_counts_only_the_games_both_runs_finished():
    base = {"a": (True, ("go to desk 1",)), "b": (False, ("look",)), "c": (True, ("look",)), "d": (False, ("look",))}
    other = {"a": (False, ("go to desk 2",)), "b": (True, ("look",)), "c": (True, ("look",)), "e": (True, ("look",))}
    result = paired(base, other)
    assert result == {"games": 3, "gained": 1, "lost": 1, "played_differently": 1, "p": 1.0}


def test_a_tiny_p_value_is_printed_as_below_a_thousandth_not_as_zero():
    row = {"vs": {"gained": 31, "lost": 3, "games": 200, "played_differently": 182, "p": mcnemar_p(3, 31)}}
    assert versus_cell(row, detail=False) == "+31 −3 (<0.001)"
    assert "(p <0.001)" in versus_cell(row)
    assert [p_value(p) for p in (1.0, 0.0449, 0.0021)] == ["1.00", "0.04", "0.002"]


def test_runs_that_share_a_name_are_labelled_by_their_workspace(tmp_path: Path):
    paths = []
    for ws, name in (("sft-ws", "sft"), ("seed0", "grpo"), ("seed1", "grpo")):
        run = tmp_path / ws / "eval" / name
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps({"name": name, "per_type": {}}))
        paths.append(run)
    assert [r["label"] for r in load_runs(paths)] == ["sft", "seed0/grpo", "seed1/grpo"]
