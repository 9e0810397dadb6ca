"""The store's threads, transactions and health.

One thread hop per call: a call's transactions run whole in one of the store's threads, where the
driver's calls are plain C calls (an async driver would cross threads several times per statement), and
its answer comes back to the event loop in one wake-up. No lock is held while anything is decoded,
validated or run on the event loop, and a transaction either commits whole or not at all. Each thread
keeps one connection of the pool for its life, and a transaction is the driver's own `BEGIN` and
`COMMIT`: nothing is checked out, begun or reset per transaction.

Where transactions run:
- **SQLite**: this process's writes on one writer thread, which takes every write waiting when it starts
  a transaction and runs them all in that one (group commit): each of their transactions is a savepoint
  of it, so one whose compare-and-set fails, or that raises, is rolled back alone, and one `COMMIT`, one
  fsync, covers the rest. Reads run beside it on threads of their own (WAL). A group of the event log's
  appends alone commits without the fsync (`synchronous=NORMAL`, LIVE §2.2): the next durable commit
  flushes it.
- **Memory**: one thread for every transaction (its one connection), grouped as SQLite's writes are.
- **PostgreSQL**: a pool of threads, each transaction on its own (rows are locked, so transactions of
  different threads run side by side, and PostgreSQL flushes the WAL of commits that wait together
  once). An append's transaction sets `synchronous_commit = off` for itself.

A caller is answered only once the transaction holding its writes committed. What a call does that others
see (waking followers, a sweeper, a hand-off) is registered with `on_loop` and runs on the event loop just
before its caller is answered, so nothing is announced that a failed group commit took back.

A database that cannot be reached or written raises `ThreadError` `store_unavailable`, and so does a
statement that waited too long; only the first moves the store's health (`faults`). A statement the
database refused for what it is is raised unchanged. So does an SQLite file deleted or replaced under the
server: a connection checks, before it opens, and every transaction again before its caller is answered,
that the files are still those the store opened, so no connection opens a file put in their place and
nothing committed into a file no longer at the path is acknowledged. (An open connection keeps the files
it opened, so a check before each transaction would add nothing but three `stat` calls.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from ..errors import ErrorCode, ThreadError
from .database import BEGIN, POOL_SIZE, Database
from .faults import fault_of
from .queries import NOW, NOW_RELAXED
from .statements import Statement, on_driver

__all__ = ("PROBE_S", "Offloading", "StoreWorker", "nested", "offloaded", "store_unavailable")

LOGGER = logging.getLogger("threadline.threads")

PROBE_S = 1.0
"""How often a store whose database is down tries it again, and an SQLite store checks its files."""

CLOSE_WAIT_S = 30.0
"""How long closing the database waits for transactions still running (a statement times out in 15 s)."""

P = ParamSpec("P")
T = TypeVar("T")

_SYNCHRONOUS = {
    True: Statement(text("PRAGMA synchronous=NORMAL")),
    False: Statement(text("PRAGMA synchronous=FULL")),
}
"""An SQLite writer's durability, set between transactions: relaxed (no fsync at commit) or full."""
_SAVEPOINT = Statement(text("SAVEPOINT threadline_call"))
_RELEASE = Statement(text("RELEASE SAVEPOINT threadline_call"))
_ROLLBACK_TO = Statement(text("ROLLBACK TO SAVEPOINT threadline_call"))
_NESTED = (
    Statement(text("SAVEPOINT threadline_nested")),
    Statement(text("RELEASE SAVEPOINT threadline_nested")),
    Statement(text("ROLLBACK TO SAVEPOINT threadline_nested")),
)


class _Contended(ThreadError):
    """`store_unavailable` of a statement that waited too long: worth a retry, but the database answered."""


def store_unavailable(detail: str = "", *, contended: bool = False) -> ThreadError:
    return (_Contended if contended else ThreadError)(
        "The thread store cannot be reached or written; retry later.",
        code=ErrorCode.STORE_UNAVAILABLE,
        details={"detail": detail[:200]} if detail else None,
    )


@dataclass(eq=False, slots=True)
class _Call:
    """One call waiting for, or run by, a store thread."""

    work: Callable[[], Any]
    future: asyncio.Future[Any]
    kind: str
    """`read`, `relaxed` (the event log's appends) or `write`."""
    result: Any = None
    error: BaseException | None = None
    effects: list[tuple[Callable[..., object], tuple[Any, ...]]] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class _Group:
    """The one transaction of the calls a writer thread took together."""

    relaxed: bool
    """No call of the group writes durably: it commits without the fsync."""
    conn: Connection | None = None
    broken: BaseException | None = None
    """The error that ended the transaction early: every later transaction of the group raises it."""
    written: int = 0
    """Transactions of its write calls that reached their end (savepoints released)."""


