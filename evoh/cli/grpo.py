"""`evoh grpo`: cost-aware multi-turn GRPO from the SFT adapter (or a fresh adapter on a model)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from evoh.cli.output import print_json, stderr_console
from evoh.cli.recipe_options import JsonOption, RecipeOption, SetOption, WorkspaceOption, flag, flags_given, resolve
from evoh.errors import RUN_FAILED, EvohError


def grpo(
    workspace: WorkspaceOption,
    start: flag("grpo.start", "--start", "--from") = None,
    model: flag("grpo.model", "--model", "-m") = None,
    updates: flag("grpo.updates") = None,
    tasks_per_update: flag("grpo.tasks_per_update") = None,
    group_size: flag("grpo.group_size") = None,
    max_steps: flag("grpo.max_steps") = None,
    lr: flag("grpo.lr") = None,
    kl: flag("grpo.kl") = None,
    bank: flag("grpo.bank") = None,
    games: flag("grpo.games") = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue from the last checkpoint in grpo/checkpoints/ (refused if made with other settings or inputs).",
        ),
    ] = False,
    workers: flag("env.workers", "--workers", "-k") = None,
    data: flag("env.data", "--data", "-d") = None,
    kind: flag("env.kind") = None,
    engine: flag("env.engine") = None,
    recipe: RecipeOption = None,
    sets: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stage two: cost-aware multi-turn GRPO over whole episodes, from the SFT weights (resumable).

    Writes WS/grpo/: the adapter, metrics.jsonl (one line per update), rollouts.jsonl, checkpoints/.

    Examples:

        evoh grpo -w runs/minihouse -r minihouse-cpu
        evoh grpo -w runs/tiny -r tiny-cpu --updates 8 --lr 1e-4 --set grpo.reward.idle_meta=0.5
        evoh grpo -w runs/tiny -r tiny-cpu --resume
    """
    from evoh.stages import grpo as stage
    from evoh.workspace import Workspace

    given = flags_given(grpo, locals())
    resolved = resolve(recipe, sets, given)
    errors = RolloutErrors()
    with update_display(errors) as callbacks:
        result = stage.run(resolved, Workspace(workspace), resume=resume, callbacks=callbacks)
    from evoh.distributed import is_main_process

    if not is_main_process():
        return
    if as_json:
        print_json(result)
    else:
        final = result["final"]
        line = f"grpo: {result['updates']} updates in {result['seconds'] / 60:.1f} min; adapter in {workspace}/grpo/adapter"
        if final:
            line += f"; last update: success {100 * final['success']:.1f}%, meta-actions {final['meta_actions']:.2f}/episode"
        typer.echo(line)
    failure = errors.failure(workspace)
    if failure:
        raise failure


@dataclass
class RolloutErrors:
    """Episodes of the updates played by this command that ended in errors (a dead engine, a failed policy call).
    An update leaves them out of training, as no evidence about the policy; a rerun cannot replay them, since
    each update draws its own games, so the run ends with exit 1 to say it has holes, and the adapter is kept."""

    rollouts: int = 0
    errors: int = 0
    validation: int = 0

    def count(self, metrics: dict[str, Any]) -> None:
        self.rollouts += metrics["episodes"]
        self.errors += metrics["errors"]
        self.validation += (metrics.get("validation") or {}).get("errors", 0)

    def failure(self, workspace: object) -> EvohError | None:
        if not (self.errors or self.validation):
            return None
        also = f"; {self.validation} validation episodes did too" if self.validation else ""
        return EvohError(
            f"grpo: {self.errors} of {self.rollouts} rollouts ended in errors and were left out of training{also}",
            hint=(
                f"the adapter is saved; {workspace}/grpo/rollouts.jsonl holds each error; "
                "if they recur, check the engine (env.step_timeout, env.workers) or the model"
            ),
            exit_code=RUN_FAILED,
        )


@contextlib.contextmanager
def update_display(errors: RolloutErrors | None = None) -> Iterator[object]:
    """A bar over updates that names what the update is doing, and one line per update with its headline figures
    (stderr, main process only); off a terminal, a line at each phase and a heartbeat while a phase lasts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from evoh.cli.progress import PhaseTicker
    from evoh.distributed import is_main_process
    from evoh.stages.grpo import Callbacks

    console = stderr_console()
    quiet = not is_main_process()
    ticker = None if quiet or console.is_terminal else PhaseTicker("grpo", console)
    with (
        Progress(
            TextColumn("grpo"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[phase]}"),
            console=console,
            disable=quiet or not console.is_terminal,
        ) as bar,
        ticker or contextlib.nullcontext(),
    ):
        task = bar.add_task("updates", total=None, phase="")
        total = 0

        def started(updates: int, done: int) -> None:
            nonlocal total
            total = updates
            bar.update(task, total=updates, completed=done)

        def phase(update: int, what: str) -> None:
            bar.update(task, phase=f"update {update + 1}: {what}")
            if ticker:
                ticker.phase(f"update {update + 1}/{total}: {what}")

        def updated(m: dict) -> None:
            bar.update(task, advance=1, phase="")
            if errors is not None:
                errors.count(m)
            if quiet:
                return
            if ticker:
                ticker.phase(None)
            console.print(update_line(m), markup=False, highlight=False)

        yield Callbacks(started, updated, phase)


def _pressure(m: dict) -> str:
    """`` (0.41/turn, pushed 0.53)``: the harness calls per turn played, and among the turns the update reinforced."""
    if m.get("meta_rate") is None or m.get("meta_rate_reinforced") is None:
        return ""
    return f" ({m['meta_rate']:.2f}/turn, pushed {m['meta_rate_reinforced']:.2f})"


def _groups(m: dict) -> str:
    """``  games 7 all lost, 24 mixed, 1 all won``: the update's games by how their rollouts ended."""
    g = m.get("groups")
    return f"  games {g['all_lost']} all lost, {g['contrasting']} mixed, {g['all_won']} all won" if g else ""


def update_line(m: dict) -> str:
    """An update's headline figures in one line."""
    val = m.get("validation")
    tail = f" | val success {100 * val['success']:.1f}%" if val else ""
    if val and val.get("drift"):
        tail += f"  drift: kl {val['drift']['kl']:.4f}, argmax changed {100 * val['drift']['flips']:.2f}%"
    greedy = m.get("greedy")
    if greedy:
        tail = f" | greedy success {100 * greedy['success']:.0f}%  meta {greedy['meta_actions']:.2f}/ep" + tail
    learned = f"kl {m['kl']:.4f}  clip {m['clip_fraction']:.3f}" if m["kl"] is not None else "no game to learn from"
    return (
        f"update {m['update'] + 1}: success {100 * m['success']:.1f}%  reward {m['reward_mean']:+.2f}±{m['reward_std']:.2f}  "
        f"meta {m['meta_actions']:.2f}/ep{_pressure(m)}{_groups(m)}  invalid {100 * m['invalid_rate']:.0f}%  {learned}  "
        f"{m['rollout_seconds']:.0f}s+{m['update_seconds']:.0f}s{tail}"
    )
