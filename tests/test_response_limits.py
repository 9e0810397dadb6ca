"""No answer is lost to the message limit (issue 10, item 7).

grpc refuses to send a message over `--max-message-bytes` with an untyped RESOURCE_EXHAUSTED, after
the run already happened. The server checks every answer first: a run's result, a streamed event
or an envelope that would not fit is answered `RESPONSE_TOO_LARGE` with its size, the limit and, for a
run, its ids and status, and the run log says `undelivered`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from conftest import RunningServer, StartServer, error_info
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2

pytestmark = pytest.mark.anyio

LIMIT = 1 << 20
# 800 KiB of image bytes fit a request; the result's history holds them as base64 (4/3): it does not fit.
PROMPT = run_pb2.PromptParts(
    parts=[
        run_pb2.PromptPart(binary=run_pb2.BinaryContent(media_type="image/png", data=b"\x89" * (800 << 10)))
    ]
)


_small: list[RunningServer] = []


@pytest.fixture
async def stub(start_server: StartServer) -> AsyncIterator[Any]:
    if not _small:  # one server for the module (session-lived, like every `start_server` server)
        _small.append(await start_server(max_message_bytes=LIMIT))
    async with grpc.aio.insecure_channel(_small[0].address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


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


async def undelivered(caplog: pytest.LogCaptureFixture, run_id: str) -> dict[str, Any]:
    """The run's `run_finished` line; the server thread writes it just after the status went out."""
    for _ in range(600):
        lines = [
            getattr(r, "fields", {})
            for r in caplog.records
            if r.getMessage() == "run_finished" and getattr(r, "fields", {}).get("run_id") == run_id
        ]
        if lines:
            [line] = lines
            return line
        await asyncio.sleep(0.05)
    raise AssertionError(f"no run_finished line for {run_id}")


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

    from server.outbox import Outbox, ResponseTooLarge

    def fill(event: events_pb2.RunEvent, item: str, sequence: int) -> None:
        event.sequence = sequence
        event.lifecycle.payload_json = item

    outbox: Outbox[str, harness_service_pb2.StreamRunResponse] = Outbox(
        fill,
        per_message=64,
        window_s=0.0,
        max_bytes=4096,
        response_type=harness_service_pb2.StreamRunResponse,
    )
    await outbox.add("{}")  # queued, not taken: the next event would join it
    with pytest.raises(ResponseTooLarge) as caught:
        await outbox.add('"' + "x" * 5000 + '"')
    assert caught.value.size > 4096 and caught.value.limit == 4096
    outbox.end()
    queued = await outbox.take()
    assert queued is not None and [e.lifecycle.payload_json for e in queued.events] == ["{}"]
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
