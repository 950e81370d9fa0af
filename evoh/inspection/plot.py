"""`evoh plot`: the dynamics of a GRPO run as PNG files, from ``grpo/metrics.jsonl`` and ``validation.jsonl``.

``annealing.png`` is the paper's harness-annealing curve: meta-actions per episode against the update,
one line per verb, with the diversity bonus's weight λ_div beside it. ``success.png`` shows success
of the training rollouts (and, with ``grpo.greedy_rollout``, of their greedy ones) and of the greedy
validation episodes, each with its number of episodes and a 95% Wilson interval, the mean reward, and,
where validation measured it, how far the policy has moved from the reference on held-out responses.
Every figure's title names the run (its workspace) and its recipe.
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
        raise EvohError(
            f"{metrics_file} is missing or empty: no GRPO update has finished here",
            hint=f"run `evoh grpo -w {workspace.root}` first",
        )
    metrics = read_jsonl(metrics_file).records
    validation_file = directory / "validation.jsonl"
    validation = read_jsonl(validation_file).records if validation_file.exists() else []
    return metrics, validation


def _success_band(axis, xs: list[int], rows: list[dict[str, Any]], color: str, marker: str, label: str) -> None:
    """Success in % with its 95% Wilson interval as a band; ``n`` (finished episodes per update) in the label."""
    from evoh.inspection.figures import wilson, wins

    counted = [wins(r["success"], r.get("episodes", 0), r.get("errors", 0)) for r in rows]
    ns = sorted({n for _, n in counted})
    sizes = f"n={ns[0]}" if len(ns) == 1 else f"n={ns[0]}–{ns[-1]}"
    axis.plot(
        xs,
        [100 * r["success"] for r in rows],
        marker=marker,
        markersize=4,
        color=color,
        label=f"{label}, {sizes} per update",
    )
    bands = [wilson(w, n) for w, n in counted]
    if all(b is not None for b in bands):
        axis.fill_between(xs, [100 * b[0] for b in bands], [100 * b[1] for b in bands], color=color, alpha=0.15, linewidth=0)


def title(workspace: Workspace) -> str:
    """Every figure's title: the run (its workspace's name) and its recipe."""
    from evoh.inspection.figures import grpo_recipe

    return f"run {workspace.root.resolve().name}: {grpo_recipe(workspace.root)}"


def annealing_figure(metrics: list[dict[str, Any]], validation: list[dict[str, Any]], heading: str):
    """Meta-actions per episode against the update, one line per verb, beside λ_div and the invalid share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evoh.inspection.figures import SERIES_COLORS, VERB_COLORS, VERB_MARKERS, integer_updates, legend_outside

    updates = [m["update"] for m in metrics]  # x = updates done before the rollouts were played
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.2), layout="constrained")
    # the total first and wide, each verb over it thin with its own marker, so that no line hides another
    left.plot(
        updates, [m["meta_actions"] for m in metrics], color="0.15", linewidth=3, alpha=0.35, label="all meta-actions", zorder=1
    )
    for verb in META_VERBS:
        left.plot(
            updates,
            [m["meta_per_episode"][verb] for m in metrics],
            color=VERB_COLORS[verb],
            marker=VERB_MARKERS[verb],
            markersize=4,
            linewidth=1.3,
            label=verb,
            zorder=2,
        )
    if validation:
        left.plot(
            [v["update"] for v in validation],
            [v["meta_actions"] for v in validation],
            color="0.15",
            linestyle="--",
            marker="x",
            markersize=5,
            label="all, validation (greedy)",
            zorder=3,
        )
    integer_updates(left)
    left.set_ylabel("meta-actions per episode (training rollouts)")
    left.set_ylim(bottom=0)
    left.set_title("Harness annealing")
    legend_outside(left)
    # λ_div wide and pale beneath, the invalid share thin on top: where both are 0, each stays visible
    lambdas = [m["lambda_div"] for m in metrics]
    right.plot(updates, lambdas, color=SERIES_COLORS["lambda_div"], linewidth=5, alpha=0.5, label="λ_div (diversity weight)")
    right.plot(
        updates,
        [m["invalid_rate"] for m in metrics],
        color=SERIES_COLORS["invalid"],
        marker="s",
        markersize=4,
        linewidth=1.3,
        label="invalid share of turns",
    )
    integer_updates(right)
    right.set_ylim(-0.02, max(1.05, max(m["lambda_div"] or 0 for m in metrics) * 1.05))
    right.set_title("Diversity weight and invalid turns")
    legend_outside(right)
    fig.suptitle(heading, fontsize=10)
    return fig


