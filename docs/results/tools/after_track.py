"""Whether a policy reads Belief's answer, behind docs/results/2026-12-08-minihouse-lost-rollouts-and-search-track.md:
after each `track` whose answer listed places not yet visited, does the next `go to` pick one of them?

    python docs/results/tools/after_track.py WS/eval/NAME WS/collect [...]

For each such turn it counts the `go to` steps to a listed place, and, as the level a policy that ignored the
answer would reach by choosing uniformly, the share of the turn's admissible `go to` commands that lead to one.
Each folder or episodes file (an evaluation's, the teacher's in collect/) is read as `evoh show` reads it: its
current records.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from statistics import fmean

from evoh.inspection.episodes import prompt_sections, read_episodes

LEFT = re.compile(r"not yet visited: (.*)\.")  # the last line of Belief's answer to `track`


def turns_after_track(episode: dict) -> list[tuple[bool, float]]:
    """(went to a listed place, the share of admissible `go to`s that would have) for each `go to` that follows a
    `track` whose answer named unvisited places."""
    found = []
    trace = episode["trace"]
    for turn, after in zip(trace, trace[1:]):
        action = after.get("action") or ""
        if turn.get("verb") != "track" or not action.startswith("go to "):
            continue
        sections = prompt_sections(after["user"])
        listed = LEFT.search(sections.get("Harness result", ""))
        if not listed or listed.group(1) == "none":
            continue
        left = set(listed.group(1).split(", "))
        places = [c.removeprefix("go to ") for c in sections["Admissible commands"].split(", ") if c.startswith("go to ")]
        found.append((action.removeprefix("go to ") in left, sum(p in left for p in places) / len(places)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="evaluation or collect folders, or their episodes files")
    args = parser.parse_args()
    for name in args.paths:
        found = [x for e in read_episodes(name).current_records if not e.get("error") for x in turns_after_track(e)]
        if not found:
            print(f"{name}: no `go to` after a track that listed unvisited places")
            continue
        print(
            f"{name}: {len(found)} `go to` after such a track; to a listed place {fmean(x[0] for x in found):.1%} "
            f"(choosing uniformly among the admissible ones: {fmean(x[1] for x in found):.1%})"
        )


if __name__ == "__main__":
    main()
