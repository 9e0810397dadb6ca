"""History blobs in the database: written as deltas, rebuilt and checked on read, collected once unreached.

The delta format and its planning are `blobs`; this module runs them on a transaction's connection
(THREADS §2 "History storage").
"""

from __future__ import annotations

import hashlib
import logging

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from .blobs import BlobRef, plan_delta, rebuild
from .queries import COLLECT_BLOBS, INSERT_BLOB, SELECT_BLOB_CHAIN
from .worker import nested, store_unavailable

__all__ = ("collect_blobs", "read_blob", "write_blob")

LOGGER = logging.getLogger("threadline.threads")


def read_blob(conn: Connection, blob_id: int) -> BlobRef:
    """Blob `blob_id` rebuilt from its chain; a chain broken or not matching its SHA-256 is `store_unavailable`."""
    rows = SELECT_BLOB_CHAIN.run(conn, {"id": blob_id})
    if not rows:
        raise store_unavailable(f"blob {blob_id} is missing")
    data = rebuild([(row.keep, bytes(row.data)) for row in rows])
    top = rows[-1]
    if hashlib.sha256(data).hexdigest() != top.sha256:
        raise store_unavailable(f"blob {blob_id} does not match its sha256")
    return BlobRef(blob_id, data, int(top.chain_bytes))


def write_blob(conn: Connection, owner: str, data: bytes, base: BlobRef | None) -> BlobRef:
    """`data` as a delta on `base` (or whole), owned by the thread incarnation `owner`; `base` itself
    when `data` is unchanged."""
    if base is not None and base.data == data:
        return base
    delta = plan_delta(data, base)
    (row,) = INSERT_BLOB.run(
        conn,
        {
            "owner": owner,
            "base_id": delta.base_id,
            "keep": delta.keep,
            "data": delta.tail,
            "size": len(data),
            "chain_bytes": delta.chain_bytes,
            "sha256": delta.sha256,
        },
    )
    return BlobRef(int(row.id), data, delta.chain_bytes, delta.hashed)


def collect_blobs(conn: Connection, *, replica: str) -> None:
    """Delete the data of deleted threads that no checkpoint of any thread still reaches.

    A fork refers to its source's data, so a deleted thread's blobs may outlive it; they go once the
    last thread reaching them (directly or as a delta's base) is deleted too.
    """
    try:
        with nested(conn):
            COLLECT_BLOBS.run(conn, {})
    except IntegrityError:
        # A fork committed meanwhile refers to some of it: collected by a later delete instead.
        LOGGER.info("thread_data_kept", extra={"fields": {"replica": replica}})
