"""Typed configuration: one dataclass per section, set by a TOML recipe and ``--set section.key=value``.

Unknown sections and keys are errors that name the nearest valid one, so a typo never silently
falls back to a default.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from evoh.errors import EvohError
from evoh.recipe_files import find_recipe

SPLITS = ("train", "valid_seen", "valid_unseen")


@dataclass(frozen=True)
class Range:
    """The values a number setting may take; a section lists its ranges in ``RANGES``, which ``_build`` checks,
    so a recipe or ``--set`` meets the same bounds as a command-line flag."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # the bound itself is excluded
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"


AT_LEAST_1 = Range(1)
NON_NEGATIVE = Range(0)
POSITIVE = Range(0, low_open=True)
TOP_P = Range(0, 1, low_open=True)


@dataclass
class MiniHouseConfig:
    """The size of MiniHouse's procedural rooms (env.kind = "minihouse"); every game of a run shares it."""

    receptacles: int = 6  # receptacles per room (ALFWorld's rooms hold 10 to 40)
    objects: int = 4  # objects besides the task's own
    distractors: int = 1  # of those, how many lie beside the task's object
    valid_games: int = 20  # games per task type in valid_seen and in valid_unseen
    train_games: int = 1000  # games per task type that the train split lists (any index is a game)


@dataclass
class EnvConfig:
    """Which world is played, where its games are and how the engine runs them."""

    # alfworld: ALFWorld's games on the TextWorld engine (needs ALFWORLD_DATA); minihouse: procedural rooms in
    # ALFWorld's grammar and text, generated in-process (no data, thousands of steps a second)
    kind: Literal["alfworld", "minihouse"] = "alfworld"
    data: str = ""  # ALFWORLD_DATA root; empty: $ALFWORLD_DATA, else ~/.cache/alfworld (alfworld-download's)
    max_steps: int = 50  # environment steps before an episode stops (the published ALFWorld setting)
    workers: int = 2  # engine processes in the pool (alfworld; minihouse games play in this process)
    step_timeout: float = 60.0  # seconds one reset or step may take before its worker is replaced
    minihouse: MiniHouseConfig = field(default_factory=MiniHouseConfig)

    RANGES: ClassVar[dict[str, Range]] = {"max_steps": AT_LEAST_1, "workers": AT_LEAST_1, "step_timeout": POSITIVE}


@dataclass
class HarnessConfig:
    """The harness the policy works in (DESIGN.md §1): mode, modules, and the budget rules."""

    mode: Literal["env_only", "always_on", "inline"] = "inline"
    belief: bool = True
    plan: bool = True
    experience: bool = True
    charge_meta_actions: bool = False  # true in training: every turn spends a step
    free_meta_cap: int = 20  # with charge_meta_actions false: free meta-actions per episode
    recall_k: int = 3
    few_shot: int = 0  # demonstrations in the system prompt, taken from few_shot_from
    few_shot_from: str = ""  # a trajectories.jsonl of expert episodes
    # full: the rules in words (a pretrained model reads them); brief: one line with the reply form, the verbs and
    # the budget rule, for a model trained from scratch on examples (which would spend much of every example on
    # the same constant text)
    system_prompt: Literal["full", "brief"] = "full"

    RANGES: ClassVar[dict[str, Range]] = {"free_meta_cap": NON_NEGATIVE, "recall_k": NON_NEGATIVE, "few_shot": NON_NEGATIVE}


@dataclass
class ExpertConfig:
    """How often the expert teacher uses each meta-action, from 0 (never) to 1 (at every chance), and slips."""

    recall: float = 1.0
    commit: float = 1.0
    track: float = 1.0
    note: float = 1.0
    # Chance per environment action of a typical student mistake (a command one detail off, inadmissible)
    # before the right one. Refine drops the mistake and keeps the recovery, so the student sees states it
    # reaches after its own errors (noise injection into the teacher) instead of only flawless histories.
    slip: float = 0.0


