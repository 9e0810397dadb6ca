"""No answer is lost to the message limit (issue 10, item 7).

grpc refuses to send a message over `--max-message-bytes` with an untyped RESOURCE_EXHAUSTED, after
the run already happened. The server checks every answer first: a run's result, a streamed event
or an envelope that would not fit is answered `RESPONSE_TOO_LARGE` with its size, the limit and, for a
run, its ids and status, and the run log says `undelivered`. A thread run's event that would not fit
stops only its stream (`listener_detached`): the run goes on and commits.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from conftest import RunningServer, StartServer, create_thread, drained, error_info, thread_spec
from pydantic_ai import Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

from harness import ExecutableAgent
from harness.testing import scripted_model
from server.agents import AgentRegistry, build_registry

pytestmark = pytest.mark.anyio

LIMIT = 1 << 20
# 800 KiB of image bytes fit a request; the result's history holds them as base64 (4/3): it does not fit.
PROMPT = run_pb2.PromptParts(
    parts=[
        run_pb2.PromptPart(binary=run_pb2.BinaryContent(media_type="image/png", data=b"\x89" * (800 << 10)))
    ]
)


def bulk() -> str:
    """A tool whose result alone is larger than the server may send."""
    return "b" * (LIMIT + 1024)


def bulky_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if any(isinstance(part, ToolReturnPart) for message in messages for part in message.parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("bulk", {})])


def agents() -> AgentRegistry:
    """The demo's agents, and `bulky`, whose tool result does not fit one message."""
    demo = build_registry()
    bulky = ExecutableAgent(scripted_model(bulky_script), capabilities=[Capability(tools=[Tool(bulk)])])
    served = {name: agent for name in demo if (agent := demo.get(name)) is not None}
    return AgentRegistry({**served, "bulky": bulky}, default=demo.default)


_small: list[RunningServer] = []


async def small_server(start_server: StartServer) -> RunningServer:
    if not _small:  # one server for the module (session-lived, like every `start_server` server)
        _small.append(await start_server(max_message_bytes=LIMIT, agents=agents()))
    return _small[0]


