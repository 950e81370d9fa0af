"""`evoh refine` on an expert collection, and `evoh eval` with the expert against `evoh collect`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoh.config import load_recipe
from evoh.records import EpisodeRecord
from evoh.stages.refine import refine
from evoh.workspace import read_jsonl
from tests.cli_runner import evoh

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def workspace(alfworld_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("ws")
    result = evoh(
        "collect",
        "-w",
        str(ws),
        "--split",
        "valid_seen",
        "--limit",
        "8",
        "--data",
        str(alfworld_data),
        "--set",
        "collect.batch_size=4",
    )
    assert result.exit_code == 0, result.stderr
    return ws


def test_refine_needs_a_finished_collection(tmp_path: Path):
    result = evoh("refine", "-w", str(tmp_path))
    assert result.exit_code == 2 and "collect/stage.json is missing" in result.stderr and "evoh collect -w" in result.stderr


def test_refine_writes_chat_files_and_accounts_for_every_turn(workspace: Path):
    result = evoh("refine", "-w", str(workspace), "--val-fraction", "0.25", "--json")
    assert result.exit_code == 0, result.stderr
    counts = json.loads(result.stdout)
    report = json.loads((workspace / "refine" / "report.json").read_text())
    source = read_jsonl(workspace / "collect" / "trajectories.jsonl").records
    assert counts["episodes"]["input"] == len(source) == 8
    assert counts["turns"]["input"] == sum(len(r["trace"]) for r in source)
    turns = counts["turns"]
    assert turns["kept"] + sum(turns["dropped"].values()) == turns["input"]
    assert turns["train"] + turns["val"] == turns["kept"]
    assert counts["episodes"]["val"] == 2 and counts["episodes"]["train"] == 6
    assert sum(e["turns"] for e in report["per_episode"]) == turns["input"]
    train = read_jsonl(workspace / "refine" / "train.jsonl").records
    val = read_jsonl(workspace / "refine" / "val.jsonl").records
    assert len(train) == turns["train"] and len(val) == turns["val"]
    assert [m["role"] for m in train[0]["messages"]] == ["system", "user", "assistant"]
    assert train[0]["messages"][2]["content"].startswith("<think>")
    # the split is by episode: no episode gives examples to both files
    sources = report["examples"]
    assert {s["episode"] for s in sources["train"]}.isdisjoint({s["episode"] for s in sources["val"]})
    assert json.loads((workspace / "refine" / "stage.json").read_text())["examples"] == {"train": len(train), "val": len(val)}


def test_refine_drops_bad_turns_and_episodes_with_reasons(workspace: Path):
    records = read_jsonl(workspace / "collect" / "trajectories.jsonl").records
    broken = json.loads(json.dumps(records[:3]))
    broken[0]["won"] = False
    broken[1]["trace"][0].update(kind="malformed", valid=False, executed=False)
    broken[1]["trace"][1].update(kind="meta", valid=True, executed=False)
    broken[2]["error"] = "policy: retries exhausted"
    train, val, report = refine([EpisodeRecord.from_dict(r) for r in broken], load_recipe(None, ["refine.val_fraction=0"]))
    assert report["episodes"]["dropped"] == {"below min_score": 1, "episode error": 1}
    dropped = report["turns"]["dropped"]
    assert dropped["malformed turn"] == 1 and dropped["failed meta-action"] == 1
    assert report["turns"]["input"] == report["turns"]["kept"] + sum(dropped.values())
    assert val == [] and len(train) == report["turns"]["kept"]


def test_records_of_an_unknown_schema_are_refused(workspace: Path, tmp_path: Path):
    line = (workspace / "collect" / "trajectories.jsonl").read_text().splitlines()[0]
    future = tmp_path / "future.jsonl"
    future.write_text(line.replace('"schema":"episode/1"', '"schema":"episode/9"') + "\n")
    result = evoh("refine", "-w", str(tmp_path / "ws"), "--input", str(future))
    assert result.exit_code == 2 and "episode/9" in result.stderr
    assert evoh("show", str(future)).exit_code == 2


def test_refine_output_loads_in_datasets(workspace: Path):
    datasets = pytest.importorskip("datasets")
    evoh("refine", "-w", str(workspace))
    loaded = datasets.load_dataset("json", data_files={"train": str(workspace / "refine" / "train.jsonl")})["train"]
    assert loaded.column_names == ["messages"] and len(loaded) > 10


def test_trl_sft_trainer_accepts_the_refined_files(workspace: Path, tiny_model: Path, tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    evoh("refine", "-w", str(workspace))
    files = {name: str(workspace / "refine" / f"{name}.jsonl") for name in ("train", "val")}
    data = datasets.load_dataset("json", data_files=files)
    args = SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=2,
        assistant_only_loss=True,
        use_cpu=True,
        bf16=False,
        report_to=[],
        max_length=2048,
        logging_steps=1,
        save_strategy="no",
    )
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model),
        args=args,
        train_dataset=data["train"],
        eval_dataset=data["val"],
        processing_class=AutoTokenizer.from_pretrained(tiny_model),
    )
    labels = trainer.train_dataset[0]["labels"]
    learned = [t for t in labels if t != -100]
    assert 0 < len(learned) < len(labels)  # only the teacher's response is learned, not the prompt
    trainer.train()
    assert trainer.state.global_step == 2


def test_eval_with_the_expert_matches_collect(workspace: Path, alfworld_data: Path):
    result = evoh(
        "eval",
        "-w",
        str(workspace),
        "--policy",
        "expert",
        "--split",
        "valid_seen",
        "--limit",
        "8",
        "--data",
        str(alfworld_data),
        "--set",
        "eval.batch_size=4",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    collected = json.loads((workspace / "collect" / "summary.json").read_text())
    assert summary["success"] == collected["success"] and summary["per_type"] == collected["per_type"]
    assert summary["env_steps"] == collected["env_steps"] and summary["meta_per_episode"] == collected["meta_per_episode"]
    protocol = summary["protocol"]
    assert protocol["max_steps"] == 50 and protocol["charge_meta_actions"] is False and protocol["grammar"] == ["2.1.1"]
    assert protocol["parser"] == "turn/1" and protocol["prompt"] == "prompt/1" and protocol["policy"]["policy"] == "expert"
    assert (workspace / "eval" / "expert-valid_seen" / "episodes.jsonl").exists()
    table = evoh(
        "eval",
        "-w",
        str(workspace),
        "--split",
        "valid_seen",
        "--limit",
        "8",
        "--data",
        str(alfworld_data),
        "--set",
        "eval.batch_size=4",
    )
    assert table.exit_code == 0 and "avg" in table.stdout and "meta-actions" in table.stdout  # resumed: nothing replayed


def test_eval_starts_from_the_bank_it_is_given(workspace: Path, alfworld_data: Path):
    from evoh.harness.experience import Bank

    bank = workspace / "collect" / "bank.json"
    result = evoh(
        "eval",
        "-w",
        str(workspace),
        "--limit",
        "2",
        "--bank",
        "collect",
        "--name",
        "expert-valid_seen-collect-bank",
        "--data",
        str(alfworld_data),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["protocol"]["start_bank"] == str(bank)
    records = read_jsonl(workspace / "eval" / "expert-valid_seen-collect-bank" / "episodes.jsonl").records
    assert {r["bank"] for r in records} == {Bank.load(bank).digest()} != {Bank().digest()}  # the teacher's bank, not an empty one
    stage = json.loads((workspace / "eval" / "expert-valid_seen-collect-bank" / "stage.json").read_text())
    assert stage["inputs"]["bank"]["path"] == str(bank)

    missing = evoh(
        "eval", "-w", str(workspace), "--limit", "1", "--bank", "grpo", "--name", "no-grpo-bank", "--data", str(alfworld_data)
    )
    assert missing.exit_code == 2 and "no finished grpo stage" in missing.stderr and "evoh grpo -w" in missing.stderr
    own = evoh("collect", "-w", str(workspace), "--limit", "1", "--bank", "collect", "--data", str(alfworld_data))
    assert own.exit_code == 2 and "own bank" in own.stderr


def test_eval_plays_the_games_a_list_names(alfworld_data: Path, tmp_path: Path):
    from evoh.env.games import load_tasks

    workspace = tmp_path / "ws"  # its own: the report test reads every run of the shared workspace
    chosen = load_tasks("valid_seen", alfworld_data)[100:102]
    listing = tmp_path / "games.txt"
    listing.write_text("".join(f"{t.id}\n" for t in chosen))
    args = (
        "eval",
        "-w",
        str(workspace),
        "--split",
        "valid_seen",
        "--games",
        str(listing),
        "--name",
        "listed",
        "--data",
        str(alfworld_data),
    )
    result = evoh(*args, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["episodes"] == 2
    records = read_jsonl(workspace / "eval" / "listed" / "episodes.jsonl").records
    assert sorted(r["task"]["id"] for r in records) == [t.id for t in chosen]
    listing.write_text(f"{chosen[0].id}\n")  # another list under the same name would mix two experiments
    refused = evoh(*args)
    assert refused.exit_code == 2 and "(eval.games)" in refused.stderr
    wrong = evoh(
        "eval",
        "-w",
        str(workspace),
        "--split",
        "valid_unseen",
        "--games",
        str(listing),
        "--name",
        "wrong",
        "--data",
        str(alfworld_data),
    )
    assert wrong.exit_code == 2 and "not playable valid_unseen games" in wrong.stderr and "--split" in wrong.stderr
    assert not (workspace / "eval" / "wrong").exists()


def test_eval_ablation_runs_get_their_own_folder(workspace: Path, alfworld_data: Path):
    result = evoh(
        "eval",
        "-w",
        str(workspace),
        "--limit",
        "2",
        "--no-experience",
        "--mode",
        "inline",
        "--data",
        str(alfworld_data),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["name"] == "expert-valid_seen-no-experience" and summary["protocol"]["modules"] == ["belief", "plan"]
    assert summary["meta_per_episode"]["recall"]["attempted"] == 0


def test_report_puts_runs_side_by_side(workspace: Path, alfworld_data: Path, tmp_path: Path):
    for extra in (["--set", "eval.batch_size=4"], ["--no-experience"]):  # the settings these runs were made with
        assert evoh("eval", "-w", str(workspace), "--limit", "2", "--data", str(alfworld_data), *extra).exit_code == 0
    runs = sorted((workspace / "eval").iterdir())
    result = evoh("report", *map(str, runs), "--out", str(tmp_path / "report"))
    assert result.exit_code == 0, result.stderr
    for run in runs:
        assert run.name in result.stdout
    png = (tmp_path / "report" / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    text = (tmp_path / "report" / "report.md").read_text()
    assert text.startswith("| run | split | pick | look | clean | heat | cool | pick2 | avg |")
    assert text.count("\n| expert-valid_seen") == len(runs) and "![success per task type" in text
    # the second run is compared game by game with the first: the same two games, the teacher wins both either way
    assert "| - |\n" in text and "+0 −0 of 2 (p 1.00)" in text
    assert evoh("report", str(tmp_path)).exit_code == 2
