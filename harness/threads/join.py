"""Joining a run attempt and watching a thread (LIVE §2.4, §2.5, §2.7): what a follower reads and how it ends.

A join sends the events the attempt's log holds after a position, then follows it with no gap and no
repeat until the log leaves `open`: an `ended` log ends as a retry of its request would (the stored
result, or the run's own error); a `lost` one with `RUN_ATTEMPT_LOST`, which is final because only a
write that moved the lease on, or a follower that found it expired a third of a TTL ago, marks it so.
A watch sends the thread's snapshot, then one per change, naming the changes by comparing snapshots.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator
from typing import Literal, Protocol

from ..errors import ErrorCode, HarnessError, InputError, ThreadError
from .eventlog import Encoder, LogSettings, Numbered
from .logstore import LogRow
from .outcome import ThreadRunOutcome
from .records import RunRow, ThreadRow
from .store import ThreadStore, interrupted, not_found, run_not_found

__all__ = ("ChangeKind", "Following", "attempt_of", "follow", "follow_on", "until_started", "watch")

ChangeKind = Literal[
    "snapshot", "committed", "run_started", "run_ended", "rolled_back", "queue", "lease_expired"
]

_QUIET_S = 3600.0
"""How long a watcher of a thread without a lease waits between wake-ups it was not given."""


async def attempt_of(
    store: ThreadStore, thread: ThreadRow, *, run_id: str, request_id: str
) -> tuple[str, str]:
    """The `(run_id, request_id)` a join follows (LIVE §2.4 "Which attempt").

    Raises:
        InputError: `input_invalid` when `run_id` and `request_id` name different requests.
        ThreadError: `run_not_found`.
    """
    record: RunRow | None
    if run_id:
        record = await store.run_of(thread.thread_id, run_id)
        if record is None:
            raise run_not_found(thread.thread_id, run_id)
        if request_id and record.request_id != request_id:
            raise InputError(
                f"Run {run_id!r} was not an attempt of request {request_id!r}.",
                code=ErrorCode.INPUT_INVALID,
                details={"field": "request_id"},
            )
        return run_id, record.request_id
    if request_id:
        record = await store.run_record(thread.thread_id, request_id)
        if record is None:
            raise run_not_found(thread.thread_id, request_id, field="request_id")
        return record.run_id, request_id
    lease = thread.live_lease
    if lease is not None:
        return lease.run_id, lease.request_id
    if thread.last_request_id is not None:
        record = await store.run_record(thread.thread_id, thread.last_request_id)
        if record is not None:
            return record.run_id, record.request_id
    raise ThreadError(
        f"Thread {thread.thread_id!r} has had no run.",
        code=ErrorCode.RUN_NOT_FOUND,
        details={"thread_id": thread.thread_id},
    )


_QUEUE_POLL_S = 1.0
"""A queued request's follower re-reads its record at least this often (every change wakes it too)."""


async def until_started(store: ThreadStore, thread_id: str, request_id: str) -> None:
    """Wait while the request waits in its thread's queue (LIVE §4.2): return once it started, was
    cancelled, or its thread is gone. Every change of the thread wakes this, on any replica (`Hub`)."""
    with store.hub.thread(thread_id) as signal:
        while True:
            seen = signal.version
            record = await store.run_record(thread_id, request_id)
            if record is None or record.status != "queued":
                return
            await signal.wait(seen, _QUEUE_POLL_S)


class Following(Protocol):
    """What a follower needs of its host (`DurableHost`, a run's `RunHost`)."""

    store: ThreadStore
    lease_ttl: float
    encode: Encoder | None
    log_settings: LogSettings


def follow_on(host: Following, thread_id: str, run_id: str, *, after: int) -> AsyncGenerator[Numbered, None]:
    """`follow` with the host's store, lease and log settings."""
    return follow(
        host.store,
        thread_id=thread_id,
        run_id=run_id,
        after=after,
        ttl=host.lease_ttl,
        retention=host.log_settings.retention_s,
        encode=host.encode,
    )


async def follow(
    store: ThreadStore,
    *,
    thread_id: str,
    run_id: str,
    after: int,
    ttl: float,
    retention: float,
    encode: Encoder | None,
) -> AsyncGenerator[Numbered, None]:
    """The attempt's written events after `after`, then each new one, to the log's end.

    Raises:
        ThreadError: `run_attempt_lost`, `run_events_expired`, `thread_not_found`, or the run's own error.
    """
    position = after
    with store.hub.attempt(thread_id, run_id) as signal:
        while True:
            seen = signal.version
            row, events = await store.logs.read(thread_id, run_id, after=position)
            if row is None:
                raise await _no_log(store, thread_id, run_id, retention)
            for sequence, data in events:
                position = sequence
                yield Numbered(sequence, None, data)
            if position < row.last_sequence:
                continue  # more than one read holds
            if row.status == "ended":
                result = await _result(store, row, encode)
                if result.sequence > after:  # a reconnect after the result has nothing left to get
                    yield result
                return
            if row.status == "lost":
                raise await _lost(store, row)
            if not await signal.wait(seen, ttl / 3):
                await _check_holder(store, row, ttl)


