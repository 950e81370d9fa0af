import os
import sys

import pytest

from evoh.memory import release_freed_memory


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and calls glibc")
def test_freed_heap_goes_back_to_the_system():
    # 200 MB in chunks below glibc's mmap threshold come from the heap; one live chunk allocated after them
    # keeps the heap's top in place, so free() alone cannot hand the 200 MB back: only a trim can
    chunks = [bytes(100_000) for _ in range(2_000)]
    keeper = bytes(100_000)
    before = _resident_bytes()
    del chunks
    freed = _resident_bytes()
    assert release_freed_memory()
    after = _resident_bytes()
    assert freed > before - 100_000_000  # free() kept most of it
    assert after < freed - 100_000_000  # the trim returned it
    assert keeper  # alive until here
