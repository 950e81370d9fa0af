"""The `evoh` command line: start-up, errors, completions, `games`, `play` and `config`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evoh import __version__
from evoh.cli.completions import SHELLS, completion_script
from evoh.env.games import load_tasks
from tests.alfworld_helpers import planner_walkthrough
from tests.cli_runner import evoh
from tests.subprocesses import interrupt, interruptible

ROOT = Path(__file__).parents[1]


def test_version_and_help():
    assert evoh("--version").stdout.strip() == f"evoh {__version__}"
    result = evoh("--help")
    assert result.exit_code == 0
    for command in ("games", "play", "config"):
        assert command in result.stdout


def test_help_imports_no_heavy_library():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from evoh.cli.app import app\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
        "assert CliRunner().invoke(app, ['games', '--help']).exit_code == 0\n"
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'peft', 'alfworld', 'textworld') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_bad_input_is_one_error_line_with_a_hint_and_exit_2():
    result = evoh("games", "--data", "/nonexistent/alfworld")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ALFWorld data directory /nonexistent/alfworld does not exist")
    assert "hint: pass --data DIR" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_evoh_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EVOH_DEBUG", "1")
    result = evoh("games", "--data", "/nonexistent/alfworld")
    assert result.exception is not None and type(result.exception).__name__ == "EvohError"


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_completions_are_current(shell: str):
    shipped = (ROOT / "completions" / SHELLS[shell]).read_text()
    assert shipped == completion_script(shell), "stale: run `python -m evoh.cli.completions`"
    assert "_EVOH_COMPLETE" in shipped


def test_config_command_shows_and_checks_recipes():
    result = evoh("config", str(ROOT / "recipes" / "tiny-cpu.toml"), "--set", "env.max_steps=70", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["env"]["max_steps"] == 70
    result = evoh("config", "--set", "env.max_step=70")
    assert result.exit_code == 2 and "did you mean 'max_steps'?" in result.stderr


def test_ci_without_games_fails_instead_of_skipping(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}
    env["CI"] = "true"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_env_engine.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert "ALFWORLD_DATA is not set" in result.stdout + result.stderr


# -- commands on real games ------------------------------------------------------------------------


@pytest.mark.engine
def test_games_reports_the_shared_data(alfworld_data: Path):
    result = evoh("games", "--data", str(alfworld_data), "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert {name: s["games"] for name, s in report["splits"].items()} == {"train": 600, "valid_seen": 140, "valid_unseen": 134}
    assert report["grammar"] == "2.1.1"
    assert report["splits"]["valid_seen"]["by_type"]["pick_and_place_simple"] == 35
    assert sum(report["splits"]["train"]["by_type"].values()) == 600
    table = evoh("games", "--data", str(alfworld_data), "--split", "eval_out_of_distribution")
    assert table.exit_code == 0 and "valid_unseen" in table.stdout and "134" in table.stdout


@pytest.mark.engine
def test_games_lists_every_unplayable_game_with_its_reason(alfworld_data: Path, tmp_path: Path):
    source = sorted((alfworld_data / "json_2.1.1" / "valid_seen").iterdir())
    split = tmp_path / "json_2.1.1" / "valid_seen"

    def copy(index: int, name: str | None = None) -> Path:
        game = split / (name or source[index].name)
        shutil.copytree(source[index], game)
        return next(game.iterdir())

    copy(0)
    copy(1).joinpath("game.tw-pddl").unlink()
    copy(2).joinpath("traj_data.json").write_text("{ not json")
    unsolvable = copy(3).joinpath("game.tw-pddl")
    unsolvable.write_text(unsolvable.read_text().replace('"solvable": true', '"solvable": false'))
    copy(4, "pick_and_place_simple-Apple-Sliced-Fridge-1")
    strange = copy(5).joinpath("traj_data.json")
    strange.write_text(strange.read_text().replace(json.loads(strange.read_text())["task_type"], "juggle"))

    result = evoh("games", "--data", str(tmp_path), "--split", "valid_seen", "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)["splits"]["valid_seen"]
    assert info["games"] == 1
    reasons = sorted(p["reason"] for p in info["problems"])
    assert len(reasons) == 5
    for expected in ("game.tw-pddl is missing", "not valid JSON", "marked unsolvable", "sliced", "unknown task type 'juggle'"):
        assert any(expected in r for r in reasons), expected
    table = evoh("games", "--data", str(tmp_path), "--split", "valid_seen")
    assert "game.tw-pddl is marked unsolvable" in table.stdout


@pytest.mark.engine
def test_play_replays_a_winning_file(alfworld_data: Path, tmp_path: Path):
    task = load_tasks("valid_seen", alfworld_data)[1]
    plan = planner_walkthrough(task.game_file)
    commands = tmp_path / "win.txt"
    commands.write_text("# a walkthrough\n\nlook\nfly away\n" + "\n".join(plan) + "\nlook\n")
    result = evoh("play", task.id, "--data", str(alfworld_data), "--commands", str(commands))
    assert result.exit_code == 0, result.stderr
    assert "> fly away\n[2] (not an admissible command) Nothing happens." in result.stdout
    assert f"result: WON after {len(plan) + 2} step(s)" in result.stdout
    assert "1 command(s) left unplayed" in result.stdout
    as_json = json.loads(evoh("play", task.id, "--data", str(alfworld_data), "-c", str(commands), "--json").stdout)
    assert as_json["won"] and as_json["turns"][1]["valid"] is False and as_json["unplayed"] == ["look"]


@pytest.mark.engine
def test_play_exits_1_when_the_game_is_not_won(alfworld_data: Path, tmp_path: Path):
    commands = tmp_path / "idle.txt"
    commands.write_text("look\ninventory\n")
    result = evoh("play", "valid_seen:0", "--data", str(alfworld_data), "--commands", str(commands))
    assert result.exit_code == 1 and "result: not won after 2 step(s)" in result.stdout
    missing = evoh("play", "valid_seen:0", "--data", str(alfworld_data), "--commands", str(tmp_path / "none.txt"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    assert evoh("play", "valid_seen:999", "--data", str(alfworld_data)).exit_code == 2
    assert evoh("play", "valid_seen/nothing-here", "--data", str(alfworld_data)).exit_code == 2


@pytest.mark.engine
def test_play_interactively_by_number_and_by_text(alfworld_data: Path):
    task = load_tasks("valid_seen", alfworld_data)[0]
    plan = planner_walkthrough(task.game_file)
    typed = "look\n" + "\n".join(plan) + "\n"
    result = evoh("play", str(Path(task.game_file).parent), input=typed)
    assert result.exit_code == 0, result.stderr
    assert "Your task is to:" in result.stdout and "result: WON" in result.stdout
    quitting = evoh("play", task.id, "--data", str(alfworld_data), input="1\nquit\n")
    assert quitting.exit_code == 1 and "[1] You arrive at" in quitting.stdout


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.engine
def test_ctrl_c_in_play_exits_130_and_stops_the_engine(alfworld_data: Path):
    env = {**os.environ, "ALFWORLD_DATA": str(alfworld_data)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evoh", "play", "valid_seen:0", "--engine", "textworld"],  # its engine in a worker
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 60
    while not [c for c in _children(proc.pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = _children(proc.pid)
    assert workers
    assert proc.stdout.readline().startswith("[0] -= Welcome to TextWorld")  # the game is up, waiting for input
    err = interrupt(proc, workers)
    assert proc.returncode == 130 and "error: interrupted" in err and "Traceback" not in err

    def alive() -> list[int]:
        found = []
        for pid in workers:
            with contextlib.suppress(OSError):
                if "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]:
                    found.append(pid)
        return found

    deadline = time.monotonic() + 20  # a loaded machine may take a moment to reap them
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive()
