"""`evoh show`: a file's episodes as an index, or one of them turn by turn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from evoh.cli.output import print_json
from evoh.errors import EvohError


def show(
    file: Annotated[
        Path, typer.Argument(help="A trajectories.jsonl or episodes.jsonl file, or the eval/collect folder holding it.")
    ],
    episode: Annotated[
        str | None,
        typer.Option(
            "--episode",
            "-e",
            help="Show this episode turn by turn: its number in the index (#), or a task id (a unique part of one is enough).",
        ),
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="With --episode: the system prompt and every turn's whole prompt and response.")
    ] = False,
    lost: Annotated[bool, typer.Option("--lost", help="Index only the episodes that finished without winning.")] = False,
    types: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            "-t",
            help="Index only this task type (pick, look, clean, heat, cool, pick2 or a long name); repeat for several.",
        ),
    ] = None,
    write_games: Annotated[
        Path | None,
        typer.Option(
            "--write-games", help="Write the indexed episodes' task ids to this file: the game list `evoh eval --games` plays."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the index rows, or the episode's record, as JSON.")] = False,
) -> None:
    """List a file's episodes (filter them, write their game list), or print one turn by turn.

    Examples:

        evoh show runs/tiny/eval/sft-valid_seen --lost --type look
        evoh show runs/tiny/eval/sft-valid_seen --lost --write-games lost.txt
        evoh show runs/tiny/collect --episode 3 --full
    """
    from evoh.inspection.episodes import index, read_episodes, write_game_list

    filters = " ".join([*(["--lost"] if lost else []), *(f"--type {t}" for t in types or [])])
    if episode is not None and (filters or write_games):
        raise EvohError(
            "--lost, --type and --write-games choose episodes for the index, not one episode",
            hint="drop --episode to list the file's episodes, or drop the filters",
        )
    if full and episode is None:
        raise EvohError("--full shows one episode's turns", hint="add --episode N (its # in the index)")
    episodes = read_episodes(file)
    if episode is not None:
        record = _pick(episodes.records, episode)
        if as_json:
            print_json(record)
        else:
            (_print_full if full else _print_compact)(record)
        return
    rows = index(episodes, lost, types or ())
    if write_games is not None:
        ids = write_game_list(rows, write_games, episodes.file, filters)
        typer.echo(f"wrote {len(ids)} task ids to {write_games}", err=True)
    if as_json:
        print_json(rows)
        return
    _print_index(rows, len(episodes.current), episodes.superseded, filters)


def _print_index(rows: list[dict[str, Any]], total: int, superseded: int, filters: str) -> None:
    """One line per episode, then what the lines add up to."""
    width = max([len("id"), *(len(r["id"]) for r in rows)])
    typer.echo(
        f"{'#':>4}  {'id':<{width}}  {'type':<5}  {'outcome':<7}  {'turns':>5}  {'steps':>5}  "
        f"{'invalid':>7}  {'meta':>4}  track/commit/recall/note"
    )
    for r in rows:
        usage = "/".join(str(n) for n in r["meta"].values())
        typer.echo(
            f"{r['episode']:>4}  {r['id']:<{width}}  {r['type']:<5}  {r['outcome']:<7}  {r['turns']:>5}  {r['env_steps']:>5}  "
            f"{r['invalid_actions']:>7}  {r['meta_actions']:>4}  {usage}"
        )
    won = sum(r["outcome"] == "won" for r in rows)
    errors = sum(r["outcome"] == "error" for r in rows)
    finished = len(rows) - errors
    shown = f"{len(rows)} of {total} episodes ({filters})" if filters else f"{total} episodes"
    rate = f" ({100 * won / finished:.1f}% of the finished)" if finished else ""
    line = f"{shown}: {won} won{rate}, {finished - won} lost, {errors} errors"
    if superseded:
        line += f"; {superseded} earlier records of retried episodes left out"
    typer.echo(line + "; evoh show FILE -e # shows one turn by turn")


def _header(record: dict[str, Any]) -> None:
    from evoh.inspection.episodes import outcome, short_type

    result = {"won": "WON", "lost": "not won", "error": "ERROR"}[outcome(record)]
    typer.echo(
        f"episode {record['task']['id']} ({short_type(record['task']['task_type'])}): "
        f"{result} in {record['env_steps']} env steps, "
        f"{record['turns']} turns, {record['meta_actions']} meta-actions, {record['invalid_actions']} invalid"
    )
    typer.echo(f"objective: {record['objective']}")
    if record.get("error"):
        typer.echo(f"error: {record['error']}")


def _print_compact(record: dict[str, Any]) -> None:
    """Each turn as its action, outcome, thought and result: the prompt and its admissible list are left out
    (--full shows them)."""
    from evoh.inspection.episodes import prompt_sections, thought

    _header(record)
    if record["trace"]:
        start = prompt_sections(record["trace"][0]["user"]).get("Observation", "")
        typer.echo("start: " + " ".join(line.strip() for line in start.split("\n") if line.strip()))
    width = len(str(len(record["trace"])))
    for number, turn in enumerate(record["trace"], start=1):
        action = turn["action"] or "(no action)"
        typer.echo(f"\n{number:>{width}}. {action}  [{turn['kind']}, {turn['outcome']}]")
        pad = " " * (width + 2)
        said = thought(turn)
        if said:
            typer.echo(f"{pad}thought: {said}")
        if turn["outcome"] == "malformed" or not turn["action"]:
            typer.echo(f"{pad}response: {turn['response'].strip()!r}")
        if turn.get("reason"):
            typer.echo(f"{pad}why: {turn['reason']}")
        if "label" in turn:
            typer.echo(f"{pad}label (trained on): {turn['label']}")
        typer.echo(f"{pad}-> {turn['result']}")


def _print_full(record: dict[str, Any]) -> None:
    _header(record)
    typer.echo(f"\n--- system prompt ---\n{record['system']}")
    for number, turn in enumerate(record["trace"], start=1):
        typer.echo(f"\n=== turn {number} ({turn['kind']}, {turn['outcome']}) ===")
        typer.echo(f"--- prompt ---\n{turn['user']}")
        typer.echo(f"--- response ---\n{turn['response']}")
        if "label" in turn:
            typer.echo(f"--- label (trained on) ---\n{turn['label']}")
        typer.echo(f"--- result ---\n{turn['result']}")


def _pick(records: list[dict], wanted: str) -> dict:
    if wanted.isdigit():
        number = int(wanted)
        if number >= len(records):
            raise EvohError(
                f"episode {number} is out of range",
                hint=f"the file holds {len(records)} episodes (0..{len(records) - 1}); evoh show FILE lists them",
            )
        return records[number]
    matches = [r for r in records if wanted in r["task"]["id"]]
    ids = {r["task"]["id"] for r in matches}
    if len(ids) != 1:
        raise EvohError(
            f"{'no' if not ids else len(ids)} episodes match {wanted!r}",
            hint="give a number from the index (evoh show FILE) or a longer part of the task id",
        )
    return matches[-1]
