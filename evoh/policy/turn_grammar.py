"""The turn grammar written once, as EBNF, and compiled by xgrammar into token masks.

:func:`turn_ebnf` states in one grammar what :mod:`evoh.policy.guided` checks by hand: free thought with no ``<``
except ``<think>`` and ``</think>`` (each at most once, in either order), then ``<action>``, then an admissible
command copied exactly (stripped and lower-cased, as ``ActionGrammar.fixed`` writes it) or an allowed verb with a
bracketed argument (no ``]``, ``<``, newline or carriage return, not blank), then ``</action>`` and the end of the
response. vLLM takes the text as its structured-outputs grammar (:func:`structured_outputs`); under transformers
:class:`XGrammarActions` masks the logits with xgrammar's matchers.

What the grammar leaves out, and the hand-written decoder keeps:

- the argument's length bound (``MAX_ARGUMENT_CHARS``). xgrammar can state it, but not cheaply: on a 49k-token
  vocabulary a plain repeat of up to 200 characters took 6.5 s to compile, and counting in blocks of ten (the
  cheapest exact form tried) 0.1-0.3 s, and a mask inside the argument took up to 44-115 ms with either, where the
  unbounded argument takes 0.01-0.1 ms. Under vLLM an over-long argument is left to the parser, which records
  it as an invalid meta-action ("argument too long");
- the token budget: near the end of ``model.max_tokens`` the hand-written decoder ends the thought and writes the
  action the shortest way, so a guided response always closes its action; a grammar has no notion of a budget.

``tests/test_turn_grammar.py`` compares the two decoders token by token on real turns. Apart from the length
bound they allow the same tokens, except where the hand-written decoder, which reads each token's decoded text
where xgrammar reads bytes, is stricter by construction:

- a think tag must arrive as one token there (a lone ``<`` begins the action), while bytes may spell it in pieces;
- a token that is not whole characters (a byte piece of a UTF-8 character, decoded as U+FFFD) or decodes to nothing
  is never allowed there; xgrammar lets a byte piece through wherever the character it begins may come.

That keeps ``--policy local`` on the hand-written decoder, which also records what it allowed compactly (a named
mask and a few ids per token). vLLM, which cannot run it, decodes under this grammar; for GRPO the masks it
applied are rebuilt from the sampled tokens (:class:`GrammarMasks`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from evoh.policy.guided import ARG_CLOSE, OPEN, THINK_TAGS, ActionGrammar

log = logging.getLogger(__name__)

# the characters str.strip() removes, less the newline and carriage return an argument may not hold anyway
_BLANK = "".join(chr(c) for c in range(0x110000) if chr(c).isspace() and chr(c) not in "\n\r")
_NOT_IN_ARGUMENT = "]<\n\r"
# no action allowed at all: a thought that never ends, as the hand-written decoder has it
_NEVER = "[^\\u0000-\\U0010ffff]"


def _literal(text: str) -> str:
    """An EBNF string literal for ``text``: quotes, backslashes and control characters escaped."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _char_class(chars: str, negated: bool = False) -> str:
    """An EBNF character class of ``chars`` (every one escaped as a code point, so none is read as syntax)."""
    return "[" + ("^" if negated else "") + "".join(f"\\u{ord(c):04x}" for c in chars) + "]"


def _argument_rule() -> str:
    """``argument``: blanks, a non-blank character, then anything an argument may hold. One way to read each text,
    so the matcher keeps one state; the classes are written inline, since a repeat of a rule that holds one class
    made the mask at the argument's start take ~50 ms on a 49k-token vocabulary, against 0.05 ms inline. No length
    bound: see the module's docstring."""
    blank, word = _char_class(_BLANK), _char_class(_BLANK + _NOT_IN_ARGUMENT, negated=True)
    return f"argument ::= {blank}* {word} {_char_class(_NOT_IN_ARGUMENT, negated=True)}*"


def turn_ebnf(grammar: ActionGrammar) -> str:
    """The whole response this turn allows, as xgrammar's (GBNF-style) EBNF, root rule ``root``."""
    opened, closed = (_literal(t) for t in THINK_TAGS)
    actions = [_literal(f[len(OPEN) :]) for f in grammar.fixed]  # each ends with its '</action>'
    actions += [f"{_literal(h[len(OPEN) :])} argument {_literal(ARG_CLOSE)}" for h in grammar.heads]
    lines = [
        # the thought has no '<' of its own, so the first '<' outside a think tag begins the action
        f"root ::= thought {_literal(OPEN)} ({' | '.join(actions)})" if actions else f"root ::= thought {_NEVER}",
        f"thought ::= free ({opened} free ({closed} free)? | {closed} free ({opened} free)?)?",
        "free ::= [^<]*",
    ]
    return "\n".join([*lines, _argument_rule()]) + "\n"


