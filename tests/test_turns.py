"""The turn parser: well-formed turns, every malformed shape, and a fuzz test that it never raises."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from evoh.harness import turns
from evoh.harness.turns import PARSER_VERSION, Turn, format_turn, parse_turn

ADMISSIBLE = ("go to desk 1", "take apple 1 from desk 1", "look")


def test_environment_actions_match_admissible_commands_exactly():
    turn = parse_turn("<think>The apple is here.</think><action>  Take Apple 1 from   desk 1 </action>", ADMISSIBLE)
    assert (turn.kind, turn.action, turn.valid, turn.think) == ("env", "take apple 1 from desk 1", True, "The apple is here.")
    wrong = parse_turn("<think>x</think><action>take the apple</action>", ADMISSIBLE)
    assert wrong.kind == "env" and not wrong.valid and wrong.reason == "not an admissible command"


def test_meta_actions_need_bracketed_arguments():
    assert parse_turn("<action>recall [where to find apple]</action>", ADMISSIBLE) == Turn(
        "meta", "recall [where to find apple]", "", "recall", "where to find apple", True
    )
    assert parse_turn("<action>COMMIT [Heat Apple]</action>").argument == "heat apple"
    missing = parse_turn("<action>track apple</action>")
    assert missing.kind == "meta" and not missing.valid and "square brackets" in missing.reason
    empty = parse_turn("<action>note [  ]</action>")
    assert not empty.valid and "needs an argument" in empty.reason


def test_malformed_turns_say_why():
    cases = {
        "just text": "no <action>",
        "<think>hm</think><action>look": "unclosed <action>",
        "<action>look</action><action>look</action>": "2 actions",
        "<action>   </action>": "empty action",
        "<think>a</think><think>b</think><action>look</action>": "more than one <think>",
    }
    for text, reason in cases.items():
        turn = parse_turn(text, ADMISSIBLE)
        assert turn.kind == "malformed" and not turn.valid and reason in turn.reason, text
    assert parse_turn(None).kind == "malformed"
    assert parse_turn(b"<action>look</action>").kind == "malformed"


def test_format_and_parse_round_trip():
    text = format_turn("I will look.", "look")
    assert text == "<think>I will look.</think><action>look</action>"
    assert parse_turn(text, ADMISSIBLE).valid
    assert PARSER_VERSION == "turn/1"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=300), st.lists(st.text(max_size=30), max_size=5))
def test_any_text_parses_without_raising(text: str, admissible: list[str]):
    turn = parse_turn(text, admissible)
    assert turn.kind in ("env", "meta", "malformed")
    assert turn.valid or turn.reason


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["<think>", "</think>", "<action>", "</action>", "[", "]", "track", "look", " ", "x"]), max_size=40)
)
def test_tag_soup_parses_without_raising(parts: list[str]):
    turn = parse_turn("".join(parts), ADMISSIBLE)
    assert isinstance(turn, Turn)


# the patterns parse_turn used before it found tags one at a time: the reference its blocks must equal
_OLD_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_OLD_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
TAG_PARTS = [
    "<think>",
    "</think>",
    "<action>",
    "</action>",
    "<ACTION>",
    "</Think>",
    "<act\u0131on>",
    "[",
    "]",
    "track",
    "look",
    " ",
    "\n",
    "x",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(TAG_PARTS) | st.text(max_size=5), max_size=40))
def test_tags_are_found_as_the_regular_expressions_found_them(parts: list[str]):
    text = "".join(parts)
    assert turns._blocks(text, turns._OPEN_ACTION, turns._CLOSE_ACTION) == _OLD_ACTION.findall(text)
    assert turns._blocks(text, turns._OPEN_THINK, turns._CLOSE_THINK) == _OLD_THINK.findall(text)


def test_representative_turns_parse_as_before():
    admissible = ("go to desk 1", "take apple 1 from desk 1", "look", "track the apple")
    expected = {
        "<think>The apple is on the desk.</think><action>take apple 1 from desk 1</action>": Turn(
            "env", "take apple 1 from desk 1", "The apple is on the desk.", valid=True
        ),
        "<think>\nfirst\nthe desk\n</think>\n<action>\nGo To  Desk 1\n</action>\n": Turn(
            "env", "go to desk 1", "first\nthe desk", valid=True
        ),
        "<THINK>upper</THINK><Action>look</Action>": Turn("env", "look", "upper", valid=True),
        "<think>x</think><action>track [Apple 1]</action>": Turn("meta", "track [apple 1]", "x", "track", "apple 1", True),
        "<action>track the apple</action>": Turn("env", "track the apple", valid=True),
        "<think>a</think><action>open the fridge</action>": Turn(
            "env", "open the fridge", "a", reason="not an admissible command"
        ),
        "<action>look</action></action>": Turn("env", "look", valid=True),
        "<action><action>look</action>": Turn("env", "<action>look", reason="not an admissible command"),
        "<think><think>a</think></think><action>look</action>": Turn("env", "look", "<think>a", valid=True),
        "<think>no close<action>look</action>": Turn("env", "look", valid=True),
        "<action>look</action><think>late</think>": Turn("env", "look", "late", valid=True),
        "<think>a</think><action>look": Turn("malformed", think="a", reason="unclosed <action> tag"),
        "<action>look</action><action>look</action>": Turn("malformed", reason="2 actions in one turn (exactly one allowed)"),
    }
    for text, turn in expected.items():
        assert parse_turn(text, admissible) == turn, text


def test_repeated_unclosed_tags_parse_in_linear_time():
    for unit in ("<action>", "<think>", "<action><think>", "<think></think><action>", "</action><action>x"):
        text = unit * (1_000_000 // len(unit))
        started = time.perf_counter()
        parse_turn(text, ADMISSIBLE)
        assert time.perf_counter() - started < 1.0, unit  # the regular expressions took minutes here
