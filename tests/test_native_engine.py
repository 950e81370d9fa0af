"""The native ALFWorld engine: its readers on small made-up games, its errors, its thread safety, and the same
answers as TextWorld step by step on real games of every task type."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest

from evoh.env.native import NativeEngine
from evoh.env.native.grammar import Each, ListOf, Tag, Text, parse_grammar, parse_query, parse_symbols
from evoh.env.native.names import display_names
from evoh.env.native.pddl import parse_domain, parse_problem, parse_sexpr, typed_list
from evoh.env.types import TASK_TYPES
from evoh.errors import EvohError

DOMAIN = """
(define (domain toy)  ; a comment (with a parenthesis
 (:requirements :adl :typing)
 (:types agent place item)
 (:predicates (at ?a - agent ?p - place) (on ?i - item ?p - place) (holds ?a - agent ?i - item)
   (lit ?p - place) (door ?p - place ?q - place))
 (:action Walk
  :parameters (?a - agent ?from - place ?to - place)
  :precondition (and (at ?a ?from))
  :effect (and (not (at ?a ?from)) (at ?a ?to) (increase (total-cost) 1)))
 (:action Take
  :parameters (?a - agent ?i - item ?p - place)
  :precondition (and (at ?a ?p) (on ?i ?p) (not (exists (?j - item) (holds ?a ?j))))
  :effect (and (holds ?a ?i) (not (on ?i ?p))))
 (:action Drop
  :parameters (?a - agent ?i - item ?p - place)
  :precondition (and (at ?a ?p) (holds ?a ?i))
  :effect (and (on ?i ?p) (not (holds ?a ?i))
               (forall (?q - place) (when (= ?q ?p) (lit ?q)))))
)
"""
PROBLEM = """
(define (problem one) (:domain toy)
 (:objects Robot - agent Room_bar_1 Room_bar_2 - place Ball_bar_1 Ball_bar_2 - item)
 (:init (at Robot Room_bar_1) (on Ball_bar_1 Room_bar_1) (on Ball_bar_2 Room_bar_1)
  (door Room_bar_1 Room_bar_2) (= (total-cost) 0))
 (:goal (exists (?i - item) (and (on ?i Room_bar_2) (lit Room_bar_2)))))
"""
GRAMMAR = '''
grammar :: """
    {
        "intro": [{"rhs": "Welcome! #where#"}],
        "where": [
            {"condition": "at(a:agent, p:place) & on(i:item, p:place)",
             "rhs": "In the {p.name | at(a:agent, p:place)} you see #things#."},
            {"rhs": "The room is empty."}
        ],
        "things": [{"rhs": "[{i.indefinite + ' ' + i.name | at(a:agent, p:place) & on(i:item, p:place)}]"}],
        "list_empty": [{"rhs": "nothing"}],
        "list_separator": [{"rhs": ", "}],
        "list_last_separator": [{"rhs": " and "}]
    }
""";

# a comment between actions
action Walk {
    template :: "walk to {to}";
    feedback :: "#walk.feedback#";
    grammar :: """
        {
            # lines of an action's grammar that start with a hash are left out
            "walk.feedback": [{"rhs": "You walk to the {to.name}. #where#"}]
        }
    """;
}
action Take {
    template :: "take {i}";
    feedback :: "You take the {i.name}.";
}
action Drop {
    template :: "drop {i}";
    feedback :: "You drop the {i.name or i.id}.";
}
'''


def _write_game(path: Path, domain: str = DOMAIN, problem: str = PROBLEM, grammar: str = GRAMMAR) -> str:
    path.mkdir(parents=True, exist_ok=True)
    game = path / "game.tw-pddl"
    game.write_text(json.dumps({"pddl_domain": domain, "pddl_problem": problem, "grammar": grammar, "solvable": True}))
    return str(game)


# --- readers ---------------------------------------------------------------------------------------------------


def test_pddl_is_read_like_the_planner_reads_it():
    assert parse_sexpr("(A (b ?X) ; (ignored\n c)") == ["a", ["b", "?x"], "c"]
    # a comma stays part of the type's name, so such a variable ranges over nothing
    assert typed_list(["?l", "-", "location,", "?r", "-", "receptacle"]) == [("?l", "location,"), ("?r", "receptacle")]
    domain = parse_domain(DOMAIN)
    assert [a.name for a in domain.actions] == ["walk", "take", "drop"]
    assert domain.types == (("agent", "object"), ("place", "object"), ("item", "object"))
    walk = domain.actions[0]
    assert walk.params == (("?a", "agent"), ("?from", "place"), ("?to", "place"))
    assert [(e.positive, e.pred) for e in walk.effects] == [(False, "at"), (True, "at")]  # the action cost is not an effect
    drop = domain.actions[2]
    assert drop.effects[2].forall == (("?q", "place"),) and drop.effects[2].condition == ("=", "?q", "?p")
    problem = parse_problem(PROBLEM)
    assert problem.init[0] == ("at", ("robot", "room_bar_1")) and len(problem.init) == 4  # the numeric value is dropped
    assert problem.goal[0] == "exists"


def test_grammar_text_is_read_into_symbols():
    assert parse_query("holds(a:agent, o:object) & not_inreceptacle(o:object, r:receptacle)") == (
        ("holds", (("a", "agent"), ("o", "object"))),
        ("not_inreceptacle", (("o", "object"), ("r", "receptacle"))),
    )
    symbols = parse_symbols("On the {r.name}, you see [{o.name | inreceptacle(o:object, r:receptacle)}]. #more#")
    assert isinstance(symbols[0], Text) and symbols[0].text == "On the "
    assert isinstance(symbols[1], Each) and symbols[1].query is None
    assert isinstance(symbols[3], ListOf) and symbols[3].each.query[0][0] == "inreceptacle"
    assert isinstance(symbols[-1], Tag) and symbols[-1].tag == "more"
    # reading stops at a character no symbol can start, as TextWorld's reader does
    assert [s.text for s in parse_symbols("a (b)} c")] == ["a (b)"]
    actions, rules = parse_grammar(GRAMMAR)
    assert set(actions) == {"walk", "take", "drop"} and "walk.feedback" in rules and "intro" in rules


def test_display_names_count_down_in_sorted_id_order():
    names = display_names(["mug_bar_2", "mug_bar_1", "mug_bar_3", "sink_bar_1_bar_sinkbasin", "agent1"])
    assert names["mug_bar_1"] == "mug 3" and names["mug_bar_3"] == "mug 1"
    assert names["sink_bar_1_bar_sinkbasin"] == "sinkbasin 1" and names["agent1"] == "agent1 "


# --- the engine on a made-up game ------------------------------------------------------------------------------


def test_a_made_up_game_plays_to_a_win(tmp_path: Path):
    engine = NativeEngine(_write_game(tmp_path / "toy"), max_steps=20)
    start = engine.reset()
    # ids number down in sorted order (room_bar_1 is "room 2") and lists follow the sorted ids
    assert start.observation == "Welcome! In the room 2 you see a ball 2 and a ball 1."
    # walking to where one stands would change nothing, so the planner never offers it
    assert start.admissible == ("take ball 1", "take ball 2", "walk to room 1")
    assert engine.step("take ball 1").observation == "You take the ball 1."
    assert engine.step("take ball 2").observation == "Nothing happens."  # one thing at a time
    step = engine.step("walk to room 1")
    assert step.observation == "You walk to the room 1. The room is empty." and not step.won
    step = engine.step("drop ball 1")
    assert step.observation == "You drop the ball 1." and step.won and step.done


@pytest.mark.parametrize(
    "part, old, new, words",
    [
        ("pddl_domain", "(:action Walk", "(:derived (x) (y)) (:action Walk", "unknown domain section :derived"),
        ("pddl_domain", "(increase (total-cost) 1)", "(increase (fuel ?a) 1)", "numeric effect"),
        ("grammar", "{i.name or i.id}", "{i.name.upper()}", "expression form"),
        ("pddl_problem", "(:init", "(:init (at Ghost Room_bar_1)", "undeclared object ghost"),
    ],
)
def test_an_unknown_construct_names_the_game(tmp_path: Path, part: str, old: str, new: str, words: str):
    texts = {"domain": DOMAIN, "problem": PROBLEM, "grammar": GRAMMAR}
    key = {"pddl_domain": "domain", "pddl_problem": "problem", "grammar": "grammar"}[part]
    assert old in texts[key]
    texts[key] = texts[key].replace(old, new)
    game = _write_game(tmp_path / "odd", **texts)
    with pytest.raises(EvohError, match=words) as caught:
        NativeEngine(game, max_steps=5).reset()
    assert game in caught.value.message and "TextWorld" in caught.value.hint


def _walk(game_file: str, seed: int, length: int = 25) -> list:
    rng = random.Random(seed)
    engine = NativeEngine(game_file, max_steps=10 * length)
    answers = [engine.reset()]
    for _ in range(length):
        if answers[-1].done:
            break
        answers.append(engine.step(rng.choice(answers[-1].admissible)))
    return answers


def test_threads_playing_different_games_answer_as_sequential_play(alfworld_data: Path):
    from evoh.env.games import load_tasks

    games = [t.game_file for t in load_tasks("valid_unseen", alfworld_data, limit=6, spread=True)]
    expected = [_walk(g, seed) for seed, g in enumerate(games)]
    got: dict[int, list] = {}
    barrier = threading.Barrier(len(games))

    def play(i: int) -> None:
        barrier.wait()
        got[i] = _walk(games[i], i)

    threads = [threading.Thread(target=play, args=(i,)) for i in range(len(games))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(games))] == expected


# --- the same answers as TextWorld -----------------------------------------------------------------------------


def _compare(game_file: str, seed: int, length: int, prefer: tuple[str, ...] = ()) -> list[str]:
    """Play both engines in lockstep on seeded random admissible commands (and a few bad ones), those starting with
    a ``prefer`` verb chosen more often where there are any; the commands compared."""
    from evoh.env.engine import GameEngine

    rng, played = random.Random(seed), []
    textworld, native = GameEngine(game_file, max_steps=200), NativeEngine(game_file, max_steps=200)
    try:
        a, b = textworld.reset(), native.reset()
        assert a == b
        for i in range(length):
            if a.done:
                break
            preferred = [c for c in a.admissible if c.split()[0] in prefer]
            command = rng.choice(preferred if preferred and rng.random() < 0.6 else a.admissible)
            if i % 4 == 3:
                command = rng.choice(["fly to the moon", "", "help", command.upper(), command + " now"])
            a, b = textworld.step(command), native.step(command)
            assert a == b, (game_file, i, command)
            played.append(command)
        return played
    finally:
        textworld.close()


def _one_per_type(alfworld_data: Path, split: str) -> list:
    from evoh.env.games import load_tasks

    tasks = load_tasks(split, alfworld_data)
    return [next(t for t in tasks if t.task_type == kind) for kind in TASK_TYPES]


@pytest.mark.engine
def test_native_answers_as_textworld_on_every_task_type(alfworld_data: Path):
    """A sample for every run; benchmarks/native_vs_textworld.py compares whole splits (benchmarks/README.md)."""
    tasks = _one_per_type(alfworld_data, "valid_seen")[::2] + _one_per_type(alfworld_data, "valid_unseen")[1::2]
    assert sorted(t.task_type for t in tasks) == sorted(TASK_TYPES)
    for seed, task in enumerate(tasks):
        assert len(_compare(task.game_file, seed, 10)) == 10


@pytest.mark.engine
def test_the_2_1_2_grammar_plays_as_textworld(alfworld_data: Path, tmp_path: Path):
    """alfworld 0.4's downloads speak 2.1.2 (`move X to Y`, `help`): a real 2.1.1 game given alfworld's own 2.1.2
    domain and grammar, with its goal, answers the same on both engines, moves included."""
    import re

    import alfworld

    from evoh.env.games import load_tasks

    logic = Path(alfworld.__file__).parent / "data"
    task = load_tasks("valid_seen", alfworld_data, limit=1)[0]
    game = json.loads(Path(task.game_file).read_text())
    goal = re.search(r'"rhs": "Your task is to: (.*?)\."', game["grammar"]).group(1)
    variant = {
        "pddl_domain": (logic / "alfred.pddl").read_text(),
        "pddl_problem": game["pddl_problem"],
        "grammar": (logic / "alfred.twl2").read_text().replace("UNKNOWN GOAL", goal),
        "solvable": True,
    }
    assert "(:action help" in variant["pddl_domain"] and "move {o} to {r}" in variant["grammar"]
    game_file = tmp_path / "game.tw-pddl"
    game_file.write_text(json.dumps(variant))
    played = _compare(str(game_file), 1, 60, prefer=("take", "move", "open", "examine"))
    assert any(c.startswith("move ") for c in played)
