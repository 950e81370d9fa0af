"""Experience: a bank of skills, task procedures, mistakes, search priorities and notes that outlives episodes.

The bank is frozen while a batch of episodes runs (``recall`` reads it, ``note`` only buffers evidence
in the episode) and consolidated between batches. Consolidation is a list of proposed edits checked by
:func:`apply_edits`: at most 80 entries per category, unique ids, and entries recalled 3 or more times are
never deleted. :class:`RuleConsolidator` proposes edits from episode records deterministically; a
model-driven consolidator only has to implement the same ``propose`` method.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import orjson

from evoh.errors import EvohError
from evoh.harness.goal import APPLIANCE
from evoh.harness.turns import normalize
from evoh.workspace import atomic_write_json, fingerprint

BANK_SCHEMA = "bank/1"
CATEGORIES = ("skills", "task_skills", "mistakes", "search", "notes")
MAX_PER_CATEGORY = 80
PROTECTED_USES = 3  # entries recalled this often are never deleted
TASK_WORDS = {
    "pick2": ("two", "pick2", "both", "second"),
    "look": ("look", "examine", "lamp", "light"),
    "clean": ("clean", "wash", "sink", "sinkbasin"),
    "heat": ("heat", "hot", "warm", "microwave"),
    "cool": ("cool", "cold", "chill", "fridge"),
    "pick": ("pick", "place", "put"),
}
_WHERE = re.compile(
    r"^(?:where (?:to find|can i find|is|are|to look for|to search for)|find|search for|locate|search) "
    r"(?:the |a |an |some )?([a-z]+?)(?:s)?(?: \d+)?\??$"
)
_HOW = re.compile(r"^how (?:to|do i|should i) ")
_MISTAKES = re.compile(r"\b(?:mistakes?|avoid|errors?|pitfalls?)\b")
_TOKEN = re.compile(r"[a-z]+")


@dataclass
class Entry:
    id: str
    category: str
    text: str
    key: str = ""  # task type for task_skills and mistakes, object type for search
    evidence: int = 1  # episodes that support it
    uses: int = 0  # times recalled
    created: int = 0  # the consolidation that added it
    updated: int = 0
    places: dict[str, int] = field(default_factory=dict)  # search: receptacle type -> times found there

    def render(self) -> str:
        if self.category == "search":
            order = ", ".join(f"{p} ({n})" for p, n in sorted(self.places.items(), key=lambda kv: (-kv[1], kv[0])))
            return f"[{self.id}] {self.key} is found in: {order}"
        return f"[{self.id}] {self.text}"


@dataclass
class Bank:
    entries: list[Entry] = field(default_factory=list)
    updates: int = 0  # consolidations applied

    # -- storage ----------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path) -> Bank:
        try:
            data = orjson.loads(Path(path).read_bytes())
        except FileNotFoundError:
            raise EvohError(
                f"experience bank {path} does not exist", hint="pass a bank.json written by evoh collect or evoh grpo"
            ) from None
        except orjson.JSONDecodeError as exc:
            raise EvohError(f"{path}: not a JSON experience bank ({exc})", hint="pass a bank.json written by evoh") from None
        if not isinstance(data, dict) or data.get("schema") != BANK_SCHEMA:
            raise EvohError(
                f"{path}: schema {data.get('schema') if isinstance(data, dict) else None!r} is not {BANK_SCHEMA!r}",
                hint="pass a bank.json written by this evoh",
            )
        entries = [Entry(**e) for e in data["entries"]]
        return cls(entries, data.get("updates", 0))

    def to_dict(self) -> dict[str, Any]:
        return {"schema": BANK_SCHEMA, "updates": self.updates, "entries": [asdict(e) for e in self.entries]}

    def save(self, path: Path) -> None:
        atomic_write_json(Path(path), self.to_dict())

    def digest(self) -> str:
        """Identifies the bank's contents: part of every episode fingerprint that reads it."""
        return fingerprint(self.to_dict())

    def get(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.id == entry_id), None)

    def of(self, category: str) -> list[Entry]:
        return [e for e in self.entries if e.category == category]

    # -- retrieval --------------------------------------------------------------------------------

    def search_order(self, kind: str) -> list[str]:
        """Receptacle types where ``kind`` was found, most often first (empty when the bank has no hint)."""
        entry = next((e for e in self.of("search") if e.key == kind), None)
        if entry is None:
            return []
        return [p for p, _ in sorted(entry.places.items(), key=lambda kv: (-kv[1], kv[0]))]

    def recall(self, query: str, k: int = 3) -> list[Entry]:
        """Three query modes: "where to find X" -> search hints; "how to do Y" -> procedures, skills and
        mistakes for that task; "mistakes" -> mistakes. Anything else ranks all entries by word overlap."""
        query = normalize(query)
        where = _WHERE.match(query)
        if where:
            kind = where.group(1)
            hits = [e for e in self.of("search") if e.key in (kind, kind.rstrip("s"), kind + "s")]
            return hits[:k]
        task = _task_of(query)
        if _MISTAKES.search(query):
            pool = self.of("mistakes")
            return _rank(pool, query, task)[:k]
        if _HOW.match(query) or task:
            pool = [e for e in self.entries if e.category in ("task_skills", "skills", "mistakes")]
            return _rank(pool, query, task)[:k]
        return _rank([e for e in self.entries if e.category != "search"], query, task)[:k]


