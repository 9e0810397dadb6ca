"""Runs and streams of the harness core (SPEC §1.3, §1.6, §1.10, §2.2, §2.3, §2.7.7, §2.8)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from harness import (
    INTERRUPTED_TOOL_RESULT,
    AgentContext,
    DeferredToolResume,
    ExecutableAgent,
    HarnessCheckpointEvent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessRunStream,
    HarnessState,
    InputError,
    RunBindings,
    RunError,
    RunRequest,
    StateError,
)
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]


def echo_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompts = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]
    return ModelResponse(parts=[TextPart(f"turn {len(prompts)}: {prompts[-1]}")])


def one_tool_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if not tool_returns(messages):
        return ModelResponse(parts=[ToolCallPart("lookup", {"key": "a"}, tool_call_id="L1")])
    return ModelResponse(parts=[TextPart(f"got {tool_returns(messages)[-1].content}")])


def lookup(key: str) -> str:
    return f"value of {key}"


catalog = Capability(id="acme.catalog", tools=[lookup])


async def test_continue_a_thread_twice() -> None:
    executable = ExecutableAgent(scripted_model(echo_script))
    initial_state = HarnessState.new(thread_id="thr_productthread1")
    first = await executable.run(
        "Draft the plan", bindings=RunBindings.embedded(), previous_state=initial_state
    )
    if first.state is None:
        raise RuntimeError("No continuation state is available")
    second = await executable.run("Review it", bindings=RunBindings.embedded(), previous_state=first.state)
    assert first.thread_id == second.thread_id == "thr_productthread1"
    assert first.run_id != second.run_id
    assert first.run_id.startswith("run-") and len(first.run_id) == 36
    assert second.status == "completed"
    assert second.output == "turn 2: Review it"
    assert second.state is not None and len(second.state.message_history) == 4
    assert first.output_json() == b'"turn 1: Draft the plan"'


async def test_a_run_takes_the_run_id_its_host_allocated_and_refuses_a_malformed_one() -> None:
    """A durable host names a queued request's run before it starts (LIVE §4.2)."""
    executable = ExecutableAgent(scripted_model(echo_script))
    given = "run-" + "ab" * 16
    result = await executable.run("hello", run_id=given)
    assert result.run_id == given
    async with executable.stream("hello", run_id=given) as stream:
        events = [event async for event in stream]
    assert {getattr(event, "run_id", given) for event in events} == {given}
    for bad in ("run-ABC", "run-" + "a" * 31, "job-" + "a" * 32, ""):
        with pytest.raises(RunError) as caught:
            executable.stream("hello", run_id=bad)
        assert caught.value.code == "run_id_invalid" and caught.value.details == {"run_id": bad}


async def test_a_run_continuing_a_result_state_takes_its_messages_instead_of_decoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A durable host continues each turn from the last result's state: no history is validated again."""
    from harness._history_codec import EncodedHistory

    decoded: list[int] = []
    original = EncodedHistory.decode

    def counting(self: EncodedHistory) -> list[ModelMessage]:
        decoded.append(self.count)
        return original(self)

    monkeypatch.setattr(EncodedHistory, "decode", counting)
    executable = ExecutableAgent(scripted_model(echo_script))
    state = HarnessState.new(thread_id="thr_productthread1")
    for turn in range(1, 4):
        result = await executable.run(f"turn {turn}", bindings=RunBindings.embedded(), previous_state=state)
        assert result.state is not None
        state = result.state
    assert [count for count in decoded if count] == []  # only the new state's empty history was read
    # The messages go to one run only; a second continuation of the same state decodes its own.
    first = await executable.run("a branch", bindings=RunBindings.embedded(), previous_state=state)
    second = await executable.run("another", bindings=RunBindings.embedded(), previous_state=state)
    assert [count for count in decoded if count] == [6]
    for branch, text in ((first, "a branch"), (second, "another")):
        assert branch.state is not None and len(branch.state.message_history) == 8
        assert branch.output == f"turn 4: {text}"


