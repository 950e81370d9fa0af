"""`evoh collect`: teacher trajectories into WS/collect/."""

from __future__ import annotations

from evoh.cli.output import print_json, stdout_console
from evoh.cli.progress import episode_bar
from evoh.cli.recipe_options import JsonOption, RecipeOption, SetOption, WorkspaceOption, flag, flags_given, resolve
from evoh.cli.tables import summary_table, who_played


def collect(
    workspace: WorkspaceOption,
    policy: flag("collect.policy", "--policy", "--teacher") = None,
    label: flag("collect.label", "--label", "--label-with") = None,
    split: flag("collect.split", "--split", "-s") = None,
    limit: flag("collect.limit", "--limit", "-n") = None,
    spread: flag("collect.spread", "--spread/--first") = None,
    games: flag("collect.games") = None,
    workers: flag("env.workers", "--workers", "-k") = None,
    mode: flag("harness.mode") = None,
    seed: flag("collect.seed") = None,
    max_steps: flag("env.max_steps") = None,
    bank: flag("collect.bank") = None,
    freeze_bank: flag("collect.freeze_bank") = None,
    model: flag("model.model", "--model", "-m") = None,
    base_url: flag("model.base_url") = None,
    adapter: flag("model.adapter") = None,
    data: flag("env.data", "--data", "-d") = None,
    kind: flag("env.kind") = None,
    engine: flag("env.engine") = None,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Play teacher episodes on a split and write WS/collect/.

    An interrupted run resumes when rerun.

    Examples:

        evoh collect -w runs/minihouse --kind minihouse --limit 60
        evoh collect -w runs/tiny -r tiny-cpu
        evoh collect -w runs/qwen --policy openai --model Qwen/Qwen3-32B --base-url http://localhost:8000/v1
    """
    from evoh.runs.summary import errored_run
    from evoh.stages import collect as stage
    from evoh.workspace import Workspace

    given = flags_given(collect, locals())
    resolved = resolve(recipe, sets, given)
    with episode_bar("collect") as callbacks:
        summary = stage.run(resolved, Workspace(workspace), callbacks)
    if as_json:
        print_json(summary)
    else:
        stdout_console().print(summary_table(summary, f"collect: {summary['split']}, {who_played(summary['policy'])}"))
    failure = errored_run(summary, "collect")
    if failure:  # after the results: a script reads them, and the exit status says a rerun has work to do
        raise failure
