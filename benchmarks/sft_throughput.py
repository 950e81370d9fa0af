"""`evoh sft` speed and memory on this machine: wall time, training tokens/s and peak memory.

    ALFWORLD_DATA=../shared/alfworld python benchmarks/sft_throughput.py [--size small] [--games 8] [--steps 30]
        [--lora-dropout 0.05] [--full] [--precision auto fp32] [--group-by-length] [--keep-freed-memory]

Builds a base model (`evoh model init`), collects expert episodes on a few train games, refines them,
and runs `evoh sft` for a fixed number of steps through the library; then reads the trainer's own token
count from sft/metrics.jsonl. Peak memory is the process's maximum resident set size. ``--precision``
defaults to evoh's own choice (``sft.precision = auto``: bf16 autocast on a CPU with AVX512-BF16 or AMX,
else fp32); several values are measured one after the other, each in its own process, on the same examples.
``--group-by-length`` groups examples of similar length into a batch (``sft.group_by_length``) instead
of drawing each batch uniformly, to measure what the padding costs; ``--keep-freed-memory`` skips the trim of
glibc's heap at each log, to measure what it saves (peak and resident memory at the end).
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from separately import each_in_its_own_process

from evoh.config import load_recipe
from evoh.models.tiny import build
from evoh.sft import watch
from evoh.stages import collect, refine, sft
from evoh.workspace import Workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lora-r", type=int, default=64)
    parser.add_argument("--lora-dropout", type=float, default=0.05)
    parser.add_argument("--full", action="store_true", help="train every weight instead of a LoRA adapter")
    parser.add_argument("--precision", nargs="+", default=["auto"], choices=["auto", "bf16", "fp32"])
    parser.add_argument("--group-by-length", action="store_true", help="batches of similar length (sft.group_by_length=true)")
    parser.add_argument("--keep-freed-memory", action="store_true", help="no malloc_trim at each log")
    args = parser.parse_args()
    if len(args.precision) == 1:
        measure(args, args.precision[0])
        return
    each_in_its_own_process("--precision", args.precision)


def measure(args: argparse.Namespace, precision: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="evoh-sft-bench-"))
    info = build(root / "model", size=args.size)
    ws = Workspace(root / "ws")
    recipe = load_recipe(
        None,
        [
            "collect.split=train",
            f"collect.limit={args.games}",
            "refine.val_fraction=0",
            f"sft.model={root / 'model'}",
            f"sft.max_steps={args.steps}",
            f"sft.batch_size={args.batch}",
            f"sft.per_device_batch={args.batch}",
            f"sft.lora_r={args.lora_r}",
            f"sft.lora_alpha={2 * args.lora_r}",
            f"sft.lora_dropout={args.lora_dropout}",
            f"sft.full={str(args.full).lower()}",
            "sft.train_embeddings=true",
            "sft.lr=3e-3",
            "sft.max_length=2048",
            "sft.save_steps=1000000",
            "sft.logging_steps=1",
            f"sft.precision={precision}",
            f"sft.group_by_length={str(args.group_by_length).lower()}",
        ],
    )
    collect.run(recipe, ws)
    report = refine.run(recipe, ws)
    if args.keep_freed_memory:
        watch.release_freed_memory = lambda: False
    started = time.perf_counter()
    result = sft.run(recipe, ws)
    seconds = time.perf_counter() - started
    logs = [json.loads(line) for line in (ws.path("sft") / "metrics.jsonl").read_text().splitlines()]
    final = next(m for m in reversed(logs) if "train_runtime" in m)
    tokens = max(m.get("num_tokens", 0) for m in logs)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    resident_mb = int(next(line for line in open("/proc/self/status") if line.startswith("VmRSS")).split()[1]) / 1024
    resolved = json.loads((ws.path("sft") / "stage.json").read_text())["precision"]
    print(f"{info['size']} model, {info['parameters']:,} parameters; {report['turns']['train']} training examples")
    method = "every weight" if args.full else f"LoRA r={args.lora_r} (dropout {args.lora_dropout}) + embeddings"
    batches = "grouped by length" if args.group_by_length else "uniformly random"
    print(f"  {result['global_step']} steps of {args.batch} examples {batches}, {method}, {resolved} (asked: {precision})")
    print(f"  training time {final['train_runtime']:.1f} s (stage wall time {seconds:.1f} s)")
    print(
        f"  {tokens / final['train_runtime']:.0f} tokens/s ({tokens:,.0f} tokens), "
        f"{final['train_runtime'] / result['global_step']:.2f} s/step"
    )
    trimmed = "kept" if args.keep_freed_memory else "trimmed at each log"
    print(f"  peak memory (max RSS) {peak_mb:.0f} MB, {resident_mb:.0f} MB resident at the end (freed heap {trimmed})")
    print(f"  training loss {result['train_loss']:.3f}")


if __name__ == "__main__":
    main()
