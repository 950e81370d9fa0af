"""Generation through an in-process vLLM engine: GRPO's rollouts, and ``--policy vllm`` for collect and eval.

The base model is loaded into vLLM once. For GRPO, before each update's rollouts the trainer saves its adapter
and hands it over as a LoRA request under a new id, so vLLM never serves a stale copy; only token ids come
back, and the trainer recomputes every log-prob with its own forward pass, so the loss never mixes two engines'
numerics. Under ``model.guided`` each turn's grammar (:mod:`evoh.policy.turn_grammar`) goes to vLLM as a
structured-outputs grammar, and for GRPO the masks it applied are rebuilt from the sampled ids, so a guided
token is scored over what was allowed there, as under transformers. ``--policy vllm`` serves a model directory
or Hub id, with ``model.adapter`` as a LoRA request.
Requires the ``vllm`` package and CUDA; adapters that train the embeddings in full (``modules_to_save``)
cannot be served as LoRA and stay on transformers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from pathlib import Path
from typing import Any

import orjson

from evoh.config import ModelConfig
from evoh.errors import EvohError
from evoh.harness.episode import TurnTokens, TurnView
from evoh.models.hub import model_directory
from evoh.policy.base import Completion
from evoh.policy.guided import ActionGrammar
from evoh.policy.local import STOP, chat_prompt, stop_token_ids
from evoh.policy.turn_grammar import GrammarMasks, TurnCompiler, structured_outputs
from evoh.workspace import fingerprint, weights_identity

log = logging.getLogger(__name__)


def can_serve(adapter: Path | None, guided: bool = False) -> tuple[bool, str]:
    """Whether vLLM can generate for this run here, and if not, why."""
    import torch

    if importlib.util.find_spec("vllm") is None:
        return False, "the vllm package is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA device is visible"
    if guided and importlib.util.find_spec("xgrammar") is None:  # to rebuild the masks vLLM applied, for GRPO
        return False, "guided rollouts need xgrammar (pip install 'evoh[grammar]')"
    if adapter is not None and (adapter / "adapter_config.json").exists():
        if orjson.loads((adapter / "adapter_config.json").read_bytes()).get("modules_to_save"):
            return False, "the adapter trains embeddings in full, which vLLM cannot serve as LoRA"
    return True, ""


def choose_generator(wanted: str, adapter: Path | None, guided: bool = False) -> str:
    """``auto`` takes vLLM where it can serve the run, else transformers; an explicit ``vllm`` must be possible.
    Guided rollouts go to vLLM only when asked: its grammar keeps no tokens back for the action, so a response
    that spends ``grpo.max_tokens`` on thought ends without one, where the transformers decoder closes it."""
    if guided and wanted == "auto":
        log.info("rollouts through transformers: guided rollouts use vLLM only with grpo.generator = vllm")
        return "transformers"
    ok, why = can_serve(adapter, guided)
    if wanted == "vllm" and not ok:
        fix = "install evoh[grammar]" if "xgrammar" in why else "install vllm on a CUDA node"
        raise EvohError(f"grpo.generator = vllm, but {why}", hint=f"{fix}, or set grpo.generator = auto")
    if wanted == "auto" and not ok:
        log.info("rollouts through transformers: %s", why)
    return "vllm" if wanted in ("auto", "vllm") and ok else "transformers"


def serving_policy(config: ModelConfig, seed: int) -> VllmPolicy:
    """``--policy vllm``: ``model.model`` (a directory or Hub id) in a vLLM engine, ``model.adapter`` as its LoRA;
    refused with the reason and the fix where vLLM cannot serve it here."""
    adapter = Path(config.adapter) if config.adapter else None
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise EvohError(f"{adapter} is not a PEFT adapter directory", hint="pass the sft/adapter or grpo/adapter folder")
    ok, why = can_serve(adapter)
    if not ok:
        raise EvohError(f"--policy vllm: {why}", hint="play with --policy local, or serve the model (docs/gpu.md, section 6)")
    from transformers import AutoTokenizer

    base = model_directory(config.model, "--model")
    rank = orjson.loads((adapter / "adapter_config.json").read_bytes())["r"] if adapter else 0
    policy = VllmPolicy(base, AutoTokenizer.from_pretrained(base), config, seed, rank, config.vllm_memory, keep_tokens=False)
    if adapter is not None:
        policy.use_adapter(adapter, 1)
    return policy


class VllmPolicy:
    """The same interface as LocalPolicy, generating with vLLM (and a LoRA request when ``lora_rank`` > 0); with
    ``keep_tokens`` (GRPO's rollouts) every completion at the configured sampling carries its token ids."""

    def __init__(
        self, base: Path, tokenizer, config: ModelConfig, seed: int, lora_rank: int, memory: float, keep_tokens: bool = True
    ) -> None:
        from vllm import LLM

        self.config = config
        self.seed = seed
        self.tokenizer = tokenizer
        self.base = Path(base)
        self.keep_tokens = keep_tokens
        lora = {"enable_lora": True, "max_lora_rank": lora_rank, "max_loras": 1} if lora_rank > 0 else {}
        self.llm = LLM(
            model=str(base),
            tokenizer=str(base),
            gpu_memory_utilization=memory,
            seed=seed,
            enable_prefix_caching=True,
            **lora,
        )
        self.lora = None
        self.adapter: Path | None = None
        self._masks: GrammarMasks | None = None
        self._hashed: tuple[Any, dict[str, str | None]] | None = None  # (the LoRA request hashed, its hashes)

    @property
    def vocabulary(self) -> GrammarMasks:
        """What guidance allowed at each kept token, rebuilt from the tokens: GRPO scores its guided samples with it."""
        if self._masks is None:
            from transformers import AutoConfig, GenerationConfig

            eos = None
            with contextlib.suppress(OSError):  # a model without a generation config stops at the tokenizer's end
                eos = GenerationConfig.from_pretrained(self.base).eos_token_id
            stop = stop_token_ids(self.tokenizer, eos)
            size = AutoConfig.from_pretrained(self.base).vocab_size
            self._masks = GrammarMasks(TurnCompiler(self.tokenizer, size, sorted(t for t in stop if t is not None)))
        return self._masks

    def use_adapter(self, path: Path, version: int) -> None:
        from vllm.lora.request import LoRARequest

        self.lora = LoRARequest(f"evoh-{version}", version, str(path))
        self.adapter = Path(path)

    def _weights(self) -> dict[str, str | None]:
        """What the weights hold (retrained weights at the same path are another policy: resuming must not mix
        them), hashed once per adapter: a large base's first shard takes seconds to read."""
        if self._hashed is None or self._hashed[0] != self.lora:
            model = self._hashed[1]["model"] if self._hashed else fingerprint(weights_identity(self.base))
            adapter = fingerprint(weights_identity(self.adapter)) if self.adapter else None
            self._hashed = (self.lora, {"model": model, "adapter": adapter})
        return self._hashed[1]

    def identity(self) -> dict[str, Any]:
        c = self.config
        return {
            "policy": "vllm",
            "model": str(self.base.resolve()),
            "adapter": str(self.adapter.resolve()) if self.adapter else None,
            "weights": self._weights(),
            "sampling": {
                "temperature": c.temperature,
                "top_p": c.top_p,
                "max_tokens": c.max_tokens,
                "seed": self.seed,
                **({"guided": True} if c.guided else {}),
            },
        }

    def forget(self, key: Any) -> None:
        """Nothing is kept per episode: a completion carries its own tokens."""

    def act(self, views: list[TurnView], temperature: float | None = None, keep: bool | None = None) -> list[Completion]:
        """Responses at the configured sampling, or at ``temperature``; they carry their tokens for training unless
        ``keep`` says otherwise (by default only at the configured sampling)."""
        from vllm import SamplingParams

        c = self.config
        sampling = {
            "temperature": c.temperature if temperature is None else temperature,
            "top_p": c.top_p,
            "max_tokens": c.max_tokens,
            "stop": [STOP],
            "include_stop_str_in_output": True,
        }
        if c.guided:  # one grammar per turn: its admissible commands and allowed verbs
            from vllm.sampling_params import StructuredOutputsParams

            grammars = [ActionGrammar(v.admissible, v.meta_allowed) for v in views]
            params = [
                SamplingParams(**sampling, structured_outputs=StructuredOutputsParams(**structured_outputs(g))) for g in grammars
            ]
        else:
            params = SamplingParams(**sampling)
        outputs = self.llm.generate(
            [chat_prompt(self.tokenizer, v) for v in views], params, lora_request=self.lora, use_tqdm=False
        )
        completions = []
        for view, out in zip(views, outputs, strict=True):
            produced = list(out.outputs[0].token_ids)
            kept = (self.keep_tokens and temperature is None) if keep is None else keep
            tokens = None
            if kept:
                grammar = ActionGrammar(view.admissible, view.meta_allowed) if c.guided else None
                choices = self.vocabulary.replay(grammar, produced) if grammar else {}
                tokens = TurnTokens(list(out.prompt_token_ids), produced, choices)
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
