"""Every statement of the thread store, named for what it does (compiled and run by `statements`).

Parameters are named for what they carry: a column's own name for a value written to it; in a WHERE
clause `namespace` and `thread_id` (a thread's key, `key()`), `request_id`, `run_id`, `revision`,
`now` (the store's time, read in the transaction), and `expected_revision` / `expected_fence` for a
compare-and-set on what the caller read.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    BigInteger,
    Float,
    Table,
    Text,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    text,
    update,
)

from .kinds import ThreadStatus
from .notify import THREAD_CHANNEL
from .schema import blobs, checkpoints, dispatch_intents, labels, runs, threads
from .statements import Statement, StatementFamily

__all__ = (
    "CANCEL_UNFINISHED_RUN",
    "CLOSE_UNFINISHED_RUN",
    "COLLECT_BLOBS",
    "COMMIT_HEAD",
    "DELETE_THREAD",
    "GATE_THREAD",
    "INSERT_BLOB",
    "INSERT_CHECKPOINT",
    "INSERT_LABEL",
    "INSERT_RUN",
    "INSERT_THREAD",
    "LEASE_RELEASED",
    "LIST_THREADS",
    "LOCK_THREAD",
    "MOVE_SWEEP",
    "NAMESPACE",
    "NOTIFY_CANCEL",
    "NOW",
    "NOW_RELAXED",
    "RENEW_LEASE",
    "SELECT_BLOB_CHAIN",
    "SELECT_CHECKPOINT",
    "SELECT_CHECKPOINTS",
    "SELECT_DUE",
    "SELECT_QUEUE",
    "SELECT_RUN",
    "SELECT_RUNS_BY_RUN_ID",
    "SELECT_RUNS_WITH_ATTEMPT",
    "SELECT_THREAD",
    "START_QUEUED",
    "TAKE_THREAD",
    "UPDATE_RUN",
    "UPDATE_THREAD",
    "ListingShape",
    "key",
    "released",
)

NAMESPACE = ""
"""The one namespace of this milestone; the column is the room a tenant key needs later."""


def key(thread_id: str) -> dict[str, str]:
    """The parameters of a thread's key, as every statement on one thread takes them."""
    return {"namespace": NAMESPACE, "thread_id": thread_id}


def _keyed(table: Table) -> tuple[Any, Any]:
    return table.c.namespace == bindparam("namespace"), table.c.thread_id == bindparam("thread_id")


def _set(names: tuple[str, ...]) -> dict[str, Any]:
    return {name: bindparam(name) for name in names}


_THREAD_NOTE = func.pg_notify(
    bindparam("note_channel", THREAD_CHANNEL),
    cast(
        func.json_build_array(
            cast(bindparam("thread_id"), Text),
            func.coalesce(threads.c.change_seq, 0),
            cast(bindparam("run_id"), Text),
            cast(bindparam("last_sequence"), BigInteger),
        ),
        Text,
    ),
).label("noted")
"""PostgreSQL: `notify_thread`'s note, `[thread_id, change_seq, run_id, last_sequence]`, as a column."""

_SWEEP_WITH_LEASE = case((threads.c.sweep_after.is_(None), None), else_=bindparam("lease_expires"))
"""A renewal moves the server's own work on the thread (`sweep_after`) with the lease, if it has any."""


_FIRST_WAITING = exists().where(
    runs.c.namespace == threads.c.namespace,
    runs.c.thread_id == threads.c.thread_id,
    runs.c.status == "queued",
    runs.c.queue_kind != "enqueued",
)
"""An interrupting request waits in the thread's queue: it starts whatever the head is (LIVE §4.2)."""
_SWEEP_QUEUE = case(
    (threads.c.queue_length <= 0, None),
    (_FIRST_WAITING, cast(bindparam("queue_now"), Float)),
    else_=cast(bindparam("sweep_queue"), Float),
)
"""A lease's end makes the queue's head due: at `queue_now` (the store's now) when an interrupting
request waits, else at `sweep_queue` (now, or NULL while the new head is suspended, LIVE §4.2); no
queue, no work."""


_SWEEP_BEGIN = case(
    (threads.c.queue_length > 0, bindparam("lease_expires")), else_=bindparam("sweep_begin", type_=Float)
)
"""A Begin makes the server's work due at the lease's expiry when a queue waits behind it (should its
holder die, the queue goes on), else `sweep_begin` (the expiry for a detached request, or NULL)."""


