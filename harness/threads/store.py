"""The thread store: every read and every write of THREADS §2 and §4, each one short transaction, typed.

No lock is held while anything is decoded, validated or run: callers read, decide, then write with a
compare-and-set on what they read (`revision`, `fence`, the lease being free). Every write that changes
the head or the lease from outside a run's own commits takes a new random fence, so a run that lost its
thread can commit nothing more. Time is the database's clock, read inside each transaction.

`ThreadStore` holds only those reads and writes; records come and go typed (`records`), never as a
column's JSON. Its parts: the worker threads, transactions and health (`worker`), the statements
(`queries`), rows <-> records (`rows`), history blobs and their collection (`blobstore`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from ..client_tools import ClientTool
from ..deferred import DeferredToolRequests, DeferredToolResume
from ..errors import ErrorCode, ThreadError
from .blobstore import collect_blobs, read_blob, write_blob
from .database import Database
from .eventlog import LogWrite
from .follow import Hub
from .intents import IntentCall, carry_over, dispatch, fresh_fence, issue, new_fence
from .intents import not_started as _not_started
from .logstore import LogStore, delete_logs, lose_logs, notify_thread, open_log, write_log
from .notify import CHANNEL, CancelListener, payload
from .outcome import ThreadRunOutcome
from .queries import (
    CANCEL_UNFINISHED_RUN,
    CLOSE_UNFINISHED_RUN,
    COMMIT_HEAD,
    DELETE_THREAD,
    GATE_THREAD,
    INSERT_CHECKPOINT,
    INSERT_LABEL,
    INSERT_RUN,
    INSERT_THREAD,
    LIST_THREADS,
    LOCK_THREAD,
    MOVE_SWEEP,
    NAMESPACE,
    NOTIFY_CANCEL,
    RENEW_LEASE,
    SELECT_CHECKPOINT,
    SELECT_CHECKPOINTS,
    SELECT_DUE,
    SELECT_QUEUE,
    SELECT_RUN,
    SELECT_RUNS_BY_RUN_ID,
    SELECT_RUNS_WITH_ATTEMPT,
    SELECT_THREAD,
    START_QUEUED,
    TAKE_THREAD,
    UPDATE_RUN,
    UPDATE_THREAD,
    key,
    released,
)
from .records import (
    AnsweredHow,
    Attempt,
    CheckpointKind,
    CheckpointRow,
    Head,
    Lease,
    Prompt,
    QueuedKind,
    QueuedRun,
    RunEnd,
    RunRow,
    RunRowStatus,
    StateParts,
    ThreadRow,
    ThreadStatus,
)
from .rows import (
    attempts_json,
    checkpoint_row,
    checkpoint_values,
    end_json,
    requests_json,
    resume_json,
    run_row,
    run_values,
    thread_row,
    thread_values,
)
from .worker import StoreWorker, offloaded, store_unavailable

__all__ = (
    "Committed",
    "Finish",
    "NewCheckpoint",
    "ThreadStore",
    "busy",
    "conflict",
    "not_found",
    "queue_busy",
    "queue_full",
    "store_unavailable",
)


@dataclass(frozen=True, slots=True)
class NewCheckpoint:
    """A checkpoint to write: its state's parts, what it waits on, and what made it."""

    kind: CheckpointKind
    parts: StateParts
    pending: DeferredToolRequests | None
    remaining: DeferredToolResume | None
    client_tools: tuple[ClientTool, ...]
    run_id: str = ""
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class Committed:
    """What a fenced commit wrote: the head revision, the lease's new expiry, the checkpoint if any."""

    revision: int
    expires: float | None
    head: Head | None


@dataclass(frozen=True, slots=True)
class Finish:
    """A run's end, written with (or without) its terminal checkpoint: record, lease, pending, accepted."""

    request_id: str
    status: RunRowStatus
    outcome: RunEnd
    pending: DeferredToolRequests | None
    accepted: DeferredToolResume | None


