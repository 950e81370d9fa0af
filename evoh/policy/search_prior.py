"""Where each object type tends to be: counts learned from the train split's games.

The expert's own search ranking before its Experience bank knows anything. It is a statistic over
training games (ALFWorld's game files, MiniHouse's generated rooms), like a model's weights, never a
look at the game being played.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from evoh.env.types import Task
from evoh.env.world import placement_counts


class SearchPrior:
    def __init__(self, counts: dict[str, dict[str, int]] | None = None) -> None:
        self.counts: dict[str, Counter] = defaultdict(Counter)
        for kind, places in (counts or {}).items():
            self.counts[kind].update(places)
        self.popularity: Counter = Counter()
        for places in self.counts.values():
            self.popularity.update(places)

    @classmethod
    def from_games(cls, tasks: list[Task]) -> SearchPrior:
        return cls(placement_counts(tasks))

    def score(self, kind: str, place_type: str) -> float:
        """P(place type | object type), with a small share for receptacles that hold many things."""
        places = self.counts.get(kind)
        total = sum(places.values()) if places else 0
        popular = self.popularity.get(place_type, 0) / (sum(self.popularity.values()) or 1)
        return (places.get(place_type, 0) / total if total else 0.0) + 0.01 * popular

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {k: dict(sorted(v.items())) for k, v in sorted(self.counts.items())}