async def _check_holder(store: ThreadStore, row: LogRow, ttl: float) -> None:
    """Nothing was written for a third of a TTL: mark the log lost if its holder is gone by the store's
    clock (the holder itself stopped at its expiry, by its own clock)."""
    thread = await store.thread(row.thread_id)
    if thread is None:
        return  # the next read finds the log gone with its thread
    lease = thread.lease
    gone = lease is None or lease.run_id != row.run_id or thread.now - lease.expires >= ttl / 3
    if gone:
        await store.logs.mark_lost(row.thread_id, row.run_id, last_sequence=row.last_sequence, grace=ttl / 3)


async def _result(store: ThreadStore, row: LogRow, encode: Encoder | None) -> Numbered:
    """How an ended log ends: its request's stored result, or the error the request ended with."""
    record = await store.run_record(row.thread_id, row.request_id)
    outcome = None if record is None else record.outcome
    if isinstance(outcome, ThreadRunOutcome) and row.result_sequence is not None:
        sequence = row.result_sequence
        outcome = dataclasses.replace(outcome, replayed=False)  # the attempt's own result, as it streamed
        return Numbered(sequence, outcome, None if encode is None else encode(outcome, sequence))
    if isinstance(outcome, HarnessError):
        raise outcome
    if record is not None and record.status == "interrupted":
        raise interrupted(row.request_id, row.run_id, record.committed_revision)
    raise await _lost(store, row)


async def _lost(store: ThreadStore, row: LogRow) -> ThreadError:
    record = await store.run_record(row.thread_id, row.request_id)
    details: dict[str, str | int] = {
        "run_id": row.run_id,
        "request_id": row.request_id,
        "last_sequence": row.last_sequence,
        "request_status": "unknown" if record is None else record.status,
    }
    if record is not None and record.run_id != row.run_id:
        details["next_run_id"] = record.run_id  # the request's latest attempt
    return ThreadError(
        f"Attempt {row.run_id} of request {row.request_id!r} was lost (its server stopped or was "
        "superseded) after the events sent; retry the request to follow its next attempt.",
        code=ErrorCode.RUN_ATTEMPT_LOST,
        details=details,
    )


async def _no_log(store: ThreadStore, thread_id: str, run_id: str, retention: float) -> ThreadError:
    """Why an attempt has no log to follow: its thread or run is gone, or it expired or was never kept."""
    thread = await store.thread(thread_id)
    if thread is None:
        return not_found(thread_id)
    record = await store.run_of(thread_id, run_id)
    if record is None:
        return run_not_found(thread_id, run_id)
    started = next((a.start for a in record.attempts if a.run_id == run_id), thread.now)
    why = "retention" if thread.now - started > retention else "not_recorded"
    return ThreadError(
        f"The events of run {run_id} are no longer kept ({why}); retry request {record.request_id!r} for "
        "its result, or read its checkpoint.",
        code=ErrorCode.RUN_EVENTS_EXPIRED,
        details={
            "run_id": run_id,
            "request_id": record.request_id,
            "request_status": record.status,
            "revision": record.committed_revision,
            "why": why,
        },
    )


async def watch(
    store: ThreadStore, thread_id: str
) -> AsyncGenerator[tuple[ThreadRow, tuple[ChangeKind, ...]], None]:
    """The thread now (`snapshot`), then after each change of what `Thread` shows, with what changed.

    Raises:
        ThreadError: `thread_not_found`, at once or once the thread is deleted (or made again).
    """
    with store.hub.thread(thread_id) as signal:
        seen = signal.version
        last = await store.thread(thread_id)
        if last is None:
            raise not_found(thread_id)
        yield last, ("snapshot",)
        while True:
            lease = last.live_lease
            timeout = _QUIET_S if lease is None else max(0.0, lease.expires - last.now) + 0.05
            await signal.wait(seen, timeout)
            seen = signal.version
            current = await store.thread(thread_id)
            if current is None or current.incarnation != last.incarnation:
                raise not_found(thread_id)
            changes = await _changes(store, last, current)
            if changes:
                yield current, changes
                last = current


async def _changes(store: ThreadStore, last: ThreadRow, current: ThreadRow) -> tuple[ChangeKind, ...]:
    """What changed between the snapshot sent last and the thread now, in the order it happened. A run
    that started and ended between two reads is named by the checkpoint it left as head."""
    before, now = last.live_lease, current.live_lease
    shown = None if before is None else before.run_id
    started = now is not None and now.run_id != shown
    ended: ChangeKind | None = None
    if before is not None and (now is None or now.run_id != before.run_id):
        expired = current.lease is not None and current.lease.run_id == before.run_id
        ended = "lease_expired" if expired else "run_ended"
    committed: ChangeKind | None = None
    if current.revision > last.revision:
        head = await store.checkpoint(current.thread_id, current.revision)
        kind = getattr(head, "kind", "")
        committed = "rolled_back" if kind == "rolled_back" else "committed"
        ran = getattr(head, "run_id", "")
        if ran and ran != shown and (now is None or now.run_id != ran):
            started, ended = True, ended or "run_ended"  # it ran entirely between the two reads
    found: list[ChangeKind] = ["run_started"] if started else []
    if committed is not None:
        found.append(committed)
    if ended is not None:
        found.append(ended)
    if [queued.request_id for queued in last.queue] != [queued.request_id for queued in current.queue]:
        found.append("queue")
    return tuple(found)
