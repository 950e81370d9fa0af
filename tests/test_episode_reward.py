"""The episode loop's budget rules and records, and the cost-aware reward's components."""

from __future__ import annotations

import math

import pytest

from evoh.config import RewardConfig
from evoh.env.types import Step, Task
from evoh.harness.episode import Episode, EpisodeSettings
from evoh.harness.experience import Bank, Entry
from evoh.harness.progress import MAX_SUBGOALS
from evoh.harness.prompts import HarnessModules
from evoh.harness.reward import REWARD_PARTS, diversity, diversity_weight, reward
from evoh.records import EpisodeRecord

TASK = Task("valid_seen/x/trial_1", "valid_seen", "pick_and_place_simple", "/nowhere/game.tw-pddl", "2.1.1")
START = Step(
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see "
    "a desk 1, a drawer 1, and a shelf 1.\n\nYour task is to: put some pen on shelf.",
    ("go to desk 1", "go to drawer 1", "go to shelf 1", "inventory", "look"),
    False,
    False,
    0,
)


def arrive(steps: int, won: bool = False) -> Step:
    return Step("You arrive at loc 3. On the desk 1, you see a pen 1.", ("take pen 1 from desk 1", "look"), won, won, steps)


def episode(**settings) -> Episode:
    ep = Episode("k", TASK, EpisodeSettings(**settings), Bank())
    ep.start(START)
    return ep


PEN_TO_SHELF_SKILL = "pick task: find the object (open closed receptacles), take the object, then put the object in the target"


def play(ep: Episode, moves: list[tuple[str, str, tuple[str, ...]]], first_step: int) -> None:
    """Plays (action, observation, admissible commands) moves that neither win nor end the episode."""
    for n, (action, text, admissible) in enumerate(moves, first_step):
        ep.act(f"<action>{action}</action>")
        ep.observe(Step(text, admissible, False, False, n))


def take_the_pen_to_the_shelf(ep: Episode, steps: int) -> None:
    """From the desk, after ``steps`` steps: take pen 1 and put it on the shelf, which wins."""
    play(
        ep,
        [
            ("take pen 1 from desk 1", "You pick up the pen 1 from the desk 1.", ("go to shelf 1",)),
            ("go to shelf 1", "You arrive at loc 4. On the shelf 1, you see nothing.", ("put pen 1 in/on shelf 1",)),
        ],
        steps + 1,
    )
    ep.act("<action>put pen 1 in/on shelf 1</action>")
    ep.observe(Step("You put the pen 1 in/on the shelf 1.", ("look",), True, True, steps + 3))


def test_free_meta_actions_do_not_spend_the_budget_until_the_cap():
    ep = episode(max_steps=3, free_meta_cap=2)
    assert ep.act("<action>commit [find pen]</action>") is None
    assert ep.act("<action>track [pen]</action>") is None
    assert (ep.spent, ep.turns) == (0, 2)
    assert ep.act("<action>note [pens live on desks]</action>") is None  # third: over the cap, fails
    assert ep.meta["note"] == {"attempted": 1, "failed": 1}
    assert "no free harness actions left" in ep.last_result
    assert ep.act("<action>go to desk 1</action>") == "go to desk 1"
    ep.observe(arrive(1))
    assert (ep.spent, ep.env_steps) == (1, 1) and not ep.done


def test_hard_stop_at_max_steps_plus_cap_turns():
    ep = episode(max_steps=2, free_meta_cap=3)
    for _ in range(5):
        assert not ep.done
        ep.act("<action>track [pen]</action>")
    assert ep.done and ep.spent == 0 and ep.turns == 5


def test_charged_meta_actions_spend_a_step_each():
    ep = episode(max_steps=2, charge_meta_actions=True)
    ep.act("<action>recall [where to find pen]</action>")
    assert ep.spent == 1 and not ep.done
    ep.act("<action>commit [find pen]</action>")
    assert ep.done and ep.env_steps == 0


