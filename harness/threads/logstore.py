"""The run event logs in the store (LIVE §2.2–§2.4, §2.9): their statements and transactions.

A log is opened by the Begin that takes its attempt's lease and leaves `open` once: `ended` by the
attempt's own terminal commit or release, `lost` by any other write that ends or takes the lease (a
Begin, a rollback, a cancel closing a run whose holder is gone) or, once the lease expired by the store's
clock a third of a TTL ago, by a follower or the sweeper. Every write of a log is a compare-and-set on
its row (`open`, the `last_sequence` its writer wrote last), so nothing of an attempt is written after it
left `open`: a stalled or fenced-out holder gets `LEASE_LOST`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, delete, exists, insert, or_, select, text, update

from .eventlog import LogWrite, unpack
from .follow import Hub
from .notify import THREAD_CHANNEL
from .queries import key
from .schema import run_events, run_logs, threads
from .statements import Statement, StatementFamily
from .worker import StoreWorker, offloaded

__all__ = (
    "LogMoved",
    "LogRow",
    "LogStore",
    "delete_logs",
    "lose_logs",
    "notify_appends",
    "notify_thread",
    "open_log",
    "write_log",
)

_READ_BYTES = 1024 * 1024
"""A follower's read takes at most about this many bytes of events."""


def _keyed(table: Any) -> tuple[Any, Any]:
    return table.c.namespace == bindparam("namespace"), table.c.thread_id == bindparam("thread_id")


_OPEN_LOG = Statement(
    insert(run_logs).values(
        {
            name: bindparam(name)
            for name in (
                "namespace",
                "thread_id",
                "run_id",
                "request_id",
                "incarnation",
                "status",
                "last_sequence",
                "bytes",
                "create_time",
            )
        }
    )
)
_LOSE_LOGS = Statement(
    update(run_logs)
    .where(*_keyed(run_logs), run_logs.c.status == "open")
    .values(status="lost", end_time=bindparam("now"))
)
_WRITE_LOG = StatementFamily[bool](
    lambda end: (
        update(run_logs)
        .where(
            *_keyed(run_logs),
            run_logs.c.run_id == bindparam("run_id"),
            run_logs.c.status == "open",
            run_logs.c.last_sequence == bindparam("after"),
        )
        .values(
            last_sequence=bindparam("last"),
            bytes=run_logs.c.bytes + bindparam("size"),
            **(
                {
                    "status": "ended",
                    "end_time": bindparam("now"),
                    "result_sequence": bindparam("result_sequence"),
                }
                if end
                else {}
            ),
        )
        .returning(
            run_logs.c.run_id,
            select(threads.c.cancel_requested)
            .where(threads.c.namespace == run_logs.c.namespace, threads.c.thread_id == run_logs.c.thread_id)
            .scalar_subquery()
            .label("cancel_requested"),
        )
    )
)
"""A log write's compare-and-set, which also reads whether a cancel was asked of the thread's run (§4.3);
`[True]`: the attempt's last write, which ends the log."""
_INSERT_EVENTS = Statement(
    insert(run_events).values(
        {
            name: bindparam(name)
            for name in ("namespace", "thread_id", "run_id", "first_sequence", "last_sequence", "data")
        }
    )
)
_SELECT_LOG = Statement(select(run_logs).where(*_keyed(run_logs), run_logs.c.run_id == bindparam("run_id")))
_SELECT_EVENTS = Statement(
    select(run_events.c.first_sequence, run_events.c.last_sequence, run_events.c.data)
    .where(
        *_keyed(run_events),
        run_events.c.run_id == bindparam("run_id"),
        run_events.c.last_sequence > bindparam("after"),
        run_events.c.first_sequence <= bindparam("upto"),
    )
    .order_by(run_events.c.first_sequence)
    .limit(bindparam("limit"))
)
_EXPIRED_LEASE = exists().where(
    threads.c.namespace == run_logs.c.namespace,
    threads.c.thread_id == run_logs.c.thread_id,
    or_(
        threads.c.lease_run_id.is_(None),
        threads.c.lease_run_id != run_logs.c.run_id,
        threads.c.lease_expires <= bindparam("expired_before"),
    ),
)
"""The attempt of the log row no longer holds its thread's lease, or it expired before `expired_before`."""
_MARK_LOST = Statement(
    update(run_logs)
    .where(
        *_keyed(run_logs),
        run_logs.c.run_id == bindparam("run_id"),
        run_logs.c.status == "open",
        run_logs.c.last_sequence == bindparam("last_sequence"),
        _EXPIRED_LEASE,
    )
    .values(status="lost", end_time=bindparam("now"))
    .returning(run_logs.c.run_id)
)
"""A follower's (or the sweeper's) mark of an attempt whose holder is gone: `run_logs` only."""
_ABANDONED = Statement(
    select(run_logs.c.namespace, run_logs.c.thread_id, run_logs.c.run_id, run_logs.c.last_sequence)
    .where(run_logs.c.status == "open", run_logs.c.create_time <= bindparam("expired_before"), _EXPIRED_LEASE)
    .limit(bindparam("limit"))
)
_EXPIRED_LOGS = Statement(
    select(run_logs.c.namespace, run_logs.c.thread_id, run_logs.c.run_id)
    .where(
        or_(run_logs.c.status == "ended", run_logs.c.status == "lost"),
        run_logs.c.end_time <= bindparam("before"),
    )
    .limit(bindparam("limit"))
)
_DELETE_LOG = tuple(
    Statement(delete(table).where(*_keyed(table), table.c.run_id == bindparam("run_id")))
    for table in (run_events, run_logs)
)
_NOTE = (
    "json_build_array(CAST(:thread_id AS text),"
    " COALESCE((SELECT change_seq FROM threads WHERE namespace = :namespace AND thread_id = :thread_id), 0),"
    " CAST(:run_id AS text), CAST(:last_sequence AS bigint){due})::text"
)
_NOTIFY = tuple(
    Statement(text(f"SELECT pg_notify(:channel, {_NOTE.format(due=', true' if due else '')})"))
    for due in (False, True)
)
"""PostgreSQL: `[thread_id, change_seq, run_id, last_sequence]` on `threadline_thread`, the thread's change
sequence read by the same statement (as this transaction leaves it); `[1]` adds `true`: the server's own
work on the thread is due now (a parked attempt), so every replica's sweeper looks at once."""
_NOTIFY_TEXT = Statement(text("SELECT pg_notify(:channel, :payload)"))
_NOTE_BYTES = 7000
"""The longest payload `notify_appends` sends (PostgreSQL refuses 8000 bytes and more; ids are bounded)."""
_CHANGE_SEQ = Statement(select(threads.c.change_seq).where(*_keyed(threads)))
_LOGS_OF = Statement(select(run_logs.c.run_id).where(*_keyed(run_logs)))


