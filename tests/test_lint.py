"""The line-length rule (E501 at 130) and the formatting stay switched on: ruff passes on the whole code base."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ruff")

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["evoh", "tests", "benchmarks"]


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check_passes():
    result = ruff("check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    result = ruff("format", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
