"""`evoh grpo`: stage two, cost-aware multi-turn GRPO over whole episodes (DESIGN.md §1 stage 2, §4).

One update: T train games × G rollouts each through the shared episode loop (every turn charged to the
budget, the Experience bank frozen), the cost-aware reward per episode, group-relative advantages per
game, and every turn of an episode trained on its sampled tokens with that episode's advantage: the
token-level clipped-ratio loss against the rollout policy's log-probs plus a KL penalty to the
reference policy (optionally only for games whose rollouts differ in success). The bank is
consolidated after the update.

The reference is the policy the run starts from: continuing the SFT adapter, a frozen copy of that
adapter; with a fresh adapter, the model with its adapter disabled. Under ``accelerate launch`` or
torchrun every process plays its share of an update's games, gradients are averaged, and all
processes consolidate the same bank from the gathered episodes; only the main one writes files.

The parts live in :mod:`evoh.grpo`; this file reads the recipe and the workspace, and runs them in order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evoh.config import GrpoConfig, Recipe, recipe_dict
from evoh.errors import EvohError
from evoh.grpo.anchor import anchor_examples, sft_examples
from evoh.grpo.checkpoint import latest_checkpoint, resume_from, save_checkpoint, save_final
from evoh.grpo.inputs import Inputs, read_inputs, run_inputs
from evoh.grpo.metrics import append_jsonl, end_tracking, start_tracking, track
from evoh.grpo.model import load_training, make_accelerator
from evoh.grpo.policies import Generators
from evoh.grpo.settings import check_settings, futile_settings, rollout_sampling
from evoh.grpo.state import TrainState
from evoh.grpo.update import run_update
from evoh.grpo.validation import Validation
from evoh.harness.episode import EpisodeSettings
from evoh.harness.experience import Bank
from evoh.harness.reward import REWARD_VERSION
from evoh.memory import release_freed_memory
from evoh.runs.episodes import bank_input, episode_settings, model_settings, play_settings
from evoh.runs.key import check_same_run, record_run, run_key
from evoh.tracking import run_name
from evoh.workspace import Workspace, file_sha256, fingerprint, weights_identity

STAGE = "grpo"
log = logging.getLogger(__name__)


@dataclass
class Callbacks:
    on_start: Callable[[int, int], None] | None = None  # (updates in all, already done)
    on_update: Callable[[dict[str, Any]], None] | None = None
    on_phase: Callable[[int, str], None] | None = None  # (update being made, what it is doing now)


def run(recipe: Recipe, workspace: Workspace, resume: bool = False, callbacks: Callbacks | None = None) -> dict[str, Any]:
    check_settings(recipe)
    for line in futile_settings(recipe):
        log.warning(line)
    g, callbacks = recipe.grpo, callbacks or Callbacks()
    read = read_inputs(recipe, workspace)

    from evoh.env.world import load_games, open_pool

    accelerator, precision = make_accelerator(g, workspace.path(STAGE))
    main = accelerator.is_main_process
    listed = listed_games(g)  # read once: the games trained on are the games the key and stage.json name
    tasks = load_games(recipe.env, g.split, g.limit or None, types=g.task_types, ids=listed)
    declared = settings(recipe, workspace, listed)
    val_tasks = load_games(recipe.env, g.val_split, g.val_limit or None, spread=True) if g.val_every else []
    train_settings, val_settings = rollout_settings(recipe), episode_settings(recipe)  # validation plays as `evoh eval` does
    directory = workspace.path(STAGE)
    resuming, key = _resume_point(workspace, declared, read, resume, main)
    started = time.time()
    with workspace.writing(STAGE) if main else contextlib.nullcontext(directory):
        if main:
            record_run(directory, key)
        tokenizer, state, update, bank = _start(recipe, workspace, read, accelerator, precision, resume)
        if callbacks.on_start:
            callbacks.on_start(g.updates, update)
        sampling = rollout_sampling(recipe, str(read.base))
        generators = Generators(state, tokenizer, read.base, read.adapter, sampling, recipe.model.max_tokens, directory)
        state.vocabulary, state.anchor = generators.vocabulary, anchor_examples(read.anchor, tokenizer)
        drift = sft_examples(read.heldout, tokenizer, g.drift_examples) if read.heldout else []
        validation = Validation(val_tasks, val_settings, drift, directory / "validation.jsonl" if main else None)
        metrics: dict[str, Any] = {}
        phase = callbacks.on_phase or (lambda done, what: None)
        validating = f"validation: {len(val_tasks)} {g.val_split} games, greedy, up to {val_settings.max_steps} turns each"
        with open_pool(recipe.env, max(g.max_steps, recipe.env.max_steps)) as pool:
            if g.val_every and update == 0:
                phase(update, validating + " (the starting policy)")
                validation(state, generators, pool, bank, 0)  # the starting policy, for the curve's first point
            while update < g.updates:
                metrics, bank, lines = run_update(
                    state, generators, pool, train_settings, bank, tasks, update, functools.partial(phase, update)
                )
                update += 1
                if g.val_every and (update % g.val_every == 0 or update == g.updates):
                    phase(update - 1, validating)
                    metrics["validation"] = validation(state, generators, pool, bank, update)
                if main:
                    append_jsonl(directory / "metrics.jsonl", [metrics])
                    append_jsonl(directory / "rollouts.jsonl", lines)
                track(state, metrics, update)
                if update % g.save_every == 0 or update == g.updates:
                    save_checkpoint(state, bank, directory, update)
                if callbacks.on_update:
                    callbacks.on_update(metrics)
                release_freed_memory()  # every update's tensors differ in size: without the trims, resident memory only grows
        end_tracking(state)
        result = {"updates": update, "final": metrics, "seconds": time.time() - started}
        if main:
            save_final(state, tokenizer, bank, directory)
            described = {**manifest(recipe, read, state, generators.name, precision), "settings": declared}
            workspace.finish(STAGE, {**described, **result})
        accelerator.wait_for_everyone()
    return result


def _start(recipe: Recipe, workspace: Workspace, read: Inputs, accelerator, precision: str, resume: bool):
    """The seeded model, its reference and optimizer, restored from the last checkpoint where the run resumes:
    (tokenizer, training state, updates done, bank)."""
    import torch

    g = recipe.grpo
    torch.manual_seed(g.seed + accelerator.process_index)
    random.seed(g.seed + accelerator.process_index)
    reference = g.kl > 0 or read.heldout is not None
    tokenizer, state = load_training(accelerator, precision, read.base, read.adapter, g, reference=reference)
    update, bank = resume_from(state, workspace.path(STAGE), Bank.load(read.bank) if read.bank else Bank(), resume)
    start_tracking(state, recipe_dict(recipe)["grpo"], run_name(workspace.root, STAGE), resumed=update > 0)
    return tokenizer, state, update, bank


def _resume_point(workspace: Workspace, declared: dict, read: Inputs, resume: bool, main: bool) -> tuple[bool, dict | None]:
    """Whether the run continues from a checkpoint, and (on the main process, which writes it) the run's key.
    Checkpoints are never trained over without ``--resume``, nor continued under other settings or inputs."""
    directory = workspace.path(STAGE)
    resuming = latest_checkpoint(directory) is not None
    if not main:
        return resuming, None
    if resuming and not resume:
        raise EvohError(
            f"{directory / 'checkpoints'} holds checkpoints of an earlier run",
            hint="pass --resume to continue it, or delete the grpo/ folder",
        )
    key = run_key(STAGE, declared, run_inputs(read), EXTENDABLE + COMPUTE_ONLY)
    hint = "resume with the settings and inputs it was made with, or delete the grpo/ folder to start over"
    if resuming and not check_same_run(directory, key, hint):
        log.warning("%s records no run key (an earlier evoh wrote it): its settings are not checked", directory)
    return resuming, key


def rollout_settings(recipe: Recipe) -> EpisodeSettings:
    """How a training rollout plays: the recipe's episodes at ``grpo.max_steps``, every harness call spending a step."""
    return dataclasses.replace(episode_settings(recipe), max_steps=recipe.grpo.max_steps, charge_meta_actions=True)


