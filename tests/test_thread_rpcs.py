"""Every ThreadService RPC (THREADS §3) against a real `threadline serve --store memory`.

Each test drives threads as a host would: create or import one, run it by request ID, answer its
pending calls by call ID, fork, roll back, delete. Refusals are checked for their status code, their
`ErrorInfo` reason and the metadata the spec names; bad input is typed, never INTERNAL or UNKNOWN.
The server-level facts (`GetServerInfo.thread_store`, `--token`, health, reflection, `--store none`)
come last, each on a server of its own.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest
from conftest import (
    bad_request_fields,
    checkpoint_state,
    completed_output,
    create_thread,
    drained,
    events_of,
    fresh_thread_id,
    get_thread,
    list_checkpoints,
    refusal,
    refused,
    run_thread,
    stream_thread,
    thread_spec,
    user_prompts,
)
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import (
    deferred_pb2,
    events_pb2,
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    state_pb2,
    thread_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

if TYPE_CHECKING:
    from threadline.v1.harness_service_pb2_grpc import HarnessServiceAsyncStub as Harness
    from threadline.v1.thread_service_pb2_grpc import ThreadServiceAsyncStub as Stub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
Code = grpc.StatusCode

LEASE_TTL_S = 12
"""Long enough that no lease here expires by accident on a loaded machine; reported by GetServerInfo."""
SERVICE = thread_service_pb2.DESCRIPTOR.services_by_name["ThreadService"]
WEATHER = run_pb2.ClientTool(
    name="get_weather",
    description="The weather in a city.",
    parameters_json_schema='{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}',
)


# --- the server and one way to call it ------------------------------------------------------------


@pytest.fixture(scope="module")
def served() -> Iterator[LoggedServe]:
    with logged_serve("--store", "memory", "--lease-ttl", str(LEASE_TTL_S)) as running:
        yield running


@pytest.fixture
async def channel(served: LoggedServe) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(served.address) as opened:
        yield opened


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> Stub:
    return thread_service_pb2_grpc.ThreadServiceStub(channel)


@pytest.fixture
def harness(channel: grpc.aio.Channel) -> Harness:
    return harness_service_pb2_grpc.HarnessServiceStub(channel)


def messages(state: state_pb2.HarnessState) -> list[dict[str, Any]]:
    value = json.loads(state.message_history.data)
    assert isinstance(value, list)
    return value


def tool_returns(state: state_pb2.HarnessState) -> list[tuple[str, str]]:
    return [
        (part["tool_name"], part["tool_call_id"])
        for message in messages(state)
        for part in message["parts"]
        if part["part_kind"] == "tool-return"
    ]


def approve_all(pending: deferred_pb2.DeferredToolRequests) -> deferred_pb2.DeferredToolResults:
    return deferred_pb2.DeferredToolResults(
        approvals=[
            deferred_pb2.ApprovalResult(tool_call_id=item.tool_call_id, approved=deferred_pb2.ToolApproved())
            for item in pending.approvals
        ]
    )


def answer_calls(
    pending: deferred_pb2.DeferredToolRequests, value_json: str
) -> deferred_pb2.DeferredToolResults:
    return deferred_pb2.DeferredToolResults(
        calls=[
            deferred_pb2.CallResult(tool_call_id=item.tool_call_id, value_json=value_json)
            for item in pending.calls
        ]
    )


def batch(pending: deferred_pb2.DeferredToolRequests) -> list[dict[str, Any]]:
    """A pending batch as data: its JSON fields parsed, since the server may re-encode them."""
    items = []
    for category, found in (("approval", pending.approvals), ("call", pending.calls)):
        for item in found:
            fields = {f.name: v for f, v in item.ListFields()}
            for name in ("args_json", "metadata_json"):
                if name in fields:
                    fields[name] = json.loads(fields[name])
            items.append({"category": category, **fields})
    return items


def call_ids(pending: deferred_pb2.DeferredToolRequests) -> list[str]:
    return [item.tool_call_id for item in (*pending.approvals, *pending.calls)]


async def host_run(harness: Harness, **fields: Any) -> run_pb2.RunResult:
    """A stateless HarnessService run: how a host that kept its own state got the state it imports."""
    return (await harness.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(**fields)))).result


async def until_tool_runs(call: Any) -> list[events_pb2.RunEvent]:
    """Read a stream's events until its (slow) tool is executing; the events so far.

    The tool starts once its dispatch intent is durable, in the commit of the response that called it
    (LIVE §5.2), whose `thread_committed` follows the `tool_call`."""
    seen: list[events_pb2.RunEvent] = []
    async for response in call:
        seen += events_of(response)
        kinds = [event.WhichOneof("event") for event in seen]
        if "tool_call" in kinds and "thread_committed" in kinds[kinds.index("tool_call") :]:
            return seen
    raise AssertionError("the stream ended before the tool ran")


def rfc3339(text: str) -> datetime:
    parsed = datetime.fromisoformat(text)
    assert parsed.tzinfo is not None, text
    return parsed


# --- CreateThread, GetThread -----------------------------------------------------------------------


async def test_create_an_empty_thread_then_get_it_basic_and_full(stub: Stub) -> None:
    thread_id = fresh_thread_id()
    before = datetime.now(UTC) - timedelta(seconds=5)
    created = await create_thread(stub, thread_id=thread_id, labels={"team": "core", "empty": ""})
    assert (created.thread_id, created.agent, created.revision) == (thread_id, "default", 1)
    assert created.status == thread_pb2.THREAD_STATUS_IDLE
    assert dict(created.labels) == {"team": "core", "empty": ""}
    assert created.head.kind == thread_pb2.CHECKPOINT_KIND_CREATED
    assert (created.head.revision, created.head.run_id, created.head.request_id) == (1, "", "")
    assert not created.head.HasField("state"), "CreateThread answers in the BASIC view"
    assert not created.HasField("pending") and not created.HasField("lease")
    assert not created.recovery_pending
    assert created.create_time.ToDatetime(UTC) >= before

    basic = await get_thread(stub, thread_id)
    assert basic == created
    full = await get_thread(stub, thread_id, full=True)
    assert full.head.state.thread_id == thread_id
    assert full.head.state.message_history.message_count == 0
    assert await checkpoint_state(stub, thread_id, 1) == full.head.state

    generated = await stub.CreateThread(ts.CreateThreadRequest())
    assert generated.thread.thread_id.startswith("thread_") and len(generated.thread.thread_id) == 39
    assert generated.thread.agent == "default"

    code, reason, _ = await refused(stub.CreateThread(ts.CreateThreadRequest(thread_id=thread_id)))
    assert (code, reason) == (Code.ALREADY_EXISTS, "THREAD_EXISTS")
    code, reason, _ = await refused(get_thread(stub, fresh_thread_id()))
    assert (code, reason) == (Code.NOT_FOUND, "THREAD_NOT_FOUND")


async def test_labels_at_their_bounds_are_kept(stub: Stub) -> None:
    labels = {f"k{i}" + "x" * 60: "v" * 256 for i in range(31)}
    labels["a"] = ""
    assert len(labels) == 32 and all(len(key) <= 63 for key in labels)
    created = await create_thread(stub, labels=labels)
    assert dict((await get_thread(stub, created.thread_id)).labels) == labels


async def test_import_a_host_held_state(stub: Stub, harness: Harness) -> None:
    held = (await host_run(harness, text="count")).state
    imported = await create_thread(stub, thread_id="", state=held)
    assert imported.thread_id == held.thread_id
    assert (imported.revision, imported.head.kind) == (1, thread_pb2.CHECKPOINT_KIND_IMPORTED)
    assert imported.status == thread_pb2.THREAD_STATUS_IDLE
    stored = await checkpoint_state(stub, held.thread_id, 1)
    assert stored == held
    assert stored.message_history.data == held.message_history.data, "byte-identical on read"
    # The next turn continues the imported history: the counter lives in its capability state.
    second = await run_thread(stub, held.thread_id, text="count again")
    assert completed_output(second.result) == "Tool results: count: 2"
    assert second.revision > 1 and not second.result.HasField("state")


async def test_a_thread_id_breaking_the_rule_is_refused_with_the_rule(stub: Stub) -> None:
    for thread_id in ("thread_paced_0", "Thread_x", "9_x", "thread-" + "a" * 31):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await create_thread(stub, thread_id=thread_id)
        code, reason, meta = refusal(caught.value)
        assert (code, reason) == (Code.INVALID_ARGUMENT, "STATE_INVALID"), thread_id
        assert bad_request_fields(caught.value) == ["thread_id"]
        details = caught.value.details() or ""
        assert details.startswith("thread_id is not a valid thread ID") and "one underscore" in details
        assert "string_pattern_mismatch" in meta["errors"]


async def test_import_with_another_thread_id_is_state_invalid(stub: Stub, harness: Harness) -> None:
    held = (await host_run(harness, text="hello")).state
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await create_thread(stub, thread_id=fresh_thread_id(), state=held)
    code, reason, _ = refusal(caught.value)
    assert (code, reason) == (Code.INVALID_ARGUMENT, "STATE_INVALID")
    assert bad_request_fields(caught.value) == ["thread_id"]
    code, reason, _ = await refused(get_thread(stub, held.thread_id))
    assert (code, reason) == (Code.NOT_FOUND, "THREAD_NOT_FOUND"), "a refused import creates nothing"


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        (run_pb2.ClientTool(name="ct", parameters_json_schema="[]"), "parameters_json_schema"),
        (run_pb2.ClientTool(name="lookup"), "name"),  # a tool of the agent's own
        (run_pb2.ClientTool(name="ct\n"), "name"),
    ],
    ids=["schema not an object", "the agent's tool", "name with a newline"],
)
async def test_an_import_with_client_tools_no_run_accepts_is_refused_storing_nothing(
    stub: Stub, harness: Harness, tool: run_pb2.ClientTool, field: str
) -> None:
    """Checked as a run checks them, rather than stored for every later run to refuse."""
    held = (await host_run(harness, text="hello")).state
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await create_thread(stub, state=held, client_tools=[tool])
    code, reason, meta = refusal(caught.value)
    assert (code, reason, meta["field"]) == (Code.INVALID_ARGUMENT, "CLIENT_TOOL_INVALID", field)
    assert bad_request_fields(caught.value) == ["client_tools"]
    code, reason, _ = await refused(get_thread(stub, held.thread_id))
    assert (code, reason) == (Code.NOT_FOUND, "THREAD_NOT_FOUND"), "a refused import creates nothing"


async def test_import_a_suspended_state_and_answer_it_by_call_id(stub: Stub, harness: Harness) -> None:
    first = await host_run(harness, text="delete a.txt")
    assert first.status == run_pb2.RUN_STATUS_SUSPENDED
    imported = await create_thread(stub, thread_id=first.thread_id, state=first.state, pending=first.deferred)
    assert imported.status == thread_pb2.THREAD_STATUS_SUSPENDED
    assert batch(imported.pending) == batch(first.deferred) == batch(imported.head.pending)
    answered = await run_thread(stub, first.thread_id, answers=approve_all(first.deferred))
    assert completed_output(answered.result) == "Tool results: delete_file: Deleted a.txt."
    after = await get_thread(stub, first.thread_id)
    assert after.status == thread_pb2.THREAD_STATUS_IDLE and not after.HasField("pending")


async def test_import_refuses_a_batch_that_does_not_match_the_state(stub: Stub, harness: Harness) -> None:
    first = await host_run(harness, text="delete a.txt")
    other = await host_run(harness, text="delete b.txt")  # same call ID, other arguments
    forged = deferred_pb2.DeferredToolRequests()
    forged.CopyFrom(first.deferred)
    forged.approvals[0].tool_call_id = "call_forged"
    empty = (await harness.NewState(harness_service_pb2.NewStateRequest())).state
    for state, pending, reason in (
        (first.state, other.deferred, "DEFERRED_REQUEST_MISMATCH"),
        (first.state, forged, "DEFERRED_REQUEST_MISSING"),
        (empty, first.deferred, "DEFERRED_REQUEST_MISSING"),
    ):
        code, got, _ = await refused(
            create_thread(stub, thread_id=state.thread_id, state=state, pending=pending)
        )
        assert (code, got) == (Code.FAILED_PRECONDITION, reason)
        code, got, _ = await refused(get_thread(stub, state.thread_id))
        assert (code, got) == (Code.NOT_FOUND, "THREAD_NOT_FOUND")


async def test_import_with_an_accepted_batch_recovers_it_on_the_next_run(
    stub: Stub, harness: Harness
) -> None:
    first = await host_run(harness, text='client:get_weather {"city": "Paris"}', client_tools=[WEATHER])
    [call] = first.deferred.calls
    accepted = deferred_pb2.DeferredToolResume(
        requests=first.deferred, results=answer_calls(first.deferred, '"sunny, 21 C"')
    )
    both = create_thread(
        stub, thread_id=first.thread_id, state=first.state, pending=first.deferred, accepted=accepted
    )
    assert (await refused(both))[:2] == (Code.INVALID_ARGUMENT, "INPUT_INVALID")

    imported = await create_thread(
        stub, thread_id=first.thread_id, state=first.state, accepted=accepted, client_tools=[WEATHER]
    )
    assert imported.status == thread_pb2.THREAD_STATUS_IDLE and not imported.HasField("pending")
    assert imported.recovery_pending
    assert [c.tool_call_id for c in imported.head.remaining.results.calls] == [call.tool_call_id]
    assert list(imported.head.client_tools) == [WEATHER]
    # No prompt, no answers, no client tools declared: the recovery run applies the retained result
    # with the tools the import recorded.
    recovered = await run_thread(stub, first.thread_id)
    assert completed_output(recovered.result) == "Tool results: get_weather: sunny, 21 C"
    after = await get_thread(stub, first.thread_id, full=True)
    assert not after.recovery_pending
    assert tool_returns(after.head.state) == [("get_weather", call.tool_call_id)]


# --- ListThreads ---------------------------------------------------------------------------------------


def newest_first(threads: list[thread_pb2.Thread]) -> list[thread_pb2.Thread]:
    return sorted(threads, key=lambda t: (-t.update_time.ToNanoseconds(), t.thread_id))


async def list_all(stub: Stub, **fields: Any) -> tuple[list[thread_pb2.Thread], int]:
    """Every page of a listing; the threads and how many pages it took."""
    found: list[thread_pb2.Thread] = []
    token, pages = "", 0
    while True:
        page = await stub.ListThreads(ts.ListThreadsRequest(page_token=token, **fields))
        found += page.threads
        pages += 1
        token = page.next_page_token
        if not token:
            return found, pages


async def test_list_threads_filters_by_labels_and_status_newest_first(stub: Stub) -> None:
    suite = uuid.uuid4().hex
    made = [await create_thread(stub, labels={"suite": suite, "n": str(i)}) for i in range(5)]
    odd = await create_thread(stub, labels={"suite": suite, "odd": ""})
    mine = f"suite={suite}"

    listed, _ = await list_all(stub, labels=[mine])
    assert {t.thread_id for t in listed} == {t.thread_id for t in [*made, odd]}
    assert listed == newest_first(listed)
    assert all(not t.head.HasField("state") for t in listed), "listings are in the BASIC view"

    paged, pages = await list_all(stub, labels=[mine], page_size=2)
    assert [t.thread_id for t in paged] == [t.thread_id for t in listed] and pages == 3

    [three] = (await stub.ListThreads(ts.ListThreadsRequest(labels=[mine, "n=3"]))).threads
    assert three.thread_id == made[3].thread_id
    [empty_value] = (await stub.ListThreads(ts.ListThreadsRequest(labels=[mine, "odd="]))).threads
    assert empty_value.thread_id == odd.thread_id
    assert not (await stub.ListThreads(ts.ListThreadsRequest(labels=[mine, "n=9"]))).threads

    # The oldest thread moves to the front once it commits; a suspended one is found by status.
    await run_thread(stub, made[0].thread_id, text="hello")
    suspended = await run_thread(stub, made[1].thread_id, text="delete x")
    assert suspended.result.status == run_pb2.RUN_STATUS_SUSPENDED
    listed, _ = await list_all(stub, labels=[mine])
    assert listed == newest_first(listed)
    assert [t.thread_id for t in listed[:2]] == [made[1].thread_id, made[0].thread_id]
    by_status = {
        status: [t.thread_id for t in (await list_all(stub, labels=[mine], status=status))[0]]
        for status in (
            thread_pb2.THREAD_STATUS_SUSPENDED,
            thread_pb2.THREAD_STATUS_IDLE,
            thread_pb2.THREAD_STATUS_RUNNING,
        )
    }
    assert by_status[thread_pb2.THREAD_STATUS_SUSPENDED] == [made[1].thread_id]
    assert set(by_status[thread_pb2.THREAD_STATUS_IDLE]) == {t.thread_id for t in listed} - {
        made[1].thread_id
    }
    assert by_status[thread_pb2.THREAD_STATUS_RUNNING] == []


# --- DeleteThread, and what a running thread refuses ----------------------------------------------------


async def test_delete_a_thread_with_its_checkpoints(stub: Stub) -> None:
    thread = await create_thread(stub)
    done = await run_thread(stub, thread.thread_id, text="hello")
    code, reason, meta = await refused(
        stub.DeleteThread(ts.DeleteThreadRequest(thread_id=thread.thread_id, expected_revision=1))
    )
    assert (code, reason, meta) == (
        Code.ABORTED,
        "REVISION_CONFLICT",
        {"current_revision": str(done.revision)},
    )
    await stub.DeleteThread(
        ts.DeleteThreadRequest(thread_id=thread.thread_id, expected_revision=done.revision)
    )
    for call in (
        lambda: get_thread(stub, thread.thread_id),
        lambda: stub.GetCheckpoint(ts.GetCheckpointRequest(thread_id=thread.thread_id, revision=1)),
        lambda: stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread.thread_id)),
        lambda: stub.DeleteThread(ts.DeleteThreadRequest(thread_id=thread.thread_id)),
    ):
        assert (await refused(call()))[:2] == (Code.NOT_FOUND, "THREAD_NOT_FOUND")
    # The ID is free again: a new thread, with no trace of the old one's runs.
    again = await create_thread(stub, thread_id=thread.thread_id)
    assert again.revision == 1
    assert [c.kind for c in await list_checkpoints(stub, thread.thread_id)] == [
        thread_pb2.CHECKPOINT_KIND_CREATED
    ]
    replay = await run_thread(stub, thread.thread_id, text="hello", request_id=done.result.request_id)
    assert not replay.replayed, "run records went with the deleted thread"


async def test_a_running_thread_is_busy_for_runs_deletes_and_rollbacks_until_cancelled(stub: Stub) -> None:
    thread = await create_thread(stub)
    request_id = f"req-{uuid.uuid4().hex}"
    call = stub.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=thread_spec(thread.thread_id, text="sleep 30", request_id=request_id))
    )
    seen = await until_tool_runs(call)
    run_id = seen[0].run_id
    assert seen[0].WhichOneof("event") == "run_started" and run_id.startswith("run-")

    running = await get_thread(stub, thread.thread_id, full=True)
    assert running.status == thread_pb2.THREAD_STATUS_RUNNING
    assert (running.lease.run_id, running.lease.request_id) == (run_id, request_id)
    committed = [e.thread_committed.revision for e in seen if e.WhichOneof("event") == "thread_committed"]
    assert running.revision == (committed[-1] if committed else 1), "the last commit, not the run's progress"
    assert running.head.state == await checkpoint_state(stub, thread.thread_id, running.revision)

    now = datetime.now(UTC)
    for busy in (
        lambda: run_thread(stub, thread.thread_id, text="hello"),
        lambda: drained(
            stub.StreamThreadRun(ts.StreamThreadRunRequest(spec=thread_spec(thread.thread_id, text="hi")))
        ),
        lambda: stub.DeleteThread(ts.DeleteThreadRequest(thread_id=thread.thread_id)),
        lambda: stub.RollbackThread(ts.RollbackThreadRequest(thread_id=thread.thread_id, revision=1)),
    ):
        code, reason, meta = await refused(busy())
        assert (code, reason) == (Code.ABORTED, "THREAD_BUSY")
        assert (meta["run_id"], meta["request_id"]) == (run_id, request_id)
        expires = rfc3339(meta["lease_expires_at"])
        assert now - timedelta(seconds=2) < expires < now + timedelta(seconds=LEASE_TTL_S + 5)
    # A fork reads committed checkpoints only, so it works while the source runs.
    fork = (await stub.ForkThread(ts.ForkThreadRequest(thread_id=thread.thread_id))).thread
    assert fork.status == thread_pb2.THREAD_STATUS_IDLE

    cancelled_at = time.monotonic()
    status = await stub.CancelThreadRun(ts.CancelThreadRunRequest(thread_id=thread.thread_id, run_id=run_id))
    assert status.status in (thread_pb2.THREAD_RUN_STATUS_RUNNING, thread_pb2.THREAD_RUN_STATUS_CANCELLED)
    async for response in call:
        seen += events_of(response)
    assert time.monotonic() - cancelled_at < 20, "the run stopped, it did not sleep its 30 s out"
    assert [e.sequence for e in seen] == list(range(len(seen)))
    result, terminal = seen[-1], seen[-2]
    assert result.result.status == run_pb2.RUN_STATUS_CANCELLED
    assert terminal.thread_committed.kind == thread_pb2.CHECKPOINT_KIND_CANCELLED
    after = await get_thread(stub, thread.thread_id)
    assert after.status == thread_pb2.THREAD_STATUS_IDLE and not after.HasField("lease")
    assert (after.revision, after.head.kind) == (
        terminal.thread_committed.revision,
        terminal.thread_committed.kind,
    )
    again = await stub.CancelThreadRun(ts.CancelThreadRunRequest(thread_id=thread.thread_id, run_id=run_id))
    assert again.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED, (
        "a finished run reports its terminal status"
    )
    await stub.DeleteThread(ts.DeleteThreadRequest(thread_id=thread.thread_id))


async def test_cancel_names_a_run_of_this_thread(stub: Stub) -> None:
    thread = await create_thread(stub)
    done = await run_thread(stub, thread.thread_id, text="hello")
    finished = await stub.CancelThreadRun(
        ts.CancelThreadRunRequest(thread_id=thread.thread_id, run_id=done.result.run_id)
    )
    assert finished.status == thread_pb2.THREAD_RUN_STATUS_COMPLETED
    assert (await get_thread(stub, thread.thread_id)).revision == done.revision, "nothing changes"
    other = await create_thread(stub)
    for thread_id, run_id, code, reason in (
        (thread.thread_id, f"run-{uuid.uuid4().hex}", Code.NOT_FOUND, "RUN_NOT_FOUND"),
        (other.thread_id, done.result.run_id, Code.NOT_FOUND, "RUN_NOT_FOUND"),
        (fresh_thread_id(), done.result.run_id, Code.NOT_FOUND, "THREAD_NOT_FOUND"),
    ):
        request = ts.CancelThreadRunRequest(thread_id=thread_id, run_id=run_id)
        assert (await refused(stub.CancelThreadRun(request)))[:2] == (code, reason)


async def test_cancel_by_request_id_stops_the_request_a_host_knows_only_by_its_id(stub: Stub) -> None:
    thread = await create_thread(stub)
    request_id = f"req-{uuid.uuid4().hex}"
    call = stub.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=thread_spec(thread.thread_id, text="sleep 30", request_id=request_id))
    )
    seen = await until_tool_runs(call)
    run_id = seen[0].run_id
    other = await run_thread(stub, (await create_thread(stub)).thread_id, text="hello")
    for fields, code, reason, field in (
        ({"request_id": f"req-{uuid.uuid4().hex}"}, Code.NOT_FOUND, "RUN_NOT_FOUND", None),
        ({"request_id": request_id, "run_id": other.result.run_id}, Code.NOT_FOUND, "RUN_NOT_FOUND", None),
        ({}, Code.INVALID_ARGUMENT, "INPUT_INVALID", "run_id"),
        ({"request_id": "x" * 257}, Code.INVALID_ARGUMENT, "INPUT_INVALID", "request_id"),
    ):
        request = ts.CancelThreadRunRequest(thread_id=thread.thread_id, **fields)
        got_code, got_reason, meta = await refused(stub.CancelThreadRun(request))
        assert (got_code, got_reason) == (code, reason), fields
        if field is not None:
            assert meta.get("field") == field, (fields, meta)
        elif "run_id" not in fields:
            assert meta["request_id"] == fields["request_id"], "names the request it never had"
    assert (await get_thread(stub, thread.thread_id)).lease.run_id == run_id, "nothing was cancelled"

    both = ts.CancelThreadRunRequest(
        thread_id=thread.thread_id, run_id=run_id, request_id=f"req-{uuid.uuid4().hex}"
    )
    assert (await refused(stub.CancelThreadRun(both)))[:2] == (Code.INVALID_ARGUMENT, "INPUT_INVALID")

    asked = await stub.CancelThreadRun(
        ts.CancelThreadRunRequest(thread_id=thread.thread_id, request_id=request_id)
    )
    assert asked.status in (thread_pb2.THREAD_RUN_STATUS_RUNNING, thread_pb2.THREAD_RUN_STATUS_CANCELLED)
    async for response in call:
        seen += events_of(response)
    assert seen[-1].result.status == run_pb2.RUN_STATUS_CANCELLED and seen[-1].run_id == run_id
    again = await stub.CancelThreadRun(
        ts.CancelThreadRunRequest(thread_id=thread.thread_id, run_id=run_id, request_id=request_id)
    )
    assert again.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED, "both naming the one request: its status"


# --- checkpoints, streaming, RunThread -------------------------------------------------------------------


async def test_stream_thread_run_events_commits_and_checkpoints_agree(stub: Stub) -> None:
    thread = await create_thread(stub)
    request_id = f"req-{uuid.uuid4().hex}"
    events = await stream_thread(stub, thread.thread_id, text="lookup grpc", request_id=request_id)
    kinds = [e.WhichOneof("event") for e in events]
    assert [e.sequence for e in events] == list(range(len(events)))
    assert kinds[0] == "run_started" and kinds[-1] == "result" and kinds.count("result") == 1
    assert "checkpoint_candidate" not in kinds, "the server commits checkpoints itself"
    assert kinds[-2] == "thread_committed", "the terminal commit comes right before the result"
    assert len({(e.thread_id, e.run_id) for e in events}) == 1
    result = events[-1].result
    assert not result.HasField("state"), "the state is the checkpoint, not part of the answer"
    assert completed_output(result).startswith("Tool results: lookup: gRPC is a remote")
    assert (result.thread_id, result.request_id, result.run_id) == (
        thread.thread_id,
        request_id,
        events[0].run_id,
    )
    commits = [e.thread_committed for e in events if e.WhichOneof("event") == "thread_committed"]
    assert [c.revision for c in commits] == list(range(2, 2 + len(commits)))
    assert [c.kind for c in commits[:-1]] == [thread_pb2.CHECKPOINT_KIND_MID_RUN] * (len(commits) - 1)
    assert commits[-1].kind == thread_pb2.CHECKPOINT_KIND_COMPLETED and len(commits) >= 2
    assert not any(c.replayed for c in commits)

    listed = await list_checkpoints(stub, thread.thread_id)
    assert [(c.revision, c.kind) for c in listed] == [
        *((c.revision, c.kind) for c in reversed(commits)),
        (1, thread_pb2.CHECKPOINT_KIND_CREATED),
    ]
    assert all((c.run_id, c.request_id) == (result.run_id, request_id) for c in listed[:-1])
    assert (listed[-1].run_id, listed[-1].request_id) == ("", "")
    assert not any(c.HasField("state") for c in listed), "listings carry no states"
    assert await list_checkpoints(stub, thread.thread_id, page_size=1) == listed
    head = await get_thread(stub, thread.thread_id, full=True)
    assert head.revision == commits[-1].revision and head.head.kind == thread_pb2.CHECKPOINT_KIND_COMPLETED
    final = await stub.GetCheckpoint(
        ts.GetCheckpointRequest(thread_id=thread.thread_id, revision=head.revision)
    )
    assert final.checkpoint.state == head.head.state
    assert user_prompts(final.checkpoint.state) == ["lookup grpc"]
    for checkpoint in listed:
        state = await checkpoint_state(stub, thread.thread_id, checkpoint.revision)
        assert state.thread_id == thread.thread_id
    code, reason, _ = await refused(
        stub.GetCheckpoint(ts.GetCheckpointRequest(thread_id=thread.thread_id, revision=head.revision + 1))
    )
    assert (code, reason) == (Code.NOT_FOUND, "CHECKPOINT_NOT_FOUND")


async def test_a_replayed_stream_is_its_start_its_terminal_commit_and_its_result(stub: Stub) -> None:
    thread = await create_thread(stub)
    request_id = f"req-{uuid.uuid4().hex}"
    live = await stream_thread(stub, thread.thread_id, text="lookup grpc", request_id=request_id)
    replay = await stream_thread(stub, thread.thread_id, text="lookup grpc", request_id=request_id)
    assert [(e.sequence, e.WhichOneof("event")) for e in replay] == [
        (0, "run_started"),
        (1, "thread_committed"),
        (2, "result"),
    ]
    assert {(e.thread_id, e.run_id) for e in replay} == {(thread.thread_id, live[0].run_id)}
    terminal = live[-2].thread_committed
    assert replay[1].thread_committed == events_pb2.ThreadCommitted(
        revision=terminal.revision, kind=terminal.kind, replayed=True
    )
    assert replay[2].result == live[-1].result


async def test_stream_thread_run_packs_events_when_asked(stub: Stub) -> None:
    thread = await create_thread(stub)
    request = ts.StreamThreadRunRequest(
        spec=thread_spec(thread.thread_id, text="say several words in a row"), max_events_per_message=64
    )
    responses = [response async for response in stub.StreamThreadRun(request)]
    assert all(not r.HasField("event") and r.events for r in responses)
    events = [e for r in responses for e in r.events]
    assert [e.sequence for e in events] == list(range(len(events)))
    assert [e.WhichOneof("event") for e in events[-2:]] == ["thread_committed", "result"]
    assert len(responses) < len(events)


async def test_run_thread_continues_across_turns(stub: Stub) -> None:
    thread = await create_thread(stub)
    answers = [
        await run_thread(stub, thread.thread_id, text=text) for text in ("count", "count again", "count more")
    ]
    assert [completed_output(a.result) for a in answers] == [f"Tool results: count: {n}" for n in (1, 2, 3)]
    assert all(not a.replayed and not a.result.HasField("state") for a in answers)
    assert [a.revision for a in answers] == sorted({a.revision for a in answers})
    head = await get_thread(stub, thread.thread_id, full=True)
    assert head.revision == answers[-1].revision
    assert user_prompts(head.head.state) == ["count", "count again", "count more"]


async def test_a_request_without_an_id_gets_one_it_can_retry_with(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(stub, thread.thread_id, text="hello", request_id="")
    assert first.result.request_id, "the server made the request's ID"
    again = await run_thread(stub, thread.thread_id, text="hello", request_id=first.result.request_id)
    assert again.replayed and (again.revision, again.result) == (first.revision, first.result)


# --- answers by call ID ----------------------------------------------------------------------------------


async def test_answers_by_call_id_resume_a_suspended_thread(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(stub, thread.thread_id, text="delete a.txt")
    assert first.result.status == run_pb2.RUN_STATUS_SUSPENDED
    assert first.result.suspend_reason == run_pb2.SUSPEND_REASON_DEFERRED
    suspended = await get_thread(stub, thread.thread_id)
    assert suspended.status == thread_pb2.THREAD_STATUS_SUSPENDED
    assert batch(suspended.pending) == batch(first.result.deferred) == batch(suspended.head.pending)
    assert suspended.head.kind == thread_pb2.CHECKPOINT_KIND_SUSPENDED
    [approval] = first.result.deferred.approvals

    # A missing, extra or miscategorised answer is refused before anything is written: the same
    # request ID then still works with the right answers.
    request_id = f"req-{uuid.uuid4().hex}"
    wrong_id = deferred_pb2.DeferredToolResults(
        approvals=[
            deferred_pb2.ApprovalResult(tool_call_id="call_nope", approved=deferred_pb2.ToolApproved())
        ]
    )
    as_a_call = deferred_pb2.DeferredToolResults(
        calls=[deferred_pb2.CallResult(tool_call_id=approval.tool_call_id, value_json="1")]
    )
    for bad in (wrong_id, as_a_call):
        code, reason, _ = await refused(
            run_thread(stub, thread.thread_id, request_id=request_id, answers=bad)
        )
        assert (code, reason) == (Code.INVALID_ARGUMENT, "DEFERRED_RESULTS_INCOMPLETE")
    assert await get_thread(stub, thread.thread_id) == suspended

    approved = await run_thread(
        stub, thread.thread_id, request_id=request_id, answers=approve_all(first.result.deferred)
    )
    assert not approved.replayed
    assert completed_output(approved.result) == "Tool results: delete_file: Deleted a.txt."
    idle = await get_thread(stub, thread.thread_id, full=True)
    assert idle.status == thread_pb2.THREAD_STATUS_IDLE and not idle.HasField("pending")
    assert tool_returns(idle.head.state) == [("delete_file", approval.tool_call_id)]

    code, reason, meta = await refused(
        run_thread(stub, thread.thread_id, answers=approve_all(first.result.deferred))
    )
    assert (code, reason) == (Code.FAILED_PRECONDITION, "THREAD_NOT_SUSPENDED")
    # The status in metadata is spelt as the enum spells `Thread.status`: "THREAD_STATUS_IDLE". The rest
    # names who consumed the batch these answers were for (LIVE §5.5): a lost reply's retry under a new
    # request id learns its answers were taken, by which request, and what that request committed.
    assert meta == {
        "thread_id": thread.thread_id,
        "status": thread_pb2.ThreadStatus.Name(idle.status),
        "request_id": request_id,
        "revision": str(first.revision),
        "answered": "answers",
        "run_revision": str(approved.revision),
        "matches": "true",
    }


async def test_answers_with_a_prompt_put_the_tool_results_first(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(stub, thread.thread_id, text="delete e.txt")
    assert first.result.status == run_pb2.RUN_STATUS_SUSPENDED
    done = await run_thread(
        stub, thread.thread_id, text="and now?", answers=approve_all(first.result.deferred)
    )
    assert completed_output(done.result) == "Tool results: delete_file: Deleted e.txt."
    history = messages(await checkpoint_state(stub, thread.thread_id, done.revision))
    assert [m["kind"] for m in history] == ["request", "response", "request", "response"]
    answered = history[2]["parts"]
    assert [p["part_kind"] for p in answered] == ["tool-return", "user-prompt"]
    assert (answered[0]["tool_call_id"], answered[1]["content"]) == (
        first.result.deferred.approvals[0].tool_call_id,
        "and now?",
    )


async def test_a_denial_reaches_the_model(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(stub, thread.thread_id, text="delete b.txt")
    [approval] = first.result.deferred.approvals
    denial = deferred_pb2.DeferredToolResults(
        approvals=[
            deferred_pb2.ApprovalResult(
                tool_call_id=approval.tool_call_id, denied=deferred_pb2.ToolDenied(message="Not today.")
            )
        ]
    )
    second = await run_thread(stub, thread.thread_id, answers=denial)
    assert completed_output(second.result) == "Tool results: delete_file: Not today."


async def test_a_client_tool_is_answered_with_the_tools_the_call_was_made_with(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(
        stub, thread.thread_id, text='client:get_weather {"city": "Oslo"}', client_tools=[WEATHER]
    )
    assert first.result.status == run_pb2.RUN_STATUS_SUSPENDED
    [call] = first.result.deferred.calls
    assert call.target_identity == "tool/threadline.client/get_weather"
    assert list((await get_thread(stub, thread.thread_id)).head.client_tools) == [WEATHER]
    # No client tools declared on the resume: the head checkpoint's are used.
    second = await run_thread(stub, thread.thread_id, answers=answer_calls(first.result.deferred, '"rainy"'))
    assert completed_output(second.result) == "Tool results: get_weather: rainy"
    # A plain prompt that declares none has none.
    third = await run_thread(stub, thread.thread_id, text="client:get_weather")
    assert third.result.status == run_pb2.RUN_STATUS_COMPLETED


async def test_a_prompt_without_answers_continues_a_suspended_thread(stub: Stub) -> None:
    thread = await create_thread(stub)
    first = await run_thread(stub, thread.thread_id, text="delete c.txt")
    assert first.result.status == run_pb2.RUN_STATUS_SUSPENDED
    second = await run_thread(stub, thread.thread_id, text="never mind")
    assert "Deleted" not in completed_output(second.result), "an unanswered approval never runs its tool"
    after = await get_thread(stub, thread.thread_id)
    assert after.status == thread_pb2.THREAD_STATUS_IDLE and not after.HasField("pending")


# --- ForkThread, RollbackThread ---------------------------------------------------------------------------


async def test_fork_of_the_head_and_of_an_earlier_revision(stub: Stub) -> None:
    source = await create_thread(stub)
    counted = await run_thread(stub, source.thread_id, text="count")
    fork_id = fresh_thread_id("fork")
    fork = (
        await stub.ForkThread(
            ts.ForkThreadRequest(thread_id=source.thread_id, new_thread_id=fork_id, labels={"from": "head"})
        )
    ).thread
    assert (fork.thread_id, fork.agent, fork.revision) == (fork_id, source.agent, 1)
    assert fork.head.kind == thread_pb2.CHECKPOINT_KIND_FORKED and dict(fork.labels) == {"from": "head"}
    forked_state = await checkpoint_state(stub, fork_id, 1)
    source_state = await checkpoint_state(stub, source.thread_id, counted.revision)
    assert forked_state.thread_id == fork_id
    assert forked_state.message_history.data == source_state.message_history.data
    assert (
        completed_output((await run_thread(stub, fork_id, text="count")).result) == "Tool results: count: 2"
    )
    assert (
        completed_output((await run_thread(stub, source.thread_id, text="count")).result)
        == "Tool results: count: 2"
    )

    early = (await stub.ForkThread(ts.ForkThreadRequest(thread_id=source.thread_id, revision=1))).thread
    assert early.thread_id.startswith("thread_") and early.revision == 1
    assert (await checkpoint_state(stub, early.thread_id, 1)).message_history.message_count == 0

    for request, code, reason in (
        (
            ts.ForkThreadRequest(thread_id=source.thread_id, new_thread_id=source.thread_id),
            Code.INVALID_ARGUMENT,
            "FORK_THREAD_ID_CONFLICT",
        ),
        (
            ts.ForkThreadRequest(thread_id=source.thread_id, new_thread_id=fork_id),
            Code.ALREADY_EXISTS,
            "THREAD_EXISTS",
        ),
        (
            ts.ForkThreadRequest(thread_id=source.thread_id, revision=999),
            Code.NOT_FOUND,
            "CHECKPOINT_NOT_FOUND",
        ),
        (ts.ForkThreadRequest(thread_id=fresh_thread_id()), Code.NOT_FOUND, "THREAD_NOT_FOUND"),
    ):
        assert (await refused(stub.ForkThread(request)))[:2] == (code, reason), request


async def test_a_fork_of_a_suspended_checkpoint_is_suspended_on_the_same_calls(stub: Stub) -> None:
    source = await create_thread(stub)
    suspended = await run_thread(stub, source.thread_id, text="delete d.txt")
    # The source moves on; the fork goes back to the suspended checkpoint.
    await run_thread(stub, source.thread_id, answers=approve_all(suspended.result.deferred))
    fork = (
        await stub.ForkThread(ts.ForkThreadRequest(thread_id=source.thread_id, revision=suspended.revision))
    ).thread
    assert fork.status == thread_pb2.THREAD_STATUS_SUSPENDED
    assert call_ids(fork.pending) == call_ids(suspended.result.deferred)
    assert batch(fork.pending) == batch(fork.head.pending)
    answered = await run_thread(stub, fork.thread_id, answers=approve_all(fork.pending))
    assert completed_output(answered.result) == "Tool results: delete_file: Deleted d.txt."


async def test_rollback_copies_a_checkpoint_and_its_status_follows(stub: Stub) -> None:
    thread = await create_thread(stub)
    suspended = await run_thread(
        stub, thread.thread_id, text='client:get_weather {"city": "Rome"}', client_tools=[WEATHER]
    )
    done = await run_thread(
        stub, thread.thread_id, answers=answer_calls(suspended.result.deferred, '"rainy"')
    )
    assert completed_output(done.result) == "Tool results: get_weather: rainy"

    stale = ts.RollbackThreadRequest(
        thread_id=thread.thread_id, revision=suspended.revision, expected_revision=suspended.revision
    )
    code, reason, meta = await refused(stub.RollbackThread(stale))
    assert (code, reason, meta) == (
        Code.ABORTED,
        "REVISION_CONFLICT",
        {"current_revision": str(done.revision)},
    )

    rolled = (
        await stub.RollbackThread(
            ts.RollbackThreadRequest(
                thread_id=thread.thread_id, revision=suspended.revision, expected_revision=done.revision
            )
        )
    ).thread
    assert (rolled.revision, rolled.head.kind) == (done.revision + 1, thread_pb2.CHECKPOINT_KIND_ROLLED_BACK)
    assert rolled.status == thread_pb2.THREAD_STATUS_SUSPENDED
    assert batch(rolled.pending) == batch(suspended.result.deferred)
    assert list(rolled.head.client_tools) == [WEATHER]
    copied = await checkpoint_state(stub, thread.thread_id, rolled.revision)
    assert (
        copied.message_history
        == (await checkpoint_state(stub, thread.thread_id, suspended.revision)).message_history
    )
    again = await run_thread(stub, thread.thread_id, answers=answer_calls(rolled.pending, '"sunny"'))
    assert completed_output(again.result) == "Tool results: get_weather: sunny"
    listed = await list_checkpoints(stub, thread.thread_id)
    assert [c.revision for c in listed] == list(range(again.revision, 0, -1)), "nothing is deleted"

    empty = (
        await stub.RollbackThread(ts.RollbackThreadRequest(thread_id=thread.thread_id, revision=1))
    ).thread
    assert empty.status == thread_pb2.THREAD_STATUS_IDLE and not empty.HasField("pending")
    assert (await checkpoint_state(stub, thread.thread_id, empty.revision)).message_history.message_count == 0
    for request, code, reason in (
        (
            ts.RollbackThreadRequest(thread_id=thread.thread_id, revision=999),
            Code.NOT_FOUND,
            "CHECKPOINT_NOT_FOUND",
        ),
        (
            ts.RollbackThreadRequest(thread_id=fresh_thread_id(), revision=1),
            Code.NOT_FOUND,
            "THREAD_NOT_FOUND",
        ),
    ):
        assert (await refused(stub.RollbackThread(request)))[:2] == (code, reason)


async def test_rollback_to_the_head_repeats_it_as_a_new_revision(stub: Stub) -> None:
    thread = await create_thread(stub)
    suspended = await run_thread(stub, thread.thread_id, text="delete f.txt")
    head = ts.RollbackThreadRequest(
        thread_id=thread.thread_id, revision=suspended.revision, expected_revision=suspended.revision
    )
    rolled = (await stub.RollbackThread(head)).thread
    assert (rolled.revision, rolled.head.kind) == (
        suspended.revision + 1,
        thread_pb2.CHECKPOINT_KIND_ROLLED_BACK,
    )
    assert rolled.status == thread_pb2.THREAD_STATUS_SUSPENDED and not rolled.recovery_pending
    assert batch(rolled.pending) == batch(suspended.result.deferred)
    assert await checkpoint_state(stub, thread.thread_id, rolled.revision) == await checkpoint_state(
        stub, thread.thread_id, suspended.revision
    )
    done = await run_thread(stub, thread.thread_id, answers=approve_all(rolled.pending))
    assert completed_output(done.result) == "Tool results: delete_file: Deleted f.txt."


# --- bad input to every RPC: typed, never INTERNAL or UNKNOWN ---------------------------------------------

INVALID = Code.INVALID_ARGUMENT
Refusals = set[tuple[grpc.StatusCode, str]]
ID_REFUSALS: Refusals = {(INVALID, "INPUT_INVALID"), (INVALID, "STATE_INVALID")}
"""A missing or malformed thread ID: the spec names no single reason; both are INVALID_ARGUMENT."""
LOOKUP_REFUSALS: Refusals = {*ID_REFUSALS, (Code.NOT_FOUND, "THREAD_NOT_FOUND")}
"""A malformed ID to look up may also simply not be found."""
NOT_FOUND: Refusals = {(Code.NOT_FOUND, "THREAD_NOT_FOUND")}
NO_STATE: Refusals = {(INVALID, "INPUT_INVALID"), (Code.FAILED_PRECONDITION, "DEFERRED_STATE_REQUIRED")}
BAD_REVISION: Refusals = {(INVALID, "INPUT_INVALID"), (Code.NOT_FOUND, "CHECKPOINT_NOT_FOUND")}
CONFLICT: Refusals = {(Code.ABORTED, "REVISION_CONFLICT")}
INPUT: Refusals = {(INVALID, "INPUT_INVALID")}
EXISTING = "existing_thread"
"""Stands for the ID of a new IDLE thread the test creates for the case (`with_thread`)."""
UNKNOWN = fresh_thread_id("nobody")
RUN_ID = "run-" + "0" * 32
PENDING = deferred_pb2.DeferredToolRequests(
    approvals=[
        deferred_pb2.DeferredToolCall(
            tool_call_id="call_1_delete_file",
            tool_name="delete_file",
            args_json='{"path":"a.txt"}',
            kind=deferred_pb2.DEFERRED_KIND_APPROVAL,
        )
    ]
)
"""A well-formed pending batch to misuse (no state, a thread that is not suspended)."""
BAD_LABELS = {
    "upper-case key": {"Team": "x"},
    "empty key": {"": "x"},
    "key starting with a digit": {"1team": "x"},
    "key of 64 characters": {"k" * 64: "x"},
    "key with a space": {"a b": "x"},
    "key with a trailing newline": {"a\n": "v"},
    "value of 257 characters": {"team": "v" * 257},
    "33 labels": {f"k{i}": "" for i in range(33)},
}
BAD_IDS = {"malformed": "Not Valid!", "too long": "a_" + "b" * 300, "path-like": "../x"}


def thread_request(method: str, **fields: Any) -> Message:
    """A request to `method`; for the two run RPCs, `fields` are the `ThreadRunSpec`'s."""
    if method == "RunThread":
        return ts.RunThreadRequest(spec=ts.ThreadRunSpec(**fields))
    if method == "StreamThreadRun":
        return ts.StreamThreadRunRequest(spec=ts.ThreadRunSpec(**fields))
    request = GetMessageClass(SERVICE.methods_by_name[method].input_type)(**fields)
    assert isinstance(request, Message)
    return request


