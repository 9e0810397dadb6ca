"""(b) Text deltas per second: StreamRun of the `stream` agent against a bare grpcio.aio stream.

The bare server sends as many events of the same size as StreamRun sends, to the same clients:
`processes` client processes (`bench.client`), each with `streams` concurrent calls repeated `repeat`
times; StreamRun is asked for packed events as the SDKs ask (`max_events_per_message` 64), and both
the events and the messages it sent are reported. Two rates are reported for each: events per wall
second, and events per second of *server CPU* (the rate one server process sustains with a core to
itself). On a 2-core machine shared by the clients, the second is the server's capacity and the
ratio `stream_run_over_bare_grpc` (the bare server sending one event per message); the first shows
what these clients saw.

The limit StreamRun is really measured against is what its two parts cost on their own: plain
pydantic-ai streaming the same deltas in-process (`Agent.run_stream_events` on the same scripted
model, this process's CPU) plus the bare server sending them at StreamRun's packing (`bare_packed`:
as many deltas per message as StreamRun sent in its latest measurement, a warm-up one before the
first; `PACKED_REPEAT` times as many calls, so that its CPU, read in 10 ms ticks, lasts about as long
as the others'). `stream_run_over_limit` is StreamRun's server CPU per delta over the sum of theirs; 1.0 would
mean the harness, the mapping and the packing add nothing. The harness in-process
(`ExecutableAgent.stream`) is measured beside them. All five variants run in every round, in
rotating order, and each ratio is the median of its per-round ratios.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import PartDeltaEvent

from .agents import stream, stream_model
from .measure import cpu_per_call, median, ratio
from .proc import Helper, ServerProcess, cpu_seconds, start_clients

__all__ = ("stream_section",)

VARIANTS = ("stream_run", "bare", "bare_packed", "pydantic_ai", "in_process")
"""Every variant of a round, in the order of round 0; round i starts at variant i."""

PACKED_REPEAT = 4
"""How many times `bare_packed` repeats each call of the others: a packed bare stream is that much cheaper."""

_REMOTE_KEYS = (
    "deltas_per_s",
    "deltas_per_server_cpu_s",
    "server_cpu_us_per_delta",
    "deltas_per_message",
    "wall_s",
    "server_cpu_s",
)


def _clients(
    address: str,
    *,
    bare: bool,
    processes: int,
    streams: int,
    repeat: int,
    deltas: int,
    messages: int = 0,
) -> list[Helper]:
    options = {"bare": bare, "streams": streams, "repeat": repeat, "deltas": deltas, "messages": messages}
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
        "deltas_per_message": ratio(deltas, messages),
        "wall_s": wall_s,
        "server_cpu_s": cpu_s,
        "deltas_per_s": ratio(deltas, wall_s),
        "deltas_per_server_cpu_s": ratio(deltas, cpu_s),
        "server_cpu_us_per_delta": cpu_s / deltas * 1e6 if deltas else 0.0,
    }


class _InProcess:
    """The same deltas streamed in this process: plain pydantic-ai and the harness, CPU per delta."""

    def __init__(self, deltas: int, runs: int) -> None:
        self._prompt = str(deltas)
        self._runs = runs
        self._native: Agent[None, str] = Agent(stream_model())
        self._harness = stream()
        self.deltas_per_run = 0
        """`PartDeltaEvent`s of one run (the model's first chunk arrives with its `PartStartEvent`)."""

    async def _pydantic_ai(self) -> None:
        deltas = 0
        async with self._native.run_stream_events(self._prompt) as events:
            async for event in events:
                deltas += isinstance(event, PartDeltaEvent)
        self.deltas_per_run = deltas

    async def _in_process(self) -> None:
        async with self._harness.stream(self._prompt) as items:
            async for _ in items:
                pass

    async def warm_up(self) -> None:
        await self._pydantic_ai()
        await self._in_process()

    async def measure(self, name: str) -> dict[str, float]:
        call = self._pydantic_ai if name == "pydantic_ai" else self._in_process
        cost = await cpu_per_call(call, self._runs)
        deltas = self.deltas_per_run * self._runs
        return {
            "text_deltas": deltas,
            "cpu_s": cost.cpu_s * self._runs,
            "cpu_us_per_delta": ratio(cost.cpu_s * self._runs, deltas) * 1e6,
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
    shape = {"processes": processes, "streams": streams, "repeat": repeat, "deltas": deltas}
    in_process = _InProcess(deltas, runs=processes * streams * repeat)  # as many deltas as the clients read
    await in_process.warm_up()
    warm_up = _measure(server.cpu, _clients(server.address, bare=False, **shape))
    packing = warm_up["deltas_per_message"]  # StreamRun's latest deltas per message, for `bare_packed`
    measured: list[dict[str, dict[str, float]]] = []
    for index in range(rounds):
        one: dict[str, dict[str, float]] = {}
        for name in VARIANTS[index % len(VARIANTS) :] + VARIANTS[: index % len(VARIANTS)]:
            if name == "stream_run":
                one[name] = _measure(server.cpu, _clients(server.address, bare=False, **shape))
                packing = one[name]["deltas_per_message"] or packing
            elif name in ("bare", "bare_packed"):
                packed = {"messages": max(1, round(deltas / packing)), "repeat": repeat * PACKED_REPEAT}
                options = {**shape, **packed} if name == "bare_packed" else shape
                helpers = _clients(bare.ready["address"], bare=True, **options)
                one[name] = _measure(lambda: cpu_seconds(bare.pid), helpers)
            else:
                one[name] = await in_process.measure(name)
        measured.append(one)

    def med(name: str, key: str) -> float:
        return median([m[name][key] for m in measured])

    def limit_us_per_delta(m: dict[str, dict[str, float]]) -> float:
        return m["pydantic_ai"]["cpu_us_per_delta"] + m["bare_packed"]["server_cpu_us_per_delta"]

    over_limit = [ratio(m["stream_run"]["server_cpu_us_per_delta"], limit_us_per_delta(m)) for m in measured]
    ratios = {
        "stream_run_over_bare_grpc": median(
            [
                ratio(m["stream_run"]["deltas_per_server_cpu_s"], m["bare"]["deltas_per_server_cpu_s"])
                for m in measured
            ]
        ),
        "stream_run_over_limit": median(over_limit),
        "stream_run_over_bare_grpc_wall": median(
            [ratio(m["stream_run"]["deltas_per_s"], m["bare"]["deltas_per_s"]) for m in measured]
        ),
    }
    return {
        "shape": shape,
        "rounds": rounds,
        "stream_run": {key: round(med("stream_run", key), 2) for key in _REMOTE_KEYS},
        "bare_grpc": {key: round(med("bare", key), 2) for key in _REMOTE_KEYS},
        "bare_grpc_packed": {key: round(med("bare_packed", key), 2) for key in _REMOTE_KEYS},
        "text_deltas_per_variant": measured[0]["stream_run"]["text_deltas"],
        "events_per_variant": {
            "stream_run": measured[0]["stream_run"]["events"],
            "bare_grpc": measured[0]["bare"]["events"],
            "bare_grpc_packed": measured[0]["bare_packed"]["events"],
        },
        "messages_per_variant": {
            "stream_run": measured[0]["stream_run"]["messages"],
            "bare_grpc": measured[0]["bare"]["messages"],
            "bare_grpc_packed": measured[0]["bare_packed"]["messages"],
        },
        "in_process_cpu_us_per_delta": {
            name: round(med(name, "cpu_us_per_delta"), 2) for name in ("pydantic_ai", "in_process")
        },
        "limit_cpu_us_per_delta": round(median([limit_us_per_delta(m) for m in measured]), 2),
        "stream_run_over_limit_rounds": [round(r, 4) for r in over_limit],
        "ratios": ratios,
    }