def test_invalid_and_malformed_turns_spend_a_step_and_leave_the_world_alone():
    ep = episode(max_steps=10)
    assert ep.act("<action>fly away</action>") is None
    assert ep.act("no tags at all") is None
    assert ep.act(None) is None
    assert (ep.invalid_actions, ep.spent, ep.env_steps) == (3, 3, 0)
    assert ep.observation == START.observation
    assert [t["outcome"] for t in ep.trace] == ["invalid", "malformed", "malformed"]
    assert ep.history[-1].endswith("[malformed]")


def test_switched_off_modules_make_their_verbs_fail():
    ep = episode(modules=HarnessModules(belief=False, plan=True, experience=False))
    ep.act("<action>track [pen]</action>")
    ep.act("<action>recall [mistakes]</action>")
    ep.act("<action>commit [find pen]</action>")
    assert ep.meta["track"]["failed"] == 1 and ep.meta["recall"]["failed"] == 1 and ep.meta["commit"]["executed"] == 1
    assert "switched off" in ep.trace[0]["result"]
    assert "track [" not in ep.system and "commit [" in ep.system
    env_only = episode(mode="env_only")
    env_only.act("<action>commit [find pen]</action>")
    assert env_only.meta["commit"]["failed"] == 1 and "harness" not in env_only.system


def test_prompts_carry_the_views_of_each_mode():
    inline = episode()
    inline.act("<action>commit [find pen]</action>")
    text = inline.view().user
    assert "Objective: put some pen on shelf." in text and "Plan:\n[ ] find pen" in text
    assert "Harness result: commit [find pen]: added 'find pen' to the plan." in text
    assert "Previous actions: 1. commit [find pen] [done]" in text
    assert text.endswith("Admissible commands: go to desk 1, go to drawer 1, go to shelf 1, inventory, look")
    always = episode(mode="always_on").view().user
    assert "Belief:\nat: start" in always and "[ ] find pen" in always and "Experience:" in always
    bare = episode(mode="env_only").view().user
    assert "Plan:" not in bare and "Belief:" not in bare


def test_a_brief_system_prompt_keeps_what_varies_between_settings():
    full = episode(charge_meta_actions=True)
    brief = episode(charge_meta_actions=True, system_style="brief")
    assert "admissible commands, copied exactly" in full.system and "admissible" not in brief.system
    assert len(brief.system) < len(full.system) / 5 and brief.view().user == full.view().user
    assert brief.system.endswith("Harness actions: track, commit, recall, note (each costs one step).")
    assert episode(system_style="brief").system.endswith("(free).")
    assert episode(system_style="brief", modules=HarnessModules(belief=False)).system.endswith("commit, recall, note (free).")
    assert episode(system_style="brief", mode="always_on").system.endswith("Panels: belief, plan, experience.")
    assert "Harness" not in episode(system_style="brief", mode="env_only").system
    assert brief.record()["protocol"]["system_prompt"] == "brief" and full.record()["protocol"]["system_prompt"] == "full"


def test_the_record_holds_what_design_md_lists():
    ep = episode()
    ep.act("<think>Desks hold pens.</think><action>go to desk 1</action>")
    ep.observe(arrive(1))
    take_the_pen_to_the_shelf(ep, 1)
    record = ep.record()
    assert record["won"] and ep.done and record["env_steps"] == 4 and record["turns"] == 4
    assert record["found_at"] == {"pen": ["desk"]}
    assert record["procedure"] == PEN_TO_SHELF_SKILL
    assert record["belief"]["objects"]["pen 1"]["where"] == "shelf 1"
    assert record["protocol"]["parser"] == "turn/1" and record["protocol"]["prompt"] == "prompt/1"
    assert [t["action"] for t in record["trace"]][0] == "go to desk 1" and record["trace"][-1]["outcome"] == "won"
    assert set(record["meta"]) == {"track", "commit", "recall", "note"}


