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
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import shutil
import time
import warnings
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any

import orjson

from evoh.config import GrpoConfig, ModelConfig, Recipe, recipe_dict
from evoh.env.types import Task
from evoh.errors import EvohError
from evoh.harness.episode import EpisodeSettings, TurnTokens
from evoh.harness.experience import Bank, consolidate
from evoh.harness.reward import REWARD_PARTS, REWARD_VERSION, reward
from evoh.harness.turns import META_VERBS
from evoh.memory import release_freed_memory
from evoh.objective import (
    clipped_policy_loss,
    group_advantages,
    groups_to_train,
    kl_k3,
    loss_weights,
    restrict_logits,
    rollouts_to_train,
    token_logprobs,
)
from evoh.policy.guided import Allowed, Vocabulary
from evoh.rollout import rollout
from evoh.stages.episodes import bank_input, episode_settings, resolve_bank
from evoh.stages.summary import summarize
from evoh.workspace import Workspace, atomic_write_bytes, atomic_write_json, file_sha256, read_jsonl, weights_identity

STAGE = "grpo"
REFERENCE = "reference"
TOKEN_FIGURES = ("loss", "pg_loss", "kl", "kl_capped", "clip_fraction", "entropy", "ratio")  # means over trained tokens
log = logging.getLogger(__name__)


@dataclass
class Sample:
    """One turn to train on: the prompt and the sampled response tokens, with its episode's advantage."""

    prompt: list[int]
    completion: list[int]
    advantage: float
    choices: dict[int, Allowed] = field(default_factory=dict)  # guided decoding: position -> what guidance allowed there
    episode: Hashable = None  # the rollout it comes from (loss_aggregation = "episode" weighs by it)
    old_logp: Any = None  # log-probs of the rollout policy, when the weights move within an update
    ref_logp: Any = None


@dataclass
class Callbacks:
    on_start: Callable[[int, int], None] | None = None  # (updates in all, already done)
    on_update: Callable[[dict[str, Any]], None] | None = None


# -- the starting point -------------------------------------------------------------------------------


def starting_point(recipe: Recipe, workspace: Workspace) -> tuple[Path, Path | None]:
    """(base model directory, adapter to continue or None)."""
    from evoh.stages.sft import trained_weights

    g = recipe.grpo
    if g.start == "sft":
        base, adapter = trained_weights(workspace, "sft")  # a fully fine-tuned model gets a fresh adapter
        base = Path(g.model) if g.model else base
    else:
        if not g.model:
            raise EvohError("grpo.start = 'none' needs a base model", hint="pass --model DIR (an exported SFT model, or evoh model init's)")
        base, adapter = Path(g.model), None
    if not (base / "config.json").exists():
        raise EvohError(f"{base} is not a model directory", hint="pass --model DIR")
    return base, adapter


def load_trainable(base: Path, adapter: Path | None, g: GrpoConfig, device: str, reference: bool, bf16_weights: bool = False):
    """(tokenizer, PEFT model) with the ``default`` adapter trainable and, with ``reference`` (for the KL penalty or
    the drift measure), a frozen copy of the adapter it continues."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if bf16_weights else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype).to(device)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, adapter, is_trainable=True)
        if reference:
            model.load_adapter(adapter, adapter_name=REFERENCE, is_trainable=False)
            model.set_adapter("default")
    else:
        target = "all-linear" if g.target == "all-linear" else [t.strip() for t in g.target.split(",")]
        model = get_peft_model(model, LoraConfig(r=g.lora_r, lora_alpha=g.lora_alpha, lora_dropout=0.0, target_modules=target, task_type="CAUSAL_LM"))
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0  # the ratio must compare the same function at rollout and at training time
    if g.gradient_checkpointing and cuda:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.eval()
    return tokenizer, model


@contextlib.contextmanager
def reference_policy(model) -> Iterator[None]:
    """Within this block the model computes the reference policy."""
    if REFERENCE in model.peft_config:
        model.set_adapter(REFERENCE, inference_mode=True)
        try:
            yield
        finally:
            model.set_adapter("default")
    else:
        with model.disable_adapter():
            yield


# -- the maths over token sequences ---------------------------------------------------------------------


def micro_batches(samples: list[Sample], token_budget: int) -> list[list[Sample]]:
    """Samples sorted by length and packed so that each batch's padded size stays within the budget."""
    ordered = sorted(samples, key=lambda s: len(s.prompt) + len(s.completion))
    batches: list[list[Sample]] = []
    current: list[Sample] = []
    for sample in ordered:
        length = len(sample.prompt) + len(sample.completion)
        if current and length * (len(current) + 1) > token_budget:
            batches.append(current)
            current = []
        current.append(sample)
    if current:
        batches.append(current)
    return batches