def with_thread(request: Message, thread_id: str) -> Message:
    """`request` with `EXISTING` replaced by `thread_id` (in `thread_id` or `spec.thread_id`)."""
    copy = type(request)()
    copy.CopyFrom(request)
    target: Any = cast(Any, copy).spec if "spec" in copy.DESCRIPTOR.fields_by_name else copy
    if "thread_id" in target.DESCRIPTOR.fields_by_name and target.thread_id == EXISTING:
        target.thread_id = thread_id
    return copy


def bad_input_cases() -> dict[str, tuple[str, Message, Refusals]]:
    """name -> (method, request, the refusals the spec allows for it)."""
    cases: dict[str, tuple[str, Message, Refusals]] = {}

    def add(name: str, method: str, allowed: Refusals, **fields: Any) -> None:
        cases[name] = (method, thread_request(method, **fields), allowed)

    for label, labels in BAD_LABELS.items():
        add(f"CreateThread labels: {label}", "CreateThread", INPUT, labels=labels)
        add(f"ForkThread labels: {label}", "ForkThread", INPUT, thread_id=EXISTING, labels=labels)
    for label, bad_id in BAD_IDS.items():
        add(f"CreateThread thread_id {label}", "CreateThread", ID_REFUSALS, thread_id=bad_id)
        add(
            f"ForkThread new_thread_id {label}",
            "ForkThread",
            ID_REFUSALS,
            thread_id=EXISTING,
            new_thread_id=bad_id,
        )
        add(f"GetThread thread_id {label}", "GetThread", LOOKUP_REFUSALS, thread_id=bad_id)
        add(f"RunThread thread_id {label}", "RunThread", LOOKUP_REFUSALS, thread_id=bad_id, text="hi")
    add("CreateThread unknown agent", "CreateThread", {(INVALID, "AGENT_UNKNOWN")}, agent="nobody")
    add("CreateThread pending without a state", "CreateThread", NO_STATE, pending=PENDING)
    accepted = deferred_pb2.DeferredToolResume(requests=PENDING, results=approve_all(PENDING))
    add("CreateThread accepted without a state", "CreateThread", NO_STATE, accepted=accepted)
    needs_thread: dict[str, dict[str, Any]] = {
        "GetThread": {},
        "DeleteThread": {},
        "ListCheckpoints": {},
        "GetCheckpoint": {"revision": 1},
        "ForkThread": {},
        "RollbackThread": {"revision": 1},
        "RunThread": {"text": "hi"},
        "StreamThreadRun": {"text": "hi"},
        "CancelThreadRun": {"run_id": RUN_ID},
    }
    for method, fields in needs_thread.items():
        add(f"{method} without a thread_id", method, ID_REFUSALS, **fields)
        add(f"{method} of an unknown thread", method, NOT_FOUND, thread_id=UNKNOWN, **fields)
    for label, paging in (
        ("page_size 1001", {"page_size": 1001}),
        ("negative page_size", {"page_size": -1}),
        ("made-up page_token", {"page_token": "not-a-token"}),
    ):
        add(f"ListThreads {label}", "ListThreads", INPUT, **paging)
        add(f"ListCheckpoints {label}", "ListCheckpoints", INPUT, thread_id=EXISTING, **paging)
    add("ListThreads label without '='", "ListThreads", INPUT, labels=["team"])
    add("ListThreads unknown status", "ListThreads", INPUT, status=99)
    add("GetThread unknown view", "GetThread", INPUT, thread_id=EXISTING, view=99)
    for revision in (0, -1):
        add(
            f"GetCheckpoint revision {revision}",
            "GetCheckpoint",
            BAD_REVISION,
            thread_id=EXISTING,
            revision=revision,
        )
        add(
            f"RollbackThread revision {revision}",
            "RollbackThread",
            BAD_REVISION,
            thread_id=EXISTING,
            revision=revision,
        )
    add("ForkThread revision -1", "ForkThread", BAD_REVISION, thread_id=EXISTING, revision=-1)
    add(
        "GetCheckpoint revision 2 of 1",
        "GetCheckpoint",
        {(Code.NOT_FOUND, "CHECKPOINT_NOT_FOUND")},
        thread_id=EXISTING,
        revision=2,
    )
    add("DeleteThread expected_revision 7", "DeleteThread", CONFLICT, thread_id=EXISTING, expected_revision=7)
    add(
        "DeleteThread expected_revision -1",
        "DeleteThread",
        CONFLICT | INPUT,
        thread_id=EXISTING,
        expected_revision=-1,
    )
    add(
        "RollbackThread expected_revision 7",
        "RollbackThread",
        CONFLICT,
        thread_id=EXISTING,
        revision=1,
        expected_revision=7,
    )
    no_run = INPUT | {(Code.NOT_FOUND, "RUN_NOT_FOUND")}
    add("CancelThreadRun without a run_id", "CancelThreadRun", no_run, thread_id=EXISTING)
    add("CancelThreadRun malformed run_id", "CancelThreadRun", no_run, thread_id=EXISTING, run_id="nope")
    add(
        "CancelThreadRun unknown request_id", "CancelThreadRun", no_run, thread_id=EXISTING, request_id="nope"
    )
    not_an_object = run_pb2.ClientTool(name="x", parameters_json_schema='{"type":"string"}')
    run_cases: dict[str, tuple[dict[str, Any], Refusals]] = {
        "request_id of 129 characters": ({"text": "hi", "request_id": "r" * 129}, INPUT),
        "unknown tool_recovery": ({"text": "hi", "tool_recovery": 99}, {(INVALID, "TOOL_RECOVERY_INVALID")}),
        "busy_strategy 5": ({"text": "hi", "busy_strategy": 5}, INPUT),
        "busy_strategy 99": ({"text": "hi", "busy_strategy": 99}, INPUT),
        "expected_revision 5 of 1": ({"text": "hi", "expected_revision": 5}, CONFLICT),
        "negative expected_revision": ({"text": "hi", "expected_revision": -1}, CONFLICT | INPUT),
        "answers on an idle thread": (
            {"answers": approve_all(PENDING)},
            {(Code.FAILED_PRECONDITION, "THREAD_NOT_SUSPENDED")},
        ),
        "invalid client tool": (
            {"text": "hi", "client_tools": [not_an_object]},
            {(INVALID, "CLIENT_TOOL_INVALID")},
        ),
        "negative usage limit": (
            {"text": "hi", "usage_limits": run_pb2.UsageLimits(request_limit=-1)},
            INPUT,
        ),
        "empty prompt": ({"text": ""}, {(INVALID, "INPUT_EMPTY")}),
    }
    for label, (fields, allowed) in run_cases.items():
        for method in ("RunThread", "StreamThreadRun"):
            add(f"{method} {label}", method, allowed, thread_id=EXISTING, **fields)
    return cases