@dataclass
class ModelConfig:
    """The model behind the `openai` and `local` policies, and how it samples."""

    model: str = ""  # openai: the model's name at the endpoint; local: a model directory
    base_url: str = ""  # openai: the endpoint, e.g. http://localhost:8000/v1 (vLLM, llama.cpp, Ollama, hosted)
    api_key_env: str = "OPENAI_API_KEY"  # openai: the environment variable holding the key (never stored)
    adapter: str = ""  # local: a PEFT adapter directory on top of the model
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    max_tokens: int = 256  # per response
    concurrency: int = 8  # openai: requests in flight
    retries: int = 5  # openai: attempts after the first on 429, 5xx, timeouts, bad replies
    timeout: float = 60.0  # openai: seconds per request
    backoff: float = 1.0  # openai: first retry delay in seconds, doubled each time (capped at 30 s)
    batch_size: int = 16  # local: episodes per generate() call
    device: str = "auto"  # local: auto (CUDA when present), cpu, cuda
    dtype: str = "auto"  # local: auto (bf16 where the GPU or CPU computes it natively, else fp32), float32, bfloat16, float16
    # local: decode under the turn grammar, so every response parses and its action is an admissible command
    # or an allowed meta-action (the model still chooses which); off, garbage is recorded as invalid turns
    guided: bool = False

    RANGES: ClassVar[dict[str, Range]] = {
        "temperature": NON_NEGATIVE,
        "top_p": TOP_P,
        "max_tokens": AT_LEAST_1,
        "concurrency": AT_LEAST_1,
        "retries": NON_NEGATIVE,
        "timeout": POSITIVE,
        "backoff": NON_NEGATIVE,
        "batch_size": AT_LEAST_1,
    }


@dataclass
class PlayConfig:
    """Which policy plays which games, and how the Experience bank evolves while it does."""

    policy: Literal["expert", "openai", "local"] = "expert"
    split: str = "train"
    limit: int = 0  # N games of the split; 0 means all
    # with limit: the N games evenly spaced over the split's id order, so every task type is played (ids are
    # sorted by type); false: the first N, all of one type when N is small
    spread: bool = True
    # a file of task ids, one per line (`task.id` in episodes.jsonl, `task` in grpo's rollouts.jsonl): only those
    # games of the split, in id order; "": all
    games: str = ""
    seed: int = 0
    batch_size: int = 16  # episodes between two consolidations of the Experience bank
    max_active: int = 16  # episodes in flight at once
    bank: str = ""  # start from this bank.json ("collect" or "grpo": that stage's bank in this workspace); "": empty
    freeze_bank: bool = False  # never consolidate: every episode sees the starting bank

    RANGES: ClassVar[dict[str, Range]] = {"limit": NON_NEGATIVE, "batch_size": AT_LEAST_1, "max_active": AT_LEAST_1}


@dataclass
class CollectConfig(PlayConfig):
    """Teacher trajectories for supervised training."""

    label: Literal["", "expert"] = ""  # expert: the expert also answers every view the player reaches (DAgger labels)


@dataclass
class EvalConfig(PlayConfig):
    """A measured run; its files go to eval/<name>/."""

    split: str = "valid_seen"
    name: str = ""  # default: <policy>-<split>


@dataclass
class RefineConfig:
    """Which teacher turns become SFT examples."""

    min_score: float = 1.0  # keep episodes scoring at least this (1: won)
    max_turns: int = 0  # drop episodes longer than this; 0: no cap
    max_prompt_chars: int = 0  # drop turns whose prompt is longer; 0: no cap
    val_fraction: float = 0.1  # share of kept episodes held out for validation
    seed: int = 0

    RANGES: ClassVar[dict[str, Range]] = {
        "max_turns": NON_NEGATIVE,
        "max_prompt_chars": NON_NEGATIVE,
        "val_fraction": Range(0, 1, high_open=True),
    }