def guided_restriction(batch: list[Sample], vocabulary: Vocabulary | None, device="cpu"):
    """What guidance allowed at the batch's guided tokens, in ``forward_logprobs``' layout and on ``device``:
    (rows, columns, allowed [N, V]), or None when no token was guided. Built once per micro-batch and shared by
    the passes over it; not kept on the Sample, where a Qwen-sized vocabulary would cost ~150 kB per guided token."""
    import torch

    width = max(len(s.completion) for s in batch)
    guided = [(row, width - len(s.completion) + at, allowed) for row, s in enumerate(batch) for at, allowed in s.choices.items()]
    if not guided:
        return None
    if vocabulary is None:
        raise ValueError("guided samples need the guided policy's vocabulary to be scored")
    rows, columns, allowed = zip(*guided, strict=True)
    return torch.tensor(rows, device=device), torch.tensor(columns, device=device), vocabulary.allowed_matrix(allowed).to(device)


def forward_logprobs(model, batch: list[Sample], pad_id: int, temperature: float, device, restriction=None):
    """Log-probs and entropies of each sample's completion tokens: (logp, entropy, mask), each [B, C]. Samples
    decoded under guidance are scored over what it allowed at each token (``restriction``, from
    ``guided_restriction`` on the same batch and device)."""
    logits, targets, mask = completion_logits(model, batch, pad_id, device)
    if restriction is not None:
        rows, columns, allowed = restriction
        logits = restrict_logits(logits, rows, columns, allowed[:, : logits.shape[-1]])
    logp, entropy = token_logprobs(logits, targets, temperature)
    return logp, entropy, mask


def completion_logits(model, batch: list[Sample], pad_id: int, device):
    """The logits before each sample's completion tokens, those tokens and their mask: ([B, C, V], [B, C], [B, C]).

    Rows are left-padded so every completion ends at the last position and only the last C+1 logits
    are computed (C the longest completion): the prompt's vocabulary-sized logits never exist.
    """
    import torch

    longest = max(len(s.prompt) + len(s.completion) for s in batch)
    width = max(len(s.completion) for s in batch)
    ids = torch.full((len(batch), longest), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), longest), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.bool)
    for row, s in enumerate(batch):
        sequence = s.prompt + s.completion
        ids[row, longest - len(sequence) :] = torch.tensor(sequence)
        attention[row, longest - len(sequence) :] = 1
        mask[row, width - len(s.completion) :] = True
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    ids, attention, positions, mask = ids.to(device), attention.to(device), positions.to(device), mask.to(device)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, logits_to_keep=width + 1).logits[:, :-1]
    return logits, ids[:, -width:], mask


def _pad_rows(values: list[Any], width: int, device):
    """Per-sample 1-D tensors right-aligned into [B, width] (the layout of ``forward_logprobs``)."""
    import torch

    out = torch.zeros((len(values), width), device=device)
    for row, v in enumerate(values):
        out[row, width - v.shape[0] :] = v.to(device)
    return out


def score_samples(model, samples: list[Sample], g: GrpoConfig, pad_id: int, device, old: bool, ref: bool, vocabulary: Vocabulary | None = None) -> None:
    """Fill in the rollout policy's and/or the reference's log-probs before any weight moves."""
    import torch

    if not samples or not (old or ref):
        return
    with torch.no_grad():
        for batch in micro_batches(samples, g.micro_batch_tokens):
            restriction = guided_restriction(batch, vocabulary, device)
            if old:
                logp, _, mask = forward_logprobs(model, batch, pad_id, g.temperature, device, restriction)
                for row, s in enumerate(batch):
                    s.old_logp = logp[row][mask[row]].cpu()
            if ref:
                with reference_policy(model):
                    logp, _, mask = forward_logprobs(model, batch, pad_id, g.temperature, device, restriction)
                for row, s in enumerate(batch):
                    s.ref_logp = logp[row][mask[row]].cpu()


def sft_examples_file(workspace: Workspace) -> Path:
    """refine's training examples, the anchor of ``grpo.sft_weight``; refused before anything loads when absent."""
    path = workspace.path("refine") / "train.jsonl"
    if not path.exists():
        raise EvohError(f"grpo.sft_weight needs the SFT examples at {path}", hint="run `evoh refine` first, or set grpo.sft_weight = 0")
    return path


