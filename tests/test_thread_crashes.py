"""THREADS §7 "Crash matrix": `kill -9` of the server at each point of a thread run, then another server.

Each test runs on both stores. It serves `tests/thread_agents.py` with a 2 s lease on a SQLite file of
its own, or on a fresh PostgreSQL database; starts a run whose prompt names the point where it blocks,
waits for the agent's marker and kills the server with SIGKILL. On SQLite a new server starts on the
same file; on PostgreSQL a second replica, running since the test began, takes over. The old lease must expire before the thread can be
taken, so the retry (the same `request_id`, the same body) is repeated while the answer is
`THREAD_BUSY`, or `RUN_ATTEMPT_LOST` (the retry attached to the dead attempt until its lease was over,
LIVE §2.5). Then the history (from `GetCheckpoint`), the checkpoints and the agent's tool log (one
fsynced line per execution) show what the crash did: every accepted external result and denial is in
the history once, a positive approval is never reused (the unknown result, or a fresh approval under
`ALWAYS`), no call of a tool that is not recovery-retryable ran twice under `DECLARED` or `NEVER`, and
the prompt is in the history once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from conftest import PgStore, ServeProcess, error_info
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from thread_agents import AGENT_NAME, GATE_ENV, TOOL_LOG_ENV, executions, markers, read_log
from threadline.v1 import (
    deferred_pb2,
    events_pb2,
    run_pb2,
    thread_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

from harness import INTERRUPTED_TOOL_RESULT
from server.mapping.state import state_from_pb

pytestmark = pytest.mark.anyio

if TYPE_CHECKING:
    from threadline.v1.thread_service_pb2_grpc import ThreadServiceAsyncStub as Stub

TESTS = Path(__file__).resolve().parent
LEASE_TTL = 2
DEADLINE = 60.0
"""Seconds any awaited condition may take (a marker, a lease expiring) on a loaded 2-core machine."""
POLL = 0.05

DECLARED = run_pb2.TOOL_RECOVERY_DECLARED
NEVER = run_pb2.TOOL_RECOVERY_NEVER
ALWAYS = run_pb2.TOOL_RECOVERY_ALWAYS


# -- the servers that take turns on one store --------------------------------------------------------


@dataclass
class Scene:
    """One store, the agent's tool log and gate, and the server currently serving them.

    SQLite: a file of the test's own, and a fresh server on it after the kill. PostgreSQL: a fresh
    database, and a second replica started beside the first, which recovers the run once the first is
    killed (`standby`).
    """

    spawn: Callable[..., ServeProcess]
    tmp: Path
    store: tuple[str, ...]
    store_env: dict[str, str] = field(default_factory=dict)
    replicas: bool = False
    server: ServeProcess | None = None
    channel: grpc.aio.Channel | None = None
    standby: asyncio.Future[ServeProcess] | None = None

    @property
    def log(self) -> Path:
        return self.tmp / "tools.jsonl"

    @property
    def gate(self) -> Path:
        return self.tmp / "gate"

    async def _spawn(self) -> ServeProcess:
        """A server on the scene's store; its gates block until `gate` exists."""
        pythonpath = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
        env = {
            **self.store_env,
            "PYTHONPATH": pythonpath,
            TOOL_LOG_ENV: str(self.log),
            GATE_ENV: str(self.gate),
        }
        return await asyncio.to_thread(
            self.spawn,
            *self.store,
            "--lease-ttl",
            str(LEASE_TTL),
            "--agent",
            f"{AGENT_NAME}=thread_agents:build",
            env=env,
        )

    async def _connect(self, server: ServeProcess) -> Stub:
        self.server = server
        if self.channel is not None:  # the killed server's
            await self.channel.close()
        self.channel = grpc.aio.insecure_channel(server.address)
        return thread_service_pb2_grpc.ThreadServiceStub(self.channel)

    async def start(self) -> Stub:
        """The first server (and, on PostgreSQL, the standby replica starting beside it)."""
        if self.replicas:
            self.standby = asyncio.ensure_future(self._spawn())
        return await self._connect(await self._spawn())

    async def kill(self) -> None:
        """SIGKILL the server (once the standby, if any, serves) and wait until it is gone."""
        assert self.server is not None
        if self.standby is not None:
            await self.standby
        self.server.process.kill()
        await asyncio.to_thread(self.server.process.wait, 30)

    async def start_after_crash(self) -> Stub:
        """Open the gates (a recovered run passes them at once); the standby, or a fresh server."""
        self.gate.touch()
        if self.standby is not None:
            standby, self.standby = self.standby, None
            return await self._connect(await standby)
        return await self._connect(await self._spawn())

    async def wait_for_marker(self, point: str) -> None:
        """Return once the agent marked `point`: the server is blocked there now."""
        deadline = time.monotonic() + DEADLINE
        while not (found := [m for m in markers(self.log) if m["at"] == point]):
            assert self.server is not None and self.server.process.stderr is not None
            if self.server.process.poll() is not None:
                pytest.fail(f"the server exited before reaching {point}: {self.server.process.stderr.read()}")
            assert time.monotonic() < deadline, f"the run never reached {point}: {read_log(self.log)}"
            await asyncio.sleep(POLL)
        assert len(found) == 1, found