async def test_stream_orders_events_and_numbers_them_gap_free() -> None:
    executable = ExecutableAgent(scripted_model(one_tool_script), capabilities=[catalog])
    items: list[HarnessEvent | HarnessRunResultEvent[str]] = []
    async with executable.stream("go") as stream:
        async for item in stream:
            items.append(item)
    assert [i.sequence for i in items] == list(range(len(items)))
    assert isinstance(items[-1], HarnessRunResultEvent)
    assert sum(isinstance(i, HarnessRunResultEvent) for i in items) == 1
    kinds = [
        i.event.type if isinstance(i.event, HarnessExtensionEvent) else i.event.event_kind
        for i in items
        if isinstance(i, HarnessEvent)
    ]
    assert kinds[0] == "run_started"
    assert kinds[1] == "model_request_started"
    first_done = kinds.index("model_request_completed")
    assert set(kinds[2:first_done]) <= {"part_start", "part_delta", "part_end", "final_result"}
    assert kinds[first_done + 1 : first_done + 3] == ["function_tool_call", "function_tool_result"]
    assert kinds[first_done + 3] == "model_request_started"
    started = [
        i.event for i in items if isinstance(i, HarnessEvent) and isinstance(i.event, HarnessExtensionEvent)
    ]
    assert started[1].payload == {
        "type": "model_request_started",
        "request_id": "model-request-1",
        "request_index": 0,
        "message_count": 1,
    }
    result = items[-1].result
    assert result.output == "got value of a"
    assert all(i.thread_id == result.thread_id and i.run_id == result.run_id for i in items)


async def test_export_state_boundaries() -> None:
    executable = ExecutableAgent(scripted_model(one_tool_script), capabilities=[catalog])
    exports: list[tuple[str, int]] = []
    async with executable.stream("go") as stream:
        before = await stream.export_state()
        assert len(before.message_history) == 0
        async for item in stream:
            if isinstance(item, HarnessEvent):
                kind = (
                    item.event.type
                    if isinstance(item.event, HarnessExtensionEvent)
                    else item.event.event_kind
                )
                exports.append((str(kind), len((await stream.export_state()).message_history)))
    counts = dict(exports)
    # The tool's result appears when the next request is built, not at the result event.
    assert counts["function_tool_result"] == 2
    assert [n for k, n in exports if k == "model_request_started"] == [1, 3]
    assert [n for k, n in exports if k == "model_request_completed"] == [2, 4]
    after = await stream.export_state()
    assert after == stream.result.state  # type: ignore[union-attr]


async def test_a_checkpoint_stream_offers_a_candidate_where_the_export_moves() -> None:
    """`stream(..., checkpoints=True)`: a candidate after each request started/completed (SPEC §2.3.4)."""
    executable = ExecutableAgent(scripted_model(one_tool_script), capabilities=[catalog])
    order: list[str] = []
    candidates: list[int] = []
    async with executable.stream("go", checkpoints=True) as stream:
        async for item in stream:
            assert item.sequence == len(order)  # one numbering for every item, gap-free
            if isinstance(item, HarnessCheckpointEvent):
                assert item.state == await stream.export_state()
                assert (item.thread_id, item.run_id) == (stream.thread_id, stream.run_id)
                candidates.append(len(item.state.message_history))
                order.append("checkpoint")
            elif isinstance(item, HarnessEvent) and isinstance(item.event, HarnessExtensionEvent):
                order.append(str(item.event.type))
            else:
                order.append(type(item).__name__)
    assert candidates == [1, 2, 3, 4]
    for kind in ("model_request_started", "model_request_completed"):
        assert all(order[i + 1] == "checkpoint" for i, k in enumerate(order) if k == kind)
    assert order.count("checkpoint") == 4 and order[-1] == "HarnessRunResultEvent"
    plain = [item async for item in _items(executable.stream("go"))]
    assert not any(isinstance(item, HarnessCheckpointEvent) for item in plain)


async def _items(stream: HarnessRunStream[Any]) -> AsyncIterator[Any]:
    async with stream:
        async for item in stream:
            yield item