class TurnCompiler:
    """xgrammar's view of one tokenizer (its vocabulary as bytes, the model's vocabulary size, the stop tokens),
    compiling a turn's grammar into the matcher state that yields token masks."""

    def __init__(self, tokenizer, vocab_size: int, stop_ids: Sequence[int]) -> None:
        import xgrammar as xgr

        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(stop_ids))
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)

    def compile(self, grammar: ActionGrammar):
        return self.compiler.compile_grammar(turn_ebnf(grammar))

    def matcher(self, grammar: ActionGrammar):
        import xgrammar as xgr

        return xgr.GrammarMatcher(self.compile(grammar))


class XGrammarActions:
    """A ``transformers`` logits processor masking each row of a ``generate`` batch with its turn's grammar: the
    same grammar vLLM decodes under, for comparing and timing against :class:`evoh.policy.guided.GuidedActions`."""

    def __init__(self, compiler: TurnCompiler, grammars: list[ActionGrammar], prompt_width: int) -> None:
        import xgrammar as xgr

        self.matchers = [compiler.matcher(g) for g in grammars]
        self.prompt_width = prompt_width
        self.bitmask = xgr.allocate_token_bitmask(len(grammars), compiler.info.vocab_size)
        self.free = [False] * len(grammars)  # rows left unmasked: their response ended (generate pads them on)

    def __call__(self, input_ids, scores):
        import xgrammar as xgr

        if input_ids.shape[1] > self.prompt_width:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                if not self.free[row]:
                    self.free[row] = not self.matchers[row].accept_token(token) or self.matchers[row].is_terminated()
        for row, matcher in enumerate(self.matchers):
            if self.free[row]:
                self.bitmask[row] = -1  # every bit set: nothing ruled out
            else:
                matcher.fill_next_token_bitmask(self.bitmask, row)
        xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device))
        return scores


class GrammarMasks:
    """The masks the turn grammar applied at each token of a response, rebuilt from the tokens afterwards: vLLM
    samples under xgrammar but returns no mask, and GRPO scores a guided token over what was allowed there.
    Each distinct mask is kept once (a Qwen-sized one is 19 kB, and an update's thoughts share a handful), and
    ``allowed_matrix`` answers as :class:`evoh.policy.guided.Vocabulary` does, so training scores either the same way."""

    def __init__(self, compiler: TurnCompiler) -> None:
        self.compiler = compiler
        self.rows: list[Any] = []
        self._index: dict[bytes, int] = {}

    def replay(self, grammar: ActionGrammar, produced: Sequence[int]) -> dict[int, int]:
        """Response position -> the mask in force there. A token the grammar refuses (a tokenizer other than
        the sampler's) ends the record there: the rest of the response is scored unrestricted, never at -inf."""
        import xgrammar as xgr

        matcher = self.compiler.matcher(grammar)
        bitmask = xgr.allocate_token_bitmask(1, self.compiler.info.vocab_size)
        choices: dict[int, int] = {}
        for at, token in enumerate(produced):
            if matcher.is_terminated():
                break
            matcher.fill_next_token_bitmask(bitmask, 0)
            if not matcher.accept_token(token):
                log.warning("a guided response holds token %d that its grammar refuses at position %d", token, at)
                break
            choices[at] = self._keep(bitmask[0])
        return choices

    def _keep(self, row) -> int:
        key = row.numpy().tobytes()
        if key not in self._index:
            self._index[key] = len(self.rows)
            self.rows.append(row.clone())
        return self._index[key]

    def allowed_matrix(self, masks: Sequence[int]):
        """One boolean row over the vocabulary per mask (what ``replay`` gave each position): bit ``i % 32`` of
        word ``i // 32`` is token ``i``."""
        import torch

        words = torch.stack([self.rows[m] for m in masks])
        bits = (words.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
        return bits.reshape(len(masks), -1).bool()

    def clear(self) -> None:
        """Forget the masks: an update's samples are scored before the next update's rollouts begin."""
        self.rows, self._index = [], {}


def structured_outputs(grammar: ActionGrammar) -> dict[str, Any]:
    """vLLM's structured-outputs request for this turn (``StructuredOutputsParams(**...)``): the same grammar as text."""
    return {"grammar": turn_ebnf(grammar)}
