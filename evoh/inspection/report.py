"""`evoh report`: several eval runs side by side, as a table, a PNG chart and a Markdown file.

Runs on the same split are also compared game by game with the first of them: which games changed hands
and whether that is more than chance (an exact McNemar test). A few dozen greedy episodes of two nearby
policies differ in many games both ways, so a gap of two or three games in success alone says little.
"""

from __future__ import annotations

from collections import Counter
from math import comb
from pathlib import Path
from typing import Any

import orjson

from evoh.errors import EvohError
from evoh.harness.turns import META_VERBS
from evoh.inspection.figures import eval_recipe
from evoh.records import EpisodeRecord
from evoh.runs.summary import latest
from evoh.workspace import read_jsonl

COLUMNS = ("pick", "look", "clean", "heat", "cool", "pick2")


def load_runs(paths: list[Path]) -> list[dict[str, Any]]:
    """Each path is an eval run folder (or its summary.json); the label is the run's name, with its workspace's
    where two runs share a name."""
    runs = []
    for path in paths:
        file = path if path.is_file() else path / "summary.json"
        if not file.is_file():
            raise EvohError(f"{path} holds no summary.json", hint="pass eval run folders: WS/eval/<name>")
        summary = orjson.loads(file.read_bytes())
        if "per_type" not in summary:
            raise EvohError(f"{file} is not an evaluation summary", hint="pass folders written by evoh eval")
        label = summary.get("name") or file.parent.name
        runs.append({"label": label, "summary": summary, "path": str(file)})
    names = Counter(run["label"] for run in runs)
    for run in runs:  # seeds' runs share a name: the workspace (WS in WS/eval/<name>) tells them apart
        if names[run["label"]] > 1:
            run["label"] = f"{Path(run['path']).parent.parent.parent.name}/{run['label']}"
    return runs


def game_outcomes(episodes: Path) -> dict[str, tuple[bool, tuple[str, ...]]] | None:
    """Each finished game of a run's episodes.jsonl: whether it was won and the actions taken, by task id;
    None where the run folder kept no episodes (a summary.json passed on its own)."""
    if not episodes.is_file():
        return None
    records = [EpisodeRecord.from_dict(r, str(episodes)) for r in read_jsonl(episodes).records]
    return {r.task.id: (r.won, tuple(t.action for t in r.trace)) for r in latest(records) if not r.error}


def mcnemar_p(gained: int, lost: int) -> float:
    """Exact two-sided McNemar p-value: how likely a split at least this uneven of the games that changed
    hands would be if either run were as likely to win each of them."""
    changed = gained + lost
    if changed == 0:
        return 1.0
    tail = sum(comb(changed, k) for k in range(min(gained, lost) + 1)) / 2**changed
    return min(1.0, 2 * tail)


def paired(base: dict[str, tuple[bool, tuple[str, ...]]], other: dict[str, tuple[bool, tuple[str, ...]]]) -> dict[str, Any]:
    """``other`` against ``base`` on the games both finished: games gained and lost, episodes played
    differently, and the McNemar p-value of the gains against the losses."""
    shared = base.keys() & other.keys()
    gained = sum(other[g][0] and not base[g][0] for g in shared)
    lost = sum(base[g][0] and not other[g][0] for g in shared)
    different = sum(other[g][1] != base[g][1] for g in shared)
    return {"games": len(shared), "gained": gained, "lost": lost, "played_differently": different, "p": mcnemar_p(gained, lost)}


def rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run; a run with game outcomes is paired with the first such run on its split."""
    firsts: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.get("outcomes") is not None:
            firsts.setdefault(run["summary"].get("split", ""), run)
    table = []
    for run in runs:
        s = run["summary"]
        row = {"run": run["label"], "split": s.get("split", "")}
        for column in COLUMNS:
            value = s["per_type"][column]["success"]
            row[column] = None if value is None else 100 * value
        row["avg"] = 100 * s["success"]
        # won of n per column, for the chart's counts and intervals
        row["counts"] = {c: (s["per_type"][c]["won"], s["per_type"][c]["episodes"]) for c in COLUMNS} | {
            "avg": (s["won"], s["finished"])
        }
        folder = Path(run["path"]).parent if run.get("path") else None  # a summary handed in without its file has none
        row["recipe"] = eval_recipe(s, folder)
        row["workspace"] = workspace_of(folder) if folder else None
        row["episodes"] = s["finished"]
        row["env_steps"] = s["env_steps"]
        row["meta"] = s["meta_actions"]
        row["meta_won"] = s.get("meta_actions_won")  # absent from summaries written before it was recorded
        row["meta_idle"] = s.get("meta_idle")  # likewise, and None where the records did not count them
        row.update({f"meta_{verb}": s["meta_per_episode"][verb]["attempted"] for verb in META_VERBS})
        row["vs"] = None
        base = firsts.get(s.get("split", ""))
        if base is not None and base is not run and run.get("outcomes") is not None:
            row["vs"] = {"run": base["label"], **paired(base["outcomes"], run["outcomes"])}
        table.append(row)
    return table


def versus_cell(row: dict[str, Any], detail: bool = True) -> str:
    """A run against the first run on its split: "+gained −lost of games (p), N played differently", or
    "+gained −lost (p)" where a terminal table has no room for more."""
    vs = row.get("vs")
    if vs is None:
        return "-"
    if not detail:
        return f"+{vs['gained']} −{vs['lost']} ({p_value(vs['p'])})"
    return f"+{vs['gained']} −{vs['lost']} of {vs['games']} (p {p_value(vs['p'])}), {vs['played_differently']} played differently"


def p_value(p: float) -> str:
    """Two significant decimals, and "<0.001" rather than a "0.00" that reads as no chance at all."""
    return "<0.001" if p < 0.001 else f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


def cell(value: float | None, digits: int = 1) -> str:
    """A table's figure, or "-" where a run has none (no game of a type, no episode won, an older summary)."""
    return "-" if value is None else f"{value:.{digits}f}"


def success_cells(row: dict[str, Any]) -> list[str]:
    """A row's success per task type and on average, in %, as every table of eval runs shows them."""
    return [cell(row[c]) for c in (*COLUMNS, "avg")]


