"""The recipe's sections, one dataclass per TOML table, in pipeline order.

Every field says once what it does (``setting``); `--help`, `evoh config` and docs/settings.md are built from
those words, and a recipe, ``--set`` and a command-line flag meet the same types and ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from evoh.config.fields import AT_LEAST_1, NON_NEGATIVE, POSITIVE, TOP_P, Range, section, setting


@dataclass
class MiniHouseConfig:
    """The size of MiniHouse's procedural rooms (env.kind = "minihouse"); every game of a run shares it."""

    receptacles: int = setting(6, "receptacles per room (ALFWorld's rooms hold 10 to 40)")
    objects: int = setting(4, "objects besides the task's own")
    distractors: int = setting(1, "of those, how many lie beside the task's object")
    valid_games: int = setting(20, "games per task type in valid_seen and in valid_unseen")
    train_games: int = setting(1000, "games per task type that the train split lists (any index is a game)")


@dataclass
class EnvConfig:
    """Which world is played, where its games are and how the engine runs them."""

    kind: Literal["alfworld", "minihouse"] = setting(
        "alfworld",
        (
            "alfworld: ALFWorld's games (needs ALFWORLD_DATA; env.engine plays them); minihouse: procedural "
            "rooms in ALFWorld's grammar and text, generated in-process (no data, thousands of steps a second)"
        ),
    )
    data: str = setting("", "ALFWORLD_DATA root; empty: $ALFWORLD_DATA, else ~/.cache/alfworld (alfworld-download's)")
    engine: Literal["native", "textworld"] = setting(
        "native",
        (
            "what plays ALFWorld's games: native (evoh's own engine, in this process; it reads the same game files and "
            "answers exactly as TextWorld does, differentially tested) or textworld (the reference engine, in worker "
            "processes; `pip install 'evoh[textworld]'`). MiniHouse ignores it"
        ),
    )
    max_steps: int = setting(50, "environment steps before an episode stops (the published ALFWorld setting)", AT_LEAST_1)
    workers: int = setting(2, "engine processes in the pool (engine = textworld; the others play in this process)", AT_LEAST_1)
    step_timeout: float = setting(60.0, "seconds one reset or step may take before its worker is replaced", POSITIVE)
    minihouse: MiniHouseConfig = section(MiniHouseConfig)


@dataclass
class HarnessConfig:
    """The harness the policy works in (DESIGN.md §1): mode, modules, and the budget rules."""

    mode: Literal["env_only", "always_on", "inline"] = setting(
        "inline",
        "inline: meta-actions are turns the policy chooses (the paper's); always_on: every turn shows the modules' "
        "panels, kept by the harness, and only world actions are played; env_only: no harness, world actions only "
        "(ReAct)",
    )
    belief: bool = setting(
        True, "keep the Belief module: what the agent has seen this episode, updated from every step; track asks it"
    )
    plan: bool = setting(True, "keep the Progress module (committed subgoals) in the prompt; commit writes it")
    experience: bool = setting(
        True, "keep the Experience bank (skills, mistakes, search hints across episodes); recall reads it, note writes it"
    )
    charge_meta_actions: bool = setting(False, "true in training: every turn spends a step")
    free_meta_cap: int = setting(20, "with charge_meta_actions false: free meta-actions per episode", NON_NEGATIVE)
    recall_k: int = setting(3, "entries a recall returns from the Experience bank", NON_NEGATIVE)
    few_shot: int = setting(0, "demonstrations in the system prompt, taken from few_shot_from", NON_NEGATIVE)
    few_shot_from: str = setting("", "a trajectories.jsonl of expert episodes")
    system_prompt: Literal["full", "brief"] = setting(
        "full",
        (
            "full: the rules in words (a pretrained model reads them); brief: one line with the reply form, the "
            "verbs and the budget rule, for a model trained from scratch on examples (which would spend much of "
            "every example on the same constant text)"
        ),
    )