def sft_examples(path: Path, tokenizer, limit: int = 0) -> list[Sample]:
    """SFT examples (chat messages ending with the response) as (prompt, response) token ids, encoded as the
    rollouts' turns are; with ``limit``, that many spread evenly over the file (its episodes' turns follow each
    other). Examples whose response does not extend their prompt are left out."""
    rows = read_jsonl(path).records
    if limit and len(rows) > limit:
        rows = [rows[i * len(rows) // limit] for i in range(limit)]
    examples = []
    for row in rows:
        messages = row["messages"]
        prompt = tokenizer(tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
        whole = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False)["input_ids"]
        if len(whole) > len(prompt) and whole[: len(prompt)] == prompt:  # the response extends its prompt token for token
            examples.append(Sample(prompt, whole[len(prompt) :], 0.0))
    return examples


def sft_loss(accelerator, model, examples: list[Sample], g: GrpoConfig, pad_id: int) -> float:
    """Backward of ``sft_weight`` × the mean negative log-likelihood of the examples' response tokens (at
    temperature 1, unguided, as stage one trained them), left unsynchronised for the step's last policy
    micro-batch to all-reduce; returns that mean."""
    nll, tokens = 0.0, sum(len(s.completion) for s in examples)
    with accelerator.no_sync(model):
        for batch in micro_batches(examples, g.micro_batch_tokens):
            logp, _, mask = forward_logprobs(model, batch, pad_id, 1.0, accelerator.device)
            total = -(logp * mask).sum()
            accelerator.backward(total * (g.sft_weight / tokens))
            nll += float(total.detach())
    return nll / tokens


def policy_drift(accelerator, model, examples: list[Sample], g: GrpoConfig, pad_id: int) -> dict[str, float]:
    """How far the policy has moved from the reference on responses it was not trained on (refine's held-out
    examples, shared among the processes): the mean KL(policy ‖ reference) per response token over the whole
    vocabulary, and the share of those tokens whose most likely next token changed. Greedy play follows the
    second: on the CPU recipe, random steps that changed 0.06% of them changed 20 of 32 evaluation episodes."""
    import torch

    kl, flips, tokens = 0.0, 0.0, 0.0
    mine = examples[accelerator.process_index :: accelerator.num_processes]
    with torch.no_grad(), accelerator.autocast():
        for batch in micro_batches(mine, g.micro_batch_tokens):
            with reference_policy(model):
                reference = completion_logits(model, batch, pad_id, accelerator.device)[0].float().log_softmax(-1)
            logits, _, mask = completion_logits(model, batch, pad_id, accelerator.device)
            logp = logits.float().log_softmax(-1)
            del logits
            kl += float(((logp.exp() * (logp - reference)).sum(-1) * mask).sum())
            flips += float(((logp.argmax(-1) != reference.argmax(-1)) & mask).sum())
            tokens += float(mask.sum())
    kl, flips, tokens = (_reduce(accelerator, x, "sum") for x in (kl, flips, tokens))
    return {"kl": kl / max(tokens, 1.0), "flips": flips / max(tokens, 1.0), "tokens": int(tokens)}


def optimise(
    accelerator, model, optimizer, scheduler, samples: list[Sample], g: GrpoConfig, pad_id: int, seed: int,
    vocabulary: Vocabulary | None = None, anchor: list[Sample] | None = None,
) -> dict[str, float | None]:
    """``minibatches`` optimizer steps over the update's samples; the loss averaged over tokens or episodes
    (``loss_aggregation``), gradient accumulation over micro-batches, clipping; with ``anchor`` (SFT examples),
    ``grpo.sft_weight`` × their loss joins each step. Every process makes the same number of steps and one
    synchronised backward each; none when no process has a sample (Adam's momentum would move the weights even
    on a zero gradient)."""
    import torch

    if _reduce(accelerator, len(samples), "sum") == 0:  # nothing to learn from (grpo.train_groups, grpo.train_rollouts)
        with warnings.catch_warnings():  # the schedule stays a function of the update: it advances as if stepped
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            for _ in range(g.minibatches):
                scheduler.step()
        return {**dict.fromkeys((*TOKEN_FIGURES, "grad_norm", "sft_loss")), "lr": scheduler.get_last_lr()[0]}
    unwrapped = accelerator.unwrap_model(model)
    device = accelerator.device
    order = list(range(len(samples)))
    random.Random(seed).shuffle(order)
    parts = [[samples[i] for i in order[k :: g.minibatches]] for k in range(g.minibatches)]
    for step, part in enumerate(parts):  # the first step's weights are the rollout policy's: its samples need no stored log-probs
        score_samples(unwrapped, part, g, pad_id, device, old=step > 0, ref=g.kl > 0, vocabulary=vocabulary)
    model.train()  # dropout is off (load_trainable): train mode only lets gradient checkpointing engage
    totals = dict.fromkeys(TOKEN_FIGURES, 0.0)
    tokens_trained = 0.0
    grad_norms, anchor_losses = [], []
    for step, part in enumerate(parts):
        if anchor and g.sft_weight > 0:
            drawn = random.Random(seed * 7 + step).sample(anchor, min(g.sft_examples, len(anchor)))
            anchor_losses.append(sft_loss(accelerator, model, drawn, g, pad_id))
        weights, units = loss_weights([len(s.completion) for s in part], [s.episode for s in part], g.loss_aggregation)
        scale = accelerator.num_processes / max(_reduce(accelerator, units, "sum"), 1.0)  # DDP averages gradients over processes
        batches = micro_batches(part, g.micro_batch_tokens) or [[]]
        for index, batch in enumerate(batches):
            last = index == len(batches) - 1
            with contextlib.nullcontext() if last else accelerator.no_sync(model):
                if not batch:  # nothing to learn here this step; still join the gradient all-reduce
                    dummy = torch.tensor([[pad_id]], device=device)
                    loss = model(input_ids=dummy).logits.sum() * 0.0
                    accelerator.backward(loss)
                    continue
                restriction = guided_restriction(batch, vocabulary, device)
                logp, entropy, mask = forward_logprobs(model, batch, pad_id, g.temperature, device, restriction)
                width = mask.shape[1]
                advantages = torch.tensor([s.advantage for s in batch], device=device).unsqueeze(1)
                old = _pad_rows([s.old_logp for s in batch], width, device) if step > 0 else logp.detach()
                pg, clipped = clipped_policy_loss(logp, old, advantages, g.clip_low, g.clip_high)
                per_token = pg
                if g.kl > 0:
                    kl = kl_k3(logp, _pad_rows([s.ref_logp for s in batch], width, device), g.kl_cap)
                    per_token = pg + g.kl * kl
                    totals["kl"] += float((kl.detach() * mask).sum())
                    totals["kl_capped"] += float(((kl.detach() >= g.kl_cap) & mask).sum()) if g.kl_cap > 0 else 0.0
                weight = torch.tensor([weights[s.episode] for s in batch], device=device).unsqueeze(1)
                loss = (per_token * mask * weight).sum() * scale
                accelerator.backward(loss)
                totals["loss"] += float((per_token.detach() * mask).sum())
                totals["pg_loss"] += float((pg.detach() * mask).sum())
                totals["clip_fraction"] += float((clipped & mask).sum())
                totals["entropy"] += float((entropy * mask).sum())
                totals["ratio"] += float((torch.exp(logp.detach() - old) * mask).sum())
                tokens_trained += float(mask.sum())
        norm = accelerator.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], g.max_grad_norm)
        grad_norms.append(float(norm))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    model.eval()
    stats: dict[str, float | None] = {k: v / max(tokens_trained, 1.0) for k, v in totals.items()}
    stats["grad_norm"] = fmean(grad_norms) if grad_norms else 0.0
    stats["sft_loss"] = _reduce(accelerator, fmean(anchor_losses)) if anchor_losses else None
    stats["lr"] = scheduler.get_last_lr()[0]
    return stats


