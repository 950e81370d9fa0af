"""Each setting is described once, on its section's field: `--help`, docs/settings.md and docs/cli.md are built
from it, a command's flag is the setting it names, and its typed value goes into the recipe unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoh.cli.recipe_options import resolve
from evoh.cli.reference import PAGES
from evoh.config import Recipe, recipe_settings, settings_of
from tests.cli_runner import commands, evoh, parse_command_line

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_reference_pages_are_current(page: str):
    shipped = (ROOT / "docs" / page).read_text()
    assert shipped == PAGES[page](), "stale: run `python -m evoh.cli.reference`"


def test_every_setting_says_what_it_does():
    settings = list(settings_of(Recipe))
    assert len(settings) > 100 and len({s.key for s in settings}) == len(settings)
    assert [s.key for s in settings if len(s.help) < 8] == []


def test_a_flag_shows_its_settings_words_default_and_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per option: rich wraps at the terminal's width
    out = evoh("grpo", "--help").stdout
    lr = recipe_settings()["grpo.lr"]
    assert lr.help[:40] in out and "[grpo.lr; default: 1e-06; must be > 0]" in out
    assert "[grpo.tasks_per_update; default: 16; must be >= 1]" in out
    out = evoh("eval", "--help").stdout
    assert "--belief" in out and "--no-belief" in out and "[harness.belief; default: true]" in out


def test_help_with_a_recipe_shows_the_recipes_values_too(monkeypatch: pytest.MonkeyPatch):
    from evoh.cli import recipe_options

    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(recipe_options, "_help_recipe", None)
    argv = ["grpo", "-r", "minihouse-cpu", "--set", "grpo.kl=0.5", "--help"]
    recipe_options.show_recipe_in_help(argv)  # what `evoh` does before it builds the app
    out = evoh(*argv).stdout
    assert "[grpo.lr; default: 1e-06; must be > 0; minihouse-cpu: 0.0005]" in out
    assert "[grpo.kl; default: 0.01; must be >= 0; minihouse-cpu: 0.5]" in out  # with the --set on the same line
    assert "[grpo.group_size; default: 8; must be >= 2]" in out  # the recipe leaves it as it is


def test_flag_values_go_into_the_recipe_as_typed():
    path = 'runs/a "quoted" \\ path'
    recipe = resolve(None, ["grpo.kl=0.5"], {"grpo.lr": 3e-4, "grpo.kl": 0.1, "grpo.model": path, "grpo.updates": None})
    assert (recipe.grpo.lr, recipe.grpo.kl, recipe.grpo.model) == (3e-4, 0.5, path)  # --set still has the last word
    assert recipe.grpo.updates == Recipe().grpo.updates


def test_a_flag_out_of_range_is_the_settings_own_error():
    result = evoh("grpo", "-w", "/nonexistent/ws", "--lr", "-1")
    assert result.exit_code == 2 and "grpo.lr = -1.0 is out of range: it must be > 0" in result.stderr
    result = evoh("grpo", "-w", "/nonexistent/ws", "--start", "later")
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("argv", "key", "value"),
    [
        (["collect", "--teacher", "openai"], "policy", "openai"),
        (["collect", "--label-with", "expert"], "label", "expert"),
        (["grpo", "--from", "none"], "start", "none"),
    ],
)
def test_the_former_flag_names_still_work(argv: list[str], key: str, value: str):
    command = commands()[argv[0]]
    context = command.make_context(argv[0], ["-w", "ws", *argv[1:]])
    assert context.params[key] == value


def test_every_command_has_examples_that_parse():
    known = commands()
    for name, command in known.items():
        help_text = command.help or ""
        assert "Examples:" in help_text, f"evoh {name}: its docstring has no Examples: block"
        examples = [line.strip() for line in help_text.split("Examples:")[1].splitlines() if line.strip()]
        assert examples, name
        for line in examples:
            parse_command_line(line, known)  # raises on an unknown command, option or value
