"""One run key decides whether a stage's directory holds the same run: what it leaves out, what a refusal
names, and that a directory written before keys named their stage still resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoh.errors import EvohError
from evoh.runs.key import RUN_FILE, changed_settings, check_same_run, key_id, record_run, run_key, run_settings

SETTINGS = {"grpo": {"lr": 1e-4, "updates": 8, "kl": 0.0}, "env": {"kind": "minihouse"}}


def test_settings_that_only_make_a_run_longer_leave_its_key_unchanged():
    longer = {**SETTINGS, "grpo": {**SETTINGS["grpo"], "updates": 16}}
    assert key_id(run_key("grpo", SETTINGS, {})) != key_id(run_key("grpo", longer, {}))
    assert run_key("grpo", SETTINGS, {}, ("grpo.updates",)) == run_key("grpo", longer, {}, ("grpo.updates",))
    assert SETTINGS["grpo"]["updates"] == 8  # the caller's settings are left as they were
    assert run_key("eval/sft-valid_seen", SETTINGS, {})["stage"] == "eval"  # every eval run is one kind of stage


def test_a_refusal_names_each_changed_setting_and_input(tmp_path: Path):
    record_run(tmp_path, run_key("grpo", SETTINGS, {"base_model": {"config_sha256": "a"}}))
    other = {**SETTINGS, "grpo": {**SETTINGS["grpo"], "lr": 0.5, "kl": 0.1}}
    with pytest.raises(EvohError, match=r"other settings or inputs \(grpo\.kl, grpo\.lr, inputs\.base_model\.config_sha256\)"):
        check_same_run(tmp_path, run_key("grpo", other, {"base_model": {"config_sha256": "b"}}), "delete it")
    flat = run_key("sft", {"lr": 1e-3, "rank": 8}, {})  # by the recipe's key, where the stage names it otherwise
    assert changed_settings(flat, run_key("sft", {"lr": 1e-3, "rank": 16}, {})) == ["sft.rank"]
    played = run_key("eval/sft-valid_seen", {"play": {"seed": 0}}, {})
    assert changed_settings(played, run_key("eval/x", {"play": {"seed": 1}}, {})) == ["eval.seed"]


def test_a_directory_without_a_key_is_not_checked_and_a_recorded_key_passes_again(tmp_path: Path):
    key = run_key("collect", SETTINGS, {})
    assert check_same_run(tmp_path, key, "") is False and not (tmp_path / RUN_FILE).exists()
    record_run(tmp_path, key)
    assert json.loads((tmp_path / RUN_FILE).read_text()) == key
    assert check_same_run(tmp_path, run_key("collect", SETTINGS, {}), "") is True
    assert run_settings(tmp_path) == SETTINGS and run_settings(tmp_path / "absent") == {}


def test_a_run_file_written_before_keys_named_their_stage_still_resumes(tmp_path: Path):
    (tmp_path / RUN_FILE).write_text(json.dumps(SETTINGS))  # the settings alone, as collect and eval wrote them
    assert check_same_run(tmp_path, run_key("eval", SETTINGS, {}), "") is True
    assert run_settings(tmp_path) == SETTINGS
    with pytest.raises(EvohError, match=r"\(env\.kind\)"):
        check_same_run(tmp_path, run_key("eval", {**SETTINGS, "env": {"kind": "alfworld"}}, {}), "")


def test_a_resumed_training_run_may_change_how_it_computes_but_not_what_it_learns():
    from evoh.config import Recipe
    from evoh.stages import grpo, sft

    recipe = Recipe()
    settings = grpo.settings(recipe, None)
    smaller = {**settings, "grpo": {**settings["grpo"], "micro_batch_tokens": 1024, "val_limit": 2, "updates": 9}}
    other = {**settings, "grpo": {**settings["grpo"], "lr": 0.5}}
    left_out = grpo.EXTENDABLE + grpo.COMPUTE_ONLY
    assert (
        run_key("grpo", smaller, {}, left_out) == run_key("grpo", settings, {}, left_out) != run_key("grpo", other, {}, left_out)
    )
    assert {"per_device_batch", "model"} <= set(sft.COMPUTE_ONLY) and not set(sft.COMPUTE_ONLY) & {"lr", "batch_size"}
