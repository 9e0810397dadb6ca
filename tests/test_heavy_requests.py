"""A heavy request neither stalls the server nor outlives its caller (issue 10, item 1).

A 20 MB history takes the core seconds to validate. The server decodes it in a worker thread, in
pieces, so other RPCs keep answering meanwhile; and it stops the work when the caller's deadline
passes or the server drains after SIGTERM. The tests prove each by order of events, never by timing:
an RPC answered while the heavy run is still undecoded (not yet admitted), and the server's own log.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import signal
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from conftest import RunningServer, error_info
from logged_serve import LoggedServe, logged_serve
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

from harness import HarnessState
from server.mapping.state import state_to_pb

pytestmark = pytest.mark.anyio

CHANNEL = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


@functools.cache
def heavy_state() -> state_pb2.HarnessState:
    """About 20 MB of history: long enough to validate that the tests can watch it happen."""
    history: list[ModelMessage] = []
    for i in range(40_000):
        history += [
            ModelRequest(parts=[UserPromptPart(f"prompt {i}")]),
            ModelResponse(parts=[TextPart(f"answer {i}")]),
        ]
    state = state_to_pb(HarnessState.new(thread_id="thr_heavy1", message_history=history))
    assert len(state.message_history.data) > 10 << 20
    return state


def heavy_run(request_id: str) -> harness_service_pb2.RunRequest:
    return harness_service_pb2.RunRequest(
        spec=run_pb2.RunSpec(text="hello", previous_state=heavy_state(), request_id=request_id)
    )


class _Seen(logging.Handler):
    """Records the server's log events (the in-thread server logs through `threadline.server`)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: dict[str, threading.Event] = {}
        self.fields: dict[str, dict[str, object]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        event = record.getMessage()
        self.fields[event] = getattr(record, "fields", {})
        self.events.setdefault(event, threading.Event()).set()

    async def wait(self, event: str, within: float = 120) -> dict[str, object]:
        flag = self.events.setdefault(event, threading.Event())
        assert await asyncio.to_thread(flag.wait, within), f"the server never logged {event}"
        return self.fields[event]


@pytest.fixture
def seen() -> Iterator[_Seen]:
    logger = logging.getLogger("threadline.server")
    handler, level = _Seen(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


async def test_other_rpcs_answer_while_a_heavy_history_is_decoded(server: RunningServer, seen: _Seen) -> None:
    async with grpc.aio.insecure_channel(server.address, options=CHANNEL) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        heavy = asyncio.ensure_future(stub.Run(heavy_run("heavy-1"), timeout=300))
        await seen.wait("decoding_off_loop")
        info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), timeout=60)
        assert info.default_agent == "default"
        # Answered while the heavy run was still being decoded: not admitted, not finished.
        assert server.active_runs == 0 and not heavy.done()
        result = (await heavy).result
    assert result.status == run_pb2.RUN_STATUS_COMPLETED
    assert json.loads(result.output_json) == "You said: hello"


async def test_a_passed_deadline_stops_the_decoding(server: RunningServer, seen: _Seen) -> None:
    async with grpc.aio.insecure_channel(server.address, options=CHANNEL) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        call = stub.Run(heavy_run("heavy-2"), timeout=120)
        await seen.wait("decoding_off_loop")
        call.cancel()  # the host gives up (a passed deadline cancels the call the same way)
        with pytest.raises(asyncio.CancelledError):
            await call
    stopped = await seen.wait("decoding_stopped")
    assert stopped["why"] in ("cancelled", "deadline") and stopped["request_id"] == "heavy-2"


def _wait_for(serve: LoggedServe, event: str, within: float = 120) -> dict[str, object]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        for record in serve.records():
            if record.get("event") == event:
                return record
        time.sleep(0.05)
    raise AssertionError(f"the server never logged {event}")


async def test_sigterm_stops_the_decoding_and_the_host_learns_why() -> None:
    with logged_serve() as serve:
        async with grpc.aio.insecure_channel(serve.address, options=CHANNEL) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
            heavy = asyncio.ensure_future(stub.Run(heavy_run("heavy-3"), timeout=300))
            await asyncio.to_thread(_wait_for, serve, "decoding_off_loop")
            serve.serve.process.send_signal(signal.SIGTERM)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await heavy
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert error_info(caught.value).reason == "SERVER_SHUTTING_DOWN"
        assert serve.serve.process.wait(timeout=60) == 0  # our one SIGTERM: drained, exited cleanly
        serve.stop()  # collects the remaining log lines
        stopped = [r for r in serve.records() if r.get("event") == "decoding_stopped"]
        assert [(r["why"], r["request_id"]) for r in stopped] == [("draining", "heavy-3")]
