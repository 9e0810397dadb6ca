"""Races and retries on one thread (THREADS §4, §7 "Races", "Idempotency"), on `--store memory`.

At most one run advances a thread at a time; every other request is refused with ABORTED
THREAD_BUSY or REVISION_CONFLICT and writes nothing. A request is identified by its `request_id`:
a retry never runs twice, gets the stored outcome (`replayed`), and a dropped stream does not
stop the run it started.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from itertools import groupby
from typing import TYPE_CHECKING, Any

import anyio
import grpc
import pytest
from conftest import (
    completed_output,
    create_thread,
    events_of,
    get_thread,
    list_checkpoints,
    refusal,
    refused,
    run_thread,
    stream_thread,
    thread_spec,
    user_prompts,
)
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import deferred_pb2, run_pb2, thread_pb2, thread_service_pb2, thread_service_pb2_grpc

if TYPE_CHECKING:
    from threadline.v1.thread_service_pb2_grpc import ThreadServiceAsyncStub as Stub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
Code = grpc.StatusCode

LEASE_TTL_S = 12
"""Far above any stall a loaded machine has, so no lease here expires by accident."""
CONCURRENT = 20
REPLAY_GAP_S = 1.5
"""Between a run and its replay, so the replay's times can be told from the time it was sent."""
TERMINAL = {
    thread_pb2.CHECKPOINT_KIND_COMPLETED,
    thread_pb2.CHECKPOINT_KIND_SUSPENDED,
    thread_pb2.CHECKPOINT_KIND_FAILED,
    thread_pb2.CHECKPOINT_KIND_CANCELLED,
}


@pytest.fixture(scope="module")
def served() -> Iterator[LoggedServe]:
    with logged_serve("--store", "memory", "--lease-ttl", str(LEASE_TTL_S)) as running:
        yield running


@pytest.fixture
async def stub(served: LoggedServe) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(served.address) as channel:
        yield thread_service_pb2_grpc.ThreadServiceStub(channel)


def new_request_id() -> str:
    return f"req-{uuid.uuid4().hex}"


async def attempts(stub: Stub, thread_id: str, specs: list[dict[str, Any]]) -> list[Any]:
    """Send every `RunThread` at once; each one's `RunThreadResponse` or `AioRpcError`, in order."""
    outcomes: list[Any] = [None] * len(specs)

    async def attempt(index: int) -> None:
        try:
            outcomes[index] = await run_thread(stub, thread_id, **specs[index])
        except grpc.aio.AioRpcError as error:
            outcomes[index] = error

    async with anyio.create_task_group() as group:
        for index in range(len(specs)):
            group.start_soon(attempt, index)
    return outcomes


def assert_busy(meta: dict[str, str], *, run_id: str, request_id: str, sent: datetime) -> None:
    """THREAD_BUSY's metadata: the holder's run and request, and a live lease's RFC 3339 expiry."""
    assert (meta["run_id"], meta["request_id"]) == (run_id, request_id)
    expires = datetime.fromisoformat(meta["lease_expires_at"])
    assert expires.tzinfo is not None
    assert sent - timedelta(seconds=2) < expires < datetime.now(UTC) + timedelta(seconds=LEASE_TTL_S + 5)


async def until_tool_runs(call: Any) -> list[Any]:
    """Read a stream's events until its (slow) tool executes: the run then holds the lease."""
    seen: list[Any] = []
    async for response in call:
        seen += events_of(response)
        if seen[-1].WhichOneof("event") == "tool_call":
            return seen
    raise AssertionError("the stream ended before the tool ran")


async def settled(stub: Stub, thread_id: str, within: float = 60.0) -> thread_pb2.Thread:
    """The thread once no run holds it (polls; the run commits on its own time)."""
    end = time.monotonic() + within
    while True:
        thread: thread_pb2.Thread = await get_thread(stub, thread_id)
        if thread.status != thread_pb2.THREAD_STATUS_RUNNING:
            return thread
        assert time.monotonic() < end, "the run never finished"
        await anyio.sleep(0.05)


