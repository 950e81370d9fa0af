"""The turn grammar compiled by xgrammar against the hand-written guided decoder, token by token, on real MiniHouse
turns and two real tokenizers (evoh's tiny one and a SmolLM2-style one imported from GGUF): the same texts pass
and fail, and at every prefix both allow the same next tokens except where a difference is explained (see
``evoh.policy.turn_grammar``'s docstring); an unexplained one fails the test."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evoh.config import EnvConfig
from evoh.env.world import load_games, make_engine
from evoh.harness.turns import MAX_ARGUMENT_CHARS, META_VERBS
from evoh.policy.guided import THINK_TAGS, ActionGrammar, Vocabulary, allowed_tokens, openers_for, response_state
from tests.gguf_file import llama_gguf

xgr = pytest.importorskip("xgrammar")


@pytest.fixture(scope="module", params=["tiny", "tiny-alfworld", "gguf"])
def tokenizer(request, minihouse_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """evoh's tiny tokenizer trained on MiniHouse text, the one trained on ALFWorld's (where its games are here),
    and a SmolLM2-style llama GGUF's, imported as ``evoh model import`` does."""
    from transformers import AutoTokenizer

    if request.param == "tiny":
        return AutoTokenizer.from_pretrained(minihouse_model)
    if request.param == "tiny-alfworld":
        return AutoTokenizer.from_pretrained(request.getfixturevalue("tiny_model"))
    from evoh.models.gguf import import_gguf

    out = tmp_path_factory.mktemp("gguf")
    import_gguf(llama_gguf(minihouse_model, out), out / "imported")
    return AutoTokenizer.from_pretrained(out / "imported")


def turns(games: int = 3, steps: int = 4) -> list[ActionGrammar]:
    """Real turns: the admissible commands along a seeded random walk through MiniHouse games, with every verb."""
    rng, found = random.Random(0), []
    for task in load_games(EnvConfig(kind="minihouse"), "valid_seen")[:games]:
        engine = make_engine(task.game_file, 100)
        step = engine.reset()
        for _ in range(steps):
            found.append(ActionGrammar(step.admissible, META_VERBS))
            step = engine.step(rng.choice(step.admissible))
    return found


def responses(grammar: ActionGrammar) -> list[tuple[str, bool | None]]:
    """Texts the turn allows (True) and ones it rules out (False); None: a long argument, which xgrammar allows (it
    has no length bound) and the hand-written decoder does not let a model write (it closes the argument earlier)."""
    command, other = grammar.commands[0], grammar.commands[-1]
    long_ok, long_bad = "x" * MAX_ARGUMENT_CHARS, "x" * (MAX_ARGUMENT_CHARS + 1)
    return [
        (f"<think>I should {command}.</think>\n<action>{command}</action>", True),
        (f"</think>then <think>{other}<action>{other}</action>", True),
        ("plain thought <action>recall [where is the mug]</action>", True),
        (f"<action>track [  {long_ok[:-2]}]</action>", None),
        (f"<action>recall [{long_ok}]</action>", None),
        (f"<action>recall [{long_bad}]</action>", None),
        (f"<action>{command.upper()}</action>", False),
        (f"<action>{command.title()}</action>", False),
        (f"<think>a</think><think>b</think><action>{command}</action>", False),
        (f"<think>a</think></think><action>{command}</action>", False),
        (f"<action>{command}</action> and more", False),
        (f"<action>{command} 9</action>", False),
        ("<action>recall []</action>", False),
        ("<action>recall [   ]</action>", False),
        ("<action>recall [a\nb]</action>", False),
        ("<action>recall [a<b]</action>", False),
        ("<action>wish [x]</action>", False),
        ("a < b <action>look</action>", False),
    ]


