"""Typed configuration: a recipe's sections (``sections``), how a setting is declared (``fields``) and how a
recipe is read and checked (``loading``)."""

from evoh.config.fields import Range, Setting, settings_of
from evoh.config.loading import load_recipe, parse_override, recipe_dict, recipe_settings, recipe_toml
from evoh.config.sections import (
    CollectConfig,
    EnvConfig,
    EvalConfig,
    ExpertConfig,
    GrpoConfig,
    HarnessConfig,
    MiniHouseConfig,
    ModelConfig,
    PlayConfig,
    Recipe,
    RefineConfig,
    RewardConfig,
    RunConfig,
    SftConfig,
)

__all__ = [
    "CollectConfig",
    "EnvConfig",
    "EvalConfig",
    "ExpertConfig",
    "GrpoConfig",
    "HarnessConfig",
    "MiniHouseConfig",
    "ModelConfig",
    "PlayConfig",
    "Recipe",
    "Range",
    "RefineConfig",
    "RewardConfig",
    "RunConfig",
    "Setting",
    "SftConfig",
    "load_recipe",
    "parse_override",
    "recipe_dict",
    "recipe_settings",
    "recipe_toml",
    "settings_of",
]
