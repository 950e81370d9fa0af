"""Which SFT checkpoint `evoh sft --resume` continues from when a kill cut the newest save short."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from evoh.sft.checkpoints import incomplete, resumable_checkpoint

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def _checkpoint(root: Path, step: int, weights: str = "adapter_model.safetensors") -> Path:
    """A checkpoint as the trainer leaves it: weights first, ``trainer_state.json`` last."""
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    safetensors_numpy.save_file({"lora_A": np.ones((8, 64), dtype=np.float32)}, str(folder / weights))
    (folder / "trainer_state.json").write_text('{"global_step": %d}' % step)
    return folder


def _cut(file: Path, keep: int) -> None:
    file.write_bytes(file.read_bytes()[:keep])


def test_the_newest_complete_checkpoint_is_chosen_and_each_cut_one_named(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    for step in (3, 6, 9, 10, 12, 15):
        _checkpoint(tmp_path, step, "model.safetensors" if step == 6 else "adapter_model.safetensors")
    (tmp_path / "checkpoint-15" / "trainer_state.json").unlink()  # killed before the state was written
    _cut(tmp_path / "checkpoint-12" / "adapter_model.safetensors", 1000)  # killed while writing the tensors
    _cut(tmp_path / "checkpoint-10" / "adapter_model.safetensors", 20)  # killed inside the header
    _cut(tmp_path / "checkpoint-9" / "trainer_state.json", 5)
    with caplog.at_level(logging.WARNING, logger="evoh"):
        assert resumable_checkpoint(tmp_path) == tmp_path / "checkpoint-6"  # by number: 10 is newer than 9
    skipped = [r.getMessage() for r in caplog.records]
    assert [m.split(",")[0] for m in skipped] == [f"skipping {tmp_path}/checkpoint-{n}" for n in (15, 12, 10, 9)]
    assert "no trainer_state.json" in skipped[0] and "adapter_model.safetensors is unreadable" in skipped[1]
    assert "trainer_state.json is cut short" in skipped[3]
    assert incomplete(tmp_path / "checkpoint-3") is None


def test_without_a_complete_checkpoint_training_starts_over_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    (tmp_path / "checkpoint-3").mkdir()  # killed before anything was written
    with caplog.at_level(logging.WARNING, logger="evoh"):
        assert resumable_checkpoint(tmp_path) is None
    assert "no complete checkpoint" in caplog.records[-1].getMessage() and "starts again" in caplog.records[-1].getMessage()
    caplog.clear()
    assert resumable_checkpoint(tmp_path / "absent") is None and not caplog.records  # nothing to resume: nothing to say