@dataclass
class ExpertConfig:
    """How often the expert teacher uses each meta-action, from 0 (never) to 1 (at every chance), and slips."""

    recall: float = setting(1.0, "chance the expert recalls from the Experience bank where it could")
    commit: float = setting(1.0, "chance the expert commits its next subgoal to Progress before working on it")
    track: float = setting(1.0, "chance the expert asks Belief where the first object went before fetching the second (pick2)")
    note: float = setting(1.0, "chance the expert notes a lesson into the Experience bank")
    slip: float = setting(
        0.0,
        (
            "Chance per environment action of a typical student mistake (a command one detail off, inadmissible) "
            "before the right one. Refine drops the mistake and keeps the recovery, so the student sees states it "
            "reaches after its own errors (noise injection into the teacher) instead of only flawless histories."
        ),
    )
    search_track: float = setting(
        0.0,
        (
            "chance the expert, searching for an object it has not seen, asks Belief after each place that did not "
            "hold it which places it has not yet visited. The prompt lists previous actions without what they "
            "showed, so without this a student has to work out from the action list where it has already looked; "
            "a student that cannot walks back and forth between two places"
        ),
    )


@dataclass
class ModelConfig:
    """The model behind the `openai` and `local` policies, and how it samples."""

    model: str = setting("", "openai: the model's name at the endpoint; local and vllm: a model directory or Hugging Face Hub id")
    base_url: str = setting("", "openai: the endpoint, e.g. http://localhost:8000/v1 (vLLM, llama.cpp, Ollama, hosted)")
    api_key_env: str = setting("OPENAI_API_KEY", "openai: the environment variable holding the key (never stored)")
    adapter: str = setting("", "local and vllm: a PEFT adapter directory on top of the model")
    temperature: float = setting(0.0, "0: greedy", NON_NEGATIVE)
    top_p: float = setting(
        1.0, "nucleus sampling: sample from the smallest set of tokens whose probability reaches this (1: all)", TOP_P
    )
    max_tokens: int = setting(256, "per response", AT_LEAST_1)
    concurrency: int = setting(8, "openai: requests in flight", AT_LEAST_1)
    retries: int = setting(5, "openai: attempts after the first on 429, 5xx, timeouts, bad replies", NON_NEGATIVE)
    timeout: float = setting(60.0, "openai: seconds per request", POSITIVE)
    backoff: float = setting(1.0, "openai: first retry delay in seconds, doubled each time (capped at 30 s)", NON_NEGATIVE)
    batch_size: int = setting(16, "local: episodes per generate() call", AT_LEAST_1)
    vllm_memory: float = setting(
        0.85, "vllm: share of the GPU's memory the engine may take (weights and KV cache)", Range(0, 1, low_open=True)
    )
    device: str = setting("auto", "local: auto (CUDA when present), cpu, cuda")
    dtype: str = setting(
        "auto", "local: auto (bf16 where the GPU or CPU computes it natively, else fp32), float32, bfloat16, float16"
    )
    guided: bool = setting(
        False,
        (
            "local and vllm: decode under the turn grammar, so every response parses and its action is an "
            "admissible command or an allowed meta-action (the model still chooses which); off, garbage is "
            "recorded as invalid turns. vllm decodes under it through xgrammar, without the local decoder's bound "
            "on a meta-action's argument"
        ),
    )


@dataclass
class PlayConfig:
    """Which policy plays which games, and how the Experience bank evolves while it does."""

    policy: Literal["expert", "openai", "local", "vllm"] = setting(
        "expert",
        "who plays: expert (the rule-based teacher), openai (an OpenAI-compatible endpoint), local (a model directory "
        "or Hub id, through transformers) or vllm (the same model in an in-process vLLM engine; CUDA)",
    )
    split: str = setting("train", "the split whose games are played: train, valid_seen or valid_unseen")
    limit: int = setting(0, "N games of the split; 0 means all", NON_NEGATIVE)
    spread: bool = setting(
        True,
        (
            "with limit: the N games evenly spaced over the split's id order, so every task type is played (ids "
            "are sorted by type); false: the first N, all of one type when N is small"
        ),
    )
    games: str = setting(
        "",
        (
            "a file of task ids, one per line (`task.id` in episodes.jsonl, `task` in grpo's rollouts.jsonl): "
            'only those games of the split, in id order; "": all'
        ),
    )
    seed: int = setting(0, "seed of the policy's sampling and of the expert's slips")
    batch_size: int = setting(16, "episodes between two consolidations of the Experience bank", AT_LEAST_1)
    max_active: int = setting(16, "episodes in flight at once", AT_LEAST_1)
    bank: str = setting("", 'start from this bank.json ("collect" or "grpo": that stage\'s bank in this workspace); "": empty')
    freeze_bank: bool = setting(False, "never consolidate: every episode sees the starting bank")