def success_figure(metrics: list[dict[str, Any]], validation: list[dict[str, Any]], heading: str):
    """Success (with n and 95% Wilson intervals), reward, and the drift from the reference where measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drift = [v for v in validation if v.get("drift")]
    fig, panels = plt.subplots(1, 3 if drift else 2, figsize=(18 if drift else 12, 5.2), layout="constrained")
    _success_panel(panels[0], metrics, validation)
    _reward_panel(panels[1], metrics)
    if drift:
        _drift_panel(panels[2], drift)
    fig.suptitle(heading, fontsize=10)
    return fig


def _success_panel(left, metrics: list[dict[str, Any]], validation: list[dict[str, Any]]) -> None:
    from evoh.inspection.figures import SERIES_COLORS, integer_updates, legend_outside

    _success_band(left, [m["update"] for m in metrics], metrics, SERIES_COLORS["rollouts"], "o", "training rollouts")
    greedy = [m for m in metrics if m.get("greedy")]
    if greedy:
        updates = [m["update"] for m in greedy]
        _success_band(left, updates, [m["greedy"] for m in greedy], SERIES_COLORS["greedy"], "s", "their greedy rollouts")
    if validation:
        updates = [v["update"] for v in validation]
        _success_band(left, updates, validation, SERIES_COLORS["validation"], "^", "validation (greedy)")
    integer_updates(left)
    left.set_ylabel("success (%)")
    left.set_ylim(-2, 102)
    left.set_title("Success (bands: 95% Wilson intervals)")
    legend_outside(left)


def _reward_panel(right, metrics: list[dict[str, Any]]) -> None:
    from evoh.inspection.figures import SERIES_COLORS, integer_updates, legend_outside

    updates = [m["update"] for m in metrics]
    means = [m["reward_mean"] for m in metrics]
    stds = [m["reward_std"] for m in metrics]
    right.plot(updates, means, color=SERIES_COLORS["reward"], marker="o", markersize=4, label="mean reward")
    low, high = [a - b for a, b in zip(means, stds)], [a + b for a, b in zip(means, stds)]
    right.fill_between(
        updates, low, high, color=SERIES_COLORS["reward"], alpha=0.2, linewidth=0, label="± one standard deviation"
    )
    integer_updates(right)
    right.set_title("Reward over an update's rollouts")
    legend_outside(right)


def _drift_panel(moved, drift: list[dict[str, Any]]) -> None:
    from evoh.inspection.figures import SERIES_COLORS, integer_updates, legend_outside

    kl = moved.twinx()
    done = [v["update"] for v in drift]
    changed = [100 * v["drift"]["flips"] for v in drift]
    flips = moved.plot(done, changed, "-o", markersize=4, color=SERIES_COLORS["flips"], label="most likely token changed")
    kls = kl.plot(
        done, [v["drift"]["kl"] for v in drift], "--s", markersize=4, color=SERIES_COLORS["kl"], label="KL to the reference"
    )
    integer_updates(moved)
    moved.set_ylabel("most likely token changed (% of tokens)", color=SERIES_COLORS["flips"])
    kl.set_ylabel("KL to the reference per token", color=SERIES_COLORS["kl"])
    moved.set_title("Drift on refine's held-out responses")
    legend_outside(moved, flips + kls, [line.get_label() for line in flips + kls])


def run(workspace: Workspace, out: Path | None = None) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics, validation = load_curves(workspace)
    out = Path(out) if out else workspace.path("grpo")
    out.mkdir(parents=True, exist_ok=True)
    heading = title(workspace)
    annealing, success = out / "annealing.png", out / "success.png"
    for figure, file in (
        (annealing_figure(metrics, validation, heading), annealing),
        (success_figure(metrics, validation, heading), success),
    ):
        figure.savefig(file, dpi=120)
        plt.close(figure)
    greedy = [m for m in metrics if m.get("greedy")]
    drift = [v for v in validation if v.get("drift")]
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
