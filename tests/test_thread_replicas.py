"""Two `threadline serve` replicas on one PostgreSQL database (THREADS §4, §6, §7 "Races", "Store faults").

Each replica is a real server process with a random replica id, on a fresh database of the session's
cluster (`pg_store`); the test that stops PostgreSQL uses a cluster of its own. Replicas serve the demo
agent and the crash agent of `tests/thread_agents.py`, each with its own tool log and gate file, so a
test knows which process ran a tool and where a run is blocked when it stops or kills that process.
What a replica must not do (commit after it lost its lease, run a thread twice at once) is checked on
what the other replica reads back: the history in the head's state, and the checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pgcluster
import pytest
from conftest import (
    PgStore,
    ServeProcess,
    completed_output,
    create_thread,
    events_of,
    get_thread,
    list_checkpoints,
    refusal,
    spawn_serve,
    thread_spec,
    user_prompts,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc
from thread_agents import AGENT_NAME, GATE_ENV, TOOL_LOG_ENV, executions, markers
from threadline.v1 import deferred_pb2, run_pb2, thread_pb2, thread_service_pb2, thread_service_pb2_grpc

from harness import INTERRUPTED_TOOL_RESULT
from server.mapping.state import state_from_pb

if TYPE_CHECKING:
    from threadline.v1.thread_service_pb2_grpc import ThreadServiceAsyncStub as Stub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
Code = grpc.StatusCode
TESTS = Path(__file__).resolve().parent
DEADLINE = 60.0
"""Seconds any awaited condition may take (a marker, a lease expiring) on a loaded 2-core machine."""
POLL = 0.05
SHARED_TTL = 8
"""The shared pair's lease: renewed every TTL/3, far above a loaded machine's stalls."""
SHORT_TTL = 2
"""The lease of the tests that stop or kill a holder: the other replica waits it out."""
THREAD_SERVICE = "threadline.v1.ThreadService"
CRASH_PROMPT = "use:plain crash:tool:write_note"
"""Blocks the crash agent inside its plain tool `write_note` until the replica's gate opens."""


# -- replicas -----------------------------------------------------------------------------------------


