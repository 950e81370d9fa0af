"""`evoh collect` and `evoh show` on real games: outputs, the bank between batches, and resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evoh.workspace import read_jsonl
from tests.cli_runner import evoh

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def collected(alfworld_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("ws")
    result = evoh(
        "collect",
        "-w",
        str(ws),
        "--split",
        "valid_seen",
        "--limit",
        "6",
        "--data",
        str(alfworld_data),
        "--set",
        "collect.batch_size=3",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    return ws


def test_collect_writes_every_output(collected: Path):
    directory = collected / "collect"
    assert {p.name for p in directory.iterdir()} >= {"trajectories.jsonl", "summary.json", "bank.json", "stage.json"}
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["episodes"] == 6 and summary["success"] == 1.0 and summary["errors"] == 0
    assert summary["per_type"]["look"]["episodes"] + summary["per_type"]["pick"]["episodes"] >= 1
    assert summary["meta_per_episode"]["recall"]["attempted"] >= 1 and summary["grammar"] == ["2.1.1"]
    assert summary["protocol"]["charge_meta_actions"] is False and summary["protocol"]["max_steps"] == 50
    stage = json.loads((directory / "stage.json").read_text())
    assert stage["episodes"] == 6 and stage["config"]["collect"]["split"] == "valid_seen"
    records = read_jsonl(directory / "trajectories.jsonl").records
    assert len(records) == 6 and all(r["won"] for r in records)
    first = records[0]
    assert first["trace"][0]["action"].startswith("recall [") and first["system"] and first["policy"]["policy"] == "expert"
    assert (collected / "evoh.toml").read_text().count("[collect]") == 1


def test_the_bank_is_frozen_within_a_batch_and_consolidated_after(collected: Path):
    directory = collected / "collect"
    bank = json.loads((directory / "bank.json").read_text())
    assert bank["batches_done"] == 2 and bank["updates"] == 2
    records = read_jsonl(directory / "trajectories.jsonl").records
    banks = [r["bank"] for r in records]
    assert banks[0] == banks[1] == banks[2] and banks[3] == banks[4] == banks[5] and banks[0] != banks[3]
    assert any(e["category"] == "search" for e in bank["entries"])


def test_show_prints_an_episode_turn_by_turn(collected: Path):
    file = collected / "collect" / "trajectories.jsonl"
    result = evoh("show", str(file), "--episode", "1", "--full")
    assert result.exit_code == 0
    assert "=== turn 1 (meta, done) ===" in result.stdout and "--- prompt ---\nObjective:" in result.stdout
    assert "--- response ---\n<think>" in result.stdout and "WON" in result.stdout
    compact = evoh("show", str(file), "--episode", "1").stdout
    assert "--- prompt ---" not in compact and "Admissible commands" not in compact and "WON" in compact
    assert evoh("show", str(file), "--episode", "99").exit_code == 2
    assert evoh("show", str(collected / "nothing.jsonl")).exit_code == 2


def test_a_rerun_with_other_settings_is_refused(collected: Path, alfworld_data: Path):
    result = evoh(
        "collect",
        "-w",
        str(collected),
        "--split",
        "valid_seen",
        "--limit",
        "6",
        "--mode",
        "always_on",
        "--data",
        str(alfworld_data),
    )
    assert result.exit_code == 2 and "harness.mode" in result.stderr and "new workspace" in result.stderr


def test_refine_input_check_names_collect(tmp_path: Path):
    from evoh.errors import EvohError
    from evoh.workspace import Workspace

    with pytest.raises(EvohError, match="collect/stage.json is missing") as info:
        Workspace(tmp_path).require("collect")
    assert "evoh collect -w" in info.value.hint


@pytest.mark.slow
def test_sigkill_then_rerun_gives_every_episode_exactly_once(alfworld_data: Path, tmp_path: Path):
    ws = tmp_path / "ws"
    command = [
        sys.executable,
        "-m",
        "evoh",
        "collect",
        "-w",
        str(ws),
        "--split",
        "valid_unseen",
        "--limit",
        "8",
        "--set",
        "collect.batch_size=4",
        "--set",
        "collect.max_active=2",
    ]
    env = {**os.environ, "ALFWORLD_DATA": str(alfworld_data)}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    trajectories = ws / "collect" / "trajectories.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not trajectories.exists() or len(trajectories.read_bytes().splitlines()) < 3):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its engine workers, mid-run
    proc.wait()
    killed_at = len(read_jsonl(trajectories).records)
    assert 3 <= killed_at < 8
    assert not (ws / "collect" / "stage.json").exists()
    finished = subprocess.run(command + ["--json"], env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    records = read_jsonl(trajectories).records
    ids = [r["task"]["id"] for r in records]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert json.loads(finished.stdout)["episodes"] == 8
    assert (ws / "collect" / "stage.json").exists()


def test_expert_style_makes_teacher_data_leaner_or_richer(alfworld_data: Path, collected: Path):
    from evoh.config import ExpertConfig
    from evoh.env.games import load_tasks
    from evoh.env.inprocess import InProcessPool
    from evoh.env.world import make_native_engine
    from evoh.harness.episode import EpisodeSettings
    from evoh.harness.experience import Bank
    from evoh.harness.prompts import demonstrations
    from evoh.policy.expert import ExpertPolicy
    from evoh.policy.search_prior import SearchPrior
    from evoh.rollout import rollout

    tasks = [t for t in load_tasks("valid_seen", alfworld_data) if t.task_type == "pick_two_obj_and_place"][:1]
    tasks += [t for t in load_tasks("valid_seen", alfworld_data) if t.task_type == "pick_heat_then_place_in_recep"][:1]
    shots = demonstrations(read_jsonl(collected / "collect" / "trajectories.jsonl").records, 2)
    assert shots.count("Objective:") == 2 and "<action>" in shots
    results = {}
    for name, style in {"lean": ExpertConfig(0, 0, 0, 0), "rich": ExpertConfig()}.items():
        records = []
        settings = EpisodeSettings(demonstrations=shots if name == "rich" else "")
        with InProcessPool(make_native_engine) as pool:
            rollout(
                [(t.id, t) for t in tasks],
                ExpertPolicy(SearchPrior(), style),
                pool,
                settings,
                Bank(),
                lambda episode, usage: records.append(episode.record()),
            )
        results[name] = records
    assert all(r["won"] for rs in results.values() for r in rs)
    assert all(r["meta_actions"] == 0 for r in results["lean"])
    rich = {r["goal"]["task"]: r for r in results["rich"]}
    assert rich["pick2"]["meta"]["track"]["executed"] == 1
    assert rich["heat"]["meta"]["recall"]["executed"] == 3  # at the start (twice) and before heating
    assert all(r["meta"]["commit"]["executed"] >= 4 and r["meta"]["note"]["executed"] == 1 for r in rich.values())
    assert "Examples of finished episodes" in rich["heat"]["system"]


def test_a_slipping_expert_recovers_and_refine_trains_only_the_recovery(alfworld_data: Path):
    from evoh.config import ExpertConfig, Recipe
    from evoh.env.games import load_tasks
    from evoh.env.inprocess import InProcessPool
    from evoh.env.world import make_native_engine
    from evoh.harness.episode import EpisodeSettings
    from evoh.harness.experience import Bank
    from evoh.policy.expert import ExpertPolicy
    from evoh.policy.search_prior import SearchPrior
    from evoh.records import EpisodeRecord
    from evoh.rollout import rollout
    from evoh.stages.refine import refine

    games = load_tasks("valid_seen", alfworld_data)
    tasks = [
        next(t for t in games if t.task_type == kind)
        for kind in ("pick_and_place_simple", "pick_two_obj_and_place", "look_at_obj_in_light")
    ]
    records = []
    with InProcessPool(make_native_engine) as pool:
        rollout(
            [(t.id, t) for t in tasks],
            ExpertPolicy(SearchPrior(), ExpertConfig(slip=0.3), seed=3),
            pool,
            EpisodeSettings(),
            Bank(),
            lambda episode, usage: records.append(episode.record()),
        )
    assert all(r["won"] for r in records)
    slips = 0
    for record in records:
        env_turns = [t for t in record["trace"] if t["kind"] == "env"]
        for turn, after in zip(env_turns, env_turns[1:]):
            if turn["outcome"] == "invalid":
                slips += 1
                assert after["valid"] and "That command was not admissible" in after["response"]
                assert after["action"] != turn["action"]
        assert all(t["valid"] for t in record["trace"] if t["kind"] != "env")
    assert slips >= 3
    train, val, report = refine([EpisodeRecord.from_dict(r) for r in records], Recipe())
    assert report["turns"]["dropped"] == {"invalid action": slips}
    responses = [m["messages"][-1]["content"] for m in train + val]
    assert sum("That command was not admissible" in r for r in responses) == slips


def test_an_expert_rate_outside_0_to_1_is_refused_before_anything_is_written(alfworld_data: Path, tmp_path: Path):
    result = evoh(
        "collect",
        "-w",
        str(tmp_path / "ws"),
        "--split",
        "valid_seen",
        "--limit",
        "1",
        "--data",
        str(alfworld_data),
        "--set",
        "expert.slip=1.5",
    )
    assert (
        result.exit_code == 2
        and "expert.slip = 1.5 must be a chance from 0 to 1" in result.stderr
        and "between 0" in result.stderr
    )
    assert not (tmp_path / "ws" / "collect").exists()
