"""The OpenAI-compatible policy against a real local HTTP server with injected faults."""

from __future__ import annotations

import email.utils
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from evoh.config import ModelConfig
from evoh.errors import EvohError
from evoh.workspace import read_jsonl
from tests.cli_runner import evoh
from tests.fake_openai import FakeOpenAI

pytest.importorskip("openai")
SECRET = "sk-test-DO-NOT-LEAK-4242"


def looker(body: dict) -> str:
    return "<think>I will look around.</think><action>look</action>"


def _policy(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, waits: list[float], **settings):
    from evoh.policy.openai_compat import OpenAIPolicy

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    config = ModelConfig(model="scripted", base_url=server.url, backoff=0.5, retries=2, timeout=5, **settings)
    return OpenAIPolicy(config, sleep=waits.append)


VIEW = SimpleNamespace(system="You play a text game.", user="Objective: look.")  # all the policy reads of a view


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", [7.0]), ("0.25", [0.25]), ("3600", [60.0]), ("soon", [0.5]), (None, [0.5])],
    ids=["seconds", "fraction", "over-the-ceiling", "unreadable", "absent"],
)
def test_a_429_waits_as_long_as_its_retry_after_asks(monkeypatch: pytest.MonkeyPatch, header: str | None, expected: list[float]):
    waits: list[float] = []
    with FakeOpenAI(looker, lambda n, body: "429" if n == 0 else "ok", retry_after=header) as server:
        [completion] = _policy(server, monkeypatch, waits).act([VIEW])
    assert completion.error is None and completion.text == looker({})
    assert waits == expected  # absent or unreadable: the first exponential backoff step


def test_a_retry_after_date_waits_until_then_and_later_retries_back_off(monkeypatch: pytest.MonkeyPatch):
    waits: list[float] = []
    date = email.utils.formatdate(time.time() + 20, usegmt=True)
    with FakeOpenAI(looker, lambda n, body: {0: "429", 1: "500"}.get(n, "ok"), retry_after=date) as server:
        [completion] = _policy(server, monkeypatch, waits).act([VIEW])
    assert completion.error is None and len(server.requests) == 3
    assert 10 <= waits[0] <= 20 and waits[1] == 1.0  # the 500 had no Retry-After: backoff × 2


