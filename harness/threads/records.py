"""What the thread store reads and writes: typed records, the core's own values in them, never JSON text.

The store keeps the core's own JSON forms (`DeferredToolRequests.to_json`, `DeferredToolResume.to_json`,
the state's `model_dump_json()`, `ThreadRunOutcome.to_json`) and turns a row into these records and back
at its edge (`rows`, in its worker threads), so no caller parses a column and the core's loaders stay the
only validation of what comes back. A state stays bytes (`StateParts`): only `load_state` decodes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic_ai.messages import UserContent

from ..client_tools import ClientTool
from ..deferred import DeferredToolRequests, DeferredToolResume
from ..errors import HarnessError, RecordedRefusal
from .blobs import BlobRef
from .kinds import FINISHED, THREAD_STATUS_NAMES, CheckpointKind, QueuedKind, RunRowStatus, ThreadStatus
from .outcome import ThreadRunOutcome

__all__ = (
    "THREAD_STATUS_NAMES",
    "Answered",
    "AnsweredHow",
    "Attempt",
    "CheckpointKind",
    "CheckpointRow",
    "Head",
    "Lease",
    "Prompt",
    "QueuedKind",
    "QueuedRun",
    "RunEnd",
    "RunRow",
    "RunRowStatus",
    "StateParts",
    "ThreadRow",
    "ThreadStatus",
)

Prompt = str | list[UserContent]
"""A request's input as the store keeps it for a next attempt."""
RunEnd = ThreadRunOutcome | HarnessError | RecordedRefusal | None
"""How a run record ended: the outcome a retry replays, the error it raises again (`error`: the core's,
or the host's refusal of a server-driven start), or nothing (`interrupted`, or still `running`)."""


@dataclass(frozen=True, slots=True)
class StateParts:
    """A state's JSON cut in two: its history data, and the rest with the history removed at `history_at`."""

    history: bytes
    rest: bytes
    history_at: int

    def json(self) -> bytes:
        return b"".join((self.rest[: self.history_at], self.history, self.rest[self.history_at :]))


@dataclass(frozen=True, slots=True)
class Lease:
    run_id: str
    request_id: str
    replica: str
    expires: float
    """Seconds since the epoch, by the store's clock."""


@dataclass(frozen=True, slots=True)
class QueuedRun:
    """A request waiting in its thread's queue (LIVE §4.2), with the run ID its first attempt takes."""

    request_id: str
    run_id: str
    kind: QueuedKind
    create_time: float
    """Seconds since the epoch, by the store's clock."""


AnsweredHow = Literal["answers", "prompt"]


@dataclass(frozen=True, slots=True)
class Answered:
    """Who consumed a thread's pending batch, for `THREAD_NOT_SUSPENDED` (LIVE §5.5)."""

    request_id: str
    revision: int
    """The `SUSPENDED` checkpoint whose batch it consumed."""
    how: AnsweredHow
    """With answers to it, or with a prompt (the batch then left unanswered)."""


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """A thread as stored, read at the store's time `now`."""

    thread_id: str
    incarnation: str
    agent: str
    labels: dict[str, str]
    create_time: float
    update_time: float
    revision: int
    pending: DeferredToolRequests | None
    """The batch the thread is suspended on."""
    accepted: DeferredToolResume | None
    """The retained accepted batch, its answers not all in the history yet (`remaining()`)."""
    fence: str
    lease: Lease | None
    cancel_requested: bool
    last_request_id: str | None
    now: float
    change_seq: int = 0
    """Grows with every write that changes what `Thread` shows (`WatchThread` compares it)."""
    sweep_after: float | None = None
    """When the server has work of its own on the thread (LIVE §3.2): a server-driven request's next
    attempt, or a cancel whose holder may be gone, due then (store's clock); None: none."""
    queue_length: int = 0
    """How many requests wait in the thread's queue (LIVE §4.2)."""
    queue_next: int = 0
    """The next request's place in it (the allocator)."""
    queue: tuple[QueuedRun, ...] = ()
    """Those requests in run order (read with the thread when it has any; empty in a listing)."""
    answered: Answered | None = None
    """The request that last consumed a pending batch (LIVE §5.5); None: none since it was restored."""
    intents_fence: str | None = None
    """The fence under which the thread's dispatch intents are vouched for (`harness.threads.intents`)."""

    @property
    def live_lease(self) -> Lease | None:
        """The lease, while it has not expired by the store's clock."""
        return self.lease if self.lease is not None and self.lease.expires > self.now else None

    @property
    def busy(self) -> bool:
        """Whether a new request finds the thread busy (LIVE §4.1): a live lease, a server-driven
        request's due attempt (work due on a stopped lease), or requests waiting in its queue."""
        return (
            self.live_lease is not None
            or self.queue_length > 0
            or (self.lease is not None and self.sweep_after is not None)
        )

    @property
    def recovery_pending(self) -> bool:
        """Whether the next run recovers: a retained accepted batch, or a run whose lease expired unfinished."""
        return self.accepted is not None or (self.lease is not None and self.live_lease is None)

    @property
    def status(self) -> ThreadStatus:
        if self.live_lease is not None:
            return "running"
        return "suspended" if self.pending is not None else "idle"


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    thread_id: str
    revision: int
    kind: CheckpointKind
    run_id: str
    request_id: str
    create_time: float
    pending: DeferredToolRequests | None
    remaining: DeferredToolResume | None
    client_tools: tuple[ClientTool, ...]
    history_blob: int
    rest_blob: int
    history_at: int


@dataclass(frozen=True, slots=True)
class Head:
    """A checkpoint with its state's parts and the blobs the next delta builds on."""

    checkpoint: CheckpointRow
    parts: StateParts
    history: BlobRef
    rest: BlobRef


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt at a request: the run it started, where, under which fence, with which client tools."""

    run_id: str
    replica: str
    fence: str
    start: float
    """Seconds since the epoch, by the store's clock."""
    client_tools: tuple[ClientTool, ...]
    parked: bool = False
    """Stopped by a SIGTERM at a model request, its lease given up (LIVE §3.3): not counted as a crash."""


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run record: one per request of a thread."""

    request_id: str
    digest: str
    prompt: Prompt | None
    status: RunRowStatus
    outcome: RunEnd
    attempts: tuple[Attempt, ...]
    run_id: str
    """The last attempt's."""
    committed_revision: int
    """The last revision any attempt committed (0: none did, so a next attempt runs the prompt again)."""
    begin_revision: int = 0
    """The head at the request's first Begin."""
    detached: bool = False
    """Started by `StartThreadRun`: the server drives it to its end (LIVE §3.2)."""
    spec: str | None = None
    """A detached request's `DetachedSpec` JSON: what its next attempts run with."""
    queue_kind: QueuedKind | None = None
    """Why it waited in the queue, for a request accepted there (LIVE §4.2); None: it ran at once."""
    rollback_of: str | None = None
    """A ROLLBACK request: the request whose commits it discards (LIVE §4.4); None: none."""
    rolled_back: bool = False
    """Whether its rollback copy was written (by its first Begin): a later attempt never rolls back."""
    digest_parts: dict[str, str] | None = None
    """A digest per part of the request (`digest.DIGEST_PARTS`); None for a record made before them."""

    @property
    def crashed_attempts(self) -> int:
        """The attempts that ended by a lost server (not parked); the last too, once it stopped."""
        return sum(1 for attempt in self.attempts if not attempt.parked)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED
