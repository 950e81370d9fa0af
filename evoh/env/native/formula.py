"""Preconditions and goals as small node objects that test themselves against a state or find the bindings that
make them true.

A ``Context`` carries the state, each variable's type and each type's objects. ``solve`` yields bindings
(variable -> object) that extend the one given and make the node true, possibly more than once. Conjunctions
check at once every part whose variables are all bound and otherwise grow the binding through the atom with the
fewest matching facts, so a precondition is matched from its most constrained end whatever order it is
written in.
"""

from __future__ import annotations

from itertools import product


class Context:
    def __init__(self, state, members: dict, object_types: dict[str, str], types: dict[str, str]) -> None:
        self.state = state
        self.members = members
        self.object_types = object_types
        self.types = types

    def domain(self, var: str):
        allowed = self.members.get(self.types[var], ())
        return self.object_types.keys() if allowed is None else allowed

    def allowed(self, var: str):
        return self.members.get(self.types[var], ())


def _unbound_product(ctx: Context, node, b: dict):
    unbound = sorted(v for v in node.free if v not in b)
    for values in product(*map(ctx.domain, unbound)):
        extended = {**b, **dict(zip(unbound, values))}
        if node.holds(ctx, extended):
            yield extended


class Atom:
    __slots__ = ("pred", "args", "is_var", "free")
    test_only = False

    def __init__(self, pred: str, args: tuple[str, ...]) -> None:
        self.pred, self.args = pred, args
        self.is_var = tuple(a.startswith("?") for a in args)
        self.free = frozenset(a for a in args if a.startswith("?"))

    def ground(self, b: dict) -> tuple[str, ...]:
        return tuple(b[a] if v else a for a, v in zip(self.args, self.is_var))

    def holds(self, ctx: Context, b: dict) -> bool:
        return ctx.state.holds(self.pred, self.ground(b))

    def known(self, b: dict) -> tuple:
        return tuple([b.get(a) if v else a for a, v in zip(self.args, self.is_var)])

    def solve(self, ctx: Context, b: dict):
        known = self.known(b)
        if None not in known:
            if ctx.state.holds(self.pred, known):
                yield b
            return
        for fact in tuple(ctx.state.candidates(self.pred, known)):
            extended = dict(b)
            for var, want, obj in zip(self.args, known, fact):
                if want is not None:
                    if want != obj:
                        break
                    continue
                have = extended.get(var)
                if have is None:
                    allowed = ctx.allowed(var)
                    if allowed is not None and obj not in allowed:
                        break
                    extended[var] = obj
                elif have != obj:
                    break
            else:
                yield extended


class _Junction:
    """Formulas over parts: their free variables are the parts' together."""

    __slots__ = ("parts", "free")
    test_only = False

    def __init__(self, parts) -> None:
        self.parts = tuple(parts)
        self.free = frozenset().union(*(p.free for p in self.parts))


class And(_Junction):
    __slots__ = ()

    def holds(self, ctx: Context, b: dict) -> bool:
        return all(p.holds(ctx, b) for p in self.parts)

    def solve(self, ctx: Context, b: dict):
        return _conjoin(ctx, self.parts, b)


def _conjoin(ctx: Context, parts, b: dict):
    pending = []
    for part in parts:
        if part.free.issubset(b):
            if not part.holds(ctx, b):
                return
        else:
            pending.append(part)
    if not pending:
        yield b
        return
    best, cost = None, None
    for part in pending:
        if isinstance(part, Atom):
            known = part.known(b)
            size = len(ctx.state.candidates(part.pred, known))
            if cost is None or size < cost:
                best, cost = part, size
    if best is None:
        best = next((p for p in pending if not p.test_only), pending[0])
    rest = [p for p in pending if p is not best]
    if not rest:
        yield from best.solve(ctx, b)
        return
    for extended in best.solve(ctx, b):
        yield from _conjoin(ctx, rest, extended)


class Or(_Junction):
    __slots__ = ()

    def holds(self, ctx: Context, b: dict) -> bool:
        return any(p.holds(ctx, b) for p in self.parts)

    def solve(self, ctx: Context, b: dict):
        for part in self.parts:
            yield from part.solve(ctx, b)


class Exists:
    __slots__ = ("variables", "body", "free")
    test_only = False

    def __init__(self, variables, body) -> None:
        self.variables, self.body = tuple(variables), body
        self.free = body.free - {name for name, _ in self.variables}

    def holds(self, ctx: Context, b: dict) -> bool:
        return next(iter(self.body.solve(ctx, b)), None) is not None

    def solve(self, ctx: Context, b: dict):
        return self.body.solve(ctx, b)


class Forall:
    __slots__ = ("variables", "body", "free")
    test_only = True

    def __init__(self, variables, body) -> None:
        self.variables, self.body = tuple(variables), body
        self.free = body.free - {name for name, _ in self.variables}

    def holds(self, ctx: Context, b: dict) -> bool:
        names = [name for name, _ in self.variables]
        return all(self.body.holds(ctx, {**b, **dict(zip(names, values))}) for values in product(*map(ctx.domain, names)))

    def solve(self, ctx: Context, b: dict):
        return _unbound_product(ctx, self, b)


class Not:
    __slots__ = ("body", "free")
    test_only = True

    def __init__(self, body) -> None:
        self.body, self.free = body, body.free

    def holds(self, ctx: Context, b: dict) -> bool:
        return not self.body.holds(ctx, b)

    def solve(self, ctx: Context, b: dict):
        return _unbound_product(ctx, self, b)


class Equal:
    __slots__ = ("left", "right", "free")
    test_only = True

    def __init__(self, left: str, right: str) -> None:
        self.left, self.right = left, right
        self.free = frozenset(a for a in (left, right) if a.startswith("?"))

    def holds(self, ctx: Context, b: dict) -> bool:
        return b.get(self.left, self.left) == b.get(self.right, self.right)

    def solve(self, ctx: Context, b: dict):
        return _unbound_product(ctx, self, b)


class Imply:
    __slots__ = ("condition", "then", "free")
    test_only = True

    def __init__(self, condition, then) -> None:
        self.condition, self.then = condition, then
        self.free = condition.free | then.free

    def holds(self, ctx: Context, b: dict) -> bool:
        return not self.condition.holds(ctx, b) or self.then.holds(ctx, b)

    def solve(self, ctx: Context, b: dict):
        return _unbound_product(ctx, self, b)


def build(f: tuple):
    """The node for a formula tuple (see ``pddl``), its quantified variables already renamed apart."""
    head = f[0]
    if head == "atom":
        return Atom(f[1], f[2])
    if head == "and":
        return And(build(p) for p in f[1])
    if head == "or":
        return Or(build(p) for p in f[1])
    if head == "not":
        return Not(build(f[1]))
    if head == "=":
        return Equal(f[1], f[2])
    if head == "imply":
        return Imply(build(f[1]), build(f[2]))
    if head == "exists":
        return Exists(f[1], build(f[2]))
    if head == "forall":
        return Forall(f[1], build(f[2]))
    raise ValueError(f"unknown formula {head}")
