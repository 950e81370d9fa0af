"""GRPO's maths against hand computations: advantages, the clipped loss, the KL estimate, log-probs of padded batches."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

from evoh.config import GrpoConfig
from evoh.grpo.objective import (
    Sample,
    clipped_policy_loss,
    group_advantages,
    groups_to_train,
    kl_k3,
    loss_weights,
    micro_batches,
    restrict_logits,
    rollouts_to_train,
    token_logprobs,
)
from evoh.grpo.policies import GroupPolicy
from evoh.grpo.update import tasks_for_update


def test_group_advantages_compare_rollouts_of_the_same_game_only():
    rewards = [10.5, 0.0, -0.5, 1.0, 1.0, 1.0]
    groups = ["a", "a", "a", "b", "b", "b"]
    mean = (10.5 + 0.0 - 0.5) / 3
    std = math.sqrt(((10.5 - mean) ** 2 + mean**2 + (-0.5 - mean) ** 2) / 3)
    advantages = group_advantages(rewards, groups)
    assert advantages[:3] == pytest.approx([(10.5 - mean) / std, (0 - mean) / std, (-0.5 - mean) / std], rel=1e-5)
    assert advantages[3:] == [0.0, 0.0, 0.0]  # a group that all did the same learns nothing
    assert group_advantages(rewards, groups, std_normalize=False)[:3] == pytest.approx([10.5 - mean, -mean, -0.5 - mean])
    assert sum(advantages[:3]) == pytest.approx(0.0, abs=1e-6)


def test_the_games_an_update_trains_on():
    won = [True, False, False, False, False, False, True, True, True]
    games = ["a", "a", "a", "b", "b", "b", "c", "c", "c"]
    assert groups_to_train(won, games, "all") == {"a", "b", "c"}
    assert groups_to_train(won, games, "contrasting") == {"a"}  # b all lost, c all won
    assert groups_to_train(won, games, "won") == {"a", "c"}
    # the shaping terms alone still spread b's rewards, and std normalisation scales them to full size
    rewards = [10.9, 0.5, 0.25, 0.5, 0.25, 0.0, 10.5, 10.4, 10.3]
    assert max(abs(a) for a in group_advantages(rewards, games)[3:6]) > 1.0
    assert all(groups_to_train([], [], which) == set() for which in ("all", "contrasting", "won"))


def test_the_rollouts_an_update_trains_on():
    advantages = [1.2, -0.4, -0.8, 0.0, 0.0]
    assert rollouts_to_train(advantages, "all") == [True] * 5
    assert rollouts_to_train(advantages, "above_mean") == [
        True,
        False,
        False,
        False,
        False,
    ]  # a tie with the mean teaches nothing
    with pytest.raises(ValueError, match="above_mean"):
        rollouts_to_train(advantages, "best")


def test_clipped_loss_matches_a_hand_computation():
    old = torch.log(torch.tensor([[0.5, 0.5, 0.5, 0.5]]))
    new = torch.log(torch.tensor([[0.5, 0.7, 0.3, 0.55]]))  # ratios 1.0, 1.4, 0.6, 1.1
    for advantage in (2.0, -2.0):
        loss, clipped = clipped_policy_loss(new, old, torch.tensor([[advantage]]), clip_low=0.2, clip_high=0.2)
        ratios = [1.0, 1.4, 0.6, 1.1]
        expected = [-min(r * advantage, min(max(r, 0.8), 1.2) * advantage) for r in ratios]
        assert loss[0].tolist() == pytest.approx(expected, rel=1e-5)
        # the clip binds where the ratio left the band in the direction the advantage pushes
        assert clipped[0].tolist() == ([False, True, False, False] if advantage > 0 else [False, False, True, False])
    # asymmetric band (clip-higher): only the upper bound moves
    loss, clipped = clipped_policy_loss(new, old, torch.tensor([[1.0]]), clip_low=0.2, clip_high=0.5)
    assert loss[0, 1].item() == pytest.approx(-1.4) and not clipped[0, 1]


def test_the_loss_gradient_pushes_toward_positive_advantage():
    logits = torch.zeros(1, 1, 5, requires_grad=True)
    token = torch.tensor([[3]])
    logp, _ = token_logprobs(logits, token)
    loss, _ = clipped_policy_loss(logp, logp.detach(), torch.tensor([[1.0]]))
    loss.sum().backward()
    assert logits.grad[0, 0, 3] < 0 and all(logits.grad[0, 0, i] > 0 for i in (0, 1, 2, 4))


def test_loss_weights_average_over_tokens_or_over_episodes():
    lengths, episodes = [2, 3, 3, 0], ["won", "lost", "lost", "lost"]
    assert loss_weights(lengths, episodes, "token") == ({"won": 1.0, "lost": 1.0}, 8)
    weights, count = loss_weights(lengths, episodes, "episode")
    assert count == 2 and weights == pytest.approx({"won": 1 / 2, "lost": 1 / 6})
    # each episode's tokens weigh one in all, however many turns and tokens it has
    assert sum(weights[e] * n for n, e in zip(lengths, episodes) if e == "lost") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="token or episode"):
        loss_weights(lengths, episodes, "sequence")


def test_k3_kl_is_zero_at_the_reference_and_unbiased_for_kl():
    assert kl_k3(torch.tensor([-1.0, -2.0]), torch.tensor([-1.0, -2.0])).tolist() == [0.0, 0.0]
    assert (kl_k3(torch.tensor([-0.1, -3.0]), torch.tensor([-2.0, -0.5])) > 0).all()
    p = torch.tensor([0.6, 0.3, 0.1])
    q = torch.tensor([0.2, 0.5, 0.3])
    exact = float((p * (p / q).log()).sum())
    generator = torch.Generator().manual_seed(0)
    draws = torch.multinomial(p, 200_000, replacement=True, generator=generator)
    estimate = float(kl_k3(p.log()[draws], q.log()[draws]).mean())
    assert estimate == pytest.approx(exact, rel=0.02)


def test_a_capped_k3_bounds_a_token_the_policy_made_unlikely():
    # the reference was sure of the token (log-prob -0.01); the policy now gives it e^-14
    logp = torch.tensor([-14.0, -0.5], requires_grad=True)
    ref = torch.tensor([-0.01, -0.4])
    raw = kl_k3(logp, ref)
    assert float(raw[0]) > 1e5  # one token would outweigh a whole update's others
    capped = kl_k3(logp, ref, cap=10.0)
    assert float(capped[0]) == 10.0 and float(capped[1]) == pytest.approx(float(raw[1]))
    capped.sum().backward()
    assert logp.grad[0] == 0.0 and logp.grad[1] != 0.0  # the outlier no longer pulls; the others still do


def test_token_logprobs_use_the_sampling_temperature():
    logits = torch.tensor([[[2.0, 0.0, -1.0]]])
    logp, entropy = token_logprobs(logits, torch.tensor([[0]]), temperature=2.0)
    scaled = torch.log_softmax(logits / 2.0, -1)
    assert logp.item() == pytest.approx(scaled[0, 0, 0].item())
    assert entropy.item() == pytest.approx(float(-(scaled.exp() * scaled).sum()))
    _, uniform = token_logprobs(torch.zeros(1, 1, 8), torch.tensor([[0]]))
    assert uniform.item() == pytest.approx(math.log(8))


def test_guided_log_probs_are_taken_over_the_allowed_tokens_and_ruled_out_tokens_learn_nothing():
    logits = torch.tensor([[[2.0, 0.0, -1.0, 1.0], [0.5, 1.5, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]]], requires_grad=True)
    tokens = torch.tensor([[1, 1, 3]])
    allowed = torch.tensor([[False, True, False, True], [False, True, False, False]])  # positions 0 and 1 guided
    guided = restrict_logits(logits, torch.tensor([0, 0]), torch.tensor([0, 1]), allowed)
    logp, entropy = token_logprobs(guided, tokens, temperature=0.5)
    two = torch.log_softmax(torch.tensor([0.0, 1.0]) / 0.5, -1)  # token 1 against token 3 only
    assert logp[0, 0].item() == pytest.approx(two[0].item())
    assert entropy[0, 0].item() == pytest.approx(float(-(two.exp() * two).sum()))
    assert logp[0, 1].item() == pytest.approx(0.0, abs=1e-6) and entropy[0, 1].item() == pytest.approx(0.0, abs=1e-6)  # forced
    free, _ = token_logprobs(logits, tokens, temperature=0.5)
    assert logp[0, 2].item() == pytest.approx(free[0, 2].item())  # unguided: the model's own log-prob
    logp[0, :2].sum().backward()
    assert logits.grad[0, 0, [0, 2]].abs().max().item() == 0.0  # mass on a ruled-out token neither raises nor lowers it
    assert logits.grad[0, 1].abs().max().item() == pytest.approx(0.0, abs=1e-6)  # a forced token moves nothing


def test_micro_batches_keep_every_sample_within_the_token_budget():
    rng = random.Random(0)
    samples = [Sample([1] * rng.randint(5, 60), [2] * rng.randint(1, 10), 0.0) for _ in range(40)]
    batches = micro_batches(samples, token_budget=200)
    assert sorted(id(s) for b in batches for s in b) == sorted(id(s) for s in samples)
    for batch in batches:
        longest = max(len(s.prompt) + len(s.completion) for s in batch)
        assert len(batch) == 1 or longest * len(batch) <= 200


def test_each_update_draws_its_games_from_the_seed_and_update_alone():
    games = list(range(100))
    g = GrpoConfig(tasks_per_update=16, seed=3)
    assert tasks_for_update(games, 5, g) == tasks_for_update(games, 5, g)
    assert tasks_for_update(games, 5, g) != tasks_for_update(games, 6, g)
    assert len(set(tasks_for_update(games, 5, g))) == 16


class NamedPolicy:
    """Answers with its name, the completion carrying its tokens (as LocalPolicy(keep_tokens=True) does)."""

    def __init__(self, name: str) -> None:
        self.name, self.calls, self.forgotten = name, [], []

    def act(self, views):
        from evoh.harness.episode import TurnTokens
        from evoh.policy.base import Completion

        self.calls.append([v.key for v in views])
        return [Completion(f"{self.name} {v.key}", tokens=TurnTokens([1], [len(self.name)])) for v in views]

    def forget(self, key):
        self.forgotten.append(key)


def test_a_group_policy_sends_the_last_rollout_of_each_game_to_the_greedy_policy_and_keeps_every_turns_tokens():
    from types import SimpleNamespace

    sampled, greedy = NamedPolicy("sampled"), NamedPolicy("greedy")
    policy = GroupPolicy(sampled, greedy, GrpoConfig(group_size=3, greedy_rollout=True))
    views = [SimpleNamespace(key=(game, k)) for game in ("a", "b") for k in (2, 0, 1)]
    answers = policy.act(views)
    assert [a.text for a in answers] == [
        f"{'greedy' if v.key[1] == 2 else 'sampled'} {v.key}" for v in views
    ]  # in the views' order
    assert [a.tokens.completion for a in answers] == [[6 if v.key[1] == 2 else 7] for v in views]  # each with its own tokens
    assert sampled.calls == [[("a", 0), ("a", 1), ("b", 0), ("b", 1)]] and greedy.calls == [
        [("a", 2), ("b", 2)]
    ]  # one batch each
    for v in views:
        policy.forget(v.key)
    assert greedy.forgotten == [("a", 2), ("b", 2)] and len(sampled.forgotten) == 4


def test_padded_batch_log_probs_equal_one_sequence_at_a_time(tiny_model: Path):
    from transformers import AutoModelForCausalLM

    from evoh.grpo.objective import forward_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    rng = random.Random(1)
    samples = [
        Sample([rng.randrange(3, 500) for _ in range(n)], [rng.randrange(3, 500) for _ in range(c)], 0.0)
        for n, c in ((30, 4), (12, 9), (50, 1))
    ]
    with torch.no_grad():
        batched, _, mask = forward_logprobs(model, samples, pad_id=0, temperature=0.7, device="cpu")
        for row, s in enumerate(samples):
            ids = torch.tensor([s.prompt + s.completion])
            logits = model(input_ids=ids).logits[0, len(s.prompt) - 1 : -1]
            alone = torch.log_softmax(logits / 0.7, -1).gather(-1, torch.tensor(s.completion).unsqueeze(-1)).squeeze(-1)
            assert mask[row].sum() == len(s.completion)
            assert torch.allclose(batched[row][mask[row]], alone, atol=1e-4)


@pytest.fixture(scope="module")
def guided_model(tiny_model: Path):
    """(the tiny model, its guided-decoding vocabulary)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evoh.policy.guided import Vocabulary

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    vocab = Vocabulary(tokenizer, model.get_output_embeddings().weight.shape[0], {tokenizer.eos_token_id})
    return model, vocab


