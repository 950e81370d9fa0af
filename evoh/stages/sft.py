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

from evoh.config import Recipe, SftConfig, recipe_dict
from evoh.distributed import rank, world_size
from evoh.errors import EvohError
from evoh.models.hub import model_directory
from evoh.policy.local import training_precision
from evoh.runs.key import check_same_run, file_key, record_run, run_key, weights_key
from evoh.sft.agreement import action_agreement
from evoh.sft.checkpoints import check_same_method, final_eval_loss, keep_metrics_until, resumable_checkpoint
from evoh.sft.watch import log_lines_callback, metrics_callbacks, tensorboard_callback
from evoh.tracking import PROJECT, check_trackers, close_trackio, run_name
from evoh.workspace import TRAINED_WEIGHTS, Workspace, file_sha256, weights_identity

STAGE = "sft"
log = logging.getLogger(__name__)


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
# settings that change how a run computes, not what it learns, so a resumed run may change them (after running out
# of memory, say); the base model is keyed by what its weights hold, wherever they lie
COMPUTE_ONLY = ("per_device_batch", "gradient_checkpointing", "model")


def run(recipe: Recipe, workspace: Workspace, resume: bool = False) -> dict[str, Any]:
    c = recipe.sft
    files, model_dir = _checked_inputs(c, workspace)
    checkpoint, key = _resume_point(recipe, workspace, files, model_dir, resume)

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
    with lock as directory:
        directory = Path(directory)
        if rank() == 0:
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
            callbacks=[*metrics_callbacks(metrics_file), *tensorboard_callback(c.report_to, directory)],
        )
        if args.disable_tqdm:
            from transformers.trainer_callback import PrinterCallback

            trainer.remove_callback(PrinterCallback)
            trainer.add_callback(log_lines_callback(started))
        with contextlib.redirect_stdout(sys.stderr):  # the trainer prints its logs; stdout is for results
            final = _train(trainer, checkpoint, data, c, tokenizer)
        close_trackio()
        manifest = _manifest(recipe, workspace, files, model_dir, accumulation, bf16, str(model.dtype))
        _save(trainer, workspace, directory, c.full, manifest, started, final)
    return final


def _resume_point(
    recipe: Recipe, workspace: Workspace, files: dict[str, str], model_dir: Path, resume: bool
) -> tuple[Path | None, dict[str, Any]]:
    """The checkpoint to continue from (None: start over) and the run's key. Checkpoints are never trained over
    without ``--resume``, nor continued by another kind of training or under other settings."""
    checkpoints = workspace.path(STAGE) / "checkpoints"
    if checkpoints.exists() and any(checkpoints.glob("checkpoint-*")) and not resume:
        raise EvohError(
            f"{checkpoints} holds checkpoints of an earlier run",
            hint="pass --resume to continue it, or delete the sft/ folder to start over",
        )
    checkpoint = resumable_checkpoint(checkpoints) if resume else None
    read = {"examples": {name: file_key(Path(path)) for name, path in files.items()}, "base_model": weights_key(model_dir)}
    key = run_key(STAGE, settings(recipe, workspace), read, EXTENDABLE + COMPUTE_ONLY)
    if checkpoint is not None:
        check_same_method(checkpoint, recipe.sft.full)
        hint = "resume with the settings and inputs it was made with, or delete the sft/ folder to start over"
        if not check_same_run(workspace.path(STAGE), key, hint):
            log.warning("%s records no run key (an earlier evoh wrote it): its settings are not checked", checkpoint.parent)
    return checkpoint, key


def _manifest(
    recipe: Recipe, workspace: Workspace, files: dict[str, str], model_dir: Path, accumulation: int, bf16: bool, dtype: str
) -> dict[str, Any]:
    """What stage.json records of the run, before its result."""
    c = recipe.sft
    return {
        "config": recipe_dict(recipe)["sft"],
        "settings": settings(recipe, workspace),
        "method": "full" if c.full else "lora",
        "base_model": weights_identity(model_dir),  # a Hub model's path names its snapshot's commit
        "inputs": {name: {"path": path, "sha256": file_sha256(Path(path))} for name, path in files.items()},
        "processes": world_size(),
        "gradient_accumulation": accumulation,
        "precision": "bf16" if bf16 else "fp32",
        "weights_dtype": dtype.removeprefix("torch."),
        "quantization": "nf4" if c.load_in_4bit else None,
    }


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
