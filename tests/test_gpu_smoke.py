"""benchmarks/gpu_smoke.sh: valid bash, every evoh command in it parses, and without a GPU it refuses with one
error line and exit 2 before touching anything."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.cli_runner import commands, parse_command_line

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_smoke.sh"


def test_the_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_its_evoh_commands_parse():
    text = re.sub(r"\\\n\s*", " ", SCRIPT.read_text())
    text = text.replace('"${WORLD[@]}"', "--kind minihouse")
    lines = [line.split("#")[0].strip() for line in text.splitlines() if re.match(r"\s*run \w+ +evoh ", line)]
    assert len(lines) == 8  # model, collect, refine, sft, grpo, export, and eval either way
    known = commands()
    for line in lines:
        parse_command_line(line.split(" ", 2)[2], known)  # run NAME evoh ...


def test_without_a_gpu_it_refuses_with_exit_2(tmp_path: Path):
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty PATH: no nvidia-smi, whatever the machine has
    bash = shutil.which("bash")
    done = subprocess.run([bash, str(SCRIPT), str(tmp_path / "ws")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: gpu_smoke.sh needs an NVIDIA GPU") and "hint:" in done.stderr
    assert not (tmp_path / "ws").exists()


def test_the_gpu_extras_name_what_the_gpu_guide_installs():
    import tomllib

    root = SCRIPT.parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("bitsandbytes") for r in extras["qlora"])
    assert any(r.startswith("deepspeed") for r in extras["deepspeed"])
    assert "vllm" not in extras  # it cannot share an environment with evoh's transformers (docs/gpu.md)
    assert '-e ".[track,qlora,deepspeed]"' in (root / "docs" / "gpu.md").read_text()