@dataclass
class CollectConfig(PlayConfig):
    """Teacher trajectories for supervised training."""

    label: Literal["", "expert"] = setting("", "expert: the expert also answers every view the player reaches (DAgger labels)")


@dataclass
class EvalConfig(PlayConfig):
    """A measured run; its files go to eval/<name>/."""

    split: str = setting("valid_seen", "the split whose games are played: train, valid_seen or valid_unseen")
    name: str = setting(
        "", "the run's folder under WS/eval/; empty: POLICY-SPLIT, then the mode and ablations if any (local-valid_seen-no-plan)"
    )


@dataclass
class RefineConfig:
    """Which teacher turns become SFT examples."""

    min_score: float = setting(1.0, "keep episodes scoring at least this (1: won)")
    max_turns: int = setting(0, "drop episodes longer than this; 0: no cap", NON_NEGATIVE)
    max_prompt_chars: int = setting(0, "drop turns whose prompt is longer; 0: no cap", NON_NEGATIVE)
    val_fraction: float = setting(0.1, "share of kept episodes held out for validation", Range(0, 1, high_open=True))
    seed: int = setting(0, "seed of the shuffle that picks the held-out episodes")


@dataclass
class SftConfig:
    """Stage one: LoRA, QLoRA or full supervised fine-tuning on refine/train.jsonl with TRL's SFTTrainer."""

    model: str = setting("", "the base model: a directory or a Hugging Face Hub id (Qwen/Qwen3-8B)")
    full: bool = setting(
        False, "train every weight (sft/model/) instead of a LoRA adapter (sft/adapter/): for a small random base"
    )
    lora_r: int = setting(64, "LoRA rank", AT_LEAST_1)
    lora_alpha: int = setting(128, "LoRA scaling numerator (the update is scaled by lora_alpha / lora_r)", AT_LEAST_1)
    lora_dropout: float = setting(0.05, "dropout on the LoRA path", Range(0, 1, high_open=True))
    target: str = setting("all-linear", "LoRA target modules: all-linear, or names separated by commas")
    load_in_4bit: bool = setting(False, "QLoRA: NF4 base weights through bitsandbytes (CUDA only)")
    train_embeddings: bool = setting(False, "also train embeddings and output head in full (needed for a random base)")
    assistant_only_loss: bool = setting(True, "false: loss on every token, so a random base also learns the prompts' language")
    epochs: float = setting(4.0, "passes over refine/train.jsonl (with max_steps <= 0)", NON_NEGATIVE)
    max_steps: int = setting(-1, "> 0 overrides epochs")
    lr: float = setting(1e-5, "peak learning rate", POSITIVE)
    scheduler: str = setting("cosine", "any transformers scheduler name: cosine, linear, constant, ...")
    warmup_ratio: float = setting(0.1, "share of the steps over which the learning rate warms up", Range(0, 1))
    batch_size: int = setting(16, "examples per optimizer step, across devices and accumulation", AT_LEAST_1)
    per_device_batch: int = setting(
        4, "examples per forward pass on one device; gradients accumulate up to batch_size", AT_LEAST_1
    )
    max_length: int = setting(4096, "tokens per example; a longer example is truncated", AT_LEAST_1)
    group_by_length: bool = setting(
        False,
        (
            "true: batches of examples of similar length (transformers' length-grouped sampler): less padding, "
            "but the CPU recipe trained that way learnt less, for reasons not established (docs/results); off"
        ),
    )
    save_steps: int = setting(50, "checkpoint every N optimizer steps (resume starts from the last)", AT_LEAST_1)
    eval_steps: int = setting(50, "loss on refine/val.jsonl every N optimizer steps", AT_LEAST_1)
    logging_steps: int = setting(5, "log loss, lr and token accuracy every N optimizer steps", AT_LEAST_1)
    gradient_checkpointing: bool = setting(False, "saves GPU memory; off on CPU, where it fails")
    precision: Literal["auto", "bf16", "fp32"] = setting(
        "auto",
        (
            "auto: bf16 where the hardware computes it natively (a GPU that supports it: bf16 weights; a CPU with "
            "AVX512-BF16 or AMX: autocast over fp32 weights), else fp32, where emulated bf16 would be slower"
        ),
    )
    action_check: int = setting(
        200, "validation turns whose greedy action is compared with the teacher's (0: none)", NON_NEGATIVE
    )
    report_to: list[str] = setting(
        [],
        (
            "experiment trackers that receive every logged loss, lr and token accuracy: any of tensorboard (files "
            "in WS/sft/tensorboard/), trackio (a local dashboard: `trackio show`), wandb; [] none (evoh.tracking)"
        ),
    )
    seed: int = setting(0, "seed of the data order and of the adapter's initial weights (and of the model stage's random model)")


