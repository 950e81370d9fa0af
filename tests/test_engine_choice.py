"""`env.engine`: which engine plays ALFWorld's games, where it runs, and how runs keep them apart."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from evoh.config import load_recipe
from evoh.env.engine import GameEngine
from evoh.env.inprocess import InProcessPool
from evoh.env.pool import EnvPool
from evoh.env.world import played_by, pool_for
from evoh.errors import EvohError
from evoh.runs.episodes import play_settings
from tests.cli_runner import evoh


def _recipe(*sets: str):
    return load_recipe(None, list(sets))


def test_the_native_engine_is_the_default_and_plays_in_this_process():
    assert _recipe().env.engine == "native"
    native = pool_for("alfworld", 5, 2, 60.0, "native")
    assert isinstance(native, InProcessPool)
    native.close()
    assert isinstance(pool_for("minihouse", 5, 2, 60.0, "textworld"), InProcessPool)  # MiniHouse has one engine
    with pytest.raises(EvohError) as unknown:
        pool_for("alfworld", 5, 2, 60.0, "fast")
    assert "native, textworld" in unknown.value.hint


def test_textworld_plays_in_worker_processes():
    pool = pool_for("alfworld", 5, 1, 60.0, "textworld")
    try:
        assert isinstance(pool, EnvPool)
    finally:
        pool.close()


def test_run_keys_name_the_native_engine_only():
    """A native run never resumes a TextWorld one; runs made before the setting (TextWorld's) keep their keys."""
    native, textworld = play_settings(_recipe()), play_settings(_recipe('env.engine="textworld"'))
    assert native["env"]["engine"] == "native" and "engine" not in textworld["env"]
    house = play_settings(_recipe('env.kind="minihouse"', 'env.engine="textworld"'))
    assert "engine" not in house["env"] and house == play_settings(_recipe('env.kind="minihouse"'))
    assert played_by(_recipe().env) == "native" and played_by(_recipe('env.kind="minihouse"').env) == "minihouse"


def test_the_textworld_engine_without_its_packages_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setitem(sys.modules, "textworld", None)  # what an install without the extra looks like
    with pytest.raises(EvohError) as missing:
        GameEngine(str(tmp_path / "game.tw-pddl"), 5)
    assert "evoh[textworld]" in missing.value.hint and "native" in missing.value.hint


@pytest.mark.engine
def test_a_native_run_does_not_resume_into_a_textworld_one(alfworld_data: Path, tmp_path: Path):
    ws = tmp_path / "ws"
    first = ["collect", "-w", str(ws), "--split", "valid_seen", "--limit", "1", "--data", str(alfworld_data)]
    assert evoh(*first, "--engine", "textworld").exit_code == 0
    summary = orjson.loads((ws / "collect" / "summary.json").read_bytes())
    assert summary["protocol"]["engine"] == "textworld"
    again = evoh(*first)
    assert again.exit_code == 2 and "env.engine" in again.stderr
    assert evoh(*first, "--engine", "textworld").exit_code == 0  # the same run resumes: nothing left to play
