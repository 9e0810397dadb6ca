"""The thread store answers in typed records (`harness.threads.records`), on SQLite and on PostgreSQL.

What a caller wrote comes back as the core's own values, never as a column's JSON text: a suspended
thread's batch, a checkpoint's pending and remaining batches and client tools, a run record's prompt,
attempts and outcome, or the error a retry raises again. A rollback copies a checkpoint's batches and
tools as they were, and a listing pairs each thread with its head.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime

import pytest
from pydantic_ai.messages import ImageUrl, ToolCallPart
from pydantic_ai.usage import RunUsage

from harness import ClientTool, DeferredToolRequests, DeferredToolResume, HarnessState
from harness.deferred import DeferredToolCall
from harness.errors import ErrorCode, HarnessError
from harness.results import RunStatus
from harness.threads import ThreadRunOutcome, ThreadStore
from harness.threads.codec import state_parts
from harness.threads.records import Head
from harness.threads.store import Finish, NewCheckpoint

pytestmark = pytest.mark.anyio

TOOLS = (
    ClientTool("get_weather", "The weather in a city.", '{"type":"object","properties":{}}'),
    ClientTool("get_time", parameters_json_schema={"type": "object", "properties": {}}),
)


def an_outcome(
    at: tuple[str, str, str],
    status: RunStatus,
    revision: int,
    *,
    deferred: DeferredToolRequests | None = None,
) -> ThreadRunOutcome:
    """What a run (`at`: its thread, run and request IDs) ended with, now."""
    thread_id, run_id, request_id = at
    now = datetime.now(UTC)
    return ThreadRunOutcome(
        thread_id=thread_id,
        run_id=run_id,
        request_id=request_id,
        status=status,
        revision=revision,
        committed=deferred is None,
        output_json=None,
        usage=RunUsage(requests=2),
        failure=None,
        deferred=deferred,
        started_at=now,
        ended_at=now,
    )


def a_batch() -> DeferredToolRequests:
    return DeferredToolRequests(
        approvals=[
            DeferredToolCall.of(ToolCallPart("delete_file", {"path": "a.txt"}, "call_a"), "tool/x/delete")
        ]
    )


def a_resume(requests: DeferredToolRequests) -> DeferredToolResume:
    return DeferredToolResume(requests, requests.build_results(approvals={"call_a": True}), recovery=True)


async def a_thread(store: ThreadStore, thread_id: str) -> Head:
    """A thread suspended on `a_batch()`, an accepted batch retained, with `TOOLS`; its head."""
    pending = a_batch()
    checkpoint = NewCheckpoint(
        "imported",
        state_parts(HarnessState.new(thread_id=thread_id)),
        pending=pending,
        remaining=a_resume(pending),
        client_tools=TOOLS,
    )
    await store.create(
        thread_id, agent="default", thread_labels={"b": "2", "a": "1"}, checkpoint=checkpoint, accepted=None
    )
    thread = await store.thread(thread_id)
    assert thread is not None
    return await store.head(thread)


async def test_threads_and_checkpoints_come_back_typed(store: ThreadStore) -> None:
    head = await a_thread(store, "t_typed")
    thread = await store.thread("t_typed")
    assert thread is not None
    assert thread.pending == a_batch() and thread.status == "suspended"
    assert thread.accepted is None and thread.labels == {"a": "1", "b": "2"}
    stored = head.checkpoint
    assert stored.pending == a_batch()
    assert isinstance(stored.remaining, DeferredToolResume)
    assert stored.remaining.to_json() == a_resume(a_batch()).to_json()
    assert stored.client_tools == TOOLS

    [(listed, listed_head)] = await store.threads(
        limit=10, labels_filter={"a": "1"}, status="suspended", after=None
    )
    assert (dataclasses.replace(listed, now=thread.now), listed_head) == (thread, stored)
    assert await store.checkpoints("t_typed", limit=10, before=None) == [stored]

    rolled = await store.rollback(thread, stored)
    assert rolled.revision == 2 and rolled.pending == a_batch()
    assert rolled.accepted is not None and rolled.accepted.to_json() == a_resume(a_batch()).to_json()
    copy = await store.checkpoint("t_typed", 2)
    assert copy is not None and not isinstance(copy, Head)
    assert (copy.kind, copy.pending, copy.client_tools) == ("rolled_back", a_batch(), TOOLS)
    assert (copy.history_blob, copy.rest_blob) == (stored.history_blob, stored.rest_blob)


async def test_run_records_come_back_typed(store: ThreadStore) -> None:
    head = await a_thread(store, "t_records")
    thread = await store.thread("t_records")
    assert thread is not None
    prompt = ["look at this", ImageUrl(url="https://example.com/a.png")]
    taken, record = await store.begin(
        thread,
        run_id="run-1",
        request_id="req-1",
        ttl=30.0,
        record=None,
        digest="d" * 64,
        prompt=prompt,
        client_tools=TOOLS,
        accepted=a_resume(a_batch()),
    )
    assert taken.pending is None and taken.accepted is not None
    assert await store.run_record("t_records", "req-1") == record
    assert record.prompt == prompt and record.status == "running" and record.outcome is None
    [attempt] = record.attempts
    assert (attempt.run_id, attempt.replica, attempt.fence, attempt.client_tools) == (
        "run-1",
        "test",
        taken.fence,
        TOOLS,
    )

    outcome = an_outcome(("t_records", "run-1", "req-1"), "suspended", taken.revision, deferred=a_batch())
    finish = Finish("req-1", "suspended", outcome, a_batch(), None)
    await store.commit(
        "t_records",
        fence=taken.fence,
        revision=taken.revision,
        checkpoint=None,
        base=head,
        accepted=None,
        finish=finish,
    )
    finished = await store.run_record("t_records", "req-1")
    assert finished is not None and finished.status == "suspended"
    assert finished.outcome == dataclasses.replace(outcome, replayed=True)
    after = await store.thread("t_records")
    assert after is not None and after.pending == a_batch() and after.lease is None and after.accepted is None

    retried, _record = await store.begin(
        after,
        run_id="run-2",
        request_id="req-2",
        ttl=30.0,
        record=None,
        digest="e" * 64,
        prompt="again",
        client_tools=(),
        accepted=None,
    )
    error = HarnessError("It broke.", code=ErrorCode.DEFERRED_SURFACE_MISMATCH, details={"tool": "x"})
    await store.commit(
        "t_records",
        fence=retried.fence,
        revision=retried.revision,
        checkpoint=None,
        base=head,
        accepted=None,
        finish=Finish("req-2", "error", error, None, None),
    )
    failed = await store.run_record("t_records", "req-2")
    assert failed is not None and isinstance(failed.outcome, HarnessError)
    assert (failed.outcome.code, failed.outcome.message, failed.outcome.details) == (
        ErrorCode.DEFERRED_SURFACE_MISMATCH,
        "It broke.",
        {"tool": "x"},
    )


async def test_a_run_records_committed_revision_is_its_last_checkpoint(store: ThreadStore) -> None:
    """A run's commits write no run record: while it runs, its record's `committed_revision` is read
    from its checkpoints; a record that ends (finished, or interrupted by another request) keeps the
    revision it had then, whatever is committed after."""
    head = await a_thread(store, "t_committed")
    thread = await store.thread("t_committed")
    assert thread is not None and thread.revision == 1

    async def begin(thread_id: str, request_id: str, ttl: float) -> tuple[str, int]:
        current = await store.thread(thread_id)
        assert current is not None
        taken, record = await store.begin(
            current,
            run_id="run-" + request_id,
            request_id=request_id,
            ttl=ttl,
            record=None,
            digest="d" * 64,
            prompt=request_id,
            client_tools=(),
            accepted=None,
        )
        assert record.committed_revision == 0
        return taken.fence, taken.revision

    def mid_run(request_id: str) -> NewCheckpoint:
        parts = state_parts(HarnessState.new(thread_id="t_committed"))
        return NewCheckpoint(
            "mid_run", parts, None, None, (), run_id="run-" + request_id, request_id=request_id
        )

    async def committed(request_id: str) -> tuple[str, int]:
        record = await store.run_record("t_committed", request_id)
        assert record is not None
        return record.status, record.committed_revision

    fence, revision = await begin("t_committed", "first", ttl=0.2)
    assert await committed("first") == ("running", 0)
    base = head
    for expected in (2, 3):
        done = await store.commit(
            "t_committed",
            fence=fence,
            revision=revision,
            checkpoint=mid_run("first"),
            base=base,
            accepted=None,
        )
        assert done.head is not None
        revision, base = done.revision, done.head
        assert await committed("first") == ("running", expected)

    while (await store.thread("t_committed")).live_lease is not None:  # type: ignore[union-attr]
        await asyncio.sleep(0.05)  # the first run's holder is gone: its lease expires
    fence, revision = await begin("t_committed", "second", ttl=30.0)
    assert await committed("first") == ("interrupted", 3)
    done = await store.commit(
        "t_committed", fence=fence, revision=revision, checkpoint=mid_run("second"), base=base, accepted=None
    )
    assert done.revision == 4 and await committed("second") == ("running", 4)
    outcome = an_outcome(("t_committed", "run-second", "second"), "completed", 4)
    await store.commit(
        "t_committed",
        fence=fence,
        revision=4,
        checkpoint=None,
        base=done.head,
        accepted=None,
        finish=Finish("second", "completed", outcome, None, None),
    )
    assert await committed("second") == ("completed", 4)
    assert await committed("first") == ("interrupted", 3)
