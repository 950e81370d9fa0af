"""The interface every policy offers the rollout: one call answers every active episode's turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from evoh.harness.episode import TurnTokens, TurnView


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None  # the policy could not answer (e.g. an API out of retries): the episode stops
    label: str | None = None  # another policy's answer to the same view, recorded as the turn's training target
    truncated: bool = False  # ``text`` is the start of a longer reply, cut before parsing
    tokens: TurnTokens | None = None  # the token ids sampled, from a policy asked to keep them (GRPO trains on them)


class Policy(Protocol):
    def identity(self) -> dict[str, Any]:
        """What produced the responses (recorded with every episode, part of its fingerprint)."""

    def act(self, views: list[TurnView]) -> list[Completion]:
        """One response per view, in order; batched models answer them in one forward pass. A policy asked to
        keep its tokens puts them on each completion; the episode keeps them beside the turn."""

    def forget(self, key: Any) -> None:
        """The episode ``key`` is over; drop anything kept for it."""