class _Lane:
    """Threads serving one queue of calls (started as they are needed); `grouped`: one thread, which runs
    the calls waiting together as one transaction."""

    def __init__(self, worker: StoreWorker, name: str, size: int, *, grouped: bool) -> None:
        self.worker, self.name, self.size, self.grouped = worker, name, size, grouped
        self.calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, call: _Call) -> None:
        self.calls.put(call)
        if not self._idle.acquire(blocking=False) and len(self._threads) < self.size:
            thread = threading.Thread(
                target=self._serve, name=f"threadline-store-{self.name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def close(self) -> None:
        """Stop the threads once the calls queued before ended (they close their connections)."""
        if not self._closed:
            self._closed = True
            for _thread in self._threads:
                self.calls.put(None)

    def join(self, deadline: float) -> None:
        """Wait (off the loop) until the threads ended, or `deadline` (monotonic)."""
        self.close()
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))

    def _serve(self) -> None:
        worker = self.worker
        try:
            while (call := self.calls.get()) is not None:
                if not self.grouped:
                    worker.serve_one(call)
                else:
                    calls, stop = [call], False
                    while True:
                        try:
                            more = self.calls.get_nowait()
                        except queue.Empty:
                            break
                        if more is None:
                            stop = True
                            break
                        calls.append(more)
                    if len(calls) == 1:  # alone: its transactions are its own
                        worker.serve_one(call)
                    else:
                        worker.serve_group(calls)
                    if stop:
                        return
                self._idle.release()
        finally:
            worker.drop_connection(close=True)


