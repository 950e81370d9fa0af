"""Checkpoints and resume: everything ``--resume`` needs to continue a run exactly where it stopped.

A checkpoint ``checkpoints/step_NNNNNN/`` holds the adapter, the optimizer and scheduler states, every
process's RNG states, the Experience bank and, written last, ``state.json`` with the update counter: a
checkpoint without it is incomplete and never read.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import orjson

from evoh.errors import EvohError
from evoh.grpo.model import save_adapter
from evoh.grpo.state import TrainState
from evoh.harness.experience import Bank
from evoh.workspace import atomic_write_bytes, atomic_write_json, read_jsonl


def checkpoint_dir(directory: Path, update: int) -> Path:
    return directory / "checkpoints" / f"step_{update:06d}"


def latest_checkpoint(directory: Path) -> Path | None:
    found = sorted(p for p in (directory / "checkpoints").glob("step_*") if (p / "state.json").exists())
    return found[-1] if found else None


def save_checkpoint(state: TrainState, bank: Bank, directory: Path, update: int) -> None:
    """Adapter, optimizer, scheduler, RNG states, bank and counter after ``update`` updates."""
    import numpy as np
    import torch

    accelerator = state.accelerator
    target = checkpoint_dir(directory, update)
    target.mkdir(parents=True, exist_ok=True)
    rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, target / f"rng_rank{accelerator.process_index}.pt")
    if accelerator.is_main_process:
        save_adapter(state.unwrapped, target / "adapter")
        torch.save(state.optimizer.state_dict(), target / "optimizer.pt")
        torch.save(state.scheduler.state_dict(), target / "scheduler.pt")
        bank.save(target / "bank.json")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic_write_json(target / "state.json", {"update": update})  # last: its presence means complete


def save_final(state: TrainState, tokenizer, bank: Bank, directory: Path) -> None:
    """What the finished run leaves: the trained adapter (with the tokenizer, ready for `evoh eval`) and the bank."""
    adapter = directory / "adapter"
    if adapter.exists():
        shutil.rmtree(adapter)
    save_adapter(state.unwrapped, adapter)
    tokenizer.save_pretrained(adapter)
    bank.save(directory / "bank.json")


def load_checkpoint(state: TrainState, target: Path) -> tuple[int, Bank]:
    """Restore the state saved in ``target``; (updates done, the bank after them)."""
    import numpy as np
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(target / "adapter" / "adapter_model.safetensors", device=str(state.device))
    set_peft_model_state_dict(state.unwrapped, weights, adapter_name="default")
    state.optimizer.load_state_dict(torch.load(target / "optimizer.pt", weights_only=False))
    state.scheduler.load_state_dict(torch.load(target / "scheduler.pt", weights_only=False))
    rng_file = target / f"rng_rank{state.accelerator.process_index}.pt"
    if not rng_file.exists():
        raise EvohError(f"{target} was saved by fewer processes than run now", hint="resume with the same number of processes")
    rng = torch.load(rng_file, weights_only=False)
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    return int(orjson.loads((target / "state.json").read_bytes())["update"]), Bank.load(target / "bank.json")


def resume_from(state: TrainState, directory: Path, bank: Bank, wanted: bool) -> tuple[int, Bank]:
    """(updates done, the bank to go on with): from the latest checkpoint with ``wanted`` (``--resume``), else
    from the start. The main process drops what the logs hold of the updates about to be redone."""
    update, checkpoint = 0, latest_checkpoint(directory) if wanted else None
    if checkpoint is not None:
        update, bank = load_checkpoint(state, checkpoint)
    if state.main:
        for name in ("metrics.jsonl", "rollouts.jsonl"):
            keep_lines_before(directory / name, update)
        keep_lines_before(directory / "validation.jsonl", update + 1 if checkpoint else 0)
    return update, bank


def keep_lines_before(path: Path, update: int) -> None:
    """Drop what updates at or after ``update`` wrote (a resumed run writes them again)."""
    if path.exists():
        kept = [r for r in read_jsonl(path).records if r["update"] < update]
        atomic_write_bytes(path, b"".join(orjson.dumps(r) + b"\n" for r in kept))
