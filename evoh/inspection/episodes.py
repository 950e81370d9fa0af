"""A file of recorded episodes (collect's trajectories.jsonl, eval's episodes.jsonl) read back for people:
an index row per episode, filters, the game list `evoh eval --games` reads, and the pieces of one turn
(its thought, the sections of its prompt, what changed in the prompt since the turn before)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoh.env.types import TASK_TYPES
from evoh.errors import EvohError
from evoh.harness.turns import META_VERBS, parse_turn

log = logging.getLogger(__name__)

RECORD_FILES = ("episodes.jsonl", "trajectories.jsonl")  # evoh eval's, evoh collect's
OUTCOMES = ("won", "lost", "error")


@dataclass
class Episodes:
    """One file's episode records in file order (``--episode N`` counts them), and which of them are
    current: the last record written per fingerprint (a retried episode supersedes its error record)."""

    file: Path
    label: str
    records: list[dict[str, Any]]
    current: list[int] = field(default_factory=list)

    @property
    def current_records(self) -> list[dict[str, Any]]:
        return [self.records[i] for i in self.current]

    @property
    def superseded(self) -> int:
        return len(self.records) - len(self.current)


def records_file(path: Path) -> Path:
    """The episodes file a path names: the file itself, or the one an eval or collect folder holds."""
    path = Path(path).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        for name in RECORD_FILES:
            if (path / name).is_file():
                return path / name
        raise EvohError(
            f"{path} holds no {' or '.join(RECORD_FILES)}",
            hint="give an eval run folder (WS/eval/<name>), WS/collect, or one of those files",
        )
    raise EvohError(
        f"{path} does not exist",
        hint="give a trajectories.jsonl (evoh collect) or episodes.jsonl (evoh eval), or the folder holding it",
    )


def read_episodes(path: Path, label: str | None = None) -> Episodes:
    """Every episode record of a file (or of the folder's records file), refused with file:line when damaged."""
    from evoh.records import check
    from evoh.runs.summary import latest
    from evoh.workspace import read_jsonl

    file = records_file(path)
    records = [check("episode", r, f"{file}:{n}") for n, r in enumerate(read_jsonl(file).records, start=1)]
    if not records:
        raise EvohError(f"{file} holds no episodes", hint="run the stage that writes it first (evoh collect, evoh eval)")
    kept = {id(r) for r in latest(records)}
    current = [i for i, r in enumerate(records) if id(r) in kept]
    return Episodes(file, label or run_label(file), records, current)


def run_label(file: Path) -> str:
    """What a run is called: its eval name (the folder of eval/<name>/episodes.jsonl), else its folder's name."""
    return file.resolve().parent.name or file.stem


def short_type(task_type: str) -> str:
    return TASK_TYPES.get(task_type, task_type)


def outcome(record: dict[str, Any]) -> str:
    """won, lost (finished without winning) or error (the episode did not finish: an engine or policy failure)."""
    return "error" if record.get("error") else "won" if record["won"] else "lost"


def index_row(number: int, record: dict[str, Any]) -> dict[str, Any]:
    """One episode as the index lists it; ``number`` is its place in the file (what --episode takes)."""
    meta = record.get("meta") or {}
    return {
        "episode": number,
        "id": record["task"]["id"],
        "type": short_type(record["task"]["task_type"]),
        "outcome": outcome(record),
        "turns": record["turns"],
        "env_steps": record["env_steps"],
        "invalid_actions": record["invalid_actions"],
        "meta_actions": record["meta_actions"],
        "meta": {verb: (meta.get(verb) or {}).get("attempted", 0) for verb in META_VERBS},
    }


def index(episodes: Episodes, lost: bool = False, types: list[str] | tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The index rows of the current episodes, in file order; ``lost`` keeps the finished episodes that were
    not won, ``types`` (short or long names) those of these task types."""
    from evoh.env.games import task_type_names

    wanted = {TASK_TYPES[t] for t in task_type_names(list(types))} if types else None
    rows = [index_row(i, episodes.records[i]) for i in episodes.current]
    return [r for r in rows if (not lost or r["outcome"] == "lost") and (wanted is None or r["type"] in wanted)]


def write_game_list(rows: list[dict[str, Any]], out: Path, source: Path, filters: str) -> list[str]:
    """The task ids of ``rows`` (each once, in order) as the game list ``evoh eval --games`` reads."""
    ids = list(dict.fromkeys(r["id"] for r in rows))
    if not ids:
        raise EvohError(
            f"no episode of {source} matches {filters or 'the filters'}: there is no game list to write",
            hint="loosen the filters (--lost, --type)",
        )
    splits = sorted({i.split("/", 1)[0] for i in ids})
    if len(splits) > 1:
        log.warning(
            "the list holds games of %d splits (%s): evoh eval --games plays those of the --split it is given",
            len(splits),
            ", ".join(splits),
        )
    header = (
        f"# {len(ids)} games of {source}{f' ({filters})' if filters else ''}; "
        f"play them with: evoh eval --split {splits[0]} --games {out}\n"
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(header + "".join(f"{i}\n" for i in ids))
    except OSError as error:
        raise EvohError(
            f"cannot write the game list {out}: {error.strerror}", hint="give a path in a folder you can write to"
        ) from None
    return ids


# ---- one turn -----------------------------------------------------------------------------------

_HEADING = re.compile(
    r"^(Objective|Observation|Belief|Plan|Experience|Recalled|Harness result|Previous actions|Admissible commands):(?: |$)(.*)$"
)
_BUDGET = re.compile(r"^Step \d+ of \d+\b")
LIST_SECTIONS = {"Admissible commands": ", ", "Previous actions": "; "}
REPLACED = ("Observation", "Harness result")  # the last step's answer: the previous turn's card shows it as its result
PANELS = {"Belief": ("Belief",), "Progress": ("Plan",), "Experience": ("Experience", "Recalled")}


def thought(turn: dict[str, Any]) -> str:
    """What the policy wrote before its action: the ``<think>`` block, or without one (a model trained on
    untagged thoughts) the text before ``<action>``."""
    response = turn.get("response") or ""
    think = parse_turn(response).think
    if think:
        return think
    before = re.split(r"<action>", response, maxsplit=1, flags=re.IGNORECASE)[0]
    return before.strip() if "<" not in before else ""


def prompt_sections(text: str) -> dict[str, str]:
    """A turn prompt cut at its headings (Objective, the step budget as "Step", Observation, Belief, Plan,
    Experience, Recalled, Harness result, Previous actions, Admissible commands), in prompt order."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.split("\n"):
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1)
            sections[current] = [heading.group(2)] if heading.group(2) else []
        elif current in ("Objective", None) and _BUDGET.match(line):
            current = "Step"
            sections[current] = [line]
        elif current is None:
            current = "Preamble"
            sections[current] = [line]
        else:
            sections[current].append(line)
    return {name: "\n".join(lines).strip("\n") for name, lines in sections.items()}


def _items(section: str, text: str) -> list[str]:
    if section in LIST_SECTIONS:
        return [] if text in ("", "none") else text.split(LIST_SECTIONS[section])
    return [line for line in text.split("\n") if line.strip()]


def prompt_change(before: dict[str, str] | None, after: dict[str, str]) -> list[dict[str, Any]]:
    """What a turn's prompt shows that the previous turn's did not, section by section: the items (lines;
    commands and previous actions one by one) added and removed. The step budget, which changes every
    turn, is left out, and so is the observation or harness result a new one replaced (the previous turn's result)."""
    if before is None:
        return []
    changes = []
    for section in dict.fromkeys([*before, *after]):
        if section == "Step" or before.get(section) == after.get(section):
            continue
        old, new = _items(section, before.get(section, "")), _items(section, after.get(section, ""))
        old_set, new_set = set(old), set(new)
        added = [i for i in new if i not in old_set]
        removed = [] if section in REPLACED else [i for i in old if i not in new_set]
        if added or removed:
            changes.append({"section": section, "added": added, "removed": removed})
    return changes


def panels(sections: dict[str, str]) -> dict[str, str | None]:
    """The harness as this turn's prompt showed it: Belief, Progress (the plan) and Experience (its panel and
    what recall returned); None where the prompt had no such part."""
    shown = {}
    for panel, names in PANELS.items():
        parts = [sections[n] if len(names) == 1 else f"{n}:\n{sections[n]}" for n in names if n in sections]
        shown[panel] = "\n".join(parts) if parts else None
    return shown


def belief_text(belief: dict[str, Any] | None) -> str:
    """An episode's last Belief as lines: where the agent is, what it holds, where each object was seen."""
    if not belief:
        return ""
    lines = [f"location: {belief.get('location') or '?'}", f"inventory: {', '.join(belief.get('inventory') or []) or '(empty)'}"]
    if belief.get("visited"):
        lines.append(f"visited: {', '.join(belief['visited'])}")
    for name, seen in (belief.get("objects") or {}).items():
        states = f" [{', '.join(seen['states'])}]" if seen.get("states") else ""
        lines.append(f"{name}: {seen.get('where') or '?'}{states}")
    return "\n".join(lines)


def plan_text(plan: list[dict[str, Any]] | None) -> str:
    """An episode's last plan as a checklist."""
    return "\n".join(f"[{'x' if p.get('done') else ' '}] {p.get('text', '')}" for p in plan or [])