def settings(recipe: Recipe, workspace: Workspace, listed: list[str] | None = None) -> dict[str, Any]:
    """What the trained adapter depends on: `evoh run` keys the stage on it, and stage.json records it. Where
    its figures are watched changes no weight. ``listed``: the ids ``grpo.games`` named when the run read it."""
    declared = {**play_settings(recipe), "grpo": dataclasses.asdict(recipe.grpo), "model": model_settings(recipe, "local")}
    declared["grpo"].pop("report_to")
    if not recipe.grpo.freeze_bank:  # added later: left out at its default, so earlier runs keep their keys
        declared["grpo"].pop("freeze_bank")
    # the games a list names, not where the list lies; left out when there is none, as freeze_bank
    listed = listed_games(recipe.grpo) if listed is None else listed
    if listed:
        declared["grpo"]["games"] = fingerprint(sorted(set(listed)))  # the games drawn from: order and repeats aside
    else:
        declared["grpo"].pop("games")
    return declared


def listed_games(g: GrpoConfig) -> list[str]:
    """The task ids ``grpo.games`` names, or none when it names no file."""
    from evoh.env.games import read_game_list

    return read_game_list(g.games) if g.games else []


def inputs(recipe: Recipe) -> list[str]:
    """The stages whose outputs it reads: the weights it starts from, the bank its rollouts start from, and
    refine's examples where the SFT anchor or the drift measure reads them."""
    g = recipe.grpo
    read = (["sft"] if g.start == "sft" else []) + ([] if g.model else ["model"])
    read += ["collect"] if g.bank in ("auto", "collect") else []
    read += ["refine"] if g.sft_weight > 0 or (g.val_every and g.drift_examples) else []
    return read


# settings that only make a run longer: a run that changed only these continues from its checkpoints
EXTENDABLE = ("grpo.updates", "grpo.save_every", "grpo.val_every")
# settings that change how a run computes or what it measures, not what it learns, so a resumed run may change
# them (after running out of memory, say); the base model is keyed by what its weights hold, wherever they lie
COMPUTE_ONLY = (
    "grpo.micro_batch_tokens",
    "grpo.gradient_checkpointing",
    "grpo.vllm_memory",
    "grpo.val_split",
    "grpo.val_limit",
    "grpo.drift_examples",
    "grpo.model",
)


def manifest(recipe: Recipe, inputs: Inputs, state: TrainState, generator: str, precision: str) -> dict[str, Any]:
    """What stage.json records of the run, before its result."""
    from evoh import __version__
    from evoh.env.world import data_input

    adapter = inputs.adapter
    return {
        "config": recipe_dict(recipe)["grpo"],
        "protocol": {**rollout_settings(recipe).protocol(), "reward": REWARD_VERSION},  # as the rollouts played
        "base_model": weights_identity(inputs.base),
        "start_adapter": {"path": str(adapter), "sha256": file_sha256(adapter / "adapter_model.safetensors")}
        if adapter
        else None,
        "start_bank": bank_input(inputs.bank),
        "data": data_input(recipe.env),
        "processes": state.accelerator.num_processes,
        "generator": generator,
        "guided": recipe.model.guided,  # model.guided: rollouts and validation decoded under the turn grammar
        "precision": precision,
        "evoh_version": __version__,
    }
