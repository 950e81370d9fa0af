"""Which actions can run now, and what running one changes, by the planner's rules.

An action can run with a binding of its parameters when its precondition holds (``exists``, ``or`` and the
rest read as in PDDL, variables ranging over the objects of their type) and when running it would change
something: the planner drops an effect that sets a literal the precondition already demands, and an action left
with no effect at all (going to the place one already stands at) is never offered. Bindings are found by
matching the precondition's atoms against the true facts, most constrained argument first; whatever an atom
cannot bind is enumerated over its type.
"""

from __future__ import annotations

from itertools import product

from evoh.env.native.logic import CompiledAction, World
from evoh.env.native.state import State


class Solver:
    """Formulas over one state; ``types`` gives each variable's type and ``members`` each type's objects."""

    def __init__(self, state: State, world: World, types: dict[str, str]) -> None:
        self.state = state
        self.members = world.members
        self.object_types = world.object_types
        self.types = types

    def _domain(self, var: str):
        allowed = self.members.get(self.types[var], ())
        return self.object_types.keys() if allowed is None else allowed

    def holds(self, f: tuple, b: dict[str, str]) -> bool:
        head = f[0]
        if head == "atom":
            return self.state.holds(f[1], tuple(b.get(a, a) for a in f[2]))
        if head == "and":
            return all(self.holds(p, b) for p in f[1])
        if head == "not":
            return not self.holds(f[1], b)
        if head == "or":
            return any(self.holds(p, b) for p in f[1])
        if head == "=":
            return b.get(f[1], f[1]) == b.get(f[2], f[2])
        if head == "imply":
            return not self.holds(f[1], b) or self.holds(f[2], b)
        if head == "exists":
            return next(self.solve(f, b), None) is not None
        if head == "forall":
            names = [name for name, _ in f[1]]
            return all(self.holds(f[2], {**b, **dict(zip(names, values))}) for values in product(*map(self._domain, names)))
        raise ValueError(f"unknown formula {head}")

    def solve(self, f: tuple, b: dict[str, str]):
        """Bindings extending ``b`` under which ``f`` holds (possibly repeated)."""
        head = f[0]
        if head == "atom":
            yield from self._match(f[1], f[2], b)
        elif head == "and":
            yield from self._conjunction(f[1], 0, b)
        elif head == "or":
            for part in f[1]:
                yield from self.solve(part, b)
        elif head == "exists":
            yield from self.solve(f[2], b)
        else:
            unbound = sorted({v for v in _variables(f) if v not in b})
            if not unbound:
                if self.holds(f, b):
                    yield b
                return
            for values in product(*map(self._domain, unbound)):
                extended = {**b, **dict(zip(unbound, values))}
                if self.holds(f, extended):
                    yield extended

    def _conjunction(self, parts, i, b):
        if i == len(parts):
            yield b
            return
        for extended in self.solve(parts[i], b):
            yield from self._conjunction(parts, i + 1, extended)

    def _match(self, pred: str, args: tuple[str, ...], b: dict[str, str]):
        known = tuple(b.get(a, a) if a.startswith("?") else a for a in args)
        known = tuple(None if k.startswith("?") else k for k in known)
        if None not in known:
            if self.state.holds(pred, known):
                yield b
            return
        for fact in tuple(self.state.candidates(pred, known)):
            extended = dict(b)
            for var, want, obj in zip(args, known, fact):
                if want is not None:
                    if want != obj:
                        break
                    continue
                have = extended.get(var)
                if have is None:
                    allowed = self.members.get(self.types[var], ())
                    if allowed is not None and obj not in allowed:
                        break
                    extended[var] = obj
                elif have != obj:
                    break
            else:
                yield extended


def _variables(f: tuple) -> set[str]:
    head = f[0]
    if head == "atom":
        return {a for a in f[2] if a.startswith("?")}
    if head == "=":
        return {a for a in f[1:] if a.startswith("?")}
    if head in ("and", "or"):
        return set().union(*(_variables(p) for p in f[1]))
    if head == "not":
        return _variables(f[1])
    if head == "imply":
        return _variables(f[1]) | _variables(f[2])
    return _variables(f[2]) - {name for name, _ in f[1]}


def applicable(state: State, world: World, action: CompiledAction):
    """Each distinct binding (parameter name -> object) of ``action`` that the planner offers now."""
    solver = Solver(state, world, action.variable_types)
    params = [name for name, _ in action.action.params]
    seen = set()
    for b in solver.solve(action.precondition, {}):
        missing = [p for p in params if p not in b]
        for values in product(*(solver._domain(p) for p in missing)) if missing else [()]:
            full = {**b, **dict(zip(missing, values))} if missing else b
            key = tuple(full[p] for p in params)
            if key in seen:
                continue
            seen.add(key)
            binding = dict(zip(params, key))
            if changes_something(solver, action, binding):
                yield binding


def _ground_effects(solver: Solver, action: CompiledAction, binding: dict[str, str]):
    for effect in action.effects:
        names = [name for name, _ in effect.forall]
        for values in product(*(solver._domain(n) for n in names)) if names else [()]:
            b = {**binding, **dict(zip(names, values))} if names else binding
            yield effect, b, tuple(b.get(a, a) for a in effect.args)


def _kept(solver: Solver, action: CompiledAction, binding: dict[str, str]):
    """The effects the planner keeps for this binding: (positive, pred, args, effect, binding)."""
    stated = {(pos, pred, tuple(binding.get(a, a) for a in args)) for pos, pred, args in action.literals}
    grounded = list(_ground_effects(solver, action, binding))
    adds = {(e.pred, args, e.condition, frozenset(b.items())) for e, b, args in grounded if e.positive}
    for effect, b, args in grounded:
        if not effect.positive and (effect.pred, args, effect.condition, frozenset(b.items())) in adds:
            continue  # an atom both deleted and added on the same condition stays true
        if (effect.positive, effect.pred, args) in stated:
            continue  # sets what the precondition already demands
        yield effect.positive, effect.pred, args, effect, b


def changes_something(solver: Solver, action: CompiledAction, binding: dict[str, str]) -> bool:
    return next(_kept(solver, action, binding), None) is not None


def apply(state: State, world: World, action: CompiledAction, binding: dict[str, str]) -> None:
    """Run the action: every kept effect whose condition holds beforehand; an atom added wins over its deletion."""
    solver = Solver(state, world, action.variable_types)
    adds, deletes = [], []
    for positive, pred, args, effect, b in list(_kept(solver, action, binding)):
        if effect.condition == ("and", ()) or solver.holds(effect.condition, b):
            (adds if positive else deletes).append((pred, args))
    added = set(adds)
    for pred, args in deletes:
        if (pred, args) not in added:
            state.delete(pred, args)
    for pred, args in adds:
        state.add(pred, args)


def goal_reached(state: State, world: World) -> bool:
    return Solver(state, world, world.goal_types).holds(world.goal, {})
