"""The optimizer steps of one update: ``grpo.minibatches`` steps over its samples, each the clipped-ratio loss
plus the KL penalty (and with ``grpo.sft_weight`` the SFT anchor), accumulated over micro-batches and clipped.

Every process makes the same number of steps and one synchronised backward each; none when no process has a
sample (Adam's momentum would move the weights even on a zero gradient).
"""

from __future__ import annotations

import contextlib
import random
import warnings
from statistics import fmean
from typing import Any

from evoh.grpo.anchor import sft_loss
from evoh.grpo.metrics import TOKEN_FIGURES
from evoh.grpo.model import reference_policy
from evoh.grpo.objective import (
    Sample,
    clipped_policy_loss,
    forward_logprobs,
    guided_restriction,
    kl_k3,
    loss_weights,
    micro_batches,
    pad_rows,
)
from evoh.grpo.state import TrainState


def optimise(state: TrainState, samples: list[Sample], seed: int) -> dict[str, float | None]:
    """``minibatches`` optimizer steps over the update's samples, shuffled by ``seed``; the loss averaged over
    tokens or episodes (``loss_aggregation``); the figures each step measured, averaged over trained tokens."""
    g, accelerator = state.g, state.accelerator
    if state.reduce(len(samples), "sum") == 0:  # nothing to learn from (grpo.train_groups, grpo.train_rollouts)
        return _skip(state)
    order = list(range(len(samples)))
    random.Random(seed).shuffle(order)
    parts = [[samples[i] for i in order[k :: g.minibatches]] for k in range(g.minibatches)]
    for step, part in enumerate(parts):  # the first step's weights are the rollout policy's: its samples need no stored log-probs
        score_samples(state, part, old=step > 0, ref=g.kl > 0)
    state.model.train()  # dropout is off (load_trainable): train mode only lets gradient checkpointing engage
    totals = dict.fromkeys((*TOKEN_FIGURES, "tokens"), 0.0)
    grad_norms, anchor_losses = [], []
    for step, part in enumerate(parts):
        if state.anchor and g.sft_weight > 0:
            drawn = random.Random(seed * 7 + step).sample(state.anchor, min(g.sft_examples, len(state.anchor)))
            anchor_losses.append(sft_loss(state, drawn))
        accumulate_gradients(state, part, step > 0, totals)
        norm = accelerator.clip_grad_norm_([p for p in state.model.parameters() if p.requires_grad], g.max_grad_norm)
        grad_norms.append(float(norm))
        state.optimizer.step()
        state.scheduler.step()
        state.optimizer.zero_grad(set_to_none=True)
    state.model.eval()
    tokens = totals.pop("tokens")
    stats: dict[str, float | None] = {k: v / max(tokens, 1.0) for k, v in totals.items()}
    stats["grad_norm"] = fmean(grad_norms) if grad_norms else 0.0
    stats["sft_loss"] = state.reduce(fmean(anchor_losses)) if anchor_losses else None
    stats["lr"] = state.scheduler.get_last_lr()[0]
    return stats


def _skip(state: TrainState) -> dict[str, float | None]:
    """No optimizer step; the schedule stays a function of the update: it advances as if stepped."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
        for _ in range(state.g.minibatches):
            state.scheduler.step()
    return {**dict.fromkeys((*TOKEN_FIGURES, "grad_norm", "sft_loss")), "lr": state.scheduler.get_last_lr()[0]}


def score_samples(state: TrainState, samples: list[Sample], old: bool, ref: bool) -> None:
    """Fill in the rollout policy's and/or the reference's log-probs before any weight moves."""
    import torch

    if not samples or not (old or ref):
        return
    g, model, device = state.g, state.unwrapped, state.device
    with torch.no_grad():
        for batch in micro_batches(samples, g.micro_batch_tokens):
            restriction = guided_restriction(batch, state.vocabulary, device)
            if old:
                logp, _, mask = forward_logprobs(model, batch, state.pad_id, g.temperature, device, restriction)
                for row, s in enumerate(batch):
                    s.old_logp = logp[row][mask[row]].cpu()
            if ref:
                with reference_policy(model):
                    logp, _, mask = forward_logprobs(model, batch, state.pad_id, g.temperature, device, restriction)
                for row, s in enumerate(batch):
                    s.ref_logp = logp[row][mask[row]].cpu()


def accumulate_gradients(state: TrainState, part: list[Sample], stored_old: bool, totals: dict[str, float]) -> None:
    """The gradient of one optimizer step's samples, micro-batch by micro-batch, all-reduced once at its last
    (a process with nothing to learn this step still joins it); ``stored_old``: the ratio's denominator is the
    samples' stored rollout log-probs, else the current weights' own (detached)."""
    import torch

    g, accelerator, model = state.g, state.accelerator, state.model
    weights, units = loss_weights([len(s.completion) for s in part], [s.episode for s in part], g.loss_aggregation)
    scale = accelerator.num_processes / max(state.reduce(units, "sum"), 1.0)  # DDP averages gradients over processes
    batches = micro_batches(part, g.micro_batch_tokens) or [[]]
    for index, batch in enumerate(batches):
        last = index == len(batches) - 1
        with contextlib.nullcontext() if last else accelerator.no_sync(model):
            if not batch:  # nothing to learn here this step; still join the gradient all-reduce
                dummy = torch.tensor([[state.pad_id]], device=state.device)
                loss = model(input_ids=dummy).logits.sum() * 0.0
                accelerator.backward(loss)
                continue
            loss = batch_loss(state, batch, stored_old, weights, totals) * scale
            accelerator.backward(loss)


def batch_loss(state: TrainState, batch: list[Sample], stored_old: bool, weights: dict[Any, float], totals: dict[str, float]):
    """The weighted sum of one micro-batch's per-token losses (clipped ratio plus β × KL), adding its figures to
    ``totals``."""
    import torch

    g, device = state.g, state.device
    restriction = guided_restriction(batch, state.vocabulary, device)
    logp, entropy, mask = forward_logprobs(state.model, batch, state.pad_id, g.temperature, device, restriction)
    width = mask.shape[1]
    advantages = torch.tensor([s.advantage for s in batch], device=device).unsqueeze(1)
    old = pad_rows([s.old_logp for s in batch], width, device) if stored_old else logp.detach()
    pg, clipped = clipped_policy_loss(logp, old, advantages, g.clip_low, g.clip_high)
    per_token = pg
    if g.kl > 0:
        kl = kl_k3(logp, pad_rows([s.ref_logp for s in batch], width, device), g.kl_cap)
        per_token = pg + g.kl * kl
        totals["kl"] += float((kl.detach() * mask).sum())
        totals["kl_capped"] += float(((kl.detach() >= g.kl_cap) & mask).sum()) if g.kl_cap > 0 else 0.0
    weight = torch.tensor([weights[s.episode] for s in batch], device=device).unsqueeze(1)
    totals["loss"] += float((per_token.detach() * mask).sum())
    totals["pg_loss"] += float((pg.detach() * mask).sum())
    totals["clip_fraction"] += float((clipped & mask).sum())
    totals["entropy"] += float((entropy * mask).sum())
    totals["ratio"] += float((torch.exp(logp.detach() - old) * mask).sum())
    totals["tokens"] += float(mask.sum())
    return (per_token * mask * weight).sum()
