"""`StreamRunRequest.max_events_per_message`: events packed into responses, over real loopback.

The server packs only events that are ready while the stream is behind, so the tests that need
packing read the first response, then stop reading until the rest of the run is queued up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from conftest import RunningServer, StartServer
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from threadline.v1 import events_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2

from harness import HarnessState
from server.mapping.state import state_to_pb

pytestmark = pytest.mark.anyio

Stub = harness_service_pb2_grpc.HarnessServiceStub
Responses = list[harness_service_pb2.StreamRunResponse]

BATCH_BYTES = 256 * 1024


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Stub]:
    # No BDP probing: the receive window stays small, so a paused reader holds the stream back.
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.http2.bdp_probe", 0)]
    async with grpc.aio.insecure_channel(server.address, options=options) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


async def responses(
    stub: Stub, spec: run_pb2.RunSpec, *, per_message: int, pause_s: float = 0.0
) -> Responses:
    """Every response of one StreamRun; with `pause_s`, reading stops that long after the first."""
    request = harness_service_pb2.StreamRunRequest(spec=spec, max_events_per_message=per_message)
    received: Responses = []
    async for response in stub.StreamRun(request):
        received.append(response)
        if len(received) == 1 and pause_s:
            await asyncio.sleep(pause_s)
    return received


def flattened(received: Responses) -> list[events_pb2.RunEvent]:
    return [event for response in received for event in response.events]


def case(event: events_pb2.RunEvent) -> str:
    return event.WhichOneof("event") or ""


async def test_packed_responses_carry_the_same_events_in_order(stub: Stub) -> None:
    spec = run_pb2.RunSpec(text="lookup grpc", checkpoints=True)
    single = await responses(stub, spec, per_message=0)
    packed = await responses(stub, spec, per_message=64)
    assert all(r.HasField("event") and not r.events for r in single)
    assert all(not r.HasField("event") and r.events for r in packed)
    events = flattened(packed)
    assert [e.sequence for e in events] == list(range(len(events)))
    assert [case(e) for e in events] == [case(r.event) for r in single]
    assert case(events[0]) == "run_started" and case(events[-1]) == "result"
    assert events[-1].result.output_json == single[-1].event.result.output_json


async def test_one_event_per_message_is_the_default_and_explicit_one(stub: Stub) -> None:
    spec = run_pb2.RunSpec(text="hello there, several words")
    assert all(r.HasField("event") and not r.events for r in await responses(stub, spec, per_message=1))


async def test_a_stream_that_falls_behind_packs_up_to_the_limit(stub: Stub) -> None:
    spec = run_pb2.RunSpec(text="x" * 16_000)  # echoed back in ~2 000 deltas of 8 characters
    received = await responses(stub, spec, per_message=8, pause_s=1.0)
    sizes = [len(r.events) for r in received]
    assert max(sizes) == 8, "a paused reader leaves events queued, so responses fill to the limit"
    assert sizes.count(8) >= 10
    events = flattened(received)
    assert [e.sequence for e in events] == list(range(len(events)))
    text = "".join(e.part_start.content + e.part_delta.content_delta for e in events)
    assert text == "You said: " + "x" * 16_000


async def test_the_server_takes_at_most_256_events_per_message(stub: Stub) -> None:
    spec = run_pb2.RunSpec(text="y" * 24_000)  # ~3 000 deltas
    received = await responses(stub, spec, per_message=100_000, pause_s=1.5)
    sizes = [len(r.events) for r in received]
    assert max(sizes) == 256
    events = flattened(received)
    assert [e.sequence for e in events] == list(range(len(events)))


async def test_an_event_too_large_to_share_a_response_travels_alone(stub: Stub) -> None:
    # Every checkpoint candidate carries this history in full: ~300 KiB each.
    history = [
        ModelRequest(parts=[UserPromptPart("z" * 300_000)]),
        ModelResponse(parts=[TextPart("noted")]),
    ]
    spec = run_pb2.RunSpec(
        text="lookup grpc",
        checkpoints=True,
        previous_state=state_to_pb(HarnessState.new(message_history=history)),
    )
    received = await responses(stub, spec, per_message=64, pause_s=1.0)
    events = flattened(received)
    assert [e.sequence for e in events] == list(range(len(events)))
    large = [e for e in events if e.ByteSize() > BATCH_BYTES]
    assert len(large) >= 4, "the checkpoint candidates and the result carry the long history"
    for response in received:
        if len(response.events) > 1:
            assert sum(e.ByteSize() for e in response.events) <= BATCH_BYTES
            assert all(e.ByteSize() <= BATCH_BYTES for e in response.events)
    assert any(len(r.events) > 1 for r in received), "small events are still packed"


async def test_a_burst_is_packed_while_a_quiet_stream_sends_at_once(stub: Stub) -> None:
    # Read promptly: the echo's deltas come in a burst, faster than the 1 ms default pack window.
    burst = await responses(stub, run_pb2.RunSpec(text="w" * 4_000), per_message=64)
    assert len(burst) < len(flattened(burst)) * 0.8  # ~1/4 on an idle machine; one per event unpacked
    # The `sleep` tool holds the run 0.3 s: the stream goes quiet, so its next event is not held
    # for the events after it.
    quiet = await responses(stub, run_pb2.RunSpec(text="sleep 0.3"), per_message=64)
    calls = [i for i, r in enumerate(quiet) if any(case(e) == "tool_call" for e in r.events)]
    results = [i for i, r in enumerate(quiet) if any(case(e) == "tool_result" for e in r.events)]
    assert calls and results and calls[0] < results[0]


async def test_a_wide_pack_window_holds_a_burst_that_pauses(start_server: StartServer) -> None:
    running = await start_server(pack_window_ms=1000)
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        received = await responses(stub, run_pb2.RunSpec(text="sleep 0.3"), per_message=64)
    # Everything after `run_started` falls inside the 1 s window: it waits, and packs.
    assert len(received) <= 3
    events = flattened(received)
    assert [e.sequence for e in events] == list(range(len(events)))
    assert case(events[-1]) == "result"


async def test_without_a_pack_window_a_prompt_reader_gets_more_messages(
    stub: Stub, start_server: StartServer
) -> None:
    running = await start_server(pack_window_ms=0)
    spec = run_pb2.RunSpec(text="v" * 4_000)
    async with grpc.aio.insecure_channel(running.address) as channel:
        unwindowed = await responses(
            harness_service_pb2_grpc.HarnessServiceStub(channel), spec, per_message=64
        )
    windowed = await responses(stub, spec, per_message=64)
    assert len(flattened(unwindowed)) == len(flattened(windowed))
    assert len(windowed) < len(unwindowed)
