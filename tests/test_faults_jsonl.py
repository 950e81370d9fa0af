"""Torn, garbage and wrong-schema lines in every JSONL file a stage reads from another (MiniHouse, no ALFWorld data).

A torn last line is what a kill leaves: a reader of a finished file drops it and names it in a warning. A line that
is not JSON, or a record without the fields its reader uses, is damage: the command exits 2 naming the file, the
line and the fix, before any file of a finished stage changes. refine writes its files whole, so sft refuses a
torn one too. (Each stage's own resumable records are covered by test_resume_faults.py and test_records.py.)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import evoh

MINIHOUSE = ("--kind", "minihouse", "--set", "env.max_steps=30")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose collect, refine and one eval have finished."""
    ws = tmp_path_factory.mktemp("finished") / "ws"
    assert evoh("collect", "-w", str(ws), *MINIHOUSE, "--limit", "4").exit_code == 0
    assert evoh("refine", "-w", str(ws), "--val-fraction", "0.25").exit_code == 0
    assert evoh("eval", "-w", str(ws), *MINIHOUSE, "--limit", "3", "--name", "run").exit_code == 0
    return ws


def _lines(file: Path) -> list[bytes]:
    return file.read_bytes().splitlines(keepends=True)


def torn(file: Path) -> None:
    file.write_bytes(file.read_bytes()[:-25])


def garbage(file: Path) -> None:
    lines = _lines(file)
    file.write_bytes(b"".join([*lines[:1], b'{"task": \n', *lines[1:]]))


def wrong_schema(file: Path) -> None:
    lines = _lines(file)
    record = json.loads(lines[1])
    record.pop("turns" if "turns" in record else "messages")
    file.write_bytes(b"".join([lines[0], json.dumps(record).encode() + b"\n", *lines[2:]]))


def _sft(ws: Path, model: Path) -> tuple[str, ...]:
    return ("sft", "-w", str(ws), "--model", str(model), "--max-steps", "1", "--lora-r", "4", "--lora-alpha", "8")


# reader -> (the file it reads, relative to the workspace; the command, given the workspace and the model)
READERS: dict[str, tuple[str, Callable[[Path, Path], tuple[str, ...]]]] = {
    "refine": ("collect/trajectories.jsonl", lambda ws, model: ("refine", "-w", str(ws))),
    "sft-train": ("refine/train.jsonl", _sft),
    "sft-val": ("refine/val.jsonl", _sft),
    "report": ("eval/run/episodes.jsonl", lambda ws, model: ("report", str(ws / "eval" / "run"), "--out", str(ws / "report"))),
    "few-shot": (
        "collect/trajectories.jsonl",
        lambda ws, model: (
            "eval", "-w", str(ws), *MINIHOUSE, "--limit", "1", "--name", "shots",
            "--set", "harness.few_shot=1", "--set", f"harness.few_shot_from={ws / 'collect' / 'trajectories.jsonl'}",
        ),
    ),
}  # fmt: skip
# what each damage gives: the exit code and what stderr says
EXPECTED = {
    (torn, False): (0, "left out its torn last line"),
    (torn, True): (2, "its last line is cut short"),  # sft: refine writes its files whole
    (garbage, False): (2, ":2: not a JSON record"),
    (garbage, True): (2, ":2: not a JSON record"),
    (wrong_schema, False): (2, ":2: the episode has no 'turns'"),
    (wrong_schema, True): (2, ":2: the example has no 'messages'"),
}


def _finished_files(ws: Path) -> dict[str, bytes]:
    """Every file of every finished stage (one holding stage.json), by path."""
    stages = {p.parent for p in ws.rglob("stage.json")}
    return {str(f.relative_to(ws)): f.read_bytes() for s in stages for f in s.rglob("*") if f.is_file() and f.name != ".lock"}


@pytest.mark.parametrize("damage", [torn, garbage, wrong_schema], ids=lambda d: d.__name__)
@pytest.mark.parametrize("reader", READERS)
def test_a_damaged_line_is_named_or_left_out_with_a_warning(
    finished: Path, minihouse_model: Path, tmp_path: Path, reader: str, damage: Callable[[Path], None]
):
    ws = tmp_path / "ws"
    shutil.copytree(finished, ws)
    relative, command = READERS[reader]
    damage(ws / relative)
    before = _finished_files(ws)

    result = evoh(*command(ws, minihouse_model))
    code, says = EXPECTED[(damage, reader.startswith("sft"))]
    assert result.exit_code == code, result.output
    assert says in result.stderr and str(ws / relative) in result.stderr
    assert "Traceback" not in result.stderr
    if code == 2:
        assert "hint: " in result.stderr
        assert _finished_files(ws) == before  # a refused run changes no finished stage's file
    else:  # only the stage this command runs may change
        ran = "refine" if reader == "refine" else "report" if reader == "report" else "eval/shots"
        assert {k: v for k, v in _finished_files(ws).items() if not k.startswith(ran)} == {
            k: v for k, v in before.items() if not k.startswith(ran)
        }


def test_export_refuses_a_messageless_example_before_it_loads_any_weights(finished: Path, tmp_path: Path):
    from evoh.errors import EvohError
    from evoh.stages.export import _prompts
    from evoh.workspace import Workspace

    ws = tmp_path / "ws"
    shutil.copytree(finished, ws)
    wrong_schema(ws / "refine" / "val.jsonl")
    with pytest.raises(EvohError, match=r"val.jsonl:2: the example has no 'messages'") as refused:
        _prompts(Workspace(ws), tokenizer=None)
    assert f"evoh refine -w {ws}" in refused.value.hint