# -- rollouts and their figures -------------------------------------------------------------------------


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


def tasks_for_update(tasks: list[Task], update: int, g: GrpoConfig) -> list[Task]:
    """The T games of update ``u``: a function of (seed, u) only, so a resumed run draws the same ones."""
    rng = random.Random(f"{g.seed}:{update}")
    return rng.sample(tasks, min(g.tasks_per_update, len(tasks)))


def episode_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Success and harness usage of a set of episodes, as training rollouts and validation both report them."""
    summary = summarize(records)
    return {
        "episodes": summary["episodes"],
        "errors": summary["errors"],
        "success": summary["success"],
        "meta_actions": summary["meta_actions"],
        "meta_actions_won": summary["meta_actions_won"],
        "meta_per_episode": {v: summary["meta_per_episode"][v]["attempted"] for v in META_VERBS},
        "meta_idle": summary["meta_idle"],
        "revisits": summary["revisits"],
        "invalid_rate": summary["invalid_rate"],
        "env_steps": summary["env_steps"],
        "turns": summary["turns"],
    }


def rollout_figures(records: list[dict[str, Any]], rewards: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-update metrics that describe the episodes: success, reward and its parts, harness usage."""
    totals = [r["total"] for r in rewards]
    return {
        **episode_figures(records),
        "reward_mean": fmean(totals) if totals else 0.0,
        "reward_std": pstdev(totals) if totals else 0.0,
        "reward": {k: fmean(r[k] for r in rewards) if rewards else 0.0 for k in REWARD_PARTS},
        "lambda_div": rewards[0]["lambda_div"] if rewards else None,
        "prompt_tokens": sum(r.get("usage", {}).get("prompt_tokens", 0) for r in records),
        "completion_tokens": sum(r.get("usage", {}).get("completion_tokens", 0) for r in records),
    }


