"""The real ALFWorld engine on real games: text, admissible commands, validity, winning, both grammars."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evoh.env.engine import NOTHING_HAPPENS, GameEngine
from evoh.env.games import discover, find_task, grammar_version, load_tasks, read_game_list
from evoh.env.pool import EnvPool
from evoh.env.types import TASK_TYPES
from evoh.errors import EvohError
from tests.alfworld_helpers import make_2_1_2_copy, planner_walkthrough

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def one_per_type(alfworld_data: Path):
    tasks = load_tasks("valid_seen", alfworld_data)
    return {tt: next(t for t in tasks if t.task_type == tt) for tt in TASK_TYPES}


def test_games_of_chosen_task_types_by_short_or_long_name(alfworld_data: Path):
    every = load_tasks("valid_seen", alfworld_data)
    chosen = load_tasks("valid_seen", alfworld_data, types=["look", "pick_and_place_simple"])
    assert chosen == [t for t in every if t.short_type in ("look", "pick")] and chosen
    assert [t.short_type for t in load_tasks("valid_seen", alfworld_data, limit=3, types=["heat"])] == ["heat"] * 3
    with pytest.raises(EvohError, match="unknown task type 'hot'"):
        load_tasks("valid_seen", alfworld_data, types=["hot"])


def test_a_game_list_keeps_its_games_in_id_order(alfworld_data: Path, tmp_path: Path):
    every = load_tasks("valid_seen", alfworld_data)
    listing = tmp_path / "games.txt"
    listing.write_text(f"# two games\n{every[40].id}\n\n{every[3].id}  # a comment\n{every[40].id}\n")
    ids = read_game_list(listing)
    assert ids == [every[40].id, every[3].id, every[40].id]
    assert load_tasks("valid_seen", alfworld_data, ids=ids) == [every[3], every[40]]
    assert load_tasks("valid_seen", alfworld_data, limit=1, ids=ids) == [every[3]]  # the limit is taken of the listed games
    assert every[3].short_type == "look" and load_tasks("valid_seen", alfworld_data, types=["look"], ids=[every[3].id]) == [
        every[3]
    ]
    with pytest.raises(EvohError, match=r"2 of the listed games are not playable valid_unseen games \(first: valid_seen/"):
        load_tasks("valid_unseen", alfworld_data, ids=ids)
    with pytest.raises(EvohError, match="not playable valid_seen games of the chosen types"):
        load_tasks("valid_seen", alfworld_data, types=["heat"], ids=[every[3].id])
    listing.write_text("# nothing\n\n")
    with pytest.raises(EvohError, match="names no game"):
        read_game_list(listing)
    with pytest.raises(EvohError, match="cannot read the game list"):
        read_game_list(tmp_path / "missing.txt")


def test_reset_text_and_admissible_commands(alfworld_data: Path):
    task = load_tasks("valid_seen", alfworld_data, limit=1)[0]
    engine = GameEngine(task.game_file, max_steps=50)
    start = engine.reset()
    assert start.observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert "You are in the middle of a room. Looking quickly around you, you see " in start.observation
    assert re.search(r"Your task is to: .+\.$", start.observation)
    assert not start.won and not start.done and start.steps == 0 and start.valid
    # every receptacle named in the room description can be gone to, and nothing else moves us
    seen = re.search(r"you see (.+?)\.\n", start.observation).group(1)
    receptacles = {name.strip() for name in re.split(r", and |, ", seen.removeprefix("a ")) for name in [name.removeprefix("a ")]}
    assert {c.removeprefix("go to ") for c in start.admissible if c.startswith("go to ")} == receptacles
    assert {"look", "inventory"} <= set(start.admissible)
    assert "help" not in start.admissible


def test_inadmissible_command_changes_nothing(alfworld_data: Path):
    task = load_tasks("valid_seen", alfworld_data, limit=1)[0]
    engine = GameEngine(task.game_file, max_steps=50)
    engine.reset()
    before = engine.step("look")
    for bad in ["fly to the moon", "take unicorn 1 from bed 1", "", "go to desk 99"]:
        step = engine.step(bad)
        assert step.observation == NOTHING_HAPPENS
        assert not step.valid and not step.won
        assert step.admissible == before.admissible
    after = engine.step("look")
    assert after.observation == before.observation and after.valid
    assert after.steps == 6  # invalid commands still spend a step, as in ALFWorld


def test_matching_is_exact_after_trim_and_lowercase(alfworld_data: Path):
    task = load_tasks("valid_seen", alfworld_data, limit=1)[0]
    engine = GameEngine(task.game_file, max_steps=50)
    start = engine.reset()
    target = next(c for c in start.admissible if c.startswith("go to "))
    assert engine.step("  " + target.upper() + " ").valid
    assert not engine.step(target + " please").valid
    assert not engine.step(target.replace(" ", "  ")).valid


def test_max_steps_ends_the_episode(alfworld_data: Path):
    task = load_tasks("valid_seen", alfworld_data, limit=1)[0]
    engine = GameEngine(task.game_file, max_steps=3)
    engine.reset()
    steps = [engine.step("look") for _ in range(3)]
    assert [s.done for s in steps] == [False, False, True]
    assert not steps[-1].won
    with pytest.raises(RuntimeError):
        engine.step("look")


def test_a_winning_sequence_for_every_task_type_through_the_pool(one_per_type):
    plans = {tt: planner_walkthrough(task.game_file) for tt, task in one_per_type.items()}
    with EnvPool(2, max_steps=50) as pool:
        steps = pool.reset(one_per_type)
        assert len({pool.worker_of(tt) for tt in one_per_type}) == 2  # spread over both workers
        for turn in range(max(map(len, plans.values()))):
            batch = {tt: plan[turn] for tt, plan in plans.items() if turn < len(plan)}
            steps.update(pool.step(batch))
            assert all(steps[tt].valid for tt in batch)
        for tt, step in steps.items():
            assert step.won and step.done and step.score == 1.0, tt
            assert step.steps == len(plans[tt])


def test_the_2_1_2_grammar(one_per_type, tmp_path: Path):
    source = Path(one_per_type["pick_and_place_simple"].game_file).parent
    copy = make_2_1_2_copy(source, tmp_path / "json_2.1.1" / "valid_seen")
    task = find_task(str(copy))
    assert (
        task.grammar == "2.1.2" and grammar_version(json.loads(copy.joinpath("game.tw-pddl").read_text())["grammar"]) == "2.1.2"
    )
    games = discover("valid_seen", tmp_path)
    assert [t.grammar for t in games.tasks] == ["2.1.2"]

    plan = planner_walkthrough(task.game_file)
    assert any(c.startswith("move ") for c in plan) and not any(c.startswith("put ") for c in plan)
    engine = GameEngine(task.game_file, max_steps=50)
    start = engine.reset()
    assert "help" not in start.admissible
    assert not engine.step("help").valid  # hidden, so it cannot be run either
    step = engine.step(plan[0])
    assert step.observation.startswith(f"You arrive at {plan[0].removeprefix('go to ')}.")
    for command in plan[1:]:
        step = engine.step(command)
        assert step.valid
    assert step.won


def test_2_1_1_arrival_text_names_a_location(one_per_type):
    task = one_per_type["pick_and_place_simple"]
    engine = GameEngine(task.game_file, max_steps=50)
    start = engine.reset()
    step = engine.step(next(c for c in start.admissible if c.startswith("go to ")))
    assert re.match(r"You arrive at loc \d+\.", step.observation)
    assert task.grammar == "2.1.1"
