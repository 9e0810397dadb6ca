"""`RunCleanupError` (SPEC §2.2.6): a run that fails once its outcome exists, or whose teardown fails.

Each failure comes from a real host capability with a bug in its teardown: a native `after_run`
hook, the half of `wrap_run` after its handler returned, or a toolset's `__aexit__`. The core
raises `run_cleanup_failed` with the outcome as a candidate only; the server ends `StreamRun`
after `run_started` with that error's status and ErrorInfo, and `Run` returns the same status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from conftest import RunningServer, _start_in_thread, error_info
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartStartEvent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.run import AgentRunResult
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from threadline.v1 import events_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2

from harness import (
    ExecutableAgent,
    HarnessError,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    RunCleanupError,
    StateError,
)
from harness.errors import ErrorCode
from harness.testing import scripted_model
from server.agents import AgentRegistry
from server.demo import DEMO_AGENT_NAME, demo_agent

pytestmark = pytest.mark.anyio

FAILED_AFTER_OUTCOME = "Harness run failed after producing an outcome."
CLEANUP_FAILED = "Harness run cleanup failed."


class TeardownBug(Exception):
    """What a host capability's broken teardown raises."""


# -- an agent with one tool whose capability breaks in teardown ---------------------------------------
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def lookup_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("lookup", {"query": "plan"}, tool_call_id="L1")])
    return ModelResponse(parts=[TextPart(f"done: {returns[0].content}")])


def lookup_toolset() -> FunctionToolset[Any]:
    return FunctionToolset([lookup])


@dataclass
class AfterRunFails(AbstractCapability[Any]):
    """Brings `lookup`; its `after_run` hook (called once the run has its result) raises."""

    error: Exception

    def get_toolset(self) -> AbstractToolset[Any]:
        return lookup_toolset()

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        raise self.error


@dataclass
class WrapRunFails(AbstractCapability[Any]):
    """Brings `lookup`; `wrap_run` raises after its handler returned the run's result."""

    error: Exception

    def get_toolset(self) -> AbstractToolset[Any]:
        return lookup_toolset()

    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        await handler()
        raise self.error


@dataclass
class ExitFails(WrapperToolset[Any]):
    """A toolset whose `__aexit__` raises after the toolset it wraps has exited."""

    error: Exception

    async def __aexit__(self, *args: Any) -> bool | None:
        await super().__aexit__(*args)
        raise self.error


@dataclass
class ToolsetExitFails(AbstractCapability[Any]):
    """Brings `lookup` in a toolset whose exit (at the run's teardown) raises."""

    error: Exception

    def get_toolset(self) -> AbstractToolset[Any]:
        return ExitFails(lookup_toolset(), self.error)


Teardown = Callable[[Exception], AbstractCapability[Any]]
TEARDOWNS: dict[str, Teardown] = {
    "after_run": AfterRunFails,
    "wrap_run": WrapRunFails,
    "toolset_exit": ToolsetExitFails,
}


def failing_agent(teardown: Teardown = AfterRunFails, error: Exception | None = None) -> ExecutableAgent[str]:
    cause = error if error is not None else TeardownBug("teardown failed")
    return ExecutableAgent(scripted_model(lookup_then_answer), capabilities=[teardown(cause)], name="cleanup")


def expected_history() -> list[tuple[type, type, str]]:
    """The completed run's whole history, as (message, part, what it says)."""
    return [
        (ModelRequest, UserPromptPart, "plan it"),
        (ModelResponse, ToolCallPart, "lookup"),
        (ModelRequest, ToolReturnPart, "found plan"),
        (ModelResponse, TextPart, "done: found plan"),
    ]


def summary(messages: tuple[ModelMessage, ...]) -> list[tuple[type, type, str]]:
    rows: list[tuple[type, type, str]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart | TextPart):
                said = str(part.content)
            elif isinstance(part, ToolCallPart):
                said = part.tool_name
            elif isinstance(part, ToolReturnPart):
                said = str(part.content)
            else:
                continue
            rows.append((type(message), type(part), said))
    return rows


def assert_cleanup_error(error: RunCleanupError, *, message: str, cause: Exception) -> None:
    assert isinstance(error, HarnessError)
    assert error.code == ErrorCode.RUN_CLEANUP_FAILED == "run_cleanup_failed"
    assert error.retry_hint == "new_run"
    assert error.details == {"cause_count": 1}
    assert str(error) == error.message == message
    assert error.causes == (cause,)
    assert error.__cause__ is cause
    assert error.__notes__ == [f"Cleanup cause: {type(cause).__name__}"]


# -- the core ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", list(TEARDOWNS))
async def test_a_teardown_failure_after_the_output_raises_with_the_completed_candidate(where: str) -> None:
    cause = TeardownBug(f"{where} failed")
    with pytest.raises(RunCleanupError) as caught:
        await failing_agent(TEARDOWNS[where], cause).run("plan it")
    error = caught.value
    assert_cleanup_error(error, message=FAILED_AFTER_OUTCOME, cause=cause)
    outcome = error.outcome
    assert outcome is not None
    assert (outcome.status, outcome.output, outcome.failure) == ("completed", "done: found plan", None)
    assert outcome.state is not None
    assert outcome.state.thread_id == outcome.thread_id
    assert summary(outcome.state.message_history) == expected_history()
    assert summary(outcome.all_messages()) == expected_history()


