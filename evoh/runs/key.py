"""Whether a stage's directory holds the same run: one key, decided one way, for `evoh run` and for every stage.

A run key is the stage's name, the settings it declares (less those that only make a run longer, such as
more updates), and what it read: the keys of upstream stages under `evoh run`, hashes of its input files
when a stage runs by itself. `evoh run` compares fingerprints of keys to decide whether a stage is done,
resumes or starts over; each stage keeps its key in ``run.json`` and refuses to resume a run whose key
differs, naming the settings that changed, because continuing it would mix two experiments in one result.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson

from evoh.errors import EvohError
from evoh.workspace import atomic_write_json, file_sha256, fingerprint, weights_identity

RUN_FILE = "run.json"


def run_key(stage: str, settings: dict[str, Any], inputs: Any, extendable: tuple[str, ...] = ()) -> dict[str, Any]:
    """The key of one run of ``stage``. ``extendable`` names settings (``key`` or ``section.key``) left out
    because changing them continues a run rather than making another one."""
    fixed = copy.deepcopy(settings)
    for path in extendable:
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
    """The dotted names of the settings and inputs in which two keys differ."""
    found: list[str] = []

    def walk(a: Any, b: Any, prefix: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                walk(a.get(name), b.get(name), f"{prefix}.{name}" if prefix else name)
        elif a != b:
            found.append(prefix)

    walk(previous.get("settings"), current.get("settings"), "")
    walk(previous.get("inputs"), current.get("inputs"), "inputs")
    # a stage that declares one section's settings (sft) names them bare: qualify them as the recipe does
    return [name if "." in name else f"{current['stage']}.{name}" for name in found if name] or ["stage"]


def _read(directory: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    path = directory / RUN_FILE
    if not path.exists():
        return None
    previous = orjson.loads(path.read_bytes())
    if "stage" not in previous:  # written before keys named their stage: its whole body is the settings
        previous = {"stage": key["stage"], "settings": previous, "inputs": key["inputs"]}
    return previous


def run_settings(directory: Path) -> dict[str, Any]:
    """The settings of the run a directory holds (empty where it records none): e.g. which world it played."""
    if not (directory / RUN_FILE).is_file():
        return {}
    return _read(directory, {"stage": "", "inputs": {}})["settings"]


def check_same_run(directory: Path, key: dict[str, Any], hint: str) -> None:
    """Refuse, naming what changed, to continue the run in ``directory`` under another key; record the key
    where the directory holds none yet."""
    previous = _read(directory, key)
    if previous is None:
        record_run(directory, key)
    elif previous != key:
        changed = ", ".join(changed_settings(previous, key))
        raise EvohError(f"{directory} holds a run made with other settings ({changed})", hint=hint)


def record_run(directory: Path, key: dict[str, Any]) -> None:
    """Make ``key`` the directory's run: a stage that starts over writes it before anything else."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_json(directory / RUN_FILE, key)
