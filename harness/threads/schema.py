"""The thread store's tables (SQLAlchemy Core), as the latest migration leaves them.

One layer for SQLite and PostgreSQL (THREADS §6): portable types only, times as seconds since the epoch
read from the database's own clock, and a `namespace` column (always "" today) in every key, the room a
tenant key needs later. Migrations (`harness/threads/migrations`) create these tables; this module only
describes them for queries.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = (
    "PAGE_TOKEN_KEY",
    "SCHEMA_REVISION",
    "blobs",
    "checkpoints",
    "dispatch_intents",
    "labels",
    "metadata",
    "run_events",
    "run_logs",
    "runs",
    "settings",
    "threads",
)

SCHEMA_REVISION = "0003"
"""The Alembic revision these tables correspond to: a database at any other head refuses to serve."""

metadata = MetaData()

threads = Table(
    "threads",
    metadata,
    Column("namespace", String(64), primary_key=True),
    Column("thread_id", String(256), primary_key=True),
    # A fresh id per creation: a thread deleted and created again never matches an old cache entry.
    Column("incarnation", String(32), nullable=False),
    Column("agent", String(256), nullable=False),
    Column("labels", Text, nullable=False),  # JSON object, as given
    Column("create_time", Float, nullable=False),
    Column("update_time", Float, nullable=False),
    Column("revision", Integer, nullable=False),
    Column("pending", Text),  # DeferredToolRequests JSON, set exactly while suspended
    Column("accepted", Text),  # the retained accepted DeferredToolResume JSON (remaining())
    # A random 128-bit token, new on every write that changes the head or the lease from outside the
    # holder's own commits; every commit compares it (THREADS §4 step 2).
    Column("fence", String(32), nullable=False),
    Column("lease_run_id", String(64)),
    Column("lease_request_id", String(256)),
    Column("lease_replica", String(64)),
    Column("lease_expires", Float),
    Column("cancel_requested", Boolean, nullable=False),
    Column("last_request_id", String(256)),  # the run record a recovery looks at
    # Grows with every write that changes what `Thread` shows (never a renewal): watchers compare it.
    Column("change_seq", BigInteger, nullable=False, server_default="0"),
    # The columns of LIVE §3-§5 (background runs, busy strategies, dispatch intents), made by 0003.
    Column("sweep_after", Float),
    Column("queue_length", Integer, nullable=False, server_default="0"),
    Column("queue_next", BigInteger, nullable=False, server_default="0"),
    Column("intents_fence", String(32)),
    Column("answered_request_id", String(256)),
    Column("answered_revision", Integer),
    Column("answered_how", String(16)),
)
Index("threads_by_sweep", threads.c.namespace, threads.c.sweep_after)
Index("threads_by_update", threads.c.namespace, threads.c.update_time, threads.c.thread_id)

labels = Table(
    "thread_labels",
    metadata,
    Column("namespace", String(64), primary_key=True),
    Column("thread_id", String(256), primary_key=True),
    Column("key", String(64), primary_key=True),
    Column("value", String(1024), nullable=False),
)
Index("labels_by_value", labels.c.namespace, labels.c.key, labels.c.value)

blobs = Table(
    "blobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("owner", String(32), nullable=False),  # the incarnation of the thread that wrote it
    # A delta: keep `keep` bytes of the base's data, then append `data`. No base: `data` is whole.
    Column("base_id", Integer, ForeignKey("blobs.id")),
    Column("keep", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("size", Integer, nullable=False),
    Column("chain_bytes", Integer, nullable=False),  # bytes read to rebuild it: at most 2 x size
    Column("sha256", String(64), nullable=False),
)
Index("blobs_by_owner", blobs.c.owner)
Index("blobs_by_base", blobs.c.base_id)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("namespace", String(64), primary_key=True),
    Column("thread_id", String(256), primary_key=True),
    Column("revision", Integer, primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("request_id", String(256), nullable=False),
    Column("create_time", Float, nullable=False),
    Column("history_blob", Integer, ForeignKey("blobs.id"), nullable=False),
    # The rest of the state's JSON, the history cut out at `history_at`; shared while unchanged.
    Column("rest_blob", Integer, ForeignKey("blobs.id"), nullable=False),
    Column("history_at", Integer, nullable=False),
    Column("pending", Text),
    Column("remaining", Text),
    Column("client_tools", Text, nullable=False),  # JSON list of client tool declarations
)
Index("checkpoints_by_history", checkpoints.c.history_blob)
Index("checkpoints_by_rest", checkpoints.c.rest_blob)

runs = Table(
    "runs",
    metadata,
    Column("namespace", String(64), primary_key=True),
    Column("thread_id", String(256), primary_key=True),
    Column("request_id", String(256), primary_key=True),
    Column("digest", String(64), nullable=False),
    Column("prompt", Text),  # the request's input as JSON; null = none
    Column("status", String(16), nullable=False),
    Column("outcome", Text),  # the terminal outcome or error as JSON, once finished
    Column("attempts", Text, nullable=False),  # JSON list: run_id, client tools, times, fence, revision
    Column("run_id", String(64), nullable=False),  # the last attempt's
    Column("committed_revision", Integer, nullable=False),  # the last revision any attempt committed
    Column("create_time", Float, nullable=False),
    Column("update_time", Float, nullable=False),
    Column("detached", Boolean, nullable=False, server_default="0"),
    Column("spec", Text),
    Column("begin_revision", Integer),
    Column("queue_seq", BigInteger),
    Column("queue_kind", String(16)),
    Column("rollback_of", String(256)),
    Column("rolled_back", Boolean, nullable=False, server_default="0"),
    Column("digest_parts", Text),
)
Index("runs_by_queue", runs.c.namespace, runs.c.thread_id, runs.c.queue_seq)
Index("runs_by_run_id", runs.c.namespace, runs.c.thread_id, runs.c.run_id)

run_logs = Table(
    "run_logs",
    metadata,
    Column("namespace", String(64), primary_key=True),
    Column("thread_id", String(256), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("request_id", String(256), nullable=False),
    Column("incarnation", String(32), nullable=False),
    Column("status", String(8), nullable=False),  # open | ended | lost; leaves `open` once
    Column("last_sequence", BigInteger, nullable=False),  # the last written event's; -1: none yet
    Column("result_sequence", BigInteger),  # the `result`'s, built from the run record when read
    Column("bytes", BigInteger, nullable=False),
    Column("create_time", Float, nullable=False),
    Column("end_time", Float),
)
"""One attempt's event log (LIVE §2): opened by the Begin that takes its lease."""
Index("run_logs_by_end", run_logs.c.status, run_logs.c.end_time)
Index("run_logs_by_create", run_logs.c.status, run_logs.c.create_time)

