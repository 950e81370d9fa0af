"""An offline estimate behind docs/results/2026-12-07-minihouse-optimizer-steps.md: which way a GRPO update would
push the policy's harness calls per turn had every harness call cost ``lam`` more reward, for each choice of the
groups and rollouts it trains on.

    python docs/results/tools/call_charge.py WS/grpo/rollouts.jsonl [...] --lam 0 0.1 0.3 1

Each rollout's recorded reward is charged ``lam`` per harness call, advantages are recomputed within each game's
group as evoh's GRPO computes them (std-normalised), and the update's selection applied
(``grpo.train_groups``, ``grpo.train_rollouts``). Every token of a trained rollout moves with its advantage, so
to first order the share of turns that call the harness moves with

    push = sum_i A_i (calls_i - p turns_i) / sum_i |A_i| turns_i

over the trained rollouts, ``p`` the calls per turn the update's rollouts played: below 0, the update lowers
the rate. The estimate ignores which states the turns are in, and the rollouts were played by a policy trained
with the recorded reward, not the charged one.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from statistics import fmean

from evoh.grpo.objective import group_advantages, groups_to_train, rollouts_to_train
from evoh.workspace import read_jsonl


def calls(rollout: dict) -> int:
    return sum(rollout["meta"].values())


def push(rollouts: list[dict], lam: float, groups: str, selection: str) -> float | None:
    rewards = [r["reward"] - lam * calls(r) for r in rollouts]
    tasks = [r["task"] for r in rollouts]
    advantages = group_advantages(rewards, tasks)
    kept = groups_to_train([r["won"] for r in rollouts], tasks, groups)
    chosen = rollouts_to_train(advantages, selection)
    played = sum(map(calls, rollouts)) / sum(r["turns"] for r in rollouts)
    num = den = 0.0
    for r, a, take in zip(rollouts, advantages, chosen, strict=True):
        if take and r["task"] in kept:
            num += a * (calls(r) - played * r["turns"])
            den += abs(a) * r["turns"]
    return num / den if den else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rollouts", nargs="+", help="grpo/rollouts.jsonl files; each file's updates count apart")
    parser.add_argument("--lam", type=float, nargs="+", default=[0.0, 0.1, 0.3, 1.0], help="charges per harness call")
    args = parser.parse_args()
    updates: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for path in args.rollouts:
        for r in read_jsonl(Path(path)).records:
            if "advantage" in r and not r.get("error"):
                updates[(path, r["update"])].append(r)
    print("λ per call  groups  rollouts    push: mean (range) over updates   updates lowering the rate")
    for lam in args.lam:
        for groups in ("won", "all"):
            for selection in ("above_mean", "all"):
                values = [v for rs in updates.values() if (v := push(rs, lam, groups, selection)) is not None]
                lowering = sum(v < 0 for v in values)
                print(
                    f"{lam:<11} {groups:<7} {selection:<11} {fmean(values):+.4f} ({min(values):+.4f} .. "
                    f"{max(values):+.4f})        {lowering}/{len(values)}"
                )


if __name__ == "__main__":
    main()
