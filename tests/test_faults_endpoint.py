"""An unreliable endpoint, crashing engines and a killed engine worker, and the exit codes that tell a script what
happened: 0 clean, 1 finished with episodes in errors (a rerun of the same command retries them), 2 bad input.

Every kind of endpoint fault is retried until the episode finishes; one that outlasts the retries ends its
episode with the error recorded. A MiniHouse engine that raises is the same to the run as a killed ALFWorld
worker (test_env_pool.py kills them at each point of a step): its episode ends in an error and the rest play on.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evoh.workspace import read_jsonl
from tests.cli_runner import evoh
from tests.fake_openai import FakeOpenAI
from tests.test_faults_kills import ROOT, child

pytest.importorskip("openai")


def looker(body: dict) -> str:
    return "<think>I look around.</think><action>look</action>"


class OneGameFails:
    """A fault plan: every request about the first game the endpoint hears of (by its objective) answers 500; the
    episodes of the other games, asked for at the same time, are answered."""

    def __init__(self) -> None:
        self.doomed: str | None = None
        self._lock = threading.Lock()

    def __call__(self, number: int, body: dict) -> str:
        objective = re.search(r"Objective: [^\n]*", body["messages"][1]["content"]).group()
        with self._lock:
            self.doomed = self.doomed or objective
        return "500" if objective == self.doomed else "ok"


def _eval(ws: Path, server: FakeOpenAI, games: int, retries: int = 3) -> tuple[str, ...]:
    minihouse = ("--kind", "minihouse", "--limit", str(games), "--spread", "--max-steps", "3", "--name", "run", "--json")
    endpoint = (
        "--set", f"model.base_url={server.url}", "--set", "model.model=scripted", "--set", "model.backoff=0.01",
        "--set", f"model.retries={retries}", "--set", "model.timeout=1",
    )  # fmt: skip
    return ("eval", "-w", str(ws), "--policy", "openai", *minihouse, *endpoint)


def _finished_once(file: Path, games: int) -> list[dict]:
    """Every requested game has exactly one finished record, after the error records of its failed tries."""
    records = read_jsonl(file).records
    finished = [r["task"]["id"] for r in records if not r["error"]]
    assert len(finished) == len(set(finished)) == games
    assert {r["task"]["id"] for r in records} == set(finished)
    return records


def test_every_kind_of_endpoint_fault_is_retried_until_the_episodes_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    plan = ["429", "500", "reset", "badjson", "empty", "slow"]  # one of each in a row, then a healthy endpoint
    with FakeOpenAI(looker, lambda n, body: plan[n] if n < len(plan) else "ok", slow_seconds=1.5, retry_after="1") as server:
        started = time.monotonic()
        result = evoh(*_eval(tmp_path, server, 1, retries=len(plan)))
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["errors"] == 0 and summary["finished"] == 1 and summary["turns"] == 3
    assert len(server.requests) == len(plan) + 3  # each fault cost one retry, no turn was asked twice
    assert time.monotonic() - started >= 1.0  # the 429's Retry-After was waited out
    _finished_once(tmp_path / "eval" / "run" / "episodes.jsonl", 1)


def test_an_outlasting_fault_exits_1_and_the_same_command_retries_only_its_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI(looker, OneGameFails()) as server:
        first = evoh(*_eval(tmp_path, server, 3))
    assert first.exit_code == 1, first.output
    assert json.loads(first.stdout)["errors"] == 1  # the results are printed all the same
    message, hint = first.stderr.strip().splitlines()[-2:]
    assert message.startswith("error: eval run: 1 of 3 episodes ended in errors (first: valid_seen/")  # exactly the doomed game
    assert "openai endpoint failed 4 times; last: HTTP 500" in message
    assert hint == "  hint: rerun the same command to retry them; the finished episodes are kept"

    with FakeOpenAI(looker) as healthy:
        second = evoh(*_eval(tmp_path, healthy, 3))
    assert second.exit_code == 0, second.stderr
    assert len(healthy.requests) == 3  # one episode of 3 turns played again
    _finished_once(tmp_path / "eval" / "run" / "episodes.jsonl", 3)


def test_a_crashing_engine_exits_1_and_a_rerun_plays_its_game_once(tmp_path: Path):
    ws, args = tmp_path / "ws", ("collect", "--kind", "minihouse", "--limit", "6", "--set", "env.max_steps=30", "--json")
    crash = ("tests.killer", "evoh.env.minihouse_engine:HouseEngine.step", "20", "raise", "--")
    first = child(sys.executable, "-m", *crash, *args, "-w", str(ws))
    assert first.returncode == 1, first.stderr
    assert "1 of 6 episodes ended in errors" in first.stderr and "injected fault" in first.stderr
    assert "rerun the same command" in first.stderr
    rerun = evoh(args[0], "-w", str(ws), *args[1:])
    assert rerun.exit_code == 0, rerun.stderr
    assert json.loads(rerun.stdout)["errors"] == 0
    _finished_once(ws / "collect" / "trajectories.jsonl", 6)


def test_run_stops_at_a_stage_with_errored_episodes_and_resumes_it(tmp_path: Path):
    recipe, ws = tmp_path / "recipe.toml", tmp_path / "ws"
    recipe.write_text("""
