"""The PDDL half of a game file: the domain's types, predicates and actions and the problem's objects, initial facts
and goal, read the way ALFWorld's planner reads them.

Text is split into tokens line by line (a ``;`` starts a comment), parentheses stand alone, ``?`` starts a token
and everything is lower-cased. Typed lists are read literally: in ``(?l - location, ?r - receptacle)`` the
first type is ``location,``, a type nothing has, so such a quantifier ranges over nothing, as in the planner.
Formulas become tuples: ``("and", parts)``, ``("or", parts)``, ``("not", f)``, ``("atom", pred, args)``,
``("=", a, b)``, ``("exists", vars, f)``, ``("forall", vars, f)``, ``("imply", a, b)``, where ``vars`` is a
tuple of (name, type). Effects become a flat tuple of :class:`Effect`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRUE = ("and", ())


class PddlError(ValueError):
    """A construct this reader does not know; the engine names the game when it reports it."""


_COMMENT = re.compile(r";[^\n]*")
_TOKEN = re.compile(r"[()]|[^\s()]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(_COMMENT.sub("", text).replace("?", " ?").lower())


def parse_sexpr(text: str) -> list:
    """The one parenthesised list ``text`` holds, as nested Python lists of tokens."""
    stream = tokens(text)
    if not stream or stream[0] != "(":
        raise PddlError("expected '(' at the start")
    stack: list[list] = [[]]
    for token in stream:
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) < 2:
                raise PddlError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1 or len(stack[0]) != 1:
        raise PddlError("unbalanced parentheses")
    return stack[0][0]


def typed_list(items: list) -> list[tuple[str, str]]:
    """``a b - t c`` as [(a, t), (b, t), (c, object)]."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        if item == "-":
            if i + 1 >= len(items) or not isinstance(items[i + 1], str):
                raise PddlError(f"a typed list with a missing or nested type: {items}")
            out.extend((name, items[i + 1]) for name in pending)
            pending = []
            i += 2
            continue
        if not isinstance(item, str):
            raise PddlError(f"a typed list with a nested list: {items}")
        pending.append(item)
        i += 1
    out.extend((name, "object") for name in pending)
    return out


@dataclass(frozen=True)
class Effect:
    """One literal an action sets: for every binding of ``forall`` (name, type) pairs, when ``condition`` holds."""

    positive: bool
    pred: str
    args: tuple[str, ...]
    condition: tuple = TRUE
    forall: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Action:
    name: str
    params: tuple[tuple[str, str], ...]  # (?name, type)
    precondition: tuple
    effects: tuple[Effect, ...]


@dataclass(frozen=True)
class Domain:
    types: tuple[tuple[str, str], ...]  # (type, parent) in declaration order; "object" is the root
    predicates: frozenset[str]
    actions: tuple[Action, ...]
    constants: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Problem:
    objects: tuple[tuple[str, str], ...]
    init: tuple[tuple[str, tuple[str, ...]], ...]  # (pred, args) in file order
    goal: tuple


def formula(node) -> tuple:
    if not isinstance(node, list):
        raise PddlError(f"expected a formula, found {node!r}")
    if not node:
        return TRUE
    head = node[0]
    if head == "and" or head == "or":
        return (head, tuple(formula(part) for part in node[1:]))
    if head == "not":
        if len(node) != 2:
            raise PddlError("'not' takes one formula")
        return ("not", formula(node[1]))
    if head == "imply":
        return ("imply", formula(node[1]), formula(node[2]))
    if head in ("exists", "forall"):
        return (head, tuple(typed_list(list(node[1]))), formula(node[2]))
    if head == "=":
        return ("=", node[1], node[2])
    if not isinstance(head, str) or any(not isinstance(arg, str) for arg in node[1:]):
        raise PddlError(f"unknown formula {node!r}")
    if head in ("when", "increase", "decrease", "assign", "either", "preference"):
        raise PddlError(f"'{head}' where a condition was expected")
    return ("atom", head, tuple(node[1:]))


