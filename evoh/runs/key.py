"""Whether a stage's directory holds the same run: one key, decided one way, for `evoh run` and for every stage.

A run key is the stage's name, the settings it declares (less those that only make a run longer, such as
more updates, or change how it computes and not what it learns), and what it read: the keys of upstream
stages under `evoh run`, hashes of its input files when a stage runs by itself. `evoh run` compares
fingerprints of keys to decide whether a stage is done, resumes or starts over; each stage keeps its key in
``run.json`` and refuses to resume a run whose key differs, naming the settings that changed, because
continuing it would mix two experiments in one result.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson

from evoh.errors import EvohError
from evoh.workspace import atomic_write_json, file_sha256, fingerprint, weights_identity

RUN_FILE = "run.json"


def run_key(stage: str, settings: dict[str, Any], inputs: Any, left_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """The key of one run of ``stage``. ``left_out`` names settings (``key`` or ``section.key``) a run may change
    and stay the same run: those that only make it longer (more updates) or change how it computes or what it
    measures, not what it learns (a micro-batch's size, the validation games)."""
    fixed = copy.deepcopy(settings)
    for path in left_out:
        *section, name = path.split(".")
        (fixed.get(section[0], {}) if section else fixed).pop(name, None)
    # a JSON round trip, so that a key compares equal to the same key read back from run.json
    return orjson.loads(orjson.dumps({"stage": stage.split("/")[0], "settings": fixed, "inputs": inputs}))


def weights_key(directory: Path | None) -> dict[str, Any] | None:
    """What a model or adapter directory holds, as a run key reads it: not where it lies, so that a moved
    workspace resumes its runs."""
    if directory is None:
        return None
    return {k: v for k, v in weights_identity(directory).items() if k != "path"}


def file_key(path: Path | None) -> str | None:
    return file_sha256(path) if path is not None else None


def key_id(key: dict[str, Any]) -> str:
    """A short stable name for a key: what pipeline.json stores."""
    return fingerprint(key)


def changed_settings(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The dotted names of the settings and inputs in which two keys differ, named as the recipe names them
    where they are recipe settings (``play.seed`` of an eval run is ``eval.seed``)."""
    found: list[str] = []

    def walk(a: Any, b: Any, prefix: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                walk(a.get(name), b.get(name), f"{prefix}.{name}" if prefix else name)
        elif a != b:
            found.append(prefix)

    walk(previous.get("settings"), current.get("settings"), "")
    walk(previous.get("inputs"), current.get("inputs"), "inputs")
    stage = current["stage"]
    # a stage that declares one section's settings (sft) names them bare; collect and eval name theirs `play`
    named = [f"{stage}.{n}" if "." not in n else f"{stage}.{n[5:]}" if n.startswith("play.") else n for n in found if n]
    return named or ["stage"]


def _read(directory: Path) -> dict[str, Any] | None:
    path = directory / RUN_FILE
    if not path.exists():
        return None
    previous = orjson.loads(path.read_bytes())
    if "stage" not in previous:  # written before keys named their stage: its whole body is the settings
        previous = {"settings": previous}
    return previous


def run_settings(directory: Path) -> dict[str, Any]:
    """The settings of the run a directory holds (empty where it records none): e.g. which world it played."""
    previous = _read(directory)
    return previous["settings"] if previous else {}


def check_same_run(directory: Path, key: dict[str, Any], hint: str) -> bool:
    """Refuse, naming what changed, to continue the run in ``directory`` under another key. False where the
    directory records no key (an earlier evoh wrote it): the caller records one, and nothing was checked."""
    previous = _read(directory)
    if previous is None:
        return False
    if "stage" not in previous:
        previous = {**key, "settings": previous["settings"]}
    if previous != key:
        changed = ", ".join(changed_settings(previous, key))
        raise EvohError(f"{directory} holds a run made with other settings or inputs ({changed})", hint=hint)
    return True


def record_run(directory: Path, key: dict[str, Any]) -> None:
    """Make ``key`` the directory's run: a stage that starts over writes it before anything else."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_json(directory / RUN_FILE, key)
