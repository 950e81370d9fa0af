"""`evoh play`: a person at the keyboard, or a file of commands, plays one game."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json
from evoh.cli.recipe_options import RecipeOption, SetOption, flag, resolve
from evoh.env.play import GameSession, Transcript, read_commands, replay
from evoh.env.types import Step
from evoh.env.world import find_game
from evoh.errors import EvohError


def play(
    game: Annotated[
        str,
        typer.Argument(
            help=(
                "A task id (valid_seen/<game>/<trial>; MiniHouse: valid_seen/heat-00003), SPLIT:INDEX, "
                "or an ALFWorld trial folder."
            )
        ),
    ],
    data: flag("env.data", "--data", "-d") = None,
    kind: flag("env.kind") = None,
    engine: flag("env.engine") = None,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    commands: Annotated[
        Path | None, typer.Option("--commands", "-c", help="Replay this file (one command a line) and print the transcript.")
    ] = None,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Environment steps before the episode ends.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="With --commands: print the transcript as JSON.")] = False,
) -> None:
    """Play one game (ALFWorld or MiniHouse) in the terminal, or replay a file of commands.

    Exits 0 only if the game was won.

    Examples:

        evoh play --kind minihouse valid_seen:0
        evoh play valid_seen:0 --commands moves.txt --json
    """
    env = resolve(recipe, sets, {"env.data": data, "env.kind": kind, "env.engine": engine}).env
    task = find_game(env, game)
    if commands is not None:
        if not commands.is_file():
            raise EvohError(f"commands file {commands} does not exist", hint="give a text file with one command per line")
        transcript = replay(task, read_commands(commands.read_text().splitlines()), max_steps, env.engine)
        if as_json:
            print_json(transcript.to_dict())
        else:
            _print_transcript(transcript)
    else:
        transcript = _interactive(task, max_steps, env.engine)
    raise typer.Exit(0 if transcript.last.won else 1)


def _show(step: Step, index: int) -> None:
    tag = "" if step.valid else " (not an admissible command)"
    typer.echo(f"[{index}]{tag} {step.observation}")


def _print_transcript(transcript: Transcript) -> None:
    typer.echo(f"game: {transcript.task.id} ({transcript.task.short_type}, grammar {transcript.task.grammar})")
    _show(transcript.start, 0)
    for command, step in transcript.turns:
        typer.echo(f"> {command}")
        _show(step, step.steps)
    if transcript.unplayed:
        typer.echo(f"({len(transcript.unplayed)} command(s) left unplayed: the episode had ended)")
    _print_result(transcript.last)


def _print_result(step: Step) -> None:
    verdict = "WON" if step.won else "not won"
    typer.echo(f"result: {verdict} after {step.steps} step(s)")


def _interactive(task, max_steps: int, engine: str) -> Transcript:
    typer.echo(f"game: {task.id} ({task.short_type})   type a command or its number; 'quit' ends", err=True)
    with GameSession(task, max_steps=max_steps, engine=engine) as session:
        step = session.start()
        _show(step, 0)
        while not step.done:
            for number, command in enumerate(step.admissible, start=1):
                typer.echo(f"  {number:>2}. {command}")
            try:
                entry = input(f"step {step.steps + 1}/{max_steps}> ").strip()
            except EOFError:
                break
            if entry in ("quit", "exit"):
                break
            if entry.isdigit() and 1 <= int(entry) <= len(step.admissible):
                entry = step.admissible[int(entry) - 1]
            if not entry:
                continue
            step = session.send(entry)
            _show(step, step.steps)
        _print_result(step)
        return session.transcript
