"""Episode records of the wrong shape: every reader refuses them with the file, the line and what is wrong."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from evoh.errors import EvohError
from evoh.workspace import JsonlLog, read_jsonl
from tests.cli_runner import evoh

TURN = {
    "user": "You are in a room. Your task is to: look.",
    "response": "<think>Look.</think><action>look</action>",
    "action": "look",
    "kind": "env",
    "verb": "",
    "valid": True,
    "executed": True,
    "outcome": "ok",
    "result": "Nothing happens.",
    "reason": "",
}
EPISODE = {
    "schema": "episode/1",
    "fingerprint": "f0",
    "task": {
        "id": "valid_seen/look_at_obj_in_light-x/trial_1",
        "split": "valid_seen",
        "task_type": "look_at_obj_in_light",
        "game_file": "/nowhere/game.tw-pddl",
        "grammar": "2.1.1",
    },
    "objective": "look",
    "won": True,
    "error": None,
    "turns": 1,
    "env_steps": 1,
    "invalid_actions": 0,
    "meta_actions": 0,
    "meta": {},
    "system": "You play a text game.",
    "trace": [TURN],
}


def _broken(change) -> dict:
    record = copy.deepcopy(EPISODE)
    change(record)
    return record


BROKEN = {
    "task-is-text": (_broken(lambda r: r.update(task="valid_seen/x")), "the episode's 'task' is text, not an object"),
    "no-turns": (_broken(lambda r: r.pop("turns")), "the episode has no 'turns'"),
    "no-trace": (_broken(lambda r: r.pop("trace")), "the episode has no 'trace'"),
    "turn-without-response": (_broken(lambda r: r["trace"][0].pop("response")), "turn 0 of its 'trace' has no 'response'"),
    "task-without-id": (_broken(lambda r: r["task"].pop("id")), "its 'task' has no 'id'"),
    "won-is-text": (_broken(lambda r: r.update(won="yes")), "the episode's 'won' is text, not true or false"),
}


def _file(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("name", BROKEN)
def test_refine_names_the_line_and_what_is_wrong(tmp_path: Path, name: str):
    record, wrong = BROKEN[name]
    file = _file(tmp_path / "trajectories.jsonl", EPISODE, record)
    result = evoh("refine", "-w", str(tmp_path / "ws"), "--input", str(file))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"error: {file}:2: {wrong}"
    assert "hint: " in result.stderr and "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("name", BROKEN)
def test_show_names_the_line_and_what_is_wrong(tmp_path: Path, name: str):
    record, wrong = BROKEN[name]
    file = _file(tmp_path / "episodes.jsonl", record)
    result = evoh("show", str(file))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"error: {file}:1: {wrong}"
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_well_formed_record_passes_every_reader(tmp_path: Path):
    file = _file(tmp_path / "trajectories.jsonl", EPISODE)
    assert read_jsonl(file).records == [EPISODE]
    assert evoh("show", str(file)).exit_code == 0
    refined = evoh("refine", "-w", str(tmp_path / "ws"), "--input", str(file), "--val-fraction", "0")
    assert refined.exit_code == 0, refined.stderr
    # records of other kinds (metrics, examples) and of other versions are not held to the episode's fields
    other = _file(tmp_path / "other.jsonl", {"step": 1}, {"schema": "episode/9", "task": "x"})
    assert len(read_jsonl(other).records) == 2


def test_a_resumed_collection_refuses_a_broken_record_before_playing(tmp_path: Path):
    file = _file(tmp_path / "trajectories.jsonl", EPISODE, EPISODE, BROKEN["no-turns"][0])
    with pytest.raises(EvohError, match=r"trajectories.jsonl:3: the episode has no 'turns'"):
        JsonlLog(file)  # what collect and eval open to resume


@pytest.mark.engine
def test_collect_on_resume_exits_2_on_a_broken_record(alfworld_data: Path, tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "collect").mkdir(parents=True)
    file = _file(ws / "collect" / "trajectories.jsonl", BROKEN["task-is-text"][0])
    result = evoh("collect", "-w", str(ws), "--split", "valid_seen", "--limit", "1", "--data", str(alfworld_data))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"error: {file}:1: the episode's 'task' is text, not an object"
