"""The thread store's tables (SQLAlchemy Core), as the latest migration leaves them.

One layer for SQLite and PostgreSQL (THREADS §6): portable types only, times as seconds since the epoch
read from the database's own clock, and a `namespace` column (always "" today) in every key, the room a
tenant key needs later. Migrations (`harness/threads/migrations`) create these tables; this module only
describes them for queries.
"""

from __future__ import annotations

from sqlalchemy import (
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
    "labels",
    "metadata",
    "runs",
    "settings",
    "threads",
)

SCHEMA_REVISION = "0002"
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
)
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
)
Index("runs_by_run_id", runs.c.namespace, runs.c.thread_id, runs.c.run_id)

settings = Table(
    "store_settings",
    metadata,
    # The store's own, not a tenant's: no namespace.
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

PAGE_TOKEN_KEY = "page_token_key"
"""The `settings` row holding the key of the store's page tokens (hex), made by migration 0002."""