@dataclass(frozen=True, slots=True)
class LogRow:
    """A log's row: whose attempt, how far it is written, whether it is still open."""

    thread_id: str
    run_id: str
    request_id: str
    status: str
    last_sequence: int
    result_sequence: int | None
    bytes: int
    create_time: float
    end_time: float | None


class LogMoved(Exception):
    """A log write's compare-and-set failed: the row as it is now (`None`: no log)."""

    def __init__(self, row: LogRow | None) -> None:
        super().__init__("the run's event log moved")
        self.row = row


def _row(row: Any) -> LogRow:
    return LogRow(
        thread_id=row.thread_id,
        run_id=row.run_id,
        request_id=row.request_id,
        status=row.status,
        last_sequence=int(row.last_sequence),
        result_sequence=None if row.result_sequence is None else int(row.result_sequence),
        bytes=int(row.bytes),
        create_time=float(row.create_time),
        end_time=None if row.end_time is None else float(row.end_time),
    )


# -- within a transaction that already took the thread row -------------------------------------------------


def open_log(
    conn: Connection, thread_id: str, *, run_id: str, request_id: str, incarnation: str, now: float
) -> None:
    """Open the log of the attempt this transaction's Begin starts."""
    _OPEN_LOG.run(
        conn,
        {
            **key(thread_id),
            "run_id": run_id,
            "request_id": request_id,
            "incarnation": incarnation,
            "status": "open",
            "last_sequence": -1,
            "bytes": 0,
            "create_time": now,
        },
    )


def lose_logs(conn: Connection, thread_id: str, now: float) -> None:
    """Mark `lost` the thread's open log: this write ends or takes its attempt's lease."""
    _LOSE_LOGS.run(conn, {**key(thread_id), "now": now})


def write_log(conn: Connection, thread_id: str, write: LogWrite, now: float) -> None:
    """One log write (a commit's), by compare-and-set.

    Raises:
        LogMoved: the row is not as its writer last left it (lost, or written by an answer it never got).
    """
    _advance(conn, thread_id, write, now)
    if write.data:
        _INSERT_EVENTS.run(conn, _events(thread_id, write))


