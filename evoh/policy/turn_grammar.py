"""The turn grammar written once, as EBNF, and compiled by xgrammar into token masks.

:func:`turn_ebnf` states in one grammar what :mod:`evoh.policy.guided` checks by hand: free thought with no ``<``
except ``<think>`` and ``</think>`` (each at most once, in either order), then ``<action>``, then an admissible
command copied exactly (stripped and lower-cased, as ``ActionGrammar.fixed`` writes it) or an allowed verb with a
bracketed argument (no ``]``, ``<``, newline or carriage return, at most ``MAX_ARGUMENT_CHARS`` characters, not
blank), then ``</action>`` and the end of the response. vLLM takes the text as its structured-outputs grammar
(:func:`structured_outputs`); under transformers :class:`XGrammarActions` masks the logits with xgrammar's matchers.

xgrammar matches bytes, the hand-written decoder matches each token's decoded text; ``tests/test_turn_grammar.py``
compares the two token by token on real turns. They allow the same tokens except where the hand-written decoder
is stricter by construction, and there the hand-written one stays the decoder for ``--policy local``:

- the token budget: near the end of ``model.max_tokens`` the hand-written decoder stops the thought and writes the
  action the shortest way, so a guided response always closes its action; a grammar has no notion of a budget;
- a think tag must arrive as one token there (a ``<`` alone begins the action), while bytes may spell it in pieces;
- tokens whose text is not whole characters (byte pieces of a UTF-8 character, decoded as U+FFFD) or is empty
  are never allowed there; xgrammar lets byte pieces through wherever the character they begin may come;
- near the argument's length bound the hand-written decoder lets only a closing ``]`` (or, for a blank argument,
  one word) through once its longest argument token might not fit, where xgrammar counts the characters exactly;
- GRPO scores a guided sample over what guidance allowed at each token, which the hand-written decoder records
  compactly (a named mask and a few ids per token) and an xgrammar bitmask does not.

So vLLM, which cannot run the hand-written decoder, decodes under this grammar, and transformers keeps the
hand-written one; :class:`XGrammarActions` is the same grammar under transformers, for comparing and timing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evoh.harness.turns import MAX_ARGUMENT_CHARS
from evoh.policy.guided import ARG_CLOSE, OPEN, THINK_TAGS, ActionGrammar

# the characters str.strip() removes, less the newline and carriage return an argument may not hold anyway
_BLANK = "".join(chr(c) for c in range(0x110000) if chr(c).isspace() and chr(c) not in "\n\r")
_NOT_IN_ARGUMENT = "]<\n\r"
_BLOCK = 10  # argument characters counted ten at a time (see _at_most)
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


def _repeat(rule: str, low: int, high: int | None = None) -> str:
    """``rule`` repeated ``low`` times, or ``low`` to ``high`` times; nothing at all for zero."""
    high = low if high is None else high
    if high == 0:
        return ""
    return rule if low == high == 1 else f"{rule}{{{low}}}" if low == high else f"{rule}{{{low},{high}}}"


def _sequence(*parts: str) -> str:
    return " ".join(p for p in parts if p) or '""'


def _at_most(n: int) -> str:
    """Any ``n`` or fewer argument characters, counted in blocks: a repeat of a single character compiles to one
    state per count, which made a 200-character bound take a second to compile, where blocks of ten take milliseconds."""
    q, r = divmod(n, _BLOCK)
    if q == 0:
        return _repeat("char", 0, r)
    below = _sequence(_repeat("block", 0, q - 1), _repeat("char", 0, _BLOCK - 1))
    return f"({below} | {_sequence(_repeat('block', q), _repeat('char', 0, r))})"


def _with_word(m: int) -> str:
    """One to ``m`` argument characters (``m`` at most a block) with a non-blank one: its leading blanks, then it."""
    return " | ".join(_sequence(_repeat("blank", i), "word", _at_most(m - 1 - i)) for i in range(m))


def _argument_rules(limit: int) -> list[str]:
    """``argument``: at most ``limit`` characters with a non-blank one. Split by the block of ten in which the
    first non-blank character falls: blank blocks before it, then the rest of that block and what may follow."""
    blocks, spare = divmod(limit, _BLOCK)
    alternatives = [_sequence(_repeat("blank_block", a), "word_block", _at_most(limit - _BLOCK * (a + 1))) for a in range(blocks)]
    if blocks:  # the argument ends inside the block that holds its first non-blank character
        alternatives.append(_sequence(_repeat("blank_block", 0, blocks - 1), f"({_with_word(_BLOCK - 1)})"))
    if spare:
        alternatives.append(_sequence(_repeat("blank_block", blocks), f"({_with_word(spare)})"))
    in_block = (_sequence(_repeat("blank", i), "word", _repeat("char", _BLOCK - 1 - i)) for i in range(_BLOCK))
    char = _char_class(_NOT_IN_ARGUMENT, negated=True)
    return [
        f"argument ::= {' | '.join(alternatives)}",
        f"word_block ::= {' | '.join(in_block)}",
        f"blank_block ::= {_repeat('blank', _BLOCK)}",
        f"block ::= {_repeat('char', _BLOCK)}",
        f"word ::= {_char_class(_BLANK + _NOT_IN_ARGUMENT, negated=True)}",
        f"blank ::= {_char_class(_BLANK)}",
        # two disjoint classes: a rule of one class is inlined, and a repeat of it costs one state per count
        f"char ::= {char[:-1]}\\u0080-\\U0010ffff] | [\\u0080-\\U0010ffff]",
    ]


def turn_ebnf(grammar: ActionGrammar, limit: int = MAX_ARGUMENT_CHARS) -> str:
    """The whole response this turn allows, as xgrammar's (GBNF-style) EBNF, root rule ``root``."""
    opened, closed = (_literal(t) for t in THINK_TAGS)
    actions = [_literal(f[len(OPEN) :]) for f in grammar.fixed]  # each ends with its '</action>'
    actions += [f"{_literal(h[len(OPEN) :])} argument {_literal(ARG_CLOSE)}" for h in grammar.heads]
    lines = [
        # the thought has no '<' of its own, so the first '<' outside a think tag begins the action
        f"root ::= thought {_literal(OPEN)} ({' | '.join(actions) or _NEVER})",
        f"thought ::= free ({opened} free ({closed} free)? | {closed} free ({opened} free)?)?",
        "free ::= [^<]*",
    ]
    return "\n".join(lines + _argument_rules(limit)) + "\n"


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
    """A ``transformers`` logits processor masking each row of a ``generate`` batch with its turn's grammar."""

    def __init__(self, compiler: TurnCompiler, grammars: list[ActionGrammar], prompt_width: int) -> None:
        import xgrammar as xgr

        self.matchers = [compiler.matcher(g) for g in grammars]
        self.prompt_width = prompt_width
        self.bitmask = xgr.allocate_token_bitmask(len(grammars), compiler.info.vocab_size)

    def __call__(self, input_ids, scores):
        import xgrammar as xgr

        if input_ids.shape[1] > self.prompt_width:
            for matcher, token in zip(self.matchers, input_ids[:, -1].tolist(), strict=True):
                if not matcher.is_terminated():
                    matcher.accept_token(token)
        for row, matcher in enumerate(self.matchers):
            if matcher.is_terminated():  # the response is complete: generation stops on its own
                self.bitmask[row] = -1
            else:
                matcher.fill_next_token_bitmask(self.bitmask, row)
        xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device))
        return scores


def structured_outputs(grammar: ActionGrammar) -> dict[str, Any]:
    """vLLM's structured-outputs request for this turn (``StructuredOutputsParams(**...)``): the same grammar as text."""
    return {"grammar": turn_ebnf(grammar)}
