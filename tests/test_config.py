"""Recipes: typed sections, --set overrides, and unknown keys rejected with the nearest valid name."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoh.config import EnvConfig, Recipe, load_recipe, parse_override, recipe_toml
from evoh.errors import EvohError

RECIPES = sorted((Path(__file__).parents[1] / "recipes").glob("*.toml"))


def test_defaults_without_a_recipe():
    assert load_recipe() == Recipe(env=EnvConfig())


def test_overrides_are_typed(tmp_path: Path):
    recipe = load_recipe(None, ["env.max_steps=70", "env.step_timeout=5", "env.data=/games/alfworld", "env.workers = 4"])
    assert recipe.env.max_steps == 70 and recipe.env.workers == 4
    assert recipe.env.step_timeout == 5.0 and isinstance(recipe.env.step_timeout, float)
    assert recipe.env.data == "/games/alfworld"


def test_overrides_win_over_the_recipe(tmp_path: Path):
    path = tmp_path / "r.toml"
    path.write_text("[env]\nmax_steps = 30\nworkers = 1\n")
    recipe = load_recipe(path, ["env.max_steps=40"])
    assert (recipe.env.max_steps, recipe.env.workers) == (40, 1)


@pytest.mark.parametrize(
    ("override", "message", "hint"),
    [
        ("env.max_step=3", "unknown setting 'env.max_step'", "did you mean 'max_steps'?"),
        ("evn.max_steps=3", "unknown setting 'evn'", "did you mean 'env'?"),
        ("env.max_steps=many", "env.max_steps must be int", "type"),
        ("env.max_steps=2.5", "env.max_steps must be int", "type"),
        ("env.workers=true", "env.workers must be int", "type"),
        ("env.max_steps", "is not section.key=value", "--set env.max_steps=70"),
        ("env=3", "'env' is a section", "[env]"),
    ],
)
def test_bad_overrides_are_clear_errors(override: str, message: str, hint: str):
    with pytest.raises(EvohError) as info:
        load_recipe(None, [override])
    assert message in info.value.message and hint in info.value.hint


@pytest.mark.parametrize(
    ("override", "message", "hint"),
    [
        ("env.max_steps=-5", "env.max_steps = -5 is out of range: it must be >= 1", "--set env.max_steps=50"),
        ("env.workers=0", "env.workers = 0 is out of range: it must be >= 1", "set a value >= 1"),
        ("env.step_timeout=0", "env.step_timeout = 0 is out of range: it must be > 0", "--set env.step_timeout=60.0"),
        ("collect.limit=-1", "collect.limit = -1 is out of range: it must be >= 0", "--set collect.limit=0"),
        ("eval.max_active=0", "eval.max_active = 0 is out of range", ">= 1"),
        ("model.top_p=0", "model.top_p = 0 is out of range: it must be in (0, 1]", "--set model.top_p=1.0"),
        ("model.temperature=-0.1", "model.temperature = -0.1 is out of range: it must be >= 0", ">= 0"),
        ("refine.val_fraction=1", "refine.val_fraction = 1 is out of range: it must be in [0, 1)", "[0, 1)"),
        ("sft.lr=0", "sft.lr = 0 is out of range: it must be > 0", "--set sft.lr=1e-05"),
        ("grpo.group_size=1", "grpo.group_size = 1 is out of range: it must be >= 2", "--set grpo.group_size=8"),
    ],
)
def test_settings_out_of_range_are_refused_whoever_sets_them(override: str, message: str, hint: str, tmp_path: Path):
    with pytest.raises(EvohError) as info:
        load_recipe(None, [override])
    assert message in info.value.message and hint in info.value.hint
    section, _, rest = override.partition(".")
    key, _, value = rest.partition("=")
    recipe = tmp_path / "r.toml"
    recipe.write_text(f"[{section}]\n{key} = {value}\n")
    with pytest.raises(EvohError, match="is out of range"):
        load_recipe(recipe)


def test_values_at_a_closed_bound_are_accepted():
    recipe = load_recipe(
        None, ["env.max_steps=1", "model.top_p=1", "model.temperature=0", "refine.val_fraction=0", "grpo.group_size=2"]
    )
    assert (recipe.env.max_steps, recipe.model.top_p, recipe.grpo.group_size) == (1, 1.0, 2)


def test_an_out_of_range_setting_exits_2_before_anything_is_written(tmp_path: Path):
    from tests.cli_runner import evoh

    for setting in ("env.max_steps=-5", "env.workers=0"):
        result = evoh("collect", "-w", str(tmp_path / "ws"), "--kind", "minihouse", "--limit", "2", "--set", setting)
        assert result.exit_code == 2 and f"error: {setting.replace('=', ' = ')} is out of range" in result.stderr
    assert not (tmp_path / "ws").exists()


def test_bad_recipe_files(tmp_path: Path):
    with pytest.raises(EvohError, match="does not exist"):
        load_recipe(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[env\nmax_steps = 3")
    with pytest.raises(EvohError, match="not valid TOML"):
        load_recipe(broken)


def test_parse_override_reads_toml_values():
    assert parse_override("a.b=[1, 2]") == (["a", "b"], [1, 2])
    assert parse_override("a.b=hello world") == (["a", "b"], "hello world")
    assert parse_override('a.b="70"') == (["a", "b"], "70")


def test_resolved_recipe_round_trips_through_toml(tmp_path: Path):
    recipe = load_recipe(None, ["env.max_steps=70"])
    path = tmp_path / "evoh.toml"
    path.write_text(recipe_toml(recipe))
    assert load_recipe(path) == recipe


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_shipped_recipe_is_valid_and_says_how_to_run_it(path: Path):
    assert RECIPES, "recipes/ should hold at least one recipe"
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert path.read_text().startswith("# "), "a recipe starts with a comment"
    assert any("evoh " in line and f"recipes/{path.name}" in line for line in header), "…showing the command that runs it"
    load_recipe(path)


ACCELERATE = sorted((Path(__file__).parents[1] / "recipes" / "accelerate").glob("*.yaml"))


@pytest.mark.parametrize("path", ACCELERATE, ids=lambda p: p.name)
def test_accelerate_configs_load_in_accelerate(path: Path):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(path))
    assert config.num_processes == 8 and config.mixed_precision == "bf16"
    assert path.read_text().startswith("# ") and "-m evoh sft" in path.read_text()
    if "zero3" in path.name:
        assert config.distributed_type == "DEEPSPEED" and config.deepspeed_config["zero_stage"] == 3
