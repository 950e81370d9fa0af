"""SFT's trainer checkpoints: which one a run resumes from (the newest complete one), whether it was written by
the same kind of training, and the metrics lines to keep when a run continues from it."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson

from evoh.errors import EvohError

log = logging.getLogger(__name__)


def incomplete(checkpoint: Path) -> str | None:
    """Why a trainer checkpoint cannot be resumed from, or None if it can. The trainer writes the weights
    first and ``trainer_state.json`` last, so a save cut short lacks the state or holds a partial weights file."""
    from safetensors import SafetensorError, safe_open

    state = checkpoint / "trainer_state.json"
    if not state.is_file():
        return "no trainer_state.json"
    try:
        orjson.loads(state.read_bytes())
    except orjson.JSONDecodeError:
        return "trainer_state.json is cut short"
    weights = sorted(checkpoint.glob("*.safetensors"))
    if not weights:
        return "no weights file"
    for file in weights:
        try:
            with safe_open(file, framework="np"):  # reads the header and checks that the tensors it lists are all there
                pass
        except SafetensorError as exc:
            return f"{file.name} is unreadable: {exc}"
    return None


def keep_metrics_until(path: Path, step: int) -> None:
    """Keep the lines of steps up to the checkpoint a run continues from (0: none): the steps after it run and log
    again, and what a killed run logged past its last complete checkpoint would otherwise appear twice."""
    from evoh.workspace import atomic_write_bytes, read_jsonl

    if path.exists():
        kept = [r for r in read_jsonl(path).records if r.get("step", 0) <= step]
        atomic_write_bytes(path, b"".join(orjson.dumps(r) + b"\n" for r in kept))


def resumable_checkpoint(checkpoints: Path) -> Path | None:
    """The newest complete ``checkpoint-N`` in ``checkpoints``; a newer one a kill left incomplete is named
    and passed over. None (said so) when there is none to resume from."""
    numbered = [p for p in checkpoints.glob("checkpoint-*") if p.name.removeprefix("checkpoint-").isdigit()]
    for checkpoint in sorted(numbered, key=lambda p: int(p.name.removeprefix("checkpoint-")), reverse=True):
        why = incomplete(checkpoint)
        if why is None:
            return checkpoint
        log.warning("skipping %s, a save cut short: %s", checkpoint, why)
    if numbered:
        log.warning("no complete checkpoint in %s: training starts again from the base model", checkpoints)
    return None


def check_same_method(checkpoint: Path, full: bool) -> None:
    """A checkpoint resumes only the kind of training that wrote it: an adapter's holds adapter weights alone."""
    written_full = not (checkpoint / "adapter_model.safetensors").exists()
    if written_full != full:
        kinds = {True: "full fine-tuning (sft.full = true)", False: "a LoRA adapter (sft.full = false)"}
        raise EvohError(
            f"{checkpoint} was written by {kinds[written_full]}; this run asks for {kinds[full]}",
            hint=f"resume with sft.full = {str(written_full).lower()}, or delete {checkpoint.parent} to start over",
        )


def final_eval_loss(state) -> float | None:
    """The validation loss the trainer already computed at its last step, if it did (a 135M model spends
    minutes on each pass over the validation turns)."""
    for entry in reversed(state.log_history):
        if "eval_loss" in entry:
            return entry["eval_loss"] if entry.get("step") == state.global_step else None
    return None