def _gather(accelerator, items: list[Any]) -> list[Any]:
    if accelerator.num_processes == 1:
        return items
    from accelerate.utils import gather_object

    return list(gather_object(items))


# -- checkpoints ----------------------------------------------------------------------------------------


def _checkpoint_dir(directory: Path, update: int) -> Path:
    return directory / "checkpoints" / f"step_{update:06d}"


def latest_checkpoint(directory: Path) -> Path | None:
    found = sorted(p for p in (directory / "checkpoints").glob("step_*") if (p / "state.json").exists())
    return found[-1] if found else None


def rollout_settings(recipe: Recipe) -> EpisodeSettings:
    """How a training rollout plays: the recipe's episodes at ``grpo.max_steps``, every harness call spending a step."""
    return dataclasses.replace(episode_settings(recipe), max_steps=recipe.grpo.max_steps, charge_meta_actions=True)


def rollout_sampling(recipe: Recipe, model: str) -> ModelConfig:
    """How a training rollout samples from ``model``: grpo's temperature, top-p and token cap, the recipe's batch
    and guidance."""
    g = recipe.grpo
    return ModelConfig(
        model=model, temperature=g.temperature, top_p=g.top_p, max_tokens=g.max_tokens, batch_size=recipe.model.batch_size, guided=recipe.model.guided,
    )


def build_optimizer(parameters: list[Any], g: GrpoConfig) -> Any:
    """``grpo.optimizer``: AdamW, or plain SGD, whose step is the clipped gradient times lr."""
    import torch

    if g.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=g.lr)
    return torch.optim.AdamW(parameters, lr=g.lr)


def save_checkpoint(accelerator, model, optimizer, scheduler, bank: Bank, directory: Path, update: int) -> None:
    """Everything ``--resume`` needs to continue exactly: adapter, optimizer, scheduler, RNG states, bank, counter."""
    import numpy as np
    import torch

    target = _checkpoint_dir(directory, update)
    target.mkdir(parents=True, exist_ok=True)
    rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, target / f"rng_rank{accelerator.process_index}.pt")
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save_pretrained(target / "adapter", selected_adapters=["default"], safe_serialization=True)
        torch.save(optimizer.state_dict(), target / "optimizer.pt")
        torch.save(scheduler.state_dict(), target / "scheduler.pt")
        bank.save(target / "bank.json")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic_write_json(target / "state.json", {"update": update})  # last: its presence means complete


def load_checkpoint(accelerator, model, optimizer, scheduler, target: Path) -> tuple[int, Bank]:
    import numpy as np
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(target / "adapter" / "adapter_model.safetensors", device=str(accelerator.device))
    set_peft_model_state_dict(accelerator.unwrap_model(model), weights, adapter_name="default")
    optimizer.load_state_dict(torch.load(target / "optimizer.pt", weights_only=False))
    scheduler.load_state_dict(torch.load(target / "scheduler.pt", weights_only=False))
    rng_file = target / f"rng_rank{accelerator.process_index}.pt"
    if not rng_file.exists():
        raise EvohError(f"{target} was saved by fewer processes than run now", hint="resume with the same number of processes")
    rng = torch.load(rng_file, weights_only=False)
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    return int(orjson.loads((target / "state.json").read_bytes())["update"]), Bank.load(target / "bank.json")


def _keep_lines_before(path: Path, update: int) -> None:
    """Drop what updates at or after ``update`` wrote (a resumed run writes them again)."""
    if path.exists():
        kept = [r for r in read_jsonl(path).records if r["update"] < update]
        atomic_write_bytes(path, b"".join(orjson.dumps(r) + b"\n" for r in kept))


# -- the stage ------------------------------------------------------------------------------------------


def check_settings(recipe: Recipe) -> None:
    """Refuse settings the run cannot use before anything loads (`evoh run` calls it before its first stage)."""
    from evoh.env.games import task_type_names

    g = recipe.grpo
    task_type_names(g.task_types)  # a misspelt type fails now, not when the draw comes up empty
    if g.temperature <= 0:
        raise EvohError("grpo.temperature must be above 0: GRPO learns from sampled rollouts", hint="use 1.0 (the default)")
    if g.group_size < 2:
        raise EvohError("grpo.group_size must be at least 2: advantages compare rollouts of the same game", hint="use 8 (the paper's)")
    if g.sft_weight < 0 or g.sft_examples < 1:
        raise EvohError("grpo.sft_weight must be at least 0 and grpo.sft_examples at least 1", hint="use sft_weight = 0 (off) or e.g. 0.1 with 8 examples")
    if g.minibatches < 1 or g.updates < 1 or g.tasks_per_update < 1:
        raise EvohError("grpo.updates, tasks_per_update and minibatches must be at least 1", hint="fix the recipe or --set")


