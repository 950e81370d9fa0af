"""One policy plays, another answers the same views: on-policy labels for imitation (DAgger).

A student trained only on the teacher's episodes has never seen the states its own mistakes lead to,
so one wrong turn tends to become a lost episode. Here the student drives the episodes, and every view
it reaches is also put to the teacher; the teacher's answer rides along as the turn's ``label``, which
`evoh refine` trains on instead of the student's own response (Ross et al., 2011, "DAgger"; ALFWorld's
BUTLER agent was trained this way).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evoh.harness.episode import TurnView
from evoh.policy.base import Completion, Policy


class LabelledPolicy:
    """``player`` acts; ``labeller``'s answer to every view is attached to the player's completion."""

    def __init__(self, player: Policy, labeller: Policy) -> None:
        self.player = player
        self.labeller = labeller

    def identity(self) -> dict[str, Any]:
        return {"policy": "labelled", "player": self.player.identity(), "labeller": self.labeller.identity()}

    def forget(self, key: Any) -> None:
        self.player.forget(key)
        self.labeller.forget(key)

    def act(self, views: list[TurnView]) -> list[Completion]:
        played = self.player.act(views)
        labels = self.labeller.act(views)
        return [replace(p, label=None if label.error else label.text) for p, label in zip(played, labels, strict=True)]