class Pair:
    """The two decoders on one tokenizer: what each allows after a prefix of token ids."""

    def __init__(self, tokenizer) -> None:
        self.stop = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
        self.size = len(tokenizer)
        self.vocab = Vocabulary(tokenizer, self.size, self.stop)
        from evoh.policy.turn_grammar import TurnCompiler

        self.compiler = TurnCompiler(tokenizer, self.size, self.stop)
        self.bitmask = xgr.allocate_token_bitmask(1, self.size)

    def hand(self, grammar: ActionGrammar, openers: list[int], ids: list[int]) -> set[int] | None:
        step = allowed_tokens(self.vocab, grammar, "".join(self.vocab.texts[i] for i in ids), openers)
        return None if step is None else set(self.vocab.allowed_matrix([step])[0].nonzero().flatten().tolist())

    def xgrammar(self, matcher) -> set[int] | None:
        """The allowed tokens, or None once only a stop token may follow (the hand-written decoder's "complete")."""
        import torch

        matcher.fill_next_token_bitmask(self.bitmask, 0)
        bits = (self.bitmask[0].to(torch.int64).unsqueeze(1) >> torch.arange(32)) & 1
        allowed = set(bits.flatten()[: self.size].nonzero().flatten().tolist())
        return None if allowed <= self.stop else allowed - self.stop


def explained(pair: Pair, ids: list[int], token: int, xgrammar_only: bool) -> str | None:
    """Why the two decoders differ on ``token`` after ``ids``, if it is one of the known reasons."""
    text = pair.vocab.texts[token]
    if xgrammar_only and ("\ufffd" in text or not text):
        return "byte piece"  # the hand-written decoder sees a token's decoded text: a piece of a character is U+FFFD
    generated = "".join(pair.vocab.texts[i] for i in ids)
    _, action = response_state(generated)
    tail = (action or "") + (text[text.index("<") :] if action is None and "<" in text else "" if action is None else text)
    if xgrammar_only and any(tag.startswith(tail[: len(tag)]) for tag in THINK_TAGS if tail):
        return "think tag in pieces"  # a '<' alone begins the action there; bytes may go on to spell a tag
    heads = [f"<action>{v} [" for v in META_VERBS]
    head = next((h for h in heads if action and action.startswith(h) and "]" not in action[len(h) :]), None)
    if head is not None:
        argument = action[len(head) :]
        if xgrammar_only and len(argument) + pair.vocab.longest_word > MAX_ARGUMENT_CHARS:
            return "argument bound"  # not in the grammar; the hand-written decoder closes once a token might not fit
    return None


def compare(pair: Pair, grammar: ActionGrammar, ids: list[int], counts: dict[str, int]) -> tuple[bool, bool]:
    """Walk ``ids`` through both decoders, comparing the allowed next tokens at every prefix; returns whether each
    accepts the whole sequence as a complete response."""
    openers, matcher = openers_for(pair.vocab, grammar), pair.compiler.matcher(grammar)
    for k in range(len(ids) + 1):
        hand, xg = pair.hand(grammar, openers, ids[:k]), pair.xgrammar(matcher)
        counts["prefixes"] += 1
        if (hand is None) != (xg is None):
            raise AssertionError(f"one decoder says complete after {''.join(pair.vocab.texts[i] for i in ids[:k])!r}")
        if hand is None:
            return k == len(ids), k == len(ids)
        counts["same"] += hand == xg
        pieces = {t for t in xg - hand if "\ufffd" in pair.vocab.texts[t] or not pair.vocab.texts[t]}
        counts["same but for byte pieces"] += hand == xg - pieces
        for token, xgrammar_only in [(t, True) for t in xg - hand] + [(t, False) for t in hand - xg]:
            reason = explained(pair, ids[:k], token, xgrammar_only)
            assert reason, (repr("".join(pair.vocab.texts[i] for i in ids[:k])), repr(pair.vocab.texts[token]), xgrammar_only)
            key = f"{reason}, {'xgrammar' if xgrammar_only else 'hand-written'} only"
            counts[key] = counts.get(key, 0) + 1
        if k == len(ids):
            return False, False
        if ids[k] not in hand or ids[k] not in xg:  # the first token one rules out: the other reads on alone
            return finish(pair, grammar, openers, ids, k, ids[k] in hand), finish(pair, grammar, matcher, ids, k, ids[k] in xg)
        assert matcher.accept_token(ids[k])
    raise AssertionError("unreachable")


