"""The workspace directory: atomic manifests, resumable JSONL, locks, and input checks that name the fix."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from evoh import records
from evoh.errors import EvohError
from evoh.workspace import (
    JsonlLog,
    Workspace,
    atomic_write_json,
    file_sha256,
    fingerprint,
    read_jsonl,
)


def test_manifest_is_written_last_and_marks_the_stage_finished(tmp_path: Path):
    ws = Workspace(tmp_path / "ws")
    assert ws.manifest("collect") is None
    with ws.writing("collect") as directory:
        (directory / "summary.json").write_text("{}")
        assert ws.manifest("collect") is None
        ws.finish("collect", {"episodes": 3})
    manifest = ws.require("collect")
    assert manifest["episodes"] == 3 and manifest["schema"] == "stage/1" and manifest["stage"] == "collect"


def test_files_a_stage_writes_are_readable_by_whoever_the_umask_allows(tmp_path: Path):
    """mkstemp and safetensors create files 0600: a stage's manifest and weights must get the umask's mode."""
    import torch
    from safetensors.torch import save_file

    previous = os.umask(0o022)
    try:
        ws = Workspace(tmp_path / "ws")
        with ws.writing("sft") as directory:
            (directory / "adapter").mkdir()
            save_file({"w": torch.zeros(2)}, str(directory / "adapter" / "adapter_model.safetensors"))
            ws.finish("sft", {})
        modes = {
            p.name: p.stat().st_mode & 0o777
            for p in (directory / "stage.json", directory / "adapter" / "adapter_model.safetensors")
        }
        assert modes == {"stage.json": 0o644, "adapter_model.safetensors": 0o644}
        os.umask(0o077)  # a user who keeps files private still gets private files
        atomic_write_json(tmp_path / "private.json", {})
        assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(previous)


def test_rewriting_a_stage_removes_its_old_manifest_first(tmp_path: Path):
    ws = Workspace(tmp_path)
    with ws.writing("collect"):
        ws.finish("collect", {"episodes": 1})
    with pytest.raises(RuntimeError), ws.writing("collect"):
        assert ws.manifest("collect") is None
        raise RuntimeError("killed half-way")
    assert ws.manifest("collect") is None  # never claims to be finished after a failed rerun


def test_a_failed_atomic_write_leaves_the_old_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    target = tmp_path / "stage.json"
    atomic_write_json(target, {"old": True})

    def crash(*args, **kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        atomic_write_json(target, {"new": True})
    assert orjson.loads(target.read_bytes()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["stage.json"]  # no temp file left behind


def test_missing_input_names_the_command_that_makes_it(tmp_path: Path):
    ws = Workspace(tmp_path / "run1")
    with pytest.raises(EvohError) as info:
        ws.require("collect")
    assert "collect/stage.json is missing" in info.value.message
    assert f"evoh collect -w {tmp_path / 'run1'}" in info.value.hint
    with pytest.raises(EvohError) as info:
        ws.require("eval/sft-seen")
    assert "--name sft-seen" in info.value.hint


def test_unknown_schema_versions_are_rejected(tmp_path: Path):
    ws = Workspace(tmp_path)
    (tmp_path / "refine").mkdir()
    (tmp_path / "refine" / "stage.json").write_text('{"schema": "stage/99", "stage": "refine"}')
    with pytest.raises(EvohError, match="stage/99"):
        ws.require("refine")
    with pytest.raises(EvohError):
        records.check("stage", ["not", "a", "record"], "x")


def test_jsonl_resume_skips_done_units_and_drops_a_torn_line(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    path = tmp_path / "episodes.jsonl"
    with JsonlLog(path) as log:
        for i in range(3):
            log.append({"fingerprint": fingerprint({"task": i}), "i": i})
    with open(path, "ab") as f:
        f.write(b'{"fingerprint": "half-writ')  # a run killed in the middle of a write
    with caplog.at_level("WARNING"):
        log = JsonlLog(path)
    assert "torn last line" in caplog.text and log.dropped_torn_bytes == len(b'{"fingerprint": "half-writ')
    assert [r["i"] for r in log.records] == [0, 1, 2]
    assert log.done(fingerprint({"task": 1})) and not log.done(fingerprint({"task": 3}))
    log.append({"fingerprint": fingerprint({"task": 3}), "i": 3})
    log.close()
    assert [orjson.loads(line)["i"] for line in path.read_bytes().splitlines()] == [0, 1, 2, 3]


def test_a_damaged_middle_line_is_an_error_not_data(tmp_path: Path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(b'{"fingerprint": "a"}\nnot json\n{"fingerprint": "b"}\n')
    with pytest.raises(EvohError, match=r"episodes.jsonl:2"):
        read_jsonl(path)


def test_fingerprints_ignore_key_order():
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})


_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from evoh.workspace import JsonlLog, Workspace, fingerprint

    ws = Workspace(sys.argv[1])
    with ws.writing("collect") as directory, JsonlLog(directory / "trajectories.jsonl") as log:
        print("locked", flush=True)
        for i in range(100000):
            if not log.done(fingerprint(i)):
                log.append({"fingerprint": fingerprint(i), "i": i, "pad": "x" * 5000})
            time.sleep(0.001)
    """
)


def _start_writer(tmp_path: Path) -> subprocess.Popen:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "ws")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_sigkill_mid_write_then_resume_keeps_every_unit_once(tmp_path: Path):
    proc = _start_writer(tmp_path)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    path = tmp_path / "ws" / "collect" / "trajectories.jsonl"
    with JsonlLog(path) as log:
        done = len(log.records)
        assert done > 10
        for i in range(done + 5):
            if not log.done(fingerprint(i)):
                log.append({"fingerprint": fingerprint(i), "i": i})
    contents = read_jsonl(path)
    assert not contents.torn
    assert [r["i"] for r in contents.records] == list(range(done + 5))


def test_two_runs_cannot_write_one_stage(tmp_path: Path):
    proc = _start_writer(tmp_path)
    try:
        with pytest.raises(EvohError) as info, Workspace(tmp_path / "ws").writing("collect"):
            pass
        assert f"pid {proc.pid}" in info.value.message and "-w" in info.value.hint
    finally:
        proc.kill()
        proc.wait()
    with Workspace(tmp_path / "ws").writing("collect"):  # the kernel released the dead run's lock
        pass


def test_a_file_hash_is_read_once_and_a_rewrite_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    shard = tmp_path / "model.safetensors"
    shard.write_bytes(b"a" * 4096)
    first = file_sha256(shard)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    assert file_sha256(shard) == first and opened == []  # the stage's run key and manifest read it once
    before = os.stat(shard)
    time.sleep(0.02)  # past a coarse kernel clock's tick, so the status-change time can move
    with real_open(shard, "r+b") as f:  # the same size, rewritten in place, and its mtime set back (cp -p, rsync -t)
        f.write(b"b")
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file_sha256(shard) == hashlib.sha256(b"b" + b"a" * 4095).hexdigest() != first
    replacement = tmp_path / "replacement"
    replacement.write_bytes(b"c" * 4096)
    os.replace(replacement, shard)  # an atomic rewrite
    assert file_sha256(shard) == hashlib.sha256(b"c" * 4096).hexdigest()
