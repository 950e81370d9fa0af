"""MiniHouse: procedural games in ALFWorld's grammar and text, their splits, the expert on them, and the CLI."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evoh.config import EnvConfig, MiniHouseConfig, load_recipe
from evoh.env.engine import NOTHING_HAPPENS
from evoh.env.inprocess import InProcessPool
from evoh.env.minihouse import HouseSize, generate, unseen_layout
from evoh.env.pool import EnvPool
from evoh.env.types import TASK_TYPES
from evoh.env.world import discover_games, find_game, load_games, make_engine, open_pool
from evoh.errors import EvohError
from evoh.harness.belief import Belief
from evoh.harness.experience import Bank
from evoh.policy.factory import build_policy
from evoh.rollout import rollout
from evoh.runs.episodes import episode_settings
from tests.cli_runner import evoh

HOUSE = EnvConfig(kind="minihouse")


def _walk(game_file: str, seed: int, steps: int = 40) -> list[tuple]:
    """A seeded random walk over admissible commands (and some nonsense): every answer, in order."""
    rng = random.Random(seed)
    engine = make_engine(game_file, 1000)
    step = engine.reset()
    seen = [(step.observation, step.admissible, step.won)]
    for _ in range(steps):
        command = rng.choice([*step.admissible, "fly away"])
        step = engine.step(command)
        seen.append((command, step.observation, step.admissible, step.won, step.valid))
        if step.won:
            break
    return seen


def test_a_game_is_the_same_on_every_call_and_differs_from_its_neighbours():
    tasks = load_games(HOUSE, "valid_seen")
    assert _walk(tasks[0].game_file, 1) == _walk(tasks[0].game_file, 1)
    assert generate("train", "pick_and_place_simple", 3, HouseSize()) == generate(
        "train", "pick_and_place_simple", 3, HouseSize()
    )
    intros = {make_engine(t.game_file, 50).reset().observation for t in tasks}
    assert len(intros) == len(tasks)


def test_text_and_commands_follow_alfworlds_grammar():
    task = find_game(HOUSE, "valid_seen:0")
    engine = make_engine(task.game_file, 50)
    start = engine.reset()
    assert start.observation.startswith(
        "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see a "
    )
    assert re.search(r"\n\nYour task is to: .+\.$", start.observation)
    assert list(start.admissible) == sorted(start.admissible) and {"inventory", "look"} <= set(start.admissible)
    assert len(Belief(start.observation).receptacles) == HouseSize().receptacles
    assert engine.step("take the moon").observation == NOTHING_HAPPENS
    house = engine.house
    closed = next(r for r, openable in house.openable.items() if openable)
    arrive = engine.step(f"go to {closed}")
    assert re.fullmatch(rf"You arrive at loc \d+\. The {closed} is closed\.", arrive.observation)
    assert not any(c.startswith("take ") for c in arrive.admissible) and f"open {closed}" in arrive.admissible
    opened = engine.step(f"open {closed}").observation
    assert opened.startswith(f"You open the {closed}. The {closed} is open. In it, you see ")
    assert engine.step("inventory").observation == "You are not carrying anything."


def test_one_object_in_hand_and_states_change_at_their_appliance():
    task = next(t for t in load_games(HOUSE, "valid_seen") if t.short_type == "heat")
    engine = make_engine(task.game_file, 50)
    step = engine.reset()
    house = engine.house
    target = next(t for t in house.things if t.name.split()[0] == house.object)
    for command in (f"go to {target.where}", f"open {target.where}"):
        if command in step.admissible:
            step = engine.step(command)
    step = engine.step(f"take {target.name} from {target.where}")
    assert step.observation == f"You pick up the {target.name} from the {target.where}."
    assert not any(c.startswith("take ") for c in step.admissible)  # hands are full
    assert engine.step("inventory").observation == f"You are carrying: a {target.name}."
    engine.step("go to microwave 1")
    step = engine.step(f"heat {target.name} with microwave 1")
    assert step.observation == f"You heat the {target.name} using the microwave 1."
    assert engine.step(f"examine {target.name}").observation == f"This is a hot {target.name}."


def test_splits_are_fixed_and_unseen_layouts_never_appear_in_training():
    seen, unseen = discover_games(HOUSE, "valid_seen"), discover_games(HOUSE, "valid_unseen")
    per_type = MiniHouseConfig().valid_games
    assert seen.by_type() == {t: per_type for t in TASK_TYPES} == unseen.by_type()
    assert [t.id for t in seen.tasks] == [t.id for t in discover_games(HOUSE, "valid_seen").tasks]
    layouts = lambda tasks: {make_engine(t.game_file, 1).house.layout() for t in tasks}  # noqa: E731
    train = layouts(load_games(HOUSE, "train", 1200, spread=True))
    assert all(unseen_layout(layout) for layout in layouts(unseen.tasks))
    assert not any(unseen_layout(layout) for layout in train | layouts(seen.tasks))
    far = find_game(HOUSE, "train/heat-54321")  # the train split is unbounded
    assert make_engine(far.game_file, 50).house.task_type == "pick_heat_then_place_in_recep"


def test_the_expert_wins_every_task_type_without_seeing_hidden_state():
    recipe = load_recipe(None, ["env.kind=minihouse"])
    expert = build_policy("expert", recipe)
    won, played = Counter(), Counter()

    def finished(episode, usage):
        played[(episode.task.split, episode.task.short_type)] += 1
        won[(episode.task.split, episode.task.short_type)] += episode.won

    tasks = [
        *load_games(recipe.env, "valid_seen"),
        *load_games(recipe.env, "valid_unseen"),
        *load_games(recipe.env, "train", 600, spread=True),
    ]
    with open_pool(recipe.env, recipe.env.max_steps) as pool:
        rollout([(t.id, t) for t in tasks], expert, pool, episode_settings(recipe), Bank(), finished, max_active=32)
    assert sum(played.values()) == len(tasks)
    for key, count in played.items():
        assert won[key] >= 0.99 * count, f"{key}: {won[key]}/{count}"


def test_a_searching_expert_shows_the_student_what_is_left_to_search():
    """The prompt lists previous actions without what they showed, so a student cannot see which places it has
    searched; with expert.search_track the teacher asks Belief after each place searched in vain, and its next
    step goes to a place the answer lists as unvisited. Off (the default), look games have no track at all."""
    tracks = {}
    for rate in (0.0, 1.0):
        recipe = load_recipe(None, ["env.kind=minihouse", f"expert.search_track={rate}"])
        records = []
        tasks = load_games(recipe.env, "train", 60, types=["look", "pick"])
        with open_pool(recipe.env, recipe.env.max_steps) as pool:
            rollout(
                [(t.id, t) for t in tasks],
                build_policy("expert", recipe),
                pool,
                episode_settings(recipe),
                Bank(),
                lambda episode, usage: records.append(episode.record()),
            )
        assert len(records) == 60 and all(r["won"] for r in records)
        tracks[rate] = sum(r["meta"]["track"]["executed"] for r in records)
        for record in records if rate else []:
            trace = record["trace"]
            for turn, after in zip(trace, trace[1:]):
                if turn["verb"] == "track":
                    left = re.search(r"not yet visited: (.*)\.", after["user"]).group(1).split(", ")
                    assert after["action"].split(" ", 2)[-1] in left or after["action"].startswith("open "), after["user"]
    assert tracks[0.0] == 0 and tracks[1.0] >= 60  # about one a game: most objects are not in the first place searched


def test_threads_play_games_exactly_as_one_thread_does():
    tasks = load_games(HOUSE, "valid_unseen", 24, spread=True)
    alone = [_walk(t.game_file, i) for i, t in enumerate(tasks)]
    with ThreadPoolExecutor(8) as threads:
        together = list(threads.map(lambda pair: _walk(pair[1].game_file, pair[0]), enumerate(tasks)))
    assert together == alone


def test_worker_processes_answer_as_the_in_process_pool_does():
    tasks = {i: t for i, t in enumerate(load_games(HOUSE, "valid_seen", 3, spread=True))}
    with InProcessPool(make_engine, max_steps=5) as here, EnvPool(1, max_steps=5, engine=make_engine) as there:
        assert here.reset(tasks) == there.reset(tasks)
        commands = {i: "look" for i in tasks}
        for _ in range(5):
            assert here.step(commands) == there.step(commands)


def test_bad_sizes_and_kinds_are_one_line_errors():
    with pytest.raises(EvohError, match="distractors = 7 must be from 0 to objects"):
        load_games(EnvConfig(kind="minihouse", minihouse=MiniHouseConfig(objects=6, distractors=7)), "train")
    result = evoh("games", "--kind", "minihouse", "--set", "env.minihouse.receptacles=2")
    assert result.exit_code == 2 and "receptacles = 2 must be from 4 to 40" in result.stderr
    result = evoh("games", "--kind", "minihousе")
    assert result.exit_code == 2 and "is not one of 'alfworld', 'minihouse'" in result.stderr


def test_games_and_play_on_the_command_line(tmp_path: Path):
    listed = evoh("games", "--kind", "minihouse", "--json")
    assert listed.exit_code == 0 and '"valid_unseen"' in listed.stdout and '"kind": "minihouse"' in listed.stdout
    task = next(t for t in load_games(HOUSE, "valid_seen") if t.short_type == "pick")
    engine = make_engine(task.game_file, 50)
    engine.reset()
    house = engine.house
    item = next(t for t in house.things if t.name.split()[0] == house.object)
    target = next(r for r in house.receptacles if r.rsplit(" ", 1)[0] == house.target)
    commands = [
        f"go to {item.where}",
        f"open {item.where}",
        f"take {item.name} from {item.where}",
        f"go to {target}",
        f"open {target}",
        f"put {item.name} in/on {target}",
    ]
    script = tmp_path / "commands.txt"
    script.write_text("\n".join(c for c in commands if not c.startswith("open ") or house.openable[c[5:]]))
    result = evoh("play", task.id, "--kind", "minihouse", "--commands", str(script))
    assert result.exit_code == 0 and "result: WON after" in result.stdout, result.stdout
    clean = find_game(HOUSE, "valid_seen:0")  # a clean game: putting its object down unwashed does not win
    assert clean.short_type == "clean"
    result = evoh("play", "valid_seen:0", "--kind", "minihouse", "--commands", str(script))
    assert result.exit_code == 1 and "result: not won" in result.stdout


def test_the_whole_pipeline_runs_on_minihouse_without_alfworld_data(
    tmp_path: Path, minihouse_model: Path, monkeypatch: pytest.MonkeyPatch
):
    """The engine-free tier: collect → refine → sft → grpo → eval → export on generated games, no ALFWORLD_DATA."""
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(f"""
[run]
stages = ["collect", "refine", "sft", "grpo", "eval", "export"]
eval_from = ["sft", "grpo"]
eval_splits = ["valid_unseen"]
export_dtype = "fp32"