def finish(pair: Pair, grammar: ActionGrammar, state, ids: list[int], k: int, allowed: bool) -> bool:
    """Whether one decoder (``state``: the hand-written decoder's openers, or xgrammar's matcher) accepts the rest of
    ``ids`` from ``k`` on as a complete response."""
    hand = isinstance(state, list)
    while allowed and k < len(ids):
        if not hand:
            state.accept_token(ids[k])
        k += 1
        following = pair.hand(grammar, state, ids[:k]) if hand else pair.xgrammar(state)
        allowed = following is None if k == len(ids) else following is not None and ids[k] in following
    # None from the hand-written decoder is also "beyond saving": complete means the action parses
    text = "".join(pair.vocab.texts[i] for i in ids)
    return allowed and (not hand or grammar.complete(response_state(text)[1] or ""))


def test_xgrammar_and_the_hand_written_decoder_allow_the_same_texts_and_tokens(tokenizer):
    pair, counts, rng = Pair(tokenizer), {"prefixes": 0, "same": 0, "same but for byte pieces": 0}, random.Random(0)
    for grammar in turns():
        for text, allowed in responses(grammar):
            ids = tokenizer(text, add_special_tokens=False).input_ids
            assert compare(pair, grammar, ids, counts) == ((False, True) if allowed is None else (allowed, allowed)), text
        for _ in range(4):  # random guided walks: each step a token both allow, steered towards the action
            ids, matcher, openers = [], pair.compiler.matcher(grammar), openers_for(pair.vocab, grammar)
            while len(ids) < 80:
                hand = pair.hand(grammar, openers, ids)
                if hand is None:
                    break
                both = sorted(hand & pair.xgrammar(matcher))
                steer = [t for t in both if "<" in pair.vocab.texts[t] or "]" in pair.vocab.texts[t]]
                token = rng.choice(steer if steer and len(ids) > 4 and rng.random() < 0.3 else both)
                ids.append(token)
                assert matcher.accept_token(token)
            compare(pair, grammar, ids, counts)
    assert counts["prefixes"] > 1000 and counts["same"] > 0
    print(tokenizer.name_or_path, counts)  # the figures the report quotes (pytest -s)


def test_the_grammar_reads_arguments_and_think_tags_as_the_hand_written_rules_do(tokenizer):
    from evoh.policy.guided import _argument_ok

    grammar = ActionGrammar(("Look ", "go to desk 1"), ("recall",))
    compiled = Pair(tokenizer).compiler.compile(grammar)

    def accepts(text: str) -> bool:
        matcher = xgr.GrammarMatcher(compiled)
        return matcher.accept_string(text) and matcher.is_completed()

    blanks = [" ", "\t", "\u00a0", "\u3000", "\u2009", "\x1c", "\x0b"]
    arguments = ["mug", " mug ", "caf\u00e9 \u00fcber", "\u4e2d\u6587", "a<b", "a\nb", "a\rb", "", *blanks, "".join(blanks)]
    arguments += [b + "x" + b for b in blanks]
    for argument in arguments:
        assert accepts(f"<action>recall [{argument}]</action>") == _argument_ok(argument, closed=True), repr(argument)
    assert accepts("<action>look</action>") and not accepts("<action>Look </action>")  # stripped, lower-cased
    for thought, allowed in (("", True), ("<think></think>", True), ("</think>x<think>", True), ("<think><think>", False)):
        assert accepts(f"{thought}<action>look</action>") == allowed, thought
    assert not accepts("<think>a < b</think><action>look</action>") and not accepts("<action>look</action>\n")
    nothing = xgr.GrammarMatcher(Pair(tokenizer).compiler.compile(ActionGrammar((), ())))  # no action at all: never ends
    assert not nothing.accept_string("<action>") and nothing.accept_string("free thought") and not nothing.is_completed()


