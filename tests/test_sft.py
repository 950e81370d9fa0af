"""`evoh sft` on CPU with the tiny model: the adapter trains, metrics and checkpoints are written, resume continues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoh.policy.local import native_bf16
from tests.cli_runner import evoh, refined_workspace

pytest.importorskip("trl")
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def refined(alfworld_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return refined_workspace(tmp_path_factory.mktemp("ws"), alfworld_data, 3, "0.34")


def _sft(ws: Path, model: Path, steps: int, *extra: str):
    return evoh(
        "sft",
        "-w",
        str(ws),
        "--model",
        str(model),
        "--max-steps",
        str(steps),
        "--lr",
        "5e-3",
        "--lora-r",
        "8",
        "--lora-alpha",
        "16",
        "--set",
        "sft.batch_size=2",
        "--set",
        "sft.per_device_batch=2",
        "--set",
        "sft.save_steps=3",
        "--set",
        "sft.eval_steps=3",
        "--set",
        "sft.logging_steps=1",
        "--set",
        "sft.max_length=1024",
        "--json",
        *extra,
    )


def test_sft_trains_an_adapter_and_resumes(refined: Path, tiny_model: Path):
    from safetensors.torch import load_file

    first = _sft(refined, tiny_model, 3)
    assert first.exit_code == 0, first.stderr
    result = json.loads(first.stdout)  # stdout holds only the result: the trainer's logs went to stderr
    assert result["global_step"] == 3 and "eval_loss" in result
    val_turns = len((refined / "refine" / "val.jsonl").read_text().splitlines())
    assert result["val_actions"]["turns"] == val_turns and 0 <= result["val_actions"]["matched"] <= val_turns
    sft = refined / "sft"
    weights = load_file(sft / "adapter" / "adapter_model.safetensors")
    lora_b = [t for name, t in weights.items() if "lora_B" in name]
    assert lora_b and any(t.abs().sum() > 0 for t in lora_b)  # B starts at zero: training moved it
    assert json.loads((sft / "adapter" / "adapter_config.json").read_text())["r"] == 8
    stage = json.loads((sft / "stage.json").read_text())
    assert stage["base_model"]["path"] == str(tiny_model.resolve()) and stage["inputs"]["train"]["sha256"]
    assert stage["precision"] == ("bf16" if native_bf16("cpu") else "fp32") and stage["quantization"] is None
    assert stage["weights_dtype"] == "float32"  # on a CPU bf16 is autocast: the master weights stay fp32
    logged = [json.loads(line) for line in (sft / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if "loss" in m] == [1, 2, 3]
    assert [m["step"] for m in logged if "eval_loss" in m] == [3]  # the trainer's last evaluation is reused, not repeated

    again = _sft(refined, tiny_model, 5)
    assert again.exit_code == 2 and "--resume" in again.stderr  # never silently restarts over checkpoints
    assert (sft / "stage.json").exists()  # and a refused run loses nothing
    other_kind = _sft(refined, tiny_model, 5, "--resume", "--full")
    assert other_kind.exit_code == 2 and "written by a LoRA adapter" in other_kind.stderr
    assert (sft / "stage.json").exists()
    other_lr = _sft(refined, tiny_model, 5, "--resume", "--set", "sft.lr=0.5")
    assert other_lr.exit_code == 2 and "other settings or inputs (sft.lr)" in other_lr.stderr  # two runs in one adapter
    assert (sft / "stage.json").exists()
    (sft / "run.json").unlink()  # as an earlier evoh left it: resumed, and said to be unchecked
    resumed = _sft(refined, tiny_model, 5, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert "records no run key" in resumed.stderr and (sft / "run.json").exists()
    assert json.loads(resumed.stdout)["global_step"] == 5
    steps = [json.loads(line)["step"] for line in (sft / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert steps == [1, 2, 3, 4, 5]  # continued from checkpoint-3, not from zero


@pytest.mark.parametrize("grouped", [False, True], ids=["random-batches", "grouped-by-length"])
def test_a_run_stopped_after_a_checkpoint_resumes_with_the_same_batches(
    refined: Path, tiny_model: Path, tmp_path: Path, grouped: bool
):
    import shutil

    def losses(ws: Path) -> dict[int, float]:
        lines = (ws / "sft" / "metrics.jsonl").read_text().splitlines()
        return {m["step"]: m["loss"] for m in map(json.loads, lines) if "loss" in m}

    unbroken, stopped = tmp_path / "unbroken", tmp_path / "stopped"
    shutil.copytree(refined, unbroken, ignore=shutil.ignore_patterns("sft"))
    sampling = ("--set", f"sft.group_by_length={str(grouped).lower()}")
    assert _sft(unbroken, tiny_model, 5, *sampling).exit_code == 0
    # the same run as if stopped after its step-3 checkpoint: what came later is gone
    shutil.copytree(unbroken, stopped)
    sft = stopped / "sft"
    for late in sft.glob("checkpoints/checkpoint-*"):
        if late.name != "checkpoint-3":
            shutil.rmtree(late)
    (sft / "stage.json").unlink()
    early = [line for line in (sft / "metrics.jsonl").read_text().splitlines() if json.loads(line)["step"] <= 3]
    (sft / "metrics.jsonl").write_text("\n".join(early) + "\n")

    assert _sft(stopped, tiny_model, 5, "--resume", *sampling).exit_code == 0
    straight, resumed = losses(unbroken), losses(stopped)
    assert sorted(resumed) == [1, 2, 3, 4, 5]
    for step in (4, 5):  # the same examples in the same batches at the same learning rate: the same loss
        assert resumed[step] == pytest.approx(straight[step], rel=1e-5), (step, resumed, straight)


def test_resume_passes_over_checkpoints_a_kill_cut_short(refined: Path, tiny_model: Path, tmp_path: Path):
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(refined, ws, ignore=shutil.ignore_patterns("sft"))
    assert _sft(ws, tiny_model, 3).exit_code == 0
    checkpoints = ws / "sft" / "checkpoints"
    # saves killed part-way: one before its trainer state, one while writing the adapter
    shutil.copytree(checkpoints / "checkpoint-3", checkpoints / "checkpoint-6")
    (checkpoints / "checkpoint-6" / "trainer_state.json").unlink()
    shutil.copytree(checkpoints / "checkpoint-3", checkpoints / "checkpoint-9")
    adapter = checkpoints / "checkpoint-9" / "adapter_model.safetensors"
    adapter.write_bytes(adapter.read_bytes()[: adapter.stat().st_size // 2])

    resumed = _sft(ws, tiny_model, 5, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout)["global_step"] == 5
    assert (
        f"skipping {checkpoints / 'checkpoint-9'}" in resumed.stderr
        and f"skipping {checkpoints / 'checkpoint-6'}" in resumed.stderr
    )
    steps = [json.loads(line)["step"] for line in (ws / "sft" / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert steps == [1, 2, 3, 4, 5]  # continued from checkpoint-3


def test_qlora_without_cuda_is_refused_with_what_to_do(refined: Path, tiny_model: Path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = evoh("sft", "-w", str(refined), "--model", str(tiny_model), "--load-in-4bit")
    assert result.exit_code == 2
    assert "needs a CUDA GPU" in result.stderr and "drop --load-in-4bit" in result.stderr


def test_precision_auto_is_bf16_only_where_the_hardware_computes_it(monkeypatch):
    import torch

    from evoh.errors import EvohError
    from evoh.policy import local

    asked = []
    for native in (True, False):
        monkeypatch.setattr(local, "native_bf16", lambda device, native=native: asked.append(device) or native)
        expected = "bf16" if native else "fp32"
        assert (
            local.training_precision("auto", False, "sft") == expected
            and local.training_precision("auto", True, "grpo") == expected
        )
        assert local.training_precision("fp32", False, "sft") == "fp32"
    assert asked == ["cpu", "cuda", "cpu", "cuda"]
    monkeypatch.undo()
    for supported in (True, False):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, supported=supported, **k: supported)
        assert local.native_bf16("cuda") is supported
    with pytest.raises(EvohError, match="grpo.precision = bf16 but this GPU does not support bf16"):
        local.training_precision("bf16", True, "grpo")


def test_sft_needs_refined_data(tmp_path: Path, tiny_model: Path):
    result = evoh("sft", "-w", str(tmp_path), "--model", str(tiny_model))
    assert result.exit_code == 2 and "evoh refine -w" in result.stderr


def test_torchrun_trains_with_two_cpu_processes(refined: Path, tiny_model: Path, tmp_path: Path):
    import os
    import shutil
    import subprocess
    import sys

    ws = tmp_path / "ws"
    shutil.copytree(refined, ws, ignore=shutil.ignore_patterns("sft"))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "-m",
        "evoh",
        "sft",
        "-w",
        str(ws),
        "--model",
        str(tiny_model),
        "--max-steps",
        "2",
        "--set",
        "sft.batch_size=4",
        "--set",
        "sft.per_device_batch=2",
        "--set",
        "sft.max_length=1024",
        "--json",
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["global_step"] == 2  # one process reports
    stage = json.loads((ws / "sft" / "stage.json").read_text())
    assert stage["processes"] == 2 and stage["gradient_accumulation"] == 1
    assert (ws / "sft" / "adapter" / "adapter_model.safetensors").exists()


def test_export_merges_into_a_model_plain_transformers_loads(refined: Path, tiny_model: Path, tmp_path: Path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (refined / "sft" / "stage.json").exists():
        assert _sft(refined, tiny_model, 3).exit_code == 0
    out = tmp_path / "merged"
    result = evoh("export", "-w", str(refined), "--dtype", "fp32", "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["max_logit_difference"] < 1e-4 and report["prompts"] == 3
    assert {"config.json", "generation_config.json", "tokenizer.json", "README.md"} <= {p.name for p in out.iterdir()}
    assert list(out.glob("*.safetensors"))
    assert "Base model" in (out / "README.md").read_text()

    tokenizer = AutoTokenizer.from_pretrained(out)
    exported = AutoModelForCausalLM.from_pretrained(out).eval()
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), refined / "sft" / "adapter").eval()
    example = json.loads((refined / "refine" / "train.jsonl").read_text().splitlines()[0])["messages"]
    prompt = tokenizer.apply_chat_template(example[:2], tokenize=False, add_generation_prompt=True)
    batch = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.inference_mode():
        a = exported.generate(**batch, max_new_tokens=12, do_sample=False)
        b = adapted.generate(**batch, max_new_tokens=12, do_sample=False)
    assert torch.equal(a, b)  # the merged model answers exactly as the adapter model does

    again = evoh("export", "-w", str(refined), "--out", str(out))
    assert again.exit_code == 2 and "--force" in again.stderr
    assert evoh("export", "-w", str(refined), "--out", str(out), "--force").exit_code == 0
    assert evoh("export", "-w", str(refined), "--from", "grpo").exit_code == 2  # no grpo stage yet


@pytest.mark.slow
def test_a_few_steps_teach_the_tiny_model_the_teachers_action(refined: Path, tiny_model: Path, tmp_path: Path):
    import re

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evoh.workspace import Workspace

    # two teacher turns to learn, in a workspace of their own
    ws = Workspace(tmp_path / "ws")
    examples = (refined / "refine" / "train.jsonl").read_text().splitlines()[:2]
    with ws.writing("refine") as directory:
        (directory / "train.jsonl").write_text("\n".join(examples) + "\n")
        (directory / "val.jsonl").write_text("\n".join(examples) + "\n")  # held out in name only: the check must see 2/2
        ws.finish("refine", {"examples": {"train": 2, "val": 2}})
    result = evoh(
        "sft",
        "-w",
        str(ws.root),
        "--model",
        str(tiny_model),
        "--max-steps",
        "80",
        "--lr",
        "3e-3",
        "--train-embeddings",
        "--set",
        "sft.batch_size=2",
        "--set",
        "sft.per_device_batch=2",
        "--set",
        "sft.save_steps=100",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    checked = json.loads(result.stdout)["val_actions"]
    assert (checked["matched"], checked["turns"]) == (2, 2) and sum(k["turns"] for k in checked["by_kind"].values()) == 2
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), ws.root / "sft" / "adapter").eval()
    for line in examples:
        messages = json.loads(line)["messages"]
        prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
        batch = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**batch, max_new_tokens=60, do_sample=False, stop_strings=["</action>"], tokenizer=tokenizer)
        answer = tokenizer.decode(out[0][batch["input_ids"].shape[1] :], skip_special_tokens=True)
        wanted = re.search(r"<action>(.*?)</action>", messages[2]["content"]).group(1)
        assert re.search(r"<action>(.*?)</action>", answer).group(1) == wanted, answer


def test_full_fine_tuning_trains_every_weight_and_feeds_export_and_grpo(refined: Path, tiny_model: Path, tmp_path: Path):
    import shutil

    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from evoh.config import Recipe
    from evoh.grpo.inputs import starting_point
    from evoh.workspace import Workspace

    ws = tmp_path / "ws"
    shutil.copytree(refined, ws, ignore=shutil.ignore_patterns("sft", "export"))
    (ws / "sft" / "adapter").mkdir(parents=True)  # an earlier LoRA run's weights: must not outlive this one
    refused = _sft(ws, tiny_model, 2, "--full", "--load-in-4bit")
    assert refused.exit_code == 2 and "drop --load-in-4bit" in refused.stderr
    result = _sft(ws, tiny_model, 3, "--full")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["val_actions"]["turns"] > 0
    stage = json.loads((ws / "sft" / "stage.json").read_text())
    assert stage["method"] == "full" and stage["base_model"]["path"] == str(tiny_model.resolve())
    assert not (ws / "sft" / "adapter").exists() and not list((ws / "sft" / "model").glob("adapter_*"))
    before, after = load_file(next(tiny_model.glob("*.safetensors"))), load_file(ws / "sft" / "model" / "model.safetensors")
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert len(changed) == len(before)  # every weight trained, embeddings and norms included

    workspace = Workspace(ws)
    assert workspace.trained_weights("sft") == (ws / "sft" / "model", None)
    assert starting_point(Recipe(), workspace) == (ws / "sft" / "model", None)  # grpo puts a fresh adapter on it

    out = tmp_path / "exported"
    exported = evoh("export", "-w", str(ws), "--dtype", "fp32", "--out", str(out), "--json")
    assert exported.exit_code == 0, exported.stderr
    assert json.loads(exported.stdout)["max_logit_difference"] < 1e-5
    assert "every weight fine-tuned" in (out / "README.md").read_text()
    reloaded = AutoModelForCausalLM.from_pretrained(out)
    assert all(torch.equal(p, after[name]) for name, p in reloaded.state_dict().items() if name in after)