class StoreWorker:
    """The threads, transactions and health of one store (`replica`) on one database."""

    def __init__(self, database: Database, *, replica: str) -> None:
        self.database = database
        self.replica = replica
        self._engine = database.engine
        self._sqlite = database.engine.dialect.name == "sqlite"
        self._file = database.kind == "sqlite"
        self._loop = asyncio.get_running_loop()
        self._local = threading.local()
        self.durable_writes = 0
        """How many durable write transactions committed here (not reads, not the event log's relaxed
        appends; a group commit counts once): what turns cost the database, counted by tests and the
        benchmark rather than timed."""
        self._counting = threading.Lock()
        self.committed_writes = 0
        """How many calls' writes those transactions committed (more than `durable_writes` when calls
        shared a group commit)."""
        if database.kind == "postgresql":
            self._writer = self._reader = _Lane(self, "pool", POOL_SIZE, grouped=False)
        elif database.kind == "memory":  # one connection: one thread for everything
            self._writer = self._reader = _Lane(self, "memory", 1, grouped=True)
        else:
            self._writer = _Lane(self, "writer", 1, grouped=True)
            self._reader = _Lane(self, "reader", POOL_SIZE - 1, grouped=False)
        self.healthy = True
        """False from a transaction that found the database down until the next one that succeeds."""
        self.on_health: Callable[[bool], None] | None = None
        """Called when `healthy` changes (the server reports it as the service's health)."""
        self._probe: asyncio.Future[None] | None = None
        self._watch = asyncio.ensure_future(self._watch_files()) if database.files else None
        database.on_close.append(self._join)

    def close(self) -> None:
        """Let the threads go once their transactions ended (the database is closed apart)."""
        if self._probe is not None:
            self._probe.cancel()
        if self._watch is not None:
            self._watch.cancel()
        self._writer.close()
        if self._reader is not self._writer:
            self._reader.close()

    def _join(self) -> None:
        """The threads ended, their connections closed (the database closes; `CLOSE_WAIT_S` at most)."""
        deadline = time.monotonic() + CLOSE_WAIT_S
        self._writer.join(deadline)
        self._reader.join(deadline)

    def run(self, work: Callable[[], T], *, read: bool, relaxed: bool = False) -> asyncio.Future[T]:
        """`work` (its transactions) in a store thread: reads beside each other, this process's writes on
        SQLite in its writer thread; `relaxed`: its writes are the event log's appends. The future is
        resolved once they committed; `work` runs to its end even when its caller stops waiting."""
        future: asyncio.Future[T] = self._loop.create_future()
        kind = "read" if read else "relaxed" if relaxed else "write"
        (self._reader if read else self._writer).submit(_Call(work, future, kind))
        return future

    def on_loop(self, effect: Callable[..., object], *args: Any) -> None:
        """Call `effect(*args)` on the event loop once the running call's transactions committed, just
        before its caller is answered (called from the store's thread, inside a call)."""
        call: _Call | None = self._local.__dict__.get("call")
        if call is None:  # outside a call: nothing to wait for
            self._loop.call_soon_threadsafe(effect, *args)
        else:
            call.effects.append((effect, args))

    async def ping(self) -> float:
        """The database's time: proves it answers."""

        def now() -> float:
            with self.transaction(read=True) as (_conn, at):
                return at

        return await self.run(now, read=True)

    # -- the threads' side ----------------------------------------------------------------------------

    def serve_one(self, call: _Call) -> None:
        """Run one call, its transactions each on their own."""
        self._local.call = call
        try:
            call.result = call.work()
        except BaseException as error:
            call.error = error
        finally:
            self._local.call = None
        self._answer([call])

    def serve_group(self, calls: list[_Call]) -> None:
        """Run `calls` in one transaction (a savepoint each), commit it once, then answer them all."""
        group = self._local.group = _Group(relaxed=all(call.kind != "write" for call in calls))
        try:
            for call in calls:
                self._local.call = call
                try:
                    call.result = call.work()
                except BaseException as error:
                    call.error = error
            self._local.call = None
            failed = self._end(group)
        finally:
            self._local.group = self._local.call = None
        if failed is not None:  # nothing of the group committed
            for call in calls:
                call.effects.clear()
                if call.error is None:
                    call.result, call.error = None, failed
        self._answer(calls)

    def _end(self, group: _Group) -> BaseException | None:
        """Commit a group's transaction (if any of its calls began it); the error that lost it, if any."""
        conn = group.conn
        if conn is None:
            return group.broken
        if group.broken is not None:
            self._rollback(conn)
            return group.broken
        try:
            on_driver(conn, "COMMIT", _commit)
        except (DBAPIError, SQLAlchemyError, OSError) as error:
            self._rollback(conn)
            return self._fault(error)
        try:
            self._check_files()
        except ThreadError as error:
            return error
        if group.written:
            self._count(group.written)
        return None

    def _answer(self, calls: list[_Call]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._settle, calls)

    def _settle(self, calls: list[_Call]) -> None:
        """On the loop: each call's effects, the store's health, then its caller's answer."""
        for call in calls:
            for effect, args in call.effects:
                try:
                    effect(*args)
                except Exception as failed:  # a bug: logged, and the callers are answered all the same
                    fields = {"replica": self.replica}
                    LOGGER.error("store_effect_failed", exc_info=failed, extra={"fields": fields})
            error = call.error
            if error is None or isinstance(error, IntegrityError):
                self._health(True)
            elif isinstance(error, ThreadError) and not isinstance(error, _Contended):
                self._health(error.code != ErrorCode.STORE_UNAVAILABLE)
            if call.future.cancelled():
                continue
            if error is None:
                call.future.set_result(call.result)
            else:
                call.future.set_exception(error)

    def drop_connection(self, *, close: bool = False) -> None:
        """Give this thread's connection back to the pool (it is dead); `close`: close it (the thread
        ends with the store, whose pool may be gone already)."""
        conn: Connection | None = self._local.__dict__.pop("conn", None)
        if conn is not None:
            with contextlib.suppress(Exception):
                if close:
                    conn.invalidate()
                conn.close()

    # -- health ---------------------------------------------------------------------------------------

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
                    await self.run(self._check_files, read=True)

    # -- transactions -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, read: bool = False, relaxed: bool = False) -> Iterator[tuple[Connection, float]]:
        """One transaction and the store's time at its start; a failing database is `store_unavailable`.

        In a writer thread's group it is a savepoint of the group's transaction. `relaxed`: a write
        whose commit need not be flushed (the event log's appends, LIVE §2.2; its call says so too).

        The store's files are checked after it ends, before the caller answers anyone (`_begin` checks
        them before a connection opens): a commit made into a file deleted meanwhile is reported
        unavailable, never acknowledged.
        """
        group: _Group | None = self._local.__dict__.get("group")
        if group is not None:
            with self._savepoint(group) as begun:
                yield begun
            return
        try:
            conn, now = self._begin(read=read, relaxed=relaxed)
            try:
                yield conn, now
            except BaseException:
                self._rollback(conn)
                raise
            on_driver(conn, "COMMIT", _commit)
        except (ThreadError, IntegrityError):
            raise
        except (DBAPIError, SQLAlchemyError, OSError) as error:
            mapped = self._fault(error)
            if mapped is error:
                raise
            raise mapped from error
        if not read and not relaxed:
            self._count(1)
        self._check_files()

    @contextlib.contextmanager
    def _savepoint(self, group: _Group) -> Iterator[tuple[Connection, float]]:
        """A transaction of a group: a savepoint, rolled back alone when its block raises."""
        if group.broken is not None:
            raise group.broken
        try:
            if group.conn is None:
                group.conn, _now = self._begin(read=False, relaxed=group.relaxed)
            conn = group.conn
            _SAVEPOINT.run(conn, {})
            try:
                yield conn, time.time()
            except BaseException:
                _ROLLBACK_TO.run(conn, {})
                _RELEASE.run(conn, {})
                raise
            _RELEASE.run(conn, {})
            call: _Call | None = self._local.__dict__.get("call")
            if call is not None and call.kind == "write":
                group.written += 1
        except (ThreadError, IntegrityError) as error:
            if group.conn is None:  # the files changed: nothing of the group may commit
                group.broken = error
            raise
        except (DBAPIError, SQLAlchemyError, OSError) as error:
            mapped = self._fault(error)
            if mapped is error:
                raise
            group.broken = mapped  # the database failed the group's transaction, not this statement
            raise mapped from error

    def _begin(self, *, read: bool, relaxed: bool) -> tuple[Connection, float]:
        """This thread's connection, in a new transaction, and the store's time at its start.

        Its first statement is the connection's check (SQLite: its `BEGIN`; PostgreSQL: reading the
        time): one the database dropped (it restarted) is replaced once, as a pool's pre-ping would,
        without a round trip of its own. A new connection to an SQLite file opens only while the files
        are those the store opened (`_check_files`).
        """
        for attempt in (1, 2):
            conn: Connection | None = self._local.__dict__.get("conn")
            try:
                if conn is None or conn.invalidated or conn.closed:
                    self._check_files()
                    conn = self._local.conn = self._engine.connect()
                    self._local.relaxed = False  # the pool's connections are opened durable
                if not self._sqlite:
                    return conn, float((NOW_RELAXED if relaxed else NOW).run(conn, {})[0][0])
                if self._file and not read and self._local.relaxed != relaxed:
                    _SYNCHRONOUS[relaxed].run(conn, {})
                    self._local.relaxed = relaxed
                BEGIN[read].run(conn, {})
                return conn, time.time()  # an SQLite file is shared on one host only: its clock
            except DBAPIError as error:
                self.drop_connection()
                if attempt == 1 and error.connection_invalidated:
                    continue
                raise
        raise AssertionError("unreachable")

    def _count(self, writes: int) -> None:
        """One durable transaction committed, holding `writes` calls' writes (threads of a pool count at
        once)."""
        with self._counting:
            self.durable_writes += 1
            self.committed_writes += writes

    def _rollback(self, conn: Connection) -> None:
        try:
            on_driver(conn, "ROLLBACK", _rollback)
        except Exception:  # the connection is broken: the next transaction takes a new one
            self.drop_connection()

    def _fault(self, error: BaseException) -> BaseException:
        """What a database error raises: `store_unavailable` for an outage or contention (logged), the
        error itself for a statement the database refused (a bug, `faults`)."""
        fault = fault_of(error)
        if fault == "statement":
            return error
        if fault == "contention":
            LOGGER.warning("store_contended", exc_info=error, extra={"fields": {"replica": self.replica}})
            return store_unavailable(type(error).__name__, contended=True)
        if self.healthy:  # the first failure of an outage; `thread_store_health` marks its end
            LOGGER.warning("store_unavailable", exc_info=error, extra={"fields": {"replica": self.replica}})
        return store_unavailable(type(error).__name__)

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


