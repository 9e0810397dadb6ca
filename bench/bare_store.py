"""(h) The store's cost per turn against bare transactions that write the same rows, in this process.

Recording: real `scenario` turns of one thread run here through `DurableHost` with the server's own
launcher and agent registry, on the database under test, and every store call they make is recorded
with its arguments (a turn whose head is cached: `thread_and_record`, `begin`, then one `commit` per
checkpoint, the last with the run's end).

Round i replays recorded turn i's calls, in order, through `ThreadStore` (asyncio, the store's worker
threads, SQLAlchemy: all a server turn pays the store) on a thread of its own that starts from the
recorded thread's state, so each turn meets the history it met. Then the rows that turn wrote, read
back from the database, are written again on a bare thread: one driver transaction per store write
transaction, holding only the statements that write those rows (the `threads` update, the `runs` row,
each checkpoint's new `blobs` rows and its `checkpoints` row, the run record's end), by the driver
alone on one open connection: `sqlite3` with the store's WAL, `synchronous=FULL` and `BEGIN
IMMEDIATE`; psycopg with the store's session settings. The store's figure so carries all it does
beyond writing: its two reads before `begin`, the database clock read in every transaction, its
compare-and-set and read-backs, delta planning and hashing, SQLAlchemy, the pool, the thread hop.
`bare_wrote_the_same_rows` checks the two threads' checkpoints, blob bytes and run records match.

Wall time per turn, one turn at a time (the target's figure), and this process's CPU time beside it;
the ratio is the median of per-round ratios, and the first round is a warm-up.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import secrets
import sqlite3
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy import event
from threadline.v1 import thread_service_pb2

from harness.threads import DurableHost, StoreKind, ThreadStore, open_database
from harness.threads.database import BUSY_TIMEOUT_MS, postgresql_conninfo
from harness.threads.records import Head
from harness.threads.rows import end_json, requests_json, resume_json
from harness.threads.statements import Statement
from harness.threads.store import NewCheckpoint
from server.agents import AgentRegistry
from server.launch import ThreadLauncher
from server.mapping.threads import run_request_from_pb
from server.mount_config import CheckedMounts
from server.mounts import ServerMounts
from server.runs import ActiveRuns

from .agents import PROMPT, scenario

__all__ = ("store_cost_section",)

Call = tuple[str, tuple[Any, ...], dict[str, Any]]
LEASE_TTL = 30.0


class _Recorder:
    """Stands in for the host's `ThreadStore`: passes every call on and records it with its arguments."""

    def __init__(self, store: ThreadStore) -> None:
        self._store = store
        self.calls: list[Call] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return await attribute(*args, **kwargs)

        return call


async def _record(store: ThreadStore, turns: int) -> list[list[Call]]:
    """The store calls of `turns` real turns of one thread (after one turn that loads its head)."""
    recorder = _Recorder(store)
    registry = AgentRegistry({"scenario": scenario()}, default="scenario")
    launcher = ThreadLauncher(registry, ActiveRuns(16), ServerMounts(CheckedMounts(), agents=tuple(registry)))
    host = DurableHost(recorder, launcher, lease_ttl=LEASE_TTL)  # type: ignore[arg-type]
    created = await host.create(
        thread_id=None, agent="scenario", labels={}, state=None, pending=None, accepted=None, client_tools=()
    )
    recorded = []
    for _ in range(turns + 1):
        spec = thread_service_pb2.ThreadRunSpec(
            thread_id=created.thread_id, request_id=uuid.uuid4().hex, text=PROMPT
        )
        recorder.calls = []
        async for _item in host.run(run_request_from_pb(spec)).items():
            pass
        recorded.append(recorder.calls)
    return recorded[1:]


async def _replay(store: ThreadStore, calls: list[Call], thread_id: str, head: Head) -> tuple[Head, str]:
    """One recorded turn's store calls on `thread_id` (head `head`), as its run made them."""
    run_id, request_id = "run-" + uuid.uuid4().hex, uuid.uuid4().hex
    thread, fence, revision, base = None, "", 0, head
    for name, _args, kwargs in calls:
        if name == "thread":
            thread = await store.thread(thread_id)
        elif name == "thread_and_record":
            thread, _record = await store.thread_and_record(thread_id, request_id)
        elif name == "run_record":
            await store.run_record(thread_id, request_id)
        elif name == "head":
            assert thread is not None
            base = await store.head(thread)
        elif name == "begin":
            assert thread is not None
            taken, _record = await store.begin(
                thread, **{**kwargs, "run_id": run_id, "request_id": request_id, "record": None}
            )
            fence, revision = taken.fence, taken.revision
        elif name == "commit":
            checkpoint, finish = kwargs["checkpoint"], kwargs["finish"]
            committed = await store.commit(
                thread_id,
                fence=fence,
                revision=revision,
                checkpoint=checkpoint
                and dataclasses.replace(checkpoint, run_id=run_id, request_id=request_id),
                base=base,
                accepted=kwargs["accepted"],
                finish=finish and dataclasses.replace(finish, request_id=request_id),
                ttl=kwargs["ttl"],
            )
            revision, base = committed.revision, committed.head or base
        elif name == "renew":
            await store.renew(thread_id, fence=fence, ttl=kwargs["ttl"])
        else:
            raise AssertionError(f"a turn made a store call the replay does not know: {name}")
    return base, request_id


