"""`evoh plot`: a GRPO run's harness-annealing and success curves as PNG files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoh.cli.output import print_json


def plot(
    workspace: Annotated[Path, typer.Argument(help="The workspace directory of a GRPO run.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Where the PNG files go (default: WS/grpo/).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Draw a GRPO run's harness-annealing and success curves (PNG).

    Examples:

        evoh plot runs/minihouse
        evoh plot runs/tiny --out figures/
    """
    from evoh.inspection import plot as stage
    from evoh.workspace import Workspace

    result = stage.run(Workspace(workspace), out)
    if as_json:
        print_json(result)
        return
    meta, success = result["meta_actions"], result["train_success"]
    typer.echo(
        f"{result['updates']} updates: meta-actions per episode {meta['first']:.2f} -> {meta['last']:.2f}, "
        f"rollout success {100 * success['first']:.1f}% -> {100 * success['last']:.1f}%"
        + (
            f" (greedy {100 * greedy['first']:.1f}% -> {100 * greedy['last']:.1f}%)"
            if (greedy := result["greedy_success"])
            else ""
        )
        + (
            f"; drift on held-out responses: argmax changed {100 * drift['last']['flips']:.2f}%, KL {drift['last']['kl']:.4f}"
            if (drift := result["drift"])
            else ""
        )
    )
    typer.echo(f"wrote {result['annealing']} and {result['success']}")
