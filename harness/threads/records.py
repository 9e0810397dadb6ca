"""What the thread store reads back: plain values, JSON columns still as text.

The store keeps the core's own JSON forms (`DeferredToolRequests.to_json`, `DeferredToolResume.to_json`,
the state's `model_dump_json()`), so reading a record never needs the core and the core's loaders stay
the only validation of what comes back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .blobs import BlobRef

__all__ = (
    "THREAD_STATUS_NAMES",
    "CheckpointKind",
    "CheckpointRow",
    "Head",
    "Lease",
    "RunRow",
    "RunRowStatus",
    "StateParts",
    "ThreadRow",
    "ThreadStatus",
)

ThreadStatus = Literal["idle", "running", "suspended"]
THREAD_STATUS_NAMES: Mapping[ThreadStatus, str] = MappingProxyType(
    {"idle": "THREAD_STATUS_IDLE", "running": "THREAD_STATUS_RUNNING", "suspended": "THREAD_STATUS_SUSPENDED"}
)
"""Each status by its name in the contract's `ThreadStatus` enum. An error's details reach hosts as
ErrorInfo metadata, where a `status` must read as `Thread.status` does, so they carry this name."""
CheckpointKind = Literal[
    "created", "imported", "forked", "mid_run", "completed", "suspended", "failed", "cancelled", "rolled_back"
]
RunRowStatus = Literal["running", "completed", "suspended", "failed", "cancelled", "error", "interrupted"]
FINISHED: frozenset[RunRowStatus] = frozenset({"completed", "suspended", "failed", "cancelled", "error"})
"""Run record statuses whose outcome a retry replays."""


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
class ThreadRow:
    """A thread as stored, read at the store's time `now`."""

    thread_id: str
    incarnation: str
    agent: str
    labels: dict[str, str]
    create_time: float
    update_time: float
    revision: int
    pending: str | None
    accepted: str | None
    fence: str
    lease: Lease | None
    cancel_requested: bool
    last_request_id: str | None
    now: float

    @property
    def live_lease(self) -> Lease | None:
        """The lease, while it has not expired by the store's clock."""
        return self.lease if self.lease is not None and self.lease.expires > self.now else None

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
    pending: str | None
    remaining: str | None
    client_tools: str
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
class RunRow:
    """A run record: one per request of a thread."""

    request_id: str
    digest: str
    prompt: str | None
    status: RunRowStatus
    outcome: str | None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    run_id: str = ""
    committed_revision: int = 0

    @property
    def finished(self) -> bool:
        return self.status in FINISHED
