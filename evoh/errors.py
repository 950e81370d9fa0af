"""The one error type evoh raises for anything a user can fix.

The CLI prints ``error: <message>`` and the hint on stderr and exits with ``exit_code``: 2 for bad input or
settings (the default), 1 for a run that finished with episodes in errors (or started and failed). A clean
run exits 0 and an interrupted one 130 (docs/reliability.md).
"""

from __future__ import annotations

BAD_INPUT = 2
RUN_FAILED = 1


class EvohError(Exception):
    """A failure with a one-line message and a hint that names the fix."""

    def __init__(self, message: str, hint: str | None = None, *, exit_code: int = BAD_INPUT) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"
