"""The one error a host catches: `ThreadlineError`, its kind `ProtocolError`, and the threads' reasons.

```
Exception
 └── ThreadlineError         every failed call: a gRPC status, maybe with google.rpc details
       .status               StatusCode (the gRPC code)
       .reason               ErrorInfo reason, e.g. "SCHEMA_VERSION_UNSUPPORTED"; "" without one
       .metadata             ErrorInfo metadata (str -> str); {} without one
       .field_violations     BadRequest (field, description) pairs; () without one
       ├── ProtocolError     the SDK found the server's answer breaking the contract:
       │                     status INTERNAL, reason "", message says what broke
       │   ThreadService's reasons (THREADS §3), one class each, metadata as attributes:
       ├── ThreadNotFound          NOT_FOUND
       ├── CheckpointNotFound      NOT_FOUND
       ├── RunNotFound             NOT_FOUND
       ├── ThreadExists            ALREADY_EXISTS
       ├── RequestIdReused         INVALID_ARGUMENT     .request_id .run_id .revision
       │                                                .request_status .differs
       ├── ThreadNotSuspended      FAILED_PRECONDITION  .thread_id .thread_status .answered_by
       ├── RequestInterrupted      FAILED_PRECONDITION  .run_id .revision .attempts
       ├── ThreadBusy              ABORTED              .run_id .request_id .lease_expires_at
       │                                                .queue_length .is_own()
       ├── ThreadQueueFull         RESOURCE_EXHAUSTED   .thread_id .limit .queue_length
       ├── RevisionConflict        ABORTED              .current_revision
       ├── LeaseLost               ABORTED
       ├── StoreUnavailable        UNAVAILABLE
       ├── ListenerTooSlow         RESOURCE_EXHAUSTED   .thread_id .run_id .request_id .backlog
       ├── RunAttemptLost          ABORTED              .run_id .request_id .last_sequence
       │                                                .request_status .next_run_id
       ├── RunEventsExpired        FAILED_PRECONDITION  .run_id .request_id .request_status
       │                                                .revision .why
       │   and one server reason of following a run (a join, a watch, an attached retry):
       └── FollowerLimitReached    RESOURCE_EXHAUSTED   .limit
```

`translate` picks the class by the ErrorInfo reason (domain "threadline"); every other reason stays
a plain `ThreadlineError`, so `except ThreadlineError` still catches everything and `reason` stays
the one thing to branch on for the rest.

A run that started and then failed is not an error: it is a `RunResult` with status FAILED. A
`ThreadlineError` means the call itself failed: the server rejected the request before the run
(bad envelope, unsupported version, invalid resume), the run's core raised, the deadline expired,
or the server could not be reached (`StatusCode.UNAVAILABLE`, reason "").

Branch on `reason` (stable, listed in the server's catalogue, docs/errors.md), never on `message`. A
`ProtocolError` is no status the server sent: the SDK raises it when the server's answer breaks the
contract (a stream that ends without its terminal result, a checkpoint delta that does not rebuild,
a response without a field the contract requires, a message that does not decode). Catch it before
`ThreadlineError` to tell the two apart; retrying the same call will not help.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import grpclib.exceptions

# Registers google.rpc.ErrorInfo/BadRequest in protobuf's symbol database, so grpclib's status
# details codec can unpack them from `grpc-status-details-bin` (it silently yields `Unknown(...)`
# for unregistered types).
from google.rpc import error_details_pb2

__all__ = (
    "AnsweredBy",
    "CheckpointNotFound",
    "FollowerLimitReached",
    "LeaseLost",
    "ListenerTooSlow",
    "ProtocolError",
    "RequestIdReused",
    "RequestInterrupted",
    "RevisionConflict",
    "RunAttemptLost",
    "RunEventsExpired",
    "RunNotFound",
    "StatusCode",
    "StoreUnavailable",
    "ThreadBusy",
    "ThreadExists",
    "ThreadNotFound",
    "ThreadNotSuspended",
    "ThreadQueueFull",
    "ThreadlineError",
)

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
            f"{type(self).__name__}(status={self.status.name}, reason={self.reason!r}, "
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
    return error_class(reason, domain)(
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


# --- ThreadService's reasons (THREADS §3) ----------------------------------------------------------


class _ReasonError(ThreadlineError):
    """A `ThreadlineError` for one ErrorInfo reason; `translate` picks it by `REASON`."""

    REASON: ClassVar[str]
    """The ErrorInfo reason (domain "threadline") this class stands for."""

    def _int(self, key: str) -> int:
        """A numeric metadata entry; 0 when the server sent none (or not a number)."""
        try:
            return int(self.metadata.get(key, ""))
        except ValueError:
            return 0


class ThreadNotFound(_ReasonError):
    """NOT_FOUND: no thread has this ID (`THREAD_NOT_FOUND`)."""

    REASON = "THREAD_NOT_FOUND"


class CheckpointNotFound(_ReasonError):
    """NOT_FOUND: the thread has no checkpoint with this revision (`CHECKPOINT_NOT_FOUND`)."""

    REASON = "CHECKPOINT_NOT_FOUND"


class RunNotFound(_ReasonError):
    """NOT_FOUND: `cancel` named a run this thread never had (`RUN_NOT_FOUND`)."""

    REASON = "RUN_NOT_FOUND"


class ThreadExists(_ReasonError):
    """ALREADY_EXISTS: `create` or `fork` with a thread ID in use (`THREAD_EXISTS`)."""

    REASON = "THREAD_EXISTS"


class RequestIdReused(_ReasonError):
    """INVALID_ARGUMENT: this thread already used the `request_id` for a different request.

    A retry must repeat its request exactly (prompt, answers, expected revision, busy strategy); a
    new request needs a new ID (`REQUEST_ID_REUSED`). The attributes say what the original request
    did (LIVE §5.5); a server before them sends none, and they read as empty.
    """

    REASON = "REQUEST_ID_REUSED"

    DIFFERS_PARTS: ClassVar[tuple[str, ...]] = ("prompt", "answers", "expected_revision", "busy_strategy")
    """The parts `differs` may name, in the order the server names them."""

    @property
    def request_id(self) -> str:
        """The reused request ID."""
        return self.metadata.get("request_id", "")

    @property
    def run_id(self) -> str:
        """The original request's run (its last attempt); empty if not sent."""
        return self.metadata.get("run_id", "")

    @property
    def revision(self) -> int:
        """The original request's last committed checkpoint; 0 when it committed none (or not sent)."""
        return self._int("revision")

    @property
    def request_status(self) -> str:
        """The original request's record status as the server spells it (`completed`, `running`,
        `queued`, ...; metadata `status`, named so beside the gRPC `status`); empty if not sent."""
        return self.metadata.get("status", "")

    @property
    def differs(self) -> tuple[str, ...] | None:
        """The parts in which this request differs from the original, a subset of `DIFFERS_PARTS`
        in that order; None when the server cannot tell (`unknown`: a record an older server made)
        or did not say (a server before LIVE §5.5); `()` when it sent none."""
        text = self.metadata.get("differs")
        if text is None or text == "unknown":
            return None
        return tuple(part for part in text.split(",") if part)