async def test_a_cancel_while_the_consumer_is_busy_reaches_the_run_at_its_next_read() -> None:
    """pydantic-ai cancels the task driving a run; a host busy with its own work (a commit, a slow
    reader) when it asks must not have that work cancelled: the run stops at the host's next read."""
    executable = ExecutableAgent(scripted_model(one_tool_script), capabilities=[catalog])
    async with executable.stream("lookup a", checkpoints=True) as stream:
        items = stream.__aiter__()
        while not isinstance(await anext(items), HarnessCheckpointEvent):
            pass  # until the native run is going, bound to this task
        stream.cancel()
        await asyncio.sleep(0.01)  # the host's own work: before the fix, cancelled here
        while not isinstance(result := await anext(items), HarnessRunResultEvent):
            pass
    assert result.result.status == "cancelled"


async def test_export_state_before_entering_is_run_not_active() -> None:
    stream = ExecutableAgent(scripted_model(echo_script)).stream("hi")
    with pytest.raises(StateError) as info:
        await stream.export_state()
    assert info.value.code == "run_not_active"


async def test_stream_is_used_once() -> None:
    stream = ExecutableAgent(scripted_model(echo_script)).stream("hi")
    with pytest.raises(RunError) as info:
        await stream.__anext__()
    assert info.value.code == "run_not_active"
    async with stream:
        async for _ in stream:
            pass
        with pytest.raises(RunError) as info:
            stream.__aiter__()
        assert info.value.code == "run_stream_reused"
    with pytest.raises(RunError) as info:
        await stream.__aenter__()
    assert info.value.code == "run_stream_reused"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("", "input_empty"),
        ([], "input_empty"),
        (b"hi", "input_invalid"),
        (42, "input_invalid"),
        ([object()], "input_invalid"),
    ],
)
async def test_input_checks(value: object, code: str) -> None:
    with pytest.raises(InputError) as info:
        ExecutableAgent(scripted_model(echo_script)).stream(value)
    assert info.value.code == code
    assert isinstance(info.value, ValueError)


async def test_parameter_type_checks() -> None:
    agent = ExecutableAgent(scripted_model(echo_script))
    with pytest.raises(RunError) as info:
        await agent.run("x", bindings={"not": "bindings"})
    assert info.value.code == "run_bindings_invalid"
    with pytest.raises(RunError) as info:
        await agent.run("x", previous_state={"schema_version": "1"})
    assert info.value.code == "previous_state_invalid"
    with pytest.raises(InputError) as info:
        await agent.run("x", tool_recovery="sometimes")
    assert info.value.code == "tool_recovery_invalid"
    with pytest.raises(RunError) as info:
        await agent.run("x", deferred_resume="nope", previous_state=HarnessState.new())
    assert info.value.code == "deferred_resume_invalid"
    with pytest.raises(StateError) as info:
        await agent.run(
            "x",
            previous_state=HarnessState.model_validate(
                {
                    "schema_version": "1",
                    "thread_id": "thr_a",
                    "refs": [{"key": "k", "digest": "a" * 64, "size": 1}],
                }
            ),
        )
    assert info.value.code == "state_store_missing"


def approval_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = tool_returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart("delete_file", {"path": "a.txt"}, tool_call_id="D1")])
    return ModelResponse(parts=[TextPart(f"{returns[-1].outcome}: {returns[-1].content}")])


deleted: list[str] = []


def delete_file(ctx: RunContext[AgentContext], path: str) -> str:
    deleted.append(path)
    return f"deleted {path}"


files = Capability(id="acme.files", tools=[Tool(delete_file, requires_approval=True)])


async def test_approval_suspends_then_resumes() -> None:
    executable = ExecutableAgent(scripted_model(approval_script), capabilities=[files])
    first = await executable.run("Ask for confirmation", bindings=RunBindings.embedded())
    if first.status != "suspended" or first.state is None or first.deferred is None:
        raise RuntimeError("Expected a suspended run")
    assert first.suspend_reason == "deferred"
    assert [a.target_identity for a in first.deferred.approvals] == ["tool/acme.files/delete_file"]
    results = first.deferred.build_results(approve_all=True)
    second = await executable.run(
        bindings=RunBindings.embedded(),
        previous_state=first.state,
        deferred_resume=DeferredToolResume(first.deferred, results),
    )
    assert second.status == "completed"
    assert second.output == "success: deleted a.txt"