BAD_INPUT = bad_input_cases()


@pytest.mark.parametrize("name", list(BAD_INPUT))
async def test_bad_input_is_typed(stub: Stub, name: str) -> None:
    method, template, allowed = BAD_INPUT[name]
    thread = await create_thread(stub)
    call = getattr(stub, method)(with_thread(template, thread.thread_id))
    code, reason, _ = await refused(
        drained(call) if SERVICE.methods_by_name[method].server_streaming else call
    )
    assert (code, reason) in allowed, (name, code, reason)
    after = await get_thread(stub, thread.thread_id)
    assert (after.revision, after.status) == (1, thread_pb2.THREAD_STATUS_IDLE), "a refusal changes nothing"


async def test_revision_conflict_names_the_current_revision(stub: Stub) -> None:
    thread = await create_thread(stub)
    code, reason, meta = await refused(run_thread(stub, thread.thread_id, text="hi", expected_revision=5))
    assert (code, reason, meta) == (Code.ABORTED, "REVISION_CONFLICT", {"current_revision": "1"})
    done = await run_thread(stub, thread.thread_id, text="hi", expected_revision=1)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED


async def test_busy_strategy_reject_is_accepted(stub: Stub) -> None:
    thread = await create_thread(stub)
    done = await run_thread(stub, thread.thread_id, text="hi", busy_strategy=ts.BUSY_STRATEGY_REJECT)
    assert completed_output(done.result) == "You said: hi"


