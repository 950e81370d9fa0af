"""`evoh collect`: teacher trajectories into WS/collect/."""

from __future__ import annotations

from typing import Annotated

import typer

from evoh.cli.output import print_json, stdout_console
from evoh.cli.progress import episode_bar
from evoh.cli.recipe_options import AdapterOption, BaseUrlOption, DataOption, ModelOption, RecipeOption, SetOption, WorkspaceOption, resolve
from evoh.cli.tables import summary_table


def collect(
    workspace: WorkspaceOption,
    teacher: Annotated[str | None, typer.Option("--teacher", help="Who plays: expert, openai or local.")] = None,
    split: Annotated[str | None, typer.Option("--split", "-s", help="train, valid_seen or valid_unseen.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=0, help="The first N games in id order (0: all).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", "-k", min=1, help="Engine processes.")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="Harness mode: inline, always_on or env_only.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the teacher's choices.")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Environment steps per episode.")] = None,
    bank: Annotated[str | None, typer.Option("--bank", help="Start from this Experience bank (bank.json).")] = None,
    freeze_bank: Annotated[bool | None, typer.Option("--freeze-bank", help="Never consolidate the bank.")] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    adapter: AdapterOption = None,
    data: DataOption = None,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Resumes after an interruption: rerun the same command."""
    from evoh.stages import collect as stage
    from evoh.workspace import Workspace

    resolved = resolve(
        recipe, sets, collect__policy=teacher, collect__split=split, collect__limit=limit, env__workers=workers,
        harness__mode=mode, collect__seed=seed, env__max_steps=max_steps, collect__bank=bank,
        collect__freeze_bank=freeze_bank, env__data=data,
        model__model=model, model__base_url=base_url, model__adapter=adapter,
    )
    with episode_bar("collect") as callbacks:
        summary = stage.run(resolved, Workspace(workspace), callbacks)
    if as_json:
        print_json(summary)
    else:
        stdout_console().print(summary_table(summary, f"collect: {summary['split']}, {summary['policy']['policy']} teacher"))