class ThreadStore:
    """The store of one server process (`replica`) on one database."""

    def __init__(self, database: Database, *, replica: str, dispatch_intents: bool = True) -> None:
        self.database = database
        self.replica = replica
        self.intents = dispatch_intents
        """Whether this replica's runs gate their tools and keep dispatch intents (LIVE §5.2)."""
        self.worker = StoreWorker(database, replica=replica)
        self._postgresql = database.kind == "postgresql"
        poll = {"sqlite": 0.25, "postgresql": 1.0}.get(database.kind)
        self.hub = Hub(asyncio.get_running_loop(), poll_s=poll, positions=self._positions)
        """Wakes this replica's followers and watchers after each write (`harness.threads.follow`)."""
        self.logs = LogStore(self.worker, self.hub)
        """The run event logs' own transactions (appends, followers, the sweeper)."""
        self._listener: CancelListener | None = None
        self._due: Callable[[], None] | None = None
        """Told when a transaction here made the server's own work due now (a queue's head, LIVE §4.2)."""
        self.on_hand_off: Callable[[str, float], None] | None = None
        """Called on the loop with a thread and its claim when a commit here ended a lease and kept the
        queue's head for this replica to start (`commit(hand_off=...)`)."""

    @property
    def healthy(self) -> bool:
        """False from a transaction that found the database down until the next one that succeeds."""
        return self.worker.healthy

    @property
    def on_health(self) -> Callable[[bool], None] | None:
        """Called when `healthy` changes (the server reports it as the service's health)."""
        return self.worker.on_health

    @on_health.setter
    def on_health(self, listener: Callable[[bool], None] | None) -> None:
        self.worker.on_health = listener

    async def _positions(
        self, attempts: list[tuple[str, str]], thread_ids: list[str]
    ) -> tuple[dict[tuple[str, str], tuple[str, int]], dict[str, int]]:
        return await self.logs.positions(attempts, thread_ids)

    def listen_for_cancels(
        self, deliver: Callable[[str, str], None], due: Callable[[], None] | None = None
    ) -> None:
        """Call `deliver(thread_id, run_id)` on this loop when another replica asks to cancel a run, and
        `due()` when one made the server's own work on a thread due now (a parked attempt, LIVE §3.2).

        PostgreSQL only (LISTEN/NOTIFY); elsewhere the holder reads the request at its next renewal, and
        sweepers find due work by their interval.
        """
        self._due = due
        if self.database.conninfo is not None and self._listener is None:
            self._listener = CancelListener(
                self.database.conninfo, asyncio.get_running_loop(), deliver, self.hub.noted, due
            )

    def close(self) -> None:
        """Let the store's threads go once their transactions ended (the database is closed apart)."""
        if self._listener is not None:
            self._listener.close()
        self.hub.close()
        self.worker.close()

    def _made_due(self, thread_id: str, due: bool) -> None:
        """After a commit (in a worker thread): wake the thread's followers, and this replica's sweeper
        when work is due now, on the loop once the commit is the database's (`StoreWorker.on_loop`)."""
        self.worker.on_loop(self.hub.fire, thread_id)
        if due and self._due is not None:
            self.worker.on_loop(self._due)

    # -- reads --------------------------------------------------------------------------------------

    @offloaded(read=True)
    def thread(self, thread_id: str) -> ThreadRow | None:
        with self.worker.transaction(read=True) as (conn, now):
            return _thread(conn, thread_id, now)

    async def head(self, thread: ThreadRow) -> Head:
        """The thread's head checkpoint with its state (rebuilt and checked)."""
        found = await self.checkpoint(thread.thread_id, thread.revision, with_state=True)
        if not isinstance(found, Head):  # deleted meanwhile: the caller's next write fails its CAS
            raise not_found(thread.thread_id)
        return found

    @offloaded(read=True)
    def checkpoint(
        self, thread_id: str, revision: int, *, with_state: bool = False
    ) -> Head | CheckpointRow | None:
        with self.worker.transaction(read=True) as (conn, _now):
            row = SELECT_CHECKPOINT.first(conn, {**key(thread_id), "revision": revision})
            if row is None:
                return None
            checkpoint = checkpoint_row(row)
            if not with_state:
                return checkpoint
            history = read_blob(conn, checkpoint.history_blob)
            rest = read_blob(conn, checkpoint.rest_blob)
        return Head(checkpoint, StateParts(history.data, rest.data, checkpoint.history_at), history, rest)

    @offloaded(read=True)
    def checkpoints(self, thread_id: str, *, limit: int, before: int | None) -> list[CheckpointRow]:
        """Newest first; `before` = only revisions below it."""
        params: dict[str, Any] = {**key(thread_id), "limit": limit}
        if before is not None:
            params["before"] = before
        with self.worker.transaction(read=True) as (conn, _now):
            rows = SELECT_CHECKPOINTS[before is not None].run(conn, params)
        return [checkpoint_row(row) for row in rows]

    @offloaded(read=True)
    def threads(
        self,
        *,
        limit: int,
        labels_filter: Mapping[str, str],
        status: ThreadStatus | None,
        after: tuple[float, str] | None,
    ) -> list[tuple[ThreadRow, CheckpointRow]]:
        """Newest `update_time` first, then `thread_id`, each with its head checkpoint (one statement);
        `after` = the last thread of the previous page."""
        params: dict[str, Any] = {"namespace": NAMESPACE, "limit": limit}
        for i, (label, value) in enumerate(labels_filter.items()):
            params[f"label_key_{i}"], params[f"label_value_{i}"] = label, value
        if after is not None:
            params["after_time"], params["after_thread"] = after
        listing = LIST_THREADS[len(labels_filter), status, after is not None]
        with self.worker.transaction(read=True) as (conn, now):
            rows = listing.run(conn, params if status is None else {**params, "now": now})
        return [(thread_row(row, now), checkpoint_row(row, "head_")) for row in rows]

    @offloaded(read=True)
    def run_of(self, thread_id: str, run_id: str) -> RunRow | None:
        """The record of the request `run_id` was an attempt of."""
        with self.worker.transaction(read=True) as (conn, _now):
            return _run_of(conn, thread_id, run_id)

    @offloaded(read=True)
    def run_record(self, thread_id: str, request_id: str) -> RunRow | None:
        with self.worker.transaction(read=True) as (conn, _now):
            return _run_record(conn, thread_id, request_id)

    @offloaded(read=True)
    def thread_and_record(self, thread_id: str, request_id: str) -> tuple[ThreadRow | None, RunRow | None]:
        """The thread and one request's record, from one snapshot in one transaction (what a run decides
        on: one thread hop, not two)."""
        with self.worker.transaction(read=True) as (conn, now):
            return _thread(conn, thread_id, now), _run_record(conn, thread_id, request_id)

    @offloaded(read=True)
    def due_work(self, thread_id: str) -> tuple[ThreadRow | None, RunRow | None, RunRow | None]:
        """The thread with the records its due work is decided on (LIVE §3.2): its last lease's request
        and its queue's head, from one snapshot in one transaction (a sweep or a hand-off: one hop, not
        three)."""
        with self.worker.transaction(read=True) as (conn, now):
            thread = _thread(conn, thread_id, now)
            if thread is None:
                return None, None, None
            stopped = None if thread.lease is None else _run_record(conn, thread_id, thread.lease.request_id)
            head = _run_record(conn, thread_id, thread.queue[0].request_id) if thread.queue else None
            return thread, stopped, head

    # -- creating, forking, rolling back, deleting -------------------------------------------------------

    @offloaded(read=False)
    def create(
        self,
        thread_id: str,
        *,
        agent: str,
        thread_labels: Mapping[str, str],
        checkpoint: NewCheckpoint,
        accepted: DeferredToolResume | None,
        base: Head | None = None,
    ) -> tuple[ThreadRow, Head]:
        """A new thread whose revision 1 is `checkpoint` (returned as its head); `base` is the head a fork
        copies data from.

        Raises:
            ThreadError: `thread_exists`.
        """
        try:
            with self.worker.transaction() as (conn, now):
                if _thread(conn, thread_id, now) is not None:
                    raise _exists(thread_id)
                fence = fresh_fence()
                created = ThreadRow(
                    thread_id=thread_id,
                    incarnation=uuid.uuid4().hex,
                    agent=agent,
                    labels=dict(sorted(thread_labels.items())),
                    create_time=now,
                    update_time=now,
                    revision=1,
                    pending=checkpoint.pending,
                    accepted=accepted,
                    fence=fence,
                    lease=None,
                    cancel_requested=False,
                    last_request_id=None,
                    now=now,
                    intents_fence=fence if self.intents else None,
                )
                INSERT_THREAD.run(conn, thread_values(created))
                INSERT_LABEL.run_many(
                    conn, [{**key(thread_id), "key": k, "value": v} for k, v in thread_labels.items()]
                )
                head = _put_checkpoint(conn, thread_id, created.incarnation, 1, checkpoint, base, now)
                source = None if base is None else _thread(conn, base.checkpoint.thread_id, now)
                carry_over(conn, created, checkpoint.pending, source=source, forked=base is not None, now=now)
        except IntegrityError:
            # The ID was taken meanwhile, or a fork's source was deleted (its data with it).
            with self.worker.transaction(read=True) as (conn, now):
                taken = _thread(conn, thread_id, now) is not None
            if taken or base is None:
                raise _exists(thread_id) from None
            raise not_found(base.checkpoint.thread_id) from None
        return created, head

    @offloaded(read=False)
    def rollback(self, thread: ThreadRow, source: CheckpointRow) -> ThreadRow:
        """A new head copying `source` (its data by reference), with a new fence and no lease.

        `thread` is what the caller read and checked: the write is a compare-and-set on its revision and
        fence, and an expired lease's unfinished run record is closed `interrupted`.

        Raises:
            ThreadError: `revision_conflict` or `thread_busy` when the thread changed since it was read.
        """
        revision = thread.revision + 1
        with self.worker.transaction() as (conn, now):
            rolled = _take(
                conn,
                thread,
                now,
                intents=self.intents,
                revision=revision,
                pending=requests_json(source.pending),
                accepted=resume_json(source.remaining),
                change_seq=None,
                **released(now, suspended=source.pending is not None),
                **(_answered(None, None, None) if source.pending is not None else {}),
            )
            lose_logs(conn, thread.thread_id, now)
            copy = dataclasses.replace(
                source, revision=revision, kind="rolled_back", run_id="", request_id="", create_time=now
            )
            INSERT_CHECKPOINT.run(conn, checkpoint_values(copy))
            _close_unfinished(conn, thread, now, status="interrupted")
            due = rolled.sweep_after is not None
            notify_thread(conn, thread.thread_id, due=due)
        self._made_due(thread.thread_id, due)
        return rolled

    @offloaded(read=False)
    def delete(self, thread: ThreadRow) -> None:
        """Delete the thread read as `thread` (compare-and-set), its checkpoints, records and own data."""
        with self.worker.transaction() as (conn, now):
            _take(conn, thread, now, intents=self.intents)
            delete_logs(conn, thread.thread_id)
            for statement in DELETE_THREAD:
                statement.run(conn, key(thread.thread_id))
            notify_thread(conn, thread.thread_id)
            collect_blobs(conn, replica=self.replica)
        self.worker.on_loop(self.hub.fire, thread.thread_id)

    # -- the run protocol (THREADS §4) ------------------------------------------------------------------

    @offloaded(read=False)
    def begin(
        self,
        thread: ThreadRow,
        *,
        run_id: str,
        request_id: str,
        ttl: float,
        record: RunRow | None,
        digest: str,
        prompt: Prompt | None,
        client_tools: Sequence[ClientTool],
        digest_parts: dict[str, str] | None = None,
        accepted: DeferredToolResume | None,
        log: bool = False,
        spec: str | None = None,
        superseded: ThreadRunOutcome | None = None,
        rollback: CheckpointRow | None = None,
        rolled_back: bool = False,
        consumes: AnsweredHow | None = None,
        not_started: frozenset[str] = frozenset(),
    ) -> tuple[ThreadRow, RunRow]:
        """Take the lease of `thread` as read (compare-and-set) and write the run's record.

        `record` is the request's existing unfinished record (a next attempt), else a new one is
        inserted with `prompt`; either is detached when `spec` (its `detached.spec_json`) is given; a superseded
        unfinished record of another request is closed `interrupted`. The attempt is recorded with its
        `client_tools`. `accepted` is the batch to retain (the request's answers, or the retained one).
        `pending` is cleared. The thread's open event log (an earlier attempt's) is marked lost, and with
        `log` this attempt's is opened. A detached request's lease is the server's work (`sweep_after`).
        `superseded`: an INTERRUPT closes the superseded record `cancelled` with this outcome instead.
        `rollback`: a ROLLBACK's first Begin writes a `rolled_back` copy of this checkpoint as the new
        head first (as `RollbackThread` does) and the run begins from it; `rolled_back` marks the
        record so that no later attempt rolls back again (LIVE §4.4). `consumes`: the run begins from
        a suspended head and consumes its batch so (answers, or a prompt), which the thread records for
        `THREAD_NOT_SUSPENDED` (LIVE §5.5). `not_started`: the calls the run takes as never started
        (LIVE §5.3), read before; re-read here after the thread row, and should one have been dispatched
        meanwhile (a stalled holder), nothing is written.

        Raises:
            ThreadError: `thread_busy` / `revision_conflict` when the thread changed since it was read
                (nothing was written; read again and decide again).
        """
        detached = spec is not None or (record is not None and record.detached)
        queued = record is not None and record.status == "queued"
        begins = thread.revision + (1 if rollback is not None else 0)
        with self.worker.transaction() as (conn, now):
            taken = _take(
                conn,
                thread,
                now,
                intents=self.intents,
                **({"queue_pop": 0} if queued else {}),
                **({"revision": begins} if rollback is not None else {}),
                pending=None,
                accepted=resume_json(accepted),
                lease_run_id=run_id,
                lease_request_id=request_id,
                lease_replica=self.replica,
                lease_expires=now + ttl,
                cancel_requested=False,
                last_request_id=request_id,
                sweep_begin=now + ttl if detached else None,
                change_seq=None,
                **(_answered(request_id, begins, consumes) if consumes is not None else {}),
            )
            if not_started and _not_started(conn, thread, not_started) != not_started:
                raise conflict(taken)  # decide again, on what the intents say now
            lose_logs(conn, thread.thread_id, now)
            if rollback is not None:
                copy = dataclasses.replace(
                    rollback, revision=begins, kind="rolled_back", run_id="", request_id="", create_time=now
                )
                INSERT_CHECKPOINT.run(conn, checkpoint_values(copy))
            if log:
                open_log(
                    conn,
                    thread.thread_id,
                    run_id=run_id,
                    request_id=request_id,
                    incarnation=taken.incarnation,
                    now=now,
                )
            notify_thread(conn, thread.thread_id)
            if thread.last_request_id != request_id and superseded is not None:
                CANCEL_UNFINISHED_RUN.run(
                    conn,
                    {
                        **key(thread.thread_id),
                        "request_id": superseded.request_id,
                        "status": "cancelled",
                        "outcome": end_json(superseded),
                        "update_time": now,
                    },
                )
            elif thread.last_request_id != request_id:
                _close_unfinished(conn, thread, now, status="interrupted")
            attempt = Attempt(run_id, self.replica, taken.fence, now, tuple(client_tools))
            if record is None:
                taken_record = RunRow(
                    request_id=request_id,
                    digest=digest,
                    digest_parts=digest_parts,
                    prompt=prompt,
                    status="running",
                    outcome=None,
                    attempts=(attempt,),
                    run_id=run_id,
                    committed_revision=0,
                    begin_revision=begins,
                    detached=detached,
                    spec=spec,
                    rolled_back=rolled_back,
                )
                INSERT_RUN.run(
                    conn,
                    run_values(taken_record, thread_id=thread.thread_id, now=now, begin_revision=begins),
                )
            elif queued:
                # Out of the queue only by a compare-and-set on its own status (LIVE §4.8).
                taken_record = dataclasses.replace(
                    record,
                    status="running",
                    attempts=(attempt,),
                    begin_revision=begins,
                    rolled_back=rolled_back or record.rolled_back,
                )
                started = START_QUEUED.first(
                    conn,
                    {
                        **key(thread.thread_id),
                        "request_id": request_id,
                        "status": "running",
                        "attempts": attempts_json(taken_record.attempts),
                        "begin_revision": begins,
                        "rolled_back": taken_record.rolled_back,
                        "update_time": now,
                    },
                )
                if started is None:  # cancelled meanwhile: nothing is written, the caller decides again
                    raise conflict(taken)
            else:
                taken_record = dataclasses.replace(
                    record, attempts=(*record.attempts, attempt), run_id=run_id, detached=detached
                )
                values: dict[str, Any] = {
                    "attempts": attempts_json(taken_record.attempts),
                    "run_id": run_id,
                    "update_time": now,
                }
                if detached and not record.detached:  # a `StartThreadRun` retry takes an attached one over
                    values.update(detached=True, spec=spec)
                UPDATE_RUN[tuple(values)].run(
                    conn, {**key(thread.thread_id), "request_id": request_id, **values}
                )
        self.worker.on_loop(self.hub.fire, thread.thread_id)
        return taken, taken_record

    @offloaded(read=False)
    def commit(
        self,
        thread_id: str,
        *,
        fence: str,
        revision: int,
        checkpoint: NewCheckpoint | None,
        base: Head | None,
        accepted: DeferredToolResume | None,
        finish: Finish | None = None,
        ttl: float | None = None,
        log: LogWrite | None = None,
        park: str = "",
        hand_off: float | None = None,
        issued: Sequence[IntentCall] = (),
        dispatched: Sequence[IntentCall] = (),
        issued_by: str = "",
    ) -> Committed:
        """A fenced commit of the holder of `fence`: a checkpoint after `revision` (or none), the
        retained batch, and with `finish` the run record's outcome, `pending`, and the lease released.
        `ttl` extends the lease as a renewal would. `log` is the attempt's event log write, made after
        the thread row. `park` (the request's ID) parks the attempt (LIVE §3.3): its lease ends now and
        its next attempt is due at once, its log is marked lost and its record stays open. With
        `finish`, `hand_off` (a lease TTL) keeps a waiting queue's head for this replica, which starts it
        at once (`on_hand_off`); should it die first, the head is due for any replica after that TTL.
        `issued`: the side-effecting calls of a response this commit is the first to hold (LIVE §5.2),
        made by the attempt `issued_by`; `dispatched`: calls about to start, whose intents this commit
        dispatches (the response's commit merged with its first dispatch).

        Raises:
            ThreadError: `lease_lost` when the fence is no longer the thread's.
            LogMoved: the attempt's log is not as its holder last wrote it (nothing was written).
        """
        with self.worker.transaction() as (conn, now):
            head = revision + (1 if checkpoint is not None else 0)
            values: dict[str, Any] = {"revision": head, "accepted": resume_json(accepted)}
            if checkpoint is not None:
                values["update_time"] = now
            if checkpoint is not None or finish is not None:
                values["change_seq"] = None
            expires: float | None = None
            names: tuple[str, ...] = ()
            if finish is not None:
                # The lease's end hands the thread to its queue's head, unless it waits on answers now.
                claim = None if hand_off is None else now + hand_off
                ended = released(now, suspended=finish.pending is not None, claim=claim)
                values.update(pending=requests_json(finish.pending), update_time=now, **ended)
            elif park:
                values.update(lease_expires=now, sweep_after=now, change_seq=None)
            elif ttl is not None:
                expires = now + ttl
                values["lease_expires"] = expires
                names = ("sweep_with_lease",)
            run_id, last = ("", -1) if log is None else (log.run_id, log.last)
            signal = checkpoint is not None or finish is not None or bool(park) or bool(log and log.count)
            # PostgreSQL: the thread's note rides in the row's update unless what follows moves the row or
            # decides the note's `due` (a finish, a park, intents).
            folded = signal and self._postgresql and finish is None and not (park or issued or dispatched)
            params = {**key(thread_id), "expected_fence": fence, "expected_revision": revision, **values}
            if folded:
                names += ("notify",)
                params.update(run_id=run_id, last_sequence=last)
            written_row = COMMIT_HEAD[(*values, *names)].first(conn, params)
            if written_row is None:
                raise lease_lost(thread_id)
            if log is not None:
                write_log(conn, thread_id, log, now)
            if issued:
                issue(conn, thread_id, issued, run_id=issued_by, revision=head, now=now)
            if dispatched:
                dispatch(conn, thread_id, dispatched, run_id=issued_by, revision=head, now=now)
            if park:
                lose_logs(conn, thread_id, now)
                _park_attempt(conn, thread_id, park, now)
            written: Head | None = None
            if checkpoint is not None:
                owner = written_row.incarnation
                written = _put_checkpoint(conn, thread_id, owner, head, checkpoint, base, now)
            if finish is not None:  # a run's checkpoints are its committed revisions (`COMMITTED_REVISION`)
                record = {"status": finish.status, "outcome": end_json(finish.outcome), "update_time": now}
                UPDATE_RUN[tuple(record)].run(
                    conn, {**key(thread_id), "request_id": finish.request_id, **record}
                )
            queue_due = finish is not None and written_row.sweep_after is not None
            kept = queue_due and hand_off is not None
            if signal and not folded:
                due = bool(park) or (queue_due and not kept)
                notify_thread(conn, thread_id, run_id=run_id, last_sequence=last, due=due)
        if signal:
            changed = checkpoint is not None or finish is not None or bool(park)
            self.worker.on_loop(self.hub.fire, thread_id, run_id, changed)
        if kept and self.on_hand_off is not None:
            self.worker.on_loop(self.on_hand_off, thread_id, float(written_row.sweep_after))
        elif queue_due and self._due is not None:
            self.worker.on_loop(self._due)
        return Committed(head, expires, written)

    @offloaded(read=False)
    def dispatch(
        self, thread_id: str, *, fence: str, run_id: str, revision: int, calls: Sequence[IntentCall]
    ) -> None:
        """The holder of `fence` is about to start `calls` (LIVE §5.2): their intents dispatched, durably,
        in one fenced transaction (the thread row first). Idempotent: a retry after an unknown outcome
        writes the same rows.

        Raises:
            ThreadError: `lease_lost` when the fence is no longer the thread's.
        """
        with self.worker.transaction() as (conn, now):
            if GATE_THREAD.first(conn, {**key(thread_id), "expected_fence": fence}) is None:
                raise lease_lost(thread_id)
            dispatch(conn, thread_id, calls, run_id=run_id, revision=revision, now=now)

    @offloaded(read=True)
    def calls_not_started(self, thread: ThreadRow, call_ids: Collection[str] | None = None) -> frozenset[str]:
        """The calls (of `call_ids`; None: any) the thread's intents show never started
        (`intents.not_started`), read with the thread as `thread` was: empty when its fence moved since."""
        with self.worker.transaction(read=True) as (conn, now):
            current = _thread(conn, thread.thread_id, now)
            if current is None or current.fence != thread.fence:
                return frozenset()
            return _not_started(conn, current, call_ids)

    @offloaded(read=False)
    def renew(self, thread_id: str, *, fence: str, ttl: float) -> tuple[float, bool, bool]:
        """Extend the live lease of the holder of `fence`; returns the new expiry, whether a cancel was
        asked, and whether the run is the server's to finish (`sweep_after` is kept: a detached request,
        or one made so by a `StartThreadRun` retry). A lease that expired by the database's clock is not
        extended: another replica may be taking the thread over.

        Raises:
            ThreadError: `lease_lost`.
        """
        with self.worker.transaction() as (conn, now):
            renewed = RENEW_LEASE.first(
                conn, {**key(thread_id), "expected_fence": fence, "now": now, "lease_expires": now + ttl}
            )
            if renewed is None:
                raise lease_lost(thread_id)
        return now + ttl, bool(renewed.cancel_requested), bool(renewed.detached)

    @offloaded(read=False)
    def cancel(self, thread_id: str, run_id: str, *, outcome: ThreadRunOutcome) -> tuple[RunRowStatus, bool]:
        """Record a cancellation of `run_id`; returns the record's status and whether its holder is live.

        A live holder is asked (`cancel_requested`, read at its next renewal); a record whose lease has
        expired is closed `cancelled` with `outcome` at once, with a new fence.

        Raises:
            ThreadError: `thread_not_found`, `run_not_found`.
        """
        with self.worker.transaction() as (conn, now):
            # The thread row first, as every other write takes it: two writers never wait on each other.
            thread = _thread(conn, thread_id, now, lock=True)
            if thread is None:
                raise not_found(thread_id)
            record = _run_of(conn, thread_id, run_id)
            if record is None:
                raise run_not_found(thread_id, run_id)
            outcome = dataclasses.replace(outcome, request_id=record.request_id)
            if record.status == "queued":
                # It never runs (LIVE §4.2): closed with a result that has no state, at the head.
                _close_queued(conn, thread_id, record.request_id, end_json(outcome), now)
                notify_thread(conn, thread_id)
                self.worker.on_loop(self.hub.fire, thread_id)
                return "cancelled", False
            if record.status != "running":
                return record.status, False
            live = thread.live_lease
            if live is not None and live.run_id == record.run_id:
                # Also the server's work (LIVE §3.2 c): should the holder die, a sweeper closes the run.
                asked = {"cancel_requested": True, "sweep_after": live.expires}
                UPDATE_THREAD[tuple(asked)].run(conn, {**key(thread_id), **asked})
                if conn.dialect.name == "postgresql" and live.replica != self.replica:
                    # Heard by the holder when this commits (`harness.threads.notify`).
                    NOTIFY_CANCEL.run(conn, {"channel": CHANNEL, "payload": payload(thread_id, run_id)})
                return "running", True
            UPDATE_RUN["status", "outcome", "update_time"].run(
                conn,
                {
                    **key(thread_id),
                    "request_id": record.request_id,
                    "status": "cancelled",
                    "outcome": end_json(outcome),
                    "update_time": now,
                },
            )
            due = False
            if thread.lease is not None and thread.lease.request_id == record.request_id:
                ended = {
                    **new_fence(conn, thread, now, enabled=self.intents),
                    "change_seq": None,
                    **released(now, suspended=thread.pending is not None),
                }
                UPDATE_THREAD[tuple(ended)].run(conn, {**key(thread_id), **ended})
                lose_logs(conn, thread_id, now)
                due = thread.queue_length > 0 and (
                    thread.pending is None or any(queued.kind != "enqueued" for queued in thread.queue)
                )
                notify_thread(conn, thread_id, due=due)
        self._made_due(thread_id, due)
        return "cancelled", False

    # -- server-driven requests (LIVE §3, §4) ------------------------------------------------------------

    @offloaded(read=False)
    def enqueue(
        self,
        thread: ThreadRow,
        *,
        request_id: str,
        run_id: str,
        digest: str,
        prompt: Prompt | None,
        spec: str,
        digest_parts: dict[str, str] | None = None,
        expected_revision: int,
        limit: int,
        kind: QueuedKind = "enqueued",
        rolls_back: str = "",
    ) -> tuple[ThreadRow, int, str]:
        """Accept a request into the queue of the busy `thread` (LIVE §4.2): its record `queued`, with
        its spec and the `run_id` its first attempt takes, last (`enqueued`) or first after the other
        `interrupting` ones; an interrupting request also asks the live holder to stop as `cancel` asks
        it (LIVE §4.3), unless that holder is an interrupting request itself. Returns the thread as
        written, the request's place (1 = next), and the run asked to stop ("" if none). One
        transaction, the thread row first.

        `rolls_back`: the request a ROLLBACK's answers were checked against (LIVE §4.5), which must
        be the one it stops.

        Raises:
            ThreadError: `thread_queue_full` at `limit`; `revision_conflict` when the head is not
                `expected_revision` (0: any), or when the thread is not busy any more, the request
                was accepted meanwhile, or another request holds the lease than `rolls_back` (nothing
                was written: read again and decide again).
        """
        try:
            with self.worker.transaction() as (conn, now):
                locked = _thread(conn, thread.thread_id, now, lock=True)
                if locked is None:
                    raise not_found(thread.thread_id)
                if not locked.busy or (expected_revision and expected_revision != locked.revision):
                    raise conflict(locked)  # free now (decide again), or a stale revision
                if locked.queue_length >= limit:
                    raise queue_full(locked, limit)
                live = locked.live_lease
                holder = (
                    None
                    if live is None or kind == "enqueued"
                    else SELECT_RUN.first(conn, {**key(thread.thread_id), "request_id": live.request_id})
                )
                # Interrupting requests never stop (nor roll back) each other (LIVE §8, 13).
                stops = live is not None and holder is not None and holder.queue_kind in (None, "enqueued")
                if rolls_back and not (stops and live is not None and live.request_id == rolls_back):
                    raise conflict(locked)  # the answers were checked against another holder's batch
                record = RunRow(
                    request_id=request_id,
                    digest=digest,
                    digest_parts=digest_parts,
                    prompt=prompt,
                    status="queued",
                    outcome=None,
                    attempts=(),
                    run_id=run_id,
                    committed_revision=0,
                    detached=True,
                    spec=spec,
                    queue_kind=kind,
                    rollback_of=live.request_id if stops and kind == "rolling_back" and live else None,
                )
                INSERT_RUN.run(
                    conn,
                    run_values(
                        record,
                        thread_id=thread.thread_id,
                        now=now,
                        begin_revision=0,
                        queue_seq=locked.queue_next,
                    ),
                )
                # The server's own work (LIVE §3.2): the queue's head once the lease expires, or now
                # when no lease holds it; none while the thread waits on answers.
                sweep = locked.sweep_after
                if sweep is None and live is not None:
                    sweep = live.expires
                elif sweep is None and (locked.pending is None or kind != "enqueued"):
                    sweep = now
                values: dict[str, Any] = {"queue_push": 0, "change_seq": 0, "sweep_after": sweep}
                asked = ""
                if stops and live is not None and not locked.cancel_requested:
                    asked = live.run_id  # stopped as `cancel` stops it; it hands off to this one
                    values["cancel_requested"] = True
                    if conn.dialect.name == "postgresql" and live.replica != self.replica:
                        NOTIFY_CANCEL.run(
                            conn, {"channel": CHANNEL, "payload": payload(thread.thread_id, asked)}
                        )
                UPDATE_THREAD[tuple(values)].run(conn, {**key(thread.thread_id), **values})
                notify_thread(conn, thread.thread_id, due=sweep is not None and sweep <= now)
                written = dataclasses.replace(
                    locked, queue_length=locked.queue_length + 1, sweep_after=sweep, change_seq=0
                )
                first = sum(1 for queued in locked.queue if queued.kind != "enqueued")
                place = written.queue_length if kind == "enqueued" else first + 1
        except IntegrityError:
            # The same request was accepted meanwhile (its retry raced it): decide again.
            raise conflict(thread) from None
        self._made_due(thread.thread_id, sweep is not None and sweep <= now)
        return written, place, asked

    @offloaded(read=False)
    def detach(self, thread_id: str, request_id: str) -> bool:
        """Make the running request `request_id` server-driven (a `StartThreadRun` retry of an attached
        one); returns whether it is running detached now (False: it finished meanwhile)."""
        with self.worker.transaction() as (conn, now):
            thread = _thread(conn, thread_id, now, lock=True)
            if thread is None:
                raise not_found(thread_id)
            record = SELECT_RUN.first(conn, {**key(thread_id), "request_id": request_id})
            if record is None or record.status != "running":
                return False
            if not record.detached:
                UPDATE_RUN["detached", "update_time"].run(
                    conn, {**key(thread_id), "request_id": request_id, "detached": True, "update_time": now}
                )
            lease = thread.lease
            if lease is not None and lease.request_id == request_id and thread.sweep_after is None:
                UPDATE_THREAD["sweep_after",].run(conn, {**key(thread_id), "sweep_after": lease.expires})
        self.worker.on_loop(self.hub.fire, thread_id)
        return True

    @offloaded(read=True)
    def due(self, limit: int) -> list[tuple[str, float]]:
        """Up to `limit` threads whose server-side work is due now, oldest first, with `sweep_after`."""
        with self.worker.transaction(read=True) as (conn, now):
            rows = SELECT_DUE.run(conn, {"namespace": NAMESPACE, "now": now, "limit": limit})
        return [(row.thread_id, float(row.sweep_after)) for row in rows]

    @offloaded(read=False)
    def move_sweep(self, thread_id: str, *, seen: float, after: float | None) -> float | None:
        """Compare-and-set `sweep_after` from `seen` to `after` seconds from now (None: no work left).

        Returns the value written, or None when the thread moved on since (another replica's claim, a
        renewal): a sweeper claims a due thread with `after` = the lease TTL, so others skip it.
        """
        with self.worker.transaction() as (conn, now):
            value = None if after is None else now + after
            moved = MOVE_SWEEP.first(
                conn, {**key(thread_id), "expected_sweep_after": seen, "sweep_after": value}
            )
        return value if moved is not None else None

    @offloaded(read=False)
    def close_request(
        self, thread: ThreadRow, request_id: str, *, status: RunRowStatus, outcome: RunEnd
    ) -> ThreadRow:
        """Close the unfinished request `request_id` of `thread` as read (compare-and-set, its lease
        free): `interrupted` by the attempt cap, `error` when a server-driven start failed its checks
        (LIVE §3.2), a queued one too (it leaves the queue). The lease is released with a new fence;
        the retained batch stays.

        Raises:
            ThreadError: `thread_busy` / `revision_conflict` when the thread changed since it was read.
        """
        with self.worker.transaction() as (conn, now):
            found = SELECT_RUN.first(conn, {**key(thread.thread_id), "request_id": request_id})
            popped = {"queue_pop": 0} if found is not None and found.status == "queued" else {}
            closed = _take(
                conn,
                thread,
                now,
                intents=self.intents,
                change_seq=None,
                **popped,
                **released(now, suspended=thread.pending is not None),
            )
            lose_logs(conn, thread.thread_id, now)
            UPDATE_RUN["status", "outcome", "update_time"].run(
                conn,
                {
                    **key(thread.thread_id),
                    "request_id": request_id,
                    "status": status,
                    "outcome": end_json(outcome),
                    "update_time": now,
                },
            )
            due = closed.sweep_after is not None
            notify_thread(conn, thread.thread_id, due=due)
        self._made_due(thread.thread_id, due)
        return closed