@pytest.fixture(params=["sqlite", "postgresql"])
async def scene(
    request: pytest.FixtureRequest, serve_process: Callable[..., ServeProcess], tmp_path: Path
) -> AsyncIterator[Scene]:
    if request.param == "sqlite":
        scene = Scene(serve_process, tmp_path, ("--store", f"sqlite:{tmp_path / 'threads.sqlite3'}"))
    else:
        store: PgStore = request.getfixturevalue("pg_store")
        scene = Scene(serve_process, tmp_path, store.args, store.env, replicas=True)
    yield scene
    if scene.standby is not None:  # unused: let it finish starting, so the fixture that made it stops it
        with contextlib.suppress(Exception):
            await scene.standby
    if scene.channel is not None:
        await scene.channel.close()


# -- calls -------------------------------------------------------------------------------------------


async def create_thread(stub: Stub) -> str:
    response = await stub.CreateThread(thread_service_pb2.CreateThreadRequest(agent=AGENT_NAME))
    assert response.thread.revision == 1
    return response.thread.thread_id


def spec(thread_id: str, request_id: str, **fields: Any) -> thread_service_pb2.ThreadRunSpec:
    return thread_service_pb2.ThreadRunSpec(thread_id=thread_id, request_id=request_id, **fields)


async def run_thread(
    stub: Stub, run: thread_service_pb2.ThreadRunSpec
) -> thread_service_pb2.RunThreadResponse:
    return await stub.RunThread(thread_service_pb2.RunThreadRequest(spec=run), timeout=DEADLINE)


@dataclass
class Doomed:
    """A run the test will kill: its stream, read in the background, and where it was when killed."""

    reader: asyncio.Task[grpc.aio.AioRpcError | None]
    events: list[events_pb2.RunEvent]
    run_id: str = ""
    head: thread_pb2.Checkpoint | None = None
    log_at_kill: list[dict[str, Any]] = field(default_factory=list)

    @property
    def committed(self) -> int:
        """The last revision this run committed (0 when none), as its thread showed while it was blocked."""
        assert self.head is not None
        return self.head.revision if self.head.run_id == self.run_id else 0


async def run_until_killed(
    scene: Scene, stub: Stub, run: thread_service_pb2.ThreadRunSpec, point: str
) -> tuple[Doomed, Stub]:
    """Stream `run` until the agent blocks at `point`, kill the server there, and start a fresh one."""
    events: list[events_pb2.RunEvent] = []
    call = stub.StreamThreadRun(thread_service_pb2.StreamThreadRunRequest(spec=run))

    async def read() -> grpc.aio.AioRpcError | None:
        try:
            async for response in call:
                events.append(response.event)
        except grpc.aio.AioRpcError as error:
            return error
        return None

    doomed = Doomed(asyncio.create_task(read()), events)
    await scene.wait_for_marker(point)
    thread = (await stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id=run.thread_id))).thread
    assert thread.status == thread_pb2.THREAD_STATUS_RUNNING
    assert thread.lease.request_id == run.request_id
    doomed.run_id, doomed.head = thread.lease.run_id, thread.head
    await scene.kill()
    doomed.log_at_kill = read_log(scene.log)
    error = await asyncio.wait_for(doomed.reader, DEADLINE)
    assert error is not None and error.code() == grpc.StatusCode.UNAVAILABLE, error
    assert not [e for e in events if e.WhichOneof("event") == "result"], "the killed run must not finish"
    assert {e.run_id for e in events} <= {doomed.run_id}
    committed = [e.thread_committed.revision for e in events if e.WhichOneof("event") == "thread_committed"]
    assert all(revision <= doomed.committed for revision in committed)
    return doomed, await scene.start_after_crash()


