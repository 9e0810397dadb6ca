"""Runs and streams of the harness core (SPEC §1.3, §1.6, §1.10, §2.2, §2.3, §2.7.7, §2.8)."""

from __future__ import annotations

import asyncio

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
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.usage import UsageLimits

from harness import (
    AgentContext,
    DeferredToolResume,
    ExecutableAgent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessState,
    InputError,
    RunBindings,
    RunError,
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


async def test_outside_cancellation_propagates_and_leaves_a_checkpoint() -> None:
    gate = asyncio.Event()

    async def slow(x: str) -> str:
        gate.set()
        await asyncio.sleep(30)
        return x

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("slow", {"x": "1"}, tool_call_id="S1")])

    executable = ExecutableAgent(
        scripted_model(script), capabilities=[Capability(id="acme.slow", tools=[slow])]
    )
    stream = executable.stream("wait")

    async def consume() -> None:
        async with stream:
            async for _ in stream:
                pass

    task = asyncio.create_task(consume())
    await gate.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    checkpoint = await stream.export_state()
    assert isinstance(checkpoint.message_history[-1], ModelRequest | ModelResponse)
    assert stream.result is None


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
