"""A heavy request neither stalls the server nor outlives its caller (issue 10, item 1; issue 23, item 14).

A 20 MB history takes the core seconds to validate, and 100 000 messages take its preparation of the
run half a second. The server does both in a worker thread, in pieces, so other RPCs keep answering
meanwhile; and it stops the work when the caller leaves, its deadline passes or the server drains after
SIGTERM. The tests prove each by order of events, never by timing: RPCs answered while the heavy run is
still undecoded (not yet admitted) or unprepared (not yet started), and the server's own log.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
import pytest
from conftest import RunningServer, error_info
from grpc_health.v1 import health_pb2, health_pb2_grpc
from logged_serve import LoggedServe, logged_serve
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from threadline.v1 import (
    events_pb2,
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    state_pb2,
    thread_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

from harness import HarnessRunStream, HarnessState
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


LONG_PAIRS = 50_000
"""A prompt and an answer each: 100 000 messages, about 7 MB as the shortest JSON they have."""


@functools.cache
def long_state() -> state_pb2.HarnessState:
    """A history whose preparation takes a while: many small messages, written as JSON directly."""
    state = state_to_pb(HarnessState.new(thread_id="thr_long1"))
    state.message_history.data = b"[%b]" % b",".join(  # type: ignore[assignment]  # upb takes UTF-8 bytes
        b'{"kind":"request","parts":[{"part_kind":"user-prompt","content":"p%d"}]},'
        b'{"kind":"response","parts":[{"part_kind":"text","content":"a%d"}]}' % (i, i)
        for i in range(LONG_PAIRS)
    )
    state.message_history.message_count = 2 * LONG_PAIRS
    state.message_history.ClearField("sha256")  # the empty history's: optional, left out
    return state


def long_run(request_id: str) -> harness_service_pb2.RunRequest:
    return harness_service_pb2.RunRequest(
        spec=run_pb2.RunSpec(text="hello", previous_state=long_state(), request_id=request_id)
    )


ANSWERS = 3
"""Small RPCs a test sees answered while a long history is prepared."""


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


@pytest.mark.parametrize(
    ("build", "step"), [(heavy_run, "decoding"), (long_run, "preparing")], ids=["decoding", "preparing"]
)
async def test_sigterm_stops_the_work_off_the_loop_and_the_host_learns_why(
    build: Callable[[str], harness_service_pb2.RunRequest], step: str
) -> None:
    with logged_serve() as serve:
        async with grpc.aio.insecure_channel(serve.address, options=CHANNEL) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
            heavy = asyncio.ensure_future(stub.Run(build(f"{step}-3"), timeout=300))
            await asyncio.to_thread(_wait_for, serve, f"{step}_off_loop")
            serve.serve.process.send_signal(signal.SIGTERM)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await heavy
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert error_info(caught.value).reason == "SERVER_SHUTTING_DOWN"
        code = serve.serve.process.wait(timeout=60)  # our one SIGTERM: drained, exited cleanly
        serve.stop()  # collects the remaining log lines
        assert code == 0, "".join(line for line in serve.lines if not line.startswith("{"))[-4000:]
        stopped = [r for r in serve.records() if r.get("event") == f"{step}_stopped"]
        assert [(r["why"], r["request_id"]) for r in stopped] == [("draining", f"{step}-3")]
        assert not [r for r in serve.records() if r.get("event") == "run_started"], "nothing ran"


async def _answered_before(seen: _Seen, event: str, ask: Callable[[], Awaitable[object]]) -> None:
    """`ask()` answers `ANSWERS` times before the server logs `event`."""
    for _ in range(ANSWERS):
        await ask()
    assert not seen.events.setdefault(event, threading.Event()).is_set(), f"{event} came first"


async def test_other_rpcs_answer_while_a_long_history_is_prepared(
    server: RunningServer, seen: _Seen, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The preparation waits for the test's answers, so no machine's speed decides the order; held on
    # the server's event loop, it would hold the answers too, and the calls would time out.
    answered = threading.Event()
    prepare = HarnessRunStream.prepare

    def held(self: HarnessRunStream[Any], pause: Callable[[], None] | None = None) -> None:
        answered.wait(60)
        prepare(self, pause)

    monkeypatch.setattr(HarnessRunStream, "prepare", held)
    async with grpc.aio.insecure_channel(server.address, options=CHANNEL) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        heavy = asyncio.ensure_future(stub.Run(long_run("long-1"), timeout=300))
        preparing = await seen.wait("preparing_off_loop")
        assert preparing["request_id"] == "long-1" and preparing["messages"] == 2 * LONG_PAIRS
        # Answered while the run was being prepared: admitted, not started (its `run_started` is later).
        try:
            await _answered_before(
                seen,
                "run_started",
                lambda: stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), timeout=20),
            )
        finally:
            answered.set()
        result = (await heavy).result
    assert result.status == run_pb2.RUN_STATUS_COMPLETED
    assert json.loads(result.output_json) == "You said: hello"


async def test_a_caller_leaving_stops_the_preparation(server: RunningServer, seen: _Seen) -> None:
    async with grpc.aio.insecure_channel(server.address, options=CHANNEL) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        call = stub.Run(long_run("long-2"), timeout=300)
        await seen.wait("preparing_off_loop")
        call.cancel()  # the host gives up while the run is prepared
        with pytest.raises(asyncio.CancelledError):
            await call
        stopped = await seen.wait("preparing_stopped")
        assert stopped["why"] == "cancelled" and stopped["request_id"] == "long-2"
        # The server is fine: it answers, runs nothing, and the run never started.
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=60)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), timeout=60)
        assert info.default_agent == "default"
    assert server.runs_after_calls() == 0
    assert "run_started" not in seen.events


async def test_thread_rpcs_answer_while_a_long_thread_is_prepared(server: RunningServer, seen: _Seen) -> None:
    async with grpc.aio.insecure_channel(server.address, options=CHANNEL) as channel:
        threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
        created = await threads.CreateThread(
            thread_service_pb2.CreateThreadRequest(state=long_state()),
            timeout=300,
        )
        thread_id = created.thread.thread_id
        spec = thread_service_pb2.ThreadRunSpec(thread_id=thread_id, request_id="long-3", text="hello")
        heavy = asyncio.ensure_future(
            threads.RunThread(thread_service_pb2.RunThreadRequest(spec=spec), timeout=300)
        )
        preparing = await seen.wait("preparing_off_loop")
        assert (preparing["service"], preparing["thread_id"]) == ("threads", thread_id)
        # Answered while the thread's run was prepared: before its Begin, so before its `run_started`.
        await _answered_before(
            seen,
            "run_started",
            lambda: threads.GetThread(thread_service_pb2.GetThreadRequest(thread_id=thread_id)),
        )
        response = await heavy
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED


MODEL_EVENTS = frozenset({"part_start", "part_delta", "part_end", "final_result"})


class _Reader:
    """Reads a run's stream to its end in a task of its own, keeping every event."""

    def __init__(self, call: Any) -> None:
        self.events: list[events_pb2.RunEvent] = []
        self.task = asyncio.ensure_future(self._read(call))

    async def _read(self, call: Any) -> None:
        async for response in call:
            self.events += [response.event] if response.HasField("event") else list(response.events)

    async def started(self) -> None:
        while not self.events and not self.task.done():
            await asyncio.sleep(0.01)
        assert self.events and self.events[0].WhichOneof("event") == "run_started"

    def model_answered(self) -> bool:
        return any(event.WhichOneof("event") in MODEL_EVENTS for event in self.events)


