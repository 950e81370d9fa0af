"""A local Hugging Face causal LM (plus an optional PEFT adapter) as a policy, with batched generation.

All active episodes' prompts go through one ``generate`` call per batch (left padding, KV cache), and
generation stops at the end of the action tag. The model's text is never trusted: whatever it writes
goes to the turn parser, and garbage becomes an invalid turn, not a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoh.config import ModelConfig
from evoh.errors import EvohError
from evoh.harness.episode import TurnView
from evoh.policy.base import Completion

STOP = "</action>"


def pick_device(wanted: str) -> str:
    import torch

    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if wanted == "cuda" and not torch.cuda.is_available():
        raise EvohError("--set model.device=cuda but no CUDA device is visible", hint="use model.device=auto or cpu")
    return wanted


def pick_dtype(wanted: str, device: str):
    import torch

    if wanted == "auto":
        return torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[wanted]
    except KeyError:
        raise EvohError(f"unknown dtype {wanted!r}", hint="use auto, float32, bfloat16 or float16") from None


def load_model(model_dir: str, adapter_dir: str = "", device: str = "auto", dtype: str = "auto"):
    """(tokenizer, model) from local directories, ready for generation."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_dir)
    if not model_dir or not (path / "config.json").exists():
        raise EvohError(f"{model_dir or '(none)'} is not a model directory", hint="pass --model DIR (evoh model init makes one)")
    device = pick_device(device)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=pick_dtype(dtype, device)).to(device)
    if adapter_dir:
        from peft import PeftModel

        if not (Path(adapter_dir) / "adapter_config.json").exists():
            raise EvohError(f"{adapter_dir} is not a PEFT adapter directory", hint="pass the sft/adapter folder of a workspace")
        model = PeftModel.from_pretrained(model, adapter_dir)
    model.eval()
    return tokenizer, model


def chat_prompt(tokenizer, view: TurnView) -> str:
    """The turn as the model reads it: system and user messages through the model's chat template."""
    messages = [{"role": "system", "content": view.system}, {"role": "user", "content": view.user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def completion_length(row: list[int], stop_ids: set[int], pad_id: int | None) -> int:
    """How many generated tokens the response is: through the first end-of-turn token, before padding."""
    for i, token in enumerate(row):
        if token == pad_id:
            return i
        if token in stop_ids:
            return i + 1
    return len(row)


class LocalPolicy:
    """Batched generation with a local model. ``keep_samples`` keeps every turn's prompt and response token
    ids per episode, for training on exactly the tokens that were sampled (GRPO)."""

    def __init__(self, config: ModelConfig, seed: int = 0, loaded: tuple[Any, Any] | None = None, keep_samples: bool = False) -> None:
        import torch

        self.config = config
        self.seed = seed
        self.tokenizer, self.model = loaded or load_model(config.model, config.adapter, config.device, config.dtype)
        self.device = next(self.model.parameters()).device
        self.keep_samples = keep_samples
        self.samples: dict[Any, list[tuple[list[int], list[int]]]] = {}
        self.finished: dict[Any, list[tuple[list[int], list[int]]]] = {}
        stop = self.model.generation_config.eos_token_id
        self.stop_ids = set(stop if isinstance(stop, list) else [stop]) | {self.tokenizer.eos_token_id}
        if loaded is None:
            torch.manual_seed(seed)

    def identity(self) -> dict[str, Any]:
        c = self.config
        return {
            "policy": "local",
            "model": str(Path(c.model).resolve()),
            "adapter": str(Path(c.adapter).resolve()) if c.adapter else None,
            "sampling": {"temperature": c.temperature, "top_p": c.top_p, "max_tokens": c.max_tokens, "seed": self.seed},
        }

    def forget(self, key: Any) -> None:
        if self.keep_samples:
            self.finished[key] = self.samples.pop(key, [])

    def prompt_text(self, view: TurnView) -> str:
        return chat_prompt(self.tokenizer, view)

    def act(self, views: list[TurnView]) -> list[Completion]:
        size = max(1, self.config.batch_size)
        completions: list[Completion] = []
        for start in range(0, len(views), size):
            chunk = views[start : start + size]
            completions += self._generate([self.prompt_text(v) for v in chunk], [v.key for v in chunk])
        return completions

    def _generate(self, prompts: list[str], keys: list[Any]) -> list[Completion]:
        import torch

        c = self.config
        batch = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        sampling = {"do_sample": True, "temperature": c.temperature, "top_p": c.top_p} if c.temperature > 0 else {"do_sample": False}
        with torch.inference_mode():
            output = self.model.generate(
                **batch, max_new_tokens=c.max_tokens, stop_strings=[STOP], tokenizer=self.tokenizer,
                pad_token_id=self.tokenizer.pad_token_id, **sampling,
            )
        new = output[:, batch["input_ids"].shape[1] :]
        results = []
        for key, prompt, row, mask in zip(keys, batch["input_ids"], new.tolist(), batch["attention_mask"], strict=True):
            produced = row[: completion_length(row, self.stop_ids, self.tokenizer.pad_token_id)]
            text = self.tokenizer.decode(produced, skip_special_tokens=True)
            if STOP in text:
                text = text[: text.index(STOP) + len(STOP)]
            if self.keep_samples:
                self.samples.setdefault(key, []).append((prompt[mask.bool()].tolist(), produced))
            results.append(Completion(text, prompt_tokens=int(mask.sum()), completion_tokens=len(produced)))
        return results