async def test_denial_is_recorded_as_denied() -> None:
    executable = ExecutableAgent(scripted_model(approval_script), capabilities=[files])
    first = await executable.run("delete it")
    assert first.deferred is not None
    results = first.deferred.build_results(approvals={"D1": False})
    second = await executable.run(
        previous_state=first.state, deferred_resume=DeferredToolResume(first.deferred, results)
    )
    assert second.output == "denied: The tool call was denied."


def external_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = tool_returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart("send_sms", {"to": "+1"}, tool_call_id="c1")])
    return ModelResponse(parts=[TextPart(f"sms: {returns[-1].content}")])


def send_sms(to: str) -> str:
    raise CallDeferred(metadata={"channel": "sms"})


async def test_function_tool_deferral_carries_its_function_id() -> None:
    sms = Capability(id="acme.sms", tools=[send_sms])
    executable = ExecutableAgent(scripted_model(external_script), capabilities=[sms])
    first = await executable.run("text them")
    assert first.status == "suspended" and first.deferred is not None
    assert first.deferred.metadata == {
        "c1": {"channel": "sms", "threadline.deferred_function_id": "tool/acme.sms/send_sms"}
    }
    results = first.deferred.build_results(calls={"c1": "delivered"})
    second = await executable.run(
        previous_state=first.state, deferred_resume=DeferredToolResume(first.deferred, results)
    )
    assert second.output == "sms: delivered"


async def test_hosts_without_deferred_support() -> None:
    sms = Capability(id="acme.sms", tools=[send_sms])
    executable = ExecutableAgent(scripted_model(external_script), capabilities=[sms, files])
    seen: list[list[str]] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(sorted(t.name for t in info.function_tools))
        return external_script(messages, info)

    executable = ExecutableAgent(scripted_model(script), capabilities=[sms, files])
    result = await executable.run("text", bindings=RunBindings.embedded(deferred_tools_supported=False))
    assert seen[0] == ["send_sms"]  # the approval tool left the surface
    assert result.status == "completed"
    assert result.output == "sms: Deferred tool interaction is unavailable for this Run."
    assert result.state is not None
    assert tool_returns(list(result.state.message_history))[-1].outcome == "failed"


class CounterState(BaseModel):
    value: int


async def bump(ctx: RunContext[AgentContext]) -> int:
    current = await ctx.deps.state.read("acme.counter", CounterState, version="1")
    await ctx.deps.state.write(
        "acme.counter", CounterState(value=(current.value if current else 0) + 1), version="1"
    )
    return (current.value if current else 0) + 1


def bump_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts):
        return ModelResponse(parts=[ToolCallPart("bump", {}, tool_call_id=f"b{len(messages)}")])
    return ModelResponse(parts=[TextPart(f"count {tool_returns(messages)[-1].content}")])


async def test_capability_state_crosses_runs_through_the_state() -> None:
    counter = Capability(id="acme.counter", tools=[bump])
    executable = ExecutableAgent(scripted_model(bump_script), capabilities=[counter])
    first = await executable.run("bump")
    second = await executable.run("bump again", previous_state=first.state)
    assert second.output == "count 2"
    assert second.state is not None
    entry = second.state.agent_context_state.get("acme.counter")
    assert entry is not None and entry.version == "1" and entry.data == {"value": 2}


async def test_capability_state_version_mismatch_fails_the_run() -> None:
    counter = Capability(id="acme.counter", tools=[bump])
    executable = ExecutableAgent(scripted_model(bump_script), capabilities=[counter])
    state = HarnessState.new(
        agent_context_state={"entries": {"acme.counter": {"version": "2", "data": {"value": 7}}}}
    )
    result = await executable.run("bump", previous_state=state)
    assert result.status == "failed" and result.failure is not None
    assert result.failure.code == "capability_state_version_unsupported"
    assert result.failure.details == {
        "capability_id": "acme.counter",
        "expected_version": "1",
        "actual_version": "2",
    }
    assert result.state is not None
    closing = tool_returns(list(result.state.message_history))[-1]
    assert closing.outcome == "failed" and closing.content.startswith("No tool result was recorded")


def boom(path: str) -> str:
    raise OSError("disk on fire: secret detail")


