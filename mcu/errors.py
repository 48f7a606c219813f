"""The one exception type users see.

Every failure a user can cause or fix (bad model file, unknown board, missing
toolchain, model too large) is raised as :class:`McuError` with a one-line
message and, where there is one, the fix. The CLI prints it without a
traceback and exits non-zero.
"""

from __future__ import annotations


class McuError(Exception):
    """A user-facing error: ``message`` says what is wrong, ``hint`` how to fix it."""

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


class DoesNotFit(McuError):
    """A memory region too small for what a build puts there: ``need`` bytes of ``region``, which has
    ``capacity`` (so that a caller who knows the model can say what would fit)."""

    def __init__(self, message: str, hint: str | None = None, *, region: str, need: int, capacity: int) -> None:
        super().__init__(message, hint)
        self.region = region
        self.need = need
        self.capacity = capacity