@pytest.mark.parametrize(
    "cause",
    [
        TeardownBug("a bug"),
        # A native run error and a harness error after the output are no terminal of their own either:
        # neither a failed nor a completed result is delivered.
        UnexpectedModelBehavior("late"),
        StateError("late", code=ErrorCode.CAPABILITY_STATE_INVALID),
    ],
    ids=["exception", "agent_run_error", "harness_error"],
)
async def test_the_stream_ends_without_a_terminal_event_and_keeps_the_candidate(cause: Exception) -> None:
    items: list[HarnessEvent | HarnessRunResultEvent[str]] = []
    stream = failing_agent(AfterRunFails, cause).stream("plan it")
    with pytest.raises(RunCleanupError) as caught:
        async with stream:
            async for item in stream:
                items.append(item)
    error = caught.value
    assert_cleanup_error(error, message=FAILED_AFTER_OUTCOME, cause=cause)
    assert not any(isinstance(item, HarnessRunResultEvent) for item in items)
    lifecycle = [
        item.event.payload["type"]
        for item in items
        if isinstance(item, HarnessEvent) and isinstance(item.event, HarnessExtensionEvent)
    ]
    assert lifecycle == [
        "run_started",
        "model_request_started",
        "model_request_completed",
        "model_request_started",
        "model_request_completed",
    ]
    assert [item.sequence for item in items] == list(range(len(items)))
    # After close: no result was delivered, the outcome is the candidate, and so is the exported state.
    assert stream.result is None
    assert stream.outcome is error.outcome
    assert error.outcome is not None and error.outcome.state is not None
    assert await stream.export_state() == error.outcome.state


async def test_a_teardown_failure_when_closing_an_unfinished_run_has_no_outcome() -> None:
    cause = TeardownBug("toolset exit failed")
    stream = failing_agent(ToolsetExitFails, cause).stream("plan it")
    with pytest.raises(RunCleanupError) as caught:
        async with stream:
            async for item in stream:
                if isinstance(item, HarnessEvent) and isinstance(item.event, PartStartEvent):
                    break  # the host leaves mid-response: closing the stream tears the native run down
    error = caught.value
    assert_cleanup_error(error, message=CLEANUP_FAILED, cause=cause)
    assert error.outcome is None
    assert stream.result is None and stream.outcome is None
    # The normalized shutdown checkpoint is still there: the prompt, and nothing half-received.
    state = await stream.export_state()
    assert state.thread_id == stream.thread_id
    assert summary(state.message_history)[:1] == expected_history()[:1]
    assert not any(isinstance(p, ToolCallPart) for m in state.message_history for p in m.parts)


async def test_a_cancellation_in_flight_survives_a_teardown_failure_and_notes_it() -> None:
    stream = failing_agent(ToolsetExitFails).stream("plan it")
    inside = asyncio.Event()
    notes: list[str] = []

    async def host() -> None:
        try:
            async with stream:
                async for item in stream:
                    if isinstance(item, HarnessEvent) and isinstance(item.event, PartStartEvent):
                        inside.set()
                        await asyncio.Event().wait()  # cancelled here, outside the stream
        except asyncio.CancelledError as cancelled:
            notes.extend(getattr(cancelled, "__notes__", []))
            raise

    task = asyncio.create_task(host())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert notes == ["Harness cleanup also failed: TeardownBug"]
    assert stream.outcome is None


# -- through the server -------------------------------------------------------------------------------
FAILING = "cleanup-fails"


@pytest.fixture(scope="module")
def cleanup_server(_servers: list[RunningServer]) -> RunningServer:
    """A server with the demo agent as default and `cleanup-fails`, whose `after_run` raises."""
    registry = AgentRegistry(
        {DEMO_AGENT_NAME: demo_agent(), FAILING: failing_agent()}, default=DEMO_AGENT_NAME
    )
    running = _start_in_thread(agents=registry)
    _servers.append(running)
    return running


Stub = harness_service_pb2_grpc.HarnessServiceStub


@pytest.fixture
async def stub(cleanup_server: RunningServer) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(cleanup_server.address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


def assert_cleanup_status(error: grpc.aio.AioRpcError) -> None:
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == FAILED_AFTER_OUTCOME
    info = error_info(error)
    assert info is not None
    assert (info.reason, info.domain) == ("RUN_CLEANUP_FAILED", "threadline")
    assert dict(info.metadata) == {"cause_count": "1"}


@pytest.mark.parametrize("per_message", [0, 64], ids=["one_event_per_message", "packed"])
async def test_stream_run_ends_with_the_cleanup_status_after_run_started(
    stub: Stub, cleanup_server: RunningServer, per_message: int
) -> None:
    request = harness_service_pb2.StreamRunRequest(
        spec=run_pb2.RunSpec(agent=FAILING, text="plan it"), max_events_per_message=per_message
    )
    events: list[events_pb2.RunEvent] = []
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for response in stub.StreamRun(request):
            events.extend([response.event] if response.HasField("event") else response.events)
    assert_cleanup_status(caught.value)
    kinds = [event.WhichOneof("event") for event in events]
    assert kinds[0] == "run_started"
    assert "tool_result" in kinds  # the run got as far as its tool and its answer
    assert "result" not in kinds
    assert [event.sequence for event in events] == list(range(len(events)))
    assert cleanup_server.runs_after_calls() == 0


async def test_run_returns_the_same_status(stub: Stub, cleanup_server: RunningServer) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(agent=FAILING, text="plan it")))
    assert_cleanup_status(caught.value)
    assert cleanup_server.runs_after_calls() == 0


async def test_the_demo_agent_beside_it_still_completes(stub: Stub) -> None:
    response = await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello")))
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED
