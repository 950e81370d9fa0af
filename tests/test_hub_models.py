"""Models by Hub id: a `--model` (or `sft.model`, `grpo.model`) that names `owner/name` is found in
huggingface_hub's cache; offline and not there, it is a one-line error with the download command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoh.errors import EvohError
from evoh.models.hub import model_directory
from tests.cli_runner import evoh

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(minihouse_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hugging Face cache, laid out as `hf download` leaves it, holding evoh's tiny model as acme/tiny-house."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    repo = cache / "models--acme--tiny-house"
    shutil.copytree(minihouse_model, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # read when called; the environment only at import
    return cache


def test_a_hub_id_resolves_to_its_cached_snapshot(hub_cache: Path):
    snapshot = hub_cache / "models--acme--tiny-house" / "snapshots" / COMMIT
    assert model_directory("acme/tiny-house", "--model") == snapshot
    assert model_directory(f"acme/tiny-house@{COMMIT}", "--model") == snapshot


def test_what_cannot_be_a_model_is_refused_with_the_fix(hub_cache: Path, tmp_path: Path):
    with pytest.raises(EvohError) as missing:
        model_directory("acme/elsewhere", "sft.model")
    assert "not in the Hugging Face cache" in missing.value.message and "HF_HUB_OFFLINE=1" in missing.value.message
    assert "hf download acme/elsewhere" in missing.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvohError) as empty:
        model_directory(str(tmp_path / "empty"), "sft.model")
    assert "has no config.json" in empty.value.message
    with pytest.raises(EvohError) as garbled:
        model_directory("not a model", "--model")
    assert "is not a model directory (nothing is there) nor a Hugging Face Hub id" in garbled.value.message


def test_eval_plays_a_model_named_by_its_hub_id(hub_cache: Path, tmp_path: Path):
    ws = tmp_path / "ws"
    args = ["--kind", "minihouse", "--policy", "local", "--limit", "1", "--max-steps", "2", "--json"]
    result = evoh("eval", "-w", str(ws), "--model", "acme/tiny-house", *args)
    assert result.exit_code == 0, result.stderr
    identity = json.loads((ws / "eval" / "local-valid_seen" / "summary.json").read_text())["policy"]
    assert identity["model"].endswith(f"models--acme--tiny-house/snapshots/{COMMIT}")  # the revision it played
    refused = evoh("eval", "-w", str(ws), "--model", "acme/elsewhere", *args)
    assert refused.exit_code == 2 and "hf download acme/elsewhere" in refused.stderr


def test_the_model_stage_never_builds_a_random_model_where_a_hub_model_is_named(hub_cache: Path, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "r.toml"
    recipe.write_text('[run]\nstages = ["model"]\nmodel_size = "tiny"\n[env]\nkind = "minihouse"\n[sft]\nmodel = "acme/absent"\n')
    refused = evoh("run", str(recipe), "-w", str(tmp_path / "ws"))
    assert refused.exit_code == 2 and "hf download acme/absent" in refused.stderr
    assert 'sft.model = "./acme/absent"' in refused.stderr
    assert not (tmp_path / "acme").exists()
    cached = evoh("run", str(recipe), "-w", str(tmp_path / "ws"), "--set", 'sft.model="acme/tiny-house"')
    assert cached.exit_code == 0, cached.stderr
    assert not (tmp_path / "acme").exists()  # found in the cache: nothing built
    built = evoh("run", str(recipe), "-w", str(tmp_path / "ws"), "--set", 'sft.model="./acme/absent"')
    assert built.exit_code == 0 and (tmp_path / "acme" / "absent" / "config.json").exists()  # a path written as one
