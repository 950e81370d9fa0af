"""`evoh run`: a recipe's stages end to end on real games with the tiny model; a rerun skips what is done,
and a changed section reruns that stage and what follows it, nothing before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoh.workspace import fingerprint, read_jsonl, weights_identity
from tests.cli_runner import evoh

pytest.importorskip("trl")
pytestmark = pytest.mark.engine


def _recipe(tmp_path: Path, model: Path, data: Path) -> Path:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f"""
[run]
stages = ["model", "collect", "refine", "sft", "grpo", "eval", "export"]
eval_from = ["grpo"]
eval_splits = ["valid_seen"]
export_dtype = "fp32"

[env]
data = "{data}"
max_steps = 3
workers = 1

[collect]
split = "valid_seen"
limit = 2

[refine]
val_fraction = 0.0

[sft]
model = "{model}"
max_steps = 2
lora_r = 4
lora_alpha = 8
batch_size = 2
per_device_batch = 2
max_length = 1024

[grpo]
updates = 1
tasks_per_update = 1
group_size = 2
max_steps = 3
max_tokens = 12
val_every = 0
save_every = 1

[model]
max_tokens = 12

[eval]
limit = 1
"""
    )
    return recipe


def _stages(result) -> dict[str, bool]:
    assert result.exit_code == 0, result.stderr
    return {step["stage"]: step["ran"] for step in json.loads(result.stdout)["stages"]}


@pytest.mark.slow
def test_run_plays_the_pipeline_then_skips_what_is_done(tmp_path: Path, tiny_model: Path, alfworld_data: Path):
    recipe, ws = _recipe(tmp_path, tiny_model, alfworld_data), tmp_path / "ws"
    data = _stages(evoh("run", str(recipe), "-w", str(ws), "--until", "refine", "--json"))
    assert data == {"model": False, "collect": True, "refine": True} and not (ws / "sft").exists()
    first = _stages(evoh("run", str(recipe), "-w", str(ws), "--json"))  # the rest, keyed as if run in one go
    assert first == {
        "model": False,
        "collect": False,
        "refine": False,
        "sft": True,
        "grpo": True,
        "eval/grpo-valid_seen": True,
        "export": True,
    }
    for stage in ("collect", "refine", "sft", "grpo", "eval/grpo-valid_seen", "export"):
        assert (ws / stage / "stage.json").exists()
    import importlib

    from evoh.config import load_recipe
    from evoh.workspace import Workspace

    loaded = load_recipe(recipe)
    for stage in ("collect", "refine", "sft", "grpo"):  # the settings a stage declares, the pipeline's key, are recorded
        declared = importlib.import_module(f"evoh.stages.{stage}").settings(loaded, Workspace(ws))
        assert json.loads((ws / stage / "stage.json").read_text())["settings"] == json.loads(json.dumps(declared))
    assert (ws / "grpo" / "annealing.png").exists() and (ws / "grpo" / "success.png").exists()
    assert (ws / "report" / "report.md").exists() and (ws / "export" / "model" / "config.json").exists()
    summary = json.loads((ws / "eval" / "grpo-valid_seen" / "summary.json").read_text())
    assert summary["policy"]["adapter"] == str((ws / "grpo" / "adapter").resolve())
    # GRPO starts from the teacher's Experience bank; its weights are evaluated with the bank GRPO ended with
    assert json.loads((ws / "grpo" / "stage.json").read_text())["start_bank"]["path"] == str(ws / "collect" / "bank.json")
    assert summary["protocol"]["start_bank"] == str(ws / "grpo" / "bank.json")
    card = (ws / "export" / "model" / "README.md").read_text()  # the model card describes both stages and their results
    assert "Stage one, supervised fine-tuning" in card and "Stage two, cost-aware multi-turn GRPO: 1 update of" in card
    assert "| grpo-valid_seen | grpo | valid_seen |" in card

    again = _stages(evoh("run", str(recipe), "-w", str(ws), "--json"))
    assert not any(again.values())
    alone = _stages(evoh("run", str(recipe), "-w", str(ws), "--set", 'run.stages=["eval", "export"]', "--json"))
    assert alone == {"eval/grpo-valid_seen": False, "export": False}  # keyed as in the whole recipe: not measured again
    table = evoh("run", str(recipe), "-w", str(ws))  # what a person sees: stages, then the evaluations side by side
    assert table.exit_code == 0 and "skipped" in table.stdout and "evaluation runs" in table.stdout
    assert "grpo-valid_seen" in table.stdout and "done before with these settings" in table.stderr
    moved = tmp_path / "moved"
    shutil.copytree(ws, moved)  # a copied or moved workspace holds the same weights: nothing is measured again
    assert not any(_stages(evoh("run", str(recipe), "-w", str(moved), "--json")).values())

    more = _stages(evoh("run", str(recipe), "-w", str(ws), "--set", "grpo.updates=2", "--json"))
    assert more == {
        "model": False,
        "collect": False,
        "refine": False,
        "sft": False,
        "grpo": True,
        "eval/grpo-valid_seen": True,
        "export": True,
    }
    updates = [json.loads(line)["update"] for line in (ws / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert updates == [0, 1]  # continued from the checkpoint of update 1, not from zero
    summary = json.loads((ws / "eval" / "grpo-valid_seen" / "summary.json").read_text())
    assert summary["policy"]["weights"]["adapter"] == fingerprint(weights_identity(ws / "grpo" / "adapter"))

    # a changed evaluation starts over: its old episodes measured something else and are not resumed into it
    reseeded = _stages(evoh("run", str(recipe), "-w", str(ws), "--set", "grpo.updates=2", "--set", "eval.seed=1", "--json"))
    assert reseeded["eval/grpo-valid_seen"] and not reseeded["grpo"]
    records = read_jsonl(ws / "eval" / "grpo-valid_seen" / "episodes.jsonl").records
    assert len(records) == 1 and records[0]["policy"]["sampling"]["seed"] == 1

    other = evoh("run", str(recipe), "-w", str(ws), "--set", "grpo.updates=2", "--set", "grpo.lr=0.5")
    assert other.exit_code == 2 and "made with other settings" in other.stderr and "delete" in other.stderr
    assert (ws / "grpo" / "stage.json").exists()  # refused, and nothing of the earlier run is lost


def test_run_refuses_a_bad_plan(tmp_path: Path, tiny_model: Path, alfworld_data: Path):
    recipe = _recipe(tmp_path, tiny_model, alfworld_data)
    backwards = evoh("run", str(recipe), "-w", str(tmp_path / "ws"), "--set", 'run.stages=["sft", "collect"]')
    assert backwards.exit_code == 2 and "out of order" in backwards.stderr
    unknown = evoh("run", str(recipe), "-w", str(tmp_path / "ws"), "--set", 'run.eval_from=["teacher"]')
    assert unknown.exit_code == 2 and "base, sft or grpo" in unknown.stderr
    absent = evoh("run", str(recipe), "-w", str(tmp_path / "ws"), "--set", 'run.stages=["collect", "refine"]', "--until", "sft")
    assert absent.exit_code == 2 and "collect, refine" in absent.stderr and not (tmp_path / "ws").exists()


def test_plot_needs_a_grpo_run(tmp_path: Path):
    result = evoh("plot", str(tmp_path))
    assert result.exit_code == 2 and "evoh grpo -w" in result.stderr


# What each stage of two shipped recipes is keyed on, as evoh run computed it before the stages declared their own
# settings. A new setting must leave these as they are (left out at its default, or only where it applies):
# a changed key makes every existing workspace run that stage again. Change them only on purpose.
PINNED_KEYS = {
    "tiny-cpu": {"collect": "58a26cdbbcb68c3eb170", "refine": "dfba0add4b923d2b7ec6", "sft": "ae82db7b107b783fdb79",
                 "grpo": "2ebd8198c24c757cb639", "eval": "96842d5ad2916d12f2fc"},
    "minihouse-cpu": {"collect": "59b7e37586efe94ff494", "refine": "dfba0add4b923d2b7ec6", "sft": "8e7d7988171aecc074b4",
                      "grpo": "04ad93a8e91067c4b1ae", "eval": "eaf288bcb0d636f1783f"},
}  # fmt: skip


def _stage_keys(recipe, ws) -> dict[str, str]:
    import copy

    from evoh.stages import collect, evaluate, grpo, refine, sft

    keys = {m.__name__.rsplit(".", 1)[1]: fingerprint(m.settings(recipe, ws)) for m in (collect, refine, sft, grpo)}
    measured = copy.deepcopy(recipe)  # as evoh run evaluates the sft weights on valid_seen
    measured.eval.policy, measured.eval.split, measured.eval.name = "local", "valid_seen", "sft-valid_seen"
    measured.model.temperature = measured.run.eval_temperature
    measured.model.model, measured.model.adapter = str(ws.root / "sft" / "model"), ""
    keys["eval"] = fingerprint(evaluate.settings(measured, ws))
    return keys


@pytest.mark.parametrize("name", sorted(PINNED_KEYS))
def test_the_settings_stages_are_keyed_on_stay_as_they_were(name: str, tmp_path: Path):
    """On TextWorld, the engine every run before env.engine used, the keys are as they were; on the native engine
    the ALFWorld stages that play games are new runs, so that no native run resumes a TextWorld one."""
    from evoh.config import load_recipe
    from evoh.workspace import Workspace

    ws = Workspace(tmp_path)
    keys = _stage_keys(load_recipe(Path(name), ['env.engine="textworld"']), ws)
    assert keys == PINNED_KEYS[name]
    native = _stage_keys(load_recipe(Path(name)), ws)
    changed = {stage for stage in keys if native[stage] != keys[stage]}
    assert changed == (set() if "minihouse" in name else {"collect", "grpo", "eval"})