# -- within a transaction ---------------------------------------------------------------------------------


def _run_record(conn: Connection, thread_id: str, request_id: str) -> RunRow | None:
    row = SELECT_RUN.first(conn, {**key(thread_id), "request_id": request_id})
    return None if row is None else run_row(row)


def _thread(conn: Connection, thread_id: str, now: float, *, lock: bool = False) -> ThreadRow | None:
    """The thread's row, with its queue when it has one (locked: `LOCK_THREAD`)."""
    row = (LOCK_THREAD if lock else SELECT_THREAD).first(conn, key(thread_id))
    if row is None:
        return None
    thread = thread_row(row, now)
    if not thread.queue_length:
        return thread
    queue = tuple(
        QueuedRun(entry.request_id, entry.run_id, entry.queue_kind, float(entry.create_time))
        for entry in SELECT_QUEUE.run(conn, key(thread_id))
    )
    return dataclasses.replace(thread, queue=queue)


def _close_queued(conn: Connection, thread_id: str, request_id: str, outcome: str, now: float) -> None:
    """Take a queued request out of its queue, closed `cancelled` with `outcome` (it never ran)."""
    UPDATE_RUN["status", "outcome", "update_time"].run(
        conn,
        {
            **key(thread_id),
            "request_id": request_id,
            "status": "cancelled",
            "outcome": outcome,
            "update_time": now,
        },
    )
    UPDATE_THREAD["queue_pop", "change_seq"].run(conn, {**key(thread_id), "queue_pop": 0, "change_seq": 0})