def _advance(conn: Connection, thread_id: str, write: LogWrite, now: float) -> bool:
    """A log write's compare-and-set on its row (`LogMoved` when it fails); whether a cancel was asked
    of the thread's run."""
    params = {
        **key(thread_id),
        "run_id": write.run_id,
        "after": write.after,
        "last": write.last,
        "size": len(write.data),
        "now": now,
        "result_sequence": write.result_sequence,
    }
    written = _WRITE_LOG[write.end].first(conn, params)
    if written is None:
        found = _SELECT_LOG.first(conn, {**key(thread_id), "run_id": write.run_id})
        raise LogMoved(None if found is None else _row(found))
    return bool(written.cancel_requested)


def _events(thread_id: str, write: LogWrite) -> dict[str, Any]:
    """The `run_events` row of a write."""
    return {
        **key(thread_id),
        "run_id": write.run_id,
        "first_sequence": write.after + 1,
        "last_sequence": write.last,
        "data": write.data,
    }


def notify_thread(
    conn: Connection, thread_id: str, *, run_id: str = "", last_sequence: int = -1, due: bool = False
) -> None:
    """PostgreSQL: one notification for whatever this transaction changed (events, the thread, work
    due now: `due`)."""
    if conn.dialect.name == "postgresql":
        _NOTIFY[due].run(
            conn,
            {"channel": THREAD_CHANNEL, **key(thread_id), "run_id": run_id, "last_sequence": last_sequence},
        )


def notify_appends(conn: Connection, written: Sequence[tuple[str, str, int]]) -> None:
    """PostgreSQL: the notification of a grouped append: `[[thread_id, null, run_id, last_sequence], ...]`
    (no thread changed), split so each payload stays under PostgreSQL's 8000 bytes."""
    if conn.dialect.name != "postgresql" or not written:
        return
    chunk: list[str] = []
    size = 2
    for thread_id, run_id, last in written:
        entry = json.dumps([thread_id, None, run_id, last], separators=(",", ":"))
        if chunk and size + len(entry) + 1 > _NOTE_BYTES:
            _NOTIFY_TEXT.run(conn, {"channel": THREAD_CHANNEL, "payload": f"[{','.join(chunk)}]"})
            chunk, size = [], 2
        chunk.append(entry)
        size += len(entry) + 1
    _NOTIFY_TEXT.run(conn, {"channel": THREAD_CHANNEL, "payload": f"[{','.join(chunk)}]"})


def delete_logs(conn: Connection, thread_id: str) -> None:
    """Delete every log of the thread with its events (`DeleteThread`)."""
    for found in _LOGS_OF.run(conn, key(thread_id)):
        for statement in _DELETE_LOG:
            statement.run(conn, {**key(thread_id), "run_id": found.run_id})


# -- the log's own transactions ---------------------------------------------------------------------------