def _task_of(query: str) -> str | None:
    words = set(_TOKEN.findall(query))
    for task, cues in TASK_WORDS.items():  # pick2 and the state changes before plain pick
        if words & set(cues):
            return task
    return None


def _rank(entries: list[Entry], query: str, task: str | None) -> list[Entry]:
    words = set(_TOKEN.findall(query))

    def score(entry: Entry) -> tuple:
        same_task = 1 if task and entry.key == task else 0
        other_task = 1 if task and entry.key and entry.key != task and entry.category != "skills" else 0
        overlap = len(words & set(_TOKEN.findall(entry.text.lower())))
        category_first = {"task_skills": 2, "skills": 1}.get(entry.category, 0)
        return (-same_task + other_task, -overlap, -category_first, -entry.evidence, entry.id)

    return [e for e in sorted(entries, key=score) if not (task and e.key and e.key != task and e.category != "skills")]


# -- consolidation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    op: str  # "add", "update" or "delete"
    entry: Entry | None = None  # add/update: the full entry
    entry_id: str = ""  # delete


class Consolidator(Protocol):
    def propose(self, bank: Bank, episodes: list[dict[str, Any]]) -> list[Edit]: ...


def apply_edits(bank: Bank, edits: list[Edit]) -> tuple[Bank, list[str]]:
    """Apply the edits that keep the bank valid; returns the new bank and why any edit was refused.

    Deletes first, then updates, then adds: an add into a full category evicts the weakest entry as this
    batch left it, never one whose new evidence is still waiting further down the list."""
    entries = {e.id: replace(e, places=dict(e.places)) for e in bank.entries}
    update = bank.updates + 1
    refused = []
    for edit in sorted(edits, key=lambda e: {"delete": 0, "update": 1}.get(e.op, 2)):
        if edit.op == "delete":
            entry = entries.get(edit.entry_id)
            if entry is None:
                refused.append(f"delete {edit.entry_id}: no such entry")
            elif entry.uses >= PROTECTED_USES:
                refused.append(f"delete {edit.entry_id}: recalled {entry.uses} times, kept")
            else:
                del entries[edit.entry_id]
            continue
        entry = edit.entry
        if entry is None or entry.category not in CATEGORIES or not entry.id:
            refused.append(f"{edit.op}: entry missing, or category not one of {', '.join(CATEGORIES)}")
            continue
        if edit.op == "update":
            if entry.id not in entries:
                refused.append(f"update {entry.id}: no such entry")
                continue
            entries[entry.id] = replace(entry, updated=update)
            continue
        if entry.id in entries:
            refused.append(f"add {entry.id}: id already used")
            continue
        same = [e for e in entries.values() if e.category == entry.category]
        if len(same) >= MAX_PER_CATEGORY:
            evictable = [e for e in same if e.uses < PROTECTED_USES]
            if not evictable:
                refused.append(f"add {entry.id}: {entry.category} is full of entries recalled {PROTECTED_USES}+ times")
                continue
            weakest = min(evictable, key=lambda e: (e.evidence, e.uses, e.updated, e.id))
            del entries[weakest.id]
        entries[entry.id] = replace(entry, created=update, updated=update)
    ordered = sorted(entries.values(), key=lambda e: (CATEGORIES.index(e.category), e.id))
    return Bank(ordered, update), refused