def run(recipe: Recipe, workspace: Workspace, resume: bool = False, callbacks: Callbacks | None = None) -> dict[str, Any]:
    check_settings(recipe)
    g = recipe.grpo
    callbacks = callbacks or Callbacks()
    base, start_adapter = starting_point(recipe, workspace)
    bank_path = resolve_bank(g.bank, workspace, STAGE)
    anchor_path = sft_examples_file(workspace) if g.sft_weight > 0 else None
    heldout_file = workspace.path("refine") / "val.jsonl"  # the drift's examples, where the workspace has them
    heldout_path = heldout_file if g.val_every and g.drift_examples and heldout_file.exists() else None

    import torch
    from accelerate import Accelerator
    from transformers import get_scheduler

    from evoh import __version__
    from evoh.env.world import data_input, load_games, open_pool
    from evoh.policy.local import LocalPolicy, training_precision
    from evoh.policy.vllm_engine import choose_generator

    cuda = torch.cuda.is_available()
    precision = training_precision(g.precision, cuda, "grpo")
    # on a CPU, bf16 is autocast: the prepared model's forward runs under it, and so do the rollouts below
    accelerator = Accelerator(cpu=not cuda, mixed_precision="bf16" if precision == "bf16" and not cuda else None)
    if accelerator.distributed_type.name == "DEEPSPEED":
        # DeepSpeed steps the optimizer inside backward at a fixed accumulation count; an update here packs
        # a varying number of micro-batches, so its gradients would be stepped at the wrong boundaries
        raise EvohError("evoh grpo does not run under DeepSpeed", hint="launch it with recipes/accelerate/ddp-8gpu.yaml (DDP) instead")
    main = accelerator.is_main_process
    data = data_input(recipe.env)
    tasks = load_games(recipe.env, g.split, g.limit or None, types=g.task_types)
    val_tasks = load_games(recipe.env, g.val_split, g.val_limit or None, spread=True) if g.val_every else []
    train_settings = rollout_settings(recipe)
    val_settings = episode_settings(recipe)  # the published evaluation protocol, as `evoh eval` plays it

    directory = workspace.path(STAGE)
    if main and latest_checkpoint(directory) is not None and not resume:
        raise EvohError(f"{directory / 'checkpoints'} holds checkpoints of an earlier run", hint="pass --resume to continue it, or delete the grpo/ folder")
    lock = workspace.writing(STAGE) if main else contextlib.nullcontext(directory)
    started = time.time()
    with lock:
        torch.manual_seed(g.seed + accelerator.process_index)
        random.seed(g.seed + accelerator.process_index)
        tokenizer, model = load_trainable(base, start_adapter, g, str(accelerator.device), reference=g.kl > 0 or heldout_path is not None, bf16_weights=precision == "bf16" and cuda)
        optimizer = build_optimizer([p for p in model.parameters() if p.requires_grad], g)
        scheduler = get_scheduler(g.scheduler, optimizer, num_warmup_steps=g.warmup_updates * g.minibatches, num_training_steps=g.updates * g.minibatches)
        model, optimizer = accelerator.prepare(model, optimizer)  # the scheduler stays ours: one step per optimizer step
        unwrapped = accelerator.unwrap_model(model)
        pad_id = tokenizer.pad_token_id

        update, bank = 0, Bank.load(bank_path) if bank_path else Bank()
        checkpoint = latest_checkpoint(directory) if resume else None
        if checkpoint is not None:
            update, bank = load_checkpoint(accelerator, model, optimizer, scheduler, checkpoint)
        if main:
            for name in ("metrics.jsonl", "rollouts.jsonl"):
                _keep_lines_before(directory / name, update)
            _keep_lines_before(directory / "validation.jsonl", update + 1 if checkpoint else 0)
        if callbacks.on_start:
            callbacks.on_start(g.updates, update)

        sampling = rollout_sampling(recipe, str(base))
        generator = choose_generator(g.generator, start_adapter, guided=sampling.guided)
        if generator == "vllm":
            from evoh.policy.vllm_engine import GreedyView, VllmPolicy

            policy = VllmPolicy(base, tokenizer, sampling, g.seed + accelerator.process_index, unwrapped.peft_config["default"].r, g.vllm_memory)
            greedy = GreedyView(policy)
        else:
            policy = LocalPolicy(sampling, g.seed, loaded=(tokenizer, unwrapped), keep_tokens=True)
            greedy = LocalPolicy(dataclasses.replace(sampling, temperature=0.0, max_tokens=recipe.model.max_tokens), g.seed, loaded=(tokenizer, unwrapped))
        vocabulary = policy.vocabulary if sampling.guided else None  # the guided policy's token sets, for its log-probs
        anchor = sft_examples(anchor_path, tokenizer) if anchor_path else None
        if anchor_path and not anchor:
            raise EvohError(f"no example in {anchor_path} ends with a response the chat template appends to its prompt", hint="set grpo.sft_weight = 0")
        heldout = sft_examples(heldout_path, tokenizer, g.drift_examples) if heldout_path else []
        rollout_policy = policy
        if g.greedy_rollout:  # at the rollouts' response cap, keeping its turns to train on
            greedy_rollouts = (
                GreedyView(policy, keep_tokens=True) if generator == "vllm"
                else LocalPolicy(dataclasses.replace(sampling, temperature=0.0), g.seed, loaded=(tokenizer, unwrapped), keep_tokens=True)
            )
            rollout_policy = GroupPolicy(policy, greedy_rollouts, g)
        versions = iter(range(1, 1 << 30))

        def sync_generator() -> None:
            """vLLM serves a copy of the weights: hand it the adapter as it is now (transformers shares the model)."""
            if generator == "vllm":
                current = directory / f"rollout_adapter_rank{accelerator.process_index}"
                unwrapped.save_pretrained(current, selected_adapters=["default"], safe_serialization=True)
                policy.use_adapter(current, next(versions))

        metrics: dict[str, Any] = {}

        def validate_and_log(done: int) -> dict[str, Any]:
            sync_generator()
            figures = {"update": done, **validate(accelerator, greedy, pool, val_tasks, val_settings, bank)}
            figures["drift"] = policy_drift(accelerator, unwrapped, heldout, g, pad_id) if heldout else None
            if main:
                _append(directory / "validation.jsonl", [figures])
            return figures

        with open_pool(recipe.env, max(g.max_steps, recipe.env.max_steps)) as pool:
            if g.val_every and update == 0:
                validate_and_log(0)  # the starting policy, for the curve's first point
            while update < g.updates:
                tick = time.time()
                sync_generator()
                played, rewards, samples, groups, scores = play_update(accelerator, rollout_policy, pool, train_settings, bank, tasks, update, g)
                rollout_seconds = time.time() - tick
                tick = time.time()
                stats = optimise(accelerator, model, optimizer, scheduler, samples, g, pad_id, g.seed * 100_003 + update, vocabulary, anchor)
                seconds = {"rollout_seconds": rollout_seconds, "update_seconds": time.time() - tick}
                release_freed_memory()  # the optimisation's activations, before validation plays on
                records = _gather(accelerator, [r for _, r in played])
                bank, _ = consolidate(bank, [r for r in records if not r.get("error")])
                metrics = update_metrics(accelerator, update, records, rewards, (len(samples), groups), stats, seconds)
                if g.greedy_rollout:  # the games as evaluation would play them, before this update's step
                    metrics["greedy"] = episode_figures(_gather(accelerator, [r for key, r in played if is_greedy_rollout(key, g)]))
                slim = _gather(accelerator, [episode_line(update, key, r, scores.get(key, {}), is_greedy_rollout(key, g)) for key, r in played])
                update += 1
                if g.val_every and (update % g.val_every == 0 or update == g.updates):
                    metrics["validation"] = validate_and_log(update)
                if main:
                    _append(directory / "metrics.jsonl", [metrics])
                    _append(directory / "rollouts.jsonl", slim)
                if update % g.save_every == 0 or update == g.updates:
                    save_checkpoint(accelerator, model, optimizer, scheduler, bank, directory, update)
                if callbacks.on_update:
                    callbacks.on_update(metrics)
                release_freed_memory()  # every update's tensors differ in size: without the trims, resident memory only grows

        result = {"updates": update, "final": metrics, "seconds": time.time() - started}
        if main:
            adapter = directory / "adapter"
            if adapter.exists():
                shutil.rmtree(adapter)
            unwrapped.save_pretrained(adapter, selected_adapters=["default"], safe_serialization=True)
            tokenizer.save_pretrained(adapter)
            bank.save(directory / "bank.json")
            workspace.finish(
                STAGE,
                {
                    "config": recipe_dict(recipe)["grpo"],
                    "protocol": {**train_settings.protocol(), "reward": REWARD_VERSION},
                    "base_model": weights_identity(base),
                    "start_adapter": {"path": str(start_adapter), "sha256": file_sha256(start_adapter / "adapter_model.safetensors")} if start_adapter else None,
                    "start_bank": bank_input(bank_path),
                    "data": data,
                    "processes": accelerator.num_processes,
                    "generator": generator,
                    "guided": sampling.guided,  # model.guided: rollouts and validation decoded under the turn grammar
                    "precision": precision,
                    "evoh_version": __version__,
                    **result,
                },
            )
        accelerator.wait_for_everyone()
    return result