@pytest.fixture
async def stub(start_server: StartServer) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel((await small_server(start_server)).address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


@pytest.fixture
async def threads(start_server: StartServer) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel((await small_server(start_server)).address) as channel:
        yield thread_service_pb2_grpc.ThreadServiceStub(channel)


@pytest.fixture
def finished(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="threadline.server")
    return caplog


def assert_too_large(error: grpc.aio.AioRpcError, *, run: bool) -> dict[str, str]:
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (error.code(), error.details())
    info = error_info(error)
    assert info is not None, error.details()
    assert info is not None and info.reason == "RESPONSE_TOO_LARGE"
    metadata = dict(info.metadata)
    assert int(metadata["size"]) > LIMIT and int(metadata["limit"]) == LIMIT
    if run:
        assert metadata["run_status"] == "completed" and metadata["run_id"].startswith("run-")
    return metadata


async def undelivered(
    caplog: pytest.LogCaptureFixture, run_id: str, event: str = "run_finished"
) -> dict[str, Any]:
    """The run's `event` line; the server thread writes it just after the status went out."""
    for _ in range(600):
        lines = [
            getattr(r, "fields", {})
            for r in caplog.records
            if r.getMessage() == event and getattr(r, "fields", {}).get("run_id") == run_id
        ]
        if lines:
            [line] = lines
            return line
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {event} line for {run_id}")


@pytest.mark.parametrize("method", ["Run", "StreamRun"])
async def test_a_result_over_the_limit_is_a_typed_error_and_logged_undelivered(
    stub: Any, finished: pytest.LogCaptureFixture, method: str
) -> None:
    spec = run_pb2.RunSpec(parts=PROMPT, request_id=f"big-{method}")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if method == "Run":
            await stub.Run(harness_service_pb2.RunRequest(spec=spec))
        else:
            request = harness_service_pb2.StreamRunRequest(spec=spec, max_events_per_message=64)
            async for _ in stub.StreamRun(request):
                pass
    metadata = assert_too_large(caught.value, run=True)
    line = await undelivered(finished, metadata["run_id"])
    assert line["status"] == "undelivered" and line["result_status"] == "completed"
    assert line["request_id"] == f"big-{method}"


async def test_a_thread_event_over_the_limit_is_a_typed_error_logged_and_the_run_goes_on(
    threads: Any, finished: pytest.LogCaptureFixture
) -> None:
    thread = await create_thread(threads, agent="bulky")
    spec = thread_spec(thread.thread_id, text="go")
    request = thread_service_pb2.StreamThreadRunRequest(spec=spec)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await drained(threads.StreamThreadRun(request))
    metadata = assert_too_large(caught.value, run=False)
    assert metadata["thread_id"] == thread.thread_id and metadata["request_id"] == spec.request_id
    assert metadata["run_id"].startswith("run-") and metadata["run_status"] == "running"
    line = await undelivered(finished, metadata["run_id"], event="listener_detached")
    assert line["reason"] == "RESPONSE_TOO_LARGE" and int(line["size"]) == int(metadata["size"])
    assert line["request_id"] == spec.request_id
    # Only the stream stopped: the run completes and commits. A retry attaches to it (or replays it,
    # once it ended) and gets its outcome; a retry after that replays it.
    retry = thread_service_pb2.RunThreadRequest(spec=spec)
    attached = await threads.RunThread(retry)
    assert attached.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert attached.result.run_id == metadata["run_id"]
    replay = await threads.RunThread(retry)
    assert replay.replayed and replay.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert replay.result.run_id == metadata["run_id"] and json.loads(replay.result.output_json) == "done"


async def test_a_run_that_fits_is_answered(stub: Any) -> None:
    response = await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="small")))
    assert json.loads(response.result.output_json) == "You said: small"


async def test_an_envelope_answer_over_the_limit_is_a_typed_error(stub: Any) -> None:
    # ValidateState answers the envelope and the state JSON: twice the history, four times the prompt.
    first = await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="y" * (300 << 10))))
    state = first.result.state
    assert state.ByteSize() < LIMIT
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ValidateState(harness_service_pb2.ValidateStateRequest(state=state))
    assert_too_large(caught.value, run=False)


async def test_an_event_too_large_to_send_never_joins_a_queued_response() -> None:
    """The outbox refuses it before grpc would, and the response already queued stays sendable."""
    from threadline.v1 import events_pb2

    from server.outbox import Outbox, ResponseTooLarge, encoded

    def fill(event: events_pb2.RunEvent, item: str, sequence: int) -> None:
        event.sequence = sequence
        event.lifecycle.payload_json = item

    outbox: Outbox[str] = Outbox(encoded(fill), per_message=64, window_s=0.0, max_bytes=4096)
    await outbox.add("{}")  # queued, not taken: the next event would join it
    with pytest.raises(ResponseTooLarge) as caught:
        await outbox.add('"' + "x" * 5000 + '"')
    assert caught.value.size > 4096 and caught.value.limit == 4096
    outbox.end()
    taken = await outbox.take()
    assert taken is not None
    queued = harness_service_pb2.StreamRunResponse.FromString(taken[0])
    assert [e.lifecycle.payload_json for e in queued.events] == ["{}"] and taken[1] == 1
    assert queued.ByteSize() < 4096


async def test_server_info_over_the_limit_is_a_typed_error(start_server: StartServer) -> None:
    """The demo's agents and tools take over a KiB: under a 512-byte limit the answer cannot go out."""
    tiny = await start_server(max_message_bytes=512)
    async with grpc.aio.insecure_channel(tiny.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info = error_info(refused.value)
    assert info is not None and info.reason == "RESPONSE_TOO_LARGE"
    assert int(info.metadata["size"]) > 512 and info.metadata["limit"] == "512"