# --- the server: GetServerInfo, --store, --token, health, reflection ----------------------------------


async def test_server_info_names_the_memory_store_and_its_lease_ttl(harness: Harness) -> None:
    info = await harness.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
    assert info.thread_store.kind == harness_service_pb2.THREAD_STORE_KIND_MEMORY
    assert info.thread_store.lease_ttl.ToTimedelta() == timedelta(seconds=LEASE_TTL_S)
    assert (info.thread_store.max_run_attempts, info.thread_store.max_queued_runs) == (3, 16), "the defaults"


async def test_a_sqlite_store_is_reported_and_keeps_threads_across_restarts(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'threads.db'}"
    thread_id = fresh_thread_id()
    with logged_serve("--store", store) as first:
        async with grpc.aio.insecure_channel(first.address) as channel:
            info = await harness_service_pb2_grpc.HarnessServiceStub(channel).GetServerInfo(
                harness_service_pb2.GetServerInfoRequest()
            )
            assert info.thread_store.kind == harness_service_pb2.THREAD_STORE_KIND_SQLITE
            assert info.thread_store.lease_ttl.ToTimedelta() == timedelta(seconds=30), "the default"
            await create_thread(thread_service_pb2_grpc.ThreadServiceStub(channel), thread_id=thread_id)
            done = await run_thread(
                thread_service_pb2_grpc.ThreadServiceStub(channel), thread_id, text="hello"
            )
        assert first.stop() == 0
    with logged_serve("--store", store) as second:
        async with grpc.aio.insecure_channel(second.address) as channel:
            kept = await get_thread(thread_service_pb2_grpc.ThreadServiceStub(channel), thread_id, full=True)
            assert kept.revision == done.revision and user_prompts(kept.head.state) == ["hello"]