def _update(names: tuple[str, ...]) -> dict[str, Any]:
    """An update of a thread's columns `names`, each from its parameter; `change_seq` grows by one;
    no column: `sweep_with_lease` moves `sweep_after` to `lease_expires` unless it is NULL,
    `sweep_queue` sets it to its parameter if requests wait in the queue, `sweep_begin` is a Begin's
    (`_SWEEP_BEGIN`), `queue_push` adds one to the
    queue (its length and its allocator), `queue_pop` takes one off."""
    values: dict[str, Any] = {}
    for name in names:
        if name == "change_seq":
            values[name] = threads.c.change_seq + 1
        elif name == "sweep_with_lease":
            values["sweep_after"] = _SWEEP_WITH_LEASE
        elif name == "sweep_queue":
            values["sweep_after"] = _SWEEP_QUEUE
        elif name == "sweep_begin":
            values["sweep_after"] = _SWEEP_BEGIN
        elif name == "queue_push":
            values["queue_length"] = threads.c.queue_length + 1
            values["queue_next"] = threads.c.queue_next + 1
        elif name == "queue_pop":
            values["queue_length"] = threads.c.queue_length - 1
        elif name in ("queue_now", "notify"):
            continue  # a parameter of `sweep_queue`, a column returned: no column set
        else:
            values[name] = bindparam(name)
    return values


NOW = Statement(text("SELECT extract(epoch from clock_timestamp())::float8"))
NOW_RELAXED = Statement(
    text(
        "SELECT extract(epoch from clock_timestamp())::float8, set_config('synchronous_commit', 'off', true)"
    )
)
"""`NOW` of a transaction of the event log's appends: its commit does not wait for the WAL flush (the next
durable commit flushes it, LIVE §2.2)."""
"""PostgreSQL's clock, which all replicas share, read at the start of every transaction (SQLite's is
this host's own: a file is only shared by processes on one host)."""

LEASE_RELEASED: Mapping[str, Any] = MappingProxyType(
    {
        "lease_run_id": None,
        "lease_request_id": None,
        "lease_replica": None,
        "lease_expires": None,
        "cancel_requested": False,
        "sweep_after": None,
    }
)
"""The lease columns of a thread no run holds: what a run's end, a rollback and a cancel write (no work
is left for the server either)."""


def released(now: float, *, suspended: bool, claim: float | None = None) -> dict[str, Any]:
    """`LEASE_RELEASED`, but a waiting queue's head due `now` (or, `claim`, held until then by the
    replica that writes this, which starts it itself); while the thread is `suspended`, only an
    interrupting one (an ENQUEUED head waits for the answers, LIVE §4.2)."""
    values = {name: value for name, value in LEASE_RELEASED.items() if name != "sweep_after"}
    due = now if claim is None else claim
    return {**values, "sweep_queue": None if suspended else due, "queue_now": due}


# -- threads -------------------------------------------------------------------------------------------

SELECT_THREAD = Statement(select(threads).where(*_keyed(threads)))
LOCK_THREAD = Statement(select(threads).where(*_keyed(threads)).with_for_update())
"""The thread's row, locked to the end of the transaction on PostgreSQL (SQLite's writes take turns)."""
INSERT_THREAD = Statement(insert(threads).values(_set(tuple(threads.c.keys()))))
INSERT_LABEL = Statement(insert(labels).values(_set(tuple(labels.c.keys()))))
TAKE_THREAD = StatementFamily[tuple[str, ...]](
    lambda names: (
        update(threads)
        .where(
            *_keyed(threads),
            threads.c.revision == bindparam("expected_revision"),
            threads.c.fence == bindparam("expected_fence"),
            or_(threads.c.lease_expires.is_(None), threads.c.lease_expires <= bindparam("now")),
        )
        .values(_update(names))
        .returning(*threads.c)
    )
)
"""The compare-and-set of a write from outside a run (Begin, a rollback, a delete): the thread as read,
its lease free; sets the columns `names` and returns the row as written."""
GATE_THREAD = Statement(
    update(threads)
    .where(*_keyed(threads), threads.c.fence == bindparam("expected_fence"))
    .values(fence=threads.c.fence)
    .returning(threads.c.revision)
)
"""A holder's fence check that takes the thread row first (a dispatch gate's write, LIVE §5.2)."""
COMMIT_HEAD = StatementFamily[tuple[str, ...]](
    lambda names: (
        update(threads)
        .where(
            *_keyed(threads),
            threads.c.fence == bindparam("expected_fence"),
            threads.c.revision == bindparam("expected_revision"),
        )
        .values(_update(names))
        .returning(
            threads.c.incarnation, threads.c.sweep_after, *((_THREAD_NOTE,) if "notify" in names else ())
        )
    )
)
"""A lease holder's fenced commit: sets the columns `names`; returns the incarnation (no row: fenced out).
PostgreSQL: `notify` (no column) sends the transaction's `threadline_thread` note too, its change sequence
as this statement leaves it (`logstore.notify_thread`; a round trip a commit fewer)."""
RENEW_LEASE = Statement(
    update(threads)
    .where(
        *_keyed(threads),
        threads.c.fence == bindparam("expected_fence"),
        threads.c.lease_run_id.is_not(None),
        threads.c.lease_expires > bindparam("now"),  # an expired lease is left to expire (THREADS §4 step 2)
    )
    .values(lease_expires=bindparam("lease_expires"), sweep_after=_SWEEP_WITH_LEASE)
    .returning(
        threads.c.cancel_requested,
        select(runs.c.detached)
        .where(
            runs.c.namespace == threads.c.namespace,
            runs.c.thread_id == threads.c.thread_id,
            runs.c.request_id == threads.c.lease_request_id,
        )
        .scalar_subquery()
        .label("detached"),
    )
)
"""A holder's renewal; returns whether a cancel was asked and whether its request is server-driven now
(a `StartThreadRun` retry may have made it so)."""
SELECT_DUE = Statement(
    select(threads.c.thread_id, threads.c.sweep_after)
    .where(threads.c.namespace == bindparam("namespace"), threads.c.sweep_after <= bindparam("now"))
    .order_by(threads.c.sweep_after)
    .limit(bindparam("limit"))
)
"""The threads whose server-side work is due (LIVE §3.2), oldest first (index `threads_by_sweep`)."""
MOVE_SWEEP = Statement(
    update(threads)
    .where(*_keyed(threads), threads.c.sweep_after == bindparam("expected_sweep_after"))
    .values(sweep_after=bindparam("sweep_after"))
    .returning(threads.c.thread_id)
)
"""A sweeper's compare-and-set of `sweep_after` from what it read (a claim, or what it decided): no
`change_seq` bump, nothing a watcher sees."""
UPDATE_THREAD = StatementFamily[tuple[str, ...]](
    lambda names: update(threads).where(*_keyed(threads)).values(_update(names))
)
"""Sets the columns `names` of a thread this transaction locked (`LOCK_THREAD`)."""
NOTIFY_CANCEL = Statement(text("SELECT pg_notify(:channel, :payload)"))
"""PostgreSQL: tells the replica holding a run to cancel it, once this transaction commits."""

