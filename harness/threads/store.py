"""The thread store: every read and every write of THREADS §2 and §4, each one short transaction.

No lock is held while anything is decoded, validated or run: callers read, decide, then write with a
compare-and-set on what they read (`revision`, `fence`, the lease being free). Every write that changes
the head or the lease from outside a run's own commits takes a new random fence, so a run that lost its
thread can commit nothing more. Time is the database's clock, read inside each transaction.

A database that cannot be reached or written raises `ThreadError` `store_unavailable`, and so does a
statement that waited too long; only the first moves the store's health (`faults`). A statement the
database refused for what it is is raised unchanged. A transaction either commits whole or not at all.
So does an SQLite file deleted or replaced under the server: every transaction checks, before it starts
and again before its caller is answered, that the files are still those the store opened, so nothing
committed into a file no longer at the path is acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import secrets
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    RootTransaction,
    Row,
    and_,
    bindparam,
    delete,
    exists,
    insert,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from ..errors import ErrorCode, ThreadError
from ..json_text import JsonValue
from .blobs import BlobRef, plan_delta, rebuild
from .database import POOL_SIZE, READ, Database
from .faults import fault_of
from .notify import CHANNEL, CancelListener, payload
from .records import (
    CheckpointKind,
    CheckpointRow,
    Head,
    Lease,
    RunRow,
    RunRowStatus,
    StateParts,
    ThreadRow,
    ThreadStatus,
)
from .schema import blobs, checkpoints, labels, runs, threads
from .statements import Statement, StatementFamily

__all__ = (
    "Committed",
    "Finish",
    "NewCheckpoint",
    "ThreadStore",
    "busy",
    "conflict",
    "not_found",
    "store_unavailable",
)

LOGGER = logging.getLogger("threadline.threads")

NAMESPACE = ""
"""The one namespace of this milestone; the column is the room a tenant key needs later."""

_NOW = {
    "sqlite": Statement(text("SELECT (julianday('now') - 2440587.5) * 86400.0")),
    "postgresql": Statement(text("SELECT extract(epoch from clock_timestamp())::float8")),
}
"""The database's clock, read at the start of every transaction."""


def _b(name: str) -> Any:
    return bindparam(name)


def _keyed(table: Any) -> tuple[Any, Any]:
    return table.c.namespace == _b("w_ns"), table.c.thread_id == _b("w_thread")


def _values(names: tuple[str, ...]) -> dict[str, Any]:
    return {name: _b(f"v_{name}") for name in names}


_THREAD = Statement(select(threads).where(*_keyed(threads)))
_RUN = Statement(select(runs).where(*_keyed(runs), runs.c.request_id == _b("w_request")))
_TAKE = StatementFamily(
    lambda names: (
        update(threads)
        .where(
            *_keyed(threads),
            threads.c.revision == _b("w_revision"),
            threads.c.fence == _b("w_fence"),
            or_(threads.c.lease_expires.is_(None), threads.c.lease_expires <= _b("w_now")),
        )
        .values(_values(names))
        .returning(*threads.c)
    )
)
"""Begin's compare-and-set: the thread as read, its lease free; returns the row it wrote."""
_HEAD = StatementFamily(
    lambda names: (
        update(threads)
        .where(*_keyed(threads), threads.c.fence == _b("w_fence"), threads.c.revision == _b("w_revision"))
        .values(_values(names))
        .returning(threads.c.incarnation)
    )
)
"""A holder's fenced commit."""
_RENEW = Statement(
    update(threads)
    .where(
        *_keyed(threads),
        threads.c.fence == _b("w_fence"),
        threads.c.lease_run_id.is_not(None),
        threads.c.lease_expires > _b("w_now"),  # an expired lease is left to expire (THREADS §4 step 2)
    )
    .values(lease_expires=_b("v_lease_expires"))
    .returning(threads.c.cancel_requested)
)
_RECORD = StatementFamily(
    lambda names: (
        update(runs).where(*_keyed(runs), runs.c.request_id == _b("w_request")).values(_values(names))
    )
)
_CLOSE_UNFINISHED = Statement(
    update(runs)
    .where(*_keyed(runs), runs.c.request_id == _b("w_request"), runs.c.status == "running")
    .values(status=_b("v_status"), update_time=_b("v_update_time"))
)
_NEW_RECORD = Statement(insert(runs).values(_values(tuple(runs.c.keys()))))
_NEW_BLOB = Statement(
    insert(blobs)
    .values(_values(("owner", "base_id", "keep", "data", "size", "chain_bytes", "sha256")))
    .returning(blobs.c.id)
)
_NEW_CHECKPOINT = Statement(insert(checkpoints).values(_values(tuple(checkpoints.c.keys()))))


