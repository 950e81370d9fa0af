"""Write the shell completion scripts in `completions/` from the app itself: `python -m evoh.cli.completions`.

Typer's `--show-completion` detects the current shell; with its documented test switch
`_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION` set it takes the shell as a value instead, which lets one
run write all three scripts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SHELLS = {"bash": "evoh.bash", "zsh": "_evoh", "fish": "evoh.fish"}
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "completions"


def completion_script(shell: str) -> str:
    from typer.testing import CliRunner

    from evoh.cli.app import app

    switch = "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"
    saved = os.environ.get(switch)
    os.environ[switch] = "1"  # read when the command is built, so set it around the whole invocation
    try:
        result = CliRunner().invoke(app, ["--show-completion", shell], prog_name="evoh")
    finally:
        if saved is None:
            del os.environ[switch]
        else:
            os.environ[switch] = saved
    if result.exit_code != 0 or not result.output.strip():
        raise RuntimeError(f"typer gave no {shell} completion script: {result.output!r}")
    return result.output


def write_all(directory: Path = DEFAULT_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in SHELLS.items():
        path = directory / name
        path.write_text(completion_script(shell))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR):
        print(path)
