"""What the benchmarks share: measuring several settings, each in a process of its own."""

from __future__ import annotations

import subprocess
import sys


def each_in_its_own_process(option: str, values: list[str]) -> None:
    """Run this script again once per value of ``option`` (given as ``option V1 V2 …``), every other argument as
    it was given, so that each measurement's peak memory is its own."""
    kept, skipping = [], False
    for arg in sys.argv[1:]:
        if arg == option or arg.startswith(option + "="):
            skipping = arg == option
            continue
        if skipping and not arg.startswith("-"):
            continue
        skipping = False
        kept.append(arg)
    for value in values:
        subprocess.run([sys.executable, sys.argv[0], *kept, option, value], check=True)
