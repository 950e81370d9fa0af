"""`evoh sft`: stage one, LoRA, QLoRA or full fine-tuning on refined teacher turns with TRL's SFTTrainer.

Loss is on the assistant's response only (the chat template marks it), unless ``assistant_only_loss``
is off: a randomly initialised base then learns from every prompt token too. Checkpoints go to
``sft/checkpoints/`` and ``--resume`` continues from the last complete one; every logged value goes to
``sft/metrics.jsonl``; the adapter is saved as safetensors in ``sft/adapter/``, or with ``full`` the
whole model in ``sft/model/`` (a few-million-parameter random base learns faster with every weight
free than through low-rank updates, and a full step costs less on a CPU). After training, the
model's greedy action on held-out turns is compared with the teacher's (``val_actions`` in stage.json).
Precision follows the hardware (``training_precision``): bf16 where it is computed natively, else fp32.
Under torchrun or ``accelerate launch`` every process trains and only the main one writes evoh's files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from evoh.config import Recipe, SftConfig, recipe_dict
from evoh.distributed import rank, world_size
from evoh.errors import EvohError
from evoh.memory import release_freed_memory
from evoh.models.hub import model_directory
from evoh.policy.local import training_precision
from evoh.runs.key import check_same_run, file_key, record_run, run_key, weights_key
from evoh.tracking import PROJECT, check_trackers, close_trackio, run_name
from evoh.workspace import TRAINED_WEIGHTS, Workspace, file_sha256, weights_identity

log = logging.getLogger(__name__)

STAGE = "sft"


def tensorboard_callback(report_to: list[str], directory: Path) -> list[Any]:
    """TensorBoard's callback writing to ``WS/sft/tensorboard/`` (the trainer's own would write under the
    checkpoints), on the main process only."""
    if "tensorboard" not in report_to or rank() != 0:
        return []
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    return [TensorBoardCallback(SummaryWriter(log_dir=str(directory / "tensorboard")))]


def check_4bit(load_in_4bit: bool) -> None:
    """QLoRA needs CUDA: bitsandbytes 4-bit on a CPU silently loses gradients after an eval-mode forward."""
    if not load_in_4bit:
        return
    import torch

    if not torch.cuda.is_available():
        raise EvohError(
            "--load-in-4bit (QLoRA) needs a CUDA GPU, and none is visible",
            hint="drop --load-in-4bit to train LoRA on full-precision weights here, or run on a GPU node",
        )


def action_kind(turn) -> str:
    """A teacher action's class for the per-kind figures: the meta verb, or the command's first word."""
    if turn.kind == "meta":
        return turn.verb
    return turn.action.split(" ", 1)[0] if turn.action else turn.kind


def action_agreement(tokenizer, model, examples: list[dict[str, Any]], batch_size: int = 16) -> dict[str, Any]:
    """How often the trained model's greedy action equals the teacher's on held-out turns, overall and by kind.

    Cheaper than an evaluation on games and an early warning: an episode needs many right actions in a row,
    so a model that agrees with its teacher on few turns cannot win many games."""
    from evoh.config import ModelConfig
    from evoh.harness.turns import parse_turn
    from evoh.policy.local import LocalPolicy

    policy = LocalPolicy(ModelConfig(temperature=0.0, max_tokens=128, batch_size=batch_size), loaded=(tokenizer, model))
    prompts = [tokenizer.apply_chat_template(e["messages"][:-1], tokenize=False, add_generation_prompt=True) for e in examples]
    was_training = model.training
    model.eval()
    try:
        completions = policy.complete(prompts)
    finally:
        model.train(was_training)
    by_kind: dict[str, list[int]] = {}
    for example, completion in zip(examples, completions, strict=True):
        wanted = parse_turn(example["messages"][-1]["content"])
        counts = by_kind.setdefault(action_kind(wanted), [0, 0])
        counts[0] += parse_turn(completion.text).action == wanted.action
        counts[1] += 1
    matched = sum(c[0] for c in by_kind.values())
    return {
        "turns": len(examples),
        "matched": matched,
        "accuracy": matched / len(examples) if examples else 0.0,
        "by_kind": {kind: {"matched": m, "turns": n} for kind, (m, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])},
    }


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


def check_examples(path: Path, workspace: Workspace) -> None:
    """refine writes its files whole, so a torn line, a line that is not JSON or an example without its messages
    is damage: refused here, naming the line, before the dataset loader meets it with a traceback."""
    from evoh.records import validate_example
    from evoh.workspace import read_jsonl

    fix = f"the file was edited or damaged: rerun `evoh refine -w {workspace.root}` to write it again"
    try:
        contents = read_jsonl(path, warn_torn=False)
    except EvohError as exc:
        raise EvohError(exc.message, hint=fix) from None
    if contents.torn:
        raise EvohError(f"{path}: its last line is cut short ({len(contents.torn)} bytes without a newline)", hint=fix)
    for number, row in enumerate(contents.records, start=1):
        validate_example(row, f"{path}:{number}", fix)


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


def settings(recipe: Recipe, workspace: Workspace) -> dict[str, Any]:
    """What the trained weights depend on: `evoh run` keys the stage on it, and stage.json records it. The
    held-out action check and where the figures are watched change no weight."""
    declared = dataclasses.asdict(recipe.sft)
    declared.pop("action_check")
    declared.pop("report_to")
    return declared


def inputs(recipe: Recipe) -> list[str]:
    """The stages whose outputs it reads: refine's examples and the base model."""
    return ["refine", "model"]


