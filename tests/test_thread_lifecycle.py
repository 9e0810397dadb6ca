"""Thread runs that end early (THREADS §7 "Errors and cancellation", "Import, fork, rollback, delete").

Each test drives a real `threadline serve` on an SQLite file of its own, stops or kills it where the test
says, and reads the thread back from a fresh server on the same file: a drained run commits CANCELLED
and replays; a run whose server was killed is cancelled at once; a phase B failure leaves the thread
suspended on its batch; a rollback to the head after a crashed resume drops the batch it had retained;
a caller that stops reading is dropped while its run goes on and commits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from conftest import ServeProcess, completed_output, error_info, refusal
from thread_agents import markers
from threadline.v1 import deferred_pb2, run_pb2, thread_pb2, thread_service_pb2
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub

from harness.threads import LISTENER_BACKLOG

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent
LEASE_TTL = 3.0
DEADLINE = 60.0


@dataclass
class Store:
    """One SQLite file and the server currently serving it."""

    spawn: Callable[..., ServeProcess]
    tmp: Path
    server: ServeProcess | None = None
    channel: grpc.aio.Channel | None = None

    async def start(self, *extra: str) -> ThreadServiceStub:
        env = {
            "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p),
            "THREADLINE_TOOL_LOG": str(self.tmp / "tools.jsonl"),
            "THREADLINE_GATE": str(self.tmp / "gate"),
        }
        args = ("--store", f"sqlite:{self.tmp / 'threads.sqlite3'}", "--lease-ttl", str(LEASE_TTL), *extra)
        self.server = await asyncio.to_thread(self.spawn, *args, env=env)
        if self.channel is not None:
            await self.channel.close()
        self.channel = grpc.aio.insecure_channel(self.server.address)
        return ThreadServiceStub(self.channel)

    async def stop(self, signum: int) -> None:
        assert self.server is not None
        self.server.process.send_signal(signum)
        await asyncio.to_thread(self.server.process.wait, 30)


@pytest.fixture
async def store(serve_process: Callable[..., ServeProcess], tmp_path: Path) -> AsyncIterator[Store]:
    opened = Store(serve_process, tmp_path)
    yield opened
    if opened.channel is not None:
        await opened.channel.close()


def spec(thread_id: str, request_id: str, **fields: object) -> thread_service_pb2.ThreadRunSpec:
    return thread_service_pb2.ThreadRunSpec(thread_id=thread_id, request_id=request_id, **fields)  # type: ignore[arg-type]


async def run(
    stub: ThreadServiceStub, thread_spec: thread_service_pb2.ThreadRunSpec
) -> thread_service_pb2.RunThreadResponse:
    return await stub.RunThread(thread_service_pb2.RunThreadRequest(spec=thread_spec), timeout=DEADLINE)


async def thread_of(stub: ThreadServiceStub, thread_id: str) -> thread_pb2.Thread:
    return (await stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id=thread_id))).thread


async def running(
    stub: ThreadServiceStub, thread_spec: thread_service_pb2.ThreadRunSpec
) -> tuple[object, str]:
    """Start a streamed run and return its call and run ID once its tool is running: after its
    `tool_call`, the commit that dispatched it (the response's, LIVE §5.2)."""
    call = stub.StreamThreadRun(thread_service_pb2.StreamThreadRunRequest(spec=thread_spec), timeout=DEADLINE)
    called = False
    async for response in call:
        case = response.event.WhichOneof("event")
        called = called or case == "tool_call"
        if called and case == "thread_committed":
            return call, response.event.run_id
    pytest.fail("the run ended before its tool was called")


async def test_sigterm_mid_run_commits_cancelled_and_a_retry_replays_it(store: Store) -> None:
    stub = await store.start()
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id="thread_drained"))
    call, run_id = await running(stub, spec("thread_drained", "drained", text="sleep 30"))
    await store.stop(signal.SIGTERM)  # the drain cancels the run, which commits its candidate
    events = [response.event async for response in call]  # type: ignore[attr-defined]
    cases = [event.WhichOneof("event") for event in events]
    assert cases[-2:] == ["thread_committed", "result"]
    assert events[-2].thread_committed.kind == thread_pb2.CHECKPOINT_KIND_CANCELLED
    assert events[-1].result.status == run_pb2.RUN_STATUS_CANCELLED

    stub = await store.start()
    replay = await run(stub, spec("thread_drained", "drained", text="sleep 30"))
    assert replay.replayed and replay.result.status == run_pb2.RUN_STATUS_CANCELLED
    assert replay.result.run_id == run_id and replay.revision == events[-2].thread_committed.revision
    thread = await thread_of(stub, "thread_drained")
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE and not thread.recovery_pending


