"""SIGKILL of collect, eval, sft and grpo at seeded points, inside record appends and checkpoint saves included
(MiniHouse and a tiny model: no ALFWorld data). A rerun of the same command finishes the work: every requested
game ends exactly once, with the record an unbroken run writes; training continues from the newest complete
checkpoint, repeating no step; no finished stage's file changes. A Ctrl-C exits 130 and resumes the same way.

The points are drawn from a fixed seed, so a failure names one that reproduces: ``python -m tests.killer``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evoh.workspace import read_jsonl
from tests.cli_runner import evoh

SEED = 47
ROOT = Path(__file__).resolve().parent.parent
GAMES = 8
PLAY = ("--kind", "minihouse", "--limit", str(GAMES), "--set", "env.max_steps=30", "--json")
COMMANDS = {
    "collect": (("collect", *PLAY, "--set", "collect.batch_size=3"), "collect", "trajectories.jsonl"),
    "eval": (("eval", *PLAY, "--name", "run", "--set", "eval.batch_size=3"), "eval/run", "episodes.jsonl"),
}
# where a collect or eval run can die: around each of its 8 record appends (or halfway through one), and inside
# each of its 7 atomic saves (run.json, evoh.toml, bank.json after each of 3 batches, summary.json, stage.json)
APPEND_POINTS = [("evoh.workspace:JsonlLog.append", n, w) for n in range(1, GAMES + 1) for w in ("before", "after", "torn")]
SAVE_POINTS = [("os:replace", n, "before") for n in range(1, 8)]
# sft with a checkpoint every step: checkpoint 2 writes its adapter (safetensors' 2nd file), then torch.save's
# 5th to 8th files (training args, optimizer, scheduler, RNG state), then trainer_state.json
SFT_POINTS = [("torch:save", n, "before") for n in range(5, 9)] + [
    ("torch:save", 8, "after"),
    ("safetensors.torch:save_file", 2, "torn"),
]
# grpo with a checkpoint every update: checkpoint 2 writes torch.save's 4th to 6th files (RNG, optimizer,
# scheduler) and its adapter (safetensors' 2nd file), then its bank and state.json
GRPO_POINTS = [("torch:save", n, "before") for n in range(4, 7)] + [
    ("torch:save", 6, "after"),
    ("safetensors.torch:save_file", 2, "torn"),
]

_draw = random.Random(SEED)
KILLS = [(name, point) for name in COMMANDS for point in [*_draw.sample(APPEND_POINTS, 2), _draw.choice(SAVE_POINTS)]]
SFT_KILL, GRPO_KILL = _draw.choice(SFT_POINTS), _draw.choice(GRPO_POINTS)


def _name(value: object) -> str:
    return "-".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


def killed(point: tuple[str, int, str], ws: Path, *args: str) -> subprocess.CompletedProcess:
    """``evoh ARGS -w WS`` in a child that the point kills."""
    target, n, when = point
    return child(sys.executable, "-m", "tests.killer", target, str(n), when, "--", *args, "-w", str(ws))


def child(*command: str) -> subprocess.CompletedProcess:
    """A command in a child process on one thread: on a machine whose cores are busy, waiting OpenMP threads make
    each step of a tiny model many times slower than one thread computing it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def resume(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return child(sys.executable, "-m", "evoh", *args, "-w", str(ws), "--resume", "--json")


def outcomes(file: Path) -> dict[str, tuple]:
    """What each game's episode did, by task id (only one record each is allowed)."""
    records = read_jsonl(file).records
    ids = [r["task"]["id"] for r in records]
    assert len(ids) == len(set(ids)), f"a game recorded twice: {sorted(i for i in ids if ids.count(i) > 1)}"
    return {r["task"]["id"]: (r["won"], r["error"], [t["action"] for t in r["trace"]]) for r in records}


def files(directory: Path) -> dict[str, bytes]:
    return {str(f.relative_to(directory)): f.read_bytes() for f in directory.rglob("*") if f.is_file() and f.name != ".lock"}


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each command's stage directory after a run nothing interrupted."""
    ws = tmp_path_factory.mktemp("unbroken") / "ws"
    for args, _, _ in COMMANDS.values():
        assert evoh(args[0], "-w", str(ws), *args[1:]).exit_code == 0
    return {name: ws / stage for name, (_, stage, _) in COMMANDS.items()}


@pytest.mark.parametrize(("name", "point"), KILLS, ids=[f"{n}-{_name(p)}" for n, p in KILLS])
def test_a_killed_run_resumes_to_every_game_once_as_an_unbroken_run_plays_it(
    unbroken: dict[str, Path], tmp_path: Path, name: str, point: tuple[str, int, str]
):
    args, stage, records = COMMANDS[name]
    ws = tmp_path / "ws"
    child = killed(point, ws, *args)
    assert child.returncode == -signal.SIGKILL, child.stderr  # the point was reached
    assert not (ws / stage / "stage.json").exists()

    rerun = evoh(args[0], "-w", str(ws), *args[1:])
    assert rerun.exit_code == 0, rerun.stderr
    assert json.loads(rerun.stdout)["episodes"] == GAMES
    assert outcomes(ws / stage / records) == outcomes(unbroken[name] / records)  # each game once, as if never killed
    assert (ws / stage / "bank.json").read_bytes() == (unbroken[name] / "bank.json").read_bytes()
    if point[2] == "torn":
        assert "dropped a torn last line" in rerun.stderr


def test_ctrl_c_exits_130_and_a_rerun_finishes(unbroken: dict[str, Path], tmp_path: Path):
    args, stage, records = COMMANDS["collect"]
    ws = tmp_path / "ws"
    child = killed(("evoh.workspace:JsonlLog.append", 5, "interrupt"), ws, *args)
    assert child.returncode == 130, child.stderr
    assert "interrupted" in child.stderr and "rerun the same command" in child.stderr
    assert len(read_jsonl(ws / stage / records).records) == 4 and not (ws / stage / "stage.json").exists()
    assert evoh(args[0], "-w", str(ws), *args[1:]).exit_code == 0
    assert outcomes(ws / stage / records) == outcomes(unbroken["collect"] / records)


@pytest.fixture(scope="module")
def refined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with collect and refine finished: what sft and grpo read."""
    ws = tmp_path_factory.mktemp("refined") / "ws"
    assert evoh("collect", "-w", str(ws), "--kind", "minihouse", "--limit", "4", "--set", "env.max_steps=30").exit_code == 0
    assert evoh("refine", "-w", str(ws), "--val-fraction", "0.25").exit_code == 0
    return ws


def _checkpoint_killed(refined: Path, tmp_path: Path, point: tuple[str, int, str], *args: str) -> tuple[Path, dict[str, bytes]]:
    ws = tmp_path / "ws"
    shutil.copytree(refined, ws)
    before = files(ws)
    child = killed(point, ws, *args)
    assert child.returncode == -signal.SIGKILL, child.stderr
    return ws, before


def _sft(model: Path) -> tuple[str, ...]:
    return (
        "sft", "--model", str(model), "--max-steps", "3", "--lora-r", "4", "--lora-alpha", "8", "--set", "sft.batch_size=2",
        "--set", "sft.per_device_batch=2", "--set", "sft.max_length=1024", "--set", "sft.save_steps=1",
        "--set", "sft.eval_steps=3", "--set", "sft.logging_steps=1", "--set", "sft.action_check=0",
    )  # fmt: skip


def test_sft_killed_inside_a_checkpoint_save_resumes_from_the_last_complete_one(
    refined: Path, minihouse_model: Path, tmp_path: Path
):
    args = _sft(minihouse_model)
    ws, before = _checkpoint_killed(refined, tmp_path, SFT_KILL, *args)
    cut = ws / "sft" / "checkpoints" / "checkpoint-2"
    assert not (cut / "trainer_state.json").exists() and not (ws / "sft" / "stage.json").exists()

    resumed = resume(ws, *args)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["global_step"] == 3
    if cut.exists():
        assert f"skipping {cut}" in resumed.stderr
    logged = [json.loads(line)["step"] for line in (ws / "sft" / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert logged == [1, 2, 3]  # from checkpoint 1: no step lost, none repeated
    assert {k: v for k, v in files(ws).items() if not k.startswith("sft/")} == before  # collect and refine as they were


def _grpo(model: Path) -> tuple[str, ...]:
    return (
        "grpo", "--from", "none", "--model", str(model), "--updates", "3", "--tasks-per-update", "1", "--group-size", "2",
        "--max-steps", "4", "--kind", "minihouse", "--set", "grpo.max_tokens=12", "--set", "grpo.val_every=0",
        "--set", "grpo.save_every=1", "--set", "model.max_tokens=12",
    )  # fmt: skip


def test_grpo_killed_inside_a_checkpoint_save_resumes_from_the_last_complete_one(
    refined: Path, minihouse_model: Path, tmp_path: Path
):
    args = _grpo(minihouse_model)
    ws, before = _checkpoint_killed(refined, tmp_path, GRPO_KILL, *args)
    assert not (ws / "grpo" / "checkpoints" / "step_000002" / "state.json").exists()

    again = evoh(args[0], "-w", str(ws), *args[1:])
    assert again.exit_code == 2 and "--resume" in again.stderr  # never silently starts over on a killed run
    resumed = resume(ws, *args)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["updates"] == 3
    updates = [r["update"] for r in read_jsonl(ws / "grpo" / "metrics.jsonl").records]
    assert updates == [0, 1, 2]  # update 1 played again from checkpoint 1, recorded once
    rollouts = [(r["update"], r["rollout"]) for r in read_jsonl(ws / "grpo" / "rollouts.jsonl").records]
    assert rollouts == [(u, k) for u in range(3) for k in range(2)]
    assert {k: v for k, v in files(ws).items() if not k.startswith("grpo/")} == before
