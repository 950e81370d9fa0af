"""Recipes resolve by name from anywhere (they ship inside the package), ALFWorld data is found where
alfworld-download puts it, and --limit spreads over the task types unless --first is given."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from evoh.env import games
from evoh.errors import EvohError
from evoh.recipe_files import find_recipe, shipped_recipes
from tests.cli_runner import evoh

REPO = Path(__file__).resolve().parents[1]


def test_a_recipe_name_resolves_outside_a_clone(tmp_path: Path):
    """From a folder with no recipes/ in it, `evoh config NAME` reads the shipped recipe and `evoh recipes` lists them."""
    run = lambda *args: subprocess.run([sys.executable, "-m", "evoh", *args], cwd=tmp_path, capture_output=True, text=True)  # noqa: E731
    shown = run("config", "minihouse-cpu", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["env"]["kind"] == "minihouse"
    listed = json.loads(run("recipes", "--json").stdout)
    assert set(listed) == {p.stem for p in (REPO / "evoh" / "recipes").glob("*.toml")} and "tiny-cpu" in listed
    assert all(entry["about"] for entry in listed.values())  # every recipe says what it is for
    wrong = run("config", "tiny-cpu-typo")
    assert wrong.returncode == 2
    assert "recipe tiny-cpu-typo is not one of evoh's" in wrong.stderr and "tiny-cpu" in wrong.stderr.split("hint:")[1]
    readme_path = run("config", "recipes/minihouse-cpu.toml", "--json")  # the README's path, typed outside a clone
    assert readme_path.returncode == 0 and json.loads(readme_path.stdout)["env"]["kind"] == "minihouse"


def test_a_path_still_wins_and_names_match_the_clone_folder(tmp_path: Path):
    own = tmp_path / "tiny-cpu.toml"
    own.write_text('[env]\nkind = "minihouse"\n')
    assert find_recipe(own) == own  # a file that exists is read, even when a shipped recipe has its name
    assert find_recipe("tiny-cpu.toml").resolve() == (REPO / "recipes" / "tiny-cpu.toml").resolve()
    with pytest.raises(EvohError):
        find_recipe(tmp_path / "missing.toml")  # a path is never looked up by name


def test_the_wheel_carries_every_recipe(tmp_path: Path):
    """The built wheel holds every recipe and accelerate config: an installed evoh finds them by name."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("evoh-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        f"evoh/recipes/{p.relative_to(REPO / 'evoh' / 'recipes')}" for p in (REPO / "evoh" / "recipes").rglob("*") if p.is_file()
    }
    assert shipped and shipped <= names
    for name in shipped_recipes():
        tomllib.loads((REPO / "evoh" / "recipes" / f"{name}.toml").read_text())  # and each one parses


def test_alfworld_data_is_found_where_alfworld_download_puts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    monkeypatch.setattr(games, "DOWNLOAD_HOME", tmp_path / "cache" / "alfworld")
    with pytest.raises(EvohError) as missing:
        games.data_root()
    assert "alfworld-download" in missing.value.hint
    (tmp_path / "cache" / "alfworld" / "json_2.1.1" / "valid_seen").mkdir(parents=True)
    assert games.data_root() == (tmp_path / "cache" / "alfworld").resolve()
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))  # the variable, when set, comes first
    assert games.data_root() == tmp_path.resolve()


@pytest.mark.parametrize(("flag", "types"), [((), 6), (("--first",), 1)], ids=["spread-by-default", "first"])
def test_limit_spreads_over_task_types_unless_first(tmp_path: Path, flag: tuple[str, ...], types: int):
    ws = tmp_path / "ws"
    result = evoh("collect", "-w", str(ws), "--kind", "minihouse", "--split", "valid_seen", "--limit", "6", *flag)
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in (ws / "collect" / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == 6 and len({r["task"]["task_type"] for r in records}) == types
