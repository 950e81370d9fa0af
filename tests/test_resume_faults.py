"""Fault injection on MiniHouse (no ALFWorld data): lost records are replayed, and a run refused for bad input
leaves a finished stage as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoh.workspace import read_jsonl
from tests.cli_runner import evoh

COLLECT = ("collect", "--kind", "minihouse", "--limit", "6", "--set", "collect.batch_size=3", "--json")
EVAL = ("eval", "--kind", "minihouse", "--limit", "6", "--name", "run", "--set", "eval.batch_size=3", "--json")


def tear_last_line(file: Path) -> str:
    """Cut the file's last record short, as a kill mid-write (or a crash before it reached the disk) does;
    returns the task id of the record that is lost."""
    data = file.read_bytes()
    lost = json.loads(data.splitlines()[-1])["task"]["id"]
    file.write_bytes(data[:-10])
    return lost


@pytest.mark.parametrize(("command", "records"), [(COLLECT, "collect/trajectories.jsonl"), (EVAL, "eval/run/episodes.jsonl")])
def test_a_record_lost_from_a_finished_batch_is_played_again(tmp_path: Path, command: tuple[str, ...], records: str):
    ws = tmp_path / "ws"
    assert evoh(command[0], "-w", str(ws), *command[1:]).exit_code == 0
    file = ws / records
    lost = tear_last_line(file)
    assert json.loads(((ws / records).parent / "bank.json").read_text())["batches_done"] == 2  # its batch was consolidated

    rerun = evoh(command[0], "-w", str(ws), *command[1:])
    assert rerun.exit_code == 0, rerun.stderr
    assert "dropped a torn last line" in rerun.stderr
    assert json.loads(rerun.stdout)["episodes"] == 6
    ids = [r["task"]["id"] for r in read_jsonl(file).records]
    assert len(ids) == 6 and len(set(ids)) == 6 and ids[-1] == lost  # the lost game, and only it, played again


def test_a_collect_refused_for_a_damaged_record_leaves_the_finished_stage_as_it_was(tmp_path: Path):
    ws = tmp_path / "ws"
    assert evoh("collect", "-w", str(ws), *COLLECT[1:]).exit_code == 0
    directory = ws / "collect"
    before = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file() and p.name != ".lock"}
    trajectories = directory / "trajectories.jsonl"
    good = trajectories.read_bytes()
    trajectories.write_bytes(good + b"garbage\n")

    refused = evoh("collect", "-w", str(ws), *COLLECT[1:])
    assert refused.exit_code == 2 and "trajectories.jsonl:7: not a JSON record" in refused.stderr
    trajectories.write_bytes(good)  # repaired by hand
    assert {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file() and p.name != ".lock"} == before
    assert evoh("refine", "-w", str(ws)).exit_code == 0
