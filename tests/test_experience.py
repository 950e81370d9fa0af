"""The Experience bank: the three recall modes, deterministic consolidation, and the rules edits must keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoh.errors import EvohError
from evoh.harness.experience import (
    MAX_PER_CATEGORY,
    Bank,
    Edit,
    Entry,
    RuleConsolidator,
    apply_edits,
    consolidate,
)


def episode(task: str, won: bool, obj: str = "apple", found: dict | None = None, **extra) -> dict:
    return {
        "task": {"id": f"valid_seen/{task}-{obj}/trial_{len(extra)}"},
        "goal": {"task": task, "object": obj, "target": "diningtable", "state": "hot" if task == "heat" else None},
        "won": won,
        "found_at": found if found is not None else {obj: ["countertop"]},
        "procedure": f"{task} task: find the object, take the object, then put the object in the target" if won else "",
        "notes": extra.get("notes", []),
        "recalled": extra.get("recalled", []),
        "invalid_actions": extra.get("invalid", 0),
        "max_repeat": extra.get("repeat", 0),
        "state_done": False,
    }


def test_won_episodes_teach_search_priorities_and_procedures():
    bank, refused = consolidate(
        Bank(),
        [
            episode("heat", True, found={"apple": ["countertop"], "mug": ["cabinet"]}),
            episode("heat", True, found={"apple": ["countertop", "fridge"]}),
            episode("pick", True, found={"apple": ["diningtable"]}),
        ],
    )
    assert refused == [] and bank.updates == 1
    assert bank.search_order("apple") == ["countertop", "diningtable", "fridge"]
    assert bank.get("search-apple").places == {"countertop": 2, "fridge": 1, "diningtable": 1}
    skills = bank.of("task_skills")
    assert {s.key for s in skills} == {"heat", "pick"} and max(s.evidence for s in skills) == 2


def test_lost_episodes_become_mistakes_and_notes_become_notes():
    bank, _ = consolidate(
        Bank(),
        [
            episode("cool", False, found={}, invalid=4, notes=["Fridges hold   lettuce"]),
            episode("cool", False, found={}, repeat=5),
        ],
    )
    mistakes = bank.of("mistakes")
    texts = " | ".join(m.text for m in mistakes)
    assert "ran out of steps before finding any apple" in texts
    assert "invalid actions waste steps" in texts and "repeating the same action" in texts
    finding = next(m for m in mistakes if "before finding" in m.text)
    assert finding.evidence == 2 and finding.key == "cool"
    assert [n.text for n in bank.of("notes")] == ["fridges hold lettuce"]
    assert bank.of("search") == []  # failures do not move search priorities


def test_recall_modes():
    bank, _ = consolidate(
        Bank(),
        [
            episode("heat", True),
            episode("cool", False, found={}),
            episode("pick", True, obj="mug", found={"mug": ["cabinet"]}),
        ],
    )
    where = bank.recall("where to find apple")
    assert [e.id for e in where] == ["search-apple"] and "countertop (1)" in where[0].render()
    assert bank.recall("where is the mugs")[0].key == "mug"
    assert bank.recall("where to find unicorn") == []
    how = bank.recall("how to do heat task", k=3)
    assert how and how[0].category == "task_skills" and how[0].key == "heat"
    assert all(e.key in ("heat", "") for e in how)
    mistakes = bank.recall("mistakes", k=3)
    assert mistakes and all(e.category == "mistakes" for e in mistakes)
    assert len(bank.recall("how to do heat task", k=1)) == 1


def test_recalls_count_as_uses_at_consolidation():
    bank, _ = consolidate(Bank(), [episode("heat", True)])
    bank, _ = consolidate(bank, [episode("heat", True, recalled=["search-apple", "search-apple", "no-such-id"])])
    assert bank.get("search-apple").uses == 2 and bank.get("search-apple").places["countertop"] == 2
    assert bank.updates == 2


def test_caps_evict_the_weakest_unprotected_entry():
    entries = [Entry(f"note-{i:03d}", "notes", f"note {i}", evidence=2, uses=3 if i == 0 else 0) for i in range(MAX_PER_CATEGORY)]
    entries[5].evidence = 1
    bank = Bank(entries)
    bank, refused = apply_edits(bank, [Edit("add", Entry("note-new", "notes", "new"))])
    ids = {e.id for e in bank.of("notes")}
    assert refused == [] and len(ids) == MAX_PER_CATEGORY and "note-new" in ids and "note-005" not in ids


def test_an_add_into_a_full_category_weighs_the_updates_of_the_same_batch():
    entries = [Entry(f"note-{i:03d}", "notes", f"note {i}", evidence=2, uses=3 if i == 0 else 0) for i in range(MAX_PER_CATEGORY)]
    entries[5].evidence = 1
    stronger = Entry("note-005", "notes", "note 5", evidence=6)
    bank, refused = apply_edits(Bank(entries), [Edit("add", Entry("note-new", "notes", "new")), Edit("update", stronger)])
    kept = {e.id: e for e in bank.of("notes")}
    assert refused == [] and len(kept) == MAX_PER_CATEGORY and "note-new" in kept
    assert kept["note-005"].evidence == 6 and "note-001" not in kept  # the weakest after the update went


def test_protected_entries_and_ids_are_kept():
    bank = Bank([Entry("note-a", "notes", "a", uses=3), Entry("note-b", "notes", "b", uses=2)])
    bank, refused = apply_edits(
        bank,
        [
            Edit("delete", entry_id="note-a"),
            Edit("delete", entry_id="note-b"),
            Edit("add", Entry("note-a", "notes", "again")),
            Edit("add", Entry("x", "gossip", "?")),
            Edit("update", Entry("missing", "notes", "?")),
        ],
    )
    assert [e.id for e in bank.entries] == ["note-a"]
    assert len(refused) == 4 and any("recalled 3 times" in r for r in refused)
    full = Bank([Entry(f"n{i}", "notes", "x", uses=3) for i in range(MAX_PER_CATEGORY)])
    _, refused = apply_edits(full, [Edit("add", Entry("n-new", "notes", "y"))])
    assert refused and "full" in refused[0]


def test_consolidation_is_deterministic_and_order_free():
    batch = [
        episode("heat", True),
        episode("pick", True, obj="mug", found={"mug": ["cabinet"]}),
        episode("cool", False, found={}),
    ]
    one, _ = consolidate(Bank(), batch)
    two, _ = consolidate(Bank(), list(reversed(batch)))
    assert one.to_dict() == two.to_dict() and one.digest() == two.digest()


def test_a_custom_consolidator_goes_through_the_same_checks():
    class Forgetful:
        def propose(self, bank, episodes):
            return [Edit("delete", entry_id=e.id) for e in bank.entries]

    bank = Bank([Entry("note-a", "notes", "a", uses=5), Entry("note-b", "notes", "b")])
    bank, refused = consolidate(bank, [], Forgetful())
    assert [e.id for e in bank.entries] == ["note-a"] and len(refused) == 1
    assert isinstance(RuleConsolidator().propose(Bank(), []), list)


def test_bank_files_round_trip_and_bad_files_are_clear(tmp_path: Path):
    bank, _ = consolidate(Bank(), [episode("heat", True)])
    bank.save(tmp_path / "bank.json")
    assert Bank.load(tmp_path / "bank.json") == bank
    (tmp_path / "bad.json").write_text('{"schema": "bank/9", "entries": []}')
    with pytest.raises(EvohError, match="bank/9"):
        Bank.load(tmp_path / "bad.json")
    with pytest.raises(EvohError, match="does not exist"):
        Bank.load(tmp_path / "none.json")
