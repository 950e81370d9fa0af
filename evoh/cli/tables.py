"""The tables evoh prints at the end of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoh.harness.turns import META_VERBS


def who_played(policy: dict[str, Any]) -> str:
    """A policy's identity in a few words for a table's title: what played, and how it decoded."""
    kind = policy["policy"]
    if kind == "labelled":
        return f"{who_played(policy['player'])}, labelled by the {who_played(policy['labeller'])}"
    if kind == "expert":
        return "expert"
    sampling = policy["sampling"]
    decoding = "greedy" if sampling["temperature"] == 0 else f"temperature {sampling['temperature']:g}"
    if sampling.get("guided"):
        decoding += ", guided"
    if kind == "local":
        weights = "/".join(Path(policy["model"]).parts[-2:]) + (
            " + " + "/".join(Path(policy["adapter"]).parts[-2:]) if policy.get("adapter") else ""
        )
        dtype = f", {policy['dtype']}" if "dtype" in policy else ""  # records older than the field do not say
        return f"local {weights}{dtype}, {decoding}"
    return f"{kind} {policy.get('model', '')}, {decoding}"


def summary_table(summary: dict[str, Any], title: str):
    """Success per task type (the paper's columns), then steps and harness usage per episode."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    columns = ["pick", "look", "clean", "heat", "cool", "pick2"]
    for name in [*columns, "avg"]:
        table.add_column(name, justify="right")
    cells = []
    for name in columns:
        row = summary["per_type"][name]
        cells.append(f"{100 * row['success']:.1f} ({row['won']}/{row['episodes']})" if row["episodes"] else "-")
    cells.append(f"{100 * summary['success']:.1f} ({summary['won']}/{summary['finished']})")
    table.add_row(*cells)
    meta = summary["meta_per_episode"]
    usage = ", ".join(f"{verb} {meta[verb]['attempted']:.2f}" for verb in META_VERBS)
    table.caption = (
        f"{played_of_requested(summary)}\n"
        f"env steps {summary['env_steps']:.1f}, turns {summary['turns']:.1f}, "
        f"meta-actions {summary['meta_actions']:.2f} per episode ({usage}){won_meta(summary)}{idle_meta(summary)}; "
        f"invalid {100 * summary['invalid_rate']:.1f}% of turns; errors {summary['errors']}"
    )
    if "label_agreement" in summary:
        table.caption += (
            f"; the player did what its labeller answered on {100 * summary['label_agreement']:.1f}% "
            f"of {summary['labelled_turns']} turns"
        )
    table.caption_justify = "left"
    return table


def played_of_requested(summary: dict[str, Any]) -> str:
    """What success is a share of: the games asked for, less the unplayable ones skipped and the episodes that
    ended in errors."""
    finished, errors = summary["finished"], summary["errors"]
    requested = summary.get("requested", finished + errors)  # summaries older than the count skipped nothing
    parts = [f"{finished} finished"] + [f"{errors} ended in errors"] * bool(errors)
    skipped = len(summary.get("skipped_games", ()))
    parts += [f"{skipped} unplayable, skipped (named on stderr)"] * bool(skipped)
    return f"games: {requested} asked for, {', '.join(parts)}; success is over the {finished} finished"


def won_meta(summary: dict[str, Any]) -> str:
    """Meta-actions per won episode, where the summary has them (older ones do not) and a game was won."""
    value = summary.get("meta_actions_won")
    return "" if value is None else f", {value:.2f} per won episode"


def idle_meta(summary: dict[str, Any]) -> str:
    """Harness calls that spent a step for nothing, where the records counted them."""
    value = summary.get("meta_idle")
    return "" if value is None else f", {value:.2f} of them idle"


def report_table(result: dict[str, Any]):
    """Eval runs side by side (rows = runs), as `evoh report` and `evoh run` print them."""
    from rich.table import Table

    from evoh.inspection.report import COLUMNS, cell, success_cells, versus_cell

    table = Table(title="evaluation runs (success %)", title_justify="left")
    for column in ("run", "split", *COLUMNS, "avg", "env steps", "meta/ep", "meta/won", "idle/ep", "vs first"):
        table.add_column(column, justify="left" if column in ("run", "split") else "right")
    for row in result["rows"]:
        table.add_row(
            row["run"],
            row["split"],
            *success_cells(row),
            f"{row['env_steps']:.1f}",
            f"{row['meta']:.2f}",
            cell(row["meta_won"], 2),
            cell(row["meta_idle"], 2),
            versus_cell(row, detail=False),
        )
    table.caption = "vs first: games won and lost against the first run on the same split (exact McNemar p)\n"
    table.caption += f"chart: {result['png']}   markdown: {result['markdown']}"
    table.caption_justify = "left"
    return table


def action_table(agreement: dict[str, Any]):
    """Held-out teacher turns whose action the trained model repeats, by kind of action (`evoh sft`)."""
    from rich.table import Table

    table = Table(title="held-out turns: greedy action equals the teacher's", title_justify="left")
    for column in ("action", "matched", "turns", "%"):
        table.add_column(column, justify="left" if column == "action" else "right")
    rows = [(kind, row["matched"], row["turns"]) for kind, row in agreement["by_kind"].items()]
    for kind, matched, turns in [*rows, ("all", agreement["matched"], agreement["turns"])]:
        table.add_row(kind, str(matched), str(turns), f"{100 * matched / turns:.1f}" if turns else "-")
    return table