@dataclass
class Replica:
    """One `threadline serve` process: its address, its drained stderr, its tool log and gate."""

    serve: ServeProcess
    log: Path
    gate: Path
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def address(self) -> str:
        return self.serve.address

    @property
    def pid(self) -> int:
        return self.serve.process.pid

    def stalled(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resumed(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    async def killed(self) -> None:
        self.serve.process.kill()
        await asyncio.to_thread(self.serve.process.wait, 30)

    def markers_at(self, point: str) -> int:
        return len([m for m in markers(self.log) if m["at"] == point])

    async def wait_for_marker(self, point: str, seen: int = 0) -> None:
        """Return once the agent marked `point` more than `seen` times: a run is blocked there now."""
        deadline = time.monotonic() + DEADLINE
        while self.markers_at(point) <= seen:
            if self.serve.process.poll() is not None:
                pytest.fail(f"the replica exited before reaching {point}: {''.join(self.lines)}")
            assert time.monotonic() < deadline, f"the run never reached {point}"
            await asyncio.sleep(POLL)

    def close(self) -> None:
        process = self.serve.process
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)  # a stalled one, so it can be reaped
            process.kill()
            process.wait(timeout=10)
        if self.reader is not None:
            self.reader.join(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def start_replica(
    url: str, env: dict[str, str], workdir: Path, *args: str, lease_ttl: float = SHORT_TTL
) -> Replica:
    """A replica on `url` serving the demo and the crash agent; its gate closed, its stderr drained."""
    workdir.mkdir(parents=True, exist_ok=True)
    log, gate = workdir / "tools.jsonl", workdir / "gate"
    pythonpath = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    served = spawn_serve(
        "--store",
        url,
        "--lease-ttl",
        str(lease_ttl),
        "--agent",
        f"{AGENT_NAME}=thread_agents:build",
        "--default-agent",
        "default",
        *args,
        env={**env, "PYTHONPATH": pythonpath, TOOL_LOG_ENV: str(log), GATE_ENV: str(gate)},
    )
    replica = Replica(served, log, gate)

    def drain() -> None:
        assert served.process.stderr is not None
        for line in served.process.stderr:
            replica.lines.append(line)

    replica.reader = threading.Thread(target=drain, name="replica-stderr", daemon=True)
    replica.reader.start()
    return replica


def start_replicas(
    url: str, env: dict[str, str], workdir: Path, count: int = 2, *, args: Sequence[str] = (), **kw: Any
) -> list[Replica]:
    """`count` replicas: the first alone (it migrates a new store: two processes migrating one fresh SQLite
    file at once can find it locked past the busy timeout on a loaded machine), then the rest side by side."""
    results: list[Replica | BaseException | None] = [None] * count

    def one(index: int) -> None:
        try:
            results[index] = start_replica(url, env, workdir / f"r{index}", *args, **kw)
        except BaseException as error:  # reported below, after every thread ended
            results[index] = error

    # The first opens (and migrates) the store alone; the rest start side by side on the migrated store.
    one(0)
    workers = (
        [threading.Thread(target=one, args=(i,)) for i in range(1, count)] if results[0] is not None else []
    )
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    started = [r for r in results if isinstance(r, Replica)]
    if len(started) < count:
        for replica in started:
            replica.close()
        raise next(r for r in results if isinstance(r, BaseException))
    return started


StartReplicas = Callable[..., Awaitable[list[Replica]]]


@pytest.fixture
def own_replicas(tmp_path: Path) -> Iterator[StartReplicas]:
    """`a, b = await replicas(pg_store.url, pg_store.env, lease_ttl=2)`: replicas closed at test end."""
    started: list[Replica] = []

    async def start(url: str, env: dict[str, str], count: int = 2, **kw: Any) -> list[Replica]:
        made = await asyncio.to_thread(start_replicas, url, env, tmp_path / f"set{len(started)}", count, **kw)
        started.extend(made)
        return made

    yield start
    for replica in started:
        replica.close()


@dataclass
class Pair:
    """Two replicas on one database, shared by a module's tests; `ready()` replaces a dead one."""

    url: str
    env: dict[str, str]
    workdir: Path
    lease_ttl: float
    replicas: list[Replica] = field(default_factory=list)

    def ready(self) -> list[Replica]:
        """Both replicas, alive, with their gates closed."""
        for index, replica in enumerate(self.replicas):
            if replica.serve.process.poll() is not None:
                replica.close()
                workdir = self.workdir / f"r{index}-{uuid.uuid4().hex[:6]}"
                self.replicas[index] = start_replica(self.url, self.env, workdir, lease_ttl=self.lease_ttl)
            self.replicas[index].gate.unlink(missing_ok=True)
        return list(self.replicas)


@contextlib.contextmanager
def shared_pair(cluster: pgcluster.Cluster, workdir: Path, lease_ttl: float) -> Iterator[Pair]:
    made = Pair(cluster.database(), cluster.env, workdir, lease_ttl)
    made.replicas = start_replicas(made.url, made.env, workdir, lease_ttl=lease_ttl)
    try:
        yield made
    finally:
        for replica in made.replicas:
            replica.close()


@pytest.fixture(scope="module")
def steady(pg_cluster: pgcluster.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Replicas whose leases never expire by accident (the tests that neither stop nor kill one)."""
    with shared_pair(pg_cluster, tmp_path_factory.mktemp("steady"), SHARED_TTL) as made:
        yield made


@pytest.fixture(scope="module")
def brief(pg_cluster: pgcluster.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Replicas with a short lease, for the tests that stall or kill the holder and wait it out."""
    with shared_pair(pg_cluster, tmp_path_factory.mktemp("brief"), SHORT_TTL) as made:
        yield made


@contextlib.asynccontextmanager
async def stubs(*of: Replica) -> AsyncIterator[list[Stub]]:
    """A `ThreadService` stub per replica, on channels of this test's event loop."""
    channels = [grpc.aio.insecure_channel(replica.address) for replica in of]
    try:
        yield [thread_service_pb2_grpc.ThreadServiceStub(channel) for channel in channels]
    finally:
        for channel in channels:
            await channel.close()


# -- calls --------------------------------------------------------------------------------------------


def new_request_id() -> str:
    return f"req-{uuid.uuid4().hex}"


async def run(stub: Stub, thread_id: str, **fields: Any) -> ts.RunThreadResponse:
    request = ts.RunThreadRequest(spec=thread_spec(thread_id, **fields))
    return await stub.RunThread(request, timeout=DEADLINE)


@dataclass
class Streamed:
    """A run's stream read in the background: its events so far, and how the call ended."""

    reader: asyncio.Task[grpc.aio.AioRpcError | None]
    events: list[Any]

    async def ended(self) -> grpc.aio.AioRpcError | None:
        """The call's error (None when it ended with its result), once it ended."""
        return await asyncio.wait_for(self.reader, DEADLINE)


def stream(stub: Stub, thread_id: str, **fields: Any) -> Streamed:
    call = stub.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=thread_spec(thread_id, **fields)), timeout=3 * DEADLINE
    )
    events: list[Any] = []

    async def read() -> grpc.aio.AioRpcError | None:
        try:
            async for response in call:
                events.extend(events_of(response))
        except grpc.aio.AioRpcError as error:
            return error
        return None

    return Streamed(asyncio.ensure_future(read()), events)


async def blocked_run(replica: Replica, stub: Stub, thread_id: str, request_id: str) -> Streamed:
    """Stream `CRASH_PROMPT` on `replica` and return once its tool blocks at the closed gate."""
    seen = replica.markers_at("tool:write_note")
    doomed = stream(stub, thread_id, text=CRASH_PROMPT, request_id=request_id)
    await replica.wait_for_marker("tool:write_note", seen)
    return doomed


async def while_busy(make: Callable[[], Awaitable[Any]], *, holder: str) -> Any:
    """`make()` again and again while a lease of request `holder` holds the thread (until it expires).
    A retry of `holder` itself attaches to the dead attempt and ends `RUN_ATTEMPT_LOST` (LIVE §2.5)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            return await make()
        except grpc.aio.AioRpcError as error:
            code, reason, meta = refusal(error)
            if (code, reason) not in ((Code.ABORTED, "THREAD_BUSY"), (Code.ABORTED, "RUN_ATTEMPT_LOST")):
                raise
            assert meta["request_id"] == holder, meta
            assert time.monotonic() < deadline, "the lease never expired"
            await asyncio.sleep(POLL)


def runs_since(log: Path, before: dict[str, int]) -> dict[str, int]:
    """Tool executions per call id since `before` was read (a module's tests share a replica's log)."""
    return {
        call: count - before.get(call, 0)
        for call, count in executions(log).items()
        if count != before.get(call, 0)
    }


def assert_refused(error: object, code: grpc.StatusCode, reason: str) -> dict[str, str]:
    assert isinstance(error, grpc.aio.AioRpcError), f"expected {code.name} {reason}, got {error!r}"
    got_code, got_reason, meta = refusal(error)
    assert (got_code, got_reason) == (code, reason), (error.code(), error.details(), meta)
    return meta


async def history(stub: Stub, thread_id: str) -> list[Any]:
    """The head checkpoint's message history, decoded (`pydantic_ai` messages)."""
    thread = await get_thread(stub, thread_id, full=True)
    return list(state_from_pb(thread.head.state, field="thread.head.state").message_history)


def tool_returns(messages: list[Any], call_id: str) -> list[Any]:
    return [
        part
        for message in messages
        for part in message.parts
        if getattr(part, "part_kind", "") in ("tool-return", "retry-prompt") and part.tool_call_id == call_id
    ]


def tool_calls(messages: list[Any], tool: str) -> list[str]:
    return [
        part.tool_call_id
        for message in messages
        for part in message.parts
        if getattr(part, "part_kind", "") == "tool-call" and part.tool_name == tool
    ]


async def whole_line(stub: Stub, thread_id: str) -> list[thread_pb2.Checkpoint]:
    """The checkpoints, newest first, asserting revisions head..1 without a gap, each one readable."""
    listed = await list_checkpoints(stub, thread_id)
    assert [c.revision for c in listed] == list(range(len(listed), 0, -1))
    for checkpoint in listed:
        got = await stub.GetCheckpoint(
            ts.GetCheckpointRequest(thread_id=thread_id, revision=checkpoint.revision), timeout=DEADLINE
        )
        state = state_from_pb(got.checkpoint.state, field="checkpoint.state")
        assert state.thread_id == thread_id
    return listed


# -- 1. concurrent runs on both replicas ---------------------------------------------------------------

CONCURRENT = 20


async def test_concurrent_runs_on_both_replicas_one_advances_the_thread(steady: Pair) -> None:
    async with stubs(*steady.ready()) as (a, b):
        thread = await create_thread(a, agent="default")
        # Long enough that every request reaches a replica while the winner still holds the thread.
        specs = [
            {"text": f"sleep 5 (attempt {i})", "request_id": new_request_id()} for i in range(CONCURRENT)
        ]
        outcomes = await asyncio.gather(
            *(run((a, b)[i % 2], thread.thread_id, **s) for i, s in enumerate(specs)), return_exceptions=True
        )
        won = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, ts.RunThreadResponse)]
        assert len(won) == 1, f"{len(won)} of {CONCURRENT} concurrent runs advanced the thread: {outcomes}"
        [(index, winner)] = won
        assert completed_output(winner.result) == "Tool results: sleep: Slept 5 s."
        losers = [i for i in range(CONCURRENT) if i != index]
        assert {i % 2 for i in losers} == {0, 1}, "both replicas refused requests"
        for i in losers:
            meta = assert_refused(outcomes[i], Code.ABORTED, "THREAD_BUSY")
            assert (meta["run_id"], meta["request_id"]) == (winner.result.run_id, specs[index]["request_id"])
            assert meta["lease_expires_at"]

        for stub in (a, b):
            head = await get_thread(stub, thread.thread_id, full=True)
            assert head.revision == winner.revision and head.status == thread_pb2.THREAD_STATUS_IDLE
            assert user_prompts(head.head.state) == [specs[index]["text"]], "refused requests wrote nothing"
        line = await whole_line(a, thread.thread_id)
        assert line == await whole_line(b, thread.thread_id)
        assert line[-1].kind == thread_pb2.CHECKPOINT_KIND_CREATED
        assert {(c.run_id, c.request_id) for c in line[:-1]} == {
            (winner.result.run_id, specs[index]["request_id"])
        }, "one run made every checkpoint after the first"
        assert line[0].kind == thread_pb2.CHECKPOINT_KIND_COMPLETED


