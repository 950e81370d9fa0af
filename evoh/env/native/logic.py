"""A game's parsed rules, shared by every game that has the same domain and grammar text, and its objects.

``compile_domain`` turns a domain text into what every game with that domain shares: the type tree and the
actions, their quantified variables renamed apart and their preconditions built into formula nodes.
``Rules`` adds one grammar's text rules and command templates; ``rules_for`` caches it by the (domain, grammar)
texts, and it is never changed once built, so any number of threads may share it. ``World`` adds
one problem's objects, initial facts and goal.

The planner's no-op rule (an effect restating a precondition literal is dropped, an action left with none is
never offered) is applied to the literals of the precondition's top-level conjunction only; the planner applies
it to each disjunct of a disjunctive precondition separately, which only matters for a domain whose action
restates a literal stated inside an ``or`` or ``exists`` (ALFWorld's actions do not).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

from evoh.env.native import formula
from evoh.env.native.grammar import ActionText, Each, ListOf, Rule, Tag, parse_grammar
from evoh.env.native.pddl import Action, Domain, Effect, PddlError, Problem, parse_domain

ROOT = "object"


class TypeTree:
    """The domain's types as the planner sees them: ``object`` is the root and a type declared twice keeps its
    first parent; children are listed in declaration order."""

    def __init__(self, declared: tuple[tuple[str, str], ...]) -> None:
        self.parent: dict[str, str | None] = {ROOT: None}
        self.children: dict[str, list[str]] = {ROOT: []}
        for name, parent in declared:
            if name in self.parent:
                continue
            if parent not in self.parent:
                raise PddlError(f"type {name} has an undeclared parent {parent}")
            self.parent[name] = parent
            self.children[name] = []
            self.children[parent].append(name)
        self._subtypes: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {}
        self._lock = threading.Lock()

    def is_a(self, kind: str, ancestor: str) -> bool:
        while kind is not None:
            if kind == ancestor:
                return True
            kind = self.parent.get(kind)
        return False

    def signatures(self, kinds: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
        """The type tuples whose facts answer a query atom typed ``kinds``, in the order they are searched: the
        tuple itself, then a breadth-first walk that specialises one position at a time."""
        known = self._subtypes.get(kinds)
        if known is not None:
            return known
        for kind in kinds:
            if kind not in self.parent:
                raise PddlError(f"a query names the unknown type {kind}")
        order = [kinds]
        seen: set[tuple[str, ...]] = set()
        queue = deque(self._expand(kinds))
        while queue:
            item = queue.popleft()
            order.append(item)
            for nxt in self._expand(item):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        with self._lock:
            return self._subtypes.setdefault(kinds, tuple(order))

    def _expand(self, kinds: tuple[str, ...]):
        for i, kind in enumerate(kinds):
            for child in self.children[kind]:
                yield kinds[:i] + (child,) + kinds[i + 1 :]


def _rename(formula: tuple, scope: dict[str, str], counter: list[int]) -> tuple:
    """The formula with every quantified variable given a name of its own, so that bindings never collide."""
    head = formula[0]
    if head == "atom":
        return ("atom", formula[1], tuple(scope.get(a, a) for a in formula[2]))
    if head == "=":
        return ("=", scope.get(formula[1], formula[1]), scope.get(formula[2], formula[2]))
    if head in ("and", "or"):
        return (head, tuple(_rename(part, scope, counter) for part in formula[1]))
    if head == "not":
        return ("not", _rename(formula[1], scope, counter))
    if head == "imply":
        return ("imply", _rename(formula[1], scope, counter), _rename(formula[2], scope, counter))
    inner = dict(scope)
    variables = []
    for name, kind in formula[1]:
        counter[0] += 1
        inner[name] = f"{name}#{counter[0]}"
        variables.append((inner[name], kind))
    return (head, tuple(variables), _rename(formula[2], inner, counter))


def _literals(formula: tuple) -> tuple[tuple[bool, str, tuple[str, ...]], ...]:
    """The literals a precondition states outright (its top-level conjunction): the planner drops an effect that
    sets one of them to the value the precondition already demands."""
    head = formula[0]
    if head == "and":
        return tuple(lit for part in formula[1] for lit in _literals(part))
    if head == "atom":
        return ((True, formula[1], formula[2]),)
    if head == "not" and formula[1][0] == "atom":
        return ((False, formula[1][1], formula[1][2]),)
    return ()


@dataclass(frozen=True)
class CompiledAction:
    action: Action
    text: ActionText
    precondition: tuple
    variable_types: dict[str, str]  # every parameter and quantified variable
    literals: tuple
    effects: tuple[Effect, ...]
    mapping_keys: tuple[tuple[str, str], ...]  # the grammar's placeholders for the parameters
    node: object = None  # the precondition as a formula node
    conditions: tuple = ()  # each effect's condition as a formula node
    may_be_noop: bool = True  # some effect could restate a literal of the precondition
    static_template: bool = False  # the command's words depend on the binding only, never on what changes
    reads: tuple[str, ...] = ()  # the predicates the precondition reads: its bindings change only when they do
    param_names: tuple[str, ...] = ()
    # per effect, the argument lists that drop it when they ground alike: a precondition literal of the same
    # sign and predicate, or (for a deletion) an addition of the same predicate on the same condition
    droppers: tuple[tuple[tuple[str, ...], ...], ...] = ()


def _parts(formula: tuple) -> tuple:
    """The sub-formulas a formula node holds (none for an atom or an equality)."""
    head = formula[0]
    if head in ("and", "or"):
        return formula[1]
    if head == "not":
        return (formula[1],)
    if head == "imply":
        return (formula[1], formula[2])
    if head in ("exists", "forall"):
        return (formula[2],)
    return ()


def _variable_types(formula: tuple, out: dict[str, str]) -> None:
    """Add the quantified variables of ``formula`` (renamed apart) and their types to ``out``."""
    if formula[0] in ("exists", "forall"):
        out.update(formula[1])
    for part in _parts(formula):
        _variable_types(part, out)


def _predicates(formula: tuple) -> set[str]:
    if formula[0] == "atom":
        return {formula[1]}
    return set().union(*(_predicates(part) for part in _parts(formula)))


def _reads_only(symbols: tuple, static: frozenset[str]) -> bool:
    """Whether text written from ``symbols`` can only read facts of the ``static`` predicates."""
    for symbol in symbols:
        if isinstance(symbol, Tag):
            return False
        each = symbol.each if isinstance(symbol, ListOf) else symbol
        if isinstance(each, Each):
            if isinstance(each.expression, Tag):
                return False
            if each.query and any(pred.removeprefix("not_") not in static for pred, _ in each.query):
                return False
    return True


@dataclass(frozen=True)
class Rules:
    domain: Domain
    types: TypeTree
    actions: tuple[CompiledAction, ...]
    text_rules: dict[str, tuple[Rule, ...]]
    static: frozenset[str]  # predicates no action changes

    @classmethod
    def build(cls, domain_text: str, grammar_text: str) -> Rules:
        domain, types, actions, static = compile_domain(domain_text)
        texts, text_rules = parse_grammar(grammar_text)
        compiled = []
        for action in actions:
            if action.action.name not in texts:
                raise PddlError(f"action {action.action.name} has no template in the grammar")
            text = texts[action.action.name]
            compiled.append(replace(action, text=text, static_template=_reads_only(text.template, static)))
        return cls(domain, types, tuple(compiled), text_rules, static)


@lru_cache(maxsize=8)
def compile_domain(domain_text: str):
    """The domain's parts every game with this domain text shares: (domain, type tree, actions, static predicates);
    the actions still lack their grammar text."""
    domain = parse_domain(domain_text)
    types = TypeTree(domain.types)
    changed = {e.pred for a in domain.actions for e in a.effects}
    compiled = []
    for action in domain.actions:
        counter = [0]
        precondition = _rename(action.precondition, {}, counter)
        variable_types = dict(action.params)
        _variable_types(precondition, variable_types)
        effects = []
        for effect in action.effects:
            scope = {}
            forall = []
            for name, kind in effect.forall:
                counter[0] += 1
                scope[name] = f"{name}#{counter[0]}"
                forall.append((scope[name], kind))
            condition = _rename(effect.condition, scope, counter)
            _variable_types(condition, variable_types)
            variable_types.update(forall)
            args = tuple(scope.get(a, a) for a in effect.args)
            effects.append(Effect(effect.positive, effect.pred, args, condition, tuple(forall)))
        keys = tuple((name.lstrip("?"), kind) for name, kind in action.params)
        literals = _literals(precondition)
        stated = {(positive, pred) for positive, pred, _ in literals}
        compiled.append(
            CompiledAction(
                action,
                None,
                precondition,
                variable_types,
                literals,
                tuple(effects),
                keys,
                formula.build(precondition),
                tuple(formula.build(e.condition) for e in effects),
                any((e.positive, e.pred) in stated for e in effects),
                False,
                tuple(sorted(_predicates(precondition))),
                tuple(name for name, _ in action.params),
                tuple(
                    tuple(args for positive, pred, args in literals if (positive, pred) == (e.positive, e.pred))
                    + (
                        ()
                        if e.positive
                        else tuple(a.args for a in effects if a.positive and a.pred == e.pred and a.condition == e.condition)
                    )
                    for e in effects
                ),
            )
        )
    return domain, types, tuple(compiled), frozenset(domain.predicates) - changed


@dataclass
class World:
    """One problem over shared ``Rules``: its objects and their types, its initial facts and its goal."""

    rules: Rules
    problem: Problem
    object_types: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.object_types = dict(self.rules.domain.constants) | dict(self.problem.objects)
        for pred, args in self.problem.init:
            for arg in args:
                if arg not in self.object_types:
                    raise PddlError(f"the initial fact ({pred} {' '.join(args)}) names an undeclared object {arg}")

    @cached_property
    def members(self) -> dict[str, frozenset[str] | None]:
        """The objects of each type a variable can have (None: any object)."""
        kinds = {kind for a in self.rules.actions for kind in a.variable_types.values()}
        kinds |= set(self.goal_types.values())
        ancestors: dict[str, set[str]] = {}
        found: dict[str, set[str]] = {kind: set() for kind in kinds}
        for obj, kind in self.object_types.items():
            if kind not in ancestors:
                ancestors[kind] = {k for k in kinds if self.rules.types.is_a(kind, k)}
            for k in ancestors[kind]:
                found[k].add(obj)
        out: dict[str, frozenset[str] | None] = {k: frozenset(v) for k, v in found.items()}
        out[ROOT] = None
        return out

    @cached_property
    def goal(self) -> tuple:
        return _rename(self.problem.goal, {}, [0])

    @cached_property
    def goal_node(self):
        return formula.build(self.goal)

    @cached_property
    def goal_types(self) -> dict[str, str]:
        out: dict[str, str] = {}
        _variable_types(self.goal, out)
        return out


@lru_cache(maxsize=32)
def rules_for(domain_text: str, grammar_text: str) -> Rules:
    """Parsed rules keyed by their domain and grammar text; lru_cache keeps them safe to share between threads."""
    return Rules.build(domain_text, grammar_text)
