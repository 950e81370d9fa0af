"""The policies a GRPO run generates with: the rollouts' (sampling, their completions carrying the token ids to
train on) and validation's (greedy), through transformers on the model being trained or through vLLM on a
copy of its adapter handed over before each use."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from evoh.config import GrpoConfig, ModelConfig
from evoh.grpo.model import save_adapter
from evoh.grpo.state import TrainState


def is_greedy_rollout(key: tuple[str, int], g: GrpoConfig) -> bool:
    """Whether rollout ``key`` = (game, index) is its group's greedy one: the last, with ``grpo.greedy_rollout``."""
    return g.greedy_rollout and key[1] == g.group_size - 1


class GroupPolicy:
    """An update's rollout policy with ``grpo.greedy_rollout``: each group's greedy rollout answers through
    ``greedy``, the others through ``sampled``. Both hand back their tokens, so the update trains on the greedy
    episode too."""

    def __init__(self, sampled, greedy, g: GrpoConfig) -> None:
        self.sampled, self.greedy, self.g = sampled, greedy, g

    def _of(self, key: Any):
        return self.greedy if is_greedy_rollout(key, self.g) else self.sampled

    def forget(self, key: Any) -> None:
        self._of(key).forget(key)

    def act(self, views: list) -> list:
        answers: list = [None] * len(views)
        for policy in (self.sampled, self.greedy):
            at = [i for i, v in enumerate(views) if self._of(v.key) is policy]
            if at:
                for i, answer in zip(at, policy.act([views[i] for i in at]), strict=True):
                    answers[i] = answer
        return answers


class Generators:
    """``rollouts`` plays an update's episodes, ``greedy`` validation's; ``sync()`` before either hands vLLM the
    adapter as it is now (transformers shares the model being trained)."""

    def __init__(
        self,
        state: TrainState,
        tokenizer,
        base: Path,
        start_adapter: Path | None,
        sampling: ModelConfig,
        greedy_tokens: int,
        directory: Path,
    ):
        from evoh.policy.local import LocalPolicy
        from evoh.policy.vllm_engine import choose_generator

        g, unwrapped = state.g, state.unwrapped
        self.name = choose_generator(g.generator, start_adapter, guided=sampling.guided)
        self._adapter = directory / f"rollout_adapter_rank{state.accelerator.process_index}"
        self._unwrapped, self._version = unwrapped, 0
        greedy_sampling = dataclasses.replace(sampling, temperature=0.0)  # at the rollouts' response cap
        if self.name == "vllm":
            from evoh.policy.vllm_engine import GreedyView, VllmPolicy

            seed = g.seed + state.accelerator.process_index
            policy = VllmPolicy(base, tokenizer, sampling, seed, unwrapped.peft_config["default"].r, g.vllm_memory)
            self.greedy = GreedyView(policy)
            greedy_rollouts = GreedyView(policy, keep_tokens=True) if g.greedy_rollout else None
        else:
            loaded = (tokenizer, unwrapped)
            policy = LocalPolicy(sampling, g.seed, loaded=loaded, keep_tokens=True)
            self.greedy = LocalPolicy(dataclasses.replace(greedy_sampling, max_tokens=greedy_tokens), g.seed, loaded=loaded)
            greedy_rollouts = LocalPolicy(greedy_sampling, g.seed, loaded=loaded, keep_tokens=True) if g.greedy_rollout else None
        self.vocabulary = policy.vocabulary if sampling.guided else None  # the guided policy's token sets, for its log-probs
        self.rollouts = GroupPolicy(policy, greedy_rollouts, g) if greedy_rollouts is not None else policy
        self._vllm = policy if self.name == "vllm" else None

    def sync(self) -> None:
        if self._vllm is not None:
            if self.vocabulary is not None:  # the last update's samples are scored: their masks can go
                self.vocabulary.clear()
            save_adapter(self._unwrapped, self._adapter)
            self._version += 1
            self._vllm.use_adapter(self._adapter, self._version)