async def _answered_before_the_model(reader: _Reader, ask: Callable[[], Awaitable[object]]) -> None:
    """`ask()` answers `ANSWERS` times after the run started and before its model answered.

    Once started, the run is in pydantic-ai's passes over its 100 000 messages, which precede every
    model request: on the server's loop they held every other RPC for seconds (issue 23, item 14).
    """
    await reader.started()
    for _ in range(ANSWERS):
        await ask()
    assert not reader.model_answered(), "the model answered before the other RPCs"
    # The in-thread server's run is driven where its passes hold no other RPC (`harness.own_loop`).
    assert "threadline-run-loop" in {thread.name for thread in threading.enumerate()}


async def test_other_rpcs_answer_while_pydantic_ai_prepares_a_long_run(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address, options=CHANNEL) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        request = harness_service_pb2.StreamRunRequest(spec=long_run("long-4").spec)
        reader = _Reader(stub.StreamRun(request, timeout=300))
        await _answered_before_the_model(
            reader, lambda: stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), timeout=60)
        )
        await reader.task
    assert reader.model_answered()
    assert reader.events[-1].result.status == run_pb2.RUN_STATUS_COMPLETED


async def test_thread_rpcs_answer_while_pydantic_ai_prepares_a_long_thread_run(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address, options=CHANNEL) as channel:
        threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
        created = await threads.CreateThread(
            thread_service_pb2.CreateThreadRequest(state=_renamed(long_state(), "thr_long2")), timeout=300
        )
        thread_id = created.thread.thread_id
        spec = thread_service_pb2.ThreadRunSpec(thread_id=thread_id, request_id="long-5", text="hello")
        reader = _Reader(
            threads.StreamThreadRun(thread_service_pb2.StreamThreadRunRequest(spec=spec), timeout=300)
        )
        await _answered_before_the_model(
            reader,
            lambda: threads.GetThread(thread_service_pb2.GetThreadRequest(thread_id=thread_id), timeout=60),
        )
        await reader.task
        thread = (await threads.GetThread(thread_service_pb2.GetThreadRequest(thread_id=thread_id))).thread
    assert reader.events[-1].result.status == run_pb2.RUN_STATUS_COMPLETED
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE
    assert (thread.head.kind, thread.head.request_id) == (thread_pb2.CHECKPOINT_KIND_COMPLETED, "long-5")


def _renamed(state: state_pb2.HarnessState, thread_id: str) -> state_pb2.HarnessState:
    copy = state_pb2.HarnessState()
    copy.CopyFrom(state)
    copy.thread_id = thread_id
    return copy
