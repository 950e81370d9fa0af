"""A local Hugging Face causal LM (plus an optional PEFT adapter) as a policy, with batched generation.

All active episodes' prompts go through one ``generate`` call per batch (left padding, KV cache), and
generation stops at the end of the action tag. The tokens every prompt of a batch starts with (the
system prompt, and a game's objective within a GRPO group) are encoded once and their keys and values
shared by the whole batch, so a batch pays for the common prefix once instead of once per episode. The
model's text is never trusted: whatever it writes goes to the turn parser, and garbage becomes an invalid
turn, not a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoh.config import ModelConfig
from evoh.errors import EvohError
from evoh.harness.episode import TurnTokens, TurnView
from evoh.models.hub import model_directory
from evoh.policy.base import Completion
from evoh.policy.guided import ActionGrammar, GuidedActions, Vocabulary
from evoh.workspace import fingerprint, weights_identity

STOP = "</action>"
MIN_SHARED_PREFIX = 16  # tokens; below this a separate prefix pass costs more than it saves


def pick_device(wanted: str) -> str:
    import torch

    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if wanted == "cuda" and not torch.cuda.is_available():
        raise EvohError("--set model.device=cuda but no CUDA device is visible", hint="use model.device=auto or cpu")
    return wanted


def native_bf16(device: str) -> bool:
    """Whether the device multiplies bf16 in hardware: a GPU that supports it, a CPU with AVX512-BF16 or
    AMX tiles; elsewhere bf16 is emulated and slower than fp32."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


def pick_dtype(wanted: str, device: str):
    """``auto`` is bf16 wherever the hardware computes it natively (a GPU that supports it, a CPU with
    AVX512-BF16 or AMX; batched generation on such a CPU measured 1.3-1.5x faster), elsewhere fp32."""
    import torch

    if wanted == "auto":
        return torch.bfloat16 if native_bf16(device) else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[wanted]
    except KeyError:
        raise EvohError(f"unknown dtype {wanted!r}", hint="use auto, float32, bfloat16 or float16") from None


def training_precision(wanted: str, cuda: bool, section: str) -> str:
    """bf16 or fp32 for a training stage (``section``: sft or grpo). On a GPU bf16 means bf16 weights; on a
    CPU, autocast over fp32 weights (the master weights and the saved ones stay fp32), which pays only
    where the CPU multiplies bf16 natively."""
    if wanted == "auto":
        return "bf16" if native_bf16("cuda" if cuda else "cpu") else "fp32"
    if wanted == "bf16" and cuda and not native_bf16("cuda"):
        raise EvohError(
            f"{section}.precision = bf16 but this GPU does not support bf16", hint=f"use {section}.precision=auto or fp32"
        )
    return wanted