def test_a_skill_learned_from_a_won_episode_leaves_out_its_detours_through_other_objects():
    ep = episode()
    play(
        ep,
        [
            (
                "go to desk 1",
                "You arrive at loc 3. On the desk 1, you see a pen 1, and a pencil 2.",
                ("take pen 1 from desk 1", "take pencil 2 from desk 1"),
            ),
            ("take pencil 2 from desk 1", "You pick up the pencil 2 from the desk 1.", ("put pencil 2 in/on desk 1",)),
            ("put pencil 2 in/on desk 1", "You put the pencil 2 in/on the desk 1.", ("take pen 1 from desk 1",)),
        ],
        1,
    )
    take_the_pen_to_the_shelf(ep, 3)
    record = ep.record()
    assert record["won"] and record["found_at"] == {"pen": ["desk"], "pencil": ["desk"]}
    assert record["procedure"] == PEN_TO_SHELF_SKILL


def test_a_skill_leaves_out_the_objects_own_detours_a_set_down_it_undid_and_a_cooling_the_task_did_not_ask_for():
    ep = episode()
    ep.act("<action>go to desk 1</action>")
    ep.observe(arrive(1))
    play(
        ep,
        [
            (
                "take pen 1 from desk 1",
                "You pick up the pen 1 from the desk 1.",
                ("cool pen 1 with fridge 1", "put pen 1 in/on desk 1"),
            ),
            ("cool pen 1 with fridge 1", "You cool the pen 1 using the fridge 1.", ("put pen 1 in/on desk 1",)),
            ("put pen 1 in/on desk 1", "You put the pen 1 in/on the desk 1.", ("take pen 1 from desk 1",)),
        ],
        2,
    )
    take_the_pen_to_the_shelf(ep, 4)
    record = ep.record()
    assert record["won"] and record["env_steps"] == 7
    assert record["procedure"] == PEN_TO_SHELF_SKILL


def test_a_walk_back_to_a_place_where_nothing_changed_is_a_revisit_and_a_return_after_a_change_is_not():
    ep = episode(max_steps=30)
    desk = ("go to desk 1", "You arrive at loc 3. On the desk 1, you see a pen 1.", ("go to drawer 1", "take pen 1 from desk 1"))
    drawer = ("go to drawer 1", "You arrive at loc 1. The drawer 1 is closed.", ("go to desk 1",))
    play(ep, [desk, drawer, desk, drawer, desk], 1)  # a walk between two places: nothing back to back
    walked = ep.record()
    assert walked["repeats"] == 0 and walked["revisits"] == 3
    play(
        ep,
        [
            ("take pen 1 from desk 1", "You pick up the pen 1 from the desk 1.", ("go to drawer 1",)),
            drawer,
            ("go to desk 1", "You arrive at loc 3. On the desk 1, you see nothing.", ("go to drawer 1",)),
        ],
        6,
    )
    final = ep.record()
    assert final["revisits"] == 4  # the drawer again; the desk looks different without the pen
    counts = {k: final[k] for k in ("repeats", "revisits")}
    paper, seen = RewardConfig(spam_cap=50), RewardConfig(spam_cap=50, spam_counts="seen_before")
    assert reward(record(won=False, **counts), paper)["spam"] == 0
    assert reward(record(won=False, **counts), seen)["spam"] == pytest.approx(-0.4)


def test_an_engine_error_ends_the_episode_with_the_error_recorded():
    ep = episode()
    ep.act("<action>go to desk 1</action>")
    ep.observe(Step("", (), False, True, 0, valid=False, error="engine worker died"))
    assert ep.done and ep.record()["error"] == "engine worker died"


def record(**overrides) -> EpisodeRecord:
    base = {
        "schema": "episode/1",
        "task": {"id": "train/g/trial", "task_type": "pick_and_place_simple", "grammar": "2.1.1"},
        "objective": "put a pen on the shelf",
        "won": True,
        "turns": 20,
        "env_steps": 20,
        "protocol": {"max_steps": 50},
        "repeats": 0,
        "invalid_actions": 0,
        "meta": {v: {"executed": 0} for v in ("track", "commit", "recall", "note")},
        "meta_actions": 0,
        "idle_meta": {v: 0 for v in ("track", "commit", "recall", "note")},
        "system": "",
        "trace": [],
    }
    return EpisodeRecord.from_dict({**base, **overrides})