def _answered(request_id: str | None, revision: int | None, how: AnsweredHow | None) -> dict[str, Any]:
    """The columns naming who consumed the pending batch (LIVE §5.5); all None: a batch was restored."""
    return {"answered_request_id": request_id, "answered_revision": revision, "answered_how": how}


def _take(conn: Connection, thread: ThreadRow, now: float, *, intents: bool, **values: Any) -> ThreadRow:
    """Compare-and-set on `thread` as read: same revision and fence, no live lease; a new fence (with
    the dispatch intents' chain, `intents.new_fence`) and `values` (columns, as stored) written. Returns
    the row as written."""
    values = {**new_fence(conn, thread, now, enabled=intents), "update_time": now, **values}
    row = TAKE_THREAD[tuple(values)].first(
        conn,
        {
            **key(thread.thread_id),
            "expected_revision": thread.revision,
            "expected_fence": thread.fence,
            "now": now,
            **values,
        },
    )
    if row is None:
        raise _changed(_thread(conn, thread.thread_id, now), thread.thread_id)
    return thread_row(row, now)


def _park_attempt(conn: Connection, thread_id: str, request_id: str, now: float) -> None:
    """Mark the request's last attempt parked (LIVE §3.3): it does not count towards the attempt cap."""
    record = _run_record(conn, thread_id, request_id)
    if record is None:
        return
    attempts = (*record.attempts[:-1], dataclasses.replace(record.attempts[-1], parked=True))
    UPDATE_RUN["attempts", "update_time"].run(
        conn,
        {**key(thread_id), "request_id": request_id, "attempts": attempts_json(attempts), "update_time": now},
    )


