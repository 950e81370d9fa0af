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


def test_a_refusal_names_each_changed_setting_and_input_by_its_recipe_key(tmp_path: Path):
    record_run(tmp_path, run_key("grpo", SETTINGS, {"base_model": {"config_sha256": "a"}}))
    other = {**SETTINGS, "grpo": {**SETTINGS["grpo"], "lr": 0.5, "kl": 0.1}}
    with pytest.raises(EvohError, match=r"other settings \(grpo\.kl, grpo\.lr, inputs\.base_model\.config_sha256\)"):
        check_same_run(tmp_path, run_key("grpo", other, {"base_model": {"config_sha256": "b"}}), "delete it")
    flat = run_key("sft", {"lr": 1e-3, "rank": 8}, {})
    assert changed_settings(flat, run_key("sft", {"lr": 1e-3, "rank": 16}, {})) == ["sft.rank"]


def test_the_first_check_records_the_key_and_the_same_key_passes(tmp_path: Path):
    key = run_key("collect", SETTINGS, {})
    check_same_run(tmp_path, key, "")
    assert json.loads((tmp_path / RUN_FILE).read_text()) == key
    check_same_run(tmp_path, run_key("collect", SETTINGS, {}), "")
    assert run_settings(tmp_path) == SETTINGS and run_settings(tmp_path / "absent") == {}


def test_a_run_file_written_before_keys_named_their_stage_still_resumes(tmp_path: Path):
    (tmp_path / RUN_FILE).write_text(json.dumps(SETTINGS))  # the settings alone, as collect and eval wrote them
    check_same_run(tmp_path, run_key("eval", SETTINGS, {}), "")
    assert run_settings(tmp_path) == SETTINGS
    with pytest.raises(EvohError, match=r"\(env\.kind\)"):
        check_same_run(tmp_path, run_key("eval", {**SETTINGS, "env": {"kind": "alfworld"}}, {}), "")