@dataclasses.dataclass(frozen=True)
class AnsweredBy:
    """Who consumed the pending batch a `ThreadNotSuspended`'s answers were probably for (LIVE §5.5).

    Attributes:
        request_id: The request that last consumed a pending batch of the thread.
        revision: The `SUSPENDED` checkpoint whose batch it consumed.
        how: `"answers"` (it answered the batch) or `"prompt"` (a prompt without answers continued the
            thread, denying or abandoning the batch's calls).
        run_revision: That request's last committed checkpoint; 0 when it committed none.
        matches: Whether the refused answers name exactly that batch's call IDs: True for a retry
            under a new request ID whose first try was answered already.
    """

    request_id: str
    revision: int
    how: Literal["answers", "prompt"]
    run_revision: int
    matches: bool


class ThreadNotSuspended(_ReasonError):
    """FAILED_PRECONDITION: `answers` for a thread that is not SUSPENDED (`THREAD_NOT_SUSPENDED`).

    `answered_by` says which request consumed the batch these answers were probably for. With
    `busy_strategy="rollback"` the server sends `began_at` instead (and `answered_by` is None).
    """

    REASON = "THREAD_NOT_SUSPENDED"

    @property
    def thread_id(self) -> str:
        """The thread."""
        return self.metadata.get("thread_id", "")

    @property
    def thread_status(self) -> str:
        """The thread's status as the `ThreadStatus` enum names it (`THREAD_STATUS_IDLE`; metadata
        `status`, named so beside the gRPC `status`); empty if not sent."""
        return self.metadata.get("status", "")

    @property
    def answered_by(self) -> AnsweredBy | None:
        """The request that last consumed a pending batch, and how; None when the server named none
        (no request consumed one since a rollback restored a batch, a ROLLBACK refusal, or a server
        before LIVE §5.5) or sent an `answered` this SDK does not know."""
        request_id = self.metadata.get("request_id", "")
        how = self.metadata.get("answered", "")
        if not request_id or how not in ("answers", "prompt"):
            return None
        return AnsweredBy(
            request_id=request_id,
            revision=self._int("revision"),
            how="answers" if how == "answers" else "prompt",
            run_revision=self._int("run_revision"),
            matches=self.metadata.get("matches", "") == "true",
        )