async def retry_while_busy(
    stub: Stub, run: thread_service_pb2.ThreadRunSpec, *, holder: str
) -> thread_service_pb2.RunThreadResponse:
    """`RunThread` again and again while the killed run's lease (request `holder`) is still live: a
    retry of that same request attaches to the dead attempt and ends `RUN_ATTEMPT_LOST` once its lease
    is over (LIVE §2.5); another request is `THREAD_BUSY`. The next retry becomes the next attempt."""
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            return await run_thread(stub, run)
        except grpc.aio.AioRpcError as error:
            info = error_info(error)
            waiting = ("THREAD_BUSY", "RUN_ATTEMPT_LOST")
            if error.code() != grpc.StatusCode.ABORTED or info is None or info.reason not in waiting:
                raise
            assert info.metadata["request_id"] == holder
            assert time.monotonic() < deadline, "the killed server's lease never expired"
            await asyncio.sleep(POLL)


# -- what the thread holds ---------------------------------------------------------------------------


async def head_history(stub: Stub, thread_id: str) -> tuple[thread_pb2.Thread, list[ModelMessage]]:
    thread = (await stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id=thread_id))).thread
    checkpoint = (
        await stub.GetCheckpoint(
            thread_service_pb2.GetCheckpointRequest(thread_id=thread_id, revision=thread.revision)
        )
    ).checkpoint
    state = state_from_pb(checkpoint.state, field="checkpoint.state")
    assert state.thread_id == thread_id
    return thread, list(state.message_history)


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def calls(messages: list[ModelMessage], tool: str) -> list[str]:
    return [
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.tool_name == tool
    ]


def answers(messages: list[ModelMessage], call_id: str) -> list[ToolReturnPart | RetryPromptPart]:
    """Every result the history holds for one call (exactly one when it is settled)."""
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id == call_id
    ]


def only_answer(messages: list[ModelMessage], call_id: str) -> ToolReturnPart:
    [part] = answers(messages, call_id)
    assert isinstance(part, ToolReturnPart), part
    return part


async def check_checkpoints(stub: Stub, thread_id: str, doomed: Doomed, request_id: str) -> None:
    """Revisions run head..1 without gaps; the killed run left only MID_RUN ones; a new attempt ended it."""
    listed = (
        await stub.ListCheckpoints(
            thread_service_pb2.ListCheckpointsRequest(thread_id=thread_id, page_size=1000)
        )
    ).checkpoints
    head = listed[0]
    assert [c.revision for c in listed] == list(range(head.revision, 0, -1))
    killed = [c for c in listed if c.run_id == doomed.run_id]
    assert {c.kind for c in killed} <= {thread_pb2.CHECKPOINT_KIND_MID_RUN}
    assert max((c.revision for c in killed), default=0) == doomed.committed
    assert head.request_id == request_id
    assert head.run_id not in ("", doomed.run_id), "the retry is a new attempt with a run ID of its own"


# -- a prompt run killed before its first model request, inside a tool, after a tool returned ---------

VALUE = {"write_note": "noted hello", "read_status": "api is up"}