async def test_tool_exception_fails_with_a_safe_state() -> None:
    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("boom", {"path": "x"}, tool_call_id="B1")])

    executable = ExecutableAgent(
        scripted_model(script), capabilities=[Capability(id="acme.boom", tools=[boom])]
    )
    result = await executable.run("explode")
    assert result.status == "failed" and result.failure is not None
    assert result.failure.code == "tool_execution_failed"
    assert result.failure.message == "Tool execution failed."
    assert result.failure.details == {"exception_type": "OSError", "tool_name": "boom", "tool_call_id": "B1"}
    assert result.failure.retry_hint == "new_run"
    assert "secret" not in repr(result.failure)
    assert result.state is not None
    assert [p.tool_call_id for p in tool_returns(list(result.state.message_history))] == ["B1"]
    with pytest.raises(RunError) as info:
        result.raise_for_status()
    assert info.value.code == "tool_execution_failed"


async def test_usage_limit_fails_the_run() -> None:
    executable = ExecutableAgent(
        scripted_model(one_tool_script), capabilities=[catalog], usage_limits=UsageLimits(request_limit=1)
    )
    result = await executable.run("go")
    assert result.status == "failed" and result.failure is not None
    assert result.failure.code == "usage_limit_exceeded"
    assert result.failure.retry_hint == "dependency_change"
    assert result.state is not None


async def test_cancel_mid_text_keeps_visible_text() -> None:
    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Partial answer that goes on and on")])

    executable = ExecutableAgent(scripted_model(script, chunk=8))
    async with executable.stream("talk") as stream:
        async for item in stream:
            if isinstance(item, HarnessEvent) and getattr(item.event, "event_kind", None) == "part_delta":
                stream.cancel()
            if isinstance(item, HarnessRunResultEvent):
                result = item.result
    assert result.status == "cancelled"
    assert result.state is not None
    tail = result.state.message_history[-1]
    assert isinstance(tail, ModelResponse)
    assert tail.state == "interrupted"
    assert isinstance(tail.parts[0], TextPart) and tail.parts[0].content.startswith("Partial ")


def shape(messages: Sequence[ModelMessage]) -> list[tuple[Any, ...]]:
    """Each message as (kind, state, parts), each part as the fields a rule is about."""
    out: list[tuple[Any, ...]] = []
    for message in messages:
        parts: list[tuple[Any, ...]] = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                parts.append((part.part_kind, part.tool_name, part.tool_call_id, part.args_as_dict()))
            elif isinstance(part, ToolReturnPart):
                parts.append(
                    (
                        part.part_kind,
                        part.tool_name,
                        part.tool_call_id,
                        part.content,
                        part.outcome,
                        part.metadata,
                    )
                )
            else:
                parts.append((part.part_kind, getattr(part, "content", None)))
        out.append((message.kind, message.state, parts))
    return out


def slow_tool_agent(started: asyncio.Event, finished: list[str]) -> ExecutableAgent[str]:
    """An agent whose one tool call (`slow`, S1) starts, then waits until it is cancelled."""

    async def slow(x: str) -> str:
        started.set()
        await asyncio.Event().wait()  # never set: only cancellation ends it
        finished.append(x)
        return x

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if tool_returns(messages):
            return ModelResponse(parts=[TextPart(f"after: {tool_returns(messages)[-1].content}")])
        return ModelResponse(parts=[ToolCallPart("slow", {"x": "1"}, tool_call_id="S1")])

    return ExecutableAgent(scripted_model(script), capabilities=[Capability(id="acme.slow", tools=[slow])])


INTERRUPTED_SLOW_CALL = [
    ("request", "complete", [("user-prompt", "wait")]),
    ("response", "complete", [("tool-call", "slow", "S1", {"x": "1"})]),
    ("request", "interrupted", [("tool-return", "slow", "S1", INTERRUPTED_TOOL_RESULT, "failed", None)]),
]
"""A run cancelled while `slow` ran (SPEC §2.4 step 3): the call is kept and gets the unknown result."""