# -- 2. one thread continued on each replica in turn ---------------------------------------------------


async def test_a_thread_continued_alternately_on_each_replica(steady: Pair) -> None:
    async with stubs(*steady.ready()) as replicas_stubs:
        a, _ = replicas_stubs
        thread = await create_thread(a, agent="default")
        turns: list[str | None] = [
            "hello from one",
            "lookup grpc",
            "hello from two",
            "delete notes.txt",  # suspends on one replica; the other answers by call id
            None,
            "lookup threadline",
            "count",
            "hello again",
        ]
        prompts: list[str] = []
        revision, pending = 1, None
        for turn, text in enumerate(turns):
            here, there = replicas_stubs[turn % 2], replicas_stubs[1 - turn % 2]
            if text is None:
                assert pending is not None
                answers = deferred_pb2.DeferredToolResults(
                    approvals=[
                        deferred_pb2.ApprovalResult(
                            tool_call_id=pending, approved=deferred_pb2.ToolApproved()
                        )
                    ]
                )
                done = await run(here, thread.thread_id, answers=answers, expected_revision=revision)
                assert completed_output(done.result) == "Tool results: delete_file: Deleted notes.txt."
                pending = None
            else:
                done = await run(here, thread.thread_id, text=text, expected_revision=revision)
                prompts.append(text)
                if text.startswith("delete"):
                    assert done.result.status == run_pb2.RUN_STATUS_SUSPENDED, done.result
                    [approval] = done.result.deferred.approvals
                    pending = approval.tool_call_id
                else:
                    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED, done.result
            assert done.revision > revision and not done.replayed
            revision = done.revision
            seen = await get_thread(there, thread.thread_id, full=True)
            assert seen.revision == revision
            assert user_prompts(seen.head.state) == prompts, f"turn {turn} on the other replica"
            assert (seen.status == thread_pb2.THREAD_STATUS_SUSPENDED) == (pending is not None)
            if pending is not None:
                assert [a.tool_call_id for a in seen.pending.approvals] == [pending]
            assert await list_checkpoints(here, thread.thread_id) == await list_checkpoints(
                there, thread.thread_id
            )
        line = await whole_line(a, thread.thread_id)
        assert line[0].revision == revision
        assert len({c.run_id for c in line[:-1]}) == len(turns), "one run per turn"

        # A revision one replica read is stale on the other once the thread moved on.
        for stub in replicas_stubs:
            meta = assert_refused(
                await _error_of(run(stub, thread.thread_id, text="stale", expected_revision=revision - 1)),
                Code.ABORTED,
                "REVISION_CONFLICT",
            )
            assert meta == {"current_revision": str(revision)}
        assert (await get_thread(a, thread.thread_id)).revision == revision