def test_guided_samples_are_scored_over_what_guidance_allowed_at_each_token(guided_model):
    from evoh.grpo.objective import forward_logprobs, guided_restriction
    from evoh.policy.guided import Allowed

    model, vocab = guided_model
    rng = random.Random(2)
    prompt, completion = [rng.randrange(3, 500) for _ in range(20)], [rng.randrange(3, 500) for _ in range(3)]
    steps = {0: Allowed("thought", [], []), 1: Allowed(None, [completion[1], 7])}  # the last token: unguided
    free = Sample(prompt, completion, 0.0)
    guided = Sample(prompt, completion, 0.0, steps)
    with torch.no_grad():
        (scored, _, mask), (plain, _, _) = (
            forward_logprobs(model, [s], 0, 0.7, "cpu", guided_restriction([s], vocab)) for s in (guided, free)
        )
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1] / 0.7
    allowed = vocab.allowed_matrix([steps[0], steps[1]])
    expected = [torch.log_softmax(logits[at].masked_fill(~allowed[at], float("-inf")), -1)[completion[at]] for at in (0, 1)]
    assert torch.allclose(scored[0][mask[0]][:2], torch.stack(expected), atol=1e-4)
    assert scored[0][mask[0]][0] > plain[0][mask[0]][0]  # the thought mask rules tokens out, so the share of the rest grows
    assert torch.allclose(scored[0][mask[0]][2], plain[0][mask[0]][2], atol=1e-5)


