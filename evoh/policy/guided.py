"""Guided decoding: every response a local model writes parses, and its action is one the turn allows.

A small model that has learned the turn format still misspells commands (``take mug 2`` where only mug 1 is
admissible), forgets the action tag or stops inside it. With guidance on, generation is masked token by token
so that the response is free thought with no ``<`` in it, then ``<action>``, then either an admissible command
copied exactly or an allowed meta-action verb with a bracketed argument, then ``</action>``. Which admissible
command, which verb and what argument remain the model's choice; only text that could never parse is ruled
out, the way grammar-constrained decoding (vLLM's guided decoding, llama.cpp's grammars) works. The parser
still judges every response, and the policy's identity records that guidance was on.

The mask is computed on text, not tokens: any tokenization of an allowed string is allowed, so the model keeps
the tokenizations it was trained on.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evoh.harness.turns import MAX_ARGUMENT_CHARS

OPEN, CLOSE = "<action>", "</action>"
THINK_TAGS = ("<think>", "</think>")
ARG_CLOSE = "]" + CLOSE
_NOT_IN_ARGUMENT = ("]", "<", "\n", "\r")


def _argument_ok(text: str, closed: bool) -> bool:
    """A meta-action argument so far: no bracket, tag or line break, not too long; non-empty once closed."""
    return len(text) <= MAX_ARGUMENT_CHARS and not any(c in text for c in _NOT_IN_ARGUMENT) and (bool(text.strip()) or not closed)


@dataclass(frozen=True)
class ActionGrammar:
    """The strings an action tag may hold this turn: admissible commands, and ``verb [argument]`` per allowed verb."""

    commands: tuple[str, ...]
    verbs: tuple[str, ...]
    fixed: tuple[str, ...] = field(init=False)
    heads: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fixed", tuple(OPEN + c.strip().lower() + CLOSE for c in self.commands))
        object.__setattr__(self, "heads", tuple(f"{OPEN}{v} [" for v in self.verbs))

    def viable(self, text: str) -> bool:
        """Whether ``text`` (from the response's first ``<`` on, think tags removed) can still become an allowed action."""
        if any(f.startswith(text) for f in self.fixed):
            return True
        for head in self.heads:
            if len(text) <= len(head):
                if head.startswith(text):
                    return True
            elif text.startswith(head):
                rest = text[len(head) :]
                if "]" not in rest:
                    if _argument_ok(rest, closed=False):
                        return True
                    continue
                argument, after = rest.split("]", 1)
                if _argument_ok(argument, closed=True) and ARG_CLOSE.startswith("]" + after):
                    return True
        return False

    def complete(self, text: str) -> bool:
        return text in self.fixed or (text.endswith(ARG_CLOSE) and self.viable(text))


def _strip_think_tags(text: str) -> str:
    for tag in THINK_TAGS:
        text = text.replace(tag, "")
    return text


def response_state(generated: str) -> tuple[str, str | None]:
    """Split a response so far into its thought and its action part (``None`` before the first ``<``)."""
    text = _strip_think_tags(generated)
    at = text.find("<")
    return (text, None) if at < 0 else (text[:at], text[at:])


@dataclass(frozen=True)
class Allowed:
    """The tokens guidance lets through at one position: a vocabulary mask by name (``None``: no mask), plus the
    ``extra`` ids, less the ``banned`` ones. Kept per sampled token, so training scores the policy that sampled."""

    mask: str | None
    extra: Sequence[int]
    banned: Sequence[int] = ()


class Vocabulary:
    """Every token's text, indexed for the questions guidance asks: which tokens may continue free thought,
    which may begin the action, and which spell a prefix of a given string."""

    def __init__(self, tokenizer, size: int, stop_ids: set[int], device: Any = "cpu") -> None:
        import torch

        texts = [tokenizer.decode([i]) if i < len(tokenizer) else "" for i in range(size)]
        self.texts = texts
        usable = [bool(t) and i not in stop_ids and "\ufffd" not in t for i, t in enumerate(texts)]
        self.by_text: dict[str, list[int]] = {}
        for i, t in enumerate(texts):
            if usable[i]:
                self.by_text.setdefault(t, []).append(i)
        self.longest = max((len(t) for t in self.by_text), default=1)
        self._spelled: dict[str, int] = {}
        self.sorted_texts = sorted(self.by_text)
        stripped = [_strip_think_tags(t) for t in texts]
        # thought: anything without a '<' of its own (think tags are fine, once each)
        # the masks live where the logits do: no copy per row and step
        thought = torch.tensor(
            [u and "<" not in s for u, s in zip(usable, stripped, strict=True)], dtype=torch.bool, device=device
        )
        self.tagged = {tag: [i for i, t in enumerate(texts) if tag in t] for tag in THINK_TAGS}
        # tokens that would end the thought: the text from their first own '<' on is where the action starts
        self.openers = [(i, s[s.index("<") :]) for i, (u, s) in enumerate(zip(usable, stripped, strict=True)) if u and "<" in s]
        in_argument = [u and _argument_ok(t, closed=False) for u, t in zip(usable, texts, strict=True)]
        argument = torch.tensor(in_argument, dtype=torch.bool, device=device)
        word = torch.tensor(
            [ok and bool(t.strip()) for t, ok in zip(texts, in_argument, strict=True)], dtype=torch.bool, device=device
        )
        # row 0 allows nothing (a position with only listed ids); the rest are the masks by name
        self.mask_rows = {None: 0, "thought": 1, "argument": 2, "word": 3}
        self.masks = torch.stack([torch.zeros_like(thought), thought, argument, word])
        self.longest_word = max((len(t) for t, ok in zip(texts, in_argument, strict=True) if ok), default=1)
        # the only tokens outside the argument mask that can continue an argument: those that close it
        self.closers = [i for i, t in enumerate(texts) if usable[i] and "]" in t]

    def allowed_matrix(self, positions: Sequence[Allowed | None]):
        """One boolean row per position, over the whole vocabulary: what guidance allowed there (``None``: everything)."""
        import torch

        def ids(values: list[int]):
            return torch.tensor(values, dtype=torch.long, device=self.masks.device)

        allowed = self.masks[ids([self.mask_rows[a.mask] if a is not None else 0 for a in positions])]
        allowed[ids([k for k, a in enumerate(positions) if a is None])] = True
        listed = [(k, a) for k, a in enumerate(positions) if a is not None]
        allowed[ids([k for k, a in listed for _ in a.extra]), ids([i for _, a in listed for i in a.extra])] = True
        allowed[ids([k for k, a in listed for _ in a.banned]), ids([i for _, a in listed for i in a.banned])] = False
        return allowed

    def spelling_prefixes(self, remainder: str) -> list[int]:
        """Tokens whose text is a non-empty prefix of ``remainder``."""
        found: list[int] = []
        for k in range(1, min(len(remainder), self.longest) + 1):
            found += self.by_text.get(remainder[:k], [])
        return found

    def longest_prefix(self, remainder: str) -> list[int]:
        """The tokens spelling the longest prefix of ``remainder`` that one token can: the shortest way on."""
        for k in range(min(len(remainder), self.longest), 0, -1):
            if remainder[:k] in self.by_text:
                return self.by_text[remainder[:k]]
        return []

    def spelled_length(self, text: str) -> int:
        """Tokens needed to write ``text`` taking the longest prefix each time (what the budget must keep)."""
        if text not in self._spelled:
            count, rest = 0, text
            while rest:
                step = next((k for k in range(min(len(rest), self.longest), 0, -1) if rest[:k] in self.by_text), 1)
                rest, count = rest[step:], count + 1
            self._spelled[text] = count
        return self._spelled[text]

    def starting_with(self, prefix: str) -> list[int]:
        """Tokens whose text begins with ``prefix``."""
        found: list[int] = []
        start = bisect.bisect_left(self.sorted_texts, prefix)
        for t in self.sorted_texts[start:]:
            if not t.startswith(prefix):
                break
            found += self.by_text[t]
        return found


def allowed_tokens(
    vocab: Vocabulary, grammar: ActionGrammar, generated: str, openers: list[int], closing: bool = False
) -> Allowed | None:
    """What may come next after ``generated``, or ``None`` when the response is complete (or already beyond
    saving, which the parser will record).
    ``openers`` are the tokens that begin an action this grammar allows (see :func:`openers_for`). ``closing``:
    the token budget is nearly spent, so a thought gives way to the action, an argument closes after a word,
    and every string is written the shortest way on (the longest fitting token), which the budget was kept for."""
    _, action = response_state(generated)
    if action is None:
        if closing:  # the tag itself, written the shortest way (not " <" or "><": no choice to make here)
            return Allowed(None, vocab.longest_prefix(OPEN))
        used = [i for tag, ids in vocab.tagged.items() if tag in generated for i in ids]
        return Allowed("thought", openers, used)
    if grammar.complete(action) or not grammar.viable(action):
        return None
    spell = vocab.longest_prefix if closing else vocab.spelling_prefixes
    candidates: set[int] = set()
    for f in grammar.fixed:
        if f.startswith(action):
            candidates.update(spell(f[len(action) :]))
    mask = None
    for head in grammar.heads:
        if len(action) < len(head) and head.startswith(action):
            remainder = head[len(action) :]
            candidates.update(spell(remainder))
            if not closing:
                candidates.update(vocab.starting_with(remainder))
        elif action.startswith(head):
            argument = action[len(head) :]
            if "]" not in argument:
                # free words, short of the length limit; ']' once there are some (`viable` checks the closers)
                free = not closing and len(argument) + vocab.longest_word <= MAX_ARGUMENT_CHARS
                if not argument.strip():
                    mask = "argument" if free else "word"  # out of budget: one word, then close
                else:
                    mask = "argument" if free else None
                candidates.update(vocab.closers if free else spell(ARG_CLOSE))
            else:
                candidates.update(spell(ARG_CLOSE[len("]" + argument.split("]", 1)[1]) :]))
    return Allowed(mask, [i for i in candidates if grammar.viable(action + vocab.texts[i])])


def openers_for(vocab: Vocabulary, grammar: ActionGrammar) -> list[int]:
    """The tokens that may end the thought by beginning one of this grammar's actions."""
    return [i for i, start in vocab.openers if grammar.viable(start)]


def _reserve(vocab: Vocabulary, grammar: ActionGrammar) -> int:
    """Tokens to keep for the action: an opener that may write just the '<', then the shortest spelling of the
    longest action (a meta-action with a one-word argument)."""
    actions = grammar.fixed + tuple(head + "x" + ARG_CLOSE for head in grammar.heads)
    return 1 + max((vocab.spelled_length(a[1:]) for a in actions), default=0)


class GuidedActions:
    """A ``transformers`` logits processor holding one grammar per row of a ``generate`` batch. It keeps enough of
    the ``budget`` of new tokens to write each row's longest action the shortest way, and writes it that way once
    the rest of the budget is down to that (a model pushed off its usual path might otherwise spell letter by letter)."""

    def __init__(self, vocab: Vocabulary, grammars: list[ActionGrammar], prompt_width: int, budget: int) -> None:
        self.vocab = vocab
        self.grammars = grammars
        self.openers = [openers_for(vocab, g) for g in grammars]
        self.reserve = [_reserve(vocab, g) for g in grammars]
        self.prompt_width = prompt_width
        self.budget = budget
        self.generated = [""] * len(grammars)
        # per row and new token: what guidance allowed (None: nothing was ruled out), for the guided policy's log-probs
        self.choices: list[list[Allowed | None]] = [[] for _ in grammars]

    def __call__(self, input_ids, scores):
        written = input_ids.shape[1] - self.prompt_width
        if written:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                self.generated[row] += self.vocab.texts[token] if token < len(self.vocab.texts) else ""
        steps = [
            allowed_tokens(
                self.vocab, grammar, self.generated[row], self.openers[row], self.budget - written <= self.reserve[row]
            )
            for row, grammar in enumerate(self.grammars)
        ]
        allowed = self.vocab.allowed_matrix(steps)[:, : scores.shape[1]]
        for row, step in enumerate(steps):
            if (
                step is not None and not allowed[row].any()
            ):  # nothing fits: leave the row to the parser rather than sample from nothing
                allowed[row] = True
                step = None
            self.choices[row].append(step)
        return scores.masked_fill(~allowed, float("-inf"))
