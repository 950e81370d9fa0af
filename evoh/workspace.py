"""The workspace directory: one folder per pipeline stage, written so that no result is lost or corrupted.

- ``stage.json`` is written last and atomically; its presence means the stage finished.
- JSONL outputs get one record per finished unit, appended and flushed; a rerun skips units whose
  fingerprint is already present, and a torn last line (a run killed mid-write) is dropped and reported.
- A lock file per stage stops two runs from writing the same stage at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from evoh import records
from evoh.errors import EvohError

log = logging.getLogger(__name__)

# stage name -> the command that produces it (for errors that name the fix)
STAGE_COMMANDS: dict[str, str] = {
    "collect": "evoh collect -w {ws}",
    "refine": "evoh refine -w {ws}",
    "sft": "evoh sft -w {ws} --model DIR",
    "grpo": "evoh grpo -w {ws}",
    "eval": "evoh eval -w {ws} --name {name}",
    "export": "evoh export -w {ws}",
}
MANIFEST = "stage.json"
RECIPE_FILE = "evoh.toml"


def new_file_mode() -> int:
    """The mode an ordinary new file gets here (0o666 less the umask)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def share_weights(directory: Path) -> None:
    """Give the safetensors files under ``directory`` the mode every other file gets: safetensors 0.8 writes
    them 0600 through a temporary file, so another user (a vLLM server, a container) could not read them."""
    for file in directory.rglob("*.safetensors"):
        if file.stat().st_mode & 0o777 == 0o600:
            file.chmod(new_file_mode())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, new_file_mode())  # mkstemp's 0600 would hide the file from the user's group
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fingerprint(obj: Any) -> str:
    """A short stable hash of a JSON-able value (key order does not matter)."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()[:20]


def file_sha256(path: Path) -> str:
    """The file's SHA-256. A stage asks for the same weights shard more than once (its run key, its manifest),
    and an 8B model's first shard takes seconds to read, so a hash is kept while the file's device, inode, size,
    modification time and status-change time stay the same. The last is the kernel's own: a tool that writes a
    file and then sets its mtime back (`cp -p`, `rsync -t`, `tar -x`) still moves it."""
    stat = os.stat(path)
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    return _sha256_of(str(Path(path).resolve()), key)


@functools.lru_cache(maxsize=256)
def _sha256_of(path: str, stat_key: tuple[int, ...]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_identity(directory: Path) -> dict[str, Any]:
    """Where a model or adapter directory is and what it holds: hashes of its config and of its first
    safetensors shard, enough to tell retrained weights apart without reading every shard of a large model."""
    config = next((c for c in (directory / "config.json", directory / "adapter_config.json") if c.exists()), None)
    weights = sorted(directory.glob("*.safetensors")) if directory.is_dir() else []
    return {
        "path": str(directory.resolve()),
        "config_sha256": file_sha256(config) if config else None,
        "weights_sha256": {w.name: file_sha256(w) for w in weights[:1]},
    }


@dataclass
class JsonlContents:
    """What a JSONL file held: its complete records and the bytes of a torn last line, if any."""

    records: list[dict[str, Any]] = field(default_factory=list)
    torn: bytes = b""
    good_size: int = 0  # bytes up to and including the last complete line


def read_jsonl(path: Path, warn_torn: bool = True) -> JsonlContents:
    """Parse a JSONL file written by :class:`JsonlLog`.

    A last line without its newline is a write cut short: it is returned as ``torn``, never parsed, and (unless
    the caller says what it does about it) named in a warning, as the record it held is lost to this reader.
    A complete line that is not a JSON object means the file was damaged some other way: that is an error,
    and so is a record of a known schema (an episode) without the fields its readers use.
    """
    contents = _parse_jsonl(path)
    if contents.torn and warn_torn:
        log.warning(
            "%s: left out its torn last line (%d bytes), a write cut short: the record it held is lost", path, len(contents.torn)
        )
    return contents


def _parse_jsonl(path: Path) -> JsonlContents:
    contents = JsonlContents()
    if not path.exists():
        return contents
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    contents.torn, contents.good_size = data[end:], end
    for number, line in enumerate(data[:end].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise EvohError(
                f"{path}:{number}: not a JSON record ({exc})",
                hint="the file was edited or damaged; restore it or delete it to redo that stage",
            ) from None
        if not isinstance(record, dict):
            raise EvohError(f"{path}:{number}: a JSONL record must be an object", hint="restore or delete the file")
        contents.records.append(records.validate(record, f"{path}:{number}"))
    return contents


class JsonlLog:
    """An append-only JSONL file of finished units that a rerun resumes by fingerprint.

    Each record carries a ``fingerprint`` (task id + everything that changes the unit's inputs); ``done``
    tells whether a unit is already recorded. Each append is a single ``write`` of one whole line on an
    ``O_APPEND`` descriptor, so a killed process leaves at most one torn last line, which opening drops.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = read_jsonl(self.path, warn_torn=False)
        if existing.torn:
            log.warning("%s: dropped a torn last line (%d bytes) left by an interrupted run", self.path, len(existing.torn))
            os.truncate(self.path, existing.good_size)
        self.dropped_torn_bytes = len(existing.torn)
        self.records = existing.records
        self._done = {r["fingerprint"] for r in self.records if "fingerprint" in r}
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def done(self, fp: str) -> bool:
        return fp in self._done

    def append(self, record: dict[str, Any]) -> None:
        if "fingerprint" not in record:
            raise ValueError("a resumable record needs a 'fingerprint'")
        line = memoryview(orjson.dumps(record) + b"\n")
        while line:
            written = os.write(self._fd, line)
            line = line[written:]
        self._done.add(record["fingerprint"])
        self.records.append(record)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


TRAINED_WEIGHTS = {False: "adapter", True: "model"}  # a training stage's output folder, keyed by "every weight trained"


class Workspace:
    """A pipeline's directory: ``evoh.toml`` plus one sub-directory per stage (see DESIGN.md)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def path(self, stage: str) -> Path:
        return self.root / stage

    def manifest(self, stage: str) -> dict[str, Any] | None:
        """The stage's ``stage.json`` if the stage finished, else None."""
        file = self.path(stage) / MANIFEST
        if not file.exists():
            return None
        try:
            data = orjson.loads(file.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise EvohError(
                f"{file}: unreadable stage manifest ({exc})", hint=f"rerun the stage: {self._command(stage)}"
            ) from None
        return records.check("stage", data, str(file))

    def require(self, stage: str) -> dict[str, Any]:
        """The manifest of a finished input stage, or an error naming the command that produces it."""
        manifest = self.manifest(stage)
        if manifest is None:
            raise EvohError(
                f"{self.path(stage) / MANIFEST} is missing: the {stage} stage has not finished in this workspace",
                hint=f"run `{self._command(stage)}` first",
            )
        return manifest

    def trained_weights(self, stage: str) -> tuple[Path, Path | None]:
        """(model directory, adapter directory or None) that a finished training stage (sft, grpo) left: its
        own ``model/`` when it trained every weight, else its base model and its ``adapter/``."""
        manifest = self.require(stage)
        if manifest.get("method") == "full":
            return self.path(stage) / TRAINED_WEIGHTS[True], None
        return Path(manifest["base_model"]["path"]), self.path(stage) / TRAINED_WEIGHTS[False]

    def relative(self, path: str) -> str:
        """A path inside the workspace as relative to its root (so a moved or copied workspace keys the same);
        any other path, or "", as it is."""
        if not path:
            return path
        try:
            return Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return path

    def examples(self, split: str) -> Path:
        """refine's chat examples for ``split`` (train or val): the file SFT trains on and GRPO anchors to."""
        if split not in ("train", "val"):
            raise ValueError(f"examples are train or val, not {split!r}")
        return self.path("refine") / f"{split}.jsonl"

    def episodes(self, stage: str) -> Path:
        """The episode records a playing stage wrote: collect's trajectories, an evaluation's episodes."""
        return self.path(stage) / ("trajectories.jsonl" if stage == "collect" else "episodes.jsonl")

    def bank(self, stage: str) -> Path:
        """The Experience bank a stage left (collect's, an evaluation's or grpo's), as a bank.json path."""
        return self.path(stage) / "bank.json"

    def _command(self, stage: str) -> str:
        top, _, name = stage.partition("/")
        return STAGE_COMMANDS.get(top, f"evoh {top} -w {{ws}}").format(ws=self.root, name=name or "NAME")

    @contextlib.contextmanager
    def writing(self, stage: str, *, unfinish: bool = True) -> Iterator[Path]:
        """Hold the stage's lock while it is (re)written; its old ``stage.json`` goes first.

        Removing the manifest before anything is written means a run killed half-way never leaves a
        directory that claims to be finished; outputs that resume (JSONL) are kept. A stage that reads
        its own directory's files as input passes ``unfinish=False`` and calls :meth:`unfinish` once they
        validate, so that a run refused for bad input leaves a finished stage as it was.
        """
        directory = self.path(stage)
        directory.mkdir(parents=True, exist_ok=True)
        lock_file = directory / ".lock"
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
                raise EvohError(
                    f"{directory} is being written by another evoh run (pid {holder})",
                    hint="wait for that run to finish, or give this one another workspace with -w",
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            if unfinish:
                self.unfinish(stage)
            yield directory
        finally:
            os.close(fd)  # closing releases the lock; the kernel also releases it if we are killed

    def unfinish(self, stage: str) -> None:
        """Remove the stage's manifest: from now on it is being rewritten and no longer counts as finished."""
        with contextlib.suppress(FileNotFoundError):
            (self.path(stage) / MANIFEST).unlink()

    def finish(self, stage: str, manifest: dict[str, Any]) -> Path:
        """Write the stage's manifest, last and atomically: from now on the stage counts as finished."""
        from evoh import __version__

        body = records.stamp("stage", {"stage": stage, "evoh_version": __version__, "finished_at": time.time(), **manifest})
        file = self.path(stage) / MANIFEST
        share_weights(self.path(stage))
        atomic_write_json(file, body)
        return file
