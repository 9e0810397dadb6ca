"""(b) Text deltas per second: StreamRun of the `stream` agent against a bare grpcio.aio stream.

The bare server sends one message per event, as many events of the same size as StreamRun sends,
to the same clients: `processes` client processes (`bench.client`), each with `streams` concurrent
calls repeated `repeat` times; StreamRun is asked for packed events as the SDKs ask
(`max_events_per_message` 64), and both the events and the messages it sent are reported.
Two rates are reported for each: events per wall second, and events per second of *server CPU*
(the rate one server process sustains with a core to itself). On a 2-core machine shared by the
clients, the second is the server's capacity and the target's ratio; the first shows what these
clients saw. For reference, the same deltas in-process: plain pydantic-ai (`Agent.iter` and
`node.stream`) and the harness (`ExecutableAgent.stream`), in CPU per delta.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from harness.testing import scripted_model

from .agents import DELTA, stream
from .measure import cpu_per_call, median, ratio
from .proc import Helper, ServerProcess, cpu_seconds, start_clients

__all__ = ("stream_section",)


def _clients(
    address: str, *, bare: bool, processes: int, streams: int, repeat: int, deltas: int
) -> list[Helper]:
    options = {"bare": bare, "streams": streams, "repeat": repeat, "deltas": deltas}
    return start_clients("stream", address, [options] * processes)


def _measure(pid_cpu: Callable[[], float], helpers: list[Helper]) -> dict[str, float]:
    cpu, wall = pid_cpu(), time.perf_counter()
    for helper in helpers:
        helper.send()
    results = [helper.result() for helper in helpers]
    wall_s, cpu_s = time.perf_counter() - wall, pid_cpu() - cpu
    for helper in helpers:
        helper.close()
    deltas = sum(r["events"].get("part_delta", 0) for r in results)
    events = sum(sum(r["events"].values()) for r in results)
    messages = sum(r["messages"] for r in results)
    return {
        "text_deltas": deltas,
        "events": events,
        "messages": messages,
        "wall_s": wall_s,
        "server_cpu_s": cpu_s,
        "deltas_per_s": ratio(deltas, wall_s),
        "deltas_per_server_cpu_s": ratio(deltas, cpu_s),
        "server_cpu_us_per_delta": cpu_s / deltas * 1e6 if deltas else 0.0,
    }


async def _in_process(deltas: int, runs: int) -> dict[str, float]:
    text = DELTA * deltas

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(text)])

    native: Agent[None, str] = Agent(scripted_model(answer))
    harness = stream()

    async def pydantic_ai() -> None:
        async with native.iter("go") as run:
            async for node in run:
                if Agent.is_model_request_node(node):
                    async with node.stream(run.ctx) as events:
                        async for _ in events:
                            pass

    async def in_process() -> None:
        async with harness.stream(str(deltas)) as items:
            async for _ in items:
                pass

    await pydantic_ai()
    await in_process()
    return {
        "pydantic_ai_cpu_us_per_delta": (await cpu_per_call(pydantic_ai, runs)).cpu_s / deltas * 1e6,
        "in_process_cpu_us_per_delta": (await cpu_per_call(in_process, runs)).cpu_s / deltas * 1e6,
    }


async def stream_section(
    server: ServerProcess,
    bare: Helper,
    *,
    deltas: int,
    processes: int,
    streams: int,
    repeat: int,
    rounds: int,
) -> dict[str, Any]:
    measured: list[dict[str, dict[str, float]]] = []
    shape = {"processes": processes, "streams": streams, "repeat": repeat, "deltas": deltas}
    for index in range(rounds):
        one: dict[str, dict[str, float]] = {}
        order = ("stream_run", "bare") if index % 2 == 0 else ("bare", "stream_run")
        for name in order:
            if name == "bare":
                helpers = _clients(bare.ready["address"], bare=True, **shape)
                one[name] = _measure(lambda: cpu_seconds(bare.pid), helpers)
            else:
                helpers = _clients(server.address, bare=False, **shape)
                one[name] = _measure(server.cpu, helpers)
        measured.append(one)
    reference = await _in_process(deltas, max(1, rounds))

    def med(name: str, key: str) -> float:
        return median([m[name][key] for m in measured])

    ratios = {
        "stream_run_over_bare_grpc": median(
            [
                ratio(m["stream_run"]["deltas_per_server_cpu_s"], m["bare"]["deltas_per_server_cpu_s"])
                for m in measured
            ]
        ),
        "stream_run_over_bare_grpc_wall": median(
            [ratio(m["stream_run"]["deltas_per_s"], m["bare"]["deltas_per_s"]) for m in measured]
        ),
    }
    keys = ("deltas_per_s", "deltas_per_server_cpu_s", "server_cpu_us_per_delta", "wall_s", "server_cpu_s")
    return {
        "shape": shape,
        "rounds": rounds,
        "stream_run": {key: round(med("stream_run", key), 2) for key in keys},
        "bare_grpc": {key: round(med("bare", key), 2) for key in keys},
        "text_deltas_per_variant": measured[0]["stream_run"]["text_deltas"],
        "events_per_variant": {
            "stream_run": measured[0]["stream_run"]["events"],
            "bare_grpc": measured[0]["bare"]["events"],
        },
        "messages_per_variant": {
            "stream_run": measured[0]["stream_run"]["messages"],
            "bare_grpc": measured[0]["bare"]["messages"],
        },
        "in_process_reference": {key: round(value, 2) for key, value in reference.items()},
        "ratios": ratios,
    }