def play_update(accelerator, policy, pool, settings, bank: Bank, tasks: list[Task], update: int, g: GrpoConfig):
    """This process's share of one update's rollouts: (key, record) pairs, their rewards, the turns to train on
    (read from the finished episodes), the number of games trained, and each rollout's reward, advantage and
    whether it was trained (by key)."""
    chosen = tasks_for_update(tasks, update, g)
    mine = chosen[accelerator.process_index :: accelerator.num_processes]
    jobs = [((t.id, k), t) for t in mine for k in range(g.group_size)]
    played: list[tuple[tuple[str, int], dict[str, Any]]] = []
    tokens: dict[tuple[str, int], list[TurnTokens | None]] = {}  # each finished episode's turns, as sampled

    def finished(episode, usage: dict[str, int]) -> None:
        played.append((episode.key, episode.record({"usage": usage})))
        tokens[episode.key] = episode.tokens

    with accelerator.autocast():  # generation runs the inner model, which prepare() did not wrap
        rollout(jobs, policy, pool, settings, bank, finished, max_active=max(1, len(jobs)))
    played.sort(key=lambda pair: pair[0])
    good = [(k, r) for k, r in played if not r.get("error")]  # an engine failure is no evidence about the policy
    rewards = [reward(r, g.reward, update) for _, r in good]
    games = [k[0] for k, _ in good]
    advantages = group_advantages([x["total"] for x in rewards], games, g.std_normalize)
    trained = groups_to_train([r["won"] for _, r in good], games, g.train_groups)
    selected = rollouts_to_train(advantages, g.train_rollouts)
    kept = [key[0] in trained and keep for (key, _), keep in zip(good, selected, strict=True)]
    samples = [
        Sample(t.prompt, t.completion, advantage, t.choices, episode=key)
        for (key, _), advantage, keep in zip(good, advantages, kept, strict=True)
        if keep
        for t in tokens[key]
        if t is not None and t.completion
    ]
    scores = {
        key: {"reward": round(x["total"], 4), "advantage": round(advantage, 4), "trained": keep}
        for (key, _), x, advantage, keep in zip(good, rewards, advantages, kept, strict=True)
    }
    return played, rewards, samples, len(trained), scores