@pytest.mark.parametrize(
    ("prompt", "tool", "mode", "unknown", "runs"),
    [
        # Before the first model request: the retry runs the whole turn, the prompt once.
        pytest.param("use:plain crash:model", "write_note", DECLARED, False, 1, id="model"),
        # Before the tool started (its dispatch intent issued, never dispatched): known not started
        # (LIVE §5.3), so the retry runs it once in every mode, with no unknown result.
        pytest.param(
            "use:plain crash:before_tool:write_note", "write_note", DECLARED, False, 1, id="before-declared"
        ),
        pytest.param(
            "use:plain crash:before_tool:write_note", "write_note", NEVER, False, 1, id="before-never"
        ),
        pytest.param(
            "use:plain crash:before_tool:write_note", "write_note", ALWAYS, False, 1, id="before-always"
        ),
        # Inside a plain tool: it may have acted, so it is never run again under DECLARED or NEVER.
        pytest.param("use:plain crash:tool:write_note", "write_note", DECLARED, True, 1, id="plain-declared"),
        pytest.param("use:plain crash:tool:write_note", "write_note", NEVER, True, 1, id="plain-never"),
        pytest.param("use:plain crash:tool:write_note", "write_note", ALWAYS, False, 2, id="plain-always"),
        # Inside a recovery-retryable tool: DECLARED replays it.
        pytest.param(
            "use:retryable crash:tool:read_status", "read_status", DECLARED, False, 2, id="retryable"
        ),
        pytest.param(
            "use:retryable crash:tool:read_status", "read_status", NEVER, True, 1, id="retryable-never"
        ),
        # While the model answers the tool's result: that result was committed before the request was
        # sent (LIVE §5.1), so it is kept and the tool never runs again, in every mode.
        pytest.param(
            "use:plain crash:model:results", "write_note", DECLARED, False, 1, id="results-declared"
        ),
        pytest.param("use:plain crash:model:results", "write_note", NEVER, False, 1, id="results-never"),
        pytest.param("use:plain crash:model:results", "write_note", ALWAYS, False, 1, id="results-always"),
        # After the tool returned, before its result was committed: the result is lost with the server.
        pytest.param(
            "use:plain crash:after_tool:write_note", "write_note", DECLARED, True, 1, id="after-plain"
        ),
        pytest.param(
            "use:retryable crash:after_tool:read_status",
            "read_status",
            DECLARED,
            False,
            2,
            id="after-retryable",
        ),
    ],
)
async def test_a_killed_run_is_continued_by_its_retry(
    scene: Scene, prompt: str, tool: str, mode: run_pb2.ToolRecovery.ValueType, unknown: bool, runs: int
) -> None:
    stub = await scene.start()
    thread_id = await create_thread(stub)
    first = spec(thread_id, "req-crash", text=prompt)
    point = prompt.split("crash:")[1]
    doomed, stub = await run_until_killed(scene, stub, first, point)
    if point.startswith("tool:"):
        assert [e["phase"] for e in doomed.log_at_kill if e.get("tool") == tool] == ["start"]

    retry = spec(thread_id, "req-crash", text=prompt, tool_recovery=mode)
    response = await retry_while_busy(stub, retry, holder="req-crash")

    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response.result
    assert response.result.request_id == "req-crash" and not response.replayed
    assert response.result.run_id != doomed.run_id
    thread, history = await head_history(stub, thread_id)
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE and not thread.recovery_pending
    assert not thread.HasField("lease") and thread.revision == response.revision
    assert prompts(history) == [prompt]
    [call_id] = calls(history, tool)
    answer = only_answer(history, call_id)
    if unknown:
        assert (answer.content, answer.outcome) == (INTERRUPTED_TOOL_RESULT, "failed")
    else:
        assert (answer.content, answer.outcome) == (VALUE[tool], "success")
    assert executions(scene.log) == {call_id: runs}
    await check_checkpoints(stub, thread_id, doomed, "req-crash")

    again = await run_thread(stub, retry)
    assert again.replayed and again.revision == response.revision
    assert executions(scene.log) == {call_id: runs}, "a replayed request runs nothing"


# -- a resume killed after its answers were accepted, before or after the approved tool ran ----------

SHIPPED = "shipped o-1"
DENIAL = "not this one"


