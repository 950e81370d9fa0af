"""`evoh grpo` on CPU with the tiny model on MiniHouse games (the loop is the same on either world; MiniHouse
needs no engine processes, so these run in a fraction of the time): the adapter learns, every figure is
written, a checkpoint resumes to exactly the run that was interrupted, and two gloo processes share an update."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoh.harness.experience import Bank
from evoh.policy.local import native_bf16
from tests.cli_runner import evoh

pytest.importorskip("trl")

METRICS = {
    "update",
    "episodes",
    "errors",
    "success",
    "reward_mean",
    "reward_std",
    "reward",
    "lambda_div",
    "meta_actions",
    "meta_per_episode",
    "meta_rate",
    "meta_rate_reinforced",
    "meta_rate_suppressed",
    "groups",
    "meta_idle",
    "revisits",
    "invalid_rate",
    "env_steps",
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "loss",
    "pg_loss",
    "kl",
    "kl_capped",
    "entropy",
    "ratio",
    "clip_fraction",
    "grad_norm",
    "lr",
    "sft_loss",
    "samples",
    "groups_trained",
    "rollout_seconds",
    "update_seconds",
}


@pytest.fixture(scope="module")
def trained(minihouse_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose sft stage finished (a few steps on expert turns), with one game's turns held out."""
    ws = tmp_path_factory.mktemp("ws")
    assert evoh("collect", "-w", str(ws), "--kind", "minihouse", "--split", "valid_seen", "--limit", "2").exit_code == 0
    assert evoh("refine", "-w", str(ws), "--val-fraction", "0.5").exit_code == 0
    done = evoh(
        "sft",
        "-w",
        str(ws),
        "--model",
        str(minihouse_model),
        "--max-steps",
        "3",
        "--lora-r",
        "8",
        "--lora-alpha",
        "16",
        "--train-embeddings",
        "--lr",
        "5e-3",
        "--set",
        "sft.batch_size=2",
        "--set",
        "sft.per_device_batch=2",
        "--set",
        "sft.max_length=1024",
    )
    assert done.exit_code == 0, done.stderr
    return ws


def _grpo(ws: Path, updates: int, *extra: str):
    return evoh(
        "grpo",
        "-w",
        str(ws),
        "--updates",
        str(updates),
        "--tasks-per-update",
        "2",
        "--group-size",
        "2",
        "--max-steps",
        "5",
        "--lr",
        "1e-3",
        "--kind",
        "minihouse",
        "--set",
        "grpo.max_tokens=24",
        "--set",
        "grpo.val_every=1",
        "--set",
        "grpo.val_limit=2",
        "--set",
        "grpo.save_every=1",
        "--set",
        "grpo.micro_batch_tokens=4096",
        "--set",
        "env.max_steps=3",
        "--set",
        "model.max_tokens=24",
        "--json",
        *extra,
    )


def _adapter(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path / "adapter_model.safetensors")


