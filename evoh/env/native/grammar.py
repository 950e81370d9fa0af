"""The text half of a game file: its actions (command template, feedback rule) and its context-sensitive grammar.

The file is a list of ``action NAME { template :: "..."; feedback :: "..."; grammar :: \"\"\"{json}\"\"\"; }``
blocks and top-level ``grammar :: \"\"\"{json}\"\"\";`` blocks (``#`` starts a comment outside strings). Each
grammar block is JSON mapping a symbol to its rules, ``{"rhs": text, "condition": query}``; a later block
replaces an earlier one's rules for the same symbol, and lines of an action's block that start with ``#`` are left
out. A rule's text is a sequence of symbols:

- plain text, or ``"quoted"`` text;
- ``#tag#``: expand the tag with its first rule whose condition holds;
- ``{expression}`` or ``{expression | query}``: the expression (a Python-like value, or ``#tag#``) once, or
  once for every answer to the query, run together;
- ``[{expression | query}]``: the same answers as a list: ``list_separator`` between items,
  ``list_last_separator`` before the last one, ``list_empty`` when there is none.

Reading stops, without complaint, at the first character none of these can start (as the original reader does).
A query is ``pred(name:type, ...) & ...``.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache

from evoh.env.native.pddl import PddlError

GrammarError = PddlError


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Tag:
    tag: str


@dataclass(frozen=True)
class Eval:
    source: str
    code: tuple  # compiled by compile_expression


@dataclass(frozen=True)
class Each:
    expression: Tag | Eval
    query: tuple | None  # None: once, in the current context


@dataclass(frozen=True)
class ListOf:
    each: Each


@dataclass(frozen=True)
class Rule:
    condition: tuple | None
    rhs: tuple


@dataclass(frozen=True)
class ActionText:
    name: str
    template: tuple
    feedback: tuple


# --- queries -----------------------------------------------------------------------------------------------

_QUERY_ATOM = re.compile(r"\s*([\w-]+)\s*\(([^()]*)\)\s*")


@lru_cache(maxsize=4096)
def parse_query(text: str) -> tuple:
    """``pred(a:agent, l:location) & ...`` as a tuple of (pred, ((name, type), ...))."""
    atoms = []
    for part in text.split("&"):
        match = _QUERY_ATOM.fullmatch(part)
        if not match:
            raise GrammarError(f"unknown query {text!r}")
        params = []
        for item in filter(None, (p.strip() for p in match.group(2).split(","))):
            name, _, kind = item.partition(":")
            params.append((name.strip(), kind.strip() or name.strip()))
        atoms.append((match.group(1), tuple(params)))
    return tuple(atoms)


# --- expressions -------------------------------------------------------------------------------------------

_FIELDS = frozenset({"id", "type", "name", "noun", "adj", "definite", "indefinite", "synonyms", "desc", "room_type"})


def compile_expression(source: str) -> tuple:
    """The few Python forms the grammars use: names, entity fields, string literals, ``+``, ``or`` and ``and``."""
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as error:
        raise GrammarError(f"cannot read the expression {{{source}}}") from error
    return _compile(tree, source)


def _compile(node, source: str) -> tuple:
    if isinstance(node, ast.Name):
        return ("var", node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return ("const", node.value)
    if isinstance(node, ast.Attribute) and node.attr in _FIELDS:
        return ("field", _compile(node.value, source), node.attr)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return ("add", _compile(node.left, source), _compile(node.right, source))
    if isinstance(node, ast.BoolOp):
        return ("or" if isinstance(node.op, ast.Or) else "and", tuple(_compile(v, source) for v in node.values))
    raise GrammarError(f"an expression form the native engine does not know: {{{source}}}")


# --- rule text ---------------------------------------------------------------------------------------------

_LITERAL = re.compile(r'[^;|"<>\[\]#{}]*')
_TAG = re.compile(r"[\w()/!<>\-\s,.]+")
_STATEMENT = re.compile(r"[^|\[\]{}\n<>]+")
_GIVEN_SEP = re.compile(r"\s*\|\s*")
_GIVEN = re.compile(r"[^;|{}\n\[\]#]+")


@lru_cache(maxsize=4096)
def parse_symbols(text: str) -> tuple:
    symbols, pos = [], 0
    while pos < len(text):
        found = _symbol(text, pos)
        if found is None:
            break
        symbol, end = found
        if end == pos:
            break
        symbols.append(symbol)
        pos = end
    return tuple(symbols)


def _symbol(text: str, pos: int):
    if text.startswith("[", pos):
        found = _each(text, pos + 1)
        if found and text.startswith("]", found[1]):
            return ListOf(found[0]), found[1] + 1
        return None
    if text.startswith("{", pos):
        return _each(text, pos)
    if text.startswith("#", pos):
        return _tag(text, pos)
    if text.startswith('"', pos):
        match = _LITERAL.match(text, pos + 1)
        if text.startswith('"', match.end()):
            return Text(match.group()), match.end() + 1
    match = _LITERAL.match(text, pos)
    return Text(match.group()), match.end()


def _tag(text: str, pos: int):
    match = _TAG.match(text, pos + 1)
    if match and text.startswith("#", match.end()):
        return Tag(match.group()), match.end() + 1
    return None


def _each(text: str, pos: int):
    if not text.startswith("{", pos):
        return None
    pos += 1
    found = _tag(text, pos) if text.startswith("#", pos) else None
    if found is None:
        match = _STATEMENT.match(text, pos)
        if not match:
            return None
        found = Eval(match.group(), compile_expression(match.group())), match.end()
    expression, pos = found
    query = None
    sep = _GIVEN_SEP.match(text, pos)  # the optional "| query" part is taken whole or not at all
    given = _GIVEN.match(text, sep.end()) if sep else None
    if given:
        query, pos = parse_query(given.group()), given.end()
    if not text.startswith("}", pos):
        return None
    return Each(expression, query), pos + 1


# --- the file ----------------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s+|#[^\n]*|"""(?:.|\n)*?"""|"[^"]*"|::|[{};]|[\w/-]+')


def _outer_tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise GrammarError(f"cannot read the grammar at {text[pos : pos + 30]!r}")
        token = match.group()
        if not token.isspace() and not token.startswith("#"):
            out.append(token)
        pos = match.end()
    return out


def _block_json(block: str, drop_hash_lines: bool) -> dict:
    code = textwrap.dedent(block[3:-3])
    if drop_hash_lines:
        code = "\n".join(line for line in code.split("\n") if not line.lstrip().startswith("#"))
    try:
        return json.loads(code)
    except json.JSONDecodeError as error:
        raise GrammarError(f"a grammar block is not JSON: {error}") from error


def parse_grammar(text: str) -> tuple[dict[str, ActionText], dict[str, tuple[Rule, ...]]]:
    """The actions (keyed by lower-cased name) and the rules of every symbol."""
    toks = _outer_tokens(text)
    actions: dict[str, ActionText] = {}
    merged: dict[str, list] = {}
    i = 0

    def expect(value: str) -> None:
        nonlocal i
        if i >= len(toks) or toks[i] != value:
            raise GrammarError(f"expected {value!r} in the grammar, found {toks[i] if i < len(toks) else 'the end'!r}")
        i += 1

    while i < len(toks):
        if toks[i] == "grammar":
            i += 1
            expect("::")
            merged.update(_block_json(toks[i], False))
            i += 1
            expect(";")
        elif toks[i] == "action":
            name, fields = toks[i + 1], {}
            i += 2
            expect("{")
            while i < len(toks) and toks[i] != "}":
                key = toks[i]
                if key not in ("template", "feedback", "grammar", "pddl"):
                    raise GrammarError(f"action {name}: unknown field {key!r}")
                i += 1
                expect("::")
                fields[key] = toks[i]
                i += 1
                expect(";")
            expect("}")
            if "template" not in fields or "feedback" not in fields:
                raise GrammarError(f"action {name} lacks a template or a feedback rule")
            if "grammar" in fields:
                merged.update(_block_json(fields["grammar"], True))
            actions[name.lower()] = ActionText(
                name, parse_symbols(fields["template"][1:-1]), parse_symbols(fields["feedback"][1:-1])
            )
        else:
            raise GrammarError(f"unexpected {toks[i]!r} in the grammar")
    rules = {
        symbol: tuple(
            Rule(parse_query(r["condition"]) if r.get("condition") else None, parse_symbols(r["rhs"])) for r in alternatives
        )
        for symbol, alternatives in merged.items()
    }
    return actions, rules