def test_a_guided_sample_scores_the_same_alone_and_beside_a_longer_one(guided_model):
    from evoh.grpo.objective import forward_logprobs, guided_restriction
    from evoh.policy.guided import Allowed

    model, vocab = guided_model
    rng = random.Random(3)
    short = [rng.randrange(3, 500) for _ in range(3)]
    guided = Sample(
        [rng.randrange(3, 500) for _ in range(15)], short, 0.0, {0: Allowed("argument", []), 2: Allowed(None, [short[2]])}
    )
    longer = Sample([rng.randrange(3, 500) for _ in range(9)], [rng.randrange(3, 500) for _ in range(7)], 0.0)
    with torch.no_grad():
        alone, _, mask_alone = forward_logprobs(model, [guided], 0, 0.7, "cpu", guided_restriction([guided], vocab))
        batch = [longer, guided]
        together, _, mask = forward_logprobs(model, batch, 0, 0.7, "cpu", guided_restriction(batch, vocab))
    assert torch.allclose(together[1][mask[1]], alone[0][mask_alone[0]], atol=1e-4)
    assert together[1][mask[1]][2] == 0.0  # one token allowed: it was certain
    assert guided_restriction([longer], vocab) is None
    with pytest.raises(ValueError, match="vocabulary"):
        guided_restriction(batch, None)