def _where(thread_id: str, **more: Any) -> dict[str, Any]:
    return {"w_ns": NAMESPACE, "w_thread": thread_id, **{f"w_{k}": v for k, v in more.items()}}


def _set(**values: Any) -> dict[str, Any]:
    return {f"v_{k}": v for k, v in values.items()}


PROBE_S = 1.0
"""How often a store whose database is down tries it again, and an SQLite store checks its files."""

P = ParamSpec("P")
T = TypeVar("T")


def _offloaded(
    *, read: bool
) -> Callable[
    [Callable[Concatenate[ThreadStore, P], T]], Callable[Concatenate[ThreadStore, P], Awaitable[T]]
]:
    """Run a store method (one transaction, synchronous) in a worker thread, to its end.

    One thread hop per transaction: the driver's calls are plain C calls there, where an async driver
    would cross threads several times per statement. The call finishes even when its caller is
    cancelled (a client gone, a deadline), so no transaction is left halfway; only the caller stops
    waiting. `read` transactions run beside each other; this process's writes take turns.
    """

    def wrap(
        method: Callable[Concatenate[ThreadStore, P], T],
    ) -> Callable[Concatenate[ThreadStore, P], Awaitable[T]]:
        @functools.wraps(method)
        async def call(self: ThreadStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
            task = asyncio.ensure_future(
                self._offload(functools.partial(method, self, *args, **kwargs), read)
            )
            task.add_done_callback(_consume)
            return await asyncio.shield(task)

        return call

    return wrap


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a call whose caller went away, so it is not reported as unhandled."""
    if not task.cancelled():
        task.exception()


class _Contended(ThreadError):
    """`store_unavailable` of a statement that waited too long: worth a retry, but the database answered."""


def store_unavailable(detail: str = "", *, contended: bool = False) -> ThreadError:
    return (_Contended if contended else ThreadError)(
        "The thread store cannot be reached or written; retry later.",
        code=ErrorCode.STORE_UNAVAILABLE,
        details={"detail": detail[:200]} if detail else None,
    )


def _fence() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class NewCheckpoint:
    """A checkpoint to write: its state's parts, what it waits on, and what made it."""

    kind: CheckpointKind
    parts: StateParts
    pending: str | None
    remaining: str | None
    client_tools: str
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
    outcome: str
    pending: str | None
    accepted: str | None


class ThreadStore:
    """The store of one server process (`replica`) on one database."""

    def __init__(self, database: Database, *, replica: str) -> None:
        self.database = database
        self.replica = replica
        self._engine = database.engine
        self._reader = database.engine.execution_options(**READ)
        self._now = _NOW[database.engine.dialect.name]
        # SQLite: this process's write transactions take turns (an in-memory database is one connection,
        # so all of its transactions do): waiting here is cheaper than in SQLite's busy handler, which
        # sleeps. PostgreSQL locks rows, so transactions on different threads run side by side.
        lock = asyncio.Lock()
        free: contextlib.nullcontext[None] = contextlib.nullcontext()
        self._writes = free if database.kind == "postgresql" else lock
        self._turns = lock if database.kind == "memory" else free
        # Threads of the store's own: a large decode in the loop's default executor never delays a commit.
        self._workers = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="threadline-store")
        self.healthy = True
        """False from a transaction that found the database down until the next one that succeeds."""
        self.on_health: Callable[[bool], None] | None = None
        """Called when `healthy` changes (the server reports it as the service's health)."""

        self._listener: CancelListener | None = None
        self._probe: asyncio.Future[None] | None = None
        self._watch = asyncio.ensure_future(self._watch_files()) if database.files else None

    def listen_for_cancels(self, deliver: Callable[[str, str], None]) -> None:
        """Call `deliver(thread_id, run_id)` on this loop when another replica asks to cancel a run.

        PostgreSQL only (LISTEN/NOTIFY); elsewhere the holder reads the request at its next renewal.
        """
        if self.database.conninfo is not None and self._listener is None:
            self._listener = CancelListener(self.database.conninfo, asyncio.get_running_loop(), deliver)

    def close(self) -> None:
        """Let the store's threads go once their transactions ended (the database is closed apart)."""
        if self._listener is not None:
            self._listener.close()
        if self._probe is not None:
            self._probe.cancel()
        if self._watch is not None:
            self._watch.cancel()
        self._workers.shutdown(wait=False)

    def _health(self, healthy: bool) -> None:
        if healthy != self.healthy:
            self.healthy = healthy
            if self.on_health is not None:
                self.on_health(healthy)
            if not healthy and self._probe is None:
                self._probe = asyncio.ensure_future(self._recover())

    async def _recover(self) -> None:
        """While the database is down, try it every second: a replica that load balancers stopped
        sending requests to (its health says NOT_SERVING) must find out by itself that it is back."""
        try:
            while not self.healthy:
                await asyncio.sleep(PROBE_S)
                with contextlib.suppress(ThreadError):
                    await self.ping()
        finally:
            self._probe = None

    async def _watch_files(self) -> None:
        """While healthy, check an SQLite store's files every second: one deleted under an idle server
        turns its health NOT_SERVING too, before any request finds it (`_recover` takes over then)."""
        while True:
            await asyncio.sleep(PROBE_S)
            if self.healthy:
                with contextlib.suppress(ThreadError):
                    await self._files_checked()

    @_offloaded(read=True)
    def _files_checked(self) -> None:
        self._check_files()

    @_offloaded(read=True)
    def ping(self) -> float:
        """The database's time: proves it answers."""
        with self._tx(read=True) as (_conn, now):
            return now

    # -- transactions -------------------------------------------------------------------------------

    async def _offload(self, work: Callable[[], T], read: bool) -> T:
        async with self._turns if read else self._writes:
            try:
                result = await asyncio.get_running_loop().run_in_executor(self._workers, work)
            except _Contended:
                raise  # the database answered: health stays as it is
            except ThreadError as error:
                self._health(error.code != ErrorCode.STORE_UNAVAILABLE)
                raise
            except IntegrityError:
                self._health(True)
                raise
        self._health(True)
        return result

    @contextlib.contextmanager
    def _tx(self, *, read: bool = False) -> Iterator[tuple[Connection, float]]:
        """One transaction and the store's time at its start; a failing database is `store_unavailable`.

        The store's files are checked before it starts (no connection opens a file put in their place)
        and after it ends, before the caller answers anyone: a commit made into a file deleted meanwhile
        is reported unavailable, never acknowledged.
        """
        self._check_files()
        try:
            with self._begun(self._reader if read else self._engine) as (conn, now):
                yield conn, now
        except (ThreadError, IntegrityError):
            raise
        except (DBAPIError, SQLAlchemyError, OSError) as error:
            fault = fault_of(error)
            if fault == "statement":  # the database answered, refusing the statement: a bug (`faults`)
                raise
            if fault == "contention":
                LOGGER.warning("store_contended", exc_info=error, extra={"fields": {"replica": self.replica}})
                raise store_unavailable(type(error).__name__, contended=True) from error
            if self.healthy:  # the first failure of an outage; `thread_store_health` marks its end
                LOGGER.warning(
                    "store_unavailable", exc_info=error, extra={"fields": {"replica": self.replica}}
                )
            raise store_unavailable(type(error).__name__) from error
        self._check_files()

    def _check_files(self) -> None:
        """`store_unavailable` while an SQLite store's files are not those it opened (`Database.changed`)."""
        why = self.database.changed()
        if why is None:
            return
        if self.healthy:
            LOGGER.warning(
                "store_unavailable",
                extra={
                    "fields": {
                        "replica": self.replica,
                        "why": f"{why} since the server opened it: ThreadService is unavailable until "
                        "that file is back at the path or the server restarts (it writes no other database)",
                    }
                },
            )
        raise store_unavailable("the database file was deleted or replaced")

    def _begun(self, engine: Engine) -> contextlib.AbstractContextManager[tuple[Connection, float]]:
        """A transaction and the store's time at its start, on a connection proven alive.

        Reading the time is the connection's check: one the database dropped (it restarted) is
        replaced once, as a pool's pre-ping would, without a round trip of its own.
        """
        for attempt in (1, 2):
            conn = engine.connect()
            try:
                tx = conn.begin()
                now = float(self._now.run(conn, {})[0][0])
            except DBAPIError as error:
                conn.close()
                if attempt == 1 and error.connection_invalidated:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            return _Transaction(conn, tx, now)
        raise AssertionError("unreachable")

    # -- reads --------------------------------------------------------------------------------------

    @_offloaded(read=True)
    def thread(self, thread_id: str) -> ThreadRow | None:
        with self._tx(read=True) as (conn, now):
            return self._thread(conn, thread_id, now)

    async def head(self, thread: ThreadRow) -> Head:
        """The thread's head checkpoint with its state (rebuilt and checked)."""
        found = await self.checkpoint(thread.thread_id, thread.revision, with_state=True)
        if not isinstance(found, Head):  # deleted meanwhile: the caller's next write fails its CAS
            raise not_found(thread.thread_id)
        return found

    @_offloaded(read=True)
    def checkpoint(
        self, thread_id: str, revision: int, *, with_state: bool = False
    ) -> Head | CheckpointRow | None:
        with self._tx(read=True) as (conn, _now):
            row = (
                conn.execute(
                    select(checkpoints).where(
                        checkpoints.c.namespace == NAMESPACE,
                        checkpoints.c.thread_id == thread_id,
                        checkpoints.c.revision == revision,
                    )
                )
            ).first()
            if row is None:
                return None
            checkpoint = _checkpoint(row)
            if not with_state:
                return checkpoint
            history = self._blob(conn, checkpoint.history_blob)
            rest = self._blob(conn, checkpoint.rest_blob)
        return Head(checkpoint, StateParts(history.data, rest.data, checkpoint.history_at), history, rest)

    @_offloaded(read=True)
    def checkpoints(self, thread_id: str, *, limit: int, before: int | None) -> list[CheckpointRow]:
        """Newest first; `before` = only revisions below it."""
        query = select(checkpoints).where(
            checkpoints.c.namespace == NAMESPACE, checkpoints.c.thread_id == thread_id
        )
        if before is not None:
            query = query.where(checkpoints.c.revision < before)
        with self._tx(read=True) as (conn, _now):
            rows = (conn.execute(query.order_by(checkpoints.c.revision.desc()).limit(limit))).all()
        return [_checkpoint(row) for row in rows]

    @_offloaded(read=True)
    def threads(
        self,
        *,
        limit: int,
        labels_filter: Mapping[str, str],
        status: ThreadStatus | None,
        after: tuple[float, str] | None,
    ) -> list[tuple[ThreadRow, CheckpointRow]]:
        """Newest `update_time` first, then `thread_id`, each with its head checkpoint (one transaction);
        `after` = the last thread of the previous page."""
        t = threads.c
        with self._tx(read=True) as (conn, now):
            query = select(threads).where(t.namespace == NAMESPACE)
            for key, value in labels_filter.items():
                query = query.where(
                    exists().where(
                        labels.c.namespace == NAMESPACE,
                        labels.c.thread_id == t.thread_id,
                        labels.c.key == key,
                        labels.c.value == value,
                    )
                )
            running = and_(t.lease_expires.is_not(None), t.lease_expires > now)
            if status == "running":
                query = query.where(running)
            elif status == "suspended":
                query = query.where(~running, t.pending.is_not(None))
            elif status == "idle":
                query = query.where(~running, t.pending.is_(None))
            if after is not None:
                query = query.where(
                    or_(t.update_time < after[0], and_(t.update_time == after[0], t.thread_id > after[1]))
                )
            query = query.order_by(t.update_time.desc(), t.thread_id).limit(limit)
            found = [_thread(row, now) for row in conn.execute(query)]
            heads = {
                (row.thread_id, int(row.revision)): _checkpoint(row)
                for row in conn.execute(
                    select(checkpoints).where(
                        checkpoints.c.namespace == NAMESPACE,
                        tuple_(checkpoints.c.thread_id, checkpoints.c.revision).in_(
                            [(thread.thread_id, thread.revision) for thread in found]
                        ),
                    )
                )
            }
        # PostgreSQL reads each statement at its own moment: a thread deleted in between is left out.
        return [
            (thread, heads[at]) for thread in found if (at := (thread.thread_id, thread.revision)) in heads
        ]

    @_offloaded(read=True)
    def run_record(self, thread_id: str, request_id: str) -> RunRow | None:
        with self._tx(read=True) as (conn, _now):
            return self._run(conn, thread_id, request_id)

    # -- creating, forking, rolling back, deleting -------------------------------------------------------

    @_offloaded(read=False)
    def create(
        self,
        thread_id: str,
        *,
        agent: str,
        thread_labels: Mapping[str, str],
        checkpoint: NewCheckpoint,
        accepted: str | None,
        base: Head | None = None,
    ) -> ThreadRow:
        """A new thread whose revision 1 is `checkpoint`; `base` is the head a fork copies data from.

        Raises:
            ThreadError: `thread_exists`.
        """
        incarnation = uuid.uuid4().hex
        try:
            with self._tx() as (conn, now):
                if self._thread(conn, thread_id, now) is not None:
                    raise _exists(thread_id)
                conn.execute(
                    insert(threads).values(
                        namespace=NAMESPACE,
                        thread_id=thread_id,
                        incarnation=incarnation,
                        agent=agent,
                        labels=json.dumps(dict(thread_labels), sort_keys=True),
                        create_time=now,
                        update_time=now,
                        revision=1,
                        pending=checkpoint.pending,
                        accepted=accepted,
                        fence=_fence(),
                        cancel_requested=False,
                    )
                )
                if thread_labels:
                    conn.execute(
                        insert(labels),
                        [
                            {"namespace": NAMESPACE, "thread_id": thread_id, "key": k, "value": v}
                            for k, v in thread_labels.items()
                        ],
                    )
                self._put_checkpoint(conn, thread_id, incarnation, 1, checkpoint, base, now)
                created = self._thread(conn, thread_id, now)
        except IntegrityError:
            # The ID was taken meanwhile, or a fork's source was deleted (its data with it).
            with self._tx(read=True) as (conn, now):
                taken = self._thread(conn, thread_id, now) is not None
            if taken or base is None:
                raise _exists(thread_id) from None
            raise not_found(base.checkpoint.thread_id) from None
        assert created is not None
        return created

    @_offloaded(read=False)
    def rollback(self, thread: ThreadRow, source: CheckpointRow) -> ThreadRow:
        """A new head copying `source` (its data by reference), with a new fence and no lease.

        `thread` is what the caller read and checked: the write is a compare-and-set on its revision and
        fence, and an expired lease's unfinished run record is closed `interrupted`.

        Raises:
            ThreadError: `revision_conflict` or `thread_busy` when the thread changed since it was read.
        """
        with self._tx() as (conn, now):
            self._take(conn, thread, now, pending=source.pending)
            conn.execute(
                update(threads)
                .where(*_key(thread.thread_id))
                .values(
                    revision=thread.revision + 1,
                    accepted=source.remaining,
                    lease_run_id=None,
                    lease_request_id=None,
                    lease_replica=None,
                    lease_expires=None,
                    cancel_requested=False,
                )
            )
            row = source
            conn.execute(
                insert(checkpoints).values(
                    namespace=NAMESPACE,
                    thread_id=thread.thread_id,
                    revision=thread.revision + 1,
                    kind="rolled_back",
                    run_id="",
                    request_id="",
                    create_time=now,
                    history_blob=row.history_blob,
                    rest_blob=row.rest_blob,
                    history_at=row.history_at,
                    pending=row.pending,
                    remaining=row.remaining,
                    client_tools=row.client_tools,
                )
            )
            self._close_unfinished(conn, thread, now, status="interrupted")
            rolled = self._thread(conn, thread.thread_id, now)
        assert rolled is not None
        return rolled

    @_offloaded(read=False)
    def delete(self, thread: ThreadRow) -> None:
        """Delete the thread read as `thread` (compare-and-set), its checkpoints, records and own data."""
        with self._tx() as (conn, now):
            self._take(conn, thread, now, pending=thread.pending)
            for table in (labels, runs, checkpoints, threads):
                conn.execute(
                    delete(table).where(table.c.namespace == NAMESPACE, table.c.thread_id == thread.thread_id)
                )
            self._collect(conn)

    # -- the run protocol (THREADS §4) ------------------------------------------------------------------

    @_offloaded(read=False)
    def begin(
        self,
        thread: ThreadRow,
        *,
        run_id: str,
        request_id: str,
        ttl: float,
        record: RunRow | None,
        digest: str,
        prompt: str | None,
        attempt: Mapping[str, JsonValue],
        accepted: str | None,
    ) -> tuple[ThreadRow, RunRow]:
        """Take the lease of `thread` as read (compare-and-set) and write the run's record.

        `record` is the request's existing unfinished record (a next attempt), else a new one is
        inserted; a superseded unfinished record of another request is closed `interrupted`. `accepted`
        is the batch to retain (the request's answers, or the retained one). `pending` is cleared.

        Raises:
            ThreadError: `thread_busy` / `revision_conflict` when the thread changed since it was read
                (nothing was written; read again and decide again).
        """
        with self._tx() as (conn, now):
            fence, taken = self._take(
                conn,
                thread,
                now,
                pending=None,
                accepted=accepted,
                lease_run_id=run_id,
                lease_request_id=request_id,
                lease_replica=self.replica,
                lease_expires=now + ttl,
                cancel_requested=False,
                last_request_id=request_id,
            )
            if thread.last_request_id != request_id:
                self._close_unfinished(conn, thread, now, status="interrupted")
            entry = {**attempt, "run_id": run_id, "replica": self.replica, "fence": fence, "start": now}
            if record is None:
                attempts = [entry]
                _NEW_RECORD.run(
                    conn,
                    _set(
                        namespace=NAMESPACE,
                        thread_id=thread.thread_id,
                        request_id=request_id,
                        digest=digest,
                        prompt=prompt,
                        status="running",
                        outcome=None,
                        attempts=json.dumps(attempts),
                        run_id=run_id,
                        committed_revision=0,
                        create_time=now,
                        update_time=now,
                    ),
                )
                taken_record = RunRow(
                    request_id=request_id,
                    digest=digest,
                    prompt=prompt,
                    status="running",
                    outcome=None,
                    attempts=attempts,
                    run_id=run_id,
                    committed_revision=0,
                )
            else:
                attempts = [*record.attempts, entry]
                _RECORD["attempts", "run_id", "update_time"].run(
                    conn,
                    {
                        **_where(thread.thread_id, request=request_id),
                        **_set(attempts=json.dumps(attempts), run_id=run_id, update_time=now),
                    },
                )
                taken_record = dataclasses.replace(record, attempts=attempts, run_id=run_id)
        return taken, taken_record

    @_offloaded(read=False)
    def commit(
        self,
        thread_id: str,
        *,
        fence: str,
        revision: int,
        checkpoint: NewCheckpoint | None,
        base: Head | None,
        accepted: str | None,
        finish: Finish | None = None,
        ttl: float | None = None,
    ) -> Committed:
        """A fenced commit of the holder of `fence`: a checkpoint after `revision` (or none), the
        retained batch, and with `finish` the run record's outcome, `pending`, and the lease released.
        `ttl` extends the lease as a renewal would.

        Raises:
            ThreadError: `lease_lost` when the fence is no longer the thread's.
        """
        with self._tx() as (conn, now):
            head = revision + (1 if checkpoint is not None else 0)
            values: dict[str, Any] = {"revision": head, "accepted": accepted}
            if checkpoint is not None:
                values["update_time"] = now
            expires: float | None = None
            if finish is not None:
                values.update(
                    pending=finish.pending,
                    lease_run_id=None,
                    lease_request_id=None,
                    lease_replica=None,
                    lease_expires=None,
                    cancel_requested=False,
                    update_time=now,
                )
            elif ttl is not None:
                expires = now + ttl
                values["lease_expires"] = expires
            names = tuple(values)
            written_row = _HEAD[names].first(
                conn, {**_where(thread_id, fence=fence, revision=revision), **_set(**values)}
            )
            if written_row is None:
                raise lease_lost(thread_id)
            incarnation = written_row[0]
            written: Head | None = None
            if checkpoint is not None:
                written = self._put_checkpoint(conn, thread_id, incarnation, head, checkpoint, base, now)
            if checkpoint is not None or finish is not None:
                record: dict[str, Any] = {"update_time": now}
                if checkpoint is not None:
                    record["committed_revision"] = head
                if finish is not None:
                    record.update(status=finish.status, outcome=finish.outcome)
                request_id = finish.request_id if finish is not None else checkpoint.request_id  # type: ignore[union-attr]
                _RECORD[tuple(record)].run(conn, {**_where(thread_id, request=request_id), **_set(**record)})
        return Committed(head, expires, written)

    @_offloaded(read=False)
    def renew(self, thread_id: str, *, fence: str, ttl: float) -> tuple[float, bool]:
        """Extend the live lease of the holder of `fence`; returns the new expiry and whether a cancel was
        asked. A lease that expired by the database's clock is not extended: another replica may be
        taking the thread over.

        Raises:
            ThreadError: `lease_lost`.
        """
        with self._tx() as (conn, now):
            renewed = _RENEW.first(
                conn, {**_where(thread_id, fence=fence, now=now), **_set(lease_expires=now + ttl)}
            )
            if renewed is None:
                raise lease_lost(thread_id)
        return now + ttl, bool(renewed[0])

    @_offloaded(read=False)
    def cancel(self, thread_id: str, run_id: str, *, outcome: str) -> tuple[RunRowStatus, bool]:
        """Record a cancellation of `run_id`; returns the record's status and whether its holder is live.

        A live holder is asked (`cancel_requested`, read at its next renewal); a record whose lease has
        expired is closed `cancelled` with `outcome` at once, with a new fence.

        Raises:
            ThreadError: `thread_not_found`, `run_not_found`.
        """
        with self._tx() as (conn, now):
            # The thread row first, as every other write takes it: two writers never wait on each other.
            thread = self._thread(conn, thread_id, now, lock=True)
            if thread is None:
                raise not_found(thread_id)
            record = self._run_of(conn, thread_id, run_id)
            if record is None:
                raise ThreadError(
                    f"Thread {thread_id!r} never had a run {run_id!r}.",
                    code=ErrorCode.RUN_NOT_FOUND,
                    details={"thread_id": thread_id, "run_id": run_id},
                )
            if record.status != "running":
                return record.status, False
            live = thread.live_lease
            if live is not None and live.run_id == record.run_id:
                conn.execute(update(threads).where(*_key(thread_id)).values(cancel_requested=True))
                if conn.dialect.name == "postgresql" and live.replica != self.replica:
                    # Heard by the holder when this commits (`harness.threads.notify`).
                    conn.execute(
                        text("SELECT pg_notify(:channel, :payload)"),
                        {"channel": CHANNEL, "payload": payload(thread_id, run_id)},
                    )
                return "running", True
            conn.execute(
                update(runs)
                .where(*_run_key(thread_id, record.request_id))
                .values(status="cancelled", outcome=outcome, update_time=now)
            )
            if thread.lease is not None and thread.lease.request_id == record.request_id:
                conn.execute(
                    update(threads)
                    .where(*_key(thread_id))
                    .values(
                        fence=_fence(),
                        lease_run_id=None,
                        lease_request_id=None,
                        lease_replica=None,
                        lease_expires=None,
                        cancel_requested=False,
                    )
                )
            return "cancelled", False

    # -- internals ------------------------------------------------------------------------------------

    def _take(
        self, conn: Connection, thread: ThreadRow, now: float, *, pending: str | None, **more: Any
    ) -> tuple[str, ThreadRow]:
        """Compare-and-set on `thread` as read: same revision and fence, no live lease; a new fence,
        `pending` and `more` written. Returns the fence and the row as written."""
        fence = _fence()
        values = {"fence": fence, "pending": pending, "update_time": now, **more}
        row = _TAKE[tuple(values)].first(
            conn,
            {
                **_where(thread.thread_id, revision=thread.revision, fence=thread.fence, now=now),
                **_set(**values),
            },
        )
        if row is None:
            raise _changed(self._thread(conn, thread.thread_id, now), thread.thread_id)
        return fence, _thread(row, now)

    def _close_unfinished(
        self, conn: Connection, thread: ThreadRow, now: float, *, status: RunRowStatus
    ) -> None:
        if thread.last_request_id is None:
            return
        _CLOSE_UNFINISHED.run(
            conn,
            {
                **_where(thread.thread_id, request=thread.last_request_id),
                **_set(status=status, update_time=now),
            },
        )

    def _thread(
        self, conn: Connection, thread_id: str, now: float, *, lock: bool = False
    ) -> ThreadRow | None:
        if lock:
            row = conn.execute(select(threads).where(*_key(thread_id)).with_for_update()).first()
        else:
            row = _THREAD.first(conn, _where(thread_id))
        return None if row is None else _thread(row, now)

    def _run(self, conn: Connection, thread_id: str, request_id: str) -> RunRow | None:
        row = _RUN.first(conn, _where(thread_id, request=request_id))
        return None if row is None else _run_row(row)

    def _run_of(self, conn: Connection, thread_id: str, run_id: str) -> RunRow | None:
        row = (
            conn.execute(
                select(runs).where(
                    runs.c.namespace == NAMESPACE, runs.c.thread_id == thread_id, runs.c.run_id == run_id
                )
            )
        ).first()
        if row is not None:
            return _run_row(row)
        # An earlier attempt's run ID: rare, so the attempts are searched here rather than indexed.
        rows = (
            conn.execute(
                select(runs).where(
                    runs.c.namespace == NAMESPACE,
                    runs.c.thread_id == thread_id,
                    runs.c.attempts.contains(run_id),
                )
            )
        ).all()
        for row in rows:
            record = _run_row(row)
            if any(entry.get("run_id") == run_id for entry in record.attempts):
                return record
        return None

    def _blob(self, conn: Connection, blob_id: int) -> BlobRef:
        chain = text(
            "WITH RECURSIVE chain(id, base_id, keep, data, sha256, chain_bytes, depth) AS ("
            " SELECT id, base_id, keep, data, sha256, chain_bytes, 0 FROM blobs WHERE id = :id"
            " UNION ALL"
            " SELECT b.id, b.base_id, b.keep, b.data, b.sha256, b.chain_bytes, c.depth + 1"
            " FROM blobs b JOIN chain c ON b.id = c.base_id)"
            " SELECT keep, data, sha256, chain_bytes, depth FROM chain ORDER BY depth DESC"
        )
        rows = (conn.execute(chain, {"id": blob_id})).all()
        if not rows:
            raise store_unavailable(f"blob {blob_id} is missing")
        data = rebuild([(row.keep, bytes(row.data)) for row in rows])
        top = rows[-1]
        if hashlib.sha256(data).hexdigest() != top.sha256:
            raise store_unavailable(f"blob {blob_id} does not match its sha256")
        return BlobRef(blob_id, data, int(top.chain_bytes))

    def _put_blob(self, conn: Connection, owner: str, data: bytes, base: BlobRef | None) -> BlobRef:
        if base is not None and base.data == data:
            return base  # unchanged: refer to it
        delta = plan_delta(data, base)
        blob_id = _NEW_BLOB.run(
            conn,
            _set(
                owner=owner,
                base_id=delta.base_id,
                keep=delta.keep,
                data=delta.tail,
                size=len(data),
                chain_bytes=delta.chain_bytes,
                sha256=delta.sha256,
            ),
        )[0][0]
        return BlobRef(int(blob_id), data, delta.chain_bytes)

    def _put_checkpoint(
        self,
        conn: Connection,
        thread_id: str,
        owner: str,
        revision: int,
        checkpoint: NewCheckpoint,
        base: Head | None,
        now: float,
    ) -> Head:
        history = self._put_blob(conn, owner, checkpoint.parts.history, base.history if base else None)
        # The rest is small and rarely changes: stored whole, and only when it differs.
        rest = (
            base.rest
            if base is not None and base.rest.data == checkpoint.parts.rest
            else self._put_blob(conn, owner, checkpoint.parts.rest, None)
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
        _NEW_CHECKPOINT.run(
            conn,
            _set(
                namespace=NAMESPACE,
                thread_id=thread_id,
                revision=revision,
                kind=checkpoint.kind,
                run_id=checkpoint.run_id,
                request_id=checkpoint.request_id,
                create_time=now,
                history_blob=history.id,
                rest_blob=rest.id,
                history_at=checkpoint.parts.history_at,
                pending=checkpoint.pending,
                remaining=checkpoint.remaining,
                client_tools=checkpoint.client_tools,
            ),
        )
        return Head(row, checkpoint.parts, history, rest)

    def _collect(self, conn: Connection) -> None:
        """Delete the data of deleted threads that no checkpoint of any thread still reaches.

        A fork refers to its source's data, so a deleted thread's blobs may outlive it; they go once the
        last thread reaching them (directly or as a delta's base) is deleted too.
        """
        collect = text(
            "WITH RECURSIVE mine(id) AS ("
            "  SELECT id FROM blobs WHERE owner NOT IN (SELECT incarnation FROM threads)),"
            " live(id) AS ("
            "  SELECT id FROM ("
            "   SELECT history_blob AS id FROM checkpoints WHERE history_blob IN (SELECT id FROM mine)"
            "   UNION SELECT rest_blob FROM checkpoints WHERE rest_blob IN (SELECT id FROM mine)"
            "   UNION SELECT base_id FROM blobs"
            "    WHERE id NOT IN (SELECT id FROM mine) AND base_id IN (SELECT id FROM mine)"
            "  ) AS roots"
            "  UNION SELECT b.base_id FROM blobs b JOIN live l ON b.id = l.id WHERE b.base_id IS NOT NULL)"
            " DELETE FROM blobs WHERE id IN (SELECT id FROM mine) AND id NOT IN (SELECT id FROM live)"
        )
        try:
            with conn.begin_nested():
                conn.execute(collect)
        except IntegrityError:
            # A fork committed meanwhile refers to some of it: collected by a later delete instead.
            LOGGER.info("thread_data_kept", extra={"fields": {"replica": self.replica}})


class _Transaction(contextlib.AbstractContextManager[tuple[Connection, float]]):
    """An open transaction: committed when its block ends, rolled back on an error; then closed."""

    def __init__(self, conn: Connection, tx: RootTransaction, now: float) -> None:
        self._conn, self._tx, self._now = conn, tx, now

    def __enter__(self) -> tuple[Connection, float]:
        return self._conn, self._now

    def __exit__(self, kind: type[BaseException] | None, *_rest: object) -> None:
        try:
            if kind is None:
                self._tx.commit()
            else:
                self._tx.rollback()
        finally:
            self._conn.close()


# -- rows -> records ------------------------------------------------------------------------------------


def _key(thread_id: str) -> tuple[Any, Any]:
    return threads.c.namespace == NAMESPACE, threads.c.thread_id == thread_id


def _run_key(thread_id: str, request_id: str) -> tuple[Any, Any, Any]:
    return runs.c.namespace == NAMESPACE, runs.c.thread_id == thread_id, runs.c.request_id == request_id


def _thread(row: Row[Any], now: float) -> ThreadRow:
    lease = (
        Lease(row.lease_run_id, row.lease_request_id, row.lease_replica, float(row.lease_expires))
        if row.lease_run_id is not None and row.lease_expires is not None
        else None
    )
    return ThreadRow(
        thread_id=row.thread_id,
        incarnation=row.incarnation,
        agent=row.agent,
        labels=json.loads(row.labels),
        create_time=float(row.create_time),
        update_time=float(row.update_time),
        revision=int(row.revision),
        pending=row.pending,
        accepted=row.accepted,
        fence=row.fence,
        lease=lease,
        cancel_requested=bool(row.cancel_requested),
        last_request_id=row.last_request_id,
        now=now,
    )


def _checkpoint(row: Row[Any]) -> CheckpointRow:
    return CheckpointRow(
        thread_id=row.thread_id,
        revision=int(row.revision),
        kind=row.kind,
        run_id=row.run_id,
        request_id=row.request_id,
        create_time=float(row.create_time),
        pending=row.pending,
        remaining=row.remaining,
        client_tools=row.client_tools,
        history_blob=int(row.history_blob),
        rest_blob=int(row.rest_blob),
        history_at=int(row.history_at),
    )


def _run_row(row: Row[Any]) -> RunRow:
    return RunRow(
        request_id=row.request_id,
        digest=row.digest,
        prompt=row.prompt,
        status=row.status,
        outcome=row.outcome,
        attempts=json.loads(row.attempts),
        run_id=row.run_id,
        committed_revision=int(row.committed_revision),
    )


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
        details={"run_id": lease.run_id, "request_id": lease.request_id, "lease_expires_at": expires},
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