def test_an_overlong_reply_is_cut_before_parsing_and_counted(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    from evoh.policy.openai_compat import CHARS_PER_TOKEN

    waits: list[float] = []
    flood = "<action>" * 100_000
    with FakeOpenAI(lambda body: flood if "flood" in body["messages"][1]["content"] else looker(body)) as server:
        policy = _policy(server, monkeypatch, waits, max_tokens=32)
        cut, whole = policy.act([SimpleNamespace(system="s", user="flood"), VIEW])
    assert cut.truncated and cut.text == flood[: 32 * CHARS_PER_TOKEN]
    assert not whole.truncated and whole.text == looker({})
    assert [r.getMessage() for r in caplog.records] == [
        "a reply of 800000 characters was cut to 512 (model.max_tokens × 16) before parsing"
    ]


@pytest.mark.engine
def test_a_cut_reply_is_counted_in_its_episode(alfworld_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with FakeOpenAI(lambda body: "<action>" * 10_000) as server:
        result = _run(tmp_path, server, alfworld_data, "--limit", "1", "--max-steps", "2", "--set", "model.max_tokens=16")
    assert result.exit_code == 0, result.stderr
    [record] = read_jsonl(tmp_path / "eval" / "openai-valid_seen" / "episodes.jsonl").records
    assert record["usage"]["truncated_replies"] == record["usage"]["policy_calls"] > 0
    assert record["trace"][0]["response"] == "<action>" * 32 and "cut to 256" in result.stderr


def _run(ws: Path, server: FakeOpenAI, alfworld_data: Path, *extra: str):
    return evoh(
        "eval",
        "-w",
        str(ws),
        "--policy",
        "openai",
        "--split",
        "valid_seen",
        "--limit",
        "3",
        "--first",
        "--max-steps",
        "3",
        "--data",
        str(alfworld_data),
        "--set",
        f"model.base_url={server.url}",
        "--set",
        "model.model=scripted",
        "--set",
        "model.backoff=0.01",
        "--set",
        "model.retries=3",
        "--set",
        "model.timeout=1",
        "--json",
        *extra,
    )


def test_the_key_must_be_set(monkeypatch: pytest.MonkeyPatch):
    from evoh.policy.openai_compat import OpenAIPolicy

    monkeypatch.delenv("EVOH_TEST_KEY", raising=False)
    with pytest.raises(EvohError, match="EVOH_TEST_KEY"):
        OpenAIPolicy(ModelConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="EVOH_TEST_KEY"))
    with pytest.raises(EvohError, match="--model NAME --base-url URL"):
        OpenAIPolicy(ModelConfig())


@pytest.mark.engine
def test_guided_decoding_is_refused_for_an_endpoint(alfworld_data: Path, tmp_path: Path):
    result = evoh(
        "eval",
        "-w",
        str(tmp_path),
        "--policy",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--data",
        str(alfworld_data),
        "--limit",
        "1",
        "--set",
        "model.guided=true",
    )
    assert result.exit_code == 2 and "model.guided=false" in result.stderr
    assert not list(tmp_path.glob("eval/*/episodes.jsonl"))


@pytest.mark.engine
def test_episodes_complete_through_every_kind_of_fault(alfworld_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    cycle = ["429", "ok", "500", "ok", "slow", "ok", "badjson", "ok", "empty", "ok"]
    with FakeOpenAI(looker, lambda n, body: cycle[n % len(cycle)], slow_seconds=2.5) as server:
        result = _run(tmp_path, server, alfworld_data)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["errors"] == 0 and summary["finished"] == 3
    assert summary["turns"] == 3 and summary["tokens_per_episode"] == 3 * 110
    assert server.auth == {f"Bearer {SECRET}"}
    assert summary["policy"] == {
        "policy": "openai",
        "model": "scripted",
        "base_url": server.url,
        "sampling": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 256, "seed": 0},
    }
    for file in tmp_path.rglob("*"):
        if file.is_file():
            assert SECRET not in file.read_text(errors="replace"), file


@pytest.mark.engine
def test_exhausted_retries_are_recorded_and_a_rerun_retries_only_those(
    alfworld_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    from evoh.env.games import load_tasks

    first_three = load_tasks("valid_seen", alfworld_data)[:3]
    doomed = first_three[1]

    objective = _objective(doomed)
    marked = sorted(t.id for t in first_three if _objective(t) == objective)  # trials of one game share it

    def broken_for_one(n: int, body: dict) -> str:
        return "500" if objective in body["messages"][1]["content"] else "ok"

    with FakeOpenAI(looker, broken_for_one) as server:
        first = _run(tmp_path, server, alfworld_data)
    assert first.exit_code == 1, first.stderr  # finished, with episodes to retry
    assert "rerun the same command to retry them" in first.stderr
    assert json.loads(first.stdout)["errors"] == len(marked)
    records = read_jsonl(tmp_path / "eval" / "openai-valid_seen" / "episodes.jsonl").records
    failed = [r for r in records if r["error"]]
    assert sorted(r["task"]["id"] for r in failed) == marked
    assert "failed 4 times; last: HTTP 500" in failed[0]["error"] and SECRET not in failed[0]["error"]

    with FakeOpenAI(looker) as healthy:
        second = _run(tmp_path, healthy, alfworld_data)
    assert second.exit_code == 0 and json.loads(second.stdout)["errors"] == 0
    assert healthy.requests and all(objective in body["messages"][1]["content"] for body in healthy.requests)
    assert len(healthy.requests) == 3 * len(marked)  # only the failed episodes were played again (3 turns each)


def _objective(task) -> str:
    from evoh.env.engine import GameEngine
    from evoh.harness.goal import goal_text

    return "Objective: " + goal_text(GameEngine(task.game_file, 1).reset().observation)