@dataclass
class RewardConfig:
    """The cost-aware reward's coefficients (DESIGN.md §1, stage 2; the formula in harness/reward.py); the
    defaults are the paper's."""

    success: float = setting(10.0, "reward of a won episode")
    efficiency: float = setting(
        1.0, "λ_eff: weight of R_eff = won·(T_max − turns)/T_max, the share of the budget a won episode left unspent"
    )
    diversity_max: float = setting(
        1.0, "λ_div_max: weight of the verb-diversity term at update 0; it anneals to 0 over diversity_horizon"
    )
    diversity_horizon: int = setting(150, "U: updates over which λ_div anneals to 0")
    diversity: Literal["bpe_coverage", "verb_ratio"] = setting(
        "bpe_coverage",
        "R_div: bpe_coverage (the paper's: the share of the four verbs used) or verb_ratio (distinct verbs over meta-actions)",
    )
    spam: float = setting(0.1, "λ_spam: penalty per repeat (see spam_counts), up to spam_cap repeats")
    spam_cap: int = setting(
        10,
        (
            "repeats counted at most, per episode, by the spam term: a lost episode that walks in circles reaches "
            "a small cap early, and past it the term no longer tells one such loss from another"
        ),
    )
    spam_counts: Literal["back_to_back", "seen_before"] = setting(
        "back_to_back",
        (
            "what S counts: back_to_back (the paper's: turns that repeat the turn before) or seen_before "
            "(environment steps whose action and observation the episode had already seen: walks between two "
            "places)"
        ),
    )
    invalid: float = setting(0.1, "λ_inv: penalty per invalid action, malformed turns included")
    idle_meta: float = setting(
        0.0, "λ_idle per harness call that spent a step for nothing (see harness/reward.py); 0: the paper's reward"
    )