ListingShape = tuple[int, ThreadStatus | None, bool]
"""A listing's label filters (how many), status filter, and whether it continues after a position."""


def _listing(shape: ListingShape) -> Any:
    filters, status, paged = shape
    t = threads.c
    head = checkpoints.c
    query = (
        select(threads, *(column.label(f"head_{column.name}") for column in checkpoints.c))
        .join(
            checkpoints,
            and_(head.namespace == t.namespace, head.thread_id == t.thread_id, head.revision == t.revision),
        )
        .where(t.namespace == bindparam("namespace"))
    )
    for i in range(filters):
        query = query.where(
            exists().where(
                labels.c.namespace == t.namespace,
                labels.c.thread_id == t.thread_id,
                labels.c.key == bindparam(f"label_key_{i}"),
                labels.c.value == bindparam(f"label_value_{i}"),
            )
        )
    running = and_(t.lease_expires.is_not(None), t.lease_expires > bindparam("now"))
    if status == "running":
        query = query.where(running)
    elif status == "suspended":
        query = query.where(~running, t.pending.is_not(None))
    elif status == "idle":
        query = query.where(~running, t.pending.is_(None))
    if paged:
        query = query.where(
            or_(
                t.update_time < bindparam("after_time"),
                and_(t.update_time == bindparam("after_time"), t.thread_id > bindparam("after_thread")),
            )
        )
    return query.order_by(t.update_time.desc(), t.thread_id).limit(bindparam("limit"))


LIST_THREADS = StatementFamily[ListingShape](_listing)
"""A page of threads, newest `update_time` first, then `thread_id`, each with its head checkpoint (its
columns prefixed `head_`), in one statement: one snapshot on PostgreSQL too."""

# -- run records ---------------------------------------------------------------------------------------

_COMMITTED = func.coalesce(
    select(func.max(checkpoints.c.revision))
    .where(
        checkpoints.c.namespace == runs.c.namespace,
        checkpoints.c.thread_id == runs.c.thread_id,
        checkpoints.c.revision > func.coalesce(runs.c.begin_revision, 0),
        checkpoints.c.request_id == runs.c.request_id,
    )
    .correlate(runs)
    .scalar_subquery(),
    runs.c.committed_revision,
)
COMMITTED_REVISION = case((runs.c.status == "running", _COMMITTED), else_=runs.c.committed_revision)
"""A record's `committed_revision`: while it runs, its last checkpoint (a range of the checkpoints' key
after its Begin), so the commits of a run write no run record; the column holds it from the run's end on
(every statement that ends a record writes it, `_ENDING`)."""


def _select_runs() -> Any:
    return select(
        *(COMMITTED_REVISION.label(c.name) if c.name == "committed_revision" else c for c in runs.c)
    )