# settings that only make a run longer: a run that changed only these continues from its checkpoints
EXTENDABLE = ("max_steps", "epochs", "save_steps", "eval_steps", "logging_steps")


def run(recipe: Recipe, workspace: Workspace, resume: bool = False) -> dict[str, Any]:
    c = recipe.sft
    files, model_dir = _checked_inputs(c, workspace)

    import torch
    from datasets import load_dataset
    from trl import SFTTrainer

    data = load_dataset("json", data_files=files)
    cuda = torch.cuda.is_available()
    bf16 = training_precision(c.precision, cuda, "sft") == "bf16"
    accumulation = max(1, c.batch_size // (c.per_device_batch * world_size()))

    lock = workspace.writing(STAGE) if rank() == 0 else contextlib.nullcontext(workspace.path(STAGE))
    started = time.time()
    checkpoints = workspace.path(STAGE) / "checkpoints"
    if checkpoints.exists() and any(checkpoints.glob("checkpoint-*")) and not resume:
        raise EvohError(
            f"{checkpoints} holds checkpoints of an earlier run",
            hint="pass --resume to continue it, or delete the sft/ folder to start over",
        )
    checkpoint = resumable_checkpoint(checkpoints) if resume else None
    read = {"examples": {name: file_key(Path(path)) for name, path in files.items()}, "base_model": weights_key(model_dir)}
    key = run_key(STAGE, settings(recipe, workspace), read, EXTENDABLE)
    if checkpoint is not None:
        check_same_method(checkpoint, c.full)
        hint = "resume with the settings it was made with, or delete the sft/ folder to start over"
        check_same_run(workspace.path(STAGE), key, hint)
    with lock as directory:
        directory = Path(directory)
        if checkpoint is None and rank() == 0:
            record_run(directory, key)
        model, tokenizer = _base_model(c, model_dir, bf16, cuda)
        args = _training_args(c, workspace, checkpoints, accumulation, cuda, bf16, evaluate="val" in files)
        metrics_file = directory / "metrics.jsonl"
        if rank() == 0:
            keep_metrics_until(metrics_file, int(checkpoint.name.rpartition("-")[2]) if checkpoint else 0)
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=data["train"],
            eval_dataset=data.get("val"),
            processing_class=tokenizer,
            peft_config=_lora_config(c),
            callbacks=[*_callbacks(metrics_file, started), *tensorboard_callback(c.report_to, directory)],
        )
        if args.disable_tqdm:
            from transformers.trainer_callback import PrinterCallback

            trainer.remove_callback(PrinterCallback)
            trainer.add_callback(_log_lines(started))
        with contextlib.redirect_stdout(sys.stderr):  # the trainer prints its logs; stdout is for results
            final = _train(trainer, checkpoint, data, c, tokenizer)
        close_trackio()
        manifest = {
            "config": recipe_dict(recipe)["sft"],
            "settings": settings(recipe, workspace),
            "method": "full" if c.full else "lora",
            "base_model": weights_identity(model_dir),  # a Hub model's path names its snapshot's commit
            "inputs": {name: {"path": path, "sha256": file_sha256(Path(path))} for name, path in files.items()},
            "processes": world_size(),
            "gradient_accumulation": accumulation,
            "precision": "bf16" if bf16 else "fp32",
            "weights_dtype": str(model.dtype).removeprefix("torch."),
            "quantization": "nf4" if c.load_in_4bit else None,
        }
        _save(trainer, workspace, directory, c.full, manifest, started, final)
    return final


