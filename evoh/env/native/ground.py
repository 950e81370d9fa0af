"""Which actions can run now, and what running one changes, by the planner's rules.

An action can run with a binding of its parameters when its precondition holds (``exists``, ``or`` and the
rest read as in PDDL, variables ranging over the objects of their type) and when running it would change
something: the planner drops an effect that sets a literal the precondition already demands, and an action left
with no effect at all (going to the place one already stands at) is never offered. Parameters the precondition
leaves free range over their type.
"""

from __future__ import annotations

from itertools import product

from evoh.env.native.formula import Context
from evoh.env.native.logic import CompiledAction, World
from evoh.env.native.state import State

NO_CONDITION = ("and", ())


def _context(state: State, world: World, types: dict[str, str]) -> Context:
    return Context(state, world.members, world.object_types, types)


def applicable(state: State, world: World, action: CompiledAction):
    """Each distinct binding (parameter name -> object) of ``action`` that the planner offers now."""
    ctx = _context(state, world, action.variable_types)
    params = action.param_names
    seen = set()
    for b in action.node.solve(ctx, {}):
        if all(p in b for p in params):
            keys = [tuple(b[p] for p in params)]
        else:
            missing = [p for p in params if p not in b]
            keys = [
                tuple(b[p] if p in b else values[missing.index(p)] for p in params)
                for values in product(*(ctx.domain(p) for p in missing))
            ]
        for key in keys:
            if key in seen:
                continue
            seen.add(key)
            binding = dict(zip(params, key))
            if not action.may_be_noop or not _noop(ctx, action, binding):
                yield binding


def _noop(ctx: Context, action: CompiledAction, binding: dict[str, str]) -> bool:
    """Whether the planner drops every effect of the action for this binding (see ``_kept``)."""
    for effect, same in zip(action.effects, action.droppers):
        if effect.forall:
            return next(_kept(ctx, action, binding), None) is None
        args = tuple([binding.get(a, a) for a in effect.args])
        if not any(tuple([binding.get(a, a) for a in other]) == args for other in same):
            return False
    return True


def _ground_effects(ctx: Context, action: CompiledAction, binding: dict[str, str]):
    for effect, condition in zip(action.effects, action.conditions):
        names = [name for name, _ in effect.forall]
        for values in product(*(ctx.domain(n) for n in names)) if names else [()]:
            b = {**binding, **dict(zip(names, values))} if names else binding
            yield effect, condition, b, tuple(b.get(a, a) for a in effect.args)


def _kept(ctx: Context, action: CompiledAction, binding: dict[str, str]):
    """The effects the planner keeps for this binding: (positive, pred, args, condition node, binding)."""
    stated = {(pos, pred, tuple(binding.get(a, a) for a in args)) for pos, pred, args in action.literals}
    grounded = list(_ground_effects(ctx, action, binding))
    adds = {(e.pred, args, e.condition, frozenset(b.items())) for e, _, b, args in grounded if e.positive}
    for effect, condition, b, args in grounded:
        if not effect.positive and (effect.pred, args, effect.condition, frozenset(b.items())) in adds:
            continue  # an atom both deleted and added on the same condition stays true
        if (effect.positive, effect.pred, args) in stated:
            continue  # sets what the precondition already demands
        yield effect.positive, effect.pred, args, (None if effect.condition == NO_CONDITION else condition), b


def apply(state: State, world: World, action: CompiledAction, binding: dict[str, str]) -> None:
    """Run the action: every kept effect whose condition holds beforehand; an atom added wins over its deletion."""
    ctx = _context(state, world, action.variable_types)
    adds, deletes = [], []
    for positive, pred, args, condition, b in list(_kept(ctx, action, binding)):
        if condition is None or condition.holds(ctx, b):
            (adds if positive else deletes).append((pred, args))
    added = set(adds)
    for pred, args in deletes:
        if (pred, args) not in added:
            state.delete(pred, args)
    for pred, args in adds:
        state.add(pred, args)


def goal_reached(state: State, world: World) -> bool:
    return world.goal_node.holds(_context(state, world, world.goal_types), {})
