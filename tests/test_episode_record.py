"""The typed episode record: real records read and written back are the same bytes, nothing a newer writer
added is lost, and a malformed record is refused with the one-line error every reader gives."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import orjson
import pytest

from evoh.errors import EvohError
from evoh.inspection.report import game_outcomes
from evoh.records import EpisodeRecord, TaskRef, TurnRecord
from evoh.runs.summary import summarize
from tests.cli_runner import evoh
from tests.test_records import BROKEN, EPISODE


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The expert's episodes on twelve MiniHouse games, every task type, as `evoh collect` writes them."""
    ws = tmp_path_factory.mktemp("ws")
    result = evoh("collect", "-w", str(ws), "--kind", "minihouse", "--split", "train", "--limit", "12")
    assert result.exit_code == 0, result.stderr
    return ws / "collect"


def _lines(collected: Path) -> list[bytes]:
    return (collected / "trajectories.jsonl").read_bytes().splitlines()


def test_real_records_read_and_written_back_are_the_same_bytes(collected: Path):
    lines = _lines(collected)
    assert len(lines) == 12
    for line in lines:
        record = EpisodeRecord.from_dict(orjson.loads(line))
        assert orjson.dumps(record.to_dict()) == line
        assert record.task.kind == "minihouse" and record.trace and all(isinstance(t, TurnRecord) for t in record.trace)
        # what collect added after the episode's own fields
        assert list(record.extra) == ["fingerprint", "policy", "usage"] and record.fingerprint


def test_fields_a_newer_writer_added_are_kept_where_they_were(collected: Path):
    data = orjson.loads(_lines(collected)[0])
    newer = {"first": 1, **data, "last": [1, 2.5, None]}
    newer["task"] = {**newer["task"], "seed": 7}
    newer["trace"][0] = {"before": True, **newer["trace"][0], "tokens": 12}
    record = EpisodeRecord.from_dict(newer)
    assert orjson.dumps(record.to_dict()) == orjson.dumps(newer)
    assert record.extra["first"] == 1 and record.task.extra == {"seed": 7} and record.trace[0].extra["tokens"] == 12


def test_a_changed_field_is_written_in_its_place(collected: Path):
    data = orjson.loads(_lines(collected)[0])
    changed = dataclasses.replace(EpisodeRecord.from_dict(data), error="engine worker died")
    assert changed.to_dict() == {**data, "error": "engine worker died"}
    assert list(changed.to_dict()) == list(data)


def test_a_record_of_an_earlier_evoh_reads_with_its_later_fields_absent():
    record = EpisodeRecord.from_dict(copy.deepcopy(EPISODE))
    assert record.task.kind is None and record.idle_meta is None and record.revisits is None and record.protocol is None
    assert record.to_dict() == EPISODE and list(record.to_dict()) == list(EPISODE)


def test_a_record_built_here_follows_the_fields_order_and_leaves_out_an_absent_label():
    turn = TurnRecord(
        user="u", response="r", action="look", kind="env", verb="", valid=True, executed=True, outcome="ok", result="x"
    )
    assert "label" not in turn.to_dict() and TurnRecord.from_dict({**turn.to_dict(), "label": "l"}).label == "l"
    task = TaskRef(id="t", split="train", task_type="pick_and_place_simple", game_file="g", grammar="2.1.1", kind="minihouse")
    with pytest.raises(TypeError):  # the fields every reader relies on have no default
        EpisodeRecord(
            task=task, objective="o", won=False, turns=1, env_steps=1, invalid_actions=0, meta={}, meta_actions=0, system="s"
        )
    built = EpisodeRecord(
        task=task,
        objective="o",
        won=True,
        turns=1,
        env_steps=1,
        invalid_actions=0,
        meta={},
        meta_actions=0,
        system="s",
        trace=(turn,),
        extra={"usage": {"prompt_tokens": 3}},
    )
    written = built.to_dict()
    assert list(written)[:3] == ["schema", "task", "objective"] and list(written)[-2:] == ["trace", "usage"]
    assert written["schema"] == "episode/1" and written["goal"] is None and built.usage == {"prompt_tokens": 3}
    assert orjson.dumps(EpisodeRecord.from_dict(written).to_dict()) == orjson.dumps(written)


@pytest.mark.parametrize("name", BROKEN)
def test_a_malformed_record_is_refused_with_the_readers_one_line_error(name: str):
    record, wrong = BROKEN[name]
    with pytest.raises(EvohError) as refused:
        EpisodeRecord.from_dict(record, "episodes.jsonl:3")
    assert refused.value.message == f"episodes.jsonl:3: {wrong}" and refused.value.hint


@pytest.mark.parametrize("schema", ["episode/9", None])
def test_an_unknown_schema_is_refused(schema: str | None):
    with pytest.raises(EvohError, match=rf"^episodes.jsonl: schema {schema!r} is not the 'episode/1' this evoh "):
        EpisodeRecord.from_dict({**EPISODE, "schema": schema}, "episodes.jsonl")
    with pytest.raises(EvohError, match="schema None"):
        EpisodeRecord.from_dict(["not", "an", "object"], "episodes.jsonl")


def test_readers_give_the_figures_the_stage_wrote(collected: Path):
    records = [EpisodeRecord.from_dict(orjson.loads(line)) for line in _lines(collected)]
    written = orjson.loads((collected / "summary.json").read_bytes())
    assert {k: written[k] for k in summarize(records)} == summarize(records)
    outcomes = game_outcomes(collected / "trajectories.jsonl")
    assert outcomes == {r.task.id: (r.won, tuple(t.action for t in r.trace)) for r in records}