def _ending(names: tuple[str, ...]) -> dict[str, Any]:
    """`_set(names)`, and with a new `status` the record's `committed_revision` kept in its column."""
    values = _set(names)
    if "status" in names and "committed_revision" not in names:
        values["committed_revision"] = COMMITTED_REVISION
    return values


SELECT_RUN = Statement(_select_runs().where(*_keyed(runs), runs.c.request_id == bindparam("request_id")))
SELECT_RUNS_BY_RUN_ID = Statement(_select_runs().where(*_keyed(runs), runs.c.run_id == bindparam("run_id")))
SELECT_RUNS_WITH_ATTEMPT = Statement(
    _select_runs().where(*_keyed(runs), runs.c.attempts.contains(bindparam("run_id")))
)
"""Records whose attempts mention `run_id` (an earlier attempt's: rare, so searched, not indexed)."""
INSERT_RUN = Statement(insert(runs).values(_set(tuple(runs.c.keys()))))
UPDATE_RUN = StatementFamily[tuple[str, ...]](
    lambda names: (
        update(runs).where(*_keyed(runs), runs.c.request_id == bindparam("request_id")).values(_ending(names))
    )
)
SELECT_QUEUE = Statement(
    select(runs.c.request_id, runs.c.run_id, runs.c.queue_kind, runs.c.create_time)
    .where(*_keyed(runs), runs.c.status == "queued")
    .order_by(case((runs.c.queue_kind == "enqueued", 1), else_=0), runs.c.queue_seq)
)
"""A thread's queue in run order (LIVE §4.1): interrupting requests first, then ENQUEUED ones, each in
acceptance order (index `runs_by_queue`)."""
START_QUEUED = Statement(
    update(runs)
    .where(*_keyed(runs), runs.c.request_id == bindparam("request_id"), runs.c.status == "queued")
    .values(_set(("status", "attempts", "begin_revision", "rolled_back", "update_time")))
    .returning(runs.c.request_id)
)
"""A queued record leaves the queue only by this compare-and-set on its own status (LIVE §4.8): a cancel
that won the race leaves the start writing nothing."""
CANCEL_UNFINISHED_RUN = Statement(
    update(runs)
    .where(*_keyed(runs), runs.c.request_id == bindparam("request_id"), runs.c.status == "running")
    .values(_ending(("status", "outcome", "update_time")))
)
"""Closes `cancelled`, with its outcome, a record an INTERRUPT supersedes (its holder gone, LIVE §4.1)."""
CLOSE_UNFINISHED_RUN = Statement(
    update(runs)
    .where(*_keyed(runs), runs.c.request_id == bindparam("request_id"), runs.c.status == "running")
    .values(_ending(("status", "update_time")))
)
"""Closes a record its run left `running` (its lease expired, or another request took the thread)."""

# -- checkpoints and their data ------------------------------------------------------------------------------

SELECT_CHECKPOINT = Statement(
    select(checkpoints).where(*_keyed(checkpoints), checkpoints.c.revision == bindparam("revision"))
)
SELECT_CHECKPOINTS = StatementFamily[bool](
    lambda paged: (
        select(checkpoints)
        .where(*_keyed(checkpoints), *([checkpoints.c.revision < bindparam("before")] if paged else []))
        .order_by(checkpoints.c.revision.desc())
        .limit(bindparam("limit"))
    )
)
"""A page of a thread's checkpoints, newest first; `[True]`: only revisions below `before`."""
INSERT_CHECKPOINT = Statement(insert(checkpoints).values(_set(tuple(checkpoints.c.keys()))))
INSERT_BLOB = Statement(
    insert(blobs)
    .values(_set(("owner", "base_id", "keep", "data", "size", "chain_bytes", "sha256")))
    .returning(blobs.c.id)
)
SELECT_BLOB_CHAIN = Statement(
    text(
        "WITH RECURSIVE chain(id, base_id, keep, data, sha256, chain_bytes, depth) AS ("
        " SELECT id, base_id, keep, data, sha256, chain_bytes, 0 FROM blobs WHERE id = :id"
        " UNION ALL"
        " SELECT b.id, b.base_id, b.keep, b.data, b.sha256, b.chain_bytes, c.depth + 1"
        " FROM blobs b JOIN chain c ON b.id = c.base_id)"
        " SELECT keep, data, sha256, chain_bytes, depth FROM chain ORDER BY depth DESC"
    )
)
"""Blob `id` and the bases it is a delta on, root first."""
COLLECT_BLOBS = Statement(
    text(
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
)
"""Deletes the blobs of deleted threads (no incarnation owns them) that no checkpoint still reaches,
directly or as a delta's base."""

DELETE_THREAD = tuple(
    Statement(delete(table).where(*_keyed(table)))
    for table in (labels, runs, checkpoints, dispatch_intents, threads)
)
"""A thread's rows, table by table (its blobs go with `COLLECT_BLOBS`)."""
