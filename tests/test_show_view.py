"""`evoh show`'s index, filters and game list, its compact turn view, and `evoh view`'s page, the page read by a
real headless Chromium. The episodes are the expert's on MiniHouse (no ALFWorld data): with 6 steps it wins
some games and loses others."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.cli_runner import evoh


def _eval(ws: Path, name: str, *args: str) -> Path:
    result = evoh("eval", "-w", str(ws), "--policy", "expert", "--kind", "minihouse", "--name", name, *args)
    assert result.exit_code == 0, result.stderr
    return ws / "eval" / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ws = tmp_path_factory.mktemp("ws")
    short = _eval(ws, "short", "--limit", "12", "--spread", "--max-steps", "6")
    full = _eval(ws, "full", "--limit", "12", "--spread")
    return {"ws": ws, "short": short, "full": full}


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]


def test_the_index_lists_every_episode_and_its_filters_pick_some(runs: dict[str, Path]):
    records = _records(runs["short"])
    won = {r["task"]["id"] for r in records if r["won"]}
    assert 0 < len(won) < len(records)  # the test needs both outcomes
    result = evoh("show", str(runs["short"] / "episodes.jsonl"))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:8] == ["#", "id", "type", "outcome", "turns", "steps", "invalid", "meta"]
    assert len(lines) == len(records) + 2 and lines[-1].startswith(f"{len(records)} episodes: {len(won)} won")
    for number, (line, record) in enumerate(zip(lines[1:], records)):
        cells = line.split()
        assert cells[:4] == [
            str(number),
            record["task"]["id"],
            record["task"]["id"].split("/")[1].split("-")[0],
            "won" if record["won"] else "lost",
        ]
        assert cells[4:8] == [
            str(record["turns"]),
            str(record["env_steps"]),
            str(record["invalid_actions"]),
            str(record["meta_actions"]),
        ]

    lost = json.loads(evoh("show", str(runs["short"]), "--lost", "--json").stdout)  # a run folder is read too
    assert {r["id"] for r in lost} == {r["task"]["id"] for r in records} - won and all(r["outcome"] == "lost" for r in lost)
    heat = json.loads(
        evoh("show", str(runs["short"]), "--type", "heat", "--type", "pick_cool_then_place_in_recep", "--json").stdout
    )
    assert {r["type"] for r in heat} == {"heat", "cool"} and len(heat) == sum(
        r["task"]["task_type"].split("_")[1] in ("heat", "cool") for r in records
    )
    both = json.loads(evoh("show", str(runs["short"]), "--lost", "--type", "heat", "--json").stdout)
    assert both == [r for r in heat if r["outcome"] == "lost" and r["type"] == "heat"]


def test_bad_show_options_are_one_line_errors(runs: dict[str, Path], tmp_path: Path):
    file = str(runs["short"] / "episodes.jsonl")
    records = _records(runs["short"])
    never_lost = next(
        t
        for t in ("pick", "look", "clean", "heat", "cool", "pick2")
        if not any(r["task"]["id"].split("/")[1].startswith(t + "-") and not r["won"] for r in records)
    )
    for args, words in (
        (["--type", "boil"], "error: unknown task type 'boil'"),
        (["--full"], "error: --full shows one episode's turns"),
        (["--episode", "0", "--lost"], "error: --lost, --type and --write-games choose episodes for the index, not one episode"),
        (
            ["--lost", "--type", never_lost, "--write-games", str(tmp_path / "none.txt")],
            f"error: no episode of {file} matches --lost --type {never_lost}",
        ),
        (["--episode", "99"], "error: episode 99 is out of range"),
    ):
        result = evoh("show", file, *args)
        assert result.exit_code == 2 and result.stderr.splitlines()[0].startswith(words), (args, result.stderr)
        assert result.stderr.splitlines()[1].startswith("  hint: ") and "Traceback" not in result.stderr
    assert not (tmp_path / "none.txt").exists()
    nothing = evoh("show", str(runs["ws"]))  # a workspace is not a run folder: the hint names what is
    assert nothing.exit_code == 2 and "eval run folder" in nothing.stderr


def test_a_written_game_list_is_what_eval_plays(runs: dict[str, Path], tmp_path: Path):
    listing = tmp_path / "lists" / "lost.txt"
    result = evoh("show", str(runs["short"]), "--lost", "--write-games", str(listing))
    assert result.exit_code == 0, result.stderr
    lost = [r["task"]["id"] for r in _records(runs["short"]) if not r["won"]]
    lines = listing.read_text().splitlines()
    assert lines[0].startswith(f"# {len(lost)} games of") and "evoh eval --split valid_seen --games" in lines[0]
    assert lines[1:] == lost
    again = _eval(runs["ws"], "again", "--games", str(listing))  # the whole horizon now
    replayed = _records(again)
    assert sorted(r["task"]["id"] for r in replayed) == sorted(lost) and any(r["won"] for r in replayed)


def test_one_episode_is_compact_by_default_and_whole_with_full(runs: dict[str, Path]):
    record = _records(runs["short"])[3]
    compact = evoh("show", str(runs["short"]), "--episode", "3")
    assert compact.exit_code == 0, compact.stderr
    text = compact.stdout
    assert (
        text.startswith(f"episode {record['task']['id']} ") and "Admissible commands" not in text and "--- prompt ---" not in text
    )
    for number, turn in enumerate(record["trace"], start=1):
        assert f"\n{number:>2}. {turn['action']}  [{turn['kind']}, {turn['outcome']}]" in text
        assert f"-> {turn['result']}" in text
    assert text.count("\n") < 6 * len(record["trace"]) + 4
    full = evoh("show", str(runs["short"]), "--episode", record["task"]["id"], "--full").stdout
    assert full.count("Admissible commands: ") == len(record["trace"]) and "--- system prompt ---" in full
    assert json.loads(evoh("show", str(runs["short"]), "-e", "3", "--json").stdout) == record


def test_prompt_change_names_what_a_turn_newly_shows():
    from evoh.inspection.episodes import panels, prompt_change, prompt_sections

    before = prompt_sections(
        "Objective: put a cup in shelf.\nStep 2 of 30 (29 left).\n"
        "Observation: You arrive at loc 3.\n\nOn the desk 1, you see a cup 1.\n"
        "Plan:\n[ ] find cup\nPrevious actions: 1. go to desk 1 [ok]\n"
        "Admissible commands: go to shelf 1, take cup 1 from desk 1, look"
    )
    assert (
        before["Observation"] == "You arrive at loc 3.\n\nOn the desk 1, you see a cup 1."
        and before["Step"] == "Step 2 of 30 (29 left)."
    )
    after = prompt_sections(
        "Objective: put a cup in shelf.\nStep 3 of 30 (28 left).\nObservation: You pick up the cup 1 from the desk 1.\n"
        "Plan:\n[x] find cup\n[ ] take cup\nPrevious actions: 1. go to desk 1 [ok]; 2. take cup 1 from desk 1 [ok]\n"
        "Admissible commands: go to shelf 1, look, put cup 1 in/on desk 1"
    )
    changes = {c["section"]: (c["added"], c["removed"]) for c in prompt_change(before, after)}
    assert changes == {
        "Observation": (["You pick up the cup 1 from the desk 1."], []),
        "Plan": (["[x] find cup", "[ ] take cup"], ["[ ] find cup"]),
        "Previous actions": (["2. take cup 1 from desk 1 [ok]"], []),
        "Admissible commands": (["put cup 1 in/on desk 1"], ["take cup 1 from desk 1"]),
    }
    assert prompt_change(None, after) == [] and prompt_change(after, after) == []
    assert panels(after) == {"Belief": None, "Progress": "[x] find cup\n[ ] take cup", "Experience": None}


# ---- the page -------------------------------------------------------------------------------------

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium here: apt-get install chromium (Debian) to test the page in a browser"
)


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    command = [
        CHROMIUM,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")  # Chromium refuses to start its sandbox as root
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Uncaught" not in done.stderr, done.stderr[-2000:]  # the page's script ran without an error
    return done


class _Dom(HTMLParser):
    """What a dumped DOM shows: the games listed and not hidden, the body's attributes, whether "no game" shows."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.games: list[str] = []
        self.body: dict[str, str | None] = {}
        self.empty_shown = False
        self.tags: set[str] = set()
        self.text: list[str] = []
        self.feed(dom)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.add(tag)
        if tag == "li" and "data-game" in found and "hidden" not in found:
            self.games.append(found["data-game"])
        elif tag == "body":
            self.body = found
        elif tag == "p" and found.get("id") == "empty":
            self.empty_shown = "hidden" not in found