def _close_unfinished(conn: Connection, thread: ThreadRow, now: float, *, status: RunRowStatus) -> None:
    if thread.last_request_id is not None:
        CLOSE_UNFINISHED_RUN.run(
            conn,
            {
                **key(thread.thread_id),
                "request_id": thread.last_request_id,
                "status": status,
                "update_time": now,
            },
        )


def _run_of(conn: Connection, thread_id: str, run_id: str) -> RunRow | None:
    """The record of the request `run_id` ran for (its last attempt's, or an earlier one's)."""
    row = SELECT_RUNS_BY_RUN_ID.first(conn, {**key(thread_id), "run_id": run_id})
    if row is not None:
        return run_row(row)
    for row in SELECT_RUNS_WITH_ATTEMPT.run(conn, {**key(thread_id), "run_id": run_id}):
        record = run_row(row)
        if any(attempt.run_id == run_id for attempt in record.attempts):
            return record
    return None


def _put_checkpoint(
    conn: Connection,
    thread_id: str,
    owner: str,
    revision: int,
    checkpoint: NewCheckpoint,
    base: Head | None,
    now: float,
) -> Head:
    """Checkpoint `revision` of `checkpoint`, its data as deltas on `base`'s and owned by the thread
    incarnation `owner`."""
    history = write_blob(conn, owner, checkpoint.parts.history, base.history if base else None)
    # The rest is small and rarely changes: stored whole, and only when it differs.
    rest = (
        base.rest
        if base is not None and base.rest.data == checkpoint.parts.rest
        else write_blob(conn, owner, checkpoint.parts.rest, None)
    )
    row = CheckpointRow(
        thread_id=thread_id,
        revision=revision,
        kind=checkpoint.kind,
        run_id=checkpoint.run_id,
        request_id=checkpoint.request_id,
        create_time=now,
        pending=checkpoint.pending,
        remaining=checkpoint.remaining,
        client_tools=checkpoint.client_tools,
        history_blob=history.id,
        rest_blob=rest.id,
        history_at=checkpoint.parts.history_at,
    )
    INSERT_CHECKPOINT.run(conn, checkpoint_values(row))
    return Head(row, checkpoint.parts, history, rest)