def answers_to(pending: deferred_pb2.DeferredToolRequests) -> deferred_pb2.DeferredToolResults:
    """The host's answers: the external result, `pay_*` approved, `deny_*` denied."""
    [ship] = pending.calls
    assert ship.tool_name == "dispatch" and ship.kind == deferred_pb2.DEFERRED_KIND_EXTERNAL
    pay, deny = pending.approvals
    assert (pay.tool_name, deny.tool_name) == ("transfer", "transfer")
    return deferred_pb2.DeferredToolResults(
        calls=[deferred_pb2.CallResult(tool_call_id=ship.tool_call_id, value_json=f'"{SHIPPED}"')],
        approvals=[
            deferred_pb2.ApprovalResult(tool_call_id=pay.tool_call_id, approved=deferred_pb2.ToolApproved()),
            deferred_pb2.ApprovalResult(
                tool_call_id=deny.tool_call_id, denied=deferred_pb2.ToolDenied(message=DENIAL)
            ),
        ],
    )


@pytest.mark.parametrize("mode", [DECLARED, NEVER, ALWAYS], ids=["declared", "never", "always"])
@pytest.mark.parametrize(
    ("point", "ran"),
    [
        pytest.param("before_tool:transfer", 0, id="before-approved-ran"),
        pytest.param("tool:transfer", 1, id="inside-approved-ran"),
        pytest.param("after_tool:transfer", 1, id="after-approved-ran"),
    ],
)
async def test_a_killed_resume_keeps_its_facts_and_reuses_the_approval_only_when_not_started(
    scene: Scene, point: str, ran: int, mode: run_pb2.ToolRecovery.ValueType
) -> None:
    stub = await scene.start()
    thread_id = await create_thread(stub)
    prompt = f"use:batch crash:{point}"
    suspended = await run_thread(stub, spec(thread_id, "req-ask", text=prompt))
    assert suspended.result.status == run_pb2.RUN_STATUS_SUSPENDED
    thread, _ = await head_history(stub, thread_id)
    assert thread.status == thread_pb2.THREAD_STATUS_SUSPENDED
    resume = spec(thread_id, "req-answer", answers=answers_to(thread.pending))
    [ship] = [c.tool_call_id for c in thread.pending.calls]
    pay, deny = [a.tool_call_id for a in thread.pending.approvals]

    doomed, stub = await run_until_killed(scene, stub, resume, point)
    assert executions(scene.log) == ({pay: 1} if ran else {})
    resume.tool_recovery = mode
    response = await retry_while_busy(stub, resume, holder="req-answer")

    thread, history = await head_history(stub, thread_id)
    assert prompts(history) == [prompt]
    # Facts the host gave are applied once, whatever the recovery mode.
    assert (only_answer(history, ship).content, only_answer(history, ship).outcome) == (SHIPPED, "success")
    assert (only_answer(history, deny).content, only_answer(history, deny).outcome) == (DENIAL, "denied")
    if not ran:
        # Killed before its dispatch intent: known never started (LIVE §5.3), so the retry runs it once
        # with the approval it had, in every mode; no unknown result and no fresh approval.
        assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response.result
        assert (only_answer(history, pay).content, only_answer(history, pay).outcome) == (
            "transferred 10",
            "success",
        )
        assert executions(scene.log) == {pay: 1}, "the approved transfer ran once"
        await check_checkpoints(stub, thread_id, doomed, "req-answer")
        return
    # It may have run: the approval is not reused, the unknown result or (ALWAYS) a fresh approval request.
    if mode == ALWAYS:
        assert response.result.status == run_pb2.RUN_STATUS_SUSPENDED, response.result
        assert [a.tool_call_id for a in response.result.deferred.approvals] == [pay]
        assert not response.result.deferred.calls and answers(history, pay) == []
        assert thread.status == thread_pb2.THREAD_STATUS_SUSPENDED
        assert [a.tool_call_id for a in thread.pending.approvals] == [pay]
    else:
        assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response.result
        pay_answer = only_answer(history, pay)
        assert (pay_answer.content, pay_answer.outcome) == (INTERRUPTED_TOOL_RESULT, "failed")
        assert thread.status == thread_pb2.THREAD_STATUS_IDLE and not thread.recovery_pending
    assert executions(scene.log) == ({pay: 1} if ran else {}), "the approved transfer ran at most once"
    await check_checkpoints(stub, thread_id, doomed, "req-answer")

    if mode == ALWAYS:  # the host decides again: a denial now settles the call, and nothing runs
        denial = deferred_pb2.DeferredToolResults(
            approvals=[deferred_pb2.ApprovalResult(tool_call_id=pay, denied=deferred_pb2.ToolDenied())]
        )
        done = await run_thread(stub, spec(thread_id, "req-deny", answers=denial))
        assert done.result.status == run_pb2.RUN_STATUS_COMPLETED, done.result
        thread, history = await head_history(stub, thread_id)
        assert thread.status == thread_pb2.THREAD_STATUS_IDLE and not thread.recovery_pending
        assert only_answer(history, pay).outcome == "denied"
        assert len(answers(history, ship)) == len(answers(history, deny)) == 1
        assert executions(scene.log) == ({pay: 1} if ran else {})