@dataclass
class GrpoConfig:
    """Stage two: cost-aware multi-turn GRPO over whole episodes, every turn charged to the budget."""

    start: Literal["sft", "none"] = setting(
        "sft", "sft: continue WS/sft/adapter (a fresh LoRA on WS/sft/model); none: a fresh LoRA on `model`"
    )
    model: str = setting("", "the base model (a directory or Hub id); empty: the one the sft stage trained on")
    updates: int = setting(150, "policy updates (the paper's 150)", AT_LEAST_1)
    tasks_per_update: int = setting(16, "T train games per update", AT_LEAST_1)
    group_size: int = setting(8, "G rollouts of each game", Range(2))
    split: str = setting("train", "the split training games are drawn from")
    limit: int = setting(0, "draw tasks from the first N games of the split; 0: all", NON_NEGATIVE)
    task_types: list[str] = setting([], "train on these types only (pick, look, clean, heat, cool, pick2); empty: all")
    games: str = setting(
        "",
        (
            "a file of task ids, one per line (as `evoh eval`'s games take them): tasks are drawn from those games "
            'of the split only, after task_types and before limit; "": all'
        ),
    )
    max_steps: int = setting(70, "the horizon: every turn, harness calls included, spends one step", AT_LEAST_1)
    temperature: float = setting(1.0, "rollout sampling; the policy's log-probs use the same temperature", POSITIVE)
    top_p: float = setting(1.0, "rollout nucleus sampling (1: all tokens)", TOP_P)
    max_tokens: int = setting(512, "per response", AT_LEAST_1)
    lr: float = setting(
        1e-6, "learning rate (the paper's 1e-6, for a full 8B model; a small LoRA run needs a larger one)", POSITIVE
    )
    optimizer: Literal["adamw", "sgd"] = setting(
        "adamw",
        (
            "adamw (the paper's) or sgd: plain gradient steps of lr times the clipped gradient. Adam's first "
            "steps move every weight by about lr whatever its gradient, so a noisy gradient from few rollouts "
            "moves the policy in every direction at once; an SGD step is the gradient itself (so its lr is on "
            "another scale)"
        ),
    )
    scheduler: str = setting("constant", "any transformers scheduler name: constant, cosine, linear, ...")
    warmup_updates: int = setting(0, "updates over which the learning rate warms up", NON_NEGATIVE)
    kl: float = setting(0.01, "β: weight of the KL estimate to the reference policy", NON_NEGATIVE)
    kl_cap: float = setting(
        10.0, "per-token bound on that estimate (0: none); its tail is exponential in the log-ratio", NON_NEGATIVE
    )
    clip_low: float = setting(0.2, "ε: ratio clipped to [1 − clip_low, 1 + clip_high]", Range(0, 1))
    clip_high: float = setting(0.2, "ε_high: upper clip of the ratio is 1 + clip_high", NON_NEGATIVE)
    std_normalize: bool = setting(True, "divide group-relative advantages by the group's standard deviation")
    train_groups: Literal["all", "contrasting", "won"] = setting(
        "all",
        (
            "the games an update trains on: all (the paper's recipe, every group on its reward's differences), "
            "contrasting (rollouts differ in success: some won, some lost) or won (at least one rollout won); an "
            "update with none makes no optimizer step"
        ),
    )
    train_rollouts: Literal["all", "above_mean"] = setting(
        "all",
        (
            "the rollouts of those games it trains on: all (GRPO's) or above_mean (a positive advantage only: the "
            "better rollouts are reinforced, the worse ones left alone rather than pushed down)"
        ),
    )
    greedy_rollout: bool = setting(
        False,
        (
            "one rollout of each group decoded greedily, the episode `evoh eval` would play, beside G − 1 sampled "
            "ones: its loops and wins enter the group's comparison, which sampling alone may never reach; false: "
            "the paper's"
        ),
    )
    loss_aggregation: Literal["token", "episode"] = setting(
        "token",
        (
            "how the per-token losses are averaged: token (the paper's: over all tokens, so a long episode weighs "
            "by its length) or episode (each episode's tokens average to one term; episodes weigh equally)"
        ),
    )
    sft_weight: float = setting(
        0.0,
        (
            "the SFT loss on refine's training examples, times this weight, joins every optimizer step "
            "(InstructGPT's PPO-ptx) to hold the policy to what it imitated while the reward moves it; 0: the "
            "paper's GRPO. On the CPU recipe, whose SFT model memorised its examples, it held their loss and not "
            "the choices elsewhere"
        ),
        NON_NEGATIVE,
    )
    sft_examples: int = setting(8, "SFT examples per optimizer step, with sft_weight", AT_LEAST_1)
    minibatches: int = setting(1, "optimizer steps per update (more than 1 makes the ratio move away from 1)", AT_LEAST_1)
    micro_batch_tokens: int = setting(
        16384, "padded tokens per forward pass; gradients accumulate over micro-batches", AT_LEAST_1
    )
    max_grad_norm: float = setting(1.0, "gradients are clipped to this norm before each optimizer step", POSITIVE)
    gradient_checkpointing: bool = setting(False, "saves GPU memory in the update; CUDA only")
    lora_r: int = setting(64, "LoRA rank of a fresh adapter (start = none, or after a full SFT run)", AT_LEAST_1)
    lora_alpha: int = setting(
        128, "LoRA scaling numerator of a fresh adapter (start = none, or after a full SFT run)", AT_LEAST_1
    )
    target: str = setting("all-linear", "LoRA target modules of a fresh adapter: all-linear, or names separated by commas")
    save_every: int = setting(10, "checkpoint every N updates (and after the last)", AT_LEAST_1)
    val_every: int = setting(10, "validate every N updates; 0: never", NON_NEGATIVE)
    val_split: str = setting("valid_seen", "the split validation plays")
    val_limit: int = setting(16, "validation games, evenly spaced over val_split (every task type)", NON_NEGATIVE)
    drift_examples: int = setting(
        200,
        (
            "validation also measures how far the policy has moved from the reference where it was not trained: "
            "on this many of refine's held-out examples (refine/val.jsonl, when the workspace has it), the mean "
            "KL per response token and the share of those tokens whose most likely next token changed; 0: off"
        ),
        NON_NEGATIVE,
    )
    bank: str = setting(
        "auto",
        (
            'the Experience the rollouts start from: "auto" the bank the teacher built while making the SFT data '
            "(collect's, so recall answers as it did in the SFT examples) where this workspace has one, else an "
            'empty bank; "collect" the same but required; a bank.json path; "" an empty bank'
        ),
    )
    freeze_bank: bool = setting(
        False,
        "true: the rollouts' Experience bank stays as the run started it; false (the paper's harness): every "
        "update consolidates its episodes into it, so a weak policy's notes, lost games' lessons and recall "
        "counts change what later recalls answer, beside what the weights learn",
    )
    generator: Literal["auto", "transformers", "vllm"] = setting("auto", "auto: vLLM when installed and on a GPU")
    vllm_memory: float = setting(
        0.3, "share of GPU memory vLLM may take (the trainer needs the rest)", Range(0, 1, low_open=True, high_open=True)
    )
    precision: Literal["auto", "bf16", "fp32"] = setting(
        "auto",
        (
            "auto: bf16 where the hardware computes it natively (bf16 weights on a GPU; autocast over fp32 "
            "weights, rollouts and update alike, on a CPU with AVX512-BF16 or AMX), else fp32"
        ),
    )
    report_to: list[str] = setting(
        [],
        (
            "experiment trackers that receive each update's figures (those of metrics.jsonl), stepped by update: "
            "any of tensorboard (files in WS/grpo/tensorboard/), trackio, wandb; [] none (evoh.tracking)"
        ),
    )
    seed: int = setting(0, "seed of the games drawn, the rollouts' sampling and a fresh adapter's weights")
    reward: RewardConfig = section(RewardConfig)