@dataclass
class SftConfig:
    """Stage one: LoRA, QLoRA or full supervised fine-tuning on refine/train.jsonl with TRL's SFTTrainer."""

    model: str = ""  # the base model directory
    full: bool = False  # train every weight (sft/model/) instead of a LoRA adapter (sft/adapter/): for a small random base
    lora_r: int = 64
    lora_alpha: int = 128
    lora_dropout: float = 0.05
    target: str = "all-linear"  # LoRA target modules: all-linear, or names separated by commas
    load_in_4bit: bool = False  # QLoRA: NF4 base weights through bitsandbytes (CUDA only)
    train_embeddings: bool = False  # also train embeddings and output head in full (needed for a random base)
    assistant_only_loss: bool = True  # false: loss on every token, so a random base also learns the prompts' language
    epochs: float = 4.0
    max_steps: int = -1  # > 0 overrides epochs
    lr: float = 1e-5
    scheduler: str = "cosine"
    warmup_ratio: float = 0.1
    batch_size: int = 16  # examples per optimizer step, across devices and accumulation
    per_device_batch: int = 4
    max_length: int = 4096
    # true: batches of examples of similar length (transformers' length-grouped sampler): less padding, but the CPU
    # recipe trained that way learnt less, for reasons not established (docs/results); off
    group_by_length: bool = False
    save_steps: int = 50
    eval_steps: int = 50
    logging_steps: int = 5
    gradient_checkpointing: bool = False  # saves GPU memory; off on CPU, where it fails
    # auto: bf16 where the hardware computes it natively (a GPU that supports it: bf16 weights; a CPU with
    # AVX512-BF16 or AMX: autocast over fp32 weights), else fp32, where emulated bf16 would be slower
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    action_check: int = 200  # validation turns whose greedy action is compared with the teacher's (0: none)
    # experiment trackers that receive every logged loss, lr and token accuracy: any of tensorboard (files in
    # WS/sft/tensorboard/), trackio (a local dashboard: `trackio show`), wandb; [] none (evoh.tracking)
    report_to: list[str] = field(default_factory=list)
    seed: int = 0

    RANGES: ClassVar[dict[str, Range]] = {
        "lora_r": AT_LEAST_1,
        "lora_alpha": AT_LEAST_1,
        "lora_dropout": Range(0, 1, high_open=True),
        "epochs": NON_NEGATIVE,
        "lr": POSITIVE,
        "warmup_ratio": Range(0, 1),
        "batch_size": AT_LEAST_1,
        "per_device_batch": AT_LEAST_1,
        "max_length": AT_LEAST_1,
        "save_steps": AT_LEAST_1,
        "eval_steps": AT_LEAST_1,
        "logging_steps": AT_LEAST_1,
        "action_check": NON_NEGATIVE,
    }


@dataclass
class RewardConfig:
    """The cost-aware reward's coefficients (DESIGN.md §1, stage 2); the defaults are the paper's."""

    success: float = 10.0
    efficiency: float = 1.0  # λ_eff
    diversity_max: float = 1.0  # λ_div_max
    diversity_horizon: int = 150  # U: updates over which λ_div anneals to 0
    diversity: Literal["bpe_coverage", "verb_ratio"] = "bpe_coverage"
    spam: float = 0.1  # λ_spam
    spam_cap: int = 10
    # what S counts: back_to_back (the paper's: turns that repeat the turn before) or seen_before
    # (environment steps whose action and observation the episode had already seen: walks between two places)
    spam_counts: Literal["back_to_back", "seen_before"] = "back_to_back"
    invalid: float = 0.1  # λ_inv
    idle_meta: float = 0.0  # λ_idle per harness call that spent a step for nothing (see harness/reward.py); 0: the paper's reward


