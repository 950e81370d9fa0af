"""The loss breakdown behind docs/results/2026-12-07-minihouse-optimizer-steps.md: where an evaluation's lost
episodes of a pick-and-look task stopped, read from each episode's last belief (what the harness recorded the
episode had seen and held), and what the episodes that never saw their object spent their steps on.

    python docs/results/tools/losses.py WS/eval/NAME [...]

Lost episodes are the current records that finished without a win (engine errors left out). Kinds: the object
never seen; seen, with another object held at the end; seen, nothing held; held. For the never-seen kind:
receptacles visited of the room's, `go to` steps back to a receptacle already visited, `use` steps (the lamp),
and how many episodes' last ten environment steps are mostly (six or more) `use`, or all `go to` between at
most two receptacles.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from statistics import fmean, median

from evoh.harness.turns import META_VERBS
from evoh.inspection.episodes import outcome, read_episodes


def named(items, name: str) -> bool:
    return any(item.split()[0] == name for item in items)


def kind(episode: dict) -> str:
    belief, goal = episode["belief"], episode["goal"]
    held = belief.get("inventory", [])
    if named(held, goal["object"]):
        return "held"
    if not named(belief.get("objects", {}), goal["object"]):
        return "never seen"
    return "seen, another held" if held else "seen, nothing held"


def search_steps(episode: dict) -> tuple[int, int, bool, bool]:
    actions = [s["action"] for s in episode["trace"] if s.get("action") and s["action"].split()[0] not in META_VERBS]
    visited: set[str] = set()
    back = uses = 0
    for action in actions:
        if action.startswith("go to "):
            back += action in visited
            visited.add(action)
        uses += action.startswith("use ")
    last = actions[-10:]
    mostly_use = sum(a.startswith("use ") for a in last) >= 6
    walk = all(a.startswith("go to ") for a in last) and len(set(last)) <= 2
    return back, uses, mostly_use, walk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluations", nargs="+", type=Path, help="evaluation directories (with episodes.jsonl)")
    args = parser.parse_args()
    for evaluation in args.evaluations:
        lost = [e for e in read_episodes(evaluation).current_records if outcome(e) == "lost"]
        kinds = [kind(e) for e in lost]
        counts = Counter(kinds)
        print(f"{evaluation}: {len(lost)} lost; " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts)))
        searches = [e for e, k in zip(lost, kinds, strict=True) if k == "never seen"]
        if not searches:
            continue
        steps = [search_steps(e) for e in searches]
        visited = [len(e["belief"]["visited"]) for e in searches]
        rooms = [len(e["belief"]["receptacles"]) for e in searches]
        print(
            f"  never seen: visited {fmean(visited):.1f} (median {median(visited)}) of {fmean(rooms):.1f} receptacles; "
            f"per episode {fmean(s[0] for s in steps):.1f} walks back, {fmean(s[1] for s in steps):.1f} uses; last ten "
            f"steps mostly use in {sum(s[2] for s in steps)}, a two-place walk in {sum(s[3] for s in steps)}"
        )


if __name__ == "__main__":
    main()
