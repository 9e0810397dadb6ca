"""(a) One run, seven ways: plain pydantic-ai, the harness in-process, gRPC `Run` and `StreamRun`, and
those two on a server with everything observable on.

The run is `bench.agents.scenario` on a new thread: 3 model requests, 2 calls to a plain local tool,
a streamed answer. pydantic-ai runs it with `Agent.run_stream_events` (every event consumed), the
harness with `ExecutableAgent.stream` (every item consumed), the server with `Run` and with
`StreamRun` (every event read) from this process over loopback; `StreamRun` as the SDKs call it
(`max_events_per_message` 64: events ready at once share a message) and with one event per message. Cost is CPU per run: this process's
for the in-process variants, the server process's for the gRPC ones (the client's is not counted).

The observed server has `--metrics-port` and `--otlp-endpoint` (to `bench.otlp_sink`, a process of its
own): `run_observed_over_run` is what turning metrics and traces on costs a run, its batch exporter's
thread included. What they cost when off is the plain server's figures against a commit without them
(`python -m bench.compare`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2

from .agents import PROMPT, native_agent, scenario
from .measure import Cost, cpu_per_call, median_ratio, server_cpu_per_call, summary
from .proc import ServerProcess
from .wire import PER_MESSAGE, events_of

__all__ = ("run_section",)

VARIANTS = (
    "pydantic_ai",
    "in_process",
    "grpc_run",
    "grpc_stream_run",
    "grpc_stream_run_single",
    "grpc_run_observed",
    "grpc_stream_run_observed",
)


async def run_section(
    server: ServerProcess,
    channel: grpc.aio.Channel,
    observed: tuple[ServerProcess, grpc.aio.Channel],
    *,
    runs: int,
    rounds: int,
) -> dict[str, Any]:
    native = native_agent()
    agent = scenario()
    stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
    observed_server, observed_channel = observed
    observed_stub = harness_service_pb2_grpc.HarnessServiceStub(observed_channel)
    spec = run_pb2.RunSpec(agent="scenario", text=PROMPT)
    run_request = harness_service_pb2.RunRequest(spec=spec)
    stream_request = harness_service_pb2.StreamRunRequest(spec=spec, max_events_per_message=PER_MESSAGE)
    single_request = harness_service_pb2.StreamRunRequest(spec=spec)
    events = {"pydantic_ai": 0, "in_process": 0, "grpc_stream_run": 0, "grpc_stream_run_single": 0}
    messages = {"grpc_stream_run": 0, "grpc_stream_run_single": 0}
    servers = dict.fromkeys(VARIANTS, server) | {
        "grpc_run_observed": observed_server,
        "grpc_stream_run_observed": observed_server,
    }

    async def pydantic_ai() -> None:
        async with native.run_stream_events(PROMPT) as stream:
            async for _ in stream:
                events["pydantic_ai"] += 1

    async def in_process() -> None:
        async with agent.stream(PROMPT) as stream:
            async for _ in stream:
                events["in_process"] += 1

    async def grpc_run() -> None:
        response = await stub.Run(run_request)
        assert response.result.status == run_pb2.RUN_STATUS_COMPLETED

    async def grpc_stream_run() -> None:
        async for response in stub.StreamRun(stream_request):
            events["grpc_stream_run"] += len(events_of(response))
            messages["grpc_stream_run"] += 1

    async def grpc_stream_run_single() -> None:
        async for _ in stub.StreamRun(single_request):
            events["grpc_stream_run_single"] += 1
            messages["grpc_stream_run_single"] += 1

    async def grpc_run_observed() -> None:
        response = await observed_stub.Run(run_request)
        assert response.result.status == run_pb2.RUN_STATUS_COMPLETED

    async def grpc_stream_run_observed() -> None:
        async for _ in observed_stub.StreamRun(stream_request):
            pass

    calls: dict[str, tuple[Callable[[], Awaitable[None]], bool]] = {
        "pydantic_ai": (pydantic_ai, False),
        "in_process": (in_process, False),
        "grpc_run": (grpc_run, True),
        "grpc_stream_run": (grpc_stream_run, True),
        "grpc_stream_run_single": (grpc_stream_run_single, True),
        "grpc_run_observed": (grpc_run_observed, True),
        "grpc_stream_run_observed": (grpc_stream_run_observed, True),
    }
    for call, _ in calls.values():  # warm-up: imports, schema builds, connections
        for _ in range(3):
            await call()
    for counts in (events, messages):
        for key in counts:
            counts[key] = 0
    measured: list[dict[str, Cost]] = []
    for index in range(rounds):
        costs: dict[str, Cost] = {}
        order = VARIANTS[index % len(VARIANTS) :] + VARIANTS[: index % len(VARIANTS)]
        for name in order:
            call, remote = calls[name]
            costs[name] = await (
                server_cpu_per_call(servers[name], call, runs) if remote else cpu_per_call(call, runs)
            )
        measured.append(costs)
    per_run_events = {key: value / (runs * rounds) for key, value in events.items()}
    per_run_messages = {key: value / (runs * rounds) for key, value in messages.items()}
    return {
        "runs_per_round": runs,
        "rounds": rounds,
        "events_per_run": per_run_events,
        "messages_per_run": per_run_messages,
        "cost": {name: summary(measured, name) for name in VARIANTS},
        "ratios": {
            "in_process_over_pydantic_ai": median_ratio(measured, "in_process", "pydantic_ai"),
            "run_over_pydantic_ai": median_ratio(measured, "grpc_run", "pydantic_ai"),
            "stream_run_over_pydantic_ai": median_ratio(measured, "grpc_stream_run", "pydantic_ai"),
            "stream_run_over_in_process": median_ratio(measured, "grpc_stream_run", "in_process"),
            "stream_run_single_over_in_process": median_ratio(
                measured, "grpc_stream_run_single", "in_process"
            ),
            "run_over_in_process": median_ratio(measured, "grpc_run", "in_process"),
            "run_observed_over_run": median_ratio(measured, "grpc_run_observed", "grpc_run"),
            "stream_run_observed_over_stream_run": median_ratio(
                measured, "grpc_stream_run_observed", "grpc_stream_run"
            ),
        },
    }
