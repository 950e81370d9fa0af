"""Build the policy a recipe names: the expert teacher, an OpenAI-compatible endpoint, or a local model through
transformers or an in-process vLLM engine."""

from __future__ import annotations

import logging

from evoh.config import Recipe
from evoh.env.world import load_games
from evoh.errors import EvohError
from evoh.policy.base import Policy

log = logging.getLogger(__name__)
POLICIES = ("expert", "openai", "local", "vllm")


def build_policy(kind: str, recipe: Recipe, seed: int = 0) -> Policy:
    if kind == "expert":
        from evoh.policy.expert import ExpertPolicy
        from evoh.policy.search_prior import SearchPrior

        try:
            # a statistic over train games, as a model's weights are; MiniHouse's train split is unbounded: 600 suffice
            train = load_games(recipe.env, "train", 600 if recipe.env.kind == "minihouse" else None, spread=True)
        except EvohError:
            log.warning("no train split found: the expert searches without its learned ranking")
            train = []
        return ExpertPolicy(SearchPrior.from_games(train), recipe.expert, seed)
    if kind == "openai":
        from evoh.policy.openai_compat import OpenAIPolicy

        if recipe.model.guided:  # the grammar masks a local model's logits; an endpoint decodes on its own server
            raise EvohError("model.guided applies to local models only", hint="set model.guided=false for --policy openai")

        return OpenAIPolicy(recipe.model, seed)
    if kind == "local":
        from evoh.policy.local import LocalPolicy

        return LocalPolicy(recipe.model, seed)
    if kind == "vllm":
        from evoh.policy.vllm_engine import serving_policy

        return serving_policy(recipe.model, seed)
    raise EvohError(f"unknown policy {kind!r}", hint=f"use one of {', '.join(POLICIES)}")
