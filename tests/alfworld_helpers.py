"""Test helpers that read games: the data directory, planner walkthroughs, and 2.1.2 copies of 2.1.1 games."""

from __future__ import annotations

import json
import os
import shutil
from functools import cache
from pathlib import Path

import pytest


def require_alfworld_data() -> Path:
    value = os.environ.get("ALFWORLD_DATA", "")
    if value and (Path(value) / "json_2.1.1").is_dir():
        return Path(value).resolve()
    message = f"ALFWORLD_DATA={value!r} does not hold json_2.1.1/: set it to ../shared/alfworld"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@cache
def planner_walkthrough(game_file: str) -> tuple[str, ...]:
    """A winning command sequence computed by TextWorld's planner from the game's own PDDL (tests only:
    evoh's agents never see it)."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    env = textworld.start(game_file, textworld.EnvInfos(policy_commands=True), wrappers=[AlfredDemangler(), AlfredInfos])
    try:
        return tuple(env.reset()["policy_commands"])
    finally:
        env.close()


# The documented differences between the 2.1.1 and 2.1.2 grammars (see ../shared/alfworld/README.md)
_GRAMMAR_CHANGES = [
    ('"You arrive at {lend.name}. #examineReceptacle.feedback#"', '"You arrive at {r.name}. #examineReceptacle.feedback#"'),
    ('"You put the {o.name} in/on the {r.name}."', '"You move the {o.name} to the {r.name}."'),
    ('template :: "put {o} in/on {r}";', 'template :: "move {o} to {r}";'),
]
# The feedback line ends in a backslash: the grammar still gets it as one line, since a JSON string cannot hold a line break.
_HELP_GRAMMAR = '''
action help {
    template :: "help";
    feedback :: "#help.feedback#";

    grammar :: """
        {
            "help.feedback": [
                {
                    "rhs": "Available commands: look, inventory, go to, open, close, take, move, \
examine, use, heat, clean, cool, slice."
                }
            ]
        }
    """;
}
'''
_HELP_ACTION = """
(:action help
    :parameters (?a - agent)
    :precondition
        ()
    :effect
        (and
            (checked ?a)
        )
)
"""


def make_2_1_2_copy(trial_dir: Path, dest: Path) -> Path:
    """Copy a 2.1.1 trial folder and rewrite its game to the 2.1.2 grammar; returns the new trial folder."""
    target = dest / trial_dir.parent.name / trial_dir.name
    target.mkdir(parents=True)
    shutil.copy(trial_dir / "traj_data.json", target / "traj_data.json")
    game = json.loads((trial_dir / "game.tw-pddl").read_text())
    grammar = game["grammar"]
    for old, new in _GRAMMAR_CHANGES:
        assert old in grammar, old
        grammar = grammar.replace(old, new)
    game["grammar"] = grammar.rstrip() + "\n" + _HELP_GRAMMAR
    domain = game["pddl_domain"].rstrip()
    assert domain.endswith(")")
    game["pddl_domain"] = domain[:-1] + _HELP_ACTION + ")\n"
    (target / "game.tw-pddl").write_text(json.dumps(game))
    return target
