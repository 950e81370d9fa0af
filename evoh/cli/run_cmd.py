"""`evoh run`: a recipe's whole pipeline in one command, skipping the stages already done with its settings."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json, stderr_console, stdout_console
from evoh.cli.recipe_options import JsonOption, SetOption, WorkspaceOption, resolve


def run(
    recipe: Annotated[Path, typer.Argument(help="The TOML recipe; its run section names the stages.")],
    workspace: WorkspaceOption,
    sets: SetOption = None,
    last: Annotated[
        str | None, typer.Option("--until", help="Stop after this stage of the recipe's (e.g. sft); a later run skips it.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a recipe's pipeline end to end, skipping stages already done with its settings.

    After an interruption, rerun the same command: finished stages are skipped and the interrupted one resumes.

    Examples:

        evoh run minihouse-cpu -w runs/minihouse
        evoh run tiny-cpu -w runs/tiny --until sft
        evoh run recipes/my-recipe.toml -w runs/mine --set grpo.updates=20
    """
    from evoh.cli.grpo import RolloutErrors, update_display
    from evoh.cli.progress import episode_bar
    from evoh.inspection import report
    from evoh.stages import pipeline
    from evoh.workspace import Workspace

    resolved = resolve(recipe, sets)
    if last is not None:
        resolved = pipeline.until(resolved, last)
    ws = Workspace(workspace)
    err = stderr_console()

    def on_stage(name: str, runs: bool) -> None:
        err.print(
            f"[bold]{name}[/]: {'running' if runs else 'done before with these settings, skipped'}", markup=True, highlight=False
        )

    def on_done(name: str, seconds: float) -> None:
        err.print(f"[bold]{name}[/]: finished in {seconds / 60:.1f} min", markup=True, highlight=False)

    errors = RolloutErrors()
    hooks = pipeline.Hooks(
        on_stage=on_stage, episodes=lambda name: episode_bar(name), updates=lambda: update_display(errors), on_done=on_done
    )
    steps = pipeline.Pipeline(resolved, ws, hooks).run()
    evals = pipeline.eval_runs(ws, resolved)
    compared = report.run(evals, ws.root / "report") if evals else None
    if as_json:
        print_json({"stages": steps, "report": compared})
    else:
        _print_tables(recipe, workspace, ws, steps, compared)
    failure = errors.failure(workspace)  # a stage with episodes to retry stopped the pipeline before: only grpo's are left
    if failure:
        raise failure


def _print_tables(recipe: Path, workspace: Path, ws, steps: list, compared: dict | None) -> None:
    from rich.table import Table

    from evoh.cli.tables import report_table

    table = Table(title=f"evoh run {recipe} -w {workspace}", title_justify="left")
    for column in ("stage", "", "minutes"):
        table.add_column(column, justify="right" if column == "minutes" else "left")
    for step in steps:
        table.add_row(step["stage"], "ran" if step["ran"] else "skipped", f"{step['seconds'] / 60:.1f}" if step["ran"] else "")
    console = stdout_console()
    console.print(table)
    if compared:
        console.print(report_table(compared))
    plots = [ws.path("grpo") / name for name in ("annealing.png", "success.png")]
    with contextlib.suppress(OSError):
        if all(p.exists() for p in plots):
            console.print(f"GRPO curves: {plots[0]}, {plots[1]}")