run_events = Table(
    "run_events",
    metadata,
    Column("namespace", String(64), primary_key=True),
    Column("thread_id", String(256), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("first_sequence", BigInteger, primary_key=True),
    Column("last_sequence", BigInteger, nullable=False),
    Column(
        "data", LargeBinary, nullable=False
    ),  # the write's events, each framed (`harness.threads.eventlog`)
)
"""The events of one log write, in order: many events are one row."""

dispatch_intents = Table(
    "dispatch_intents",
    metadata,
    Column("namespace", String(64), primary_key=True),
    Column("thread_id", String(256), primary_key=True),
    Column("call_id", String(256), primary_key=True),
    Column("state", String(16), nullable=False),
    Column("tool_name", String(256), nullable=False),
    Column("retryable", Boolean, nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("create_time", Float, nullable=False),
    Column("dispatch_time", Float),
)
"""LIVE §5.2 (made by 0003, written by the dispatch-intent work)."""
Index(
    "dispatch_intents_by_state",
    dispatch_intents.c.namespace,
    dispatch_intents.c.thread_id,
    dispatch_intents.c.state,
)

settings = Table(
    "store_settings",
    metadata,
    # The store's own, not a tenant's: no namespace.
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

PAGE_TOKEN_KEY = "page_token_key"
"""The `settings` row holding the key of the store's page tokens (hex), made by migration 0002."""