def test_xgrammar_guides_generate_like_the_hand_written_decoder(minihouse_model: Path):
    """Under transformers, XGrammarActions masks a random model's generation: whatever ends, parses."""
    from transformers import LogitsProcessorList

    from evoh.config import ModelConfig
    from evoh.harness.turns import parse_turn
    from evoh.policy.local import LocalPolicy
    from evoh.policy.turn_grammar import TurnCompiler, XGrammarActions

    policy = LocalPolicy(ModelConfig(model=str(minihouse_model), temperature=1.0), seed=0)
    commands = ("go to desk 1", "look")
    prompts = policy.tokenizer(["<|im_start|>user\nObjective: look.<|im_end|>\n<|im_start|>assistant\n"] * 4, return_tensors="pt")
    compiler = TurnCompiler(policy.tokenizer, policy.model.get_output_embeddings().weight.shape[0], policy.stop_ids)
    guide = XGrammarActions(compiler, [ActionGrammar(commands, ("recall",))] * 4, prompts.input_ids.shape[1])
    output = policy.model.generate(
        **prompts, max_new_tokens=120, do_sample=True, stop_strings=["</action>"], tokenizer=policy.tokenizer,
        pad_token_id=policy.tokenizer.pad_token_id, logits_processor=LogitsProcessorList([guide]),
    )  # fmt: skip
    texts = policy.tokenizer.batch_decode(output[:, prompts.input_ids.shape[1] :], skip_special_tokens=True)
    finished = [t for t in texts if "</action>" in t]
    assert finished, texts  # a random model that rambles past the budget is the one thing the grammar cannot stop
    for text in finished:
        turn = parse_turn(text, commands)
        assert turn.kind != "malformed" and (turn.kind == "meta" or turn.valid), text


def test_masks_rebuilt_from_the_tokens_are_the_masks_generation_applied(minihouse_model: Path):
    """vLLM returns no mask: GRPO rebuilds each one from the sampled tokens. They must be the very masks xgrammar
    applied while sampling, each sampled token allowed by its own, and score a sample at a finite log-prob."""
    import torch
    from transformers import LogitsProcessorList

    from evoh.config import ModelConfig
    from evoh.grpo.objective import Sample, forward_logprobs, guided_restriction
    from evoh.policy.local import LocalPolicy, completion_length
    from evoh.policy.turn_grammar import GrammarMasks, TurnCompiler, XGrammarActions

    class Recorded(XGrammarActions):
        def __call__(self, input_ids, scores):
            scores = super().__call__(input_ids, scores)
            self.applied.append(self.bitmask.clone())
            return scores

    policy = LocalPolicy(ModelConfig(model=str(minihouse_model), temperature=1.0), seed=3)
    grammars = [ActionGrammar(("go to desk 1", "look"), ("recall",)), ActionGrammar(("open drawer 2",), ())] * 2
    prompts = policy.tokenizer(["<|im_start|>user\nObjective: look.<|im_end|>\n<|im_start|>assistant\n"] * 4, return_tensors="pt")
    width = prompts.input_ids.shape[1]
    compiler = TurnCompiler(policy.tokenizer, policy.model.get_output_embeddings().weight.shape[0], policy.stop_ids)
    guide = Recorded(compiler, grammars, width)
    guide.applied = []
    output = policy.model.generate(
        **prompts, max_new_tokens=60, do_sample=True, stop_strings=["</action>"], tokenizer=policy.tokenizer,
        pad_token_id=policy.tokenizer.pad_token_id, logits_processor=LogitsProcessorList([guide]),
    )  # fmt: skip
    masks = GrammarMasks(compiler)
    samples = []
    for row, grammar in enumerate(grammars):
        produced = output[row, width:].tolist()
        produced = produced[: completion_length(produced, policy.stop_ids, policy.tokenizer.pad_token_id)]
        choices = masks.replay(grammar, produced)
        assert list(choices) == list(range(len(produced)))  # every token of the response was guided
        allowed = masks.allowed_matrix([choices[at] for at in range(len(produced))])
        for at, token in enumerate(produced):
            assert torch.equal(masks.rows[choices[at]], guide.applied[at][row])  # the mask generation applied
            assert allowed[at, token]  # and it let the sampled token through
        samples.append(Sample(prompts.input_ids[row].tolist(), produced, 1.0, choices))
    assert len(masks.rows) < sum(len(s.completion) for s in samples)  # masks shared across positions are kept once
    restriction = guided_restriction(samples, masks)
    logp, _, scored = forward_logprobs(policy.model, samples, policy.tokenizer.pad_token_id, 1.0, "cpu", restriction)
    assert scored.bool().sum() == sum(len(s.completion) for s in samples) and torch.isfinite(logp[scored.bool()]).all()
    masks.clear()
    assert masks.rows == []
