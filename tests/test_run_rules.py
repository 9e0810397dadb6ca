"""More SPEC rules of runs: phase B, model failures, identities on messages, carried data, redaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)
from pydantic_ai.tools import ToolApproved, ToolDefinition
from pydantic_ai.toolsets import ExternalToolset
from pydantic_ai.usage import RunUsage

from harness import (
    DeferredToolResume,
    DefinitionError,
    ExecutableAgent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResult,
    HarnessState,
    RunBindings,
)
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio


def approval_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("delete_file", {"path": "a"}, tool_call_id="D1")])
    return ModelResponse(parts=[TextPart("done")])


def delete_file(path: str) -> str:
    return "deleted"


def agent_with(capability_id: str, *, requires_approval: bool = True) -> ExecutableAgent[str]:
    tool = Tool(delete_file, requires_approval=requires_approval)
    return ExecutableAgent(
        scripted_model(approval_script), capabilities=[Capability(id=capability_id, tools=[tool])]
    )


async def test_resume_against_a_changed_tool_surface_is_refused_before_anything_runs() -> None:
    first = await agent_with("acme.files").run("delete")
    assert first.deferred is not None
    resume = DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True))
    with pytest.raises(DefinitionError) as info:
        await agent_with("acme.other").run(previous_state=first.state, deferred_resume=resume)
    assert info.value.code == "deferred_surface_mismatch"
    assert info.value.details["tool_call_id"] == "D1"
    # The previous state is still a valid checkpoint: the same resume works on the original surface.
    again = await agent_with("acme.files").run(previous_state=first.state, deferred_resume=resume)
    assert again.output == "done"


async def test_approval_for_a_tool_that_no_longer_exists_is_refused() -> None:
    first = await agent_with("acme.files").run("delete")
    assert first.deferred is not None
    resume = DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True))
    bare = ExecutableAgent(scripted_model(approval_script))
    with pytest.raises(DefinitionError):
        await bare.run(previous_state=first.state, deferred_resume=resume)


async def test_model_http_error_fails_the_run_with_a_lifecycle_event() -> None:
    async def failing(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(status_code=503, model_name="m", body="overloaded")

    async def failing_stream(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        raise ModelHTTPError(status_code=503, model_name="m", body="overloaded")
        yield ""  # pragma: no cover

    agent = ExecutableAgent(FunctionModel(failing, stream_function=failing_stream))
    items = []
    async with agent.stream("hi") as stream:
        async for item in stream:
            items.append(item)
    result = stream.result
    assert result is not None and result.status == "failed" and result.failure is not None
    assert result.failure.code == "agent_run_failed"
    assert result.failure.details == {"exception_type": "ModelHTTPError", "status_code": 503}
    assert result.failure.retry_hint == "dependency_change"
    lifecycle = [
        i.event.payload
        for i in items
        if isinstance(i, HarnessEvent) and isinstance(i.event, HarnessExtensionEvent)
    ]
    assert lifecycle[-1]["type"] == "model_request_failed"
    assert lifecycle[-1]["status_code"] == 503
    assert result.state is not None
    assert [type(m).__name__ for m in result.state.message_history] == ["ModelRequest"]


async def test_messages_carry_run_and_thread_ids() -> None:
    result = await agent_with("acme.files", requires_approval=False).run("delete")
    assert result.state is not None
    for message in result.state.message_history:
        assert message.run_id == result.run_id
        assert message.conversation_id == result.thread_id


async def test_environment_states_and_usage_baseline_carry_forward() -> None:
    state = HarnessState.new(
        environment_states={
            "workspace": {"provider_key": "docker", "state_version": "1", "state": {"c": "abc"}}
        }
    )
    result = await agent_with("acme.files", requires_approval=False).run(
        "delete", previous_state=state, usage=RunUsage(requests=5)
    )
    assert result.state is not None
    assert result.state.environment_states["workspace"].state == {"c": "abc"}
    assert result.usage.requests == 7


def test_extension_payloads_are_redacted_and_bounded() -> None:
    event = HarnessExtensionEvent(
        kind="diagnostic",
        payload={
            "type": "x",
            "api_key": "k",
            "Auth-Token": "t",
            "note": "Bearer abc.def",
            "nested": {"password": 1},
        },
    )
    assert event.payload == {
        "type": "x",
        "api_key": "[REDACTED]",
        "Auth-Token": "[REDACTED]",
        "note": "Bearer [REDACTED]",
        "nested": {"password": "[REDACTED]"},
    }
    with pytest.raises(ValidationError):
        HarnessExtensionEvent(kind="lifecycle", payload={"type": "x", "big": "a" * 70_000})
    with pytest.raises(ValidationError):
        HarnessExtensionEvent(kind="lifecycle", payload={"type": "x", "n": float("nan")})
    with pytest.raises(ValidationError):
        HarnessExtensionEvent(kind="other", payload={"type": "x"})  # type: ignore[arg-type]


async def test_a_resume_needs_a_previous_state() -> None:
    from harness import RunError

    first = await agent_with("acme.files").run("delete")
    assert first.deferred is not None
    resume = DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True))
    with pytest.raises(RunError) as info:
        await agent_with("acme.files").run(deferred_resume=resume)
    assert info.value.code == "deferred_state_required"


# -- ToolApproved.override_args at dispatch (SPEC §1.10, §2.7.4 step 13) ----------------------------------
ran_with: list[str] = []


def delete_recorded(path: str) -> str:
    ran_with.append(path)
    return f"deleted {path}"


def answer_with_the_result(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("delete_file", {"path": "a.txt"}, tool_call_id="D1")])
    return ModelResponse(parts=[TextPart(f"{returns[-1].outcome}")])


async def resume_with_override(
    override_args: dict[str, object],
) -> tuple[HarnessRunResult[str], ToolReturnPart]:
    tool = Tool(delete_recorded, name="delete_file", requires_approval=True)
    agent = ExecutableAgent(
        scripted_model(answer_with_the_result), capabilities=[Capability(id="acme.files", tools=[tool])]
    )
    first = await agent.run("delete a.txt")
    assert first.deferred is not None
    results = first.deferred.build_results(approvals={"D1": ToolApproved(override_args=override_args)})
    ran_with.clear()
    second = await agent.run(
        previous_state=first.state, deferred_resume=DeferredToolResume(first.deferred, results)
    )
    assert second.status == "completed" and second.state is not None
    history = list(second.state.message_history)
    # History keeps the model's original call whatever the override.
    [call] = [
        p for m in history if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)
    ]
    assert (call.tool_call_id, call.args_as_dict()) == ("D1", {"path": "a.txt"})
    [answer] = [
        p for m in history if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    return second, answer


async def test_valid_override_args_run_the_call_with_them() -> None:
    """SPEC §2.7.4 step 13: the call runs with the override while history keeps the original call."""
    result, answer = await resume_with_override({"path": "b.txt"})
    assert ran_with == ["b.txt"]
    assert (answer.tool_call_id, answer.content, answer.outcome) == ("D1", "deleted b.txt", "success")
    assert result.output == "success"


async def test_invalid_override_args_give_the_model_a_retry_result() -> None:
    """SPEC §2.7.4 step 13: not a rejected resume; validation at dispatch gives the model a retry result."""
    result, answer = await resume_with_override({"path": 5})
    assert ran_with == []
    assert (answer.tool_call_id, answer.outcome) == ("D1", "retried")
    assert isinstance(answer.content, list)
    assert [(e["loc"], e["type"]) for e in answer.content] == [(["path"], "string_type")]
    assert result.output == "retried"


# -- a model crash mid-response keeps only the safe parts (SPEC §1.12, §2.4 step 2) -----------------------
async def crashed_response(*chunks: str | DeltaThinkingCalls | DeltaToolCalls) -> list[ModelMessage]:
    """Stream `chunks` as the first response, then fail with an HTTP error; return the failed state's history."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the run streams")

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaThinkingCalls | DeltaToolCalls]:
        for chunk in chunks:
            yield chunk
        raise ModelHTTPError(status_code=500, model_name="m", body="connection reset")

    agent = ExecutableAgent(
        FunctionModel(respond, stream_function=stream),
        capabilities=[Capability(id="acme.files", tools=[delete_recorded])],
    )
    result = await agent.run("hi")
    assert result.status == "failed" and result.failure is not None
    assert result.failure.code == "agent_run_failed"
    assert result.state is not None
    return list(result.state.message_history)