async def test_cancel_of_a_run_whose_server_was_killed_closes_it_at_once(store: Store) -> None:
    stub = await store.start()
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id="thread_orphan"))
    _call, run_id = await running(stub, spec("thread_orphan", "orphan", text="sleep 30"))
    head = (await thread_of(stub, "thread_orphan")).revision  # its MID_RUN commits so far
    await store.stop(signal.SIGKILL)

    stub = await store.start()
    # The dead holder's lease is still live for a moment: the cancel is recorded and waits for it.
    deadline = time.monotonic() + DEADLINE
    while (
        status := (
            await stub.CancelThreadRun(
                thread_service_pb2.CancelThreadRunRequest(thread_id="thread_orphan", run_id=run_id)
            )
        ).status
    ) == thread_pb2.THREAD_RUN_STATUS_RUNNING:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    assert status == thread_pb2.THREAD_RUN_STATUS_CANCELLED  # closed at once, once its lease expired
    thread = await thread_of(stub, "thread_orphan")
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE and thread.revision == head
    replay = await run(stub, spec("thread_orphan", "orphan", text="sleep 30"))
    assert replay.replayed and replay.result.status == run_pb2.RUN_STATUS_CANCELLED
    assert replay.revision == head  # no terminal commit: it points at the head
    # The next run continues from the last commit: the interrupted sleep gets the unknown result.
    after = await run(stub, spec("thread_orphan", "next", text="hello"))
    assert after.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert "interrupted" in after.result.output_json


async def test_a_phase_b_failure_leaves_the_thread_suspended_on_its_batch(store: Store) -> None:
    stub = await store.start()
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id="thread_surface"))
    weather = run_pb2.ClientTool(
        name="get_weather", parameters_json_schema='{"type":"object","properties":{"city":{"type":"string"}}}'
    )
    other = run_pb2.ClientTool(name="other_tool", parameters_json_schema='{"type":"object","properties":{}}')
    suspended = await run(
        stub,
        spec("thread_surface", "ask", text='client:get_weather {"city":"Paris"}', client_tools=[weather]),
    )
    assert suspended.result.status == run_pb2.RUN_STATUS_SUSPENDED
    call_id = suspended.result.deferred.calls[0].tool_call_id
    answers = deferred_pb2.DeferredToolResults(
        calls=[deferred_pb2.CallResult(tool_call_id=call_id, value_json='"sunny"')]
    )
    for _ in range(2):  # the retry gets the same error again: the record keeps it
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await run(stub, spec("thread_surface", "wrong-tools", answers=answers, client_tools=[other]))
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        info = error_info(refused.value)
        assert info is not None and info.reason == "DEFERRED_SURFACE_MISMATCH"
    thread = await thread_of(stub, "thread_surface")
    assert thread.status == thread_pb2.THREAD_STATUS_SUSPENDED and not thread.recovery_pending
    assert [c.tool_call_id for c in thread.pending.calls] == [call_id]
    assert thread.revision == suspended.revision  # nothing was committed
    # Answered again with the tools it was made with (none declared: the head's), it completes.
    done = await run(stub, spec("thread_surface", "right-tools", answers=answers))
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED and "sunny" in done.result.output_json


async def test_a_rollback_after_a_crashed_resume_drops_its_retained_batch(store: Store) -> None:
    stub = await store.start("--agent", "crash=thread_agents:build")
    created = await stub.CreateThread(thread_service_pb2.CreateThreadRequest(agent="crash"))
    thread_id = created.thread.thread_id
    suspended = await run(stub, spec(thread_id, "batch", text="use:batch crash:before_tool:transfer"))
    assert suspended.result.status == run_pb2.RUN_STATUS_SUSPENDED
    batch = suspended.result.deferred
    answers = deferred_pb2.DeferredToolResults(
        calls=[
            deferred_pb2.CallResult(tool_call_id=c.tool_call_id, value_json='"shipped"') for c in batch.calls
        ],
        approvals=[
            deferred_pb2.ApprovalResult(tool_call_id=a.tool_call_id, approved=deferred_pb2.ToolApproved())
            for a in batch.approvals
        ],
    )
    call = stub.StreamThreadRun(
        thread_service_pb2.StreamThreadRunRequest(spec=spec(thread_id, "resume", answers=answers)),
        timeout=DEADLINE,
    )
    reader = asyncio.ensure_future(_drain(call))
    log = store.tmp / "tools.jsonl"
    deadline = time.monotonic() + DEADLINE
    while not any(m["at"] == "before_tool:transfer" for m in markers(log)):
        assert time.monotonic() < deadline, "the resume never reached its gate"
        await asyncio.sleep(0.05)
    await store.stop(signal.SIGKILL)  # the answers were accepted; the approved transfer never ran
    await reader

    stub = await store.start("--agent", "crash=thread_agents:build")
    thread = await thread_of(stub, thread_id)
    assert thread.recovery_pending  # it retains the accepted batch
    assert thread.revision == suspended.revision, "the resume committed nothing: the rollback is to the head"
    rollback = thread_service_pb2.RollbackThreadRequest(thread_id=thread_id, revision=suspended.revision)
    while True:  # the dead holder's lease is live for a moment: busy until it expires
        try:
            await stub.RollbackThread(rollback)
            break
        except grpc.aio.AioRpcError as error:
            info = error_info(error)
            assert info is not None and info.reason == "THREAD_BUSY", error
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
    thread = await thread_of(stub, thread_id)
    assert thread.status == thread_pb2.THREAD_STATUS_SUSPENDED and not thread.recovery_pending
    assert thread.head.kind == thread_pb2.CHECKPOINT_KIND_ROLLED_BACK
    assert {c.tool_call_id for c in thread.pending.calls} == {c.tool_call_id for c in batch.calls}
    assert not thread.head.HasField("remaining")