def markdown(table: list[dict[str, Any]], chart: str | None) -> str:
    head = [
        "run",
        "split",
        *COLUMNS,
        "avg",
        "episodes",
        "env steps",
        "meta-actions / episode",
        "meta-actions / won episode",
        "idle / episode",
        "games vs the split's first run",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|"]
    for row in table:
        cells = [row["run"], row["split"]]
        cells += success_cells(row)
        usage = " / ".join(f"{row[f'meta_{v}']:.2f}" for v in META_VERBS)
        cells += [str(row["episodes"]), f"{row['env_steps']:.1f}", f"{row['meta']:.2f} ({usage})"]
        cells += [cell(row["meta_won"], 2), cell(row["meta_idle"], 2), versus_cell(row)]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\nSuccess in %; meta-actions per episode as total (track / commit / recall / note); "
    text += "per won episode apart, since a lost episode calls the harness until its budget runs out; "
    text += "idle: harness calls that spent a step for nothing (refused, changed nothing, or answered as before).\n"
    text += "Against the split's first run: +games this run won and that one lost, −the reverse, on the games both "
    text += "finished; p, the exact McNemar p-value of that split (small: more than chance); and how many games "
    text += "were played with a different sequence of actions.\n"
    if chart:
        text += f"\n![success per task type and meta-actions per episode]({chart})\n"
    return text


def workspace_of(run_folder: Path) -> str | None:
    """The workspace an eval run folder (WS/eval/<name>) belongs to, by name; None for a folder elsewhere."""
    folder = run_folder.resolve()
    return folder.parent.parent.name if folder.parent.name == "eval" else None


def chart_title(table: list[dict[str, Any]]) -> str:
    """The runs and their recipes: one recipe line where they share it, one per run where they differ."""
    spaces = sorted({row["workspace"] for row in table if row["workspace"]})
    head = "evoh report: " + ", ".join(row["run"] for row in table)
    if spaces:
        head += f" (workspace{'s' if len(spaces) > 1 else ''} {', '.join(spaces)})"
    recipes = list(dict.fromkeys(row["recipe"] for row in table))
    if len(recipes) == 1:
        return f"{head}\nrecipe: {recipes[0]}"
    return head + "".join(f"\n{row['run']}: {row['recipe']}" for row in table)


def chart(table: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = chart_figure(table)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def chart_figure(table: list[dict[str, Any]]):
    """Success per task type with each bar's won/n and its 95% Wilson interval (a type a run played no game of is
    marked "no games", not drawn as 0%), and meta-actions per episode by verb."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evoh.inspection.figures import VERB_COLORS, legend_outside, run_colors, wilson

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, 5.6 + 0.18 * len(table)), gridspec_kw={"width_ratios": [3, 2]}, layout="constrained"
    )
    groups = [*COLUMNS, "avg"]
    colors = run_colors(len(table))
    width = 0.8 / max(1, len(table))
    small = 7 if len(table) <= 3 else 6
    for i, row in enumerate(table):
        for g, column in enumerate(groups):
            x = g + (i - (len(table) - 1) / 2) * width
            won, n = row["counts"][column]
            interval = wilson(won, n)
            if interval is None:  # nothing played: say so where the bar would stand
                left.text(x, 1, "no games", rotation=90, ha="center", va="bottom", fontsize=small, color="0.35", style="italic")
                continue
            rate = 100 * won / n
            left.bar(x, rate, width, color=colors[i], label=row["run"])  # one legend entry per run: deduplicated below
            left.errorbar(
                x,
                rate,
                yerr=[[max(0.0, rate - 100 * interval[0])], [max(0.0, 100 * interval[1] - rate)]],
                color="0.1",
                capsize=2,
                linewidth=0.8,
            )
            left.text(x, 100 * interval[1] + 1.5, f"{won}/{n}", rotation=90, ha="center", va="bottom", fontsize=small)
    left.axvline(len(COLUMNS) - 0.5, color="0.85", linewidth=1)  # the average apart from the types
    left.set_xticks(range(len(groups)), groups)
    left.set_ylabel("success (%)")
    left.set_ylim(0, 125)
    left.set_yticks(range(0, 101, 20))
    left.set_title("Success per task type: won/n, whiskers the 95% Wilson interval", fontsize=10)
    handles, labels = left.get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    legend_outside(left, list(seen.values()), list(seen))
    bottom = [0.0] * len(table)
    for verb in META_VERBS:
        values = [row[f"meta_{verb}"] for row in table]
        right.bar(range(len(table)), values, 0.6, bottom=bottom, color=VERB_COLORS[verb], label=verb)
        bottom = [b + v for b, v in zip(bottom, values)]
    for x, total in enumerate(bottom):  # the total on top, so that a run without meta-actions reads 0, not missing
        right.text(x, total, f"{total:.2f}", ha="center", va="bottom", fontsize=8)
    right.set_xticks(range(len(table)), [row["run"] for row in table], rotation=20 if len(table) > 2 else 0, fontsize=8)
    right.set_ylabel("meta-actions per episode (attempted)")
    right.set_title("Meta-actions per episode, by verb", fontsize=10)
    legend_outside(right, title=None)
    fig.suptitle(chart_title(table), fontsize=10)
    return fig


def run(paths: list[Path], out: Path) -> dict[str, Any]:
    runs = load_runs(paths)
    for run in runs:
        run["outcomes"] = game_outcomes(Path(run["path"]).parent / "episodes.jsonl")
    table = rows(runs)
    out.mkdir(parents=True, exist_ok=True)
    png = out / "report.png"
    chart(table, png)
    (out / "report.md").write_text(markdown(table, png.name))
    return {"rows": table, "png": str(png), "markdown": str(out / "report.md")}