def test_reward_components():
    weights = RewardConfig()
    won = reward(record(), weights, update=150)
    assert won["success"] == 10 and won["efficiency"] == pytest.approx(30 / 50) and won["diversity"] == 0
    assert won["total"] == pytest.approx(10.6)
    lost = reward(record(won=False, repeats=14, invalid_actions=3), weights)
    assert lost["success"] == 0 and lost["efficiency"] == 0
    assert lost["spam"] == pytest.approx(-1.0) and lost["invalid"] == pytest.approx(-0.3)
    meta = {"track": {"executed": 2}, "commit": {"executed": 1}, "recall": {"executed": 0}, "note": {"executed": 0}}
    assert diversity(meta, "bpe_coverage") == 0.5
    assert diversity(meta, "verb_ratio") == pytest.approx(2 / 3)
    assert reward(record(meta=meta), weights, update=0)["diversity"] == pytest.approx(0.5)
    assert reward(record(), weights)["version"] == "reward/1"
    parts = {k: v for k, v in lost.items() if k not in ("version", "total", "lambda_div", "weights")}
    assert set(parts) == set(REWARD_PARTS) and lost["total"] == pytest.approx(sum(parts.values()))


def test_harness_calls_that_change_nothing_are_counted_and_cost_only_when_weighted():
    ep = episode(max_steps=60, charge_meta_actions=True)
    calls = [
        ("commit [find pen]", False),  # a new subgoal
        ("commit [find pen]", False),  # marks it done
        ("commit [find pen]", True),  # already done: the plan is as it was
        ("note [pens live on desks]", False),
        ("note [pens live on desks]", True),  # the same note again
        ("track [pen]", False),
        ("track [pen]", True),  # the same question, the same answer
        ("track [desk]", False),  # another question
    ]
    calls += [(f"commit [find pen {i}]", False) for i in range(MAX_SUBGOALS - 1)]  # fills the plan
    calls += [("commit [find a key]", True)]  # refused: the plan is full
    for action, idle in calls:
        before = sum(ep.idle_meta.values())
        assert ep.act(f"<action>{action}</action>") is None
        assert sum(ep.idle_meta.values()) - before == idle, action
    assert ep.act("<action>go to desk 1</action>") == "go to desk 1"
    ep.observe(arrive(1))
    assert ep.act("<action>track [pen]</action>") is None and ep.idle_meta["track"] == 1  # the world moved: a new answer
    bank = Bank([Entry("note-000", "notes", "pens live on desks"), Entry("note-001", "notes", "keys hide in drawers")])
    for query in ("pens desks", "keys drawers"):
        ep.bank = bank
        ep.act(f"<action>recall [{query}]</action>")
        shown = [e.id for e in ep.recalled]
        assert ep.act(f"<action>recall [{query}]</action>") is None and [e.id for e in ep.recalled] == shown
    rec = ep.typed_record()
    assert rec.idle_meta == {"track": 1, "commit": 2, "recall": 2, "note": 1}  # each recall's second call
    assert rec.meta["commit"]["failed"] == 1
    assert reward(rec, RewardConfig())["idle_meta"] == 0  # the paper's reward
    charged = reward(rec, RewardConfig(idle_meta=0.25))  # six idle calls
    assert charged["idle_meta"] == pytest.approx(-1.5)
    assert charged["total"] == pytest.approx(reward(rec, RewardConfig())["total"] - 1.5)


def test_diversity_weight_anneals_on_a_cosine():
    weights = RewardConfig(diversity_max=1.0, diversity_horizon=100)
    assert diversity_weight(0, weights) == 1.0
    assert diversity_weight(50, weights) == pytest.approx(0.5)
    assert diversity_weight(25, weights) == pytest.approx((1 + math.cos(math.pi / 4)) / 2)
    assert diversity_weight(100, weights) == pytest.approx(0.0) and diversity_weight(400, weights) == pytest.approx(0.0)