# -- errors -----------------------------------------------------------------------------------------------


def not_found(thread_id: str) -> ThreadError:
    return ThreadError(
        f"No thread has the ID {thread_id!r}.",
        code=ErrorCode.THREAD_NOT_FOUND,
        details={"thread_id": thread_id},
    )


def _exists(thread_id: str) -> ThreadError:
    return ThreadError(
        f"A thread with the ID {thread_id!r} exists already.",
        code=ErrorCode.THREAD_EXISTS,
        details={"thread_id": thread_id},
    )


def run_not_found(thread_id: str, run_id: str, *, field: str = "run_id") -> ThreadError:
    """`run_not_found`: the thread never had that run (or request, `field`)."""
    return ThreadError(
        f"Thread {thread_id!r} never had a run {run_id!r}.",
        code=ErrorCode.RUN_NOT_FOUND,
        details={"thread_id": thread_id, field: run_id},
    )


def interrupted(request_id: str, run_id: str, revision: int, *, attempts: int | None = None) -> ThreadError:
    """`request_interrupted`: the request's record was closed INTERRUPTED (its last commit `revision`);
    a server-driven one's metadata says how many of its `attempts` ended by a lost server."""
    if attempts is not None:
        return ThreadError(
            f"Request {request_id!r} was interrupted: {attempts} attempts ended by a lost server; read "
            "the thread.",
            code=ErrorCode.REQUEST_INTERRUPTED,
            details={"run_id": run_id, "revision": revision, "attempts": attempts},
        )
    return ThreadError(
        f"Request {request_id!r} was interrupted and superseded; read the thread.",
        code=ErrorCode.REQUEST_INTERRUPTED,
        details={"run_id": run_id, "revision": revision},
    )