[run]
stages = ["collect", "refine"]
[env]
kind = "minihouse"
max_steps = 30
[collect]
limit = 3
""")
    crash = ("tests.killer", "evoh.env.minihouse_engine:HouseEngine.step", "10", "raise", "--")
    first = child(sys.executable, "-m", *crash, "run", str(recipe), "-w", str(ws))
    assert first.returncode == 1, first.stderr
    assert (
        "collect: 1 of 3 episodes ended in errors" in first.stderr
        and "the stages after collect run once it has none" in first.stderr
    )
    assert not (ws / "refine").exists()  # nothing was built on the episodes still to retry

    second = evoh("run", str(recipe), "-w", str(ws), "--json")
    assert second.exit_code == 0, second.stderr
    assert [s["stage"] for s in json.loads(second.stdout)["stages"] if s["ran"]] == ["collect", "refine"]
    assert len(_finished_once(ws / "collect" / "trajectories.jsonl", 3)) == 4  # collect resumed: one episode played again


def test_grpo_with_errored_rollouts_keeps_its_adapter_and_exits_1(tmp_path: Path, minihouse_model: Path):
    ws = tmp_path / "ws"
    crash = ("tests.killer", "evoh.env.minihouse_engine:HouseEngine.reset", "2", "raise", "--")
    args = (
        "grpo", "-w", str(ws), "--from", "none", "--model", str(minihouse_model), "--updates", "1", "--tasks-per-update", "1",
        "--group-size", "2", "--max-steps", "4", "--kind", "minihouse",
        "--set", "grpo.max_tokens=12", "--set", "grpo.val_every=0",
    )  # fmt: skip
    result = child(sys.executable, "-m", *crash, *args)
    assert result.returncode == 1, result.stderr
    assert "grpo: 1 of 2 rollouts ended in errors and were left out of training" in result.stderr
    assert "the adapter is saved" in result.stderr and "rollouts.jsonl" in result.stderr
    assert (ws / "grpo" / "stage.json").exists() and (ws / "grpo" / "adapter" / "adapter_model.safetensors").exists()
    errored = [r for r in read_jsonl(ws / "grpo" / "rollouts.jsonl").records if r["error"]]
    assert len(errored) == 1 and "injected fault" in errored[0]["error"]


@pytest.mark.engine
def test_a_killed_engine_worker_fails_at_most_its_episode_and_a_rerun_completes(alfworld_data: Path, tmp_path: Path):
    psutil = pytest.importorskip("psutil")
    ws, games = tmp_path / "ws", 4
    args = (
        "eval",
        "-w",
        str(ws),
        "--data",
        str(alfworld_data),
        "--limit",
        str(games),
        "--workers",
        "2",
        "--engine",
        "textworld",  # the engine that runs in worker processes
        "--set",
        "eval.max_active=2",
        "--json",
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evoh", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    records = ws / "eval" / "expert-valid_seen" / "episodes.jsonl"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (records.exists() and records.read_bytes().count(b"\n") >= 1):
            time.sleep(0.05)
        workers = [c for c in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(c.cmdline())]
        assert workers, "the run ended before a worker could be killed"
        os.kill(workers[0].pid, signal.SIGKILL)  # mid-step its episode fails; between steps it is rebuilt
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    summary = json.loads(out)
    assert summary["errors"] <= 1 and summary["episodes"] == games
    assert proc.returncode == (1 if summary["errors"] else 0), err  # the exit status tells a script which

    rerun = evoh(*args)
    assert rerun.exit_code == 0, rerun.stderr
    _finished_once(records, games)