class LogStore:
    """The log reads and writes that are transactions of their own: appends, followers, the sweeper."""

    def __init__(self, worker: StoreWorker, hub: Hub) -> None:
        self.worker = worker
        self._hub = hub

    @offloaded(read=False, relaxed=True)
    def append(self, writes: Sequence[tuple[str, LogWrite]]) -> list[bool | LogMoved]:
        """Appends of holders on this replica (`appends`), in one transaction of relaxed durability (a
        later commit flushes it). For each write: whether a cancel was asked of its thread's run (read in
        the same transaction), or the `LogMoved` its compare-and-set found (the others still land)."""
        outcomes: list[bool | LogMoved] = []
        written: list[tuple[str, str, int]] = []
        with self.worker.transaction(relaxed=True) as (conn, now):
            rows = []
            for thread_id, write in writes:
                try:
                    asked = _advance(conn, thread_id, write, now)
                except LogMoved as moved:
                    outcomes.append(moved)
                    continue
                if write.data:
                    rows.append(_events(thread_id, write))
                outcomes.append(asked)
                written.append((thread_id, write.run_id, write.last))
            _INSERT_EVENTS.run_many(conn, rows)
            notify_appends(conn, written)
        self.worker.on_loop(self._hub.fire_logs, written)
        return outcomes

    @offloaded(read=True)
    def log(self, thread_id: str, run_id: str) -> LogRow | None:
        with self.worker.transaction(read=True) as (conn, _now):
            found = _SELECT_LOG.first(conn, {**key(thread_id), "run_id": run_id})
        return None if found is None else _row(found)

    @offloaded(read=True)
    def read(
        self, thread_id: str, run_id: str, *, after: int
    ) -> tuple[LogRow | None, list[tuple[int, bytes]]]:
        """The log's row and its events after `after` up to the row's `last_sequence` (about 1 MiB at
        most: read again from the last one for more)."""
        with self.worker.transaction(read=True) as (conn, _now):
            found = _SELECT_LOG.first(conn, {**key(thread_id), "run_id": run_id})
            if found is None:
                return None, []
            row = _row(found)
            events: list[tuple[int, bytes]] = []
            if row.last_sequence > after:
                size = 0
                for chunk in _SELECT_EVENTS.run(
                    conn,
                    {
                        **key(thread_id),
                        "run_id": run_id,
                        "after": after,
                        "upto": row.last_sequence,
                        "limit": 64,
                    },
                ):
                    for sequence, data in unpack(chunk.data):
                        if after < sequence <= row.last_sequence:
                            events.append((sequence, data))
                            size += len(data)
                    if size >= _READ_BYTES:
                        break
        return row, events

    @offloaded(read=False)
    def mark_lost(self, thread_id: str, run_id: str, *, last_sequence: int, grace: float) -> bool:
        """Mark `lost` an open log whose attempt's lease expired `grace` ago by the store's clock (or
        moved on), as its follower read it (`last_sequence`). Returns whether it did."""
        with self.worker.transaction() as (conn, now):
            marked = _MARK_LOST.first(
                conn,
                {
                    **key(thread_id),
                    "run_id": run_id,
                    "last_sequence": last_sequence,
                    "now": now,
                    "expired_before": now - grace,
                },
            )
            if marked is not None:
                notify_thread(conn, thread_id, run_id=run_id, last_sequence=last_sequence)
        if marked is not None:
            self.worker.on_loop(self._hub.fire, thread_id, run_id, False)
        return marked is not None

    @offloaded(read=False)
    def sweep(self, *, retention: float, grace: float, limit: int = 1000) -> tuple[int, int]:
        """Delete logs that left `open` more than `retention` ago, and mark `lost` open logs whose holder
        is gone (lease expired `grace` ago); returns how many of each, at most `limit` a pass.

        A pass that finds nothing to do writes nothing: an idle sweeper costs the database no durable
        write (no fsync, no SQLite write turn) each period."""
        with self.worker.transaction(read=True) as (conn, now):
            found = _EXPIRED_LOGS.first(conn, {"before": now - retention, "limit": 1}) or _ABANDONED.first(
                conn, {"expired_before": now - grace, "limit": 1}
            )
        if found is None:
            return 0, 0
        with self.worker.transaction() as (conn, now):
            expired = _EXPIRED_LOGS.run(conn, {"before": now - retention, "limit": limit})
            for found in expired:
                for statement in _DELETE_LOG:
                    statement.run(
                        conn,
                        {"namespace": found.namespace, "thread_id": found.thread_id, "run_id": found.run_id},
                    )
            abandoned = _ABANDONED.run(conn, {"expired_before": now - grace, "limit": limit})
            marked = 0
            for found in abandoned:
                params = {
                    "namespace": found.namespace,
                    "thread_id": found.thread_id,
                    "run_id": found.run_id,
                    "last_sequence": found.last_sequence,
                    "now": now,
                    "expired_before": now - grace,
                }
                if _MARK_LOST.first(conn, params) is not None:
                    marked += 1
        return len(expired), marked

    @offloaded(read=True)
    def positions(
        self, attempts: list[tuple[str, str]], thread_ids: list[str]
    ) -> tuple[dict[tuple[str, str], tuple[str, int]], dict[str, int]]:
        """One poll (LIVE §2.6): each followed attempt's log status and last sequence, each watched
        thread's change sequence (-1: gone)."""
        logs: dict[tuple[str, str], tuple[str, int]] = {}
        changes: dict[str, int] = {}
        with self.worker.transaction(read=True) as (conn, _now):
            for thread_id, run_id in attempts:
                found = _SELECT_LOG.first(conn, {**key(thread_id), "run_id": run_id})
                logs[thread_id, run_id] = (
                    ("gone", -1) if found is None else (found.status, int(found.last_sequence))
                )
            for thread_id in thread_ids:
                change = _CHANGE_SEQ.first(conn, key(thread_id))
                changes[thread_id] = -1 if change is None else int(change.change_seq)
        return logs, changes
