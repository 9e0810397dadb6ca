"""More SPEC rules of runs: phase B, model failures, identities on messages, carried data, redaction."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from pydantic_ai import Tool
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
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RunUsage

from harness import (
    DeferredToolResume,
    DefinitionError,
    ExecutableAgent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessState,
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
