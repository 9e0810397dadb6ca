"""A client process of the benchmark: `python -m bench.client MODE ADDRESS JSON-OPTIONS`.

Clients run in processes of their own, so the server's cost is measured apart from theirs (a single
grpcio aio client stream reads only about 22k messages/s; TOOLCHAIN §6). The protocol is JSON lines
(`bench.proc.Helper`): the client prints `{"ready": true}` once its channel is up, waits for a line,
runs, and prints its results. Modes:

- `stream`: `streams` concurrent calls, each repeated `repeat` times: StreamRun of the `stream` agent
  with `deltas` text deltas, or the bare server's stream of as many events (`"bare": true`), one per
  message or, with `"messages": m`, packed into `m` messages per call.
- `runs`: `runs` concurrent StreamRuns of the `scenario` agent, each read to its result.
- `idle`: opens `runs` StreamRuns of the `idle` agent (or bare streams that send one message and
  wait, `"bare": true`), prints `{"open": n}` once every one has sent its first event, then, at the
  next line, cancels them all.
- `paced`: creates `runs` threads of the `paced` agent, then at each line runs one StreamThreadRun
  turn after another on each of them (`text`, a `bench.wire.paced_prompt`), prints `{"running": n}`
  once every thread's first turn has sent its first event, and at the next line lets each thread
  finish the turn it is in and prints what ran (`events_between`: the events received between those
  two lines); again at the next line, until stdin closes.
- `watch`: creates `runs` threads, opens a WatchThread stream on each, prints `{"open": n}` once
  every one has sent its snapshot, then, at the next line, cancels them all.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections import Counter
from typing import Any

import grpc
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

from .wire import BARE_METHOD, CHANNEL_OPTIONS, PER_MESSAGE, PROMPT, events_of


def _spec(agent: str, text: str) -> run_pb2.RunSpec:
    return run_pb2.RunSpec(agent=agent, text=text)


def _bare(channel: grpc.aio.Channel) -> Any:
    return channel.unary_stream(
        BARE_METHOD,
        request_serializer=harness_service_pb2.StreamRunRequest.SerializeToString,
        response_deserializer=harness_service_pb2.StreamRunResponse.FromString,
    )


async def _read_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


def _emit(value: dict[str, Any]) -> None:
    print(json.dumps(value), flush=True)


async def _stream_mode(channel: grpc.aio.Channel, options: dict[str, Any]) -> dict[str, Any]:
    deltas = int(options["deltas"])
    text = f"{deltas}/{int(options['messages'])}" if options.get("messages") else str(deltas)
    request = harness_service_pb2.StreamRunRequest(
        spec=_spec("stream", text), max_events_per_message=PER_MESSAGE
    )
    if options.get("bare"):
        call = _bare(channel)
    else:
        call = harness_service_pb2_grpc.HarnessServiceStub(channel).StreamRun
    counts: Counter[str] = Counter()
    messages = [0]

    async def one() -> None:
        for _ in range(int(options["repeat"])):
            async for response in call(request):
                messages[0] += 1
                for event in events_of(response):
                    counts[event.WhichOneof("event") or ""] += 1

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(int(options["streams"]))))
    return {"wall_s": time.perf_counter() - started, "events": dict(counts), "messages": messages[0]}


async def _runs_mode(channel: grpc.aio.Channel, options: dict[str, Any]) -> dict[str, Any]:
    stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
    request = harness_service_pb2.StreamRunRequest(
        spec=_spec("scenario", PROMPT), max_events_per_message=PER_MESSAGE
    )
    outcomes: Counter[str] = Counter()
    details: dict[str, str] = {}
    latencies: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        status = "no_result"
        try:
            async for response in stub.StreamRun(request, timeout=float(options.get("timeout", 600))):
                for event in events_of(response):
                    if event.WhichOneof("event") == "result":
                        status = run_pb2.RunStatus.Name(event.result.status)
        except grpc.aio.AioRpcError as error:
            status = f"error:{error.code().name}"
            details[status] = error.details() or ""
        outcomes[status] += 1
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(int(options["runs"]))))
    latencies.sort()
    return {
        "wall_s": time.perf_counter() - started,
        "outcomes": dict(outcomes),
        "error_details": details,
        "latency_p50_s": latencies[len(latencies) // 2] if latencies else 0.0,
        "latency_max_s": latencies[-1] if latencies else 0.0,
    }


async def _idle_mode(channel: grpc.aio.Channel, options: dict[str, Any]) -> dict[str, Any]:
    runs = int(options["runs"])
    request = harness_service_pb2.StreamRunRequest(
        spec=_spec("idle", str(options["hold_s"])), max_events_per_message=PER_MESSAGE
    )
    if options.get("bare"):
        call = _bare(channel)
    else:
        call = harness_service_pb2_grpc.HarnessServiceStub(channel).StreamRun
    started_runs = 0
    all_started = asyncio.Event()
    outcomes: Counter[str] = Counter()

    async def one() -> None:
        nonlocal started_runs
        status = "no_result"
        try:
            async for response in call(request):
                for event in events_of(response):
                    if event.sequence == 0:  # `run_started` (the bare stream's first message)
                        started_runs += 1
                        if started_runs == runs:
                            all_started.set()
                    if event.WhichOneof("event") == "result":
                        status = run_pb2.RunStatus.Name(event.result.status)
        except asyncio.CancelledError:
            status = "cancelled_by_client"
        except grpc.aio.AioRpcError as error:
            status = f"error:{error.code().name}"
        outcomes[status] += 1

    started = time.perf_counter()
    tasks = [asyncio.create_task(one()) for _ in range(runs)]
    await all_started.wait()
    _emit({"open": started_runs, "open_after_s": time.perf_counter() - started})
    await _read_line()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"outcomes": dict(outcomes)}


async def _threads(stub: thread_service_pb2_grpc.ThreadServiceAsyncStub, agent: str, count: int) -> list[str]:
    threads = []
    for _ in range(count):
        response = await stub.CreateThread(thread_service_pb2.CreateThreadRequest(agent=agent))
        threads.append(response.thread.thread_id)
    return threads


async def _paced_mode(channel: grpc.aio.Channel, options: dict[str, Any]) -> dict[str, Any]:
    """One cycle of paced turns on the threads made before `ready` (`options["threads"]`)."""
    stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
    threads: list[str] = options["threads"]
    stop = asyncio.Event()
    running = 0
    all_running = asyncio.Event()
    outcomes: Counter[str] = Counter()
    events = [0]

    async def one(thread_id: str) -> None:
        nonlocal running
        first = True
        while not stop.is_set():
            spec = thread_service_pb2.ThreadRunSpec(
                thread_id=thread_id, request_id=uuid.uuid4().hex, text=str(options["text"])
            )
            request = thread_service_pb2.StreamThreadRunRequest(spec=spec, max_events_per_message=PER_MESSAGE)
            status = "no_result"
            try:
                async for response in stub.StreamThreadRun(request, timeout=600):
                    for event in events_of(response):
                        events[0] += 1
                        if first:
                            first = False
                            running += 1
                            if running == len(threads):
                                all_running.set()
                        if event.WhichOneof("event") == "result":
                            status = run_pb2.RunStatus.Name(event.result.status)
            except grpc.aio.AioRpcError as error:
                status = f"error:{error.code().name}"
                await asyncio.sleep(0.1)  # counted, not retried in a tight loop
            outcomes[status] += 1
            if first:  # never started: count it as running, or the cycle would wait forever
                first = False
                running += 1
                if running == len(threads):
                    all_running.set()

    tasks = [asyncio.create_task(one(thread_id)) for thread_id in threads]
    started = time.perf_counter()
    await all_running.wait()
    _emit({"running": running, "running_after_s": time.perf_counter() - started})
    at_running = events[0]
    await _read_line()
    between = events[0] - at_running
    stop.set()
    await asyncio.gather(*tasks)
    return {
        "turns": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "events": events[0],
        "events_between": between,
    }


async def _watch_mode(channel: grpc.aio.Channel, options: dict[str, Any]) -> dict[str, Any]:
    stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
    threads: list[str] = options["threads"]
    opened = 0
    all_open = asyncio.Event()
    outcomes: Counter[str] = Counter()

    async def one(thread_id: str) -> None:
        nonlocal opened
        status = "ended"
        try:
            async for _response in stub.WatchThread(
                thread_service_pb2.WatchThreadRequest(thread_id=thread_id)
            ):
                if status == "ended":
                    status = "snapshot"
                    opened += 1
                    if opened == len(threads):
                        all_open.set()
        except asyncio.CancelledError:
            status = "cancelled_by_client"
        except grpc.aio.AioRpcError as error:
            status = f"error:{error.code().name}"
        outcomes[status] += 1

    started = time.perf_counter()
    tasks = [asyncio.create_task(one(thread_id)) for thread_id in threads]
    await all_open.wait()
    _emit({"open": opened, "open_after_s": time.perf_counter() - started})
    await _read_line()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"outcomes": dict(outcomes)}


_MODES = {
    "stream": _stream_mode,
    "runs": _runs_mode,
    "idle": _idle_mode,
    "paced": _paced_mode,
    "watch": _watch_mode,
}
_THREAD_AGENT = {"paced": "paced", "watch": "scenario"}
"""The agent of the threads a thread mode makes before it is ready."""


async def main(mode: str, address: str, options: dict[str, Any]) -> None:
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout=30)
        if mode in _THREAD_AGENT:
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            options = {**options, "threads": await _threads(stub, _THREAD_AGENT[mode], int(options["runs"]))}
        _emit({"ready": True})
        if mode == "paced":  # a cycle per line, until stdin closes
            while await _read_line():
                _emit(await _paced_mode(channel, options))
            return
        await _read_line()
        _emit(await _MODES[mode](channel, options))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