def lease_lost(thread_id: str) -> ThreadError:
    return ThreadError(
        "This server lost the thread's lease before its run could finish; nothing more was committed.",
        code=ErrorCode.LEASE_LOST,
        details={"thread_id": thread_id},
    )


def busy(thread: ThreadRow, lease: Lease) -> ThreadError:
    """`thread_busy` with the holder's ids and its lease's expiry (RFC 3339, the store's clock)."""
    expires = (
        datetime.fromtimestamp(lease.expires, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
    return ThreadError(
        f"Thread {thread.thread_id!r} is running {lease.run_id}; retry after it ends.",
        code=ErrorCode.THREAD_BUSY,
        details={
            "run_id": lease.run_id,
            "request_id": lease.request_id,
            "lease_expires_at": expires,
            "queue_length": thread.queue_length,
        },
    )


def queue_busy(thread: ThreadRow) -> ThreadError:
    """`thread_busy` while requests wait in the thread's queue (LIVE §4.1): the ids are its head's, no
    lease expiry is given (the queue holds the thread, not a lease)."""
    head = thread.queue[0] if thread.queue else None
    return ThreadError(
        f"Thread {thread.thread_id!r} has {thread.queue_length} requests waiting in its queue; retry "
        "after they ran, or enqueue this one (BUSY_STRATEGY_ENQUEUE).",
        code=ErrorCode.THREAD_BUSY,
        details={
            "run_id": "" if head is None else head.run_id,
            "request_id": "" if head is None else head.request_id,
            "lease_expires_at": "",
            "queue_length": thread.queue_length,
        },
    )


def queue_full(thread: ThreadRow, limit: int) -> ThreadError:
    """`thread_queue_full`: `limit` requests wait in the thread's queue already (`--max-queued-runs`)."""
    return ThreadError(
        f"Thread {thread.thread_id!r} has {thread.queue_length} requests queued, its limit; retry later.",
        code=ErrorCode.THREAD_QUEUE_FULL,
        details={"thread_id": thread.thread_id, "limit": limit, "queue_length": thread.queue_length},
    )


def conflict(thread: ThreadRow) -> ThreadError:
    return ThreadError(
        f"Thread {thread.thread_id!r} is at revision {thread.revision}.",
        code=ErrorCode.REVISION_CONFLICT,
        details={"current_revision": thread.revision},
    )


def _changed(now_row: ThreadRow | None, thread_id: str) -> ThreadError:
    """Why a compare-and-set failed: what the thread looks like now."""
    if now_row is None:
        return not_found(thread_id)
    lease = now_row.live_lease
    return busy(now_row, lease) if lease is not None else conflict(now_row)