@pytest.mark.parametrize("event_log", ["on", "off"])
async def test_a_caller_that_stops_reading_never_holds_the_run_back(store: Store, event_log: str) -> None:
    """The run never waits for its caller. One that falls `LISTENER_BACKLOG` events behind reads on from
    the attempt's event log (LIVE §2.6): every event, in order, then the result. Without a log it gets the
    events already on their way, then RESOURCE_EXHAUSTED LISTENER_TOO_SLOW. The run completes either way."""
    # A lease far above what thousands of appends on a loaded machine can delay a renewal by.
    stub = await store.start("--event-log", event_log, "--lease-ttl", "30")
    assert store.server is not None
    thread_id = f"thread_slow{event_log}"
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id=thread_id))
    # Echoed back in 8-character deltas: thousands of events more than the run keeps for its caller and
    # the stream's own buffers hold, since without BDP probing the client's receive window stays small.
    prompt = "x" * 8 * (LISTENER_BACKLOG + 4000)
    options = [("grpc.http2.bdp_probe", 0)]
    async with grpc.aio.insecure_channel(store.server.address, options=options) as channel:
        call = ThreadServiceStub(channel).StreamThreadRun(
            thread_service_pb2.StreamThreadRunRequest(spec=spec(thread_id, "slow", text=prompt)),
            timeout=DEADLINE,
        )
        first = await call.read()  # the run began; from here on its caller reads nothing
        assert isinstance(first, thread_service_pb2.StreamThreadRunResponse)
        deadline = time.monotonic() + DEADLINE
        while (thread := await thread_of(stub, thread_id)).status != thread_pb2.THREAD_STATUS_IDLE:
            assert time.monotonic() < deadline, "the run waited for its caller"
            await asyncio.sleep(0.1)
        assert thread.head.kind == thread_pb2.CHECKPOINT_KIND_COMPLETED
        received = [first.event]
        dropped: grpc.aio.AioRpcError | None = None
        try:
            while (response := await call.read()) is not grpc.aio.EOF:
                assert isinstance(response, thread_service_pb2.StreamThreadRunResponse)
                received.append(response.event)
        except grpc.aio.AioRpcError as error:
            dropped = error
    assert [event.sequence for event in received] == list(range(len(received))), "in order, no gap"
    assert received[0].WhichOneof("event") == "run_started"
    kinds = [event.WhichOneof("event") for event in received]
    if event_log == "on":
        assert dropped is None and kinds[-1] == "result" and kinds[-2] == "thread_committed"
        assert received[-1].result.status == run_pb2.RUN_STATUS_COMPLETED
        assert kinds.count("part_delta") > LISTENER_BACKLOG, "every delta, none omitted"
    else:
        assert dropped is not None
        code, reason, metadata = refusal(dropped)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "LISTENER_TOO_SLOW")
        assert (metadata["thread_id"], metadata["run_id"]) == (thread_id, first.event.run_id)
        assert (metadata["request_id"], metadata["backlog"]) == ("slow", str(LISTENER_BACKLOG))
        assert "result" not in kinds
    # The outcome is durable: a retry of the request replays it.
    replay = await run(stub, spec(thread_id, "slow", text=prompt))
    assert replay.replayed and replay.revision == thread.revision
    assert completed_output(replay.result) == "You said: " + prompt


async def _drain(call: object) -> None:
    try:
        async for _ in call:  # type: ignore[attr-defined]
            pass
    except grpc.aio.AioRpcError:
        pass
