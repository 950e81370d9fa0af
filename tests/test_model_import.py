"""`evoh model import`: a GGUF checkpoint becomes a model directory that plain transformers and every stage take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_runner import evoh, refined_workspace
from tests.gguf_file import llama_gguf

pytest.importorskip("gguf")
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def gguf_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return llama_gguf(tiny_model, tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def refined(alfworld_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return refined_workspace(tmp_path_factory.mktemp("ws"), alfworld_data, 2, "0")


def test_an_imported_gguf_is_the_same_model_with_a_chat_template_for_assistant_only_loss(
    gguf_model: Path, refined: Path, tmp_path: Path
):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "imported"
    result = evoh("model", "import", str(gguf_model), "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["architecture"] == "LlamaForCausalLM" and info["chat_template"].startswith("qwen3-training")

    original = AutoModelForCausalLM.from_pretrained(gguf_model.parent / "hf")
    imported = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert info["parameters"] == sum(p.numel() for p in original.parameters())
    messages = json.loads((refined / "refine" / "train.jsonl").read_text().splitlines()[0])["messages"]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    ids = tokenizer(text)["input_ids"]
    assert ids == AutoTokenizer.from_pretrained(gguf_model.parent / "hf")(text)["input_ids"] and tokenizer.decode(ids) == text
    with torch.no_grad():
        x = torch.tensor([ids])
        assert torch.equal(original(x).logits, imported(x).logits)  # F32 tensors: not one bit lost on the way
    marked = tokenizer.apply_chat_template(messages, return_dict=True, return_assistant_tokens_mask=True)
    answer = [t for t, m in zip(marked["input_ids"], marked["assistant_masks"], strict=True) if m]
    assert "<action>" in tokenizer.decode(answer) and len(answer) < len(marked["input_ids"]) / 4  # the response only
    assert imported.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")

    trained = evoh(
        "sft",
        "-w",
        str(refined),
        "--model",
        str(out),
        "--max-steps",
        "2",
        "--lora-r",
        "4",
        "--lora-alpha",
        "8",
        "--set",
        "sft.batch_size=2",
        "--set",
        "sft.per_device_batch=2",
        "--set",
        "sft.max_length=1024",
        "--set",
        "sft.assistant_only_loss=true",
        "--set",
        "sft.action_check=0",
        "--json",
    )
    assert trained.exit_code == 0, trained.stderr
    assert json.loads(trained.stdout)["global_step"] == 2 and (refined / "sft" / "adapter" / "adapter_model.safetensors").exists()


def test_import_refuses_what_it_cannot_read_and_never_writes_over_a_directory(gguf_model: Path, tmp_path: Path):
    not_gguf = tmp_path / "model.bin"
    not_gguf.write_bytes(b"\0" * 16)
    result = evoh("model", "import", str(not_gguf), "--out", str(tmp_path / "a"))
    assert result.exit_code == 2 and "not a .gguf file" in result.stderr and not (tmp_path / "a").exists()

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    result = evoh("model", "import", str(broken), "--out", str(tmp_path / "b"))
    assert result.exit_code == 2 and "cannot read broken.gguf" in result.stderr and not (tmp_path / "b").exists()

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    result = evoh("model", "import", str(gguf_model), "--out", str(taken))
    assert result.exit_code == 2 and "--force" in result.stderr and (taken / "notes.txt").read_text() == "mine"
