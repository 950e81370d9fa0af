"""A small llama-architecture model written as a GGUF file, laid out as llama.cpp writes one, for import tests."""

from __future__ import annotations

import json
from pathlib import Path


def llama_gguf(tokenizer_dir: Path, out: Path, seed: int = 0) -> Path:
    """A random 2-layer llama (tied embeddings, like SmolLM2) with the tokenizer of ``tokenizer_dir``: its HF
    directory at ``out/hf`` and its GGUF (F32 tensors) at ``out/model.gguf``; returns the GGUF path."""
    import gguf
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out / "hf")
    tokenizer.save_pretrained(out / "hf")

    path = out / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    spec = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    special = {t["id"]: t["content"] for t in spec["added_tokens"]}
    tokens = {**{i: text for text, i in spec["model"]["vocab"].items()}, **special}
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([tokens[i] for i in range(len(tokens))])
    writer.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(len(tokens))])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]])
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_chat_template(tokenizer.chat_template)

    def rope_order(weight, heads: int):
        """llama.cpp stores q and k with each head's two rotary halves interleaved."""
        half = weight.shape[0] // heads // 2
        return weight.reshape(heads, 2, half, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied to the embeddings: GGUF stores it once
        weight = tensor.numpy()
        if name.endswith("q_proj.weight"):
            weight = rope_order(weight, config.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            weight = rope_order(weight, config.num_key_value_heads)
        writer.add_tensor(names.get_name(name, try_suffixes=(".weight", ".bias")), weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