async def runs_in_order(stub: Stub, thread_id: str) -> list[tuple[str, str, list[int]]]:
    """The thread's checkpoints oldest first, grouped by the run that made them: (run, request, kinds).

    Asserts the line is whole: revisions 1..head without a gap, and no run's checkpoints
    interleaved with another's (one run at a time advanced the thread).
    """
    listed = list(reversed(await list_checkpoints(stub, thread_id)))
    assert [c.revision for c in listed] == list(range(1, len(listed) + 1))
    groups = [
        (run_id, [(c.request_id, c.kind) for c in group])
        for run_id, group in groupby(listed[1:], key=lambda c: c.run_id)
    ]
    run_ids = [run_id for run_id, _ in groups]
    assert len(run_ids) == len(set(run_ids)), f"runs interleaved: {run_ids}"
    out = []
    for run_id, items in groups:
        requests = {request_id for request_id, _ in items}
        assert len(requests) == 1, (run_id, requests)
        kinds = [kind for _, kind in items]
        assert kinds[-1] in TERMINAL and all(k == thread_pb2.CHECKPOINT_KIND_MID_RUN for k in kinds[:-1])
        out.append((run_id, requests.pop(), kinds))
    return out


# --- concurrency ---------------------------------------------------------------------------------------


async def test_concurrent_runs_one_advances_the_thread_the_rest_are_busy(stub: Stub) -> None:
    thread = await create_thread(stub)
    sent = datetime.now(UTC)
    specs = [{"text": f"sleep 3 (attempt {i})", "request_id": new_request_id()} for i in range(CONCURRENT)]
    outcomes = await attempts(stub, thread.thread_id, specs)
    won = [(s, o) for s, o in zip(specs, outcomes, strict=True) if not isinstance(o, grpc.aio.AioRpcError)]
    assert len(won) == 1, f"{len(won)} of {CONCURRENT} concurrent runs advanced the thread"
    [(winner_spec, winner)] = won
    assert completed_output(winner.result) == "Tool results: sleep: Slept 3 s."
    losers = [(s, o) for s, o in zip(specs, outcomes, strict=True) if isinstance(o, grpc.aio.AioRpcError)]
    for _, error in losers:
        code, reason, meta = refusal(error)
        assert (code, reason) == (Code.ABORTED, "THREAD_BUSY")
        assert_busy(meta, run_id=winner.result.run_id, request_id=winner_spec["request_id"], sent=sent)
    head = await get_thread(stub, thread.thread_id, full=True)
    assert head.revision == winner.revision
    assert user_prompts(head.head.state) == [winner_spec["text"]], "refused requests wrote nothing"

    # Refused requests left no run record: sent again one after the other, each one runs.
    revisions = [winner.revision]
    for loser_spec, _ in losers[:3]:
        again = await run_thread(
            stub,
            thread.thread_id,
            text="lookup grpc",
            request_id=loser_spec["request_id"],
            expected_revision=revisions[-1],
        )
        assert not again.replayed and again.revision > revisions[-1]
        revisions.append(again.revision)
    ran = await runs_in_order(stub, thread.thread_id)
    assert [request_id for _, request_id, _ in ran] == [winner_spec["request_id"]] + [
        s["request_id"] for s, _ in losers[:3]
    ]
    assert ran[0][0] == winner.result.run_id
    head = await get_thread(stub, thread.thread_id, full=True)
    assert head.revision == revisions[-1]
    assert user_prompts(head.head.state) == [winner_spec["text"], "lookup grpc", "lookup grpc", "lookup grpc"]


