"""The turn parser: well-formed turns, every malformed shape, and a fuzz test that it never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
@given(st.lists(st.sampled_from(["<think>", "</think>", "<action>", "</action>", "[", "]", "track", "look", " ", "x"]), max_size=40))
def test_tag_soup_parses_without_raising(parts: list[str]):
    turn = parse_turn("".join(parts), ADMISSIBLE)
    assert isinstance(turn, Turn)
