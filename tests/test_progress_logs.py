"""Progress off a terminal: the episode heartbeat and the phase ticker write plain lines, at most and at least as
often as they promise; the SFT log line carries step of total, loss, lr and throughput."""

from __future__ import annotations

import io
import time

from rich.console import Console

from evoh.cli.progress import Heartbeat, PhaseTicker
from evoh.config import load_recipe
from evoh.grpo.settings import futile_settings
from evoh.sft.watch import sft_log_line


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, highlight=False, soft_wrap=True), out


def test_the_heartbeat_prints_when_due_and_at_the_end():
    console, out = _console()
    beat = Heartbeat("eval", console, every=3600)
    beat.started(5, 1)
    for won in (True, False, True, True):
        beat.finished(won)
    lines = out.getvalue().splitlines()
    assert lines[0] == "eval resuming, 1 of 5 already played"
    assert len(lines) == 2 and lines[1].startswith("eval 5/5 won 3 (75%) ")  # nothing between: not due before the end
    console, out = _console()
    beat = Heartbeat("collect", console, every=0)
    beat.started(3, 0)
    for _ in range(3):
        beat.finished(False)
    assert [line.split(" min")[0].rsplit(" ", 1)[0] for line in out.getvalue().splitlines()] == [
        "collect 1/3 won 0 (0%)",
        "collect 2/3 won 0 (0%)",
        "collect 3/3 won 0 (0%)",
    ]


def test_the_phase_ticker_repeats_a_long_phase_and_stops_between_phases():
    console, out = _console()
    with PhaseTicker("grpo", console, every=0.05) as ticker:
        ticker.phase("update 1/2: rollouts")
        time.sleep(0.3)
        ticker.phase(None)
        quiet_from = len(out.getvalue().splitlines())
        time.sleep(0.2)
    lines = out.getvalue().splitlines()
    assert lines[0] == "grpo update 1/2: rollouts"
    assert sum("update 1/2: rollouts: still, " in line for line in lines) >= 2
    assert len(lines) == quiet_from  # nothing to repeat between phases


def test_sft_log_lines_name_the_step_of_the_total():
    line = sft_log_line(
        40, 500, {"loss": 0.51234, "learning_rate": 0.0029, "mean_token_accuracy": 0.9, "num_tokens": 9e4}, 1234.4, 72
    )
    assert line == "sft step 40/500  loss 0.5123  token accuracy 90.0%  lr 2.90e-03  1,234 tokens/s  1.2 min"
    assert sft_log_line(50, 500, {"eval_loss": 0.2}, None, 60).startswith("sft step 50/500  eval loss 0.2000  1.0 min")


def test_settings_that_cannot_move_the_policy_are_named():
    paper = load_recipe(None, ["grpo.updates=2", "grpo.lr=1e-6", "grpo.val_every=1", "grpo.max_steps=10", "env.max_steps=70"])
    lr, horizon = futile_settings(paper)
    assert "grpo.lr = 1e-06 over 2 optimizer steps" in lr and "raise grpo.lr" in lr
    assert "env.max_steps = 70" in horizon and "grpo.max_steps = 10" in horizon
    assert futile_settings(load_recipe(None, ["grpo.updates=150", "grpo.lr=1e-6", "grpo.val_every=0"])) == []  # the paper's run
    assert futile_settings(load_recipe(None, ["grpo.updates=8", "grpo.lr=5e-4", "grpo.val_every=0"])) == []


def test_the_grpo_update_line_names_the_games_by_how_their_rollouts_ended():
    from evoh.cli.grpo import update_line

    m = {"update": 7, "success": 0.359, "reward_mean": 3.54, "reward_std": 5.32, "meta_actions": 5.26, "meta_rate": 0.23,
         "meta_rate_reinforced": 0.26, "groups": {"all_lost": 6, "contrasting": 25, "all_won": 1}, "invalid_rate": 0.0,
         "kl": 0.0, "clip_fraction": 0.0, "rollout_seconds": 354, "update_seconds": 53}  # fmt: skip
    line = update_line(m)
    assert line.startswith("update 8: success 35.9%")
    assert "(0.23/turn, pushed 0.26)  games 6 all lost, 25 mixed, 1 all won" in line
    assert "games" not in update_line({k: v for k, v in m.items() if k != "groups"})  # metrics written before the figure