async def test_store_none_serves_no_thread_service() -> None:
    with logged_serve("--store", "none") as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            info = await harness_service_pb2_grpc.HarnessServiceStub(channel).GetServerInfo(
                harness_service_pb2.GetServerInfoRequest()
            )
            assert info.thread_store.kind == harness_service_pb2.THREAD_STORE_KIND_NONE
            for method in SERVICE.methods:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await raw_call(channel, method.name, b"")
                assert caught.value.code() == Code.UNIMPLEMENTED, method.name
            result = await host_run(harness_service_pb2_grpc.HarnessServiceStub(channel), text="hello")
            assert completed_output(result) == "You said: hello", "HarnessService is unaffected"


async def raw_call(channel: grpc.aio.Channel, method: str, body: bytes, **kwargs: Any) -> list[bytes]:
    """Call a ThreadService method with a raw body (identity serializers); its response bodies."""
    path = f"/{SERVICE.full_name}/{method}"
    # Untyped on purpose: the bodies are raw bytes, with grpc's identity serializers.
    if SERVICE.methods_by_name[method].server_streaming:
        streaming: Any = channel.unary_stream(path)
        return [response async for response in streaming(body, timeout=20, **kwargs)]
    unary: Any = channel.unary_unary(path)
    return [await unary(body, timeout=20, **kwargs)]


