"""`evoh eval`: measure a policy on a split into WS/eval/<name>/."""

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


def _off(flag: bool) -> bool | None:
    return False if flag else None


def evaluate(
    workspace: WorkspaceOption,
    policy: Annotated[str | None, typer.Option("--policy", "-p", help="expert, openai or local.")] = None,
    split: Annotated[str | None, typer.Option("--split", "-s", help="valid_seen, valid_unseen or train.")] = None,
    limit: LimitOption = None,
    spread: SpreadOption = None,
    games: GamesOption = None,
    mode: ModeOption = None,
    no_belief: Annotated[bool, typer.Option("--no-belief", help="Ablation: without the Belief module.")] = False,
    no_plan: Annotated[bool, typer.Option("--no-plan", help="Ablation: without the Progress module.")] = False,
    no_experience: Annotated[bool, typer.Option("--no-experience", help="Ablation: without the Experience module.")] = False,
    bank: BankOption = None,
    freeze_bank: FreezeBankOption = None,
    name: Annotated[str | None, typer.Option("--name", help="The run's folder under eval/ (default: POLICY-SPLIT).")] = None,
    workers: WorkersOption = None,
    max_steps: MaxStepsOption = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the policy's sampling.")] = None,
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
    from evoh.stages import evaluate as stage
    from evoh.workspace import Workspace

    resolved = resolve(
        recipe,
        sets,
        eval__policy=policy,
        eval__split=split,
        eval__limit=limit,
        eval__spread=spread,
        eval__games=games,
        harness__mode=mode,
        harness__belief=_off(no_belief),
        harness__plan=_off(no_plan),
        harness__experience=_off(no_experience),
        eval__bank=bank,
        eval__freeze_bank=freeze_bank,
        eval__name=name,
        env__workers=workers,
        env__max_steps=max_steps,
        eval__seed=seed,
        env__data=data,
        env__kind=kind,
        model__model=model,
        model__base_url=base_url,
        model__adapter=adapter,
    )
    with episode_bar("eval") as callbacks:
        summary = stage.run(resolved, Workspace(workspace), callbacks)
    if as_json:
        print_json(summary)
    else:
        stdout_console().print(
            summary_table(
                summary,
                f"eval {summary['name']}: {summary['split']}, {summary['protocol']['mode']} harness, "
                f"{who_played(summary['policy'])}",
            )
        )
    failure = errored_run(summary, f"eval {summary['name']}")
    if failure:  # after the results: a script reads them, and the exit status says a rerun has work to do
        raise failure
