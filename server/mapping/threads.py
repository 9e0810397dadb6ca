"""`ThreadService` messages <-> the durable host's values (`harness.threads`).

Decoding only translates; every thread rule (labels, batches, revisions) is the host's or the core's.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime

from threadline.v1 import (
    events_pb2,
    harness_service_pb2,
    thread_pb2,
    thread_service_pb2,
)

from harness import HarnessState, InputError
from harness.errors import ErrorCode
from harness.threads import (
    THREAD_STATUS_NAMES,
    BusyStrategy,
    CheckpointKind,
    CheckpointRow,
    QueuedKind,
    RunRowStatus,
    ThreadCommittedEvent,
    ThreadRow,
    ThreadRunRequest,
    ThreadStatus,
    check_storable,
)

from ..errors import at_field
from .deferred import requests_to_pb, results_from_pb, resume_to_pb
from .events import fill_timestamp
from .run import client_tools_from_pb, input_from_pb, limits_from_pb, tool_recovery_from_pb
from .state import fill_state

__all__ = (
    "KIND_PB",
    "RUN_STATUS_PB",
    "STATUS_FROM_PB",
    "fill_checkpoint_pb",
    "fill_committed",
    "fill_thread",
    "new_request_id",
    "run_request_from_pb",
)

STATUS_PB: dict[ThreadStatus, thread_pb2.ThreadStatus.ValueType] = {
    status: thread_pb2.ThreadStatus.Value(name) for status, name in THREAD_STATUS_NAMES.items()
}
"""By the core's names for the enum's values, so a status reads the same in `Thread` and in metadata."""
STATUS_FROM_PB: dict[int, ThreadStatus | None] = {
    thread_pb2.THREAD_STATUS_UNSPECIFIED: None,
    **{value: key for key, value in STATUS_PB.items()},
}
KIND_PB: dict[CheckpointKind, thread_pb2.CheckpointKind.ValueType] = {
    "created": thread_pb2.CHECKPOINT_KIND_CREATED,
    "imported": thread_pb2.CHECKPOINT_KIND_IMPORTED,
    "forked": thread_pb2.CHECKPOINT_KIND_FORKED,
    "mid_run": thread_pb2.CHECKPOINT_KIND_MID_RUN,
    "completed": thread_pb2.CHECKPOINT_KIND_COMPLETED,
    "suspended": thread_pb2.CHECKPOINT_KIND_SUSPENDED,
    "failed": thread_pb2.CHECKPOINT_KIND_FAILED,
    "cancelled": thread_pb2.CHECKPOINT_KIND_CANCELLED,
    "rolled_back": thread_pb2.CHECKPOINT_KIND_ROLLED_BACK,
}
_BUSY_STRATEGIES: dict[int, BusyStrategy] = {
    thread_service_pb2.BUSY_STRATEGY_UNSPECIFIED: "reject",
    thread_service_pb2.BUSY_STRATEGY_REJECT: "reject",
    thread_service_pb2.BUSY_STRATEGY_ENQUEUE: "enqueue",
    thread_service_pb2.BUSY_STRATEGY_INTERRUPT: "interrupt",
    thread_service_pb2.BUSY_STRATEGY_ROLLBACK: "rollback",
}
QUEUED_KIND_PB: dict[QueuedKind, thread_pb2.QueuedRunKind.ValueType] = {
    "enqueued": thread_pb2.QUEUED_RUN_KIND_ENQUEUED,
    "interrupting": thread_pb2.QUEUED_RUN_KIND_INTERRUPTING,
    "rolling_back": thread_pb2.QUEUED_RUN_KIND_ROLLING_BACK,
}
RUN_STATUS_PB: dict[RunRowStatus, thread_pb2.ThreadRunStatus.ValueType] = {
    "running": thread_pb2.THREAD_RUN_STATUS_RUNNING,
    "completed": thread_pb2.THREAD_RUN_STATUS_COMPLETED,
    "suspended": thread_pb2.THREAD_RUN_STATUS_SUSPENDED,
    "failed": thread_pb2.THREAD_RUN_STATUS_FAILED,
    "cancelled": thread_pb2.THREAD_RUN_STATUS_CANCELLED,
    "error": thread_pb2.THREAD_RUN_STATUS_ERROR,
    "interrupted": thread_pb2.THREAD_RUN_STATUS_INTERRUPTED,
    "queued": thread_pb2.THREAD_RUN_STATUS_QUEUED,
}
STORE_KIND_PB = {
    "sqlite": harness_service_pb2.THREAD_STORE_KIND_SQLITE,
    "memory": harness_service_pb2.THREAD_STORE_KIND_MEMORY,
    "postgresql": harness_service_pb2.THREAD_STORE_KIND_POSTGRESQL,
    "none": harness_service_pb2.THREAD_STORE_KIND_NONE,
}
MAX_REQUEST_ID = 128


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def fill_checkpoint_pb(msg: thread_pb2.Checkpoint, row: CheckpointRow, state: HarnessState | None) -> None:
    msg.thread_id = row.thread_id
    msg.revision = row.revision
    msg.kind = KIND_PB[row.kind]
    msg.run_id = row.run_id
    msg.request_id = row.request_id
    fill_timestamp(msg.create_time, _moment(row.create_time))
    if state is not None:
        fill_state(msg.state, state)
    if row.pending is not None:
        msg.pending.CopyFrom(requests_to_pb(row.pending))
    if row.remaining is not None:
        msg.remaining.CopyFrom(resume_to_pb(row.remaining))
    for tool in row.client_tools:
        schema = tool.parameters_json_schema
        msg.client_tools.add(
            name=tool.name,
            description=tool.description,
            parameters_json_schema=schema if isinstance(schema, str) else _json(schema),
        )


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def fill_thread(
    msg: thread_pb2.Thread, row: ThreadRow, head: CheckpointRow, state: HarnessState | None = None
) -> None:
    msg.thread_id = row.thread_id
    msg.agent = row.agent
    msg.labels.update(row.labels)
    fill_timestamp(msg.create_time, _moment(row.create_time))
    fill_timestamp(msg.update_time, _moment(row.update_time))
    msg.revision = row.revision
    msg.status = STATUS_PB[row.status]
    fill_checkpoint_pb(msg.head, head, state)
    if row.pending is not None and row.status == "suspended":
        msg.pending.CopyFrom(requests_to_pb(row.pending))
    msg.recovery_pending = row.recovery_pending
    lease = row.live_lease
    if lease is not None:
        msg.lease.run_id = lease.run_id
        msg.lease.request_id = lease.request_id
        fill_timestamp(msg.lease.expire_time, _moment(lease.expires))
    for queued in row.queue:
        entry = msg.queue.add(
            request_id=queued.request_id, run_id=queued.run_id, kind=QUEUED_KIND_PB[queued.kind]
        )
        fill_timestamp(entry.create_time, _moment(queued.create_time))


def fill_committed(msg: events_pb2.RunEvent, event: ThreadCommittedEvent, *, sequence: int) -> None:
    msg.thread_id, msg.run_id, msg.sequence = event.thread_id, event.run_id, sequence
    fill_timestamp(msg.occurred_at, event.occurred_at)
    msg.thread_committed.revision = event.revision
    msg.thread_committed.kind = KIND_PB[event.kind]
    msg.thread_committed.replayed = event.replayed


def new_request_id() -> str:
    return f"req-{uuid.uuid4().hex}"


def _invalid(message: str, field: str) -> InputError:
    return at_field(InputError(message, code=ErrorCode.INPUT_INVALID, details={"field": field}), field)


def run_request_from_pb(spec: thread_service_pb2.ThreadRunSpec) -> ThreadRunRequest:
    """Decode a `ThreadRunSpec` (fields `spec.*`); an empty `request_id` gets a server-made one.

    The core computes the request's digest (`harness.threads.digest`); this also computes the digest
    servers before it stored, so their records still replay (`legacy_digest`).
    """
    if not spec.thread_id:
        raise _invalid("thread_id is required.", "spec.thread_id")
    if len(spec.request_id) > MAX_REQUEST_ID:
        raise _invalid(f"request_id has at most {MAX_REQUEST_ID} characters.", "spec.request_id")
    for field in ("thread_id", "request_id"):
        try:
            check_storable(getattr(spec, field), field=f"spec.{field}")
        except InputError as error:
            raise at_field(error, f"spec.{field}") from None
    if spec.expected_revision < 0:
        raise _invalid("expected_revision must not be negative.", "spec.expected_revision")
    busy_strategy = _BUSY_STRATEGIES.get(spec.busy_strategy)
    if busy_strategy is None:
        raise _invalid(f"busy_strategy {spec.busy_strategy} is not supported.", "spec.busy_strategy")
    request_id = spec.request_id or new_request_id()
    return ThreadRunRequest(
        thread_id=spec.thread_id,
        request_id=request_id,
        expected_revision=spec.expected_revision,
        input=input_from_pb(spec),
        answers=results_from_pb(spec.answers, field="spec.answers") if spec.HasField("answers") else None,
        tool_recovery=tool_recovery_from_pb(spec.tool_recovery),
        client_tools=tuple(client_tools_from_pb(spec.client_tools)),
        usage_limits=limits_from_pb(spec.usage_limits) if spec.HasField("usage_limits") else None,
        busy_strategy=busy_strategy,
        legacy_digest=_legacy_digest(spec, request_id),
    )


def _legacy_digest(spec: thread_service_pb2.ThreadRunSpec, request_id: str) -> str:
    """SHA-256 of the spec's deterministic protobuf bytes with `request_id` and without `tool_recovery`,
    `client_tools` and `usage_limits`: the digest servers before v2 stored (`docs/threads.md`)."""
    body = thread_service_pb2.ThreadRunSpec()
    body.CopyFrom(spec)
    body.request_id = request_id
    for name in ("tool_recovery", "client_tools", "usage_limits"):
        body.ClearField(name)
    return hashlib.sha256(body.SerializeToString(deterministic=True)).hexdigest()