def effects(node, condition=TRUE, forall=()) -> list[Effect]:
    if not isinstance(node, list):
        raise PddlError(f"expected an effect, found {node!r}")
    if not node:
        return []
    head = node[0]
    if head == "and":
        return [e for part in node[1:] for e in effects(part, condition, forall)]
    if head == "forall":
        return effects(node[2], condition, forall + tuple(typed_list(list(node[1]))))
    if head == "when":
        if condition != TRUE:
            raise PddlError("a 'when' inside a 'when'")
        return effects(node[2], formula(node[1]), forall)
    if head in ("increase", "decrease"):
        if node[1] == ["total-cost"]:
            return []  # action costs only steer the planner
        raise PddlError(f"a numeric effect on {node[1]!r}")
    if head == "not":
        inner = formula(node[1])
        if inner[0] != "atom":
            raise PddlError(f"a negated effect that is not an atom: {node!r}")
        return [Effect(False, inner[1], inner[2], condition, forall)]
    atom = formula(node)
    if atom[0] != "atom":
        raise PddlError(f"unknown effect {node!r}")
    return [Effect(True, atom[1], atom[2], condition, forall)]


def _action(body: list) -> Action:
    name, fields = body[1], body[2:]
    params, precondition, effect = (), TRUE, []
    for key, value in zip(fields[::2], fields[1::2]):
        if key == ":parameters":
            params = tuple(typed_list(list(value)))
        elif key == ":precondition":
            precondition = formula(value)
        elif key == ":effect":
            effect = effects(value)
        else:
            raise PddlError(f"action {name}: unknown field {key}")
    return Action(name, params, precondition, tuple(effect))


def parse_domain(text: str) -> Domain:
    tree = parse_sexpr(text)
    if tree[:1] != ["define"]:
        raise PddlError("the domain does not start with 'define'")
    types: list[tuple[str, str]] = []
    predicates: set[str] = set()
    actions: list[Action] = []
    constants: list[tuple[str, str]] = []
    for section in tree[1:]:
        key = section[0]
        if key == "domain" or key in (":requirements", ":functions"):
            continue
        if key == ":types":
            types.extend(typed_list(section[1:]))
        elif key == ":constants":
            constants.extend(typed_list(section[1:]))
        elif key == ":predicates":
            predicates.update(p[0] for p in section[1:])
        elif key == ":action":
            actions.append(_action(section))
        else:
            raise PddlError(f"unknown domain section {key}")
    return Domain(tuple(types), frozenset(predicates), tuple(actions), tuple(constants))


def parse_problem(text: str) -> Problem:
    tree = parse_sexpr(text)
    if tree[:1] != ["define"]:
        raise PddlError("the problem does not start with 'define'")
    objects: list[tuple[str, str]] = []
    init: list[tuple[str, tuple[str, ...]]] = []
    goal = TRUE
    for section in tree[1:]:
        key = section[0]
        if key in ("problem", ":domain", ":requirements", ":metric"):
            continue
        if key == ":objects":
            objects.extend(typed_list(section[1:]))
        elif key == ":init":
            init.extend(_init_fact(fact) for fact in section[1:])
        elif key == ":goal":
            goal = formula(section[1])
        else:
            raise PddlError(f"unknown problem section {key}")
    return Problem(tuple(objects), tuple(f for f in init if f is not None), goal)


def _init_fact(node) -> tuple[str, tuple[str, ...]] | None:
    if not isinstance(node, list) or not node:
        raise PddlError(f"unknown initial fact {node!r}")
    if node[0] == "=":
        # numeric values (distances, the total cost) steer only the planner
        if isinstance(node[2], str) and node[2].isdigit():
            return None
        raise PddlError(f"an initial value that is not a number: {node!r}")
    if any(not isinstance(arg, str) for arg in node):
        raise PddlError(f"unknown initial fact {node!r}")
    return (node[0], tuple(node[1:]))