class RequestInterrupted(_ReasonError):
    """FAILED_PRECONDITION: a retry of a request whose run was closed INTERRUPTED (`REQUEST_INTERRUPTED`).

    Its holder was gone and another request took the thread, or (a `start_run` request) its
    attempts ended by a lost server as often as the server allows (`attempts`, its
    `--max-run-attempts`), so this request never finishes. `revision` tells the host whether its
    input reached the thread.
    """

    REASON = "REQUEST_INTERRUPTED"

    @property
    def run_id(self) -> str:
        """The interrupted run (its last attempt)."""
        return self.metadata.get("run_id", "")

    @property
    def revision(self) -> int:
        """The last checkpoint the interrupted run committed; 0 when it committed none."""
        return self._int("revision")

    @property
    def attempts(self) -> int | None:
        """How many attempts of a server-driven request ended by a lost server before the server
        closed it; None when it was superseded instead (the server sent no `attempts`)."""
        return self._int("attempts") if "attempts" in self.metadata else None


class ThreadBusy(_ReasonError):
    """ABORTED: another run holds the thread's lease, or requests wait in its queue (`THREAD_BUSY`).

    When the queue holds the thread (no lease), `run_id` and `request_id` name the queue's head and
    `lease_expires_at` is None; `busy_strategy="enqueue"` waits in that queue instead of failing.
    """

    REASON = "THREAD_BUSY"

    @property
    def run_id(self) -> str:
        """The run holding the thread (`cancel` takes it)."""
        return self.metadata.get("run_id", "")

    @property
    def request_id(self) -> str:
        """The request that run serves."""
        return self.metadata.get("request_id", "")

    @property
    def lease_expires_at(self) -> datetime.datetime | None:
        """When the holder's lease expires unless renewed, by the store's clock; None if not sent."""
        text = self.metadata.get("lease_expires_at", "")
        try:
            # RFC 3339; Python 3.11 parses a trailing "Z" and fractional seconds.
            return datetime.datetime.fromisoformat(text) if text else None
        except ValueError:
            return None

    @property
    def queue_length(self) -> int:
        """How many requests wait in the thread's queue (0: none, or a server before queues)."""
        return self._int("queue_length") if "queue_length" in self.metadata else 0

    def is_own(self, request_id: str) -> bool:
        """Whether the holder (or, without a lease, the queue's head) serves `request_id`: the thread
        is busy with this very request (e.g. a retry that raced its first try), not another's."""
        return bool(request_id) and self.request_id == request_id


class ThreadQueueFull(_ReasonError):
    """RESOURCE_EXHAUSTED: `limit` requests wait in the thread's queue already (`THREAD_QUEUE_FULL`).

    Nothing was written: the request was not queued. Try again once the queue moved, or cancel a
    queued request. The limit is the server's `--max-queued-runs` (`ThreadStoreInfo.max_queued_runs`).
    """

    REASON = "THREAD_QUEUE_FULL"

    @property
    def thread_id(self) -> str:
        """The thread whose queue is full."""
        return self.metadata.get("thread_id", "")

    @property
    def limit(self) -> int:
        """How many requests one thread's queue holds at most."""
        return self._int("limit")

    @property
    def queue_length(self) -> int:
        """How many wait in it now."""
        return self._int("queue_length")


class RevisionConflict(_ReasonError):
    """ABORTED: `expected_revision` is not the thread's head (`REVISION_CONFLICT`)."""

    REASON = "REVISION_CONFLICT"

    @property
    def current_revision(self) -> int:
        """The head's revision when the server checked."""
        return self._int("current_revision")


class LeaseLost(_ReasonError):
    """ABORTED: the server lost the thread's lease before or during the run (`LEASE_LOST`).

    The call ended with no result; nothing after the run's last commit reached the thread, and the
    next run recovers it.
    """

    REASON = "LEASE_LOST"


class StoreUnavailable(_ReasonError):
    """UNAVAILABLE: the thread store cannot be reached or written (`STORE_UNAVAILABLE`)."""

    REASON = "STORE_UNAVAILABLE"