def parts_of(message: ModelMessage) -> list[tuple[str, str | None]]:
    return [(p.part_kind, getattr(p, "content", None)) for p in message.parts]


async def test_a_crash_while_thinking_drops_the_unfinished_thinking() -> None:
    """SPEC §2.4 step 2: finished thinking (ended by the text after it) and visible text stay; cut-off thinking goes."""
    history = await crashed_response(
        {0: DeltaThinkingPart(content="first, plan")},
        "Partial ",
        "answer",
        {2: DeltaThinkingPart(content="then, half a thou")},
    )
    assert [parts_of(m) for m in history] == [
        [("user-prompt", "hi")],
        [("thinking", "first, plan"), ("text", "Partial answer")],
    ]
    assert isinstance(history[-1], ModelResponse) and history[-1].state == "interrupted"


async def test_a_crash_while_call_arguments_stream_drops_the_call() -> None:
    """SPEC §2.4 step 2: a call whose arguments were still streaming is dropped (and so gets no result)."""
    history = await crashed_response(
        "Let me ",
        "delete it.",
        {1: DeltaToolCall(name="delete_recorded", tool_call_id="H1")},
        {1: DeltaToolCall(json_args='{"pa')},
    )
    assert [parts_of(m) for m in history] == [[("user-prompt", "hi")], [("text", "Let me delete it.")]]
    assert isinstance(history[-1], ModelResponse) and history[-1].state == "interrupted"


async def test_a_crash_with_nothing_safe_removes_the_response() -> None:
    """SPEC §2.4 step 2: only unfinished thinking was streamed; nothing safe, so the response is removed."""
    history = await crashed_response({0: DeltaThinkingPart(content="half a thou")})
    assert [parts_of(m) for m in history] == [[("user-prompt", "hi")]]


class _InstructedExternal(ExternalToolset[Any]):
    async def get_instructions(self, ctx: RunContext[Any]) -> str:
        return "Call notify_user to reach the user."


async def test_external_toolset_instructions_are_suppressed_without_deferred_support() -> None:
    """SPEC §2.7.7: without deferred support the model is told nothing about tools it cannot call."""
    seen: list[str | None] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.instructions)
        return ModelResponse(parts=[TextPart("ok")])

    external = _InstructedExternal(
        [ToolDefinition(name="notify_user", parameters_json_schema={"type": "object", "properties": {}})],
        id="acme.notify",
    )
    agent = ExecutableAgent(
        scripted_model(script), capabilities=[Capability(toolsets=[external])], instructions="Be brief."
    )
    for supported in (True, False):
        bindings = RunBindings.embedded(deferred_tools_supported=supported)
        assert (await agent.run("hi", bindings=bindings)).status == "completed"
    with_support, without = seen
    assert with_support is not None and "Call notify_user" in with_support and "Be brief." in with_support
    assert without is not None and "Call notify_user" not in without and "Be brief." in without
