"""GRPO's objective and the log-prob maths over token sequences, as small pure-torch functions, so the loop and
its unit tests share one implementation.

* Group-relative advantages: the G rollouts of one game are compared with each other only,
  ``A = (R − mean_g R) / std_g R`` (the division is switchable). Every turn of an episode gets its
  episode's advantage. Optionally only groups whose rollouts differ in success are trained, and only
  the rollouts that beat their group's mean (positive reinforcement alone).
* The token-level clipped-ratio loss against the rollout policy's log-probs,
  ``−min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)`` with ``ρ = exp(log π − log π_old)``.
* Under guided decoding the policy that sampled is the model renormalised, at every position guidance
  narrowed, over the tokens it allowed there (free thought without a stray '<' or a stop, a command's
  spelling, a meta-action's argument). Log-probs, ratios, the KL and the entropy are taken over that set:
  a forced token has log-prob 0 and moves nothing, and probability moved onto tokens guidance rules out
  changes no sampled behaviour, so it is neither rewarded nor charged.
* The KL penalty to the reference policy, the k3 estimate ``exp(r − l) − (r − l) − 1`` (r: the
  reference's log-prob, l: the policy's), which is non-negative and unbiased for KL(π‖π_ref), capped per
  token (verl caps it at 10 too) because its tail is unbounded.

Losses are returned per token; ``loss_weights`` says how the caller averages them. "token" (the paper's):
over every completion token of an update, so an episode weighs by its length. "episode": each episode's
tokens average to one term and the episodes average equally, so a lost episode that ran to the horizon
weighs no more than a short win.

A :class:`Sample` is one turn to train on. Batches are left-padded so every completion ends at the last
position, and only the logits before completion tokens are ever computed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from statistics import fmean, pstdev
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from evoh.policy.guided import Allowed, Vocabulary
    from evoh.policy.turn_grammar import GrammarMasks


@dataclass
class Sample:
    """One turn to train on: the prompt and the sampled response tokens, with its episode's advantage."""

    prompt: list[int]
    completion: list[int]
    advantage: float
    choices: dict[int, Allowed] = field(default_factory=dict)  # guided decoding: position -> what guidance allowed there
    episode: Hashable = None  # the rollout it comes from (loss_aggregation = "episode" weighs by it)
    old_logp: Any = None  # log-probs of the rollout policy, when the weights move within an update
    ref_logp: Any = None


def group_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], std_normalize: bool = True, eps: float = 1e-6
) -> list[float]:
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


def group_ends(outcomes: Sequence[bool], groups: Sequence[Hashable]) -> dict[Hashable, set[bool]]:
    """How each group's rollouts ended: {False} all lost, {True} all won, both where they differ."""
    ends: dict[Hashable, set[bool]] = {}
    for outcome, group in zip(outcomes, groups, strict=True):
        ends.setdefault(group, set()).add(bool(outcome))
    return ends


def groups_to_train(outcomes: Sequence[bool], groups: Sequence[Hashable], which: str = "all") -> set[Hashable]:
    """The groups an update learns from: ``all``; ``contrasting``, those whose rollouts did not all end the
    same way (DAPO's dynamic sampling); or ``won``, those with at least one win. In a group that all lost,
    only the shaping terms tell rollouts apart, and std normalisation scales those small differences to
    full-size advantages; in one that all won, what tells them apart is mostly the efficiency term, which
    pays for fewer turns (the paper's harness annealing)."""
    seen = group_ends(outcomes, groups)
    if which == "contrasting":
        return {group for group, kinds in seen.items() if len(kinds) > 1}
    if which == "won":
        return {group for group, kinds in seen.items() if True in kinds}
    return set(seen)


def rollouts_to_train(advantages: Sequence[float], which: str = "all") -> list[bool]:
    """Which rollouts of the trained groups an update learns from: ``all`` (GRPO: the better ones pushed up,
    the worse ones pushed down) or ``above_mean``, those with a positive advantage. Pushing a sampled turn
    down moves its probability onto whatever else the policy could say there, which a small policy may
    not have learned to say well; pushing the better turns up only sharpens what already worked."""
    if which == "all":
        return [True] * len(advantages)
    if which != "above_mean":
        raise ValueError(f"unknown rollout selection {which!r}: use all or above_mean")
    return [a > 0 for a in advantages]


def loss_weights(
    lengths: Sequence[int], episodes: Sequence[Hashable], aggregation: str = "token"
) -> tuple[dict[Hashable, float], int]:
    """The per-token weight of each episode's tokens (samples are turns: ``lengths`` completion tokens from
    episode ``episodes[i]``) and the count the weighted sum is divided by: every token weighs 1 over the
    tokens ("token"), or 1/(its episode's tokens) over the episodes ("episode")."""
    if aggregation == "token":
        return dict.fromkeys(episodes, 1.0), sum(lengths)
    if aggregation != "episode":
        raise ValueError(f"unknown loss aggregation {aggregation!r}: use token or episode")
    tokens: dict[Hashable, int] = {}
    for length, episode in zip(lengths, episodes, strict=True):
        tokens[episode] = tokens.get(episode, 0) + length
    return {e: 1.0 / max(n, 1) for e, n in tokens.items()}, sum(1 for n in tokens.values() if n)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of each chosen token under softmax(logits / T), and the distribution's entropy (no gradient)."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    chosen = logp_all.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = torch.special.entr(logp_all.exp()).sum(-1)  # a token ruled out (-inf) adds nothing
    return chosen, entropy