def load_model(model_dir: str, adapter_dir: str = "", device: str = "auto", dtype: str = "auto"):
    """(tokenizer, model) from local directories, ready for generation."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = model_directory(model_dir, "--model")
    device = pick_device(device)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=pick_dtype(dtype, device)).to(device)
    if adapter_dir:
        from peft import PeftModel

        if not (Path(adapter_dir) / "adapter_config.json").exists():
            raise EvohError(
                f"{adapter_dir} is not a PEFT adapter directory",
                hint="pass the sft/adapter folder of a workspace; a fully fine-tuned sft/model goes to --model",
            )
        # merged for inference: the same function without LoRA's extra matmuls in every layer (an evaluation
        # of the CPU recipe's GRPO adapter ran 1.26x faster); training loads its adapter elsewhere, unmerged
        model = PeftModel.from_pretrained(model, adapter_dir).merge_and_unload()
    model.eval()
    return tokenizer, model


def chat_prompt(tokenizer, view: TurnView) -> str:
    """The turn as the model reads it: system and user messages through the model's chat template."""
    messages = [{"role": "system", "content": view.system}, {"role": "user", "content": view.user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def stop_token_ids(tokenizer, eos: int | list[int] | None) -> set[int]:
    """The tokens that end a response: the generation config's end tokens (one or a list) and the tokenizer's."""
    return {t for t in (eos if isinstance(eos, list) else [eos]) if t is not None} | {tokenizer.eos_token_id}


def completion_length(row: list[int], stop_ids: set[int], pad_id: int | None) -> int:
    """How many generated tokens the response is: through the first end-of-turn token, before padding."""
    for i, token in enumerate(row):
        if token == pad_id:
            return i
        if token in stop_ids:
            return i + 1
    return len(row)


def shared_prefix_length(rows: list[list[int]]) -> int:
    """How many leading tokens all rows share, leaving every row at least one token of its own to feed generate."""
    if len(rows) < 2:
        return 0
    limit = min(len(r) for r in rows) - 1
    first = rows[0]
    for i in range(limit):
        token = first[i]
        if any(r[i] != token for r in rows):
            return i
    return max(limit, 0)


class LocalPolicy:
    """Batched generation with a local model. With ``keep_tokens`` every completion carries its prompt and
    response token ids (and what guidance allowed at each token), for training on exactly what was sampled (GRPO)."""

    def __init__(
        self, config: ModelConfig, seed: int = 0, loaded: tuple[Any, Any] | None = None, keep_tokens: bool = False
    ) -> None:
        import torch

        self.config = config
        self.seed = seed
        # a Hub id resolves once, to the snapshot whose path (with its commit) the policy's identity records
        self.model_dir = Path(config.model) if loaded else model_directory(config.model, "--model")
        self.tokenizer, self.model = loaded or load_model(str(self.model_dir), config.adapter, config.device, config.dtype)
        self.device = next(self.model.parameters()).device
        self.keep_tokens = keep_tokens
        self._weights: dict[str, str | None] | None = None
        self._vocabulary: Vocabulary | None = None
        self.stop_ids = stop_token_ids(self.tokenizer, self.model.generation_config.eos_token_id)
        if loaded is None:
            torch.manual_seed(seed)

    def identity(self) -> dict[str, Any]:
        c = self.config
        if self._weights is None:  # retrained weights at the same path are another policy: resuming must not mix them
            self._weights = {
                "model": fingerprint(weights_identity(self.model_dir)),
                "adapter": fingerprint(weights_identity(Path(c.adapter))) if c.adapter else None,
            }
        return {
            "policy": "local",
            "model": str(self.model_dir.resolve()),
            "adapter": str(Path(c.adapter).resolve()) if c.adapter else None,
            "weights": self._weights,
            "sampling": {
                "temperature": c.temperature,
                "top_p": c.top_p,
                "max_tokens": c.max_tokens,
                "seed": self.seed,
                **({"guided": True} if c.guided else {}),
            },
            # the same weights in bf16 and fp32 can answer differently: their episodes are not one measurement
            "dtype": str(self.model.dtype).removeprefix("torch."),
        }

    def forget(self, key: Any) -> None:
        """Nothing is kept per episode: a completion carries its own tokens."""

    def prompt_text(self, view: TurnView) -> str:
        return chat_prompt(self.tokenizer, view)

    def act(self, views: list[TurnView]) -> list[Completion]:
        grammars = [ActionGrammar(v.admissible, v.meta_allowed) for v in views] if self.config.guided else None
        return self.complete([self.prompt_text(v) for v in views], grammars)

    def complete(self, prompts: list[str], grammars: list[ActionGrammar] | None = None) -> list[Completion]:
        """Responses to rendered chat prompts, ``batch_size`` at a time; with ``grammars``, guided (one per prompt)."""
        size = max(1, self.config.batch_size)
        completions: list[Completion] = []
        for start in range(0, len(prompts), size):
            chunk = grammars[start : start + size] if grammars is not None else None
            completions += self._generate(prompts[start : start + size], chunk)
        return completions

    @property
    def vocabulary(self) -> Vocabulary:
        """The text of every token, indexed for guidance: built once per policy (GRPO scores its samples with it)."""
        if self._vocabulary is None:
            self._vocabulary = Vocabulary(
                self.tokenizer, self.model.get_output_embeddings().weight.shape[0], self.stop_ids, self.device
            )
        return self._vocabulary

    def _guide(self, grammars: list[ActionGrammar], prompt_width: int) -> GuidedActions:
        return GuidedActions(self.vocabulary, grammars, prompt_width, self.config.max_tokens)

    def _generate(self, prompts: list[str], grammars: list[ActionGrammar] | None = None) -> list[Completion]:
        import torch
        from transformers import LogitsProcessorList

        c = self.config
        rows = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]
        shared = shared_prefix_length(rows)
        if shared < MIN_SHARED_PREFIX:
            shared = 0
        width = max(len(r) for r in rows) - shared
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        # [shared prefix][left padding][own tokens]: positions follow the mask, so the gap changes nothing
        input_ids = torch.tensor([r[:shared] + [pad] * (width - len(r) + shared) + r[shared:] for r in rows], device=self.device)
        mask = torch.tensor(
            [[1] * shared + [0] * (width - len(r) + shared) + [1] * (len(r) - shared) for r in rows], device=self.device
        )
        sampling = (
            {"do_sample": True, "temperature": c.temperature, "top_p": c.top_p} if c.temperature > 0 else {"do_sample": False}
        )
        guide = self._guide(grammars, input_ids.shape[1]) if grammars else None
        with torch.inference_mode():
            cache = None
            if shared:
                cache = self.model(input_ids=input_ids[:1, :shared], use_cache=True).cache
                cache.batch_repeat_interleave(len(rows))
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                cache=cache,
                max_new_tokens=c.max_tokens,
                stop_strings=[STOP],
                tokenizer=self.tokenizer,
                pad_token_id=pad,
                **sampling,
                logits_processor=LogitsProcessorList([guide]) if guide else None,
            )
        new = output[:, input_ids.shape[1] :]
        results = []
        for index, (prompt, row) in enumerate(zip(rows, new.tolist(), strict=True)):
            produced = row[: completion_length(row, self.stop_ids, pad)]
            text = self.tokenizer.decode(produced, skip_special_tokens=True)
            if STOP in text:
                text = text[: text.index(STOP) + len(STOP)]
            tokens = None
            if self.keep_tokens:  # with what guidance allowed at each token, for the guided policy's log-probs
                steps = guide.choices[index][: len(produced)] if guide else []
                tokens = TurnTokens(list(prompt), produced, {at: a for at, a in enumerate(steps) if a is not None})
            results.append(Completion(text, prompt_tokens=len(prompt), completion_tokens=len(produced), tokens=tokens))
        return results
