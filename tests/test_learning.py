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


def _meta_share_over_updates(model: Path, diversity: float, updates: int) -> list[float]:
    """The share of one-turn rollouts that chose a meta-action, before each update and after the last."""
    import torch
    from accelerate import Accelerator
    from transformers import get_scheduler

    from evoh.grpo.model import build_optimizer, load_trainable
    from evoh.grpo.optimise import optimise
    from evoh.grpo.settings import rollout_sampling
    from evoh.grpo.state import TrainState
    from evoh.grpo.update import play_update
    from evoh.policy.local import LocalPolicy
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
    g = recipe.grpo
    torch.manual_seed(g.seed)  # the fresh adapter's weights: the same whatever ran before in this process
    accelerator = Accelerator(cpu=True)
    tokenizer, model_ = load_trainable(model, None, g, "cpu", reference=False)
    optimizer = build_optimizer([p for p in model_.parameters() if p.requires_grad], g)
    scheduler = get_scheduler("constant", optimizer)
    trained, optimizer = accelerator.prepare(model_, optimizer)
    policy = LocalPolicy(rollout_sampling(recipe, str(model)), g.seed, loaded=(tokenizer, model_), keep_tokens=True)
    state = TrainState(accelerator, trained, optimizer, scheduler, g, tokenizer.pad_token_id, policy.vocabulary)
    tasks = load_games(recipe.env, "train", 24, spread=True)
    shares = []
    with open_pool(recipe.env, 1) as pool:
        for update in range(updates + 1):
            played = play_update(state, policy, pool, rollout_settings(recipe), Bank(), tasks, update)
            shares.append(sum(r.record["meta_actions"] > 0 for r in played.rollouts) / len(played.rollouts))
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