def _checked_inputs(c: SftConfig, workspace: Workspace) -> tuple[dict[str, str], Path]:
    """The refine files to train and validate on and the base model's directory (a Hub id's snapshot), after
    every check that needs no ML library."""
    workspace.require("refine")
    model_dir = model_directory(c.model, "sft.model")
    check_trackers(c.report_to, "sft.report_to")
    if c.full and c.load_in_4bit:
        raise EvohError(
            "full fine-tuning cannot train 4-bit weights",
            hint="drop --load-in-4bit, or drop --full to train a LoRA adapter on the 4-bit base",
        )
    check_4bit(c.load_in_4bit)
    files = {"train": str(workspace.examples("train"))}
    if workspace.examples("val").stat().st_size > 0:
        files["val"] = str(workspace.examples("val"))
    for file in files.values():
        check_examples(Path(file), workspace)
    return files, model_dir


def _base_model(c: SftConfig, model_dir: Path, bf16: bool, cuda: bool) -> tuple[Any, Any]:
    """The base model (NF4 through bitsandbytes for QLoRA; bf16 weights only on a GPU) and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quantization = None
    if c.load_in_4bit:
        from transformers import BitsAndBytesConfig

        quantization = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16 if bf16 else torch.float16,
        )
    model = AutoModelForCausalLM.from_pretrained(
        model_dir,
        dtype=torch.bfloat16 if bf16 and cuda else torch.float32,
        quantization_config=quantization,
    )
    return model, AutoTokenizer.from_pretrained(model_dir)


def _lora_config(c: SftConfig) -> Any:
    """PEFT's LoRA settings, or None for full fine-tuning."""
    if c.full:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=c.lora_r,
        lora_alpha=c.lora_alpha,
        lora_dropout=c.lora_dropout,
        target_modules="all-linear" if c.target == "all-linear" else [t.strip() for t in c.target.split(",")],
        task_type="CAUSAL_LM",
        modules_to_save=["embed_tokens", "lm_head"] if c.train_embeddings else None,
    )


def _training_args(
    c: SftConfig, workspace: Workspace, checkpoints: Path, accumulation: int, cuda: bool, bf16: bool, evaluate: bool
) -> Any:
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(checkpoints),
        num_train_epochs=c.epochs,
        max_steps=c.max_steps,
        learning_rate=c.lr,
        lr_scheduler_type=c.scheduler,
        warmup_steps=c.warmup_ratio,  # a float below 1 is a share of the total steps
        per_device_train_batch_size=c.per_device_batch,
        per_device_eval_batch_size=c.per_device_batch,
        gradient_accumulation_steps=accumulation,
        max_length=c.max_length,
        train_sampling_strategy="group_by_length" if c.group_by_length else "random",
        assistant_only_loss=c.assistant_only_loss,
        use_cpu=not cuda,
        bf16=bf16,
        activation_checkpointing=c.gradient_checkpointing and cuda,
        save_strategy="steps",
        save_steps=c.save_steps,
        eval_strategy="steps" if evaluate else "no",
        eval_steps=c.eval_steps,
        logging_steps=c.logging_steps,
        report_to=[name for name in c.report_to if name != "tensorboard"] or "none",  # tensorboard: its own callback
        project=PROJECT,
        run_name=run_name(workspace.root, STAGE),
        seed=c.seed,
        disable_tqdm=not os.isatty(2),
    )


def _callbacks(metrics_file: Path, started: float) -> list[Any]:
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


def _log_lines(started: float) -> Any:
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


def _train(trainer: Any, checkpoint: Path | None, data: Any, c: SftConfig, tokenizer: Any) -> dict[str, Any]:
    """Train (from the checkpoint, if any), then the held-out loss and the greedy actions against the teacher's."""
    result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    final = {"global_step": trainer.state.global_step, "train_loss": result.training_loss}
    if "val" not in data:
        return final
    loss = final_eval_loss(trainer.state)  # the same on every process, so all take one branch
    final["eval_loss"] = loss if loss is not None else trainer.evaluate()["eval_loss"]
    if c.action_check > 0 and trainer.is_world_process_zero() and not trainer.is_deepspeed_enabled:
        held_out = [data["val"][i] for i in range(min(c.action_check, len(data["val"])))]
        final["val_actions"] = action_agreement(tokenizer, trainer.model, held_out, batch_size=c.per_device_batch)
    return final


def _save(trainer: Any, workspace: Workspace, directory: Path, full: bool, manifest: dict, started: float, final: dict) -> None:
    """The weights (every rank calls it: ZeRO-3 gathers them first), then the stage's manifest (main process)."""
    weights = directory / TRAINED_WEIGHTS[full]
    stale = directory / TRAINED_WEIGHTS[not full]
    trainer.save_model(str(weights))  # with the tokenizer
    if trainer.is_world_process_zero():
        if stale.exists():
            shutil.rmtree(stale)  # an earlier run's other kind of weights must not outlive it
        workspace.finish(STAGE, {**manifest, "seconds": time.time() - started, **final})


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
