"""`evoh show`: read one recorded episode turn by turn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.errors import EvohError


def show(
    file: Annotated[Path, typer.Argument(help="A trajectories.jsonl or episodes.jsonl file.")],
    episode: Annotated[
        str | None, typer.Option("--episode", "-e", help="Index in the file, or a task id (a unique part of one is enough).")
    ] = None,
    prompts: Annotated[bool, typer.Option("--prompts/--no-prompts", help="Print each turn's full prompt.")] = True,
) -> None:
    from evoh.workspace import read_jsonl

    if not file.is_file():
        raise EvohError(f"{file} does not exist", hint="give a trajectories.jsonl (evoh collect) or episodes.jsonl (evoh eval)")
    from evoh.records import check

    records = [check("episode", r, str(file)) for r in read_jsonl(file).records]
    if not records:
        raise EvohError(f"{file} holds no episodes", hint="run the stage that writes it first")
    record = _pick(records, episode)
    won = "WON" if record["won"] else "not won"
    typer.echo(f"episode {record['task']['id']} ({record['task']['task_type']}): {won} in {record['env_steps']} env steps, {record['turns']} turns")
    typer.echo(f"objective: {record['objective']}")
    if record.get("error"):
        typer.echo(f"error: {record['error']}")
    if prompts:
        typer.echo(f"\n--- system prompt ---\n{record['system']}")
    for number, turn in enumerate(record["trace"], start=1):
        typer.echo(f"\n=== turn {number} ({turn['kind']}, {turn['outcome']}) ===")
        if prompts:
            typer.echo(f"--- prompt ---\n{turn['user']}")
        typer.echo(f"--- response ---\n{turn['response']}")
        if "label" in turn:
            typer.echo(f"--- label (trained on) ---\n{turn['label']}")
        typer.echo(f"--- result ---\n{turn['result']}")


def _pick(records: list[dict], wanted: str | None) -> dict:
    if wanted is None:
        return records[0]
    if wanted.isdigit():
        index = int(wanted)
        if index >= len(records):
            raise EvohError(f"episode index {index} is out of range", hint=f"the file holds {len(records)} episodes (0..{len(records) - 1})")
        return records[index]
    matches = [r for r in records if wanted in r["task"]["id"]]
    ids = {r["task"]["id"] for r in matches}
    if len(ids) != 1:
        raise EvohError(
            f"{'no' if not ids else len(ids)} episodes match {wanted!r}",
            hint="give an index or a longer part of the task id",
        )
    return matches[-1]