[env]
kind = "minihouse"
max_steps = 4

[env.minihouse]
valid_games = 1

[collect]
limit = 4
spread = true

[refine]
val_fraction = 0.0

[sft]
model = "{minihouse_model}"
max_steps = 2
lora_r = 4
lora_alpha = 8
batch_size = 2
per_device_batch = 2
max_length = 1024

[grpo]
updates = 1
tasks_per_update = 1
group_size = 2
max_steps = 4
max_tokens = 12
val_every = 0

[model]
max_tokens = 12
guided = true

[eval]
limit = 2
""")
    ws = tmp_path / "ws"
    # piped, as a batch job or `> log 2>&1` runs it: its log must read as a story, without library noise
    result = subprocess.run(
        [sys.executable, "-m", "evoh", "run", str(recipe), "-w", str(ws), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    log = result.stderr
    for stage in ("collect", "refine", "sft", "grpo", "eval/sft-valid_unseen", "export"):
        assert f"{stage}: running" in log and f"{stage}: finished in" in log, stage
    assert "collect 4/4 won" in log and "eval/grpo-valid_unseen 2/2 won" in log  # the episode heartbeat's last line
    assert re.search(r"^sft step 2/2 .*mean loss [0-9.]+", log, re.M)  # the trainer's log as a line, not a dict
    assert "grpo update 1/1: rollouts: 2 episodes (1 games × 2)" in log and "grpo update 1/1: optimising" in log
    for noise in ("Loading weights", "it/s]", "examples/s]", "FutureWarning", "{'loss'"):
        assert noise not in log, noise
    for stage in ("collect", "refine", "sft", "grpo", "eval/sft-valid_unseen", "eval/grpo-valid_unseen", "export"):
        assert (ws / stage / "stage.json").exists(), stage
    records = [json.loads(line) for line in (ws / "collect" / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["task"]["kind"] == "minihouse" for r in records)
    summary = json.loads((ws / "eval" / "grpo-valid_unseen" / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["split"] == "valid_unseen"
    assert json.loads((ws / "collect" / "stage.json").read_text())["inputs"]["data"] == "minihouse:6,4,1"