@dataclass
class RunConfig:
    """What `evoh run` does with this recipe: which stages, in order, and which runs to evaluate."""

    stages: list[str] = setting(
        ["collect", "refine", "sft", "grpo", "eval", "export"],
        "the stages `evoh run` runs, in pipeline order: model, collect, refine, sft, grpo, eval, export",
    )
    eval_from: list[str] = setting(["sft", "grpo"], "base, sft or grpo: which weights eval measures")
    eval_splits: list[str] = setting(["valid_seen", "valid_unseen"], "the splits each evaluation plays")
    eval_temperature: float = setting(0.0, "the evaluations sample like this ([model] may hold a teacher's sampling)")
    eval_stage_banks: bool = setting(
        True,
        (
            "each evaluation starts from the Experience bank its weights were trained alongside, where this "
            "workspace has it: collect's (the teacher's) for base and sft, grpo's for grpo; false: [eval] bank "
            "for all"
        ),
    )
    model_size: str = setting("small", "the model stage builds this size at sft.model when nothing is there")
    export_from: str = setting("grpo", "the weights export merges: grpo or sft")
    export_dtype: str = setting("bf16", "the exported weights' dtype: bf16 or fp32")


@dataclass
class Recipe:
    """A whole experiment's settings, one field per TOML section."""

    env: EnvConfig = section(EnvConfig)
    harness: HarnessConfig = section(HarnessConfig)
    expert: ExpertConfig = section(ExpertConfig)
    model: ModelConfig = section(ModelConfig)
    collect: CollectConfig = section(CollectConfig)
    refine: RefineConfig = section(RefineConfig)
    sft: SftConfig = section(SftConfig)
    eval: EvalConfig = section(EvalConfig)
    grpo: GrpoConfig = section(GrpoConfig)
    run: RunConfig = section(RunConfig)
