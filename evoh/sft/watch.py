"""How an SFT run is watched: its logs to ``sft/metrics.jsonl``, a line per log off a terminal, and TensorBoard."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import orjson

from evoh.distributed import rank
from evoh.memory import release_freed_memory


def tensorboard_callback(report_to: list[str], directory: Path) -> list[Any]:
    """TensorBoard's callback writing to ``WS/sft/tensorboard/`` (the trainer's own would write under the
    checkpoints), on the main process only."""
    if "tensorboard" not in report_to or rank() != 0:
        return []
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    return [TensorBoardCallback(SummaryWriter(log_dir=str(directory / "tensorboard")))]


def metrics_callbacks(metrics_file: Path) -> list[Any]:
    """Every log to sft/metrics.jsonl (main process), and freed memory handed back to the system at each log."""
    from transformers import TrainerCallback

    class MetricsToJsonl(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                with open(metrics_file, "ab") as f:
                    f.write(orjson.dumps({"step": state.global_step, "epoch": state.epoch, **logs}) + b"\n")

    class ReleaseFreedMemory(TrainerCallback):
        """Every batch has another length, and glibc keeps the freed tensors' pages: without a trim at
        each log, resident memory grows over a run."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            release_freed_memory()

    return [MetricsToJsonl(), ReleaseFreedMemory()]


def log_lines_callback(started: float) -> Any:
    """Off a terminal, where the trainer would print raw dicts: one line per log with the step of the total."""
    from transformers import TrainerCallback

    class LogLines(TrainerCallback):
        last: tuple[float, float] | None = None  # (tokens seen, time) at the last training log

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not (state.is_world_process_zero and logs):
                return
            now, rate = time.time(), None
            if "num_tokens" in logs and "loss" in logs:
                if self.last is not None and now > self.last[1]:
                    rate = (logs["num_tokens"] - self.last[0]) / (now - self.last[1])
                self.last = (logs["num_tokens"], now)
            sys.stderr.write(sft_log_line(state.global_step, state.max_steps, logs, rate, now - started) + "\n")
            sys.stderr.flush()

    return LogLines()


def sft_log_line(step: int, total: int, logs: dict[str, Any], tokens_per_second: float | None, seconds: float) -> str:
    """``sft step 40/500  loss 0.512  lr 2.9e-03  1,234 tokens/s  1.2 min`` (an evaluation's loss as ``eval loss``)."""
    parts = [f"sft step {step}/{total}"]
    if "loss" in logs:
        parts.append(f"loss {logs['loss']:.4f}")
    if "eval_loss" in logs:
        parts.append(f"eval loss {logs['eval_loss']:.4f}")
    if "mean_token_accuracy" in logs:
        parts.append(f"token accuracy {100 * logs['mean_token_accuracy']:.1f}%")
    if "learning_rate" in logs:
        parts.append(f"lr {logs['learning_rate']:.2e}")
    if tokens_per_second is not None:
        parts.append(f"{tokens_per_second:,.0f} tokens/s")
    if "train_loss" in logs:
        parts.append(f"done, mean loss {logs['train_loss']:.4f}")
    parts.append(f"{seconds / 60:.1f} min")
    return "  ".join(parts)
