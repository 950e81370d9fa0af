"""The model GRPO trains and the reference it is held to.

The trainable policy is a PEFT model: continuing the SFT adapter, or a fresh LoRA on the base. The reference
is the policy the run starts from: continuing, a frozen copy of that adapter; fresh, the model with its
adapter disabled. Dropout is switched off, so the ratio compares the same function at rollout and at
training time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoh.config import GrpoConfig
from evoh.errors import EvohError
from evoh.grpo.state import TrainState

REFERENCE = "reference"


def make_accelerator(g: GrpoConfig, directory: Path) -> tuple[Any, str]:
    """(the accelerator, ``bf16`` or ``fp32``): on a CPU bf16 is autocast, under which the prepared model's
    forward runs, and so do the rollouts; on a GPU it means bf16 weights. It carries the trackers of
    ``grpo.report_to`` (TensorBoard's files under ``directory/tensorboard/``)."""
    import torch
    from accelerate import Accelerator

    from evoh.policy.local import training_precision

    cuda = torch.cuda.is_available()
    precision = training_precision(g.precision, cuda, "grpo")
    accelerator = Accelerator(
        cpu=not cuda,
        mixed_precision="bf16" if precision == "bf16" and not cuda else None,
        log_with=g.report_to or None,
        project_dir=str(directory / "tensorboard"),
    )
    if accelerator.distributed_type.name == "DEEPSPEED":
        # DeepSpeed steps the optimizer inside backward at a fixed accumulation count; an update here packs
        # a varying number of micro-batches, so its gradients would be stepped at the wrong boundaries
        raise EvohError(
            "evoh grpo does not run under DeepSpeed", hint="launch it with recipes/accelerate/ddp-8gpu.yaml (DDP) instead"
        )
    return accelerator, precision


def load_training(
    accelerator, precision: str, base: Path, adapter: Path | None, g: GrpoConfig, reference: bool
) -> tuple[Any, TrainState]:
    """(tokenizer, the training state): the trainable model, its optimizer and its schedule (one step per
    optimizer step, ``minibatches`` per update), prepared for this process."""
    import torch
    from transformers import get_scheduler

    bf16_weights = precision == "bf16" and torch.cuda.is_available()
    tokenizer, model = load_trainable(base, adapter, g, str(accelerator.device), reference=reference, bf16_weights=bf16_weights)
    optimizer = build_optimizer([p for p in model.parameters() if p.requires_grad], g)
    scheduler = get_scheduler(
        g.scheduler, optimizer, num_warmup_steps=g.warmup_updates * g.minibatches, num_training_steps=g.updates * g.minibatches
    )
    model, optimizer = accelerator.prepare(model, optimizer)  # the scheduler stays ours: one step per optimizer step
    return tokenizer, TrainState(accelerator, model, optimizer, scheduler, g, tokenizer.pad_token_id)


def load_trainable(base: Path, adapter: Path | None, g: GrpoConfig, device: str, reference: bool, bf16_weights: bool = False):
    """(tokenizer, PEFT model) with the ``default`` adapter trainable and, with ``reference`` (for the KL penalty or
    the drift measure), a frozen copy of the adapter it continues."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if bf16_weights else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype).to(device)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, adapter, is_trainable=True)
        if reference:
            model.load_adapter(adapter, adapter_name=REFERENCE, is_trainable=False)
            model.set_adapter("default")
    else:
        target = "all-linear" if g.target == "all-linear" else [t.strip() for t in g.target.split(",")]
        lora = LoraConfig(r=g.lora_r, lora_alpha=g.lora_alpha, lora_dropout=0.0, target_modules=target, task_type="CAUSAL_LM")
        model = get_peft_model(model, lora)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0  # the ratio must compare the same function at rollout and at training time
    if g.gradient_checkpointing and cuda:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.eval()
    return tokenizer, model


@contextlib.contextmanager
def reference_policy(model) -> Iterator[None]:
    """Within this block the model computes the reference policy."""
    if REFERENCE in model.peft_config:
        model.set_adapter(REFERENCE, inference_mode=True)
        try:
            yield
        finally:
            model.set_adapter("default")
    else:
        with model.disable_adapter():
            yield


def build_optimizer(parameters: list[Any], g: GrpoConfig) -> Any:
    """``grpo.optimizer``: AdamW, or plain SGD, whose step is the clipped gradient times lr."""
    import torch

    if g.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=g.lr)
    return torch.optim.AdamW(parameters, lr=g.lr)


def save_adapter(model, target: Path) -> None:
    """The trained ``default`` adapter alone (never the reference's copy), as safetensors."""
    model.save_pretrained(target, selected_adapters=["default"], safe_serialization=True)
