"""What a thread run gives its caller, item by item (`ThreadRun.items()`): THREADS §3's stream, typed.

A live run yields the core's own events (`HarnessEvent`: checkpoint candidates are the run's to commit,
never its caller's), a `ThreadCommittedEvent` after each commit, the terminal one just before the run's
`ThreadRunOutcome`, which comes last. A request that had already finished runs nothing: `replay` rebuilds
its stream from the run record, `ThreadRunStarted`, the terminal `ThreadCommittedEvent` (absent when the run
made no terminal commit) and the stored outcome, both `replayed`, with the original IDs and times.

The stream's shape is decided here; a host (the gRPC server) only encodes each item.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from ..events import HarnessEvent
from ..results import RunStatus
from .outcome import ThreadCommittedEvent, ThreadRunOutcome
from .records import CheckpointKind

__all__ = ("TERMINAL_KIND", "ThreadRunItem", "ThreadRunStarted", "replay")


@dataclass(frozen=True, slots=True)
class ThreadRunStarted:
    """A replay's first item: when the stored run started (a live run's is the core's `run_started`)."""

    thread_id: str
    """The thread the run belongs to."""
    run_id: str
    """The stored run's ID."""
    occurred_at: datetime
    """When that run started (UTC), as its live stream said."""


ThreadRunItem = HarnessEvent | ThreadRunStarted | ThreadCommittedEvent | ThreadRunOutcome
"""One item of `ThreadRun.items()`; a `ThreadRunOutcome` is always the last."""

TERMINAL_KIND: Mapping[RunStatus, CheckpointKind] = MappingProxyType(
    {"completed": "completed", "suspended": "suspended", "failed": "failed", "cancelled": "cancelled"}
)
"""The kind of a run's terminal checkpoint, by how the run ended."""


def replay(outcome: ThreadRunOutcome) -> tuple[ThreadRunItem, ...]:
    """The stream of a finished request, from its stored outcome: its start, its terminal commit (if it
    made one) and the outcome. The commit shares the outcome's time, as it did live."""
    started = ThreadRunStarted(outcome.thread_id, outcome.run_id, outcome.started_at)
    if not outcome.committed:
        return started, outcome
    committed = ThreadCommittedEvent(
        thread_id=outcome.thread_id,
        run_id=outcome.run_id,
        revision=outcome.revision,
        kind=TERMINAL_KIND[outcome.status],
        replayed=True,
        occurred_at=outcome.ended_at,
    )
    return started, committed, outcome