Execute = Callable[[str, tuple[Any, ...]], Any]


class _Bare:
    """One driver connection of its own on the store's database, the store's durability settings."""

    def __init__(self, kind: StoreKind, location: str) -> None:
        self.statements = 0
        """Statements sent so far, BEGIN and COMMIT not counted."""
        self._pg: psycopg.Connection[tuple[Any, ...]] | None = None
        self._lite: sqlite3.Connection | None = None
        if kind == "postgresql":
            self._pg = psycopg.connect(postgresql_conninfo(location), autocommit=True)
        else:
            self._lite = sqlite3.connect(location, isolation_level=None)
            for pragma in ("journal_mode=WAL", "synchronous=FULL", f"busy_timeout={BUSY_TIMEOUT_MS}"):
                self._lite.execute(f"PRAGMA {pragma}")
            self._lite.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
        if self._lite is not None:
            self._lite.close()

    def execute(self, sql: str, params: tuple[Any, ...]) -> Any:
        """A statement; its cursor (`?` placeholders on both drivers)."""
        self.statements += not sql.startswith(_TRANSACTION)
        if self._pg is not None:
            return self._pg.execute(sql.replace("?", "%s"), params)
        assert self._lite is not None
        return self._lite.execute(sql, params)

    def transaction(self, work: Callable[[Execute], None]) -> None:
        """`work(execute)` in one write transaction (BEGIN IMMEDIATE on SQLite, as the store's)."""
        if self._pg is not None:
            with self._pg.transaction():
                work(self.execute)
            return
        self.execute("BEGIN IMMEDIATE", ())
        try:
            work(self.execute)
        except BaseException:
            self.execute("ROLLBACK", ())
            raise
        self.execute("COMMIT", ())


_THREAD = "WHERE namespace = '' AND thread_id = ?"
_TRANSACTION = ("BEGIN", "COMMIT", "ROLLBACK")
_BLOB_COLUMNS = "owner, base_id, keep, data, size, chain_bytes, sha256"
_CHECKPOINT_COLUMNS = (
    "kind, run_id, request_id, create_time, history_blob, rest_blob, history_at, pending, remaining,"
    " client_tools"
)
_THREAD_COLUMNS = (
    "incarnation, agent, labels, create_time, update_time, revision, pending, accepted, fence, lease_run_id,"
    " lease_request_id, lease_replica, lease_expires, cancel_requested, last_request_id"
)


@dataclasses.dataclass
class _Turn:
    """What one replayed turn wrote, to be written again by bare transactions."""

    calls: list[Call]
    first_revision: int
    """The thread's revision before the turn."""
    run: tuple[Any, ...]
    """The run record's digest, prompt, attempts."""
    checkpoints: dict[int, list[Any]]
    """Revision -> its row's `_CHECKPOINT_COLUMNS`."""
    blobs: dict[int, tuple[Any, ...]]
    """The blobs the turn wrote: id -> `_BLOB_COLUMNS`."""

    @property
    def blob_bytes(self) -> int:
        return sum(len(row[3]) for row in self.blobs.values())


