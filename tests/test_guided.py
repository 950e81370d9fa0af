"""Guided decoding: the turn grammar as a prefix test, the token masks it yields, and a random model on real games
whose every guided turn parses, where unguided it writes garbage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from evoh.harness.turns import parse_turn
from evoh.policy.guided import ActionGrammar, response_state
from evoh.workspace import read_jsonl
from tests.cli_runner import evoh

COMMANDS = ("go to cabinet 1", "go to cabinet 2", "take mug 1 from desk 1", "look")
GRAMMAR = ActionGrammar(COMMANDS, ("track", "recall"))


def test_the_grammar_accepts_exactly_the_prefixes_of_allowed_actions():
    for text in (
        "<",
        "<act",
        "<action>",
        "<action>go to cab",
        "<action>go to cabinet 2</act",
        "<action>look</action>",
        "<action>rec",
        "<action>recall [",
        "<action>recall [where to find mug",
        "<action>recall [mug]</",
    ):
        assert GRAMMAR.viable(text), text
    for text in (
        "<b",
        "<action>go to cabinet 3",
        "<action>Look",
        "<action>look</action>x",
        "<action>commit [",
        "<action>recall []",
        "<action>recall [mug]x",
        "<action>recall [a\nb",
        "<action>recall [a<b",
        "<action>recall [" + "x" * 201,
    ):
        assert not GRAMMAR.viable(text), text
    assert GRAMMAR.complete("<action>look</action>") and GRAMMAR.complete("<action>track [mug]</action>")
    assert not GRAMMAR.complete("<action>track [mug]") and not GRAMMAR.complete("<action>look")
    assert not ActionGrammar(COMMANDS, ()).viable("<action>recall [")  # env_only: no verbs at all


def test_the_action_starts_at_the_first_angle_bracket_outside_the_think_tags():
    assert response_state("<think>I look.</think>\n") == ("I look.\n", None)
    assert response_state("<think>I look.</think>\n<action>lo") == ("I look.\n", "<action>lo")


@pytest.fixture(scope="module")
def vocabulary(tiny_model: Path):
    from transformers import AutoTokenizer

    from evoh.policy.guided import Vocabulary

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    stop = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    return Vocabulary(tokenizer, len(tokenizer) + 7, stop), stop  # a model may have more rows than tokens


def _allowed(vocabulary, generated: str, closing: bool = False) -> set[str] | None:
    from evoh.policy.guided import allowed_tokens, openers_for

    step = allowed_tokens(vocabulary, GRAMMAR, generated, openers_for(vocabulary, GRAMMAR), closing)
    if step is None:
        return None
    return {vocabulary.texts[i] for i in vocabulary.allowed_matrix([step])[0].nonzero().flatten().tolist()}


def test_token_masks_follow_the_grammar(vocabulary):
    vocab, stop = vocabulary
    thought = _allowed(vocab, "<think>I will")
    assert "<" in thought and " go" in thought and "<think>" not in thought  # a second think block is never allowed
    assert all("<" not in t for t in thought - {"<", " <", "><", "</think>"})
    assert not {vocab.texts[i] for i in stop} & thought  # the response cannot end before its action
    after_open = _allowed(vocab, "<think>x</think><action>")
    assert after_open and all(
        any(f.startswith("<action>" + t) for f in GRAMMAR.fixed + GRAMMAR.heads) or t.startswith("recall") for t in after_open
    )
    assert {t[0] for t in after_open} == {"g", "l", "t", "r"}  # go, look, take, track, recall; never commit
    assert _allowed(vocab, "<action>go to cabinet") <= {" ", " 1", " 2"} and " 1" in _allowed(vocab, "<action>go to cabinet")
    assert "]" not in _allowed(vocab, "<action>recall [")  # an argument needs a word before it closes
    assert "]" in _allowed(vocab, "<action>recall [mug") and " mug" in _allowed(vocab, "<action>recall [where to find")
    assert _allowed(vocab, "<action>look</action>") is None  # complete: nothing more to guide
    assert _allowed(vocab, "<think>I will", closing=True) == {"<"}  # out of budget: the action begins now
    # out of budget, everything is written the shortest way: the longest token that fits, closing an argument
    assert _allowed(vocab, "<action>recall [mug", closing=True) == {vocab.texts[i] for i in vocab.longest_prefix("]</action>")}
    shortest = _allowed(vocab, "<action>go to cab", closing=True)
    assert len(shortest) == 1 and len(shortest.pop()) == max(len(t) for t in _allowed(vocab, "<action>go to cab"))
    last_word = _allowed(vocab, "<action>recall [", closing=True)  # an empty argument gets one word even then
    assert "mug" in last_word and "]" not in last_word and " " not in last_word


def test_the_allowed_matrix_gives_each_position_its_own_set(vocabulary):
    from evoh.policy.guided import Allowed

    vocab, _ = vocabulary
    thought = vocab.masks[vocab.mask_rows["thought"]]
    opener, plain = vocab.texts.index("<"), int(thought.nonzero()[0])
    matrix = vocab.allowed_matrix([None, Allowed(None, [5, 7]), Allowed("thought", [opener], [plain]), Allowed("word", [])])
    assert matrix.shape == (4, len(vocab.texts)) and matrix[0].all()  # nothing ruled out
    assert matrix[1].nonzero().flatten().tolist() == [5, 7]
    expected = thought.clone()
    expected[opener], expected[plain] = True, False
    assert torch.equal(matrix[2], expected) and not thought[opener] and thought[plain]
    assert torch.equal(matrix[3], vocab.masks[vocab.mask_rows["word"]])


def test_guided_samples_keep_what_guidance_allowed_at_each_token(tiny_model: Path):
    from evoh.config import ModelConfig
    from evoh.policy.local import LocalPolicy

    policy = LocalPolicy(ModelConfig(model=str(tiny_model), max_tokens=20, guided=True), keep_tokens=True)  # a tight budget
    prompts = ["<|im_start|>user\nObjective: put a mug on desk.<|im_end|>\n<|im_start|>assistant\n"] * 2
    answers = policy.complete(prompts, [GRAMMAR, GRAMMAR])
    for answer in answers:
        assert parse_turn(answer.text, COMMANDS).kind != "malformed", answer.text
        produced, choices = answer.tokens.completion, answer.tokens.choices
        assert answer.tokens.prompt == policy.tokenizer(prompts[0], add_special_tokens=False)["input_ids"]
        assert choices and max(choices) < len(produced)
        allowed = policy.vocabulary.allowed_matrix(list(choices.values()))
        assert all(allowed[k, produced[at]] for k, at in enumerate(choices))  # every sampled token was allowed where it was
        assert choices[0].mask == "thought" and not allowed[0, list(policy.stop_ids)].any()  # free thought, which may not stop


def test_a_random_model_guided_on_real_games_writes_only_turns_that_parse(tiny_model: Path, alfworld_data: Path, tmp_path: Path):
    common = (
        "eval",
        "-w",
        str(tmp_path),
        "--policy",
        "local",
        "--model",
        str(tiny_model),
        "--split",
        "valid_seen",
        "--limit",
        "2",
        "--max-steps",
        "6",
        "--data",
        str(alfworld_data),
        "--set",
        "model.max_tokens=80",
        "--json",
    )
    free = evoh(*common, "--name", "free")
    guided = evoh(*common, "--name", "guided", "--set", "model.guided=true")
    assert free.exit_code == 0 and guided.exit_code == 0, guided.stderr
    assert json.loads(free.stdout)["invalid_rate"] > 0.5
    summary = json.loads(guided.stdout)
    assert summary["policy"]["sampling"]["guided"] is True and summary["invalid_rate"] == 0.0
    turns = [t for r in read_jsonl(tmp_path / "eval" / "guided" / "episodes.jsonl").records for t in r["trace"]]
    assert len(turns) >= 12
    for turn in turns:
        admissible = turn["user"].split("Admissible commands: ", 1)[1].split("\n", 1)[0].split(", ")
        parsed = parse_turn(turn["response"], admissible)
        assert parsed.kind != "malformed" and (parsed.kind == "meta" or parsed.valid), turn["response"]
    table = evoh(*common[:-1], "--name", "guided", "--set", "model.guided=true")  # resumed, and the title says how it decoded
    assert table.exit_code == 0 and "greedy, guided" in table.stdout
