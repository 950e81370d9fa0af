"""What evoh's figures share: the Wilson interval of a success rate, whole-number update axes, legends kept off
the data, one palette per kind of series, and titles that name the run and its recipe."""

from __future__ import annotations

import tomllib
from math import sqrt
from pathlib import Path
from typing import Any

import orjson

from evoh.harness.turns import META_VERBS
from evoh.runs.key import run_settings

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval

# one palette per kind of series, so that within a figure no colour means two things
VERB_COLORS = dict(zip(META_VERBS, ("#1b9e77", "#d95f02", "#7570b3", "#e7298a")))  # ColorBrewer Dark2
VERB_MARKERS = dict(zip(META_VERBS, ("o", "s", "^", "D")))
SERIES_COLORS = {  # the GRPO figures' other series: none of them a verb's colour, none repeated within a figure
    "lambda_div": "#56b4e9",  # annealing.png, beside the verbs
    "invalid": "#a6761d",
    "rollouts": "#0072b2",  # success.png
    "greedy": "#e69f00",
    "validation": "#009e73",
    "reward": "#cc79a7",
    "flips": "#332288",
    "kl": "#999933",
}


def run_colors(count: int) -> list[str]:
    """One blue per run, light to dark in the order given (base, sft, grpo reads as a progression): no hue the
    verbs use, so a chart of runs beside a chart of verbs never shares a colour."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    blues = colormaps["Blues"]
    return [to_hex(blues(0.45 + 0.5 * i / max(1, count - 1))) for i in range(count)] if count > 1 else [to_hex(blues(0.7))]


def wilson(won: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a success rate ``won``/``n`` (95% by default); None when nothing was played.
    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n wins."""
    if n <= 0:
        return None
    p = won / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def wins(success: float, episodes: int, errors: int = 0) -> tuple[int, int]:
    """Wins and finished episodes from a recorded success rate (a share of the finished episodes)."""
    n = max(0, episodes - errors)
    return round(success * n), n


def integer_updates(axis) -> None:
    """Update numbers are whole: ticks only at integers, and the axis labelled by what the number counts."""
    from matplotlib.ticker import MaxNLocator

    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_xlabel("updates done")


def legend_outside(axis, handles=None, labels=None, title: str | None = None) -> None:
    """The legend below the panel, where it can never cover a line; long labels one to a row."""
    if handles is None:
        handles, labels = axis.get_legend_handles_labels()
    columns = 1 if max((len(label) for label in labels), default=0) > 28 else 2
    axis.legend(
        handles,
        labels,
        title=title,
        fontsize=8,
        title_fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.13),
        ncol=columns,
        frameon=False,
    )


def grpo_recipe(workspace_root: Path) -> str:
    """A GRPO run's recipe in a line: its world, schedule, step size, horizon and KL, read from grpo/stage.json
    (written when the run ends), else from the run's key in grpo/run.json (written when it starts: the settings
    it was given on the command line too, less the number of updates, which may grow), else from the
    workspace's evoh.toml."""
    config, world = None, None
    stage = workspace_root / "grpo" / "stage.json"
    if stage.is_file():
        record = orjson.loads(stage.read_bytes())
        data = str(record.get("data") or "")  # "minihouse:<size>", or the ALFWorld data folder
        config, world = record.get("config"), ("minihouse" if data.startswith("minihouse:") else "alfworld" if data else None)
    started = run_settings(workspace_root / "grpo")
    recipe = _workspace_recipe(workspace_root)
    config = config or started.get("grpo") or recipe.get("grpo")
    world = world or (started.get("env") or {}).get("kind") or recipe.get("env", {}).get("kind")
    if not config:
        return "recipe not recorded (no grpo/stage.json, grpo/run.json or evoh.toml)"
    shape = f"{config['tasks_per_update']} tasks × {config['group_size']} rollouts"
    updates = config.get("updates")
    parts = [world or "alfworld", f"GRPO {updates} updates × {shape}" if updates else f"GRPO {shape} an update"]
    parts.append(f"lr {config['lr']:g}, horizon {config['max_steps']}, KL {config['kl']:g}")
    return ", ".join(parts)


def eval_recipe(summary: dict[str, Any], run_folder: Path | None) -> str:
    """An eval run's recipe in a line: world, split, harness mode, horizon and decoding."""
    protocol = summary.get("protocol") or {}
    kind = (run_settings(run_folder).get("env") or {}).get("kind") if run_folder is not None else None
    policy = summary.get("policy") or {}
    sampling = policy.get("sampling") or {}
    decoding = "" if not sampling else "greedy" if sampling.get("temperature") == 0 else f"T={sampling.get('temperature'):g}"
    if sampling.get("guided"):
        decoding += " guided"
    parts = [
        kind or "",
        summary.get("split", ""),
        protocol.get("mode", ""),
        f"horizon {protocol['max_steps']}" if "max_steps" in protocol else "",
    ]
    return " ".join(p for p in parts[:2] if p) + ", " + ", ".join(p for p in [*parts[2:], decoding] if p)


def _workspace_recipe(root: Path) -> dict[str, Any]:
    file = root / "evoh.toml"
    try:
        return tomllib.loads(file.read_text()) if file.is_file() else {}
    except (OSError, tomllib.TOMLDecodeError):
        return {}
