"""The facts of one running game, and the grammar's queries over them.

``true`` holds the facts that hold now (the planner's state, static facts included). ``gone`` holds the facts
an action has made false since the start: the grammar can ask for them as ``not_<pred>`` (``not_inreceptacle``
is how the room description finds an object taken from a receptacle and dropped beside it).

A query is answered the way TextWorld answers it, which fixes the order of every list the player reads: atoms
are matched in order; each atom's facts are tried type signature by type signature (the atom's own types, then
their subtypes breadth-first) and, within one signature, in sorted order of their arguments; a placeholder
already bound must match and a new one may not take an object another placeholder holds.
"""

from __future__ import annotations

from collections import defaultdict

from evoh.env.native.logic import TypeTree

NEGATED = "not_"


class State:
    def __init__(self, init, object_types: dict[str, str], types: TypeTree) -> None:
        self.object_types = object_types
        self.types = types
        self.true: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        self.gone: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        self._index: dict[tuple[str, int, str], set[tuple[str, ...]]] = defaultdict(set)
        self._sorted: dict[str, dict[tuple[str, ...], list[tuple[str, ...]]]] = {}
        self.version: dict[str, int] = defaultdict(int)  # how often each predicate's true facts changed
        for pred, args in init:
            self.add(pred, args)

    # --- the planner's state -----------------------------------------------------------------------------

    def holds(self, pred: str, args: tuple[str, ...]) -> bool:
        facts = self.true.get(pred)
        return facts is not None and args in facts

    def candidates(self, pred: str, args: tuple[str | None, ...]):
        """The true facts of ``pred`` that can match ``args`` (None: any), narrowed by the first known argument."""
        for i, arg in enumerate(args):
            if arg is not None:
                return self._index.get((pred, i, arg), ())
        return self.true.get(pred, ())

    def add(self, pred: str, args: tuple[str, ...]) -> None:
        facts = self.true[pred]
        if args not in facts:
            facts.add(args)
            for i, arg in enumerate(args):
                self._index[(pred, i, arg)].add(args)
            self._sorted.pop(pred, None)
            self.version[pred] += 1
        if args in self.gone.get(pred, ()):
            self.gone[pred].discard(args)
            self._sorted.pop(NEGATED + pred, None)

    def delete(self, pred: str, args: tuple[str, ...]) -> None:
        facts = self.true.get(pred)
        if facts is not None and args in facts:
            facts.discard(args)
            for i, arg in enumerate(args):
                self._index[(pred, i, arg)].discard(args)
            self._sorted.pop(pred, None)
            self.version[pred] += 1
        if args not in self.gone[pred]:
            self.gone[pred].add(args)
            self._sorted.pop(NEGATED + pred, None)

    # --- the grammar's queries ---------------------------------------------------------------------------

    def _by_signature(self, pred: str) -> dict[tuple[str, ...], list[tuple[str, ...]]]:
        found = self._sorted.get(pred)
        if found is None:
            facts = self.gone.get(pred[len(NEGATED) :], ()) if pred.startswith(NEGATED) else self.true.get(pred, ())
            found = defaultdict(list)
            for args in sorted(facts):
                found[tuple(self.object_types[a] for a in args)].append(args)
            self._sorted[pred] = found
        return found

    def _in_order(self, pred: str, params, signatures, mapping):
        """The facts of ``pred`` to try, in the order TextWorld tries them; where every placeholder is already
        bound only the one fact that can match is looked up."""
        known = [mapping.get(p) for p in params]
        if None not in known and not pred.startswith(NEGATED):
            args = tuple(known)
            if args in self.true.get(pred, ()) and tuple(self.object_types[a] for a in args) in signatures:
                return (args,)
            return ()
        if not pred.startswith(NEGATED):
            for i, obj in enumerate(known):
                if obj is not None:
                    # the few facts with this argument, put in the order a full scan would meet them
                    rank = {signature: n for n, signature in enumerate(signatures)}
                    found = []
                    for args in self._index.get((pred, i, obj), ()):
                        n = rank.get(tuple(self.object_types[a] for a in args))
                        if n is not None:
                            found.append((n, args))
                    found.sort()
                    return [args for _, args in found]
        by_signature = self._by_signature(pred)
        return [args for signature in signatures for args in by_signature.get(signature, ())]

    def answers(self, query: tuple, mapping: dict[tuple[str, str], str]) -> list[dict[tuple[str, str], str]]:
        """Every way to bind the query's placeholders, extending ``mapping`` ((name, type) -> object)."""
        return list(self._answers(query, mapping))

    def any_answer(self, query: tuple, mapping: dict[tuple[str, str], str]) -> bool:
        return next(self._answers(query, mapping), None) is not None

    def _answers(self, query: tuple, mapping: dict[tuple[str, str], str]):
        mapping = dict(mapping)
        return self._match(query, 0, mapping, set(mapping.values()))

    def _match(self, query, depth, mapping, used):
        if depth == len(query):
            yield dict(mapping)
            return
        pred, params = query[depth]
        signatures = self.types.signatures(tuple(kind for _, kind in params))
        for args in self._in_order(pred, params, signatures, mapping):
            bound = []
            for placeholder, obj in zip(params, args):
                existing = mapping.get(placeholder)
                if existing is None:
                    if obj in used:
                        break
                    mapping[placeholder] = obj
                    used.add(obj)
                    bound.append(placeholder)
                elif existing != obj:
                    break
            else:
                yield from self._match(query, depth + 1, mapping, used)
            for placeholder in bound:
                used.discard(mapping.pop(placeholder))
