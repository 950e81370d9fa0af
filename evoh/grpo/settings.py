"""The GRPO settings a run checks before anything loads, and how its rollouts sample."""

from __future__ import annotations

from evoh.config import ModelConfig, Recipe
from evoh.errors import EvohError


def check_settings(recipe: Recipe) -> None:
    """Refuse settings the run cannot use before anything loads (`evoh run` calls it before its first stage)."""
    from evoh.env.games import task_type_names

    g = recipe.grpo
    task_type_names(g.task_types)  # a misspelt type fails now, not when the draw comes up empty
    if g.temperature <= 0:
        raise EvohError("grpo.temperature must be above 0: GRPO learns from sampled rollouts", hint="use 1.0 (the default)")
    if g.group_size < 2:
        raise EvohError(
            "grpo.group_size must be at least 2: advantages compare rollouts of the same game", hint="use 8 (the paper's)"
        )
    if g.sft_weight < 0 or g.sft_examples < 1:
        raise EvohError(
            "grpo.sft_weight must be at least 0 and grpo.sft_examples at least 1",
            hint="use sft_weight = 0 (off) or e.g. 0.1 with 8 examples",
        )
    if g.minibatches < 1 or g.updates < 1 or g.tasks_per_update < 1:
        raise EvohError("grpo.updates, tasks_per_update and minibatches must be at least 1", hint="fix the recipe or --set")


def rollout_sampling(recipe: Recipe, model: str) -> ModelConfig:
    """How a training rollout samples from ``model``: grpo's temperature, top-p and token cap, the recipe's batch
    and guidance."""
    g = recipe.grpo
    return ModelConfig(
        model=model,
        temperature=g.temperature,
        top_p=g.top_p,
        max_tokens=g.max_tokens,
        batch_size=recipe.model.batch_size,
        guided=recipe.model.guided,
    )
