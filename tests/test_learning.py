"""Learning checks: stage two's loop moves a policy the way its reward says.

Each check plays real rollouts through the shared episode code on MiniHouse games, scores them with the
real reward, turns them into samples the way ``evoh grpo`` does (guided decoding, its masks, the episode's
advantage on every token) and takes real optimizer steps. A sign, mask or credit error anywhere in that
path makes the rewarded behaviour fall instead of rise.

The one-turn check: an episode is one turn (``max_steps = 1``, every harness call charged), so its only
reward is the verb-diversity term, a quarter of λ_div for a meta-action and nothing for a world action.
With λ_div positive, meta-actions are the rewarded behaviour and their share must rise; with λ_div
negative they are penalised and it must fall. The model is evoh's tiny random one: what it does at first is
whatever its random weights prefer, so only the direction of the change is asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evoh.config import load_recipe
from evoh.env.world import load_games, open_pool
from evoh.harness.experience import Bank

pytest.importorskip("peft")


def _trainer(model: Path, recipe):
    """GRPO's training state on a fresh adapter over ``model`` (seeded: the same whatever ran before in this
    process), and the policy that samples from the weights it trains."""
    import torch
    from accelerate import Accelerator
    from transformers import get_scheduler

    from evoh.grpo.model import build_optimizer, load_trainable
    from evoh.grpo.settings import rollout_sampling
    from evoh.grpo.state import TrainState
    from evoh.policy.local import LocalPolicy

    g = recipe.grpo
    torch.manual_seed(g.seed)
    accelerator = Accelerator(cpu=True)
    tokenizer, model_ = load_trainable(model, None, g, "cpu", reference=False)
    optimizer = build_optimizer([p for p in model_.parameters() if p.requires_grad], g)
    scheduler = get_scheduler("constant", optimizer)
    trained, optimizer = accelerator.prepare(model_, optimizer)
    policy = LocalPolicy(rollout_sampling(recipe, str(model)), g.seed, loaded=(tokenizer, model_), keep_tokens=True)
    return TrainState(accelerator, trained, optimizer, scheduler, g, tokenizer.pad_token_id, policy.vocabulary), policy


def _meta_share_over_updates(model: Path, diversity: float, updates: int) -> list[float]:
    """The share of one-turn rollouts that chose a meta-action, before each update and after the last."""

    from evoh.grpo.optimise import optimise
    from evoh.grpo.update import play_update
    from evoh.stages.grpo import rollout_settings

    recipe = load_recipe(
        None,
        [
            "env.kind=minihouse",
            "env.max_steps=1",
            "model.guided=true",
            "harness.system_prompt=brief",
            "grpo.max_steps=1",
            "grpo.tasks_per_update=4",
            "grpo.group_size=8",
            "grpo.max_tokens=12",
            "grpo.temperature=1.0",
            "grpo.lr=3e-3",
            "grpo.kl=0.0",
            "grpo.lora_r=8",
            "grpo.lora_alpha=16",
            "grpo.start=none",
            "grpo.seed=1",
            f"grpo.reward.diversity_max={diversity}",
            "grpo.reward.diversity_horizon=1000",
        ],
    )
    state, policy = _trainer(model, recipe)
    tasks = load_games(recipe.env, "train", 24, spread=True)
    shares = []
    with open_pool(recipe.env, 1) as pool:
        for update in range(updates + 1):
            played = play_update(state, policy, pool, rollout_settings(recipe), Bank(), tasks, update)
            shares.append(sum(r.record.meta_actions > 0 for r in played.rollouts) / len(played.rollouts))
            if update < updates:
                assert played.samples and all(s.completion for s in played.samples)
                optimise(state, played.samples, update)
    return shares


@pytest.mark.parametrize(("diversity", "change"), [(4.0, 0.1), (-4.0, -0.15)], ids=["rewarded-rises", "penalised-falls"])
def test_a_one_turn_policy_moves_the_way_its_reward_says(minihouse_model: Path, diversity: float, change: float):
    # a share is a count over 32 rollouts: compare the last two updates' mean with the start, not one draw
    shares = _meta_share_over_updates(minihouse_model, diversity, updates=4)
    moved = (shares[-1] + shares[-2]) / 2 - shares[0]
    assert moved >= change if change > 0 else moved <= change, f"meta-action share by update: {shares}"


def _one_update(model: Path, temperature: float, rollouts: str = "all"):
    """A state, and one played update of MiniHouse rollouts (guided, several turns each) with its samples."""

    from evoh.grpo.update import play_update
    from evoh.stages.grpo import rollout_settings

    recipe = load_recipe(
        None,
        [
            "env.kind=minihouse",
            "model.guided=true",
            "harness.system_prompt=brief",
            "grpo.max_steps=4",
            "grpo.tasks_per_update=2",
            "grpo.group_size=4",
            "grpo.max_tokens=16",
            f"grpo.temperature={temperature}",
            "grpo.lr=1e-3",
            "grpo.kl=0.0",
            "grpo.lora_r=8",
            "grpo.lora_alpha=16",
            "grpo.start=none",
            "grpo.seed=2",
            "grpo.reward.diversity_max=4.0",  # a reward that differs between rollouts, so advantages are not all 0
            "grpo.reward.diversity_horizon=1000",
            f'grpo.train_rollouts="{rollouts}"',
        ],
    )
    state, policy = _trainer(model, recipe)
    with open_pool(recipe.env, recipe.grpo.max_steps) as pool:
        played = play_update(state, policy, pool, rollout_settings(recipe), Bank(), load_games(recipe.env, "train", 12), 0)
    return state, played.samples


def _scored(state, samples):
    """Each sample's per-token log-probs and the trainer's own most likely tokens, as the loss computes them."""
    import torch

    from evoh.grpo.objective import completion_logits, guided_restriction, restrict_logits, token_logprobs

    state.model.eval()
    out = []
    with torch.no_grad():
        restriction = guided_restriction(samples, state.vocabulary, "cpu")
        logits, targets, mask = completion_logits(state.model, samples, state.pad_id, "cpu")
        if restriction is not None:
            rows, columns, allowed = restriction
            logits = restrict_logits(logits, rows, columns, allowed[:, : logits.shape[-1]])
        logp, _ = token_logprobs(logits, targets, state.g.temperature)
        top2 = logits.float().topk(2, dim=-1).values
        margin = top2[..., 0] - top2[..., 1]
        for row in range(len(samples)):
            m = mask[row]
            out.append((logp[row][m], logits[row].argmax(-1)[m], targets[row][m], margin[row][m]))
    return out


def test_the_tokens_trained_on_are_the_ones_the_sampler_drew(minihouse_model: Path):
    # nearly greedy sampling: every drawn token must be the trainer's own most likely one, under the same guidance,
    # positions and prompt; a shifted token, a wrong mask or a different prompt shows up as disagreement
    # (where the trainer's two likeliest tokens are within 0.05 in logit, rounding in the sampler's precision may
    # pick either: at T = 0.01 a margin of 0.05 already makes the likelier one 148 times as likely)
    state, samples = _one_update(minihouse_model, temperature=0.01)
    clear = [(best[m > 0.05], drawn[m > 0.05]) for _, best, drawn, m in _scored(state, samples)]
    tokens = sum(len(drawn) for _, drawn in clear)
    agree = sum(int((best == drawn).sum()) for best, drawn in clear)
    assert tokens > 200 and agree == tokens, f"{agree} of {tokens} clearly decided tokens are the trainer's argmax"


def test_a_step_raises_the_turns_it_reinforces_and_lowers_the_ones_it_pushes_down(minihouse_model: Path):
    from evoh.grpo.optimise import optimise

    state, samples = _one_update(minihouse_model, temperature=1.0)
    up = [s for s in samples if s.advantage > 0]
    down = [s for s in samples if s.advantage < 0]
    assert up and down
    before = [float(lp.sum()) for lp, *_ in _scored(state, up + down)]
    optimise(state, samples, 0)
    after = [float(lp.sum()) for lp, *_ in _scored(state, up + down)]
    change = [a - b for a, b in zip(after, before, strict=True)]
    raised, lowered = change[: len(up)], change[len(up) :]
    assert sum(raised) / len(up) > 0 > sum(lowered) / len(down), (raised, lowered)