async def test_outside_cancellation_propagates_and_leaves_a_checkpoint() -> None:
    """SPEC §2.3.4 (after close: the history normalized per §2.4), §2.4 step 3, §2.5.3."""
    started = asyncio.Event()
    finished: list[str] = []
    stream = slow_tool_agent(started, finished).stream("wait")

    async def consume() -> None:
        async with stream:
            async for _ in stream:
                pass

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    checkpoint = await stream.export_state()
    assert shape(checkpoint.message_history) == INTERRUPTED_SLOW_CALL
    assert checkpoint.thread_id == stream.thread_id
    assert stream.result is None and stream.outcome is None
    assert finished == []


async def test_cancel_while_a_tool_runs_ends_cancelled_with_the_call_closed() -> None:
    """SPEC §2.3.1 (`cancel()` → `cancelled`), §2.2.5, §2.4 step 3: the running call gets the unknown result."""
    started = asyncio.Event()
    finished: list[str] = []
    agent = slow_tool_agent(started, finished)
    stream = agent.stream("wait")

    async def cancel_once_the_tool_runs() -> None:
        await started.wait()
        stream.cancel()

    kinds: list[str] = []
    with anyio.fail_after(60):  # a hang guard only: cancellation must end the tool
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_the_tool_runs)
            async with stream:
                async for item in stream:
                    if isinstance(item, HarnessEvent) and not isinstance(item.event, HarnessExtensionEvent):
                        kinds.append(item.event.event_kind)
    result = stream.result
    assert result is not None and result.status == "cancelled"
    assert result.failure is None and result.output is None and result.deferred is None
    assert "function_tool_call" in kinds and "function_tool_result" not in kinds
    assert finished == []
    assert result.state is not None
    assert shape(result.state.message_history) == INTERRUPTED_SLOW_CALL
    assert await stream.export_state() == result.state
    # The unknown result is an answer: continuing never re-runs the call, even under "always".
    started.clear()
    again = await agent.run(previous_state=result.state, tool_recovery="always")
    assert not started.is_set()
    assert again.output == f"after: {INTERRUPTED_TOOL_RESULT}"
    assert again.state is not None
    assert [(p.tool_call_id, p.content) for p in tool_returns(list(again.state.message_history))] == [
        ("S1", INTERRUPTED_TOOL_RESULT)
    ]


async def test_input_on_a_provider_suspended_turn_is_refused() -> None:
    state = HarnessState.new(
        message_history=[
            ModelRequest(parts=[UserPromptPart("hi")]),
            ModelResponse(parts=[TextPart("wait")], state="suspended"),
        ]
    )
    with pytest.raises(InputError) as info:
        ExecutableAgent(scripted_model(echo_script)).stream("more", previous_state=state)
    assert info.value.details == {"reason": "provider_suspended_turn"}


async def test_system_prompt_is_replaced_by_the_current_one() -> None:
    seen: list[list[str]] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(
            [
                p.content
                for m in messages
                if isinstance(m, ModelRequest)
                for p in m.parts
                if p.part_kind == "system-prompt"
            ]
        )
        return ModelResponse(parts=[TextPart("ok")])

    old = ExecutableAgent(scripted_model(script), system_prompt="old rules")
    first = await old.run("hi")
    new = ExecutableAgent(scripted_model(script), system_prompt=["new rules", "more"])
    await new.run("again", previous_state=first.state)
    assert seen == [["old rules"], ["new rules", "more"]]


async def test_unknown_top_level_keys_are_carried_through_runs() -> None:
    state = HarnessState.model_validate_json(
        '{"schema_version":"1","thread_id":"thr_a","host_note":{"kept":true}}'
    )
    result = await ExecutableAgent(scripted_model(echo_script)).run("hi", previous_state=state)
    assert result.state is not None
    assert '"host_note":{"kept":true}' in result.state.model_dump_json()


async def test_result_new_messages_is_the_suffix() -> None:
    agent = ExecutableAgent(scripted_model(echo_script))
    first = await agent.run("one")
    second = await agent.run("two", previous_state=first.state)
    assert len(second.all_messages()) == 4
    assert len(second.new_messages()) == 2


