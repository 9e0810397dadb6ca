"""Tool-level failures of the shell tools (ENVIRONMENT §4.2): data for the model, never a run's error.

They travel inside tool results as `{"ok": false, "error": {...}}`, so their codes are plain strings,
not `harness.ErrorCode` members, and have no gRPC status. Messages never hold a host path, exception
text, command text or output.
"""

from __future__ import annotations

from typing import Any

__all__ = ("EnvironmentToolError",)


class EnvironmentToolError(Exception):
    """A shell tool call that cannot be done: `code`, a message, a hint for the model, and details."""

    def __init__(
        self, code: str, message: str, hint: str = "", details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.details: dict[str, Any] = dict(details or {})
