"""Which process this is under torchrun or ``accelerate launch`` (their RANK and WORLD_SIZE), before any
process group exists: every process trains, only the main one writes evoh's files and prints."""

from __future__ import annotations

import os


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return rank() == 0