# -- 5. CancelThreadRun on the replica that does not hold the run --------------------------------------


async def test_cancel_sent_to_the_other_replica_ends_the_run_cancelled(steady: Pair) -> None:
    holder, other = steady.ready()
    async with stubs(holder, other) as (a, b):
        thread = await create_thread(a, agent=AGENT_NAME)
        request_id = new_request_id()
        before = executions(holder.log)
        running = await blocked_run(holder, a, thread.thread_id, request_id)
        held = await get_thread(b, thread.thread_id)
        assert held.status == thread_pb2.THREAD_STATUS_RUNNING and held.lease.request_id == request_id
        answer = await b.CancelThreadRun(
            ts.CancelThreadRunRequest(thread_id=thread.thread_id, run_id=held.lease.run_id), timeout=DEADLINE
        )
        assert answer.status == thread_pb2.THREAD_RUN_STATUS_RUNNING, "recorded, not waited for"

        assert await running.ended() is None
        *_, committed, last = running.events
        assert last.result.status == run_pb2.RUN_STATUS_CANCELLED, last.result
        assert last.result.run_id == held.lease.run_id
        assert committed.thread_committed.kind == thread_pb2.CHECKPOINT_KIND_CANCELLED
        again = await run(b, thread.thread_id, text=CRASH_PROMPT, request_id=request_id)
        assert again.replayed and again.result == last.result

        # The next run continues from the cancelled run's commit: its tool call has the unknown result.
        nxt = await run(b, thread.thread_id, text="hello")
        assert nxt.result.status == run_pb2.RUN_STATUS_COMPLETED and nxt.revision > again.revision
        messages = await history(a, thread.thread_id)
        assert user_prompts((await get_thread(a, thread.thread_id, full=True)).head.state) == [
            CRASH_PROMPT,
            "hello",
        ]
        [call_id] = tool_calls(messages, "write_note")
        [answer_part] = tool_returns(messages, call_id)
        assert answer_part.content == INTERRUPTED_TOOL_RESULT
        assert runs_since(holder.log, before) == {call_id: 1}


