"""Run `evoh` in a child process that SIGKILLs itself at a chosen point: the n-th call of a named function.

    python -m tests.killer TARGET N WHEN -- evoh arguments...

TARGET is ``module:attribute`` (``os:replace``, ``torch:save``, ``evoh.workspace:JsonlLog.append``). WHEN is
``before`` (the call never happens), ``after`` (it returned; its caller has not gone on), ``torn`` (it wrote
half of what it was asked to, as a kill in the middle of the write leaves it), ``interrupt`` (Ctrl-C arrives
just before the call: a KeyboardInterrupt, not a kill) or ``raise`` (that call fails with a RuntimeError,
as an engine that crashes does; the process lives on). The function is replaced before
evoh imports anything, so a module that imports it by name later gets the replacement too. A SIGKILL runs no
``finally``, no ``atexit`` and no flush: what it leaves is what a crash or an out-of-memory kill leaves.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Any


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _tear(target: str, real: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Leave half of what the call would have written, then die."""
    if target.endswith("JsonlLog.append"):  # (log, record): one write of the whole line, cut short
        import orjson

        line = orjson.dumps(args[1]) + b"\n"
        os.write(args[0]._fd, line[: len(line) // 2])
    elif target.endswith("save_file"):  # safetensors' (tensors, filename, ...): the file, cut short
        real(*args, **kwargs)
        file = Path(args[1])
        file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    else:
        raise SystemExit(f"killer: no torn write for {target}")
    _die()


def arm(target: str, n: int, when: str) -> None:
    module, _, attribute = target.partition(":")
    owner: Any = importlib.import_module(module)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, name)
    calls = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == n and when == "before":
            _die()
        if calls == n and when == "interrupt":
            raise KeyboardInterrupt
        if calls == n and when == "raise":
            raise RuntimeError(f"injected fault: call {n} of {target}")
        if calls == n and when == "torn":
            _tear(target, real, args, kwargs)
        result = real(*args, **kwargs)
        if calls == n and when == "after":
            _die()
        return result

    setattr(owner, name, wrapper)


def main() -> None:
    target, n, when, separator, *args = sys.argv[1:]
    assert separator == "--" and when in ("before", "after", "torn", "interrupt", "raise"), sys.argv
    arm(target, int(n), when)
    from evoh.cli.app import main as evoh

    sys.argv = ["evoh", *args]
    evoh()


if __name__ == "__main__":
    main()