async def test_concurrent_runs_against_one_revision_only_one_commits(stub: Stub) -> None:
    thread = await create_thread(stub)
    specs = [{"text": f"hello {i}", "expected_revision": 1} for i in range(CONCURRENT)]
    outcomes = await attempts(stub, thread.thread_id, specs)
    won = [o for o in outcomes if not isinstance(o, grpc.aio.AioRpcError)]
    assert len(won) == 1, "every request expected revision 1: only one can commit on it"
    for outcome in outcomes:
        if isinstance(outcome, grpc.aio.AioRpcError):
            code, reason, meta = refusal(outcome)
            assert (code, reason) in ((Code.ABORTED, "THREAD_BUSY"), (Code.ABORTED, "REVISION_CONFLICT"))
            if reason == "REVISION_CONFLICT":  # the head then: the winner's commit, mid-run or terminal
                assert 1 < int(meta["current_revision"]) <= won[0].revision, meta
    assert len(await runs_in_order(stub, thread.thread_id)) == 1


async def test_a_stale_expected_revision_is_a_conflict(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(stub, thread.thread_id, text="hello", expected_revision=1)
    code, reason, meta = await refused(run_thread(stub, thread.thread_id, text="hi", expected_revision=1))
    assert (code, reason, meta) == (
        Code.ABORTED,
        "REVISION_CONFLICT",
        {"current_revision": str(first.revision)},
    )
    assert (await get_thread(stub, thread.thread_id)).revision == first.revision
    second = await run_thread(stub, thread.thread_id, text="hi", expected_revision=first.revision)
    assert second.revision > first.revision


# --- idempotency -----------------------------------------------------------------------------------------


async def test_the_same_request_twice_runs_once(stub: Stub) -> None:
    thread = await create_thread(stub)
    request_id = new_request_id()
    events = await stream_thread(
        stub, thread.thread_id, text="lookup grpc", request_id=request_id, expected_revision=1
    )
    original = events[-1].result
    revision = events[-2].thread_committed.revision
    before = await list_checkpoints(stub, thread.thread_id)
    # Not a synchronisation: a gap, so that a replay stamped with the time it is sent would show.
    await anyio.sleep(REPLAY_GAP_S)

    # The retry carries the first call's expected revision, stale now: still the stored outcome.
    again = await run_thread(
        stub, thread.thread_id, text="lookup grpc", request_id=request_id, expected_revision=1
    )
    assert again.replayed and (again.result, again.revision) == (original, revision)
    # Tool recovery, client tools and usage limits belong to each attempt, not to the request.
    other_settings = await run_thread(
        stub,
        thread.thread_id,
        text="lookup grpc",
        request_id=request_id,
        expected_revision=1,
        tool_recovery=run_pb2.TOOL_RECOVERY_NEVER,
        usage_limits=run_pb2.UsageLimits(request_limit=50),
    )
    assert other_settings.replayed and other_settings.result == original

    replay = await stream_thread(
        stub, thread.thread_id, text="lookup grpc", request_id=request_id, expected_revision=1
    )
    assert [(e.sequence, e.WhichOneof("event")) for e in replay] == [
        (0, "run_started"),
        (1, "thread_committed"),
        (2, "result"),
    ]
    committed = replay[1].thread_committed
    assert (committed.revision, committed.kind, committed.replayed) == (
        revision,
        thread_pb2.CHECKPOINT_KIND_COMPLETED,
        True,
    )
    assert replay[2].result == original
    assert {(e.thread_id, e.run_id) for e in replay} == {(thread.thread_id, original.run_id)}
    started, ended = events[0].occurred_at.ToDatetime(UTC), events[-1].occurred_at.ToDatetime(UTC)
    for event in replay:
        when = event.occurred_at.ToDatetime(UTC)
        slack = timedelta(seconds=REPLAY_GAP_S / 3)
        assert started - slack <= when <= ended + slack, "a replay carries the original times"

    assert await list_checkpoints(stub, thread.thread_id) == before, "nothing ran again"
    head = await get_thread(stub, thread.thread_id, full=True)
    assert user_prompts(head.head.state) == ["lookup grpc"]

    code, reason, _ = await refused(
        run_thread(stub, thread.thread_id, text="lookup threadline", request_id=request_id)
    )
    assert (code, reason) == (Code.INVALID_ARGUMENT, "REQUEST_ID_REUSED")
    assert await list_checkpoints(stub, thread.thread_id) == before


async def test_a_retried_answer_is_applied_once(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(stub, thread.thread_id, text="delete a.txt")
    [approval] = first.result.deferred.approvals
    answers = deferred_pb2.DeferredToolResults(
        approvals=[
            deferred_pb2.ApprovalResult(
                tool_call_id=approval.tool_call_id, approved=deferred_pb2.ToolApproved()
            )
        ]
    )
    request_id = new_request_id()
    answered = await run_thread(
        stub, thread.thread_id, answers=answers, request_id=request_id, expected_revision=first.revision
    )
    assert completed_output(answered.result) == "Tool results: delete_file: Deleted a.txt."
    # The thread is no longer SUSPENDED and has moved on, yet the retry is the stored outcome.
    later = await run_thread(stub, thread.thread_id, text="hello")
    retry = await run_thread(
        stub, thread.thread_id, answers=answers, request_id=request_id, expected_revision=first.revision
    )
    assert retry.replayed and (retry.result, retry.revision) == (answered.result, answered.revision)
    head = await get_thread(stub, thread.thread_id, full=True)
    assert head.revision == later.revision
    parts = [
        (part["part_kind"], part.get("tool_call_id"))
        for message in json.loads(head.head.state.message_history.data)
        for part in message["parts"]
        if part["part_kind"] in ("tool-call", "tool-return")
    ]
    assert parts == [("tool-call", approval.tool_call_id), ("tool-return", approval.tool_call_id)]


async def test_a_retry_while_the_run_goes_attaches_then_gets_the_stored_result(stub: Stub) -> None:
    """LIVE §2.5: a retry of the running request is not refused: it follows that run to its result."""
    thread = await create_thread(stub)
    request_id = new_request_id()
    call = stub.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=thread_spec(thread.thread_id, text="sleep 3", request_id=request_id))
    )
    seen = await until_tool_runs(call)
    attached = asyncio.ensure_future(
        run_thread(stub, thread.thread_id, text="sleep 3", request_id=request_id)
    )
    async for response in call:
        seen += events_of(response)
    waited = await attached
    assert not waited.replayed and waited.result == seen[-1].result and waited.result.run_id == seen[0].run_id
    stored = await run_thread(stub, thread.thread_id, text="sleep 3", request_id=request_id)
    assert stored.replayed and stored.result == seen[-1].result
    assert completed_output(stored.result) == "Tool results: sleep: Slept 3 s."


