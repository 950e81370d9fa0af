"""`evoh eval`: measure a policy on a split into WS/eval/<name>/."""

from __future__ import annotations

from evoh.cli.output import print_json, stdout_console
from evoh.cli.progress import episode_bar
from evoh.cli.recipe_options import JsonOption, RecipeOption, SetOption, WorkspaceOption, flag, flags_given, resolve
from evoh.cli.tables import summary_table, who_played


def evaluate(
    workspace: WorkspaceOption,
    policy: flag("eval.policy", "--policy", "-p") = None,
    split: flag("eval.split", "--split", "-s") = None,
    limit: flag("eval.limit", "--limit", "-n") = None,
    spread: flag("eval.spread", "--spread/--first") = None,
    games: flag("eval.games") = None,
    mode: flag("harness.mode") = None,
    belief: flag("harness.belief") = None,
    plan: flag("harness.plan") = None,
    experience: flag("harness.experience") = None,
    bank: flag("eval.bank") = None,
    freeze_bank: flag("eval.freeze_bank") = None,
    name: flag("eval.name") = None,
    workers: flag("env.workers", "--workers", "-k") = None,
    max_steps: flag("env.max_steps") = None,
    seed: flag("eval.seed") = None,
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
    """Measure a policy on a split: success per task type and harness use, into WS/eval/NAME/.

    An interrupted run resumes when rerun. --no-belief, --no-plan and --no-experience are the ablations.

    Examples:

        evoh eval -w runs/tiny -r tiny-cpu --policy local --model runs/tiny/sft/model --adapter runs/tiny/grpo/adapter
        evoh eval -w runs/tiny --policy expert --split valid_unseen --limit 24
        evoh eval -w runs/tiny --policy local --model runs/tiny/sft/model --no-experience --name no-experience
    """
    from evoh.runs.summary import errored_run
    from evoh.stages import evaluate as stage
    from evoh.workspace import Workspace

    given = flags_given(evaluate, locals())
    resolved = resolve(recipe, sets, given)
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
