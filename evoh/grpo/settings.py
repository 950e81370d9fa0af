"""The GRPO settings a run checks before anything loads, and how its rollouts sample."""

from __future__ import annotations

from evoh.config import ModelConfig, Recipe
from evoh.errors import EvohError
from evoh.tracking import check_trackers


def check_settings(recipe: Recipe) -> None:
    """Refuse settings the run cannot use before anything loads (`evoh run` calls it before its first stage)."""
    from evoh.env.games import read_game_list, task_type_names

    g = recipe.grpo
    task_type_names(g.task_types)  # a misspelt type fails now, not when the draw comes up empty
    if g.games:
        read_game_list(g.games)  # a missing or empty list fails before `evoh run`'s first stage, not after sft
    check_trackers(g.report_to, "grpo.report_to")
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


# an Adam step moves a weight by about lr: below this much in all, a run's policy does not measurably change
NEGLIGIBLE_MOVEMENT = 1e-4


def futile_settings(recipe: Recipe) -> list[str]:
    """Settings that run but cannot show anything, each as a line that names the fix (logged as warnings)."""
    g, found = recipe.grpo, []
    steps = g.updates * g.minibatches
    if g.optimizer == "adamw" and g.lr * steps < NEGLIGIBLE_MOVEMENT:
        found.append(
            f"grpo.lr = {g.lr:g} over {steps} optimizer steps moves a weight by at most about {g.lr * steps:.0e}: "
            f"the policy will not measurably change (kl stays near 0). The paper's 1e-6 is for 150 updates of an 8B "
            f"model; for a short trial raise grpo.lr (e.g. 1e-4 to 5e-4 on a LoRA)"
        )
    if g.val_every and recipe.env.max_steps > g.max_steps:
        found.append(
            f"validation plays as evoh eval does, up to env.max_steps = {recipe.env.max_steps} turns of up to "
            f"model.max_tokens = {recipe.model.max_tokens} tokens, not grpo.max_steps = {g.max_steps}: set env.max_steps "
            f"too to shorten it, or grpo.val_every = 0 to skip it"
        )
    return found


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