def _commit(raw: Any) -> None:
    raw.commit()


def _rollback(raw: Any) -> None:
    raw.rollback()


@contextlib.contextmanager
def nested(conn: Connection) -> Iterator[None]:
    """A savepoint inside the running transaction: the block's writes are undone alone if it raises."""
    begin, release, rollback = _NESTED
    begin.run(conn, {})
    try:
        yield
    except BaseException:
        rollback.run(conn, {})
        release.run(conn, {})
        raise
    release.run(conn, {})


class Offloading(Protocol):
    """An object whose methods run their transactions on `worker` (`offloaded`)."""

    @property
    def worker(self) -> StoreWorker: ...


S = TypeVar("S", bound=Offloading)


def offloaded(
    *, read: bool, relaxed: bool = False
) -> Callable[[Callable[Concatenate[S, P], T]], Callable[Concatenate[S, P], Awaitable[T]]]:
    """Run a method (its transactions, synchronous) on its object's worker, to its end.

    The call finishes even when its caller is cancelled (a client gone, a deadline), so no transaction
    is left halfway; only the caller stops waiting. `relaxed`: its writes are the event log's appends.
    """

    def wrap(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], Awaitable[T]]:
        @functools.wraps(method)
        async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            work = functools.partial(method, self, *args, **kwargs)
            return await self.worker.run(work, read=read, relaxed=relaxed)

        return call

    return wrap