def update_metrics(
    accelerator, update: int, records, rewards, trained: tuple[int, int], stats: dict[str, float | None], seconds: dict[str, float]
) -> dict[str, Any]:
    """One line of metrics.jsonl: the episodes of every process, the optimisation figures averaged over them
    (null when the update made no optimizer step), and how many turns and games it trained on."""
    samples, groups = trained
    return {
        "update": update,
        **rollout_figures(records, _gather(accelerator, [{**x, "weights": None} for x in rewards])),
        **{k: None if v is None else _reduce(accelerator, v) for k, v in stats.items()},
        "samples": int(_reduce(accelerator, samples, "sum")),
        "groups_trained": int(_reduce(accelerator, groups, "sum")),
        **seconds,
    }


def episode_line(update: int, key: tuple[str, int], record: dict[str, Any], score: dict[str, Any], greedy: bool = False) -> dict[str, Any]:
    """One rollout in rollouts.jsonl: which game, whether it was decoded greedily, how it went, what it spent, and
    what the update made of it (its reward, its advantage in its group, whether its turns were trained; absent
    after an engine error)."""
    return {
        "update": update, "task": key[0], "rollout": key[1], "greedy": greedy, "won": record["won"], "error": record.get("error"),
        "turns": record["turns"], "meta": {v: record["meta"][v]["attempted"] for v in META_VERBS},
        "idle_meta": record["idle_meta"], "invalid_actions": record["invalid_actions"],
        "bank": record["bank"],  # the digest of the Experience bank it played with: one per update, frozen
        **score,
    }


def validate(accelerator, policy, pool, tasks: list[Task], settings, bank: Bank) -> dict[str, Any]:
    """Greedy episodes on the validation games under the evaluation protocol, with the bank frozen."""
    played: list[dict[str, Any]] = []
    mine = tasks[accelerator.process_index :: accelerator.num_processes]
    with accelerator.autocast():
        rollout([(t.id, t) for t in mine], policy, pool, settings, bank, lambda e, u: played.append(e.record({"usage": u})), max_active=max(1, len(mine)))
    return episode_figures(_gather(accelerator, played))


def _reduce(accelerator, value: float, op: str = "mean") -> float:
    if accelerator.num_processes == 1:
        return float(value)
    import torch

    return float(accelerator.reduce(torch.tensor(float(value), device=accelerator.device), op))


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "ab") as f:
        for row in rows:
            f.write(orjson.dumps(row) + b"\n")