class RuleConsolidator:
    """Deterministic consolidation from episode records.

    Won episodes teach where each object type was found (search priorities) and the task's procedure;
    lost episodes become mistakes; notes become notes; every recall counts as a use of its entries.
    """

    def propose(self, bank: Bank, episodes: list[dict[str, Any]]) -> list[Edit]:
        staged: dict[str, Entry] = {}

        def entry(entry_id: str, **fields: Any) -> Entry:
            if entry_id not in staged:
                current = bank.get(entry_id)
                staged[entry_id] = (
                    replace(current, places=dict(current.places)) if current else Entry(entry_id, evidence=0, **fields)
                )
            return staged[entry_id]

        for record in sorted(episodes, key=lambda r: r.get("task", {}).get("id", "")):
            for entry_id, times in Counter(record.get("recalled", [])).items():
                if bank.get(entry_id) is not None:
                    entry(entry_id).uses += times
            goal = record.get("goal") or {}
            task = goal.get("task", "")
            if record.get("won"):
                found = record.get("found_at", {})
                for kind, place in sorted((k, p) for k, places in found.items() for p in places):
                    hint = entry(f"search-{kind}", category="search", text="", key=kind)
                    hint.places[place] = hint.places.get(place, 0) + 1
                    hint.evidence += 1
                procedure = record.get("procedure", "")
                if procedure and task:
                    skill = entry(f"task-{task}-{fingerprint(procedure)[:8]}", category="task_skills", text=procedure, key=task)
                    skill.evidence += 1
            else:
                for text in _mistakes(record):
                    mistake = entry(f"mistake-{task or 'any'}-{fingerprint(text)[:8]}", category="mistakes", text=text, key=task)
                    mistake.evidence += 1
            for note in record.get("notes", []):
                text = normalize(note)
                if text:
                    kept = entry(f"note-{fingerprint(text)[:8]}", category="notes", text=text, key=task)
                    kept.evidence += 1
        edits = []
        for entry_id, staged_entry in staged.items():
            edits.append(Edit("update" if bank.get(entry_id) else "add", staged_entry))
        return edits


def _mistakes(record: dict[str, Any]) -> list[str]:
    """Lessons from a lost episode, in words a later episode can act on."""
    lessons = []
    goal = record.get("goal") or {}
    obj = goal.get("object", "the target")
    if record.get("error"):
        return lessons
    if not record.get("found_at", {}).get(obj):
        lessons.append(
            f"ran out of steps before finding any {obj}: "
            f"search receptacles where {obj} is usually found first, and open closed ones"
        )
    elif goal.get("state") and not record.get("state_done"):
        lessons.append(
            f"found {obj} but never made it {goal['state']}: take it to the {APPLIANCE[goal['state']]} before placing it"
        )
    else:
        lessons.append(f"found {obj} but did not finish: once it is in hand, go straight to the {goal.get('target', 'target')}")
    if record.get("invalid_actions", 0) >= 3:
        lessons.append("invalid actions waste steps: copy commands exactly from the admissible list")
    if record.get("max_repeat", 0) >= 3:
        lessons.append("repeating the same action changes nothing: after two tries, do something else")
    return lessons


def consolidate(bank: Bank, episodes: list[dict[str, Any]], consolidator: Consolidator | None = None) -> tuple[Bank, list[str]]:
    """One consolidation between batches: proposed edits, validated and applied."""
    consolidator = consolidator or RuleConsolidator()
    return apply_edits(bank, consolidator.propose(bank, episodes))