@dataclass
class GrpoConfig:
    """Stage two: cost-aware multi-turn GRPO over whole episodes, every turn charged to the budget."""

    start: Literal["sft", "none"] = (
        "sft"  # sft: continue WS/sft/adapter (a fresh LoRA on WS/sft/model); none: a fresh LoRA on `model`
    )
    model: str = ""  # the base model directory; empty: the one the sft stage trained on
    updates: int = 150
    tasks_per_update: int = 16  # T train games per update
    group_size: int = 8  # G rollouts of each game
    split: str = "train"
    limit: int = 0  # draw tasks from the first N games of the split; 0: all
    task_types: list[str] = field(
        default_factory=list
    )  # train on these types only (pick, look, clean, heat, cool, pick2); empty: all
    max_steps: int = 70  # the horizon: every turn, harness calls included, spends one step
    temperature: float = 1.0  # rollout sampling; the policy's log-probs use the same temperature
    top_p: float = 1.0
    max_tokens: int = 512  # per response
    lr: float = 1e-6
    # adamw (the paper's) or sgd: plain gradient steps of lr times the clipped gradient. Adam's first steps move
    # every weight by about lr whatever its gradient, so a noisy gradient from few rollouts moves the policy in
    # every direction at once; an SGD step is the gradient itself (so its lr is on another scale)
    optimizer: Literal["adamw", "sgd"] = "adamw"
    scheduler: str = "constant"  # any transformers scheduler name: constant, cosine, linear, ...
    warmup_updates: int = 0
    kl: float = 0.01  # β: weight of the KL estimate to the reference policy
    kl_cap: float = 10.0  # per-token bound on that estimate (0: none); its tail is exponential in the log-ratio
    clip_low: float = 0.2  # ε: ratio clipped to [1 − clip_low, 1 + clip_high]
    clip_high: float = 0.2
    std_normalize: bool = True  # divide group-relative advantages by the group's standard deviation
    # the games an update trains on: all (the paper's recipe, every group on its reward's differences),
    # contrasting (rollouts differ in success: some won, some lost) or won (at least one rollout won);
    # an update with none makes no optimizer step
    train_groups: Literal["all", "contrasting", "won"] = "all"
    # the rollouts of those games it trains on: all (GRPO's) or above_mean (a positive advantage only:
    # the better rollouts are reinforced, the worse ones left alone rather than pushed down)
    train_rollouts: Literal["all", "above_mean"] = "all"
    # one rollout of each group decoded greedily, the episode `evoh eval` would play, beside G − 1 sampled ones:
    # its loops and wins enter the group's comparison, which sampling alone may never reach; false: the paper's
    greedy_rollout: bool = False
    # how the per-token losses are averaged: token (the paper's: over all tokens, so a long episode weighs by
    # its length) or episode (each episode's tokens average to one term; episodes weigh equally)
    loss_aggregation: Literal["token", "episode"] = "token"
    # the SFT loss on refine's training examples, times this weight, joins every optimizer step (InstructGPT's
    # PPO-ptx) to hold the policy to what it imitated while the reward moves it; 0: the paper's GRPO. On the CPU
    # recipe, whose SFT model memorised its examples, it held their loss and not the choices elsewhere
    sft_weight: float = 0.0
    sft_examples: int = 8  # SFT examples per optimizer step, with sft_weight
    minibatches: int = 1  # optimizer steps per update (more than 1 makes the ratio move away from 1)
    micro_batch_tokens: int = 16384  # padded tokens per forward pass; gradients accumulate over micro-batches
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = False  # saves GPU memory in the update; CUDA only
    lora_r: int = 64  # a fresh adapter (start = "none")
    lora_alpha: int = 128
    target: str = "all-linear"
    save_every: int = 10  # checkpoint every N updates (and after the last)
    val_every: int = 10  # validate every N updates; 0: never
    val_split: str = "valid_seen"
    val_limit: int = 16  # validation games, evenly spaced over val_split (every task type)
    # validation also measures how far the policy has moved from the reference where it was not trained: on
    # this many of refine's held-out examples (refine/val.jsonl, when the workspace has it), the mean KL per
    # response token and the share of those tokens whose most likely next token changed; 0: off
    drift_examples: int = 200
    # the Experience the rollouts start from: "auto" the bank the teacher built while making the SFT data
    # (collect's, so recall answers as it did in the SFT examples) where this workspace has one, else an
    # empty bank; "collect" the same but required; a bank.json path; "" an empty bank
    bank: str = "auto"
    generator: Literal["auto", "transformers", "vllm"] = "auto"  # auto: vLLM when installed and on a GPU
    vllm_memory: float = 0.3  # share of GPU memory vLLM may take (the trainer needs the rest)
    # auto: bf16 where the hardware computes it natively (bf16 weights on a GPU; autocast over fp32 weights,
    # rollouts and update alike, on a CPU with AVX512-BF16 or AMX), else fp32
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    # experiment trackers that receive each update's figures (those of metrics.jsonl), stepped by update: any of
    # tensorboard (files in WS/grpo/tensorboard/), trackio, wandb; [] none (evoh.tracking)
    report_to: list[str] = field(default_factory=list)
    seed: int = 0
    reward: RewardConfig = field(default_factory=RewardConfig)

    RANGES: ClassVar[dict[str, Range]] = {
        "updates": AT_LEAST_1,
        "tasks_per_update": AT_LEAST_1,
        "group_size": Range(2),
        "limit": NON_NEGATIVE,
        "max_steps": AT_LEAST_1,
        "temperature": POSITIVE,
        "top_p": TOP_P,
        "max_tokens": AT_LEAST_1,
        "lr": POSITIVE,
        "warmup_updates": NON_NEGATIVE,
        "kl": NON_NEGATIVE,
        "kl_cap": NON_NEGATIVE,
        "clip_low": Range(0, 1),
        "clip_high": NON_NEGATIVE,
        "sft_weight": NON_NEGATIVE,
        "sft_examples": AT_LEAST_1,
        "minibatches": AT_LEAST_1,
        "micro_batch_tokens": AT_LEAST_1,
        "max_grad_norm": POSITIVE,
        "lora_r": AT_LEAST_1,
        "lora_alpha": AT_LEAST_1,
        "save_every": AT_LEAST_1,
        "val_every": NON_NEGATIVE,
        "val_limit": NON_NEGATIVE,
        "drift_examples": NON_NEGATIVE,
        "vllm_memory": Range(0, 1, low_open=True, high_open=True),
    }