def test_the_steady_replicas_logged_no_error(steady: Pair) -> None:
    """After the tests above on the steady pair: no error in either log, and SIGTERM stops both cleanly."""
    for replica in steady.replicas:
        replica.serve.process.send_signal(signal.SIGTERM)
    for replica in steady.replicas:
        assert replica.serve.process.wait(timeout=DEADLINE) == 0
        assert replica.reader is not None
        replica.reader.join(timeout=DEADLINE)
        logged = [json.loads(line) for line in replica.lines if line.strip()]
        assert [r for r in logged if r["level"] in ("error", "critical")] == []
        assert any(r["event"] == "thread_store_opened" and r["kind"] == "postgresql" for r in logged)


async def test_a_cancel_reaches_the_other_replica_long_before_its_next_renewal(
    own_replicas: StartReplicas, pg_store: PgStore
) -> None:
    """With a lease renewed every 100 s, only the notification (LISTEN/NOTIFY) can end the run within
    the deadline: the cancel reaches the holder when the cancelling transaction commits."""
    holder, other = await own_replicas(pg_store.url, pg_store.env, lease_ttl=300)
    async with stubs(holder, other) as (a, b):
        thread = await create_thread(a, agent=AGENT_NAME)
        running = await blocked_run(holder, a, thread.thread_id, new_request_id())
        held = await get_thread(b, thread.thread_id)
        await b.CancelThreadRun(
            ts.CancelThreadRunRequest(thread_id=thread.thread_id, run_id=held.lease.run_id), timeout=DEADLINE
        )
        assert await running.ended() is None  # within DEADLINE (60 s), far below the renewal's 100 s
        assert running.events[-1].result.status == run_pb2.RUN_STATUS_CANCELLED