def restrict_logits(logits: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``logits`` [B, C, V] with the tokens outside ``allowed`` [N, V] set to -inf at the N positions ``(rows, columns)``:
    the distribution guided decoding sampled from, so log-probs, ratios, KL and entropy are the guided policy's."""
    blocked = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    blocked[rows, columns] = ~allowed
    return logits.masked_fill(blocked, float("-inf"))


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


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor, cap: float = 0.0) -> torch.Tensor:
    """Per-token k3 estimate of KL(π‖π_ref) from the sampled tokens' log-probs, at most ``cap`` when it is
    above 0. The estimate grows exponentially in ref_logp − logp: one sampled token the policy has made
    unlikely where the reference was sure of it can outweigh every other token of an update, and after
    gradient clipping leave the policy gradient nothing; capped, that token neither counts nor pulls."""
    delta = ref_logp - logp
    k3 = torch.exp(delta) - delta - 1
    return k3.clamp(max=cap) if cap > 0 else k3


# -- log-probs over token sequences ----------------------------------------------------------------------


def micro_batches(samples: list[Sample], token_budget: int) -> list[list[Sample]]:
    """Samples sorted by length and packed so that each batch's padded size stays within the budget."""
    ordered = sorted(samples, key=lambda s: len(s.prompt) + len(s.completion))
    batches: list[list[Sample]] = []
    current: list[Sample] = []
    for sample in ordered:
        length = len(sample.prompt) + len(sample.completion)
        if current and length * (len(current) + 1) > token_budget:
            batches.append(current)
            current = []
        current.append(sample)
    if current:
        batches.append(current)
    return batches


def guided_restriction(batch: list[Sample], vocabulary: Vocabulary | GrammarMasks | None, device="cpu"):
    """What guidance allowed at the batch's guided tokens, in ``forward_logprobs``' layout and on ``device``:
    (rows, columns, allowed [N, V]), or None when no token was guided. Built once per micro-batch and shared by
    the passes over it; not kept on the Sample, where a Qwen-sized vocabulary would cost ~150 kB per guided token."""
    width = max(len(s.completion) for s in batch)
    guided = [(row, width - len(s.completion) + at, allowed) for row, s in enumerate(batch) for at, allowed in s.choices.items()]
    if not guided:
        return None
    if vocabulary is None:
        raise ValueError("guided samples need the guided policy's vocabulary to be scored")
    rows, columns, allowed = zip(*guided, strict=True)
    return torch.tensor(rows, device=device), torch.tensor(columns, device=device), vocabulary.allowed_matrix(allowed).to(device)


def forward_logprobs(model, batch: list[Sample], pad_id: int, temperature: float, device, restriction=None):
    """Log-probs and entropies of each sample's completion tokens: (logp, entropy, mask), each [B, C]. Samples
    decoded under guidance are scored over what it allowed at each token (``restriction``, from
    ``guided_restriction`` on the same batch and device)."""
    logits, targets, mask = completion_logits(model, batch, pad_id, device)
    if restriction is not None:
        rows, columns, allowed = restriction
        logits = restrict_logits(logits, rows, columns, allowed[:, : logits.shape[-1]])
    logp, entropy = token_logprobs(logits, targets, temperature)
    return logp, entropy, mask


def completion_logits(model, batch: list[Sample], pad_id: int, device):
    """The logits before each sample's completion tokens, those tokens and their mask: ([B, C, V], [B, C], [B, C]).

    Rows are left-padded so every completion ends at the last position and only the last C+1 logits
    are computed (C the longest completion): the prompt's vocabulary-sized logits never exist.
    """
    longest = max(len(s.prompt) + len(s.completion) for s in batch)
    width = max(len(s.completion) for s in batch)
    ids = torch.full((len(batch), longest), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), longest), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.bool)
    for row, s in enumerate(batch):
        sequence = s.prompt + s.completion
        ids[row, longest - len(sequence) :] = torch.tensor(sequence)
        attention[row, longest - len(sequence) :] = 1
        mask[row, width - len(s.completion) :] = True
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    ids, attention, positions, mask = ids.to(device), attention.to(device), positions.to(device), mask.to(device)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, logits_to_keep=width + 1).logits[:, :-1]
    return logits, ids[:, -width:], mask


def pad_rows(values: list[Any], width: int, device):
    """Per-sample 1-D tensors right-aligned into [B, width] (the layout of ``forward_logprobs``)."""
    out = torch.zeros((len(values), width), device=device)
    for row, v in enumerate(values):
        out[row, width - v.shape[0] :] = v.to(device)
    return out
