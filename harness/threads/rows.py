"""Rows <-> the store's typed records (`records`): each JSON column decoded as it is read, encoded as written.

Both directions of each table sit side by side, so a column's stored form is written down once. The
forms are the core's own (`DeferredToolRequests.to_json`, `DeferredToolResume.to_json`,
`ThreadRunOutcome.to_json`) and `codec`'s (prompts, client tools); they are those the store has always
written, so rows written by earlier servers read the same. This runs in the store's worker threads,
never on the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..client_tools import ClientTool
from ..deferred import DeferredToolRequests, DeferredToolResume
from ..errors import HarnessError, RecordedRefusal
from .codec import client_tools_from_json, client_tools_json, prompt_from_json, prompt_json
from .kinds import FINISHED, RunRowStatus
from .outcome import ThreadRunOutcome
from .queries import NAMESPACE
from .records import Answered, Attempt, CheckpointRow, Lease, RunEnd, RunRow, ThreadRow

__all__ = (
    "attempts_json",
    "checkpoint_row",
    "checkpoint_values",
    "end_json",
    "requests_json",
    "resume_json",
    "run_row",
    "run_values",
    "thread_row",
    "thread_values",
)


# -- the core's batches ----------------------------------------------------------------------------------


def requests_json(requests: DeferredToolRequests | None) -> str | None:
    return None if requests is None else requests.to_json()


def _requests(data: str | None) -> DeferredToolRequests | None:
    return None if data is None else DeferredToolRequests.from_json(data)


def resume_json(resume: DeferredToolResume | None) -> str | None:
    return None if resume is None else resume.to_json()


def _resume(data: str | None) -> DeferredToolResume | None:
    return None if data is None else DeferredToolResume.from_json(data)


# -- threads ------------------------------------------------------------------------------------------


def thread_values(thread: ThreadRow) -> dict[str, Any]:
    """Every column of `thread` (a new one: `INSERT_THREAD`)."""
    lease = thread.lease
    return {
        "namespace": NAMESPACE,
        "thread_id": thread.thread_id,
        "incarnation": thread.incarnation,
        "agent": thread.agent,
        "labels": json.dumps(thread.labels, sort_keys=True),
        "create_time": thread.create_time,
        "update_time": thread.update_time,
        "revision": thread.revision,
        "pending": requests_json(thread.pending),
        "accepted": resume_json(thread.accepted),
        "fence": thread.fence,
        "lease_run_id": None if lease is None else lease.run_id,
        "lease_request_id": None if lease is None else lease.request_id,
        "lease_replica": None if lease is None else lease.replica,
        "lease_expires": None if lease is None else lease.expires,
        "cancel_requested": thread.cancel_requested,
        "last_request_id": thread.last_request_id,
        "change_seq": thread.change_seq,
        "sweep_after": thread.sweep_after,
        "intents_fence": thread.intents_fence,
        **_LATER_THREAD_COLUMNS,
    }


_LATER_THREAD_COLUMNS: dict[str, Any] = {
    "queue_length": 0,
    "queue_next": 0,
    "answered_request_id": None,
    "answered_revision": None,
    "answered_how": None,
}
"""LIVE §4-§5's columns of a new thread (migration 0003), at their defaults until those parts write them."""


def thread_row(row: Any, now: float) -> ThreadRow:
    """A `threads` row, read at the store's time `now`."""
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
        pending=_requests(row.pending),
        accepted=_resume(row.accepted),
        fence=row.fence,
        lease=lease,
        cancel_requested=bool(row.cancel_requested),
        last_request_id=row.last_request_id,
        now=now,
        change_seq=int(row.change_seq),
        sweep_after=None if row.sweep_after is None else float(row.sweep_after),
        queue_length=int(row.queue_length),
        queue_next=int(row.queue_next),
        intents_fence=row.intents_fence,
        answered=None
        if row.answered_request_id is None
        else Answered(row.answered_request_id, int(row.answered_revision or 0), row.answered_how),
    )


# -- checkpoints --------------------------------------------------------------------------------------


def checkpoint_values(checkpoint: CheckpointRow) -> dict[str, Any]:
    """Every column of `checkpoint` (`INSERT_CHECKPOINT`)."""
    return {
        "namespace": NAMESPACE,
        "thread_id": checkpoint.thread_id,
        "revision": checkpoint.revision,
        "kind": checkpoint.kind,
        "run_id": checkpoint.run_id,
        "request_id": checkpoint.request_id,
        "create_time": checkpoint.create_time,
        "history_blob": checkpoint.history_blob,
        "rest_blob": checkpoint.rest_blob,
        "history_at": checkpoint.history_at,
        "pending": requests_json(checkpoint.pending),
        "remaining": resume_json(checkpoint.remaining),
        "client_tools": client_tools_json(checkpoint.client_tools),
    }


