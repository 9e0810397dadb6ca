"""Dispatch intents (LIVE §5.2): the durable record that tells a call that never started from one that may have.

A row per `(thread, call_id)`: *issued* when a commit first holds the response that made the call,
*dispatched* once its holder is about to start the tool (written, durably, before it does). After a crash
a call with an issued row and no dispatched one is known not started, so the next run dispatches it as
new (SPEC §2.5.8) instead of giving it the unknown result.

That claim holds only while every holder since the row was written gated its tools. `threads.intents_fence`
is the fence under which the thread's rows are vouched for: each write of this version that takes a new
fence carries it over when it equals the fence replaced (`new_fence`), and otherwise first voids every issued
row (marks it dispatched: "may have started"), since a holder that did not gate (an older replica, or one
with `--dispatch-intents off`, which sets it NULL) changed the fence in between. The statements are plain
SQL both dialects run (`ON CONFLICT` is SQLite's and PostgreSQL's alike).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select, text

from ..deferred import DeferredToolRequests
from .queries import NAMESPACE, key
from .records import ThreadRow
from .schema import dispatch_intents
from .statements import Statement

__all__ = (
    "IntentCall",
    "carry_over",
    "dispatch",
    "fresh_fence",
    "issue",
    "new_fence",
    "not_started",
)


@dataclass(frozen=True, slots=True)
class IntentCall:
    """A call of a `function` or `unapproved` tool that a commit records."""

    call_id: str
    tool_name: str
    retryable: bool


_COLUMNS = (
    "namespace, thread_id, call_id, state, tool_name, retryable, run_id, revision, create_time, dispatch_time"
)
_VALUES = ":namespace, :thread_id, :call_id, :state, :tool_name, :retryable, :run_id, :revision, :now, :dispatched_at"

_ISSUE = Statement(
    text(
        f"INSERT INTO dispatch_intents ({_COLUMNS}) VALUES ({_VALUES})"
        " ON CONFLICT (namespace, thread_id, call_id) DO NOTHING"
    )
)
"""An issued row; a call ID the thread already has keeps its row (a dispatched one stays so)."""
_DISPATCH = Statement(
    text(
        f"INSERT INTO dispatch_intents ({_COLUMNS}) VALUES ({_VALUES})"
        " ON CONFLICT (namespace, thread_id, call_id)"
        " DO UPDATE SET state = 'dispatched', dispatch_time = :now, run_id = :run_id"
    )
)
"""A dispatched row, whether or not it was issued first."""
_VOID = Statement(
    text(
        "UPDATE dispatch_intents SET state = 'dispatched', dispatch_time = :now"
        " WHERE namespace = :namespace AND thread_id = :thread_id AND state = 'issued'"
    )
)
"""Every issued row of a thread voided: nothing vouches for them any more."""
_ISSUED = Statement(
    select(dispatch_intents.c.call_id).where(
        dispatch_intents.c.namespace == bindparam("namespace"),
        dispatch_intents.c.thread_id == bindparam("thread_id"),
        dispatch_intents.c.state == "issued",
    )
)


def fresh_fence() -> str:
    """A new fence: a random 128-bit token (`threads.fence`)."""
    return secrets.token_hex(16)


def new_fence(conn: Connection, thread: ThreadRow, now: float, *, enabled: bool) -> dict[str, Any]:
    """The columns of a write that takes a new fence on `thread` (as read, its row taken by the write):
    the fence, and `intents_fence` carried over, or restarted after voiding the rows it no longer
    vouches for; NULL when this replica does not gate (`enabled` False)."""
    fence = fresh_fence()
    if not enabled:
        return {"fence": fence, "intents_fence": None}
    if thread.intents_fence != thread.fence:
        _VOID.run(conn, {**key(thread.thread_id), "now": now})
    return {"fence": fence, "intents_fence": fence}


def _rows(
    thread_id: str, calls: Sequence[IntentCall], *, state: str, run_id: str, revision: int, now: float
) -> list[dict[str, Any]]:
    return [
        {
            "namespace": NAMESPACE,
            "thread_id": thread_id,
            "call_id": call.call_id,
            "state": state,
            "tool_name": call.tool_name,
            "retryable": call.retryable,
            "run_id": run_id,
            "revision": revision,
            "now": now,
            "dispatched_at": now if state == "dispatched" else None,
        }
        for call in calls
    ]


def issue(
    conn: Connection, thread_id: str, calls: Sequence[IntentCall], *, run_id: str, revision: int, now: float
) -> None:
    """Issued rows for the calls of a response the commit at `revision` first holds."""
    _ISSUE.run_many(conn, _rows(thread_id, calls, state="issued", run_id=run_id, revision=revision, now=now))


def dispatch(
    conn: Connection, thread_id: str, calls: Sequence[IntentCall], *, run_id: str, revision: int, now: float
) -> None:
    """The calls are about to start (the holder's gate; its fence checked by the caller)."""
    _DISPATCH.run_many(
        conn, _rows(thread_id, calls, state="dispatched", run_id=run_id, revision=revision, now=now)
    )


def not_started(
    conn: Connection, thread: ThreadRow, call_ids: Collection[str] | None = None
) -> frozenset[str]:
    """The calls (of `call_ids`; None: any) known never to have started: issued, not dispatched,
    vouched for by the thread's `intents_fence` (as `thread` was read in this transaction). Empty when
    the chain is broken. The core only looks at the pending calls among them."""
    if thread.intents_fence is None or thread.intents_fence != thread.fence:
        return frozenset()
    issued = frozenset(row.call_id for row in _ISSUED.run(conn, key(thread.thread_id)))
    return issued if call_ids is None else issued & frozenset(call_ids)


_COPY = Statement(
    text(
        f"INSERT INTO dispatch_intents ({_COLUMNS})"
        " SELECT namespace, :target, call_id, state, tool_name, retryable, run_id, :revision, :now, dispatch_time"
        " FROM dispatch_intents WHERE namespace = :namespace AND thread_id = :thread_id AND call_id = :call_id"
    )
)


def carry_over(
    conn: Connection,
    target: ThreadRow,
    pending: DeferredToolRequests | None,
    *,
    source: ThreadRow | None,
    forked: bool,
    now: float,
) -> None:
    """The intents of a new thread's pending batch (LIVE §5.2): an import's approvals are issued (the
    host says they are pending); a fork (`forked`) copies its `source`'s rows for them, as they are,
    when the source vouches for its rows (a broken chain, or a source gone, copies nothing: no row
    claims nothing)."""
    if pending is None or target.intents_fence is None:
        return
    approvals = pending.approvals
    if not forked:
        calls = [IntentCall(item.tool_call_id, item.target_call.tool_name, False) for item in approvals]
        issue(conn, target.thread_id, calls, run_id="", revision=1, now=now)
        return
    if source is None or source.intents_fence is None or source.intents_fence != source.fence:
        return
    _COPY.run_many(
        conn,
        [
            {
                **key(source.thread_id),
                "target": target.thread_id,
                "call_id": call_id,
                "revision": 1,
                "now": now,
            }
            for call_id in pending.tool_call_ids()
        ],
    )