async def test_export_during_part_events_ends_before_the_streaming_response() -> None:
    """SPEC §2.3.4: during a response's part events the export still ends before that response."""
    executable = ExecutableAgent(scripted_model(one_tool_script, chunk=4), capabilities=[catalog])
    at_start: HarnessState | None = None
    part_events: list[int] = []
    completed: list[HarnessState] = []
    async with executable.stream("go") as stream:
        async for item in stream:
            if not isinstance(item, HarnessEvent):
                continue
            export = await stream.export_state()
            event = item.event
            if isinstance(event, HarnessExtensionEvent) and event.type == "model_request_started":
                at_start = export
                part_events.append(0)
            elif isinstance(event, HarnessExtensionEvent) and event.type == "model_request_completed":
                assert at_start is not None
                completed.append(export)
                # Committed at last: exactly the response, after what the request was sent with.
                assert len(export.message_history) == len(at_start.message_history) + 1
                assert shape(export.message_history[:-1]) == shape(at_start.message_history)
            elif event.event_kind in ("part_start", "part_delta", "part_end"):
                assert export == at_start, event
                part_events[-1] += 1
    # Two responses (the call, then the answer), each streamed in several part events.
    assert len(part_events) == 2 and all(n >= 3 for n in part_events), part_events
    assert [shape(s.message_history)[-1] for s in completed] == [
        ("response", "complete", [("tool-call", "lookup", "L1", {"key": "a"})]),
        ("response", "complete", [("text", "got value of a")]),
    ]


async def test_concurrent_next_is_refused_and_the_waiting_consumer_goes_on() -> None:
    """SPEC §2.3.1: a concurrent `__anext__` → `RunError` `run_stream_concurrent_next`."""
    model_waiting = asyncio.Event()
    release = asyncio.Event()

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the run streams")

    async def hold_then_answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        model_waiting.set()
        await release.wait()
        yield "after the wait"

    stream = ExecutableAgent(FunctionModel(respond, stream_function=hold_then_answer)).stream("hi")

    async def consume() -> list[HarnessEvent | HarnessRunResultEvent[str]]:
        async with stream:
            return [item async for item in stream]

    consumer = asyncio.create_task(consume())
    await model_waiting.wait()  # the consumer's `__anext__` is waiting on the model now
    with pytest.raises(RunError) as info:
        await stream.__anext__()
    assert info.value.code == "run_stream_concurrent_next"
    release.set()
    items = await consumer
    assert [i.sequence for i in items] == list(range(len(items)))
    assert isinstance(items[-1], HarnessRunResultEvent)
    assert items[-1].result.status == "completed" and items[-1].result.output == "after the wait"


async def test_a_stream_ending_without_a_terminal_result_is_run_result_missing() -> None:
    """SPEC §2.2.2: `run()` consumes the stream; one that ends without a terminal event → `run_result_missing`.

    The core's own stream always ends with its terminal event, so a host's stream subclass that stops
    one event short stands in for a stream that ends early.
    """

    class EndsEarly(HarnessRunStream[str]):
        async def __anext__(self) -> HarnessEvent | HarnessRunResultEvent[str]:
            item = await super().__anext__()
            if isinstance(item, HarnessRunResultEvent):
                raise StopAsyncIteration
            return item

    class Agent(ExecutableAgent[str]):
        def stream(self, input: object = None, **kwargs: Any) -> HarnessRunStream[str]:
            return EndsEarly(self, RunRequest(input, **kwargs))

    with pytest.raises(RunError) as info:
        await Agent(scripted_model(echo_script)).run("hi")
    assert info.value.code == "run_result_missing"


# -- pending_deferred_input (SPEC §2.7.5, §1.11) -------------------------------------------------------
def sms_then_delete_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = tool_returns(messages)
    if not returns:
        return ModelResponse(
            parts=[
                ToolCallPart("send_sms", {"to": "+1"}, tool_call_id="c1"),
                ToolCallPart("delete_file", {"path": "a.txt"}, tool_call_id="a1"),
            ]
        )
    return ModelResponse(parts=[TextPart("; ".join(f"{r.tool_call_id}={r.content}" for r in returns))])


def sms_and_delete_agent(delete: Any = delete_file) -> ExecutableAgent[str]:
    """c1 is a function tool's deferred call (external result), a1 needs approval."""
    tools = [send_sms, Tool(delete, name="delete_file", requires_approval=True)]
    return ExecutableAgent(
        scripted_model(sms_then_delete_script), capabilities=[Capability(id="acme.ops", tools=tools)]
    )