async def test_a_dropped_stream_does_not_stop_its_run(stub: Stub) -> None:
    thread = await create_thread(stub)
    request_id = new_request_id()
    call = stub.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=thread_spec(thread.thread_id, text="sleep 4", request_id=request_id))
    )
    seen = await until_tool_runs(call)
    run_id = seen[0].run_id
    call.cancel()
    # The run goes on without its caller: a retry meanwhile attaches to it and gets its result.
    attached = await run_thread(stub, thread.thread_id, text="sleep 4", request_id=request_id)
    assert attached.result.run_id == run_id and not attached.replayed
    done = await settled(stub, thread.thread_id)
    assert done.head.kind == thread_pb2.CHECKPOINT_KIND_COMPLETED, "committed as if the client were there"
    stored = await run_thread(stub, thread.thread_id, text="sleep 4", request_id=request_id)
    assert stored.replayed and stored.revision == done.revision
    assert stored.result.run_id == run_id
    assert completed_output(stored.result) == "Tool results: sleep: Slept 4 s."


def test_the_server_logged_no_error_and_stops_cleanly(served: LoggedServe) -> None:
    """Last in the module: after the races above, no error in the log, and SIGTERM exits 0."""
    assert served.stop() == 0
    errors = [
        record
        for record in served.records()
        if record["level"] in ("error", "critical") or record.get("status") == "internal_error"
    ]
    assert not errors, errors[:5]
