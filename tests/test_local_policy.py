"""A tiny random local model built here: the model directory, and `evoh eval` / `evoh collect` with it on real games."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoh.workspace import read_jsonl
from tests.cli_runner import evoh

pytest.importorskip("transformers")
pytestmark = pytest.mark.engine


def test_model_init_describes_what_it_built(alfworld_data: Path, tmp_path: Path):
    out = tmp_path / "tiny"
    result = evoh("model", "init", "--out", str(out), "--data", str(alfworld_data), "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert 500_000 < info["parameters"] < 2_000_000 and info["size"] == "tiny"
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    assert evoh("model", "init", "--out", str(out)).exit_code == 2  # never overwrites without --force


def test_the_model_directory_loads_offline_with_plain_transformers(tiny_model: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert model.config.model_type == "qwen3"
    for token in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>"):
        assert tokenizer.convert_tokens_to_ids(token) != tokenizer.unk_token_id
    messages = [
        {"role": "user", "content": "Objective: put a hot apple in fridge."},
        {"role": "assistant", "content": "<action>look</action>"},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    assert any(rendered["assistant_masks"]) and not all(rendered["assistant_masks"])  # assistant-only loss can mask


def test_eval_with_a_random_local_model_records_its_turns_as_invalid(tiny_model: Path, alfworld_data: Path, tmp_path: Path):
    result = evoh(
        "eval",
        "-w",
        str(tmp_path),
        "--policy",
        "local",
        "--model",
        str(tiny_model),
        "--split",
        "valid_seen",
        "--limit",
        "2",
        "--max-steps",
        "4",
        "--data",
        str(alfworld_data),
        "--set",
        "model.max_tokens=16",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["finished"] == 2 and summary["errors"] == 0 and summary["success"] == 0.0
    assert summary["invalid_rate"] > 0.5 and summary["tokens_per_episode"] > 0
    assert summary["policy"]["policy"] == "local" and summary["policy"]["sampling"]["max_tokens"] == 16
    records = read_jsonl(tmp_path / "eval" / "local-valid_seen" / "episodes.jsonl").records
    assert all(r["usage"]["policy_calls"] == r["turns"] for r in records)
    assert any(t["outcome"] in ("malformed", "invalid") for r in records for t in r["trace"])
    table = evoh(  # the same command again resumes every episode and prints the table, naming what played
        "eval",
        "-w",
        str(tmp_path),
        "--policy",
        "local",
        "--model",
        str(tiny_model),
        "--split",
        "valid_seen",
        "--limit",
        "2",
        "--max-steps",
        "4",
        "--data",
        str(alfworld_data),
        "--set",
        "model.max_tokens=16",
    )
    assert (
        table.exit_code == 0
        and f"local {tiny_model.parent.name}/{tiny_model.name}, {summary['policy']['dtype']}, greedy" in table.stdout
    )


def test_collect_with_the_local_teacher_uses_the_same_path(tiny_model: Path, alfworld_data: Path, tmp_path: Path):
    result = evoh(
        "collect",
        "-w",
        str(tmp_path),
        "--teacher",
        "local",
        "--model",
        str(tiny_model),
        "--split",
        "valid_seen",
        "--limit",
        "2",
        "--max-steps",
        "3",
        "--data",
        str(alfworld_data),
        "--set",
        "model.max_tokens=8",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["episodes"] == 2 and summary["policy"]["policy"] == "local"
    assert (tmp_path / "collect" / "stage.json").exists()


def test_a_student_labelled_by_the_expert_is_refined_into_the_experts_answers(
    tiny_model: Path, alfworld_data: Path, tmp_path: Path
):
    """DAgger: the random student drives (and loses) the episodes; refine trains on the expert's answer to each of its turns."""
    from evoh.harness.turns import parse_turn

    result = evoh(
        "collect",
        "-w",
        str(tmp_path),
        "--teacher",
        "local",
        "--model",
        str(tiny_model),
        "--label-with",
        "expert",
        "--split",
        "train",
        "--limit",
        "2",
        "--max-steps",
        "5",
        "--data",
        str(alfworld_data),
        "--set",
        "model.max_tokens=8",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["policy"]["policy"] == "labelled" and summary["policy"]["labeller"]["style"]["slip"] == 0.0
    assert summary["won"] == 0 and summary["labelled_turns"] == 10 and summary["label_agreement"] == 0.0
    records = read_jsonl(tmp_path / "collect" / "trajectories.jsonl").records
    turns = [t for r in records for t in r["trace"]]
    assert len(turns) == 10 and all(t["outcome"] in ("malformed", "invalid") for t in turns)  # the student played
    assert all(parse_turn(t["label"]).kind != "malformed" for t in turns)  # the expert answered every view
    assert any(parse_turn(t["label"]).kind == "env" for t in turns)
    shown = evoh("show", str(tmp_path / "collect" / "trajectories.jsonl"), "--episode", "0").stdout
    assert f"label (trained on): {turns[0]['label']}" in shown

    result = evoh("refine", "-w", str(tmp_path), "--set", "refine.val_fraction=0", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["episodes"]["kept"] == 2  # lost episodes teach, through their labels
    assert report["turns"]["input"] == report["turns"]["kept"] + sum(report["turns"]["dropped"].values()) == 10
    examples = [json.loads(line)["messages"] for line in (tmp_path / "refine" / "train.jsonl").read_text().splitlines()]
    labels = {(t["user"], t["label"]) for t in turns}
    assert len(examples) == report["turns"]["kept"] and {(m[1]["content"], m[2]["content"]) for m in examples} <= labels


def test_labels_from_the_expert_need_another_player(alfworld_data: Path, tmp_path: Path):
    result = evoh("collect", "-w", str(tmp_path / "ws"), "--label-with", "expert", "--limit", "1", "--data", str(alfworld_data))
    assert result.exit_code == 2 and "--policy local" in result.stderr
    assert not (tmp_path / "ws").exists()


def test_a_missing_model_directory_is_a_clear_error(tmp_path: Path, alfworld_data: Path):
    result = evoh(
        "eval", "-w", str(tmp_path), "--policy", "local", "--model", str(tmp_path / "none"), "--data", str(alfworld_data)
    )
    assert result.exit_code == 2 and "is not a model directory" in result.stderr and "evoh model init" in result.stderr


def test_a_batch_shares_its_common_prefix_and_generates_what_each_prompt_would_alone(tiny_model: Path):
    import torch

    from evoh.config import ModelConfig
    from evoh.harness.prompts import HarnessModules, system_prompt
    from evoh.policy.local import LocalPolicy, chat_prompt, shared_prefix_length

    policy = LocalPolicy(ModelConfig(model=str(tiny_model), max_tokens=12, temperature=0.0, batch_size=8))
    torch.manual_seed(0)
    with torch.no_grad():  # larger weights than a fresh init, so that every token of the prompt sways the output
        for weight in policy.model.parameters():
            if weight.ndim == 2:
                weight.normal_(0, 0.15)
    system = system_prompt("inline", HarnessModules(), charge_meta_actions=True)
    users = [
        "Objective: put a hot apple in fridge.\nObservation: You arrive at loc 4. On the countertop 1, you see an apple 1.",
        "Objective: look at bowl under the desklamp.\nObservation: The drawer 2 is closed.",
        "Objective: put two cellphone in bed.\nObservation: You see nothing.",
    ]
    prompts = [chat_prompt(policy.tokenizer, _View(system, user)) for user in users]
    rows = policy.tokenizer(prompts, add_special_tokens=False)["input_ids"]
    assert shared_prefix_length(rows) > len(policy.tokenizer(system)["input_ids"])  # the system prompt and more
    together = policy._generate(prompts)
    alone = [policy._generate([p])[0] for p in prompts]
    assert [c.text for c in together] == [c.text for c in alone]
    assert len({c.text for c in together}) == 3  # the prompts' own tokens matter
    assert [c.prompt_tokens for c in together] == [len(r) for r in rows]


class _View:
    def __init__(self, system: str, user: str) -> None:
        self.system, self.user = system, user


def test_retrained_weights_at_the_same_path_are_another_policy(tiny_model: Path, tmp_path: Path):
    """Resuming an evaluation keys episodes by the policy's identity: it must change with the weights."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from evoh.config import ModelConfig
    from evoh.policy.local import LocalPolicy

    copy = tmp_path / "model"
    shutil.copytree(tiny_model, copy)
    before = LocalPolicy(ModelConfig(model=str(copy), max_tokens=4)).identity()
    model = AutoModelForCausalLM.from_pretrained(copy)
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    model.save_pretrained(copy)
    after = LocalPolicy(ModelConfig(model=str(copy), max_tokens=4)).identity()
    assert before["model"] == after["model"] and before["weights"]["model"] != after["weights"]["model"]


def test_auto_dtype_is_bf16_only_on_a_cpu_that_computes_it_natively_and_the_dtype_is_part_of_the_policy(
    tiny_model: Path, monkeypatch
):
    import torch

    from evoh.config import ModelConfig
    from evoh.policy.local import LocalPolicy, pick_dtype

    for native in (False, True):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda native=native: native)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
        assert pick_dtype("auto", "cpu") == (torch.bfloat16 if native else torch.float32)
        assert pick_dtype("float32", "cpu") == torch.float32  # an explicit choice always wins
    identities = {
        d: LocalPolicy(ModelConfig(model=str(tiny_model), max_tokens=4, dtype=d)).identity() for d in ("float32", "bfloat16")
    }
    assert (
        identities["float32"]["dtype"] == "float32" and identities["bfloat16"]["dtype"] == "bfloat16"
    )  # never resumed into each other


def test_an_adapter_is_merged_for_inference_and_answers_as_the_adapter_model(tiny_model: Path, tmp_path: Path):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from evoh.policy.local import load_model

    torch.manual_seed(0)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)  # non-zero B: the adapter matters
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model), lora).save_pretrained(tmp_path / "adapter")
    tokenizer, merged = load_model(str(tiny_model), str(tmp_path / "adapter"), device="cpu", dtype="float32")
    assert not isinstance(merged, PeftModel) and not any("lora" in name for name, _ in merged.named_parameters())
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), tmp_path / "adapter").eval()
    plain = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    batch = tokenizer(["Objective: put a clean mug in coffeemachine.\nObservation: You see a mug 1."], return_tensors="pt")
    with torch.inference_mode():
        ours, theirs, base = (m(**batch).logits for m in (merged, adapted, plain))
    assert torch.allclose(ours, theirs, atol=1e-4) and not torch.allclose(ours, base, atol=1e-2)