def answered(state: HarnessState | None) -> list[tuple[str, str]]:
    assert state is not None
    return [(p.tool_call_id, p.content) for p in tool_returns(list(state.message_history))]


async def suspended_batch() -> tuple[HarnessState, DeferredToolResume]:
    first = await sms_and_delete_agent().run("text and delete")
    assert first.status == "suspended" and first.state is not None and first.deferred is not None
    results = first.deferred.build_results(calls={"c1": "sent"}, approve_all=True)
    return first.state, DeferredToolResume(first.deferred, results)


async def test_pending_deferred_input_until_the_next_model_request() -> None:
    """SPEC §2.7.5: the accepted batch not yet in the current history; reconciled at each model request."""
    state, resume = await suspended_batch()
    assert sms_and_delete_agent().stream("no resume").pending_deferred_input is None
    deleted.clear()
    seen: list[tuple[str, DeferredToolResume | None]] = []
    async with sms_and_delete_agent().stream(previous_state=state, deferred_resume=resume) as stream:
        assert stream.pending_deferred_input == resume
        # Detached: changing what it returned changes nothing.
        stream.pending_deferred_input.results.calls["c1"] = "forged"  # type: ignore[union-attr]
        assert stream.pending_deferred_input == resume
        async for item in stream:
            if isinstance(item, HarnessEvent):
                event = item.event
                kind = event.type if isinstance(event, HarnessExtensionEvent) else event.event_kind
                seen.append((str(kind), stream.pending_deferred_input))
    first_request = [kind for kind, _ in seen].index("model_request_started")
    # Both results were dispatched before the next request, yet the history holds them only from it on.
    assert {"function_tool_call", "function_tool_result"} <= {kind for kind, _ in seen[:first_request]}
    assert all(pending == resume for _, pending in seen[:first_request])
    assert all(pending is None for _, pending in seen[first_request:])
    assert stream.pending_deferred_input is None
    assert deleted == ["a.txt"]
    assert stream.result is not None and stream.result.output == "c1=sent; a1=deleted a.txt"


async def test_pending_deferred_input_of_an_interrupted_resume_is_what_recovery_needs() -> None:
    """SPEC §1.11, §2.4 steps 1 and 3, §2.7.5, §2.7.6: a resume cancelled while the approved action ran.

    c1's external result is already in the history, a1 is not: the remainder is a1 alone, and a1 stays
    open in the state (no unknown result while input is pending) so that a `recovery=True` resume can
    answer it. Its positive approval is not reused: under "declared" (unmarked) it gets the unknown result.
    """
    state, resume = await suspended_batch()
    started = asyncio.Event()

    async def slow_delete(path: str) -> str:
        started.set()
        await asyncio.Event().wait()  # never set: only cancellation ends it
        return f"deleted {path}"

    stream = sms_and_delete_agent(slow_delete).stream(previous_state=state, deferred_resume=resume)

    async def cancel_once_the_tool_runs() -> None:
        await started.wait()
        stream.cancel()

    with anyio.fail_after(60):  # a hang guard only
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_the_tool_runs)
            async with stream:
                async for _ in stream:
                    pass
    result = stream.result
    assert result is not None and result.status == "cancelled" and result.state is not None
    assert answered(result.state) == [("c1", "sent")]
    pending = stream.pending_deferred_input
    assert pending is not None and pending == resume.remaining(result.state.message_history)
    assert [i.tool_call_id for i in pending.requests.calls] == []
    assert [i.tool_call_id for i in pending.requests.approvals] == ["a1"]
    assert pending.results.calls == {} and list(pending.results.approvals) == ["a1"]
    deleted.clear()
    recovered = await sms_and_delete_agent().run(
        previous_state=result.state,
        deferred_resume=DeferredToolResume(pending.requests, pending.results, recovery=True),
    )
    assert recovered.status == "completed"
    assert deleted == []
    assert answered(recovered.state) == [("c1", "sent"), ("a1", INTERRUPTED_TOOL_RESULT)]
