"""The barrier before each model request (LIVE §5.1; `harness.barrier`), in process.

A durable host commits its checkpoint in the barrier, so the barrier must see the state that ends with
the request about to be sent (a tool's result included) before the model does; a cancellation asked
while it runs must wait for it and then stop the run before the request is sent; and a barrier's own
failure is the host's, never reported as the model's.
"""

from __future__ import annotations

import asyncio

import anyio
import pytest
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo

from harness import (
    DeferredToolResume,
    ExecutableAgent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessState,
)
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio

RESULT = "value of a"


LOOKUPS: list[str] = []
"""Every execution of `lookup`, in order."""


def lookup(key: str) -> str:
    LOOKUPS.append(key)
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _clear_lookups() -> None:
    LOOKUPS.clear()


def returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]


class Recorder:
    """A model and a barrier that log, in order, what each saw."""

    def __init__(self) -> None:
        self.log: list[tuple[str, list[str]]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.entered = asyncio.Event()
        self.finished_work: list[int] = []
        self.fail: Exception | None = None
        self.hold = 1
        """Which barrier call (1 = the first) waits for `release`; the others pass at once."""
        self.gated: list[tuple[str, str, dict[str, object], str, bool, list[str]]] = []
        """Each gate call: call ID, tool, arguments, kind, retryable, and the tool's executions then."""
        self.gate_hold = False
        self.gate_fail: Exception | None = None

    async def model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.log.append(("model", returns(messages)))
        if not returns(messages):
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": "a"}, tool_call_id="L1")])
        return ModelResponse(parts=[TextPart("done")])

    async def before_model_request(
        self, state: HarnessState, pending_input: DeferredToolResume | None
    ) -> None:
        self.log.append(("barrier", returns(list(state.message_history))))
        if self.fail is not None:
            raise self.fail
        if sum(who == "barrier" for who, _ in self.log) == self.hold:
            self.entered.set()
            await self.release.wait()  # a commit that takes its time
        await asyncio.sleep(0)
        self.finished_work.append(len(state.message_history))

    async def before_tool_call(
        self, call_id: str, tool_name: str, args: dict[str, object], *, tool_kind: str, retryable: bool
    ) -> None:
        self.gated.append((call_id, tool_name, args, tool_kind, retryable, list(LOOKUPS)))
        if self.gate_fail is not None:
            raise self.gate_fail
        if self.gate_hold:
            self.entered.set()
            await self.release.wait()  # a durable write that takes its time
        await asyncio.sleep(0)

    def agent(self) -> ExecutableAgent[str]:
        return ExecutableAgent(
            scripted_model(self.model), capabilities=[Capability(id="acme.catalog", tools=[lookup])]
        )


async def test_the_barrier_sees_each_request_with_its_tool_results_before_the_model_does() -> None:
    recorder = Recorder()
    result = await recorder.agent().run("go", barrier=recorder)
    assert result.status == "completed"
    assert recorder.log == [("barrier", []), ("model", []), ("barrier", [RESULT]), ("model", [RESULT])]
    # The state the barrier saw ends with the request about to be sent.
    assert recorder.finished_work == [1, 3]


async def test_without_a_barrier_the_run_and_its_events_are_unchanged() -> None:
    with_barrier, without = Recorder(), Recorder()

    async def kinds(recorder: Recorder, barrier: Recorder | None) -> list[str]:
        names: list[str] = []
        async with recorder.agent().stream("go", checkpoints=True, barrier=barrier) as stream:
            async for item in stream:
                if isinstance(item, HarnessEvent):
                    event = item.event
                    names.append(
                        str(event.type) if isinstance(event, HarnessExtensionEvent) else event.event_kind
                    )
                else:
                    names.append(type(item).__name__)
        return names

    assert await kinds(with_barrier, with_barrier) == await kinds(without, None)
    assert [who for who, _ in without.log] == ["model", "model"]


@pytest.mark.parametrize("hold", [1, 2], ids=["prompt", "tool-result"])
async def test_a_cancel_during_the_barrier_waits_for_it_then_stops_before_the_request(hold: int) -> None:
    recorder = Recorder()
    recorder.hold = hold  # which request's barrier is slow: the first, or the one with the tool's result
    recorder.release.clear()
    stream = recorder.agent().stream("go", checkpoints=True, barrier=recorder)

    async def cancel_in_the_barrier() -> None:
        await recorder.entered.wait()
        stream.cancel()
        await asyncio.sleep(0.01)  # the cancel is asked while the barrier still works
        recorder.release.set()

    with anyio.fail_after(60):  # a hang guard only
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_in_the_barrier)
            async with stream:
                async for _ in stream:
                    pass
    result = stream.result
    assert result is not None and result.status == "cancelled"
    assert recorder.finished_work == [1, 3][:hold], "the barrier's work was not cut short by the cancel"
    seen = [RESULT] if hold == 2 else []
    assert recorder.log[-1] == ("barrier", seen), "the request after the cancelled barrier was not sent"
    assert result.state is not None and returns(list(result.state.message_history)) == seen


