"""Interrupting a command the tests started, without leaving it running when it fails to stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def interrupt(proc: subprocess.Popen, children: list[int], timeout: float = 60) -> str:
    """Send Ctrl-C to ``proc`` and return its stderr once it exits; if it does not exit within ``timeout``,
    kill it and ``children`` before the failure propagates, so they do not keep running the machine.
    Its stdin stays open until then: closed at once (as ``communicate`` does), a loaded machine can deliver
    the end of input to a program that reads it before the signal, and the test would see a quit, not Ctrl-C."""
    proc.send_signal(signal.SIGINT)
    held, proc.stdin = proc.stdin, None  # communicate() would close it at once; it still drains stdout and stderr
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        for pid in [proc.pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
    finally:
        if held is not None:
            held.close()


def interruptible() -> None:
    """``preexec_fn`` for a child the tests will Ctrl-C: SIGINT at its default there, so Python installs its
    KeyboardInterrupt handler even when the tests themselves run as a background job (a shell starts those
    with SIGINT ignored, children inherit it, and the child would never see the signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a blocked signal is inherited too