def _written(
    bare: _Bare, calls: list[Call], thread_id: str, request_id: str, after: int, seen: set[int]
) -> _Turn:
    """The rows the replayed turn `request_id` wrote on `thread_id` after revision `after`."""
    (run,) = bare.execute(
        f"SELECT digest, prompt, attempts FROM runs {_THREAD} AND request_id = ?", (thread_id, request_id)
    ).fetchall()
    rows = bare.execute(
        f"SELECT revision, {_CHECKPOINT_COLUMNS} FROM checkpoints {_THREAD} AND revision > ? ORDER BY revision",
        (thread_id, after),
    ).fetchall()
    new = sorted({blob for row in rows for blob in row[5:7]} - seen)
    seen.update(new)
    blobs = {}
    for blob in new:
        (row,) = bare.execute(f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE id = ?", (blob,)).fetchall()
        blobs[blob] = (row[0], row[1], row[2], bytes(row[3]), *row[4:])
    return _Turn(calls, after, tuple(run), {row[0]: list(row[1:]) for row in rows}, blobs)


def _bare_turn(bare: _Bare, turn: _Turn, thread_id: str, replica: str, copies: dict[int, int]) -> None:
    """The replayed turn's rows again on `thread_id`, one transaction per store write transaction."""
    run_id, request_id = "run-" + uuid.uuid4().hex, uuid.uuid4().hex
    revision = turn.first_revision
    for name, _args, kwargs in turn.calls:
        if name == "begin":
            bare.transaction(
                functools.partial(
                    _begin,
                    turn=turn,
                    kwargs=kwargs,
                    replica=replica,
                    thread_id=thread_id,
                    run_id=run_id,
                    request_id=request_id,
                )
            )
        elif name == "commit":
            head = revision + (kwargs["checkpoint"] is not None)
            bare.transaction(
                functools.partial(
                    _commit,
                    turn=turn,
                    kwargs=kwargs,
                    head=head,
                    thread_id=thread_id,
                    run_id=run_id,
                    request_id=request_id,
                    copies=copies,
                )
            )
            revision = head


def _begin(
    execute: Execute,
    *,
    turn: _Turn,
    kwargs: dict[str, Any],
    replica: str,
    thread_id: str,
    run_id: str,
    request_id: str,
) -> None:
    """`begin`'s rows: the thread's new fence and lease, the run record."""
    now = time.time()
    digest, prompt, attempts = turn.run
    execute(
        "UPDATE threads SET fence = ?, pending = NULL, update_time = ?, accepted = ?, lease_run_id = ?,"
        " lease_request_id = ?, lease_replica = ?, lease_expires = ?, cancel_requested = ?,"
        f" last_request_id = ? {_THREAD}",
        (
            secrets.token_hex(16),
            now,
            resume_json(kwargs["accepted"]),
            run_id,
            request_id,
            replica,
            now + kwargs["ttl"],
            False,
            request_id,
            thread_id,
        ),
    )
    execute(
        "INSERT INTO runs (namespace, thread_id, request_id, digest, prompt, status, outcome, attempts,"
        " run_id, committed_revision, create_time, update_time)"
        " VALUES ('', ?, ?, ?, ?, 'running', NULL, ?, ?, 0, ?, ?)",
        (thread_id, request_id, digest, prompt, attempts, run_id, now, now),
    )


def _commit(
    execute: Execute,
    *,
    turn: _Turn,
    kwargs: dict[str, Any],
    head: int,
    thread_id: str,
    run_id: str,
    request_id: str,
    copies: dict[int, int],
) -> None:
    """One commit's rows: the thread's head and lease, new blobs, the checkpoint, and at the run's end
    its record.

    `copies` maps the replay's blob ids to the bare thread's copies of them, written once each.
    """
    now = time.time()
    finish = kwargs["finish"]
    if finish is None:
        execute(
            f"UPDATE threads SET revision = ?, accepted = ?, update_time = ?, lease_expires = ? {_THREAD}",
            (head, resume_json(kwargs["accepted"]), now, now + kwargs["ttl"], thread_id),
        )
    else:
        execute(
            "UPDATE threads SET revision = ?, accepted = ?, update_time = ?, pending = ?, lease_run_id = NULL,"
            " lease_request_id = NULL, lease_replica = NULL, lease_expires = NULL, cancel_requested = ?"
            f" {_THREAD}",
            (head, resume_json(kwargs["accepted"]), now, requests_json(finish.pending), False, thread_id),
        )
    if kwargs["checkpoint"] is not None:
        row = list(turn.checkpoints[head])
        row[1:4] = run_id, request_id, now
        for blob in dict.fromkeys(row[4:6]):
            if blob in turn.blobs and blob not in copies:
                owner, base_id, *rest = turn.blobs[blob]
                (copies[blob],) = execute(
                    f"INSERT INTO blobs ({_BLOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (owner, copies.get(base_id, base_id), *rest),
                ).fetchone()
        row[4:6] = copies.get(row[4], row[4]), copies.get(row[5], row[5])
        execute(
            f"INSERT INTO checkpoints (namespace, thread_id, revision, {_CHECKPOINT_COLUMNS})"
            " VALUES ('', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (thread_id, head, *row),
        )
    if finish is not None:  # the store writes a run's record at its Begin and its end only
        execute(
            f"UPDATE runs SET committed_revision = ?, update_time = ?, status = ?, outcome = ? {_THREAD}"
            " AND request_id = ?",
            (head, now, finish.status, end_json(finish.outcome), thread_id, request_id),
        )


def _copy_thread(bare: _Bare, source: str, copy: str) -> None:
    """A bare thread: the replay thread's row under another ID (set-up, not measured)."""
    bare.transaction(
        lambda execute: execute(
            f"INSERT INTO threads (namespace, thread_id, {_THREAD_COLUMNS})"
            f" SELECT namespace, ?, {_THREAD_COLUMNS} FROM threads {_THREAD}",
            (copy, source),
        )
    )


def _footprint(bare: _Bare, thread_id: str) -> list[Any]:
    """What a thread's turns wrote: checkpoints after the first, the bytes of their blobs, run records."""
    mine = f"FROM checkpoints {_THREAD} AND revision > 1"
    queries = [
        (f"SELECT count(*) {mine}", (thread_id,)),
        (
            "SELECT count(*), coalesce(sum(length(data)), 0) FROM blobs"
            f" WHERE id IN (SELECT history_blob {mine} UNION SELECT rest_blob {mine})",
            (thread_id, thread_id),
        ),
        (f"SELECT count(*), coalesce(sum(length(outcome)), 0) FROM runs {_THREAD}", (thread_id,)),
    ]
    return [tuple(bare.execute(sql, params).fetchone()) for sql, params in queries]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


async def store_cost_section(kind: StoreKind, location: str, *, turns: int) -> dict[str, Any]:
    """`turns` measured rounds (plus a warm-up) of a recorded turn, store against bare, on `location`."""
    database = await open_database(kind, location)
    store = ThreadStore(database, replica="bench-" + uuid.uuid4().hex[:8])
    sent = [0]

    @event.listens_for(database.engine, "before_cursor_execute")
    def _count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        sent[0] += not statement.lstrip().upper().startswith(_TRANSACTION)

    bare = _Bare(kind, location)
    try:
        recorded = await _record(store, turns + 1)
        start: Head = next(kw["base"] for name, _a, kw in recorded[0] if name == "commit")
        thread_id = "store-" + uuid.uuid4().hex
        await store.create(
            thread_id,
            agent="scenario",
            thread_labels={},
            checkpoint=NewCheckpoint(
                "imported",
                start.parts,
                pending=None,
                remaining=None,
                client_tools=start.checkpoint.client_tools,
            ),
            accepted=None,
        )
        created = await store.thread(thread_id)
        assert created is not None
        head = await store.head(created)  # the head a server turn finds cached
        bare_id = "bare-" + uuid.uuid4().hex
        _copy_thread(bare, thread_id, bare_id)
        seen = {head.checkpoint.history_blob, head.checkpoint.rest_blob}
        copies: dict[int, int] = {}
        rounds: list[dict[str, float]] = []
        written: list[_Turn] = []
        for calls in recorded:
            before = head.checkpoint.revision
            wall, cpu, count = time.perf_counter(), time.process_time(), sent[0] + Statement.executed
            head, request_id = await _replay(store, calls, thread_id, head)
            store_wall, store_cpu = time.perf_counter() - wall, time.process_time() - cpu
            store_statements = sent[0] + Statement.executed - count
            turn = _written(bare, calls, thread_id, request_id, before, seen)
            wall, cpu, count = time.perf_counter(), time.process_time(), bare.statements
            _bare_turn(bare, turn, bare_id, store.replica, copies)
            bare_wall, bare_cpu = time.perf_counter() - wall, time.process_time() - cpu
            rounds.append(
                {
                    "store_wall": store_wall,
                    "store_cpu": store_cpu,
                    "store_statements": store_statements,
                    "bare_wall": bare_wall,
                    "bare_cpu": bare_cpu,
                    "bare_statements": bare.statements - count,
                }
            )
            written.append(turn)
        same_rows = _footprint(bare, thread_id) == _footprint(bare, bare_id)
    finally:
        bare.close()
        store.close()
        await database.close()
    measured, turn = rounds[1:], written[-1]
    names = [name for name, _a, _k in turn.calls]

    def ms(key: str) -> float:
        return round(_median([r[key] for r in measured]) * 1e3, 3)

    wall_ratio = _median([r["store_wall"] / r["bare_wall"] for r in measured])
    cpu_ratio = _median([r["store_cpu"] / r["bare_cpu"] for r in measured if r["bare_cpu"] > 0])
    return {
        "store": kind,
        "turns": len(measured),
        "store_calls_per_turn": {name: names.count(name) for name in dict.fromkeys(names)},
        "write_transactions_per_turn": sum(name in ("begin", "commit", "renew") for name in names),
        "checkpoints_per_turn": len(turn.checkpoints),
        "blob_bytes_per_turn": turn.blob_bytes,
        "bare_wrote_the_same_rows": same_rows,
        "store_statements_per_turn": _median([r["store_statements"] for r in measured]),
        "bare_statements_per_turn": _median([r["bare_statements"] for r in measured]),
        "store_ms_per_turn": ms("store_wall"),
        "bare_ms_per_turn": ms("bare_wall"),
        "store_cpu_ms_per_turn": ms("store_cpu"),
        "bare_cpu_ms_per_turn": ms("bare_cpu"),
        "store_over_bare": round(wall_ratio, 4),
        "store_cpu_over_bare_cpu": round(cpu_ratio, 4),
    }