# -- 3. a replica stalled past its lease ---------------------------------------------------------------


@pytest.mark.parametrize("meanwhile", ["nothing", "run", "rollback", "recreate"])
async def test_a_replica_stalled_past_its_lease_cannot_commit(brief: Pair, meanwhile: str) -> None:
    stalled, other = brief.ready()
    async with stubs(stalled, other) as (a, b):
        thread = await create_thread(a, agent=AGENT_NAME)
        tid = thread.thread_id
        doomed = await blocked_run(stalled, a, tid, "req-stalled")
        held = await get_thread(b, tid)
        assert held.lease.request_id == "req-stalled"
        stalled.stalled()

        if meanwhile == "nothing":  # the lease expires; no one takes the thread, yet it is lost
            deadline = time.monotonic() + DEADLINE
            while not (await get_thread(b, tid)).recovery_pending:
                assert time.monotonic() < deadline, "the stalled replica's lease never expired"
                await asyncio.sleep(POLL)
            expected = [CRASH_PROMPT] if held.revision > 1 else []
        elif meanwhile == "run":
            took = await while_busy(
                lambda: run(b, tid, text="hello", request_id="req-other"), holder="req-stalled"
            )
            assert took.result.status == run_pb2.RUN_STATUS_COMPLETED, took.result
            expected = [CRASH_PROMPT, "hello"] if held.revision > 1 else ["hello"]
        elif meanwhile == "rollback":
            rolled = await while_busy(
                lambda: b.RollbackThread(
                    ts.RollbackThreadRequest(thread_id=tid, revision=1, expected_revision=held.revision),
                    timeout=DEADLINE,
                ),
                holder="req-stalled",
            )
            assert rolled.thread.head.kind == thread_pb2.CHECKPOINT_KIND_ROLLED_BACK
            expected = []
        else:
            await while_busy(
                lambda: b.DeleteThread(ts.DeleteThreadRequest(thread_id=tid), timeout=DEADLINE),
                holder="req-stalled",
            )
            again = await create_thread(b, thread_id=tid, agent=AGENT_NAME)
            assert again.revision == 1
            expected = []
        before = await whole_line(b, tid)
        head = await get_thread(b, tid, full=True)
        assert user_prompts(head.head.state) == expected

        stalled.gate.touch()  # its tool may now return: whatever it does next must not land
        stalled.resumed()
        assert_refused(await doomed.ended(), Code.ABORTED, "LEASE_LOST")
        assert not [e for e in doomed.events if e.WhichOneof("event") == "result"]

        for stub in (a, b):
            assert await whole_line(stub, tid) == before, "the stalled replica's later work is nowhere"
            now = await get_thread(stub, tid, full=True)
            assert now.revision == head.revision and now.head == head.head
            if meanwhile == "nothing":  # the lost lease is left to expire: the next run recovers
                assert now.recovery_pending
            else:
                assert now.status != thread_pb2.THREAD_STATUS_RUNNING
        messages = await history(b, tid)
        assert all(
            part.content != "noted hello"
            for call in tool_calls(messages, "write_note")
            for part in tool_returns(messages, call)
        )
        assert stalled.serve.process.poll() is None, "the stalled replica lives on"

        # It serves the thread again from the head it reads now, never from a head it cached.
        nxt = await run(a, tid, text="after the stall")
        assert nxt.result.status == run_pb2.RUN_STATUS_COMPLETED, nxt.result
        final = await get_thread(b, tid, full=True)
        assert user_prompts(final.head.state) == [*expected, "after the stall"]
        if meanwhile != "recreate":  # the stalled request's record was closed when the thread moved on
            meta = assert_refused(
                await _error_of(run(b, tid, text=CRASH_PROMPT, request_id="req-stalled")),
                Code.FAILED_PRECONDITION,
                "REQUEST_INTERRUPTED",
            )
            assert meta["run_id"] == held.lease.run_id