async def test_with_a_token_every_thread_rpc_needs_it() -> None:
    with logged_serve("--store", "memory", "--token", "s3cret-token") as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            good = (("authorization", "Bearer s3cret-token"),)
            for method in SERVICE.methods:
                for metadata, reason in (
                    ((), "TOKEN_MISSING"),
                    ((("authorization", "Bearer wrong"),), "TOKEN_INVALID"),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as caught:
                        await raw_call(channel, method.name, b"", metadata=metadata)
                    code, got, _ = refusal(caught.value)
                    assert (code, got) == (Code.UNAUTHENTICATED, reason), method.name
                # With the token the call gets past auth: an empty request is judged on its merits.
                try:
                    await raw_call(channel, method.name, b"", metadata=good)
                except grpc.aio.AioRpcError as error:
                    assert refusal(error)[0] not in (Code.UNAUTHENTICATED, Code.INTERNAL, Code.UNKNOWN), (
                        method.name
                    )
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            created = (await stub.CreateThread(ts.CreateThreadRequest(), metadata=good)).thread
            done = await stub.RunThread(
                ts.RunThreadRequest(spec=thread_spec(created.thread_id, text="hi")), metadata=good
            )
            assert completed_output(done.result) == "You said: hi"
            # Health and reflection stay open.
            health = await health_stub(channel).Check(
                health_pb2.HealthCheckRequest(service=SERVICE.full_name)
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING


def health_stub(channel: grpc.aio.Channel) -> Any:
    """The health stub on an aio channel (its generated stubs are typed for sync channels only)."""
    return health_pb2_grpc.HealthStub(channel)


def reflection_stub(channel: grpc.aio.Channel) -> Any:
    """The reflection stub on an aio channel (typed for sync channels only, like health's)."""
    return reflection_pb2_grpc.ServerReflectionStub(channel)  # type: ignore[arg-type]


async def list_services(channel: grpc.aio.Channel) -> list[str]:
    stub = reflection_stub(channel)
    call = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    async for response in call:
        return [s.name for s in response.list_services_response.service]
    return []


async def test_health_and_reflection_name_the_thread_service(channel: grpc.aio.Channel) -> None:
    health = health_stub(channel)
    for service in (SERVICE.full_name, "threadline.v1.HarnessService", ""):
        response = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert response.status == health_pb2.HealthCheckResponse.SERVING, service
    assert SERVICE.full_name in await list_services(channel)
    reflection = reflection_stub(channel)
    request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE.full_name)
    async for response in reflection.ServerReflectionInfo(iter([request])):
        assert response.file_descriptor_response.file_descriptor_proto, response
        break


def test_the_server_logged_no_error_and_stops_cleanly(served: LoggedServe) -> None:
    """Last in the module, after every test above used the shared server: no error in its log."""
    assert served.stop() == 0
    errors = [
        record
        for record in served.records()
        if record["level"] in ("error", "critical") or record.get("status") == "internal_error"
    ]
    assert not errors, errors[:5]