def checkpoint_row(row: Any, prefix: str = "") -> CheckpointRow:
    """A `checkpoints` row; `prefix`: its columns are named so in `row` (a listing's `head_`)."""

    def column(name: str) -> Any:
        return getattr(row, prefix + name)

    return CheckpointRow(
        thread_id=column("thread_id"),
        revision=int(column("revision")),
        kind=column("kind"),
        run_id=column("run_id"),
        request_id=column("request_id"),
        create_time=float(column("create_time")),
        pending=_requests(column("pending")),
        remaining=_resume(column("remaining")),
        client_tools=_tools(column("client_tools")),
        history_blob=int(column("history_blob")),
        rest_blob=int(column("rest_blob")),
        history_at=int(column("history_at")),
    )


# -- run records ---------------------------------------------------------------------------------------


def run_values(
    record: RunRow, *, thread_id: str, now: float, begin_revision: int, queue_seq: int | None = None
) -> dict[str, Any]:
    """Every column of a new run record (`INSERT_RUN`), made at the store's time `now` on the head
    `begin_revision` (0 for a queued one: it begins later), `queue_seq` its place in the queue."""
    return {
        "namespace": NAMESPACE,
        "thread_id": thread_id,
        "request_id": record.request_id,
        "digest": record.digest,
        "prompt": prompt_json(record.prompt),
        "status": record.status,
        "outcome": None if record.status in ("running", "queued") else end_json(record.outcome),
        "attempts": attempts_json(record.attempts),
        "run_id": record.run_id,
        "committed_revision": record.committed_revision,
        "create_time": now,
        "update_time": now,
        "detached": record.detached,
        "spec": record.spec,
        "begin_revision": begin_revision,
        "queue_seq": queue_seq,
        "queue_kind": record.queue_kind,
        "rollback_of": record.rollback_of,
        "rolled_back": record.rolled_back,
        "digest_parts": None if record.digest_parts is None else json.dumps(record.digest_parts),
    }


def run_row(row: Any) -> RunRow:
    status: RunRowStatus = row.status
    return RunRow(
        request_id=row.request_id,
        digest=row.digest,
        prompt=prompt_from_json(row.prompt),
        status=status,
        outcome=_end(status, row.outcome),
        attempts=_attempts(row.attempts),
        run_id=row.run_id,
        committed_revision=int(row.committed_revision),
        begin_revision=int(row.begin_revision or 0),
        detached=bool(row.detached),
        spec=row.spec,
        queue_kind=row.queue_kind,
        rollback_of=row.rollback_of,
        rolled_back=bool(row.rolled_back),
        digest_parts=None if row.digest_parts is None else json.loads(row.digest_parts),
    )


def end_json(end: RunEnd) -> str:
    """A record's `outcome`: the outcome, `{"error": ...}` for an error a retry raises again, or `null`."""
    if isinstance(end, HarnessError):
        return json.dumps({"error": {"code": end.code.value, "message": end.message, "details": end.details}})
    if isinstance(end, RecordedRefusal):
        return json.dumps({"refusal": {"reason": end.reason, "message": end.message, "details": end.details}})
    return "null" if end is None else end.to_json()


def _end(status: RunRowStatus, data: str | None) -> RunEnd:
    if data is None or status not in FINISHED:
        return None
    if status == "error":
        stored = json.loads(data)
        if "refusal" in stored:
            refusal = stored["refusal"]
            return RecordedRefusal(refusal["reason"], refusal["message"], refusal["details"])
        error = stored["error"]
        return HarnessError(error["message"], code=error["code"], details=error["details"])
    return ThreadRunOutcome.from_json(data)


def attempts_json(attempts: Sequence[Attempt]) -> str:
    return json.dumps(
        [
            {
                "client_tools": client_tools_json(attempt.client_tools),
                "run_id": attempt.run_id,
                "replica": attempt.replica,
                "fence": attempt.fence,
                "start": attempt.start,
                **({"parked": True} if attempt.parked else {}),
            }
            for attempt in attempts
        ]
    )


def _attempts(data: str) -> tuple[Attempt, ...]:
    return tuple(
        Attempt(
            run_id=entry["run_id"],
            replica=entry["replica"],
            fence=entry["fence"],
            start=float(entry["start"]),
            client_tools=_tools(entry["client_tools"]),
            parked=bool(entry.get("parked", False)),
        )
        for entry in json.loads(data)
    )


def _tools(data: str) -> tuple[ClientTool, ...]:
    return tuple(client_tools_from_json(data))