async def _error_of(call: Awaitable[Any]) -> grpc.aio.AioRpcError | None:
    """The call's error, or None when it succeeded; a call that hangs fails the test."""
    try:
        await asyncio.wait_for(call, DEADLINE)
    except grpc.aio.AioRpcError as error:
        return error
    return None


# -- 4. kill -9 of the holder; the other replica recovers the run ----------------------------------------


async def test_a_killed_holders_run_is_recovered_by_the_other_replica(
    brief: Pair,
) -> None:
    killed, survivor = brief.ready()
    survivor.gate.touch()
    async with stubs(killed, survivor) as (a, b):
        thread = await create_thread(a, agent=AGENT_NAME)
        tid = thread.thread_id
        before = executions(killed.log), executions(survivor.log)
        doomed = await blocked_run(killed, a, tid, "req-crash")
        held = await get_thread(b, tid)
        await killed.killed()
        gone = await doomed.ended()
        assert gone is not None and gone.code() == Code.UNAVAILABLE, gone

        done = await while_busy(
            lambda: run(b, tid, text=CRASH_PROMPT, request_id="req-crash"), holder="req-crash"
        )
        assert done.result.status == run_pb2.RUN_STATUS_COMPLETED, done.result
        assert not done.replayed and done.result.run_id not in ("", held.lease.run_id)
        head = await get_thread(b, tid, full=True)
        assert head.status == thread_pb2.THREAD_STATUS_IDLE and not head.recovery_pending
        assert user_prompts(head.head.state) == [CRASH_PROMPT], "the prompt is in the history once"
        messages = await history(b, tid)
        [call_id] = tool_calls(messages, "write_note")
        [part] = tool_returns(messages, call_id)
        assert part.content == INTERRUPTED_TOOL_RESULT, "a plain tool that may have acted is not run again"
        assert runs_since(killed.log, before[0]) == {call_id: 1} and runs_since(survivor.log, before[1]) == {}
        line = await whole_line(b, tid)
        assert {c.kind for c in line if c.run_id == held.lease.run_id} <= {thread_pb2.CHECKPOINT_KIND_MID_RUN}
        assert line[0].run_id == done.result.run_id and line[0].request_id == "req-crash"

        replay = await run(b, tid, text=CRASH_PROMPT, request_id="req-crash")
        assert replay.replayed and replay.result == done.result