def test_only_the_later_optimizer_steps_keep_the_rollout_policys_log_probs(tiny_model: Path):
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from evoh.grpo.optimise import optimise
    from evoh.grpo.state import TrainState

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # weights that never move: every ratio is 1
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    rng = random.Random(4)
    samples = [
        Sample([rng.randrange(3, 500) for _ in range(12)], [rng.randrange(3, 500) for _ in range(4)], rng.choice((-1.0, 1.0)))
        for _ in range(6)
    ]
    scored_without_grad: list[int] = []
    hook = model.register_forward_hook(lambda _, args, out: None if torch.is_grad_enabled() else scored_without_grad.append(1))
    stats = optimise(
        TrainState(Accelerator(cpu=True), model, optimizer, scheduler, GrpoConfig(minibatches=2, kl=0.0), pad_id=0),
        samples,
        seed=0,
    )
    hook.remove()
    kept = [s for s in samples if s.old_logp is not None]
    assert len(kept) == 3 and all(s.old_logp.shape == (4,) for s in kept)  # the second step's half
    assert len(scored_without_grad) == 1  # one scoring pass, over that half only
    assert stats["ratio"] == pytest.approx(1.0, abs=1e-5) and stats["clip_fraction"] == 0.0


def _weights_after_one_step(model_dir: Path, samples: list[Sample], aggregation: str) -> torch.Tensor:
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from evoh.grpo.optimise import optimise
    from evoh.grpo.state import TrainState

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    g = GrpoConfig(kl=0.0, loss_aggregation=aggregation, max_grad_norm=1e9)
    optimise(TrainState(Accelerator(cpu=True), model, optimizer, scheduler, g, pad_id=0), samples, seed=0)
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_episode_aggregation_weighs_a_long_lost_episode_like_a_short_won_one(tiny_model: Path):
    rng = random.Random(5)
    won = ([rng.randrange(3, 500) for _ in range(10)], [rng.randrange(3, 500) for _ in range(4)])
    lost = ([rng.randrange(3, 500) for _ in range(10)], [rng.randrange(3, 500) for _ in range(4)])

    def update(lost_turns: int) -> list[Sample]:
        return [Sample(*won, 1.0, episode="a"), *(Sample(*lost, -1.0, episode="b") for _ in range(lost_turns))]

    by_episode = [_weights_after_one_step(tiny_model, update(n), "episode") for n in (1, 3)]
    by_token = [_weights_after_one_step(tiny_model, update(n), "token") for n in (1, 3)]
    # the same lost turn three times over: the same update when episodes weigh equally ...
    assert torch.allclose(by_episode[0], by_episode[1], atol=1e-6)
    # ... and the episode-level average over two one-turn episodes is the token-level one
    assert torch.allclose(by_episode[0], by_token[0], atol=1e-6)
    # while over tokens the longer lost episode pulls harder
    assert not torch.allclose(by_token[0], by_token[1], atol=1e-4)