@pytest.mark.parametrize("mode", [DECLARED, NEVER, ALWAYS], ids=["declared", "never", "always"])
async def test_a_resume_killed_while_the_model_answers_keeps_the_approved_tools_result(
    scene: Scene, mode: run_pb2.ToolRecovery.ValueType
) -> None:
    """LIVE §5.1: the approved `transfer` ran and its result was committed before the model was asked, so
    the retry neither gives it the unknown result nor asks for a fresh approval; it ran once."""
    stub = await scene.start()
    thread_id = await create_thread(stub)
    prompt = "use:batch crash:model:results"
    suspended = await run_thread(stub, spec(thread_id, "req-ask", text=prompt))
    assert suspended.result.status == run_pb2.RUN_STATUS_SUSPENDED
    thread, _ = await head_history(stub, thread_id)
    resume = spec(thread_id, "req-answer", answers=answers_to(thread.pending))
    [ship] = [c.tool_call_id for c in thread.pending.calls]
    pay, deny = [a.tool_call_id for a in thread.pending.approvals]

    doomed, stub = await run_until_killed(scene, stub, resume, "model:results")
    assert executions(scene.log) == {pay: 1}
    resume.tool_recovery = mode
    response = await retry_while_busy(stub, resume, holder="req-answer")

    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response.result
    thread, history = await head_history(stub, thread_id)
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE and not thread.recovery_pending
    assert prompts(history) == [prompt]
    assert (only_answer(history, pay).content, only_answer(history, pay).outcome) == (
        "transferred 10",
        "success",
    )
    assert (only_answer(history, ship).content, only_answer(history, ship).outcome) == (SHIPPED, "success")
    assert (only_answer(history, deny).content, only_answer(history, deny).outcome) == (DENIAL, "denied")
    assert executions(scene.log) == {pay: 1}, "the approved transfer ran once"
    await check_checkpoints(stub, thread_id, doomed, "req-answer")


# -- another request after the crash: the first request's retry is told it was interrupted -----------


@pytest.mark.parametrize("point", ["model", "tool:write_note"])
async def test_another_request_after_a_crash_interrupts_the_first(scene: Scene, point: str) -> None:
    stub = await scene.start()
    thread_id = await create_thread(stub)
    first = spec(thread_id, "req-first", text=f"use:plain crash:{point}")
    doomed, stub = await run_until_killed(scene, stub, first, point)
    if point == "tool:write_note":
        assert doomed.committed > 1, "the run committed its prompt and the tool call before the tool ran"

    other = await retry_while_busy(stub, spec(thread_id, "req-other", text="hello"), holder="req-first")
    assert other.result.status == run_pb2.RUN_STATUS_COMPLETED, other.result
    _, history = await head_history(stub, thread_id)
    assert prompts(history) == ([f"use:plain crash:{point}", "hello"] if doomed.committed else ["hello"])
    for call_id in calls(history, "write_note"):  # the killed call: unknown, never run again
        assert only_answer(history, call_id).content == INTERRUPTED_TOOL_RESULT
        assert executions(scene.log) == {call_id: 1}

    for _ in range(2):  # the answer is stable
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await run_thread(stub, first)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        info = error_info(raised.value)
        assert info is not None and info.reason == "REQUEST_INTERRUPTED"
        assert (info.metadata["run_id"], info.metadata["revision"]) == (doomed.run_id, str(doomed.committed))