async def test_an_outside_cancellation_during_the_barrier_is_held_then_propagates() -> None:
    recorder = Recorder()
    recorder.release.clear()
    stream = recorder.agent().stream("go", barrier=recorder)

    async def consume() -> None:
        async with stream:
            async for _ in stream:
                pass

    task = asyncio.create_task(consume())
    await recorder.entered.wait()
    task.cancel()
    await asyncio.sleep(0.01)
    assert not task.done(), "held while the barrier works"
    recorder.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert recorder.finished_work == [1]
    assert [who for who, _ in recorder.log] == ["barrier"]


async def test_a_failing_barrier_is_the_hosts_error_not_a_failed_model_request() -> None:
    recorder = Recorder()
    recorder.fail = OSError("the store is gone")
    with pytest.raises(OSError, match="the store is gone"):
        await recorder.agent().run("go", barrier=recorder)
    assert recorder.log == [("barrier", [])], "no model request was sent"


# -- the dispatch gate (LIVE §5.2) --------------------------------------------------------------------


async def test_the_gate_sees_each_side_effecting_call_before_its_tool_starts() -> None:
    recorder = Recorder()
    result = await recorder.agent().run("go", barrier=recorder)
    assert result.status == "completed"
    assert recorder.gated == [("L1", "lookup", {"key": "a"}, "function", False, [])], "before it ran"
    assert LOOKUPS == ["a"]


async def test_a_failing_gate_stops_the_tool_and_is_the_hosts_error() -> None:
    recorder = Recorder()
    recorder.gate_fail = OSError("the intent could not be written")
    with pytest.raises(OSError, match="the intent could not be written"):
        await recorder.agent().run("go", barrier=recorder)
    assert LOOKUPS == [], "the tool never started"


async def test_a_cancel_during_the_gate_waits_for_it_then_the_tool_does_not_start() -> None:
    recorder = Recorder()
    recorder.hold, recorder.gate_hold = 0, True  # no barrier waits; the gate does
    recorder.release.clear()
    stream = recorder.agent().stream("go", barrier=recorder)

    async def cancel_in_the_gate() -> None:
        await recorder.entered.wait()
        stream.cancel()
        await asyncio.sleep(0.01)  # asked while the gate still works
        recorder.release.set()

    with anyio.fail_after(60):  # a hang guard only
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_in_the_gate)
            async with stream:
                async for _ in stream:
                    pass
    result = stream.result
    assert result is not None and result.status == "cancelled"
    assert len(recorder.gated) == 1 and LOOKUPS == [], "the gate finished; the tool never started"


async def test_a_barrier_without_a_gate_leaves_the_tools_ungated() -> None:
    """A host's barrier written before `before_tool_call` existed still works: its tools just run."""

    class CommitsOnly:
        def __init__(self) -> None:
            self.calls = 0

        async def before_model_request(
            self, state: HarnessState, pending_input: DeferredToolResume | None
        ) -> None:
            self.calls += 1

    barrier = CommitsOnly()
    result = await Recorder().agent().run("go", barrier=barrier)  # type: ignore[arg-type]
    assert result.status == "completed" and LOOKUPS == ["a"] and barrier.calls == 2
