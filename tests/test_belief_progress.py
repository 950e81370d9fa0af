"""Belief and Progress on real observations, in both grammar versions, for all six task types."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoh.env.games import find_task, load_tasks
from evoh.env.native import NativeEngine
from evoh.env.types import TASK_TYPES
from evoh.harness.belief import INVENTORY, Belief, split_list
from evoh.harness.goal import goal_text, parse_goal
from evoh.harness.progress import Progress, proven
from tests.alfworld_helpers import make_2_1_2_copy, planner_walkthrough

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def one_per_type(alfworld_data: Path):
    tasks = load_tasks("valid_seen", alfworld_data)
    return {TASK_TYPES[tt]: next(t for t in tasks if t.task_type == tt) for tt in TASK_TYPES}


def play(task, commands):
    """Play commands on a real game, keeping a Belief and a Progress committed to the goal's milestones."""
    engine = NativeEngine(task.game_file, 50)
    start = engine.reset()
    belief = Belief(start.observation)
    goal = parse_goal(goal_text(start.observation))
    progress = Progress()
    for milestone in goal.milestones():
        progress.commit(milestone, 0)
    steps = []
    for turn, command in enumerate(commands, start=1):
        step = engine.step(command)
        assert step.valid, command
        belief.update(command, step.observation, step.steps)
        progress.absorb(belief, turn)
        steps.append(step)
    return belief, progress, goal, steps


def test_split_list_reads_alfworld_lists():
    assert split_list("a cd 1, a pen 2, and a mug 1") == ["cd 1", "pen 2", "mug 1"]
    assert split_list("a cd 1") == ["cd 1"]
    assert split_list("a apple 1, and a egg 2") == ["apple 1", "egg 2"]
    assert split_list("nothing") == []


def test_goal_texts_of_every_game_parse(alfworld_data: Path):
    import json
    import re

    for split in ("train", "valid_seen", "valid_unseen"):
        for task in load_tasks(split, alfworld_data):
            grammar = json.loads(Path(task.game_file).read_text())["grammar"]
            text = re.search(r'"rhs": "Your task is to: (.*?)"', grammar).group(1)
            goal = parse_goal(text)
            assert goal is not None, text
            assert goal.task == TASK_TYPES[task.task_type], (text, task.id)


@pytest.mark.parametrize("short", list(TASK_TYPES.values()))
def test_progress_is_proven_by_the_belief_for_every_task_type(one_per_type, short: str):
    task = one_per_type[short]
    plan = planner_walkthrough(task.game_file)
    belief, progress, goal, steps = play(task, plan)
    assert steps[-1].won
    assert [s.text for s in progress.subgoals if not s.done] == []
    assert progress.checklist().count("[x]") == len(goal.milestones())
    held_or_placed = [o for o in belief.objects_of(goal.object) if o.where == INVENTORY or o.name in belief.placed]
    assert held_or_placed
    if goal.state:
        assert all(goal.state in o.states for o in held_or_placed)
    if short == "look":
        assert any("on" in lamp.states for lamp in belief.objects_of(goal.target))


def test_belief_tracks_places_contents_and_states(one_per_type):
    task = one_per_type["heat"]
    plan = planner_walkthrough(task.game_file)
    belief, _, goal, steps = play(task, plan)
    # every receptacle of the room description is known from the first observation
    assert belief.receptacles and all(r.name[-1].isdigit() for r in belief.receptacles.values())
    destinations = [c[6:] for c in plan if c.startswith("go to ")]
    assert belief.visited == list(dict.fromkeys(destinations))
    assert belief.location == destinations[-1]
    heated = next(o for o in belief.objects_of(goal.object) if "hot" in o.states)
    assert heated.where == belief.location and heated.name in belief.placed
    source = next(c for c in plan if c.startswith("take ")).split(" from ")[1]
    assert heated.name in belief.receptacles[belief.location].contents
    if source != belief.location:
        assert heated.name not in (belief.receptacles[source].contents or [])
    answer = belief.track(goal.object)
    assert f"{heated.name}: in/on {belief.location}" in answer and "hot" in answer and "not yet visited:" in answer
    assert "visited" in belief.track(source)
    assert belief.track("unicorn").startswith("no unicorn seen yet.")
    assert belief.track(goal.object + "s") == answer  # plurals and bare types match


def test_belief_reads_open_close_inventory_and_examine(one_per_type):
    task = one_per_type["pick"]
    engine = NativeEngine(task.game_file, 50)
    start = engine.reset()
    belief = Belief(start.observation)
    step = start
    for _ in range(30):  # visit receptacles until one is closed, then open and close it
        target = next((c for c in step.admissible if c.startswith("go to ") and c[6:] not in belief.visited), None)
        if target is None:
            break
        step = engine.step(target)
        belief.update(target, step.observation, step.steps)
        place = target[6:]
        if belief.receptacles[place].closed:
            for command in (f"open {place}", f"close {place}", "inventory", f"examine {place}"):
                step = engine.step(command)
                belief.update(command, step.observation, step.steps)
                if command.startswith("open"):
                    assert belief.receptacles[place].closed is False and belief.receptacles[place].contents is not None
            assert belief.receptacles[place].closed is True and belief.inventory == []
            return
    pytest.skip("no closed receptacle in this room")


def test_belief_in_the_2_1_2_grammar(one_per_type, tmp_path: Path):
    source = Path(one_per_type["pick2"].game_file).parent
    task = find_task(str(make_2_1_2_copy(source, tmp_path / "valid_seen")))
    plan = planner_walkthrough(task.game_file)
    belief, progress, goal, steps = play(task, plan)
    assert steps[-1].won and goal.count == 2
    placed = [o for o in belief.objects_of(goal.object) if o.name in belief.placed]
    assert len(placed) == 2 and all(o.where.startswith(goal.target) for o in placed)
    assert proven(f"put two {goal.object} in {goal.target}", belief)
    assert all(s.done for s in progress.subgoals)
    assert belief.location == [c for c in plan if c.startswith("go to ")][-1][6:]


def test_commit_adds_then_advances_and_is_bounded():
    progress = Progress()
    assert progress.commit("Find  Apple", 1) == (True, "added 'find apple' to the plan.")
    assert progress.commit("find apple", 2) == (True, "marked 'find apple' done.")
    assert progress.subgoals[0].done and progress.subgoals[0].step == 2
    for i in range(7):
        progress.commit(f"subgoal {i}", 3)
    executed, message = progress.commit("one too many", 4)
    assert not executed and "full" in message
    assert progress.checklist().splitlines()[0] == "[x] find apple"
