"""Errors only the server raises, beside the core's `HarnessError` tree.

The core owns every rule about states, runs and deferred batches; the server adds the few decisions
that only exist on the wire (an agent name it does not serve, a history digest, its concurrency limit,
its bearer token, a request body that is not protobuf). Each carries the same shape as a `HarnessError` (a stable reason, a message, JSON
details) plus the request field at fault, so `server.mapping.errors.to_status` reports both kinds alike.

A core error raised while decoding a particular request field can carry that field too: `at_field`
records it on the exception, and `field_of` reads it back for the `BadRequest` violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from harness import JsonValue
from harness.errors import HarnessError, Refusal

__all__ = ("ServerError", "ServerReason", "at_field", "field_of")

_FIELD_ATTR = "_threadline_field"

E = TypeVar("E", bound=BaseException)


class ServerReason(StrEnum):
    """Reasons the server reports that the core never raises (DESIGN "Errors"; docs/errors.md: "(server)")."""

    AGENT_UNKNOWN = "AGENT_UNKNOWN"
    HISTORY_DIGEST_MISMATCH = "HISTORY_DIGEST_MISMATCH"
    RUN_LIMIT_REACHED = "RUN_LIMIT_REACHED"
    FOLLOWER_LIMIT_REACHED = "FOLLOWER_LIMIT_REACHED"
    TOKEN_MISSING = "TOKEN_MISSING"
    TOKEN_INVALID = "TOKEN_INVALID"
    REQUEST_UNDECODABLE = "REQUEST_UNDECODABLE"
    """The request body is not a valid protobuf encoding of the method's request message."""
    RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
    """The answer (a run's result or a checkpoint with its state) exceeds `--max-message-bytes`."""
    INTERNAL_ERROR = "INTERNAL_ERROR"
    """A bug: the server failed unexpectedly. The log line `request_crashed` or `run_crashed` has the details."""
    SERVER_SHUTTING_DOWN = "SERVER_SHUTTING_DOWN"
    """The server is draining after SIGTERM: it starts no run and stops decoding; retry another replica."""
    CHILD_EDGE_UNKNOWN = "CHILD_EDGE_UNKNOWN"
    """`RunSpec.lineage.parent_agent` declares no host-mode child `subagent_name` running `RunSpec.agent`."""


class ServerError(Refusal):
    """A request the server refuses for a reason of its own (not a core rule).

    Usage:
        raise ServerError(ServerReason.AGENT_UNKNOWN, "No agent named 'x'.", details={"agent": "x"},
                          field="spec.agent")
    """

    reason: str
    """The ErrorInfo reason, UPPER_SNAKE (a `ServerReason`, or a core code upper-cased when wrapping)."""
    message: str
    """Safe to show a host: never holds secrets or a tool's own exception text."""
    details: dict[str, JsonValue]
    """Finite-JSON facts; each key becomes one ErrorInfo metadata entry."""
    field: str | None
    """The request field at fault, as a proto field path (`spec.previous_state.thread_id`)."""

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        details: Mapping[str, JsonValue] | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = str(reason)
        self.message = message
        self.details = dict(details or {})
        self.field = field

    def __repr__(self) -> str:
        return (
            f"ServerError({self.reason!r}, {self.message!r}, details={self.details!r}, field={self.field!r})"
        )


def at_field(error: E, field: str) -> E:
    """Record the request field a (core) error is about, unless a more precise one is already there.

    Core errors know nothing about the wire; the mapping that decoded the field knows where it was.
    """
    if isinstance(error, ServerError):
        if error.field is None:
            error.field = field
    elif field_of(error) is None:
        setattr(error, _FIELD_ATTR, field)
    return error


def at_named_field(error: E, *, prefix: str = "") -> E:
    """`at_field` at the field a core error names itself (`details["field"]`), under `prefix` (the
    request message it sits in); unchanged when it names none."""
    field = error.details.get("field") if isinstance(error, HarnessError) else None
    return at_field(error, f"{prefix}{field}") if isinstance(field, str) and field else error


def field_of(error: BaseException) -> str | None:
    """The request field recorded for `error`: `ServerError.field`, or what `at_field` recorded."""
    if isinstance(error, ServerError):
        return error.field
    value = getattr(error, _FIELD_ATTR, None)
    return value if isinstance(value, str) else None
