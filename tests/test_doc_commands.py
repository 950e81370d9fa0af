"""Every `evoh` command the README, the guides and the shipped recipes show is one that exists: its command
and options parse as written (placeholders such as WS or URL stand where values go)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_runner import commands, parse_command_line

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "docs" / "gpu.md", ROOT / "docs" / "training.md", ROOT / "docs" / "inspecting.md"]
RECIPES = sorted((ROOT / "evoh" / "recipes").glob("*.toml"))
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)


def _evoh_lines(text: str) -> list[str]:
    """Shell lines that run evoh (also under accelerate or torchrun), comments and continuations folded."""
    joined = re.sub(r"\\\n\s*", " ", text)
    lines = []
    for line in joined.splitlines():
        line = line.strip().lstrip("#").strip()
        code = line.split("  #", 1)[0].split(" # ", 1)[0].strip()
        if re.match(r"^(evoh |accelerate launch .*-m evoh |torchrun .*-m evoh )", code) and "→" not in code:
            lines.append(code)
    return lines


def _shown(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".toml":
        return _evoh_lines("\n".join(line for line in text.splitlines() if line.startswith("#")))
    return [line for block in FENCE.findall(text) for line in _evoh_lines(block)]


@pytest.mark.parametrize("page", PAGES + RECIPES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_shown_parses(page: Path):
    known = commands()
    shown = _shown(page)
    assert shown or page.suffix == ".toml", f"{page.name} shows no evoh command: is the pattern still right?"
    for line in shown:
        try:
            parse_command_line(line, known)
        except Exception as exc:  # click's usage errors: an unknown option, a missing value; or no such command
            pytest.fail(f"{page.name}: {line!r} does not parse: {exc}")