@pytest.fixture(scope="module")
def page(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The short and the full run side by side, with one thought made to look like HTML."""
    folder = tmp_path_factory.mktemp("page")
    records = _records(runs["short"])
    records[0]["trace"][0]["response"] = (
        '<think>a <img src=x id="injected"> & "quotes"</think><action>' + records[0]["trace"][0]["action"] + "</action>"
    )
    (folder / "short").mkdir()
    (folder / "short" / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = folder / "view.html"
    result = evoh("view", str(folder / "short"), str(runs["full"]), "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    written = json.loads(result.stdout)
    assert written["games"] == 12 and [r["label"] for r in written["runs"]] == ["short", "full"]
    return out


def test_the_page_is_one_file_with_nothing_to_fetch(page: Path):
    html = page.read_text()
    for outside in ("http://", "https://", "<link", "src="):
        assert outside not in html.replace("&lt;img src=x id=&quot;injected&quot;&gt;", ""), outside
    assert html.count('<section class="game"') == 12 and html.count('<article class="turn') > 12 * 2
    assert (
        '<img src=x id="injected">' not in html and "a &lt;img src=x id=&quot;injected&quot;&gt; &amp; &quot;quotes&quot;" in html
    )


@needs_chromium
def test_the_page_renders_and_its_filters_work_in_chromium(page: Path, runs: dict[str, Path], tmp_path: Path):
    short = {r["task"]["id"]: r for r in _records(runs["short"])}
    full = {r["task"]["id"]: r for r in _records(runs["full"])}
    ids = sorted(short)

    raw = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    dom = _Dom(raw)
    assert dom.games == ids and dom.body["data-visible"] == "12" and dom.body["data-shown"] == ids[0] and not dom.empty_shown
    assert (
        "img" not in dom.tags and 'a <img src=x id="injected"> & "quotes"' in dom.text
    )  # the thought stayed text in the browser too

    lost = [i for i in ids if not short[i]["won"] or not full[i]["won"]]  # lost by either run
    assert 0 < len(lost) < len(ids)
    dom = _Dom(_chromium(tmp_path, "--dump-dom", page.as_uri() + "#outcome=lost").stdout)
    assert dom.games == lost and dom.body["data-shown"] == lost[0]
    kind = short[lost[0]]["task"]["task_type"]
    won_of_kind = [i for i in ids if short[i]["task"]["task_type"] == kind and short[i]["won"] and full[i]["won"]]
    dom = _Dom(
        _chromium(tmp_path, "--dump-dom", page.as_uri() + f"#outcome=won&type={lost[0].split('/')[1].split('-')[0]}").stdout
    )
    assert dom.games == won_of_kind

    differ = [i for i in ids if short[i]["won"] != full[i]["won"]]
    assert differ  # six steps lose games the whole horizon wins
    dom = _Dom(
        _chromium(tmp_path, "--dump-dom", page.as_uri() + f"#outcome=differ&game={ids.index(differ[-1])}&kinds=meta").stdout
    )
    assert dom.games == differ and dom.body["data-shown"] == differ[-1]
    assert dom.body["class"].split() == ["show-meta"]  # the env and invalid turns' cards are hidden

    dom = _Dom(_chromium(tmp_path, "--dump-dom", page.as_uri() + "#q=no-such-game").stdout)
    assert dom.games == [] and dom.empty_shown and dom.body["data-shown"] == ""

    shot = tmp_path / "page.png"
    _chromium(tmp_path, "--window-size=1400,900", f"--screenshot={shot}", page.as_uri() + f"#game={ids.index(differ[0])}")
    from PIL import Image

    image = Image.open(shot).convert("L")
    assert image.size == (1400, 900)
    histogram = image.histogram()
    assert max(histogram) < 0.9 * sum(histogram)  # not a blank page: text and cards were drawn
