"""`evoh grpo` cost per update on this machine: rollout vs optimisation seconds, tokens/s and peak memory.

    ALFWORLD_DATA=../shared/alfworld python benchmarks/grpo_step.py [--size tiny] [--updates 3] [--tasks 4] [--group 4]
        [--minibatches 2] [--precision auto fp32]

Builds a base model (`evoh model init`), then runs `evoh grpo` through the library from a fresh LoRA
adapter on real train games (every turn charged, `--max-steps` turns per episode) and reads the
per-update figures the stage itself writes to grpo/metrics.jsonl. Rollout tokens/s counts generated
tokens over rollout time; optimisation tokens/s counts every token the update forwards (prompts and
responses) over update time, the policy's forward and backward and the reference's forward included.
Peak memory is the maximum resident set size of this process (the model, generation and training) and
of the engine worker processes. ``--precision`` defaults to evoh's own choice (``grpo.precision = auto``:
bf16 autocast on a CPU with AVX512-BF16 or AMX, else fp32); several values are measured one after the
other, each in its own process.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
from pathlib import Path
from statistics import fmean

from separately import each_in_its_own_process

from evoh.config import load_recipe
from evoh.models.tiny import build
from evoh.stages import grpo
from evoh.workspace import Workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--minibatches", type=int, default=1, help="optimizer steps per update (the CPU recipe takes 2)")
    parser.add_argument("--precision", nargs="+", default=["auto"], choices=["auto", "bf16", "fp32"])
    args = parser.parse_args()
    if len(args.precision) == 1:
        measure(args, args.precision[0])
        return
    each_in_its_own_process("--precision", args.precision)


def measure(args: argparse.Namespace, precision: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="evoh-grpo-bench-"))
    info = build(root / "model", size=args.size)
    recipe = load_recipe(
        None,
        [
            "grpo.start=none",
            f"grpo.model={root / 'model'}",
            f"grpo.updates={args.updates}",
            f"grpo.tasks_per_update={args.tasks}",
            f"grpo.group_size={args.group}",
            f"grpo.max_steps={args.max_steps}",
            f"grpo.max_tokens={args.max_tokens}",
            "grpo.lr=1e-4",
            "grpo.val_every=0",
            f"grpo.save_every={args.updates}",
            f"env.workers={args.workers}",
            f"grpo.precision={precision}",
            f"grpo.minibatches={args.minibatches}",
        ],
    )
    grpo.run(recipe, Workspace(root / "ws"))
    metrics = [json.loads(line) for line in (root / "ws" / "grpo" / "metrics.jsonl").read_text().splitlines()]
    rollout = fmean(m["rollout_seconds"] for m in metrics)
    update = fmean(m["update_seconds"] for m in metrics)
    generated = fmean(m["completion_tokens"] for m in metrics)
    forwarded = fmean(m["prompt_tokens"] + m["completion_tokens"] for m in metrics)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    resolved = json.loads((root / "ws" / "grpo" / "stage.json").read_text())["precision"]
    print(f"{info['size']} model, {info['parameters']:,} parameters; LoRA r=64 from scratch, {resolved} (asked: {precision})")
    print(
        f"  {args.updates} updates of {args.tasks} games x {args.group} rollouts, "
        f"up to {args.max_steps} turns and {args.max_tokens} tokens per turn, "
        f"{args.minibatches} optimizer step(s) per update"
    )
    print(
        f"  per update: {rollout + update:.1f} s = rollout {rollout:.1f} s + optimisation {update:.1f} s "
        f"({fmean(m['samples'] for m in metrics):.0f} turns trained)"
    )
    print(
        f"  rollout {generated / rollout:.0f} generated tokens/s; optimisation {forwarded / update:.0f} trained tokens/s "
        f"({forwarded:,.0f} prompt+response tokens per update: policy forward and backward, reference forward)"
    )
    print(f"  peak memory (max RSS) {own:.0f} MB in the trainer, {workers:.0f} MB in the largest engine worker")


if __name__ == "__main__":
    main()
