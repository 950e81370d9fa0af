"""Experiment tracking (sft.report_to, grpo.report_to): TensorBoard and trackio receive SFT's logged losses and
each GRPO update's figures, offline; an unknown or missing tracker stops `evoh run` before its first stage."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evoh.errors import EvohError
from evoh.tracking import check_trackers, scalars, settings_record


def test_scalars_flatten_a_metrics_record_to_numbers():
    record = {"update": 3, "success": 0.5, "meta": {"track": 1, "recall": 2.5}, "lr": None, "task": "x", "won": True}
    assert scalars(record) == {"update": 3.0, "success": 0.5, "meta/track": 1.0, "meta/recall": 2.5, "won": 1.0}
    assert settings_record({"lr": 1e-6, "reward": {"eff": 1.0}, "task_types": ["look"]}) == {
        "lr": 1e-6,
        "reward/eff": 1.0,
        "task_types": "['look']",
    }


def test_unknown_and_missing_trackers_are_one_line_errors_naming_the_fix(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(EvohError, match="'tensorbord', which is not a tracker evoh knows") as unknown:
        check_trackers(["tensorbord"], "sft.report_to")
    assert "tensorboard, trackio, wandb" in unknown.value.hint and unknown.value.exit_code == 2
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(EvohError, match="the wandb package is not installed") as missing:
        check_trackers(["wandb"], "grpo.report_to")
    assert "pip install wandb" in missing.value.hint
    check_trackers([], "grpo.report_to")  # none is the default and needs nothing


def test_run_refuses_a_misspelt_tracker_before_its_first_stage(tmp_path: Path):
    from tests.cli_runner import evoh

    result = evoh("run", "minihouse-cpu", "-w", str(tmp_path / "ws"), "--set", 'sft.report_to=["tensorbord"]')
    assert result.exit_code == 2 and "sft.report_to names 'tensorbord'" in result.stderr
    assert not (tmp_path / "ws" / "collect").exists()  # nothing ran


def test_sft_and_grpo_log_to_tensorboard_and_trackio_offline(tmp_path: Path, minihouse_model: Path):
    pytest.importorskip("tensorboard")
    pytest.importorskip("trackio")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    recipe = tmp_path / "recipe.toml"
    recipe.write_text(f"""
[run]
stages = ["collect", "refine", "sft", "grpo"]
[env]
kind = "minihouse"
max_steps = 4
[env.minihouse]
valid_games = 1
[collect]
limit = 4
[refine]
val_fraction = 0.0
[sft]
model = "{minihouse_model}"
max_steps = 2
logging_steps = 1
lora_r = 4
lora_alpha = 8
batch_size = 2
per_device_batch = 2
max_length = 1024
report_to = ["tensorboard", "trackio"]
[grpo]
updates = 2
tasks_per_update = 1
group_size = 2
max_steps = 4
max_tokens = 12
val_every = 0
report_to = ["tensorboard", "trackio"]
[model]
max_tokens = 12
guided = true
""")
    ws = tmp_path / "ws"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRACKIO_DIR": str(tmp_path / "trackio")}
    env.pop("ALFWORLD_DATA", None)
    result = subprocess.run(
        [sys.executable, "-m", "evoh", "run", str(recipe), "-w", str(ws), "--json"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)  # the trackers' own messages went to stderr, not into the JSON result

    sft_events = EventAccumulator(str(ws / "sft" / "tensorboard"))
    sft_events.Reload()
    assert [e.step for e in sft_events.Scalars("train/loss")] == [1, 2]
    grpo_runs = [p.parent for p in (ws / "grpo" / "tensorboard").rglob("events.out.tfevents.*")]
    grpo_events = EventAccumulator(str(grpo_runs[0]))
    grpo_events.Reload()
    assert [e.step for e in grpo_events.Scalars("success")] == [1, 2]
    assert "meta_actions" in grpo_events.Tags()["scalars"] and "pg_loss" in grpo_events.Tags()["scalars"]

    databases = list((tmp_path / "trackio").rglob("*.db"))
    assert databases, "trackio wrote no local database"
    logged: dict[str, set[str]] = {}
    for database in databases:
        with sqlite3.connect(database) as db:
            for run, metrics in db.execute("SELECT run_name, metrics FROM metrics"):
                logged.setdefault(run, set()).update(json.loads(metrics))
    assert "train/loss" in logged["ws/sft"]
    assert {"success", "meta_actions", "pg_loss"} <= logged["ws/grpo"]