def test_the_sft_anchor_pulls_a_step_toward_the_examples_that_the_reward_alone_would_not_move(tiny_model: Path):
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from evoh.grpo.objective import forward_logprobs
    from evoh.grpo.optimise import optimise
    from evoh.grpo.state import TrainState

    rng = random.Random(6)
    rollouts = [
        Sample([rng.randrange(3, 500) for _ in range(10)], [rng.randrange(3, 500) for _ in range(4)], 0.0) for _ in range(4)
    ]
    anchor = [
        Sample([rng.randrange(3, 500) for _ in range(12)], [rng.randrange(3, 500) for _ in range(5)], 0.0) for _ in range(3)
    ]

    def nll(model) -> float:
        with torch.no_grad():
            logp, _, mask = forward_logprobs(model, anchor, 0, 1.0, "cpu")
        return float(-(logp * mask).sum() / mask.sum())

    def step(weight: float):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_model)
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        before = nll(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        g = GrpoConfig(kl=0.0, sft_weight=weight, sft_examples=3, max_grad_norm=1e9)
        stats = optimise(
            TrainState(Accelerator(cpu=True), model, optimizer, scheduler, g, pad_id=0, anchor=anchor), rollouts, seed=0
        )
        return before, nll(model), stats

    before, after, stats = step(0.0)  # every advantage 0: the policy loss has no gradient
    assert after == pytest.approx(before, abs=1e-6) and stats["sft_loss"] is None
    before, after, stats = step(1.0)
    assert stats["sft_loss"] == pytest.approx(before, rel=1e-4)  # measured before the step moved anything
    assert after < before - 0.05


def test_an_sgd_step_is_the_gradient_while_adam_moves_every_weight_by_about_lr():
    from evoh.config import GrpoConfig
    from evoh.grpo.model import build_optimizer

    moved = {}
    for name in ("sgd", "adamw"):
        weights = torch.nn.Parameter(torch.ones(2))
        optimizer = build_optimizer([weights], GrpoConfig(lr=0.1, optimizer=name))
        (weights * torch.tensor([1e-3, 1.0])).sum().backward()
        optimizer.step()
        moved[name] = 1 - weights.detach()
    assert torch.allclose(moved["sgd"], torch.tensor([1e-4, 0.1]), atol=1e-6)
    assert torch.allclose(moved["adamw"], torch.tensor([0.1, 0.1]), rtol=1e-2)  # a gradient 1000x smaller, the same step


def test_meta_pressure_says_which_way_an_update_pushes_the_rate_of_harness_calls():
    """Short won episodes that call the harness as often as long lost ones hold more calls per turn: reinforcing
    them raises the rate even while calls per episode fall. The figure must show it, and its sign must follow
    the advantages."""
    from evoh.grpo.metrics import meta_pressure

    def line(won: bool, turns: int, calls: int, advantage: float, trained: bool = True) -> dict:
        return {"won": won, "turns": turns, "meta": {"track": 0, "commit": calls, "recall": 0, "note": 0},
                "advantage": advantage, "trained": trained}  # fmt: skip

    lines = [line(True, 10, 5, 1.0), line(True, 20, 6, 0.5), line(False, 30, 6, -0.75), line(False, 30, 6, -0.75)]
    pressure = meta_pressure([*lines, {"won": False, "error": "engine", "turns": 3, "meta": {"track": 9}}])
    assert pressure["meta_rate"] == pytest.approx(23 / 90)  # an engine error is no evidence: left out
    assert pressure["meta_rate_reinforced"] == pytest.approx((1.0 * 5 + 0.5 * 6) / (1.0 * 10 + 0.5 * 20))
    assert pressure["meta_rate_reinforced"] > pressure["meta_rate"] > pressure["meta_rate_suppressed"] == pytest.approx(0.2)
    flipped = meta_pressure([{**x, "advantage": -x["advantage"]} for x in lines])
    assert flipped["meta_rate_reinforced"] < flipped["meta_rate"] < flipped["meta_rate_suppressed"]
    untrained = meta_pressure([{**x, "trained": False} for x in lines])
    assert untrained["meta_rate_reinforced"] is None and untrained["meta_rate_suppressed"] is None


def test_group_outcomes_count_the_games_by_how_their_rollouts_ended():
    """Only the games whose rollouts all won let the efficiency term decide what is reinforced; the count must
    tell them from the mixed and the lost ones, and leave out a rollout an engine error cut short."""
    from evoh.grpo.metrics import group_outcomes

    def line(task: str, won: bool) -> dict:
        return {"task": task, "won": won, "advantage": 0.0, "trained": True}

    lines = [line("a", True), line("a", True), line("b", True), line("b", False), line("c", False), line("c", False)]
    lines += [line("d", True), {"task": "d", "won": False, "error": "engine"}]
    assert group_outcomes(lines) == {"all_lost": 1, "contrasting": 1, "all_won": 2}
    assert group_outcomes([]) == {"all_lost": 0, "contrasting": 0, "all_won": 0}
