"""A native ALFWorld engine: plays a ``game.tw-pddl`` from its PDDL and its text grammar, without TextWorld."""

from evoh.env.native.engine import NativeEngine

__all__ = ["NativeEngine"]