@dataclass
class RunConfig:
    """What `evoh run` does with this recipe: which stages, in order, and which runs to evaluate."""

    stages: list[str] = field(default_factory=lambda: ["collect", "refine", "sft", "grpo", "eval", "export"])
    eval_from: list[str] = field(default_factory=lambda: ["sft", "grpo"])  # base, sft or grpo: which weights eval measures
    eval_splits: list[str] = field(default_factory=lambda: ["valid_seen", "valid_unseen"])
    eval_temperature: float = 0.0  # the evaluations sample like this ([model] may hold a teacher's sampling)
    # each evaluation starts from the Experience bank its weights were trained alongside, where this workspace
    # has it: collect's (the teacher's) for base and sft, grpo's for grpo; false: [eval] bank for all
    eval_stage_banks: bool = True
    model_size: str = "small"  # the model stage builds this size at sft.model when nothing is there
    export_from: str = "grpo"
    export_dtype: str = "bf16"


@dataclass
class Recipe:
    """A whole experiment's settings, one field per TOML section."""

    env: EnvConfig = field(default_factory=EnvConfig)
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    expert: ExpertConfig = field(default_factory=ExpertConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    collect: CollectConfig = field(default_factory=CollectConfig)
    refine: RefineConfig = field(default_factory=RefineConfig)
    sft: SftConfig = field(default_factory=SftConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    grpo: GrpoConfig = field(default_factory=GrpoConfig)
    run: RunConfig = field(default_factory=RunConfig)


def _nearest(name: str, options: list[str]) -> str:
    match = difflib.get_close_matches(name, options, n=1, cutoff=0.5)
    return f"did you mean '{match[0]}'?" if match else f"valid names: {', '.join(sorted(options))}"


def _coerce(value: Any, kind: Any, where: str) -> Any:
    """Check (and where lossless, convert) a TOML value against a dataclass field's type."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, where)
            except EvohError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is Literal:
        choices = typing.get_args(kind)
        if value not in choices:
            raise EvohError(f"{where} = {value!r} is not one of {', '.join(map(repr, choices))}", hint="pick one of those")
        return value
    if origin is list:
        (item,) = typing.get_args(kind)
        if not isinstance(value, list):
            raise EvohError(f"{where} must be a list, got {value!r}", hint='write it as ["a", "b"]')
        return [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind in (int, float, str, bool) and (type(value) is not kind):
        raise EvohError(f"{where} must be {kind.__name__}, got {value!r}", hint="fix the value's type in the recipe or --set")
    return value


def _build(cls: type, table: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in table.items():
        if key not in names:
            raise EvohError(f"unknown setting '{where}{key}'", hint=_nearest(key, names))
        if dataclasses.is_dataclass(hints[key]):
            if not isinstance(value, dict):
                raise EvohError(f"'{where}{key}' is a section", hint=f"write it as [{where}{key}]")
            values[key] = _build(hints[key], value, f"{where}{key}.")
        else:
            values[key] = _coerce(value, hints[key], f"{where}{key}")
            allowed = getattr(cls, "RANGES", {}).get(key)
            if allowed is not None and values[key] not in allowed:
                raise EvohError(
                    f"{where}{key} = {value!r} is out of range: it must be {allowed}",
                    hint=f"set a value {allowed}, e.g. --set {where}{key}={getattr(cls(), key)!r}",
                )
    return cls(**values)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``section.key=value``; the value is read as TOML (``70``, ``true``, ``["a"]``) or else as a string."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip():
        raise EvohError(f"--set {text!r} is not section.key=value", hint="for example --set env.max_steps=70")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return path.strip().split("."), value


def load_recipe(path: Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Recipe:
    """Read a recipe (a file, or a shipped recipe's name; or start from the defaults), apply ``--set`` overrides,
    and check every key and type."""
    table: dict[str, Any] = {}
    if path is not None:
        path = find_recipe(path)
        try:
            table = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise EvohError(f"{path}: not valid TOML ({exc})", hint="fix the line it names") from None
    for text in overrides:
        keys, value = parse_override(text)
        node = table
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise EvohError(f"--set {text!r}: '{key}' is a value, not a section", hint="use section.key=value")
        node[keys[-1]] = value
    return _build(Recipe, table, "")


def recipe_dict(recipe: Recipe) -> dict[str, Any]:
    return dataclasses.asdict(recipe)


def recipe_toml(recipe: Recipe) -> str:
    import tomli_w

    return tomli_w.dumps(recipe_dict(recipe))