@pytest.mark.slow
def test_two_updates_train_write_every_figure_and_resume_exactly(trained: Path, tmp_path: Path):
    import torch

    first = _grpo(trained, 2)
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["updates"] == 2
    grpo = trained / "grpo"
    before, after = _adapter(trained / "sft" / "adapter"), _adapter(grpo / "adapter")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the SFT adapter moved

    metrics = [json.loads(line) for line in (grpo / "metrics.jsonl").read_text().splitlines()]
    assert [m["update"] for m in metrics] == [0, 1]
    for m in metrics:
        assert METRICS <= m.keys(), METRICS - m.keys()
        assert m["episodes"] == 4 and m["samples"] > 0 and m["groups_trained"] == 2 and m["completion_tokens"] > 0
        assert set(m["reward"]) == {"success", "efficiency", "diversity", "spam", "invalid", "idle_meta"}
        assert set(m["meta_per_episode"]) == {"track", "commit", "recall", "note"}
        assert m["ratio"] == pytest.approx(1.0, abs=1e-4)  # one optimizer step per update: π = π_old at the step
    assert metrics[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # the reference is the SFT policy the run starts from
    assert metrics[1]["kl"] >= 0.0
    assert metrics[0]["lambda_div"] == 1.0 > metrics[1]["lambda_div"]
    validation = [json.loads(line) for line in (grpo / "validation.jsonl").read_text().splitlines()]
    assert [v["update"] for v in validation] == [0, 1, 2] and all(v["episodes"] == 2 for v in validation)
    drift = [v["drift"] for v in validation]  # on refine's held-out turns, against the SFT policy the run started from
    assert drift[0]["kl"] == pytest.approx(0.0, abs=1e-6) and drift[0]["flips"] == 0.0
    assert drift[2]["kl"] > drift[0]["kl"] and drift[0]["tokens"] == drift[2]["tokens"] > 0
    plotted = evoh("plot", str(trained), "--json", "--out", str(tmp_path / "plots"))
    assert plotted.exit_code == 0, plotted.stderr
    assert (
        json.loads(plotted.stdout)["drift"] == {"first": drift[0], "last": drift[2]}
        and (tmp_path / "plots" / "success.png").exists()
    )
    rollouts = [json.loads(line) for line in (grpo / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 8 and {r["rollout"] for r in rollouts} == {0, 1}
    for u in (0, 1):  # each rollout's reward and its advantage within its group of two, every one trained
        pairs = {}
        for r in (r for r in rollouts if r["update"] == u):
            pairs.setdefault(r["task"], []).append(r)
        for a, b in pairs.values():
            assert a["advantage"] == pytest.approx(-b["advantage"], abs=1e-3) and a["trained"] and b["trained"]
            assert (a["reward"] > b["reward"]) == (a["advantage"] > 0) or a["reward"] == b["reward"]
            for r in (a, b):  # the parts are what a reader needs to see which term decided (a capped spam term, say)
                assert sum(r["reward_parts"].values()) == pytest.approx(r["reward"], abs=1e-3)
                assert r["reward_parts"]["success"] == 10.0 * r["won"] and r["revisits"] >= 0 <= r["repeats"]
                assert r["reward_parts"]["spam"] == pytest.approx(-0.1 * min(r["repeats"], 10))
        ends = [{a["won"], b["won"]} for a, b in pairs.values()]
        assert metrics[u]["groups"] == {
            "all_lost": ends.count({False}), "contrasting": ends.count({True, False}), "all_won": ends.count({True})
        }  # fmt: skip
    # the rollouts start from the teacher's bank (what recall answered in the SFT examples), frozen within an update
    start = Bank.load(trained / "collect" / "bank.json").digest()
    assert [len({r["bank"] for r in rollouts if r["update"] == u}) for u in (0, 1)] == [1, 1]
    assert {r["bank"] for r in rollouts if r["update"] == 0} == {start} != {r["bank"] for r in rollouts if r["update"] == 1}
    for step in ("step_000001", "step_000002"):
        names = {p.name for p in (grpo / "checkpoints" / step).iterdir()}
        assert {"adapter", "optimizer.pt", "scheduler.pt", "rng_rank0.pt", "bank.json", "state.json"} <= names
    stage = json.loads((grpo / "stage.json").read_text())
    assert stage["start_bank"]["path"] == str(trained / "collect" / "bank.json")
    assert (
        stage["updates"] == 2
        and stage["protocol"]["charge_meta_actions"]
        and stage["protocol"]["max_steps"] == 5
        and stage["precision"] == ("bf16" if native_bf16("cpu") else "fp32")
    )

    # interrupted after update 1: resume from step_000001 redoes update 2 exactly as the first run did it
    copy = tmp_path / "ws"
    shutil.copytree(trained, copy)
    shutil.rmtree(copy / "grpo" / "checkpoints" / "step_000002")
    (copy / "grpo" / "stage.json").unlink()
    again = _grpo(copy, 2)
    assert again.exit_code == 2 and "--resume" in again.stderr  # never silently restarts over checkpoints
    other_lr = _grpo(copy, 2, "--resume", "--set", "grpo.lr=0.5")
    assert other_lr.exit_code == 2 and "other settings or inputs (grpo.lr)" in other_lr.stderr  # never mixes two runs
    resumed = _grpo(copy, 2, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    redone = [json.loads(line) for line in (copy / "grpo" / "metrics.jsonl").read_text().splitlines()]
    timing = {"rollout_seconds", "update_seconds"}
    assert [{k: v for k, v in m.items() if k not in timing} for m in redone] == [
        {k: v for k, v in m.items() if k not in timing} for m in metrics
    ]
    final = _adapter(copy / "grpo" / "adapter")
    assert all(torch.equal(final[k], after[k]) for k in after)

    # a finished run continues for more updates from its last checkpoint
    more = _grpo(trained, 3, "--resume")
    assert more.exit_code == 0, more.stderr
    assert [json.loads(line)["update"] for line in (grpo / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]


def test_guided_rollouts_train_the_guided_policy(trained: Path, tmp_path: Path):
    copy = tmp_path / "ws"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
    run = _grpo(copy, 1, "--set", "model.guided=true", "--set", "grpo.max_tokens=40", "--set", "grpo.val_every=0")
    assert run.exit_code == 0, run.stderr
    [metrics] = [json.loads(line) for line in (copy / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert metrics["invalid_rate"] == 0.0 and metrics["samples"] > 0
    # log-probs over the ids guidance allowed, the same in the policy's and the reference's pass: no KL at the start
    assert metrics["kl"] == pytest.approx(0.0, abs=1e-6) and metrics["ratio"] == pytest.approx(1.0, abs=1e-4)
    rollouts = [json.loads(line) for line in (copy / "grpo" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 4 and all(r["invalid_actions"] == 0 for r in rollouts)
    assert json.loads((copy / "grpo" / "stage.json").read_text())["guided"] is True


@pytest.mark.parametrize("which", ["contrasting", "won"])
def test_games_that_all_lost_teach_nothing_unless_every_game_is_trained(trained: Path, tmp_path: Path, which: str):
    import torch

    copy = tmp_path / "ws"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
    run = _grpo(copy, 2, "--set", f"grpo.train_groups={which}", "--set", "grpo.val_every=0", "--set", "grpo.scheduler=linear")
    assert run.exit_code == 0, run.stderr
    rollouts = [json.loads(line) for line in (copy / "grpo" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 8 and not any(r["won"] for r in rollouts)  # five steps: the tiny model wins none
    metrics = [json.loads(line) for line in (copy / "grpo" / "metrics.jsonl").read_text().splitlines()]
    for m in metrics:
        assert METRICS <= m.keys() and m["samples"] == 0 and m["groups_trained"] == 0
        assert m["kl"] is None and m["loss"] is None and m["grad_norm"] is None and m["sft_loss"] is None  # no step taken
    assert [m["lr"] for m in metrics] == pytest.approx([5e-4, 0.0])  # the schedule still follows the updates
    before, after = _adapter(copy / "sft" / "adapter"), _adapter(copy / "grpo" / "adapter")
    assert all(torch.equal(before[k], after[k]) for k in before)  # not one optimizer step


def test_above_mean_trains_only_the_rollouts_that_beat_their_group(trained: Path, tmp_path: Path):
    copy = tmp_path / "ws"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
    run = _grpo(  # guided: valid turns, which differ in the verbs they use and so in the diversity bonus
        copy,
        1,
        "--set",
        "grpo.train_rollouts=above_mean",
        "--set",
        "grpo.group_size=3",
        "--set",
        "grpo.val_every=0",
        "--set",
        "model.guided=true",
        "--set",
        "grpo.max_tokens=40",
    )
    assert run.exit_code == 0, run.stderr
    rollouts = [json.loads(line) for line in (copy / "grpo" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 6 and all(r["trained"] == (r["advantage"] > 0) for r in rollouts)
    assert any(r["advantage"] > 0 for r in rollouts) and any(r["advantage"] < 0 for r in rollouts)
    metrics = json.loads((copy / "grpo" / "metrics.jsonl").read_text())
    assert 0 < metrics["samples"] < sum(r["turns"] for r in rollouts)  # the worse rollouts' turns were left out


def test_a_greedy_rollout_per_group_plays_as_evaluation_would_and_is_trained(trained: Path, tmp_path: Path):
    runs = {}
    for seed in (0, 1):  # two games only, so both seeds draw the same ones
        copy = tmp_path / f"ws{seed}"
        shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
        run = _grpo(
            copy,
            1,
            "--set",
            "grpo.greedy_rollout=true",
            "--set",
            "grpo.group_size=3",
            "--set",
            "grpo.val_every=0",
            "--set",
            "grpo.limit=2",
            "--set",
            f"grpo.seed={seed}",
            "--set",
            "model.guided=true",
            "--set",
            "grpo.max_tokens=40",
        )
        assert run.exit_code == 0, run.stderr
        rollouts = [json.loads(line) for line in (copy / "grpo" / "rollouts.jsonl").read_text().splitlines()]
        assert len(rollouts) == 6 and [r["greedy"] for r in rollouts] == [r["rollout"] == 2 for r in rollouts]
        metrics = json.loads((copy / "grpo" / "metrics.jsonl").read_text())
        assert metrics["greedy"]["episodes"] == 2 and metrics["samples"] == sum(
            r["turns"] for r in rollouts
        )  # its turns train too
        runs[seed] = rollouts
    plotted = evoh("plot", str(copy), "--json")  # the last run's; the greedy rollouts' success is a curve of its own
    assert plotted.exit_code == 0, plotted.stderr
    assert json.loads(plotted.stdout)["greedy_success"] == {
        "first": metrics["greedy"]["success"],
        "last": metrics["greedy"]["success"],
    }

    def played(rollouts: list[dict], greedy: bool) -> list:
        return [
            (r["task"], r["turns"], r["meta"], r["idle_meta"], r["invalid_actions"]) for r in rollouts if r["greedy"] == greedy
        ]

    assert played(runs[0], True) == played(runs[1], True)  # greedy: the sampling seed changes nothing
    assert played(runs[0], False) != played(runs[1], False)


def test_training_games_can_be_limited_to_task_types(trained: Path, tmp_path: Path):
    copy = tmp_path / "ws"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
    run = _grpo(copy, 1, "--set", 'grpo.task_types=["look", "pick_heat_then_place_in_recep"]', "--set", "grpo.val_every=0")
    assert run.exit_code == 0, run.stderr
    rollouts = [json.loads(line) for line in (copy / "grpo" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 4
    assert {r["task"].split("/")[1].split("-")[0] for r in rollouts} <= {"look", "heat"}  # a short or a long type name


def test_training_games_can_be_a_list_and_the_run_is_keyed_by_the_games_it_names(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from evoh.stages import grpo
    from evoh.workspace import fingerprint

    copy = tmp_path / "ws"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
    listed = tmp_path / "games.txt"
    listed.write_text("# two games\ntrain/look-00007\n\ntrain/cool-00003\n")
    update = grpo.run_update

    def edited_during_the_run(*args, **kwargs):
        listed.write_text("train/pick-00001\n")  # the run has read its list: what it trains on and records stays
        return update(*args, **kwargs)

    monkeypatch.setattr(grpo, "run_update", edited_during_the_run)
    run = _grpo(copy, 1, "--games", str(listed), "--set", "grpo.val_every=0")
    assert run.exit_code == 0, run.stderr
    rollouts = [json.loads(line) for line in (copy / "grpo" / "rollouts.jsonl").read_text().splitlines()]
    assert {r["task"] for r in rollouts} == {"train/look-00007", "train/cool-00003"}
    key = json.loads((copy / "grpo" / "run.json").read_text())
    assert "games.txt" not in json.dumps(key)  # the games named, not the list's path
    recorded = json.loads((copy / "grpo" / "stage.json").read_text())["settings"]["grpo"]["games"]
    assert recorded == fingerprint(sorted(["train/look-00007", "train/cool-00003"]))
    monkeypatch.undo()

    moved = tmp_path / "moved.txt"
    moved.write_text("train/cool-00003\ntrain/look-00007\ntrain/cool-00003\n")  # other order, a repeat: the same games
    same = _grpo(copy, 2, "--games", str(moved), "--set", "grpo.val_every=0", "--resume")
    assert same.exit_code == 0, same.stderr
    moved.write_text("train/look-00008\ntrain/cool-00003\n")
    other = _grpo(copy, 3, "--games", str(moved), "--set", "grpo.val_every=0", "--resume")
    assert other.exit_code == 2 and "grpo.games" in other.stderr
    moved.write_text("train/look-99999999\n")
    fresh = tmp_path / "fresh"
    shutil.copytree(trained, fresh, ignore=shutil.ignore_patterns("grpo"))
    unknown = _grpo(fresh, 1, "--games", str(moved))
    assert unknown.exit_code == 2 and "not playable train games" in unknown.stderr
    assert not (fresh / "grpo").exists()


def test_a_game_list_is_checked_before_any_stage_and_absent_from_keys_without_one(tmp_path: Path):
    from evoh.config import Recipe
    from evoh.errors import EvohError
    from evoh.grpo.settings import check_settings
    from evoh.stages import grpo
    from evoh.workspace import Workspace

    assert "games" not in grpo.settings(Recipe(), Workspace(tmp_path))["grpo"]  # earlier runs keep their keys
    recipe = Recipe()
    recipe.grpo.games = str(tmp_path / "missing.txt")
    with pytest.raises(EvohError, match="cannot read the game list"):
        check_settings(recipe)


@pytest.mark.parametrize("continue_adapter", [True, False])
def test_the_reference_is_the_policy_the_run_starts_from(trained: Path, minihouse_model: Path, continue_adapter: bool):
    import torch

    from evoh.config import GrpoConfig
    from evoh.grpo.model import load_trainable, reference_policy

    adapter = trained / "sft" / "adapter" if continue_adapter else None
    _, model = load_trainable(minihouse_model, adapter, GrpoConfig(lora_r=4, lora_alpha=8), "cpu", reference=True)
    ids = torch.tensor([[5, 17, 40, 99, 3]])
    with torch.no_grad():
        start = model(input_ids=ids).logits
        for name, param in model.named_parameters():
            if param.requires_grad:
                param.add_(0.5 * torch.randn_like(param))  # what training does to the trainable weights only
        moved = model(input_ids=ids).logits
        with reference_policy(model):
            reference = model(input_ids=ids).logits
        after = model(input_ids=ids).logits
    assert not torch.allclose(moved, start, atol=1e-3)
    assert torch.allclose(reference, start, atol=1e-6)
    assert torch.equal(after, moved)  # leaving the block brings the trained policy back
    assert all(p.requires_grad for n, p in model.named_parameters() if "default" in n)


def test_drift_is_the_kl_and_the_changed_argmax_on_held_out_responses(trained: Path, minihouse_model: Path):
    import torch
    from accelerate import Accelerator
    from transformers import AutoTokenizer

    from evoh.config import GrpoConfig
    from evoh.grpo.anchor import sft_examples
    from evoh.grpo.model import load_trainable, reference_policy
    from evoh.grpo.validation import policy_drift

    tokenizer = AutoTokenizer.from_pretrained(trained / "sft" / "adapter")
    examples = sft_examples(trained / "refine" / "val.jsonl", tokenizer, limit=5)
    assert len(examples) == 5
    g = GrpoConfig(lora_r=4, lora_alpha=8, micro_batch_tokens=2048)  # several left-padded batches
    _, model = load_trainable(minihouse_model, trained / "sft" / "adapter", g, "cpu", reference=True)
    accelerator = Accelerator(cpu=True)
    assert policy_drift(accelerator, model, examples, g, tokenizer.pad_token_id) == {
        "kl": pytest.approx(0.0, abs=1e-6),
        "flips": 0.0,
        "tokens": sum(len(e.completion) for e in examples),
    }
    torch.manual_seed(0)
    with torch.no_grad():
        for _, param in model.named_parameters():
            if param.requires_grad:
                param.add_(0.05 * torch.randn_like(param))
    drift = policy_drift(accelerator, model, examples, g, tokenizer.pad_token_id)

    def response_logp(example):  # each example alone, unpadded: the distributions before its response tokens
        ids = torch.tensor([example.prompt + example.completion])
        return model(input_ids=ids).logits[0, len(example.prompt) - 1 : -1].log_softmax(-1)

    kl, flips, tokens = 0.0, 0, 0
    with torch.no_grad():
        for example in examples:
            policy = response_logp(example)
            with reference_policy(model):
                reference = response_logp(example)
            kl += float((policy.exp() * (policy - reference)).sum())
            flips += int((policy.argmax(-1) != reference.argmax(-1)).sum())
            tokens += policy.shape[0]
    assert drift["tokens"] == tokens and drift["kl"] == pytest.approx(kl / tokens, rel=1e-3, abs=1e-7) and drift["kl"] > 0
    assert drift["flips"] == pytest.approx(flips / tokens, abs=1.5 / tokens)  # padding may tip an exact tie


def test_bad_settings_are_refused_with_the_fix(trained: Path, minihouse_model: Path, tmp_path: Path):
    cold = evoh("grpo", "-w", str(tmp_path))
    assert cold.exit_code == 2 and "evoh sft" in cold.stderr
    greedy = evoh("grpo", "-w", str(trained), "--set", "grpo.temperature=0")
    assert greedy.exit_code == 2 and "temperature" in greedy.stderr
    no_model = evoh("grpo", "-w", str(tmp_path), "--from", "none")
    assert no_model.exit_code == 2 and "--model" in no_model.stderr
    no_bank = evoh("grpo", "-w", str(tmp_path), "--from", "none", "--model", str(minihouse_model), "--bank", "collect")
    assert no_bank.exit_code == 2 and "no finished collect stage" in no_bank.stderr and "grpo.bank=''" in no_bank.stderr
    misspelt = evoh("grpo", "-w", str(trained), "--set", 'grpo.task_types=["pik"]')
    assert misspelt.exit_code == 2 and "'pik'" in misspelt.stderr and "pick, look" in misspelt.stderr


def test_rollouts_use_vllm_only_where_it_can_serve_them(tmp_path: Path):
    import importlib.util

    import torch

    from evoh.errors import EvohError
    from evoh.policy.vllm_engine import choose_generator

    # guided rollouts go to vLLM only when asked for: its grammar keeps no tokens back to close the action
    assert choose_generator("auto", None, guided=True) == "transformers"
    if importlib.util.find_spec("vllm") and torch.cuda.is_available():
        pytest.skip("vLLM can serve here")
    assert choose_generator("auto", None) == "transformers"
    assert choose_generator("transformers", None) == "transformers"
    with pytest.raises(EvohError) as refused:
        choose_generator("vllm", None)
    assert "grpo.generator = auto" in refused.value.hint
    with pytest.raises(EvohError) as refused:  # guided rollouts are refused for the same reason, no other
        choose_generator("vllm", None, guided=True)
    assert "vllm package is not installed" in str(refused.value) or "CUDA" in str(refused.value)


def test_two_gloo_processes_share_an_update(trained: Path, minihouse_model: Path, tmp_path: Path):
    import os
    import subprocess
    import sys

    (tmp_path / "refine").mkdir()
    shutil.copy(trained / "refine" / "val.jsonl", tmp_path / "refine" / "val.jsonl")  # held-out turns the drift is measured on
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "-m",
        "evoh",
        "grpo",
        "-w",
        str(tmp_path),
        "--from",
        "none",
        "--model",
        str(minihouse_model),
        "--updates",
        "1",
        "--tasks-per-update",
        "2",
        "--group-size",
        "2",
        "--max-steps",
        "4",
        "--kind",
        "minihouse",
        "--set",
        "grpo.max_tokens=16",
        "--set",
        "grpo.val_every=1",
        "--set",
        "grpo.val_limit=2",
        "--set",
        "env.max_steps=3",
        "--set",
        "model.max_tokens=16",
        "--set",
        "grpo.drift_examples=3",
        "--json",
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["updates"] == 1  # one process reports
    stage = json.loads((tmp_path / "grpo" / "stage.json").read_text())
    assert stage["processes"] == 2
    (metrics,) = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert metrics["episodes"] == 4  # both processes' episodes, gathered
    validation = [json.loads(line) for line in (tmp_path / "grpo" / "validation.jsonl").read_text().splitlines()]
    assert [v["episodes"] for v in validation] == [2, 2]
    assert validation[0]["drift"]["kl"] == pytest.approx(0.0, abs=1e-6) and validation[1]["drift"]["kl"] >= 0.0
    from transformers import AutoTokenizer

    from evoh.grpo.anchor import sft_examples

    examples = sft_examples(tmp_path / "refine" / "val.jsonl", AutoTokenizer.from_pretrained(minihouse_model), 3)
    assert (
        validation[0]["drift"]["tokens"] == sum(len(e.completion) for e in examples) == validation[1]["drift"]["tokens"]
    )  # both shares
    ranks = {p.name for p in (tmp_path / "grpo" / "checkpoints" / "step_000001").iterdir()}
    assert {"rng_rank0.pt", "rng_rank1.pt"} <= ranks


def test_the_sft_anchor_reads_refines_examples_as_the_rollouts_turns_are_encoded(trained: Path, tmp_path: Path):
    from transformers import AutoTokenizer

    from evoh.errors import EvohError
    from evoh.grpo.anchor import sft_examples
    from evoh.grpo.inputs import sft_examples_file
    from evoh.workspace import Workspace

    tokenizer = AutoTokenizer.from_pretrained(trained / "sft" / "adapter")
    path = sft_examples_file(Workspace(trained))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    examples = sft_examples(path, tokenizer)
    assert len(examples) == len(rows) > 0
    for row, example in zip(rows, examples, strict=True):
        system, user, answer = row["messages"]
        prompt = tokenizer.apply_chat_template([system, user], tokenize=False, add_generation_prompt=True)
        assert tokenizer.decode(example.prompt) == prompt  # the prompt a rollout's turn starts from
        assert tokenizer.decode(example.prompt + example.completion) == tokenizer.apply_chat_template(
            row["messages"], tokenize=False
        )
        action = answer["content"][answer["content"].index("<action>") :]
        assert action in tokenizer.decode(example.completion)  # the response is what the loss is on
    with pytest.raises(EvohError, match="evoh refine"):
        sft_examples_file(Workspace(tmp_path))
    copy = tmp_path / "ws"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
    run = _grpo(copy, 1, "--set", "grpo.sft_weight=0.5", "--set", "grpo.sft_examples=2", "--set", "grpo.val_every=0")
    assert run.exit_code == 0, run.stderr
    metrics = json.loads((copy / "grpo" / "metrics.jsonl").read_text())
    assert metrics["sft_loss"] > 0 and metrics["samples"] > 0


def test_a_frozen_bank_ends_the_run_as_it_started(trained: Path, tmp_path: Path):
    def entries(path: Path) -> list:
        return json.loads(path.read_text())["entries"]

    start = entries(trained / "collect" / "bank.json")
    for frozen in (True, False):
        copy = tmp_path / f"ws-{frozen}"
        shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("grpo"))
        run = _grpo(copy, 1, "--set", f"grpo.freeze_bank={str(frozen).lower()}", "--set", "grpo.val_every=0")
        assert run.exit_code == 0, run.stderr
        assert (entries(copy / "grpo" / "bank.json") == start) == frozen  # unfrozen, the rollouts' lessons enter it


def test_guided_rollouts_through_vllm_are_scored_over_the_masks_their_grammar_applied(
    stand_in_vllm, trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from evoh.grpo import objective
    from evoh.policy.turn_grammar import GrammarMasks

    scored = []  # each micro-batch's restriction: which positions were narrowed, by the rebuilt masks
    restrict = objective.guided_restriction

    def watched(batch, vocabulary, device="cpu"):
        restriction = restrict(batch, vocabulary, device)
        scored.append((vocabulary, restriction, sum(len(s.completion) for s in batch)))
        return restriction

    monkeypatch.setattr("evoh.grpo.optimise.guided_restriction", watched)
    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    shutil.rmtree(ws / "grpo", ignore_errors=True)
    result = _grpo(ws, 1, "--set", "grpo.generator=vllm", "--set", "model.guided=true")
    assert result.exit_code == 0, result.stderr
    assert scored and all(isinstance(vocabulary, GrammarMasks) for vocabulary, _, _ in scored)
    for _, (rows, _, allowed), tokens in scored:  # every sampled token was scored over its mask, no token over none
        assert len(rows) == tokens and 0 < allowed.sum(1).min() and allowed.sum(1).max() < allowed.shape[1]
    rollouts = [c for c in stand_in_vllm.calls if c["params"][0]["temperature"] > 0]
    assert rollouts and all("grammar" in p["structured_outputs"]["structured"] for c in rollouts for p in c["params"])
    (metrics,) = [json.loads(line) for line in (ws / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert metrics["samples"] > 0 and metrics["invalid_rate"] == 0.0
    assert all(isinstance(metrics[k], float) and metrics[k] == metrics[k] for k in ("loss", "entropy", "ratio"))
    stage = json.loads((ws / "grpo" / "stage.json").read_text())
    assert stage["generator"] == "vllm" and stage["guided"] is True
