"""`evoh collect`: teacher trajectories into WS/collect/."""

from __future__ import annotations

from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.progress import episode_bar
from evoh.cli.recipe_options import (
    AdapterOption,
    BankOption,
    BaseUrlOption,
    DataOption,
    FreezeBankOption,
    GamesOption,
    JsonOption,
    KindOption,
    LimitOption,
    MaxStepsOption,
    ModelOption,
    ModeOption,
    RecipeOption,
    SetOption,
    SpreadOption,
    WorkersOption,
    WorkspaceOption,
    resolve,
)
from evoh.cli.tables import summary_table, who_played


def collect(
    workspace: WorkspaceOption,
    teacher: Annotated[str | None, typer.Option("--teacher", help="Who plays: expert, openai or local.")] = None,
    label_with: Annotated[
        str | None,
        typer.Option(
            "--label-with",
            help="expert: the expert also answers every turn the player reaches, and refine trains on its answers (DAgger).",
        ),
    ] = None,
    split: Annotated[str | None, typer.Option("--split", "-s", help="train, valid_seen or valid_unseen.")] = None,
    limit: LimitOption = None,
    spread: SpreadOption = None,
    games: GamesOption = None,
    workers: WorkersOption = None,
    mode: ModeOption = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the teacher's choices.")] = None,
    max_steps: MaxStepsOption = None,
    bank: BankOption = None,
    freeze_bank: FreezeBankOption = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    adapter: AdapterOption = None,
    data: DataOption = None,
    kind: KindOption = None,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Resumes after an interruption: rerun the same command."""
    from evoh.runs.summary import errored_run
    from evoh.stages import collect as stage
    from evoh.workspace import Workspace

    resolved = resolve(
        recipe,
        sets,
        collect__policy=teacher,
        collect__label=label_with,
        collect__split=split,
        collect__limit=limit,
        collect__spread=spread,
        collect__games=games,
        env__workers=workers,
        harness__mode=mode,
        collect__seed=seed,
        env__max_steps=max_steps,
        collect__bank=bank,
        collect__freeze_bank=freeze_bank,
        env__data=data,
        env__kind=kind,
        model__model=model,
        model__base_url=base_url,
        model__adapter=adapter,
    )
    with episode_bar("collect") as callbacks:
        summary = stage.run(resolved, Workspace(workspace), callbacks)
    if as_json:
        print_json(summary)
    else:
        stdout_console().print(summary_table(summary, f"collect: {summary['split']}, {who_played(summary['policy'])}"))
    failure = errored_run(summary, "collect")
    if failure:  # after the results: a script reads them, and the exit status says a rerun has work to do
        raise failure
