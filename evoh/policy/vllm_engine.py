"""Rollout generation through vLLM for GRPO on a GPU node.

The base model is loaded into vLLM once; before each update's rollouts the trainer saves its adapter
and hands it over as a LoRA request under a new id, so vLLM never serves a stale copy. Only token ids
come back: the trainer recomputes every log-prob with its own forward pass, so the loss never mixes
two engines' numerics. Requires the ``vllm`` package and CUDA; adapters that train the embeddings in
full (``modules_to_save``) cannot be served as LoRA and stay on transformers.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

import orjson

from evoh.config import ModelConfig
from evoh.errors import EvohError
from evoh.harness.episode import TurnTokens, TurnView
from evoh.policy.base import Completion
from evoh.policy.local import STOP, chat_prompt

log = logging.getLogger(__name__)


def can_serve(adapter: Path | None, guided: bool = False) -> tuple[bool, str]:
    """Whether vLLM can generate for this run here, and if not, why."""
    import torch

    if guided:
        return False, "model.guided decodes under evoh's turn grammar, which runs in transformers' generate"
    if importlib.util.find_spec("vllm") is None:
        return False, "the vllm package is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA device is visible"
    if adapter is not None and (adapter / "adapter_config.json").exists():
        if orjson.loads((adapter / "adapter_config.json").read_bytes()).get("modules_to_save"):
            return False, "the adapter trains embeddings in full, which vLLM cannot serve as LoRA"
    return True, ""


def choose_generator(wanted: str, adapter: Path | None, guided: bool = False) -> str:
    """``auto`` takes vLLM where it can serve the run, else transformers; an explicit ``vllm`` must be possible."""
    ok, why = can_serve(adapter, guided)
    if wanted == "vllm" and not ok:
        fix = "set model.guided = false to generate with vLLM" if guided else "install vllm on a CUDA node"
        raise EvohError(f"grpo.generator = vllm, but {why}", hint=f"{fix}, or set grpo.generator = auto")
    if wanted == "auto" and not ok:
        log.info("rollouts through transformers: %s", why)
    return "vllm" if wanted in ("auto", "vllm") and ok else "transformers"


class VllmPolicy:
    """The same interface as LocalPolicy (with ``keep_tokens``), generating with vLLM and a LoRA request."""

    def __init__(self, base: Path, tokenizer, config: ModelConfig, seed: int, lora_rank: int, memory: float) -> None:
        from vllm import LLM

        self.config = config
        self.seed = seed
        self.tokenizer = tokenizer
        self.llm = LLM(
            model=str(base),
            tokenizer=str(base),
            enable_lora=True,
            max_lora_rank=lora_rank,
            max_loras=1,
            gpu_memory_utilization=memory,
            seed=seed,
            enable_prefix_caching=True,
        )
        self.lora = None

    def use_adapter(self, path: Path, version: int) -> None:
        from vllm.lora.request import LoRARequest

        self.lora = LoRARequest(f"evoh-{version}", version, str(path))

    def identity(self) -> dict[str, Any]:
        c = self.config
        return {
            "policy": "vllm",
            "model": c.model,
            "sampling": {"temperature": c.temperature, "top_p": c.top_p, "max_tokens": c.max_tokens, "seed": self.seed},
        }

    def forget(self, key: Any) -> None:
        """Nothing is kept per episode: a completion carries its own tokens."""

    def act(self, views: list[TurnView], temperature: float | None = None, keep: bool | None = None) -> list[Completion]:
        """Responses at the configured sampling, or at ``temperature``; they carry their tokens for training unless
        ``keep`` says otherwise (by default only at the configured sampling)."""
        from vllm import SamplingParams

        c = self.config
        params = SamplingParams(
            temperature=c.temperature if temperature is None else temperature,
            top_p=c.top_p,
            max_tokens=c.max_tokens,
            stop=[STOP],
            include_stop_str_in_output=True,
        )
        outputs = self.llm.generate(
            [chat_prompt(self.tokenizer, v) for v in views], params, lora_request=self.lora, use_tqdm=False
        )
        completions = []
        for view, out in zip(views, outputs, strict=True):
            produced = list(out.outputs[0].token_ids)
            kept = temperature is None if keep is None else keep
            tokens = TurnTokens(list(out.prompt_token_ids), produced) if kept else None
            completions.append(
                Completion(
                    out.outputs[0].text, prompt_tokens=len(out.prompt_token_ids), completion_tokens=len(produced), tokens=tokens
                )
            )
        return completions


class GreedyView:
    """The vLLM policy answering greedily: for validation, without tokens, or (``keep_tokens``) for the greedy
    rollout of each GRPO group, whose turns train like the sampled ones."""

    def __init__(self, policy: VllmPolicy, keep_tokens: bool = False) -> None:
        self.policy = policy
        self.keep_tokens = keep_tokens

    def identity(self) -> dict[str, Any]:
        return {**self.policy.identity(), "sampling": {"temperature": 0.0}}

    def forget(self, key: Any) -> None:
        """Nothing is kept per episode."""

    def act(self, views: list[TurnView]) -> list[Completion]:
        return self.policy.act(views, temperature=0.0, keep=self.keep_tokens)
