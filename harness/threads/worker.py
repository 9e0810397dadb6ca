"""The store's worker threads: each transaction run whole in one of them, and the store's health.

One thread hop per transaction: the driver's calls are plain C calls there, where an async driver would
cross threads several times per statement. No lock is held while anything is decoded, validated or run
on the event loop, and a transaction either commits whole or not at all.

A database that cannot be reached or written raises `ThreadError` `store_unavailable`, and so does a
statement that waited too long; only the first moves the store's health (`faults`). A statement the
database refused for what it is is raised unchanged. So does an SQLite file deleted or replaced under the
server: every transaction checks, before it starts and again before its caller is answered, that the
files are still those the store opened, so nothing committed into a file no longer at the path is
acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Connection, Engine, RootTransaction
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from ..errors import ErrorCode, ThreadError
from .database import POOL_SIZE, READ, Database
from .faults import fault_of
from .queries import NOW

__all__ = ("PROBE_S", "Offloading", "StoreWorker", "offloaded", "store_unavailable")

LOGGER = logging.getLogger("threadline.threads")

PROBE_S = 1.0
"""How often a store whose database is down tries it again, and an SQLite store checks its files."""

P = ParamSpec("P")
T = TypeVar("T")


class _Contended(ThreadError):
    """`store_unavailable` of a statement that waited too long: worth a retry, but the database answered."""


def store_unavailable(detail: str = "", *, contended: bool = False) -> ThreadError:
    return (_Contended if contended else ThreadError)(
        "The thread store cannot be reached or written; retry later.",
        code=ErrorCode.STORE_UNAVAILABLE,
        details={"detail": detail[:200]} if detail else None,
    )


class StoreWorker:
    """The worker threads, transactions and health of one store (`replica`) on one database."""

    def __init__(self, database: Database, *, replica: str) -> None:
        self.database = database
        self.replica = replica
        self._engine = database.engine
        self._reader = database.engine.execution_options(**READ)
        self._sqlite = database.engine.dialect.name == "sqlite"
        self._relaxed = database.engine if database.relaxed is None else database.relaxed
        self.durable_writes = 0
        """How many durable write transactions committed here (not reads, not relaxed appends): what a
        turn costs the database, counted by tests and the benchmark rather than timed."""
        # SQLite: this process's write transactions take turns (an in-memory database is one connection,
        # so all of its transactions do): waiting here is cheaper than in SQLite's busy handler, which
        # sleeps. PostgreSQL locks rows, so transactions on different threads run side by side.
        lock = asyncio.Lock()
        free: contextlib.nullcontext[None] = contextlib.nullcontext()
        self._writes = free if database.kind == "postgresql" else lock
        self._turns = lock if database.kind == "memory" else free
        # Threads of the store's own: a large decode in the loop's default executor never delays a commit.
        self._threads = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="threadline-store")
        self.healthy = True
        """False from a transaction that found the database down until the next one that succeeds."""
        self.on_health: Callable[[bool], None] | None = None
        """Called when `healthy` changes (the server reports it as the service's health)."""
        self._probe: asyncio.Future[None] | None = None
        self._watch = asyncio.ensure_future(self._watch_files()) if database.files else None

    def close(self) -> None:
        """Let the threads go once their transactions ended (the database is closed apart)."""
        if self._probe is not None:
            self._probe.cancel()
        if self._watch is not None:
            self._watch.cancel()
        self._threads.shutdown(wait=False)

    async def run(self, work: Callable[[], T], *, read: bool) -> T:
        """`work` (one transaction) in a worker thread; `read` transactions run beside each other, this
        process's writes take turns."""
        async with self._turns if read else self._writes:
            try:
                result = await asyncio.get_running_loop().run_in_executor(self._threads, work)
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

    async def ping(self) -> float:
        """The database's time: proves it answers."""

        def now() -> float:
            with self.transaction(read=True) as (_conn, at):
                return at

        return await self.run(now, read=True)

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

        `relaxed`: a write whose commit need not be flushed (the event log's appends, LIVE §2.2), on the
        appends' own connection (`Database.relaxed`): the next durable commit flushes it.

        The store's files are checked before it starts (no connection opens a file put in their place)
        and after it ends, before the caller answers anyone: a commit made into a file deleted meanwhile
        is reported unavailable, never acknowledged.
        """
        self._check_files()
        try:
            engine = self._reader if read else self._relaxed if relaxed else self._engine
            with self._begun(engine) as (conn, now):
                yield conn, now
            if not read and not relaxed:
                self.durable_writes += 1
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
        """A transaction and the store's time at its start (`queries.NOW`), on a connection proven alive.

        Its first statement is the connection's check (SQLite: its `BEGIN`; PostgreSQL: reading the
        time): one the database dropped (it restarted) is replaced once, as a pool's pre-ping would,
        without a round trip of its own.
        """
        for attempt in (1, 2):
            conn = engine.connect()
            try:
                tx = conn.begin()
                now = time.time() if self._sqlite else float(NOW.run(conn, {})[0][0])
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


class Offloading(Protocol):
    """An object whose methods run their transactions on `worker` (`offloaded`)."""

    @property
    def worker(self) -> StoreWorker: ...


S = TypeVar("S", bound=Offloading)


def offloaded(
    *, read: bool
) -> Callable[[Callable[Concatenate[S, P], T]], Callable[Concatenate[S, P], Awaitable[T]]]:
    """Run a method (one transaction, synchronous) on its object's worker, to its end.

    The call finishes even when its caller is cancelled (a client gone, a deadline), so no transaction
    is left halfway; only the caller stops waiting.
    """

    def wrap(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], Awaitable[T]]:
        @functools.wraps(method)
        async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            task = asyncio.ensure_future(
                self.worker.run(functools.partial(method, self, *args, **kwargs), read=read)
            )
            task.add_done_callback(_consume)
            return await asyncio.shield(task)

        return call

    return wrap


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a call whose caller went away, so it is not reported as unhandled."""
    if not task.cancelled():
        task.exception()
