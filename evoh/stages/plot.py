"""`evoh plot`: the dynamics of a GRPO run as PNG files, from ``grpo/metrics.jsonl`` and ``validation.jsonl``.

``annealing.png`` is the paper's harness-annealing curve: meta-actions per episode against the update,
one line per verb, with the diversity bonus's weight λ_div beside it. ``success.png`` shows success
of the training rollouts (and, with ``grpo.greedy_rollout``, of their greedy ones) and of the greedy
validation episodes, the mean reward, and, where validation measured it, how far the policy has moved
from the reference on held-out responses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoh.errors import EvohError
from evoh.harness.turns import META_VERBS
from evoh.workspace import Workspace, read_jsonl


def load_curves(workspace: Workspace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    directory = workspace.path("grpo")
    metrics_file = directory / "metrics.jsonl"
    if not metrics_file.exists() or not metrics_file.stat().st_size:
        raise EvohError(f"{metrics_file} is missing or empty: no GRPO update has finished here", hint=f"run `evoh grpo -w {workspace.root}` first")
    metrics = read_jsonl(metrics_file).records
    validation_file = directory / "validation.jsonl"
    validation = read_jsonl(validation_file).records if validation_file.exists() else []
    return metrics, validation


def run(workspace: Workspace, out: Path | None = None) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics, validation = load_curves(workspace)
    out = Path(out) if out else workspace.path("grpo")
    out.mkdir(parents=True, exist_ok=True)
    updates = [m["update"] for m in metrics]  # x = updates done before the rollouts were played

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for verb in META_VERBS:
        left.plot(updates, [m["meta_per_episode"][verb] for m in metrics], label=verb)
    left.plot(updates, [m["meta_actions"] for m in metrics], color="black", linewidth=2, label="all meta-actions")
    if validation:
        left.plot([v["update"] for v in validation], [v["meta_actions"] for v in validation], "k--o", markersize=3, label="validation (greedy)")
    left.set_xlabel("update")
    left.set_ylabel("meta-actions per episode")
    left.set_title("Harness annealing")
    left.legend(fontsize=8)
    right.plot(updates, [m["lambda_div"] for m in metrics], color="tab:purple", label="λ_div (diversity weight)")
    right.plot(updates, [m["invalid_rate"] for m in metrics], color="tab:red", label="invalid share of turns")
    right.set_xlabel("update")
    right.set_ylim(0, max(1.05, max(m["lambda_div"] or 0 for m in metrics) * 1.05))
    right.set_title("Diversity weight and invalid turns")
    right.legend(fontsize=8)
    fig.tight_layout()
    annealing = out / "annealing.png"
    fig.savefig(annealing, dpi=120)
    plt.close(fig)

    drift = [v for v in validation if v.get("drift")]
    fig, panels = plt.subplots(1, 3 if drift else 2, figsize=(18 if drift else 12, 4.2))
    left, right = panels[0], panels[1]
    left.plot(updates, [100 * m["success"] for m in metrics], label="training rollouts")
    greedy = [m for m in metrics if m.get("greedy")]
    if greedy:
        left.plot([m["update"] for m in greedy], [100 * m["greedy"]["success"] for m in greedy], "-s", markersize=3, label="their greedy rollouts")
    if validation:
        left.plot([v["update"] for v in validation], [100 * v["success"] for v in validation], "-o", markersize=3, label="validation (greedy)")
    left.set_xlabel("update")
    left.set_ylabel("success (%)")
    left.set_ylim(-2, 102)
    left.set_title("Success")
    left.legend(fontsize=8)
    means = [m["reward_mean"] for m in metrics]
    stds = [m["reward_std"] for m in metrics]
    right.plot(updates, means, label="mean reward")
    right.fill_between(updates, [a - b for a, b in zip(means, stds)], [a + b for a, b in zip(means, stds)], alpha=0.2)
    right.set_xlabel("update")
    right.set_title("Reward (mean ± std over rollouts)")
    right.legend(fontsize=8)
    if drift:
        moved, kl = panels[2], panels[2].twinx()
        done = [v["update"] for v in drift]
        moved.plot(done, [100 * v["drift"]["flips"] for v in drift], "-o", markersize=3, color="tab:blue")
        kl.plot(done, [v["drift"]["kl"] for v in drift], "--s", markersize=3, color="tab:orange")
        moved.set_xlabel("update")
        moved.set_ylabel("most likely token changed (% of tokens)", color="tab:blue")
        kl.set_ylabel("KL to the reference per token", color="tab:orange")
        moved.set_title("Drift on refine's held-out responses")
    fig.tight_layout()
    success = out / "success.png"
    fig.savefig(success, dpi=120)
    plt.close(fig)

    last = metrics[-1]
    return {
        "annealing": str(annealing),
        "success": str(success),
        "updates": len(metrics),
        "meta_actions": {"first": metrics[0]["meta_actions"], "last": last["meta_actions"]},
        "train_success": {"first": metrics[0]["success"], "last": last["success"]},
        "greedy_success": {"first": greedy[0]["greedy"]["success"], "last": greedy[-1]["greedy"]["success"]} if greedy else None,
        "validation_success": {"first": validation[0]["success"], "last": validation[-1]["success"]} if validation else None,
        "drift": {"first": drift[0]["drift"], "last": drift[-1]["drift"]} if drift else None,
    }
