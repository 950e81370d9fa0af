"""`--policy vllm` against a stand-in engine: the requests evoh builds (the engine's settings, the LoRA request,
the chat prompts, the sampling) and the episodes that come back; and the refusals where vLLM cannot serve."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_runner import evoh
from tests.vllm_stand_in import REPLY


def test_eval_through_vllm_builds_the_engine_the_lora_and_the_prompts(stand_in_vllm, minihouse_model: Path, tmp_path: Path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))
    ws = tmp_path / "ws"
    result = evoh(
        "eval", "-w", str(ws), "--kind", "minihouse", "--policy", "vllm", "--model", str(minihouse_model),
        "--adapter", str(adapter), "--limit", "2", "--max-steps", "3", "--set", "model.temperature=0.5",
        "--set", "model.max_tokens=64", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (built,) = stand_in_vllm.built  # one engine for the whole run
    assert built["model"] == str(minihouse_model) and built["enable_lora"] and built["max_lora_rank"] == 8
    assert built["gpu_memory_utilization"] == 0.85 and built["enable_prefix_caching"]
    call = stand_in_vllm.calls[0]
    assert len(call["prompts"]) == 2  # the episodes in flight go in one batched call
    assert call["prompts"][0].startswith("<|im_start|>system") and "Objective:" in call["prompts"][0]
    assert call["params"]["temperature"] == 0.5 and call["params"]["max_tokens"] == 64
    assert call["lora"]["path"] == str(adapter)
    summary = json.loads((ws / "eval" / "vllm-valid_seen" / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["policy"]["policy"] == "vllm"
    assert summary["policy"]["adapter"] == str(adapter.resolve()) and summary["policy"]["weights"]["adapter"]
    records = [json.loads(line) for line in (ws / "eval" / "vllm-valid_seen" / "episodes.jsonl").read_text().splitlines()]
    assert all(turn["action"] == "look" for record in records for turn in record["trace"])


def test_where_vllm_cannot_serve_it_says_why(minihouse_model: Path, tmp_path: Path):
    args = ["eval", "-w", str(tmp_path / "ws"), "--kind", "minihouse", "--policy", "vllm", "--model", str(minihouse_model)]
    result = evoh(*args, "--limit", "1")
    assert result.exit_code == 2 and "--policy vllm:" in result.stderr and "hint:" in result.stderr
    guided = evoh(*args, "--limit", "1", "--set", "model.guided=true")  # guided is served, where vLLM can serve at all
    assert guided.exit_code == 2 and "--policy vllm: the vllm package is not installed" in guided.stderr


def test_guided_eval_through_vllm_passes_each_turns_grammar_as_structured_outputs(
    stand_in_vllm, minihouse_model: Path, tmp_path: Path
):
    import xgrammar as xgr
    from transformers import AutoTokenizer

    ws = tmp_path / "ws"
    result = evoh(
        "eval", "-w", str(ws), "--kind", "minihouse", "--policy", "vllm", "--model", str(minihouse_model),
        "--limit", "2", "--max-steps", "2", "--set", "model.guided=true", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    call = stand_in_vllm.calls[0]
    assert len(call["params"]) == len(call["prompts"]) == 2  # one grammar per turn: each has its own commands
    assert all(p["stop"] == ["</action>"] and p["temperature"] == 0.0 for p in call["params"])
    grammar = call["params"][0]["structured_outputs"]["structured"]["grammar"]
    # vLLM hands the text to xgrammar: the grammar compiles for the model's tokenizer, and holds the turn's rules
    tokenizer = AutoTokenizer.from_pretrained(minihouse_model)
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer)).compile_grammar(grammar)
    for reply, allowed in ((REPLY, True), (REPLY.replace("look", "Look"), False), (REPLY + " ", False)):
        matcher = xgr.GrammarMatcher(compiled)
        assert (matcher.accept_string(reply) and matcher.is_completed()) == allowed, reply
    summary = json.loads(result.stdout)
    assert summary["policy"]["sampling"]["guided"] is True and summary["invalid_rate"] == 0.0
