"""Handing freed heap memory back to the operating system.

On a CPU, PyTorch allocates tensors with the C library's malloc. Generation and training allocate tensors
of a different size for every batch (prompt lengths vary), and glibc keeps what they free in its arenas
instead of returning it, so a long run's resident memory grows with every update although little of it is
in use (figures in benchmarks/README.md). ``malloc_trim`` returns it.
Elsewhere (macOS, musl) there is nothing to call, and nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import sys


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_freed_memory() -> bool:
    """Return the heap's free pages to the system between large pieces of work (an update, a batch of
    episodes, a stage); True where the C library can (glibc), False where there is nothing to do."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
