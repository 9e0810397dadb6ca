"""The thread store's vocabulary: a thread's status, a checkpoint's kind, a run record's status."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

__all__ = (
    "FINISHED",
    "THREAD_STATUS_NAMES",
    "CheckpointKind",
    "QueuedKind",
    "RunRowStatus",
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
RunRowStatus = Literal[
    "queued", "running", "completed", "suspended", "failed", "cancelled", "error", "interrupted"
]
QueuedKind = Literal["enqueued", "interrupting", "rolling_back"]
"""Why a request waits in its thread's queue (LIVE §4.2): `BUSY_STRATEGY_ENQUEUE`, after those before
it; `BUSY_STRATEGY_INTERRUPT` and `_ROLLBACK`, queued first (after earlier ones of the two), the
holder asked to stop."""
FINISHED: frozenset[RunRowStatus] = frozenset({"completed", "suspended", "failed", "cancelled", "error"})
"""Run record statuses whose outcome a retry replays."""
