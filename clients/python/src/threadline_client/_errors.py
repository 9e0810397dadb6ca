"""The one error a host catches: `ThreadlineError`, and its kind `ProtocolError`.

```
Exception
 └── ThreadlineError         every failed call: a gRPC status, maybe with google.rpc details
       .status               StatusCode (the gRPC code)
       .reason               ErrorInfo reason, e.g. "SCHEMA_VERSION_UNSUPPORTED"; "" without one
       .metadata             ErrorInfo metadata (str -> str); {} without one
       .field_violations     BadRequest (field, description) pairs; () without one
       └── ProtocolError     the SDK found the server's answer breaking the contract:
                             status INTERNAL, reason "", message says what broke
```

A run that started and then failed is not an error: it is a `RunResult` with status FAILED. A
`ThreadlineError` means the call itself failed: the server rejected the request before the run
(bad envelope, unsupported version, invalid resume), the run's core raised, the deadline expired,
or the server could not be reached (`StatusCode.UNAVAILABLE`, reason "").

Branch on `reason` (stable, listed in the server's README catalogue), never on `message`. A
`ProtocolError` is no status the server sent: the SDK raises it when the server's answer breaks the
contract (a stream that ends without its terminal result, a checkpoint delta that does not rebuild,
a response without a field the contract requires, a message that does not decode). Catch it before
`ThreadlineError` to tell the two apart; retrying the same call will not help.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import grpclib.exceptions

# Registers google.rpc.ErrorInfo/BadRequest in protobuf's symbol database, so grpclib's status
# details codec can unpack them from `grpc-status-details-bin` (it silently yields `Unknown(...)`
# for unregistered types).
from google.rpc import error_details_pb2

__all__ = ("ProtocolError", "StatusCode", "ThreadlineError")

ERROR_DOMAIN = "threadline"
"""The ErrorInfo domain the server uses for its own reasons."""


class StatusCode(enum.IntEnum):
    """The gRPC status codes; values are the wire numbers, names as gRPC spells them."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class ThreadlineError(Exception):
    """A call to the server failed; `reason` is what hosts branch on.

    Attributes:
        status: The gRPC status code.
        message: The status message the server sent (human-readable; may change between versions).
        reason: The `google.rpc.ErrorInfo` reason, the harness's code in UPPER_SNAKE (e.g.
            `"SCHEMA_VERSION_UNSUPPORTED"`); empty when the status carried no ErrorInfo (e.g. a
            transport failure or grpc's own message-size limit).
        domain: The ErrorInfo domain, `"threadline"` for the server's own reasons; empty without one.
        metadata: The ErrorInfo metadata, e.g. `{"received": "9", "supported": "1"}`.
        field_violations: `(field, description)` pairs from `google.rpc.BadRequest`, where a field
            of the request is at fault (`"spec.previous_state.thread_id"`).
        details: Every decoded status detail, as protobuf messages, for anything not covered above.
    """

    status: StatusCode
    message: str
    reason: str
    domain: str
    metadata: Mapping[str, str]
    field_violations: tuple[tuple[str, str], ...]
    details: tuple[Any, ...]  # google.rpc protobuf messages, untyped: the package ships no stubs

    def __init__(
        self,
        status: StatusCode,
        message: str = "",
        *,
        reason: str = "",
        domain: str = "",
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[tuple[str, str]] = (),
        details: Sequence[Any] = (),
    ) -> None:
        self.status = status
        self.message = message
        self.reason = reason
        self.domain = domain
        self.metadata = MappingProxyType(dict(metadata or {}))
        self.field_violations = tuple(field_violations)
        self.details = tuple(details)
        super().__init__(self._summary())

    def _summary(self) -> str:
        head = f"{self.status.name}"
        if self.reason:
            head += f" {self.reason}"
        return f"{head}: {self.message}" if self.message else head

    def __repr__(self) -> str:
        return (
            f"ThreadlineError(status={self.status.name}, reason={self.reason!r}, "
            f"message={self.message!r}, metadata={dict(self.metadata)!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps the error picklable (e.g. across process pools) although __init__ has keyword args.
        return (
            _rebuild,
            (
                self.status,
                self.message,
                self.reason,
                self.domain,
                dict(self.metadata),
                self.field_violations,
            ),
        )


def _rebuild(
    status: StatusCode,
    message: str,
    reason: str,
    domain: str,
    metadata: dict[str, str],
    field_violations: tuple[tuple[str, str], ...],
) -> ThreadlineError:
    return ThreadlineError(
        status, message, reason=reason, domain=domain, metadata=metadata, field_violations=field_violations
    )


class ProtocolError(ThreadlineError):
    """The server's answer broke the contract; the SDK found it, the server sent no such status.

    Always `StatusCode.INTERNAL` (as gRPC reports a protocol violation) with an empty `reason` and
    no details; `message` says what broke, e.g. "the stream ended without its terminal result".
    A conforming server never causes one, so it points to a bug in the server (or in something
    between the two), not in the request.

    Args:
        message: What broke.
    """

    def __init__(self, message: str) -> None:
        super().__init__(StatusCode.INTERNAL, message)

    def __repr__(self) -> str:
        return f"ProtocolError(message={self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProtocolError, (self.message,))


def from_grpc_error(exc: grpclib.exceptions.GRPCError) -> ThreadlineError:
    """Translate grpclib's error, unpacking ErrorInfo and BadRequest from the status details."""
    reason = domain = ""
    metadata: dict[str, str] = {}
    violations: list[tuple[str, str]] = []
    details = list(exc.details or ())
    for detail in details:
        if isinstance(detail, error_details_pb2.ErrorInfo) and not reason:
            reason, domain = detail.reason, detail.domain
            metadata = dict(detail.metadata)
        elif isinstance(detail, error_details_pb2.BadRequest):
            violations.extend((v.field, v.description) for v in detail.field_violations)
    return ThreadlineError(
        StatusCode(exc.status.value),
        exc.message or "",
        reason=reason,
        domain=domain,
        metadata=metadata,
        field_violations=violations,
        details=details,
    )


def translate(exc: BaseException) -> ThreadlineError | None:
    """The `ThreadlineError` for an exception raised by the transport, or None to let it propagate.

    Cancellation (`CancelledError`) is never translated: it belongs to whoever cancelled.
    """
    if isinstance(exc, ThreadlineError):
        return exc
    if isinstance(exc, grpclib.exceptions.GRPCError):
        return from_grpc_error(exc)
    if isinstance(exc, asyncio.TimeoutError):
        # grpclib enforces the call's deadline itself and raises a bare TimeoutError.
        return ThreadlineError(StatusCode.DEADLINE_EXCEEDED, "the call's deadline expired")
    if isinstance(exc, grpclib.exceptions.StreamTerminatedError):
        return ThreadlineError(StatusCode.UNAVAILABLE, f"the stream was terminated: {exc}")
    if isinstance(exc, grpclib.exceptions.ProtocolError):
        # grpclib found the response breaking gRPC itself (HTTP status, content type, framing).
        return ProtocolError(f"the server's response breaks the gRPC protocol: {exc}")
    if isinstance(exc, OSError):
        # Connection refused, reset, unreachable, TLS failures (ssl.SSLError is an OSError).
        return ThreadlineError(StatusCode.UNAVAILABLE, f"cannot reach the server: {exc}")
    return None
