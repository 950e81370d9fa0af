"""Truncated game files: a run skips the damaged games it was asked for, names them, counts them in its summary,
and never swaps in other games, so that success keeps the denominator that was asked for."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from evoh.env.games import discover, select_games
from evoh.errors import EvohError
from tests.cli_runner import evoh

pytestmark = pytest.mark.engine


@pytest.fixture
def damaged(alfworld_data: Path, tmp_path: Path) -> Path:
    """Six valid_seen games, the second with its game.tw-pddl and the fourth with its traj_data.json cut short,
    beside a sliced variant (which alfworld leaves out of the split: not a game asked for)."""
    source = sorted((alfworld_data / "json_2.1.1" / "valid_seen").iterdir())[::20][:6]
    split = tmp_path / "data" / "json_2.1.1" / "valid_seen"
    for game in source:
        shutil.copytree(game, split / game.name)
    shutil.copytree(source[0], split / "pick_and_place_simple-Apple-Sliced-Fridge-1")
    trials = [next((split / game.name).iterdir()) for game in source]
    for trial, name in ((trials[1], "game.tw-pddl"), (trials[3], "traj_data.json")):
        file = trial / name
        file.write_bytes(file.read_bytes()[:300])
    return tmp_path / "data"


def _ids(data: Path) -> list[str]:
    return sorted(
        f"valid_seen/{t.parent.name}/{t.name}" for t in (data / "json_2.1.1" / "valid_seen").glob("*/*") if "Sliced" not in str(t)
    )


def test_a_selection_skips_the_damaged_games_it_reaches_and_replaces_none(damaged: Path, caplog: pytest.LogCaptureFixture):
    ids, games = _ids(damaged), discover("valid_seen", damaged)
    with caplog.at_level(logging.WARNING, logger="evoh"):
        every = select_games(games)
    assert [t.id for t in every.tasks] == [ids[0], ids[2], ids[4], ids[5]]
    assert [g.id for g in every.skipped] == [ids[1], ids[3]] and every.requested == 6
    assert (
        "game.tw-pddl is not valid JSON" in every.skipped[0].reason
        and "traj_data.json is not valid JSON" in every.skipped[1].reason
    )
    warning = caplog.records[-1].getMessage()
    assert warning.startswith("skipping 2 of the 6 valid_seen games asked for") and ids[1] in warning and ids[3] in warning

    first_two = select_games(games, limit=2)  # the second game is damaged: the third does not take its place
    assert [t.id for t in first_two.tasks] == [ids[0]] and [g.id for g in first_two.skipped] == [ids[1]]
    # a damaged game's type comes from its folder name, since the file that says it may be the one cut short
    of_their_types = select_games(games, types=[ids[3].split("/")[1].split("-")[0], ids[4].split("/")[1].split("-")[0]])
    assert [t.id for t in of_their_types.tasks] == [ids[4]] and [g.id for g in of_their_types.skipped] == [ids[3]]
    listed = select_games(games, ids=[ids[3], ids[4]])
    assert [t.id for t in listed.tasks] == [ids[4]] and [g.id for g in listed.skipped] == [ids[3]]
    with pytest.raises(EvohError, match=r"every one of the 1 valid_seen games asked for is unplayable") as refused:
        select_games(games, ids=[ids[1]])
    assert "evoh games --split valid_seen" in refused.value.hint
    with pytest.raises(EvohError, match="not playable valid_seen games"):
        select_games(games, ids=["valid_seen/no-such-game/trial_1"])


def test_eval_names_the_skipped_games_and_states_its_denominator(damaged: Path, tmp_path: Path):
    ids, ws = _ids(damaged), tmp_path / "ws"
    args = (
        "eval",
        "-w",
        str(ws),
        "--data",
        str(damaged),
        "--limit",
        "3",
        "--first",
        "--workers",
        "2",
        "--set",
        "env.max_steps=30",
    )
    table = evoh(*args)
    assert table.exit_code == 0, table.stderr
    assert "skipping 1 of the 3 valid_seen games asked for" in table.stderr and ids[1] in table.stderr
    assert (
        "games: 3 asked for, 2 finished, 1 unplayable, skipped (named on stderr); success is over the 2 finished" in table.stdout
    )
    summary = json.loads((ws / "eval" / "expert-valid_seen" / "summary.json").read_text())
    assert summary["requested"] == 3 and summary["episodes"] == summary["finished"] == 2
    assert [g["id"] for g in summary["skipped_games"]] == [ids[1]] and "not valid JSON" in summary["skipped_games"][0]["reason"]
    played = [
        json.loads(line)["task"]["id"] for line in (ws / "eval" / "expert-valid_seen" / "episodes.jsonl").read_text().splitlines()
    ]
    assert sorted(played) == [ids[0], ids[2]]