class ListenerTooSlow(_ReasonError):
    """RESOURCE_EXHAUSTED: a stream fell too far behind its run and was dropped (`LISTENER_TOO_SLOW`).

    It fell more than `backlog` events behind. The events before this error arrived in order, and
    the run goes on and commits: send the same request again (`request_id`) for its outcome once
    the run ended, which the server replays.
    """

    REASON = "LISTENER_TOO_SLOW"

    @property
    def thread_id(self) -> str:
        """The thread of the run."""
        return self.metadata.get("thread_id", "")

    @property
    def run_id(self) -> str:
        """The run that goes on (`cancel` takes it)."""
        return self.metadata.get("run_id", "")

    @property
    def request_id(self) -> str:
        """The request that run serves: send it again for the outcome."""
        return self.metadata.get("request_id", "")

    @property
    def backlog(self) -> int:
        """How many events the server keeps for a caller that has not taken them; 0 if not sent."""
        return self._int("backlog")


class RunAttemptLost(_ReasonError):
    """ABORTED: the attempt a stream followed was lost (`RUN_ATTEMPT_LOST`).

    Its server crashed, was stopped past its lease, or the attempt was superseded; the stream had
    every event the attempt wrote, up to `last_sequence`. The request may go on in a next attempt
    (`next_run_id`, once one runs): `join_run` joined by request and `Threads.stream` follow it
    themselves; a retry of the request (same `request_id`) attaches to it, or becomes it.
    """

    REASON = "RUN_ATTEMPT_LOST"

    @property
    def run_id(self) -> str:
        """The lost attempt."""
        return self.metadata.get("run_id", "")

    @property
    def request_id(self) -> str:
        """The request the attempt served."""
        return self.metadata.get("request_id", "")

    @property
    def last_sequence(self) -> int:
        """The sequence of the attempt's last written event."""
        return self._int("last_sequence")

    @property
    def request_status(self) -> str:
        """The request's status when the server answered, as it spells it."""
        return self.metadata.get("request_status", "")

    @property
    def next_run_id(self) -> str:
        """The request's next attempt, once one runs; empty before."""
        return self.metadata.get("next_run_id", "")


class RunEventsExpired(_ReasonError):
    """FAILED_PRECONDITION: the attempt's events are no longer kept, or were never (`RUN_EVENTS_EXPIRED`).

    `why` is `retention` (its log outlived `ThreadStoreInfo.event_retention`) or `not_recorded` (its
    server kept no log). The result stays readable: a retry of `request_id` replays it, and
    `checkpoint(thread_id, revision)` has its state.
    """

    REASON = "RUN_EVENTS_EXPIRED"

    @property
    def run_id(self) -> str:
        """The attempt asked for."""
        return self.metadata.get("run_id", "")

    @property
    def request_id(self) -> str:
        """The request it served: a retry with this ID replays its result."""
        return self.metadata.get("request_id", "")

    @property
    def request_status(self) -> str:
        """The request's status, as the server spells it."""
        return self.metadata.get("request_status", "")

    @property
    def revision(self) -> int:
        """The request's last committed checkpoint; 0 when none."""
        return self._int("revision")

    @property
    def why(self) -> str:
        """`retention` or `not_recorded`."""
        return self.metadata.get("why", "")


class FollowerLimitReached(_ReasonError):
    """RESOURCE_EXHAUSTED: the server follows as many runs and threads as it may (`FOLLOWER_LIMIT_REACHED`).

    Joins, watches and attached retries take one of `limit` places on the replica asked (its
    `--max-followers`); try later or another replica.
    """

    REASON = "FOLLOWER_LIMIT_REACHED"

    @property
    def limit(self) -> int:
        """The replica's limit of followers."""
        return self._int("limit")


_BY_REASON: dict[str, type[ThreadlineError]] = {
    cls.REASON: cls
    for cls in (
        ThreadNotFound,
        CheckpointNotFound,
        RunNotFound,
        ThreadExists,
        RequestIdReused,
        ThreadNotSuspended,
        RequestInterrupted,
        ThreadBusy,
        RevisionConflict,
        LeaseLost,
        StoreUnavailable,
        ListenerTooSlow,
        ThreadQueueFull,
        RunAttemptLost,
        RunEventsExpired,
        FollowerLimitReached,
    )
}


def error_class(reason: str, domain: str) -> type[ThreadlineError]:
    """The class of the error with this ErrorInfo reason: a subclass for the threads' reasons."""
    if domain != ERROR_DOMAIN:
        return ThreadlineError
    return _BY_REASON.get(reason, ThreadlineError)


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
    return error_class(reason, domain)(
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
