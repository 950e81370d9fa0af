"""GRPO's objective as small pure functions, so the loop and its unit tests share one implementation.

* Group-relative advantages: the G rollouts of one game are compared with each other only,
  ``A = (R − mean_g R) / std_g R`` (the division is switchable). Every turn of an episode gets its
  episode's advantage.
* The token-level clipped-ratio loss against the rollout policy's log-probs,
  ``−min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)`` with ``ρ = exp(log π − log π_old)``.
* Under guided decoding the policy that sampled is the model renormalised over the tokens guidance allowed:
  where that set was a short list (a command's spelling, a forced tag), log-probs are taken over it, so a
  forced token has log-prob 0 and moves nothing; in free thought (the mask allows nearly everything) the
  model's own log-prob stands.
* The KL penalty to the reference policy, the k3 estimate ``exp(r − l) − (r − l) − 1`` (r: the
  reference's log-prob, l: the policy's), which is non-negative and unbiased for KL(π‖π_ref).

Losses are returned per token; the caller averages over every completion token of an update
("token-level"), so long responses weigh as much per token as short ones.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from statistics import fmean, pstdev

import torch


def group_advantages(rewards: Sequence[float], groups: Sequence[Hashable], std_normalize: bool = True, eps: float = 1e-6) -> list[float]:
    """One advantage per rollout: its reward relative to the other rollouts of the same group (task)."""
    members: dict[Hashable, list[float]] = {}
    for reward, group in zip(rewards, groups, strict=True):
        members.setdefault(group, []).append(reward)
    stats = {g: (fmean(v), pstdev(v)) for g, v in members.items()}
    advantages = []
    for reward, group in zip(rewards, groups, strict=True):
        mean, std = stats[group]
        advantages.append((reward - mean) / (std + eps) if std_normalize else reward - mean)
    return advantages


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of each chosen token under softmax(logits / T), and the distribution's entropy (no gradient)."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    chosen = logp_all.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return chosen, entropy


def restrict_logprobs(
    logp: torch.Tensor, logits: torch.Tensor, choices: Sequence[tuple[int, int, Sequence[int]]], temperature: float = 1.0
) -> torch.Tensor:
    """``logp`` [B, C] with each listed position ``(row, column, allowed ids)`` renormalised over its allowed ids
    (``logits`` [B, C, V], the same positions)."""
    if not choices:
        return logp
    rows = torch.tensor([c[0] for c in choices], device=logits.device)
    columns = torch.tensor([c[1] for c in choices], device=logits.device)
    longest = max(len(c[2]) for c in choices)
    index = torch.zeros((len(choices), longest), dtype=torch.long)
    valid = torch.zeros((len(choices), longest), dtype=torch.bool)
    for k, (_, _, ids) in enumerate(choices):
        index[k, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
        valid[k, : len(ids)] = True
    scaled = logits[rows, columns].float() / temperature
    allowed = scaled.gather(-1, index.to(logits.device)).masked_fill(~valid.to(logits.device), float("-inf"))
    shift = torch.logsumexp(allowed, -1) - torch.logsumexp(scaled, -1)  # log of the allowed tokens' share
    return logp - torch.zeros_like(logp).index_put((rows, columns), shift)


def clipped_policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip_low: float = 0.2, clip_high: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-style loss and a mask of the tokens where the clip is what bounds it."""
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages
    loss = -torch.minimum(unclipped, clipped)
    was_clipped = ((ratio < 1 - clip_low) & (advantages < 0)) | ((ratio > 1 + clip_high) & (advantages > 0))
    return loss, was_clipped


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(π‖π_ref) from the sampled tokens' log-probs."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1
