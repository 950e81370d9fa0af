"""Interrupting a command the tests started, without leaving it running when it fails to stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def interrupt(proc: subprocess.Popen, children: list[int], timeout: float = 30) -> str:
    """Send Ctrl-C to ``proc`` and return its stderr once it exits; if it does not exit within ``timeout``,
    kill it and ``children`` before the failure propagates, so they do not keep running the machine."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        for pid in [proc.pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
