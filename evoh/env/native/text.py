"""Writing text from the grammar: the intro, each command's words and each action's feedback.

A context is the objects bound so far, keyed by the grammar's placeholders ((name, type) -> object id). A tag
expands to its first rule whose condition has an answer in the context; ``{...| query}`` runs once per answer,
each answer extending the context; expressions read the bound objects' entities by placeholder name.
"""

from __future__ import annotations

from evoh.env.native.grammar import Each, Eval, GrammarError, ListOf, Tag, Text
from evoh.env.native.names import Entity
from evoh.env.native.state import State


class Writer:
    def __init__(self, rules: dict, state: State, entities: dict[str, Entity]) -> None:
        self.rules = rules
        self.state = state
        self.entities = entities

    def write(self, symbols: tuple, context: dict[tuple[str, str], str]) -> str:
        return "".join(self._symbol(symbol, context) for symbol in symbols)

    def _symbol(self, symbol, context) -> str:
        if isinstance(symbol, Text):
            return symbol.text
        if isinstance(symbol, Tag):
            return self.expand(symbol.tag, context)
        if isinstance(symbol, Each):
            return "".join(self._symbol(symbol.expression, c) for c in self._contexts(symbol, context))
        if isinstance(symbol, ListOf):
            items = [self._symbol(symbol.each.expression, c) for c in self._contexts(symbol.each, context)]
            if not items:
                return self.expand("list_empty", context)
            if len(items) == 1:
                return items[0]
            separator = self.expand("list_separator", context)
            return separator.join(items[:-1]) + self.expand("list_last_separator", context) + items[-1]
        if isinstance(symbol, Eval):
            return str(self._value(symbol.code, context, symbol.source))
        raise GrammarError(f"unknown symbol {symbol!r}")

    def _contexts(self, each: Each, context):
        return [context] if each.query is None else self.state.answers(each.query, context)

    def expand(self, tag: str, context) -> str:
        rules = self.rules.get(tag)
        if not rules:
            raise GrammarError(f"the grammar has no rule for #{tag}#")
        for rule in rules:
            if rule.condition is None or self.state.any_answer(rule.condition, context):
                return self.write(rule.rhs, context)
        raise GrammarError(f"no rule for #{tag}# applies")

    def _value(self, code: tuple, context, source: str):
        kind = code[0]
        if kind == "const":
            return code[1]
        if kind == "var":
            found = None
            for (name, _), obj in context.items():
                if name == code[1]:
                    found = obj  # the placeholder bound last wins, as later bindings overwrite earlier ones
            if found is None or found not in self.entities:
                raise GrammarError(f"{{{source}}} names {code[1]!r}, which nothing binds here")
            return self.entities[found]
        if kind == "field":
            return getattr(self._value(code[1], context, source), code[2])
        if kind == "add":
            return self._value(code[1], context, source) + self._value(code[2], context, source)
        if kind == "or":
            value = None
            for part in code[1]:
                value = self._value(part, context, source)
                if value:
                    return value
            return value
        if kind == "and":
            value = None
            for part in code[1]:
                value = self._value(part, context, source)
                if not value:
                    return value
            return value
        raise GrammarError(f"unknown expression {source}")