# -- 6. PostgreSQL stopped mid-run ---------------------------------------------------------------------


async def health_of(channel: grpc.aio.Channel, service: str) -> int:
    stub: Any = health_pb2_grpc.HealthStub(channel)  # typed for sync channels only
    return int((await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=DEADLINE)).status)


async def until_health(channel: grpc.aio.Channel, status: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while (now := await health_of(channel, THREAD_SERVICE)) != status:
        assert time.monotonic() < deadline, (
            f"ThreadService stayed {health_pb2.HealthCheckResponse.ServingStatus.Name(now)}"
        )
        await asyncio.sleep(POLL)


@pytest.mark.parametrize("mode", ["immediate", "fast"], ids=["crashed", "shut-down"])
async def test_postgresql_stopped_mid_run(own_replicas: StartReplicas, mode: str) -> None:
    with pgcluster.cluster(fsync=False) as own:
        url = await asyncio.to_thread(own.database)
        [replica] = await own_replicas(url, own.env, count=1, lease_ttl=3)
        async with grpc.aio.insecure_channel(replica.address) as channel:
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            thread = await create_thread(stub, agent=AGENT_NAME)
            tid = thread.thread_id
            doomed = await blocked_run(replica, stub, tid, "req-outage")
            held = await get_thread(stub, tid)
            await asyncio.to_thread(own.stop, mode)

            assert_refused(await doomed.ended(), Code.UNAVAILABLE, "STORE_UNAVAILABLE")
            calls = await asyncio.gather(
                _error_of(get_thread(stub, tid)),
                _error_of(run(stub, tid, text="hello")),
                _error_of(create_thread(stub, agent=AGENT_NAME)),
                _error_of(stub.ListThreads(ts.ListThreadsRequest(), timeout=DEADLINE)),
            )
            for error in calls:
                assert_refused(error, Code.UNAVAILABLE, "STORE_UNAVAILABLE")
            await until_health(channel, health_pb2.HealthCheckResponse.NOT_SERVING)
            harness = await health_of(channel, "threadline.v1.HarnessService")
            assert harness == health_pb2.HealthCheckResponse.SERVING, "HarnessService is unaffected"

            await asyncio.to_thread(own.start)
            # Nothing calls ThreadService meanwhile: a balancer keeps traffic off a NOT_SERVING replica.
            await until_health(channel, health_pb2.HealthCheckResponse.SERVING)

            # The thread continues from its last commit: the same request's retry recovers the run.
            done = await while_busy(
                lambda: run(stub, tid, text=CRASH_PROMPT, request_id="req-outage"), holder="req-outage"
            )
            assert done.result.status == run_pb2.RUN_STATUS_COMPLETED, done.result
            head = await get_thread(stub, tid, full=True)
            assert user_prompts(head.head.state) == [CRASH_PROMPT]
            messages = await history(stub, tid)
            [call_id] = tool_calls(messages, "write_note")
            assert [p.content for p in tool_returns(messages, call_id)] == [INTERRUPTED_TOOL_RESULT]
            line = await whole_line(stub, tid)
            assert (
                max((c.revision for c in line if c.run_id == held.lease.run_id), default=0) <= held.revision
            )
            nxt = await run(stub, tid, text="hello")
            assert nxt.result.status == run_pb2.RUN_STATUS_COMPLETED and nxt.revision > done.revision
            await whole_line(stub, tid)
