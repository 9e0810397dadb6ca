"""A failure on the model side is data: a FAILED result with its class, its message and a safe state.

SPEC §2.2.5 makes a native `AgentRunError` a failed result; issue 10 (item 4) found that any other
exception raised while a model request runs (a model that cannot count tokens, a model that raises, a
provider SDK's own error) escaped the run and reached a host as INTERNAL with no state. Now every one
of them ends the run `failed` `agent_run_failed` with the exception's class and (bounded, redacted)
message, the `model_request_failed` lifecycle event, and the normalized candidate state.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from conftest import RunningServer
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import UsageLimits
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2

from harness import ExecutableAgent, HarnessEvent, HarnessExtensionEvent
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio


def raising(error: BaseException) -> FunctionModel:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise error

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        yield "Partial "
        raise error

    return FunctionModel(respond, stream_function=stream)


async def run_collecting(agent: ExecutableAgent[Any], **kwargs: Any) -> tuple[Any, list[Any]]:
    items: list[Any] = []
    async with agent.stream("hi", **kwargs) as stream:
        async for item in stream:
            items.append(item)
    return stream, items


def lifecycle(items: list[Any]) -> list[dict[str, Any]]:
    return [
        i.event.payload
        for i in items
        if isinstance(i, HarnessEvent) and isinstance(i.event, HarnessExtensionEvent)
    ]


@pytest.mark.parametrize(
    "error",
    [
        RecursionError("maximum recursion depth exceeded"),
        RuntimeError("provider SDK: connection reset"),
        KeyError("x"),
    ],
)
async def test_an_exception_from_the_model_is_a_failed_result_with_a_safe_state(error: Exception) -> None:
    stream, items = await run_collecting(ExecutableAgent(raising(error)))
    result = stream.result
    assert result is not None and result.status == "failed" and result.failure is not None
    assert result.failure.code == "agent_run_failed"
    assert result.failure.message == "Agent execution failed."
    assert result.failure.retry_hint == "dependency_change"
    assert result.failure.details == {"exception_type": type(error).__name__, "exception_message": str(error)}
    assert lifecycle(items)[-1] == {
        "type": "model_request_failed",
        "request_id": "model-request-1",
        "request_index": 0,
        "error_code": "model_request_failed",
        "detail": type(error).__name__,
    }
    assert stream.failure_exception is error
    # The partial text streamed before the crash is the safe part of the interrupted response (§2.4).
    assert result.state is not None
    history = result.state.message_history
    assert [type(m).__name__ for m in history] == ["ModelRequest", "ModelResponse"]
    assert history[-1].parts == [TextPart("Partial ")]


async def test_the_message_is_bounded_and_redacted() -> None:
    error = RuntimeError("Bearer sk-secret " + "x" * 2000)
    stream, _ = await run_collecting(ExecutableAgent(raising(error)))
    message = stream.result.failure.details["exception_message"]
    assert message.startswith("Bearer [REDACTED] xxx") and "sk-secret" not in message
    assert message.endswith("… (cut)") and len(message) <= 520


async def test_a_model_that_cannot_count_tokens_fails_the_run() -> None:
    agent = ExecutableAgent(scripted_model(lambda messages, info: ModelResponse(parts=[TextPart("hi")])))
    result = await agent.run("hi", usage_limits=UsageLimits(count_tokens_before_request=True))
    assert result.status == "failed" and result.failure is not None
    assert result.failure.code == "agent_run_failed"
    assert result.failure.details["exception_type"] == "NotImplementedError"
    assert result.state is not None and len(result.state.message_history) == 1


async def test_a_base_exception_still_propagates() -> None:
    agent = ExecutableAgent(raising(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        await agent.run("hi")


async def test_over_the_wire_the_host_gets_the_failed_result(server: RunningServer) -> None:
    """`usage_limits.count_tokens_before_request` on the demo model answered INTERNAL with no state."""
    spec = run_pb2.RunSpec(text="hello", usage_limits=run_pb2.UsageLimits(count_tokens_before_request=True))
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        result = (await stub.Run(harness_service_pb2.RunRequest(spec=spec))).result
        events = [r.event async for r in stub.StreamRun(harness_service_pb2.StreamRunRequest(spec=spec))]
    assert result.status == run_pb2.RUN_STATUS_FAILED
    assert result.failure.code == "agent_run_failed"
    assert json.loads(result.failure.details_json)["exception_type"] == "NotImplementedError"
    assert result.state.message_history.message_count == 1
    last = events[-1]
    assert last.WhichOneof("event") == "result" and last.result.status == run_pb2.RUN_STATUS_FAILED
    assert any(
        e.WhichOneof("event") == "lifecycle" and e.lifecycle.type == "model_request_failed" for e in events
    )
