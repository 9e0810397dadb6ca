"""(g) Server CPU per turn of one long thread: `ThreadService` with its head cached, beside `HarnessService`.

One thread of the `scenario` agent grows on server A (`--store sqlite:FILE`) by `RunThread` turns, so A
committed every turn before the next and holds its head in its cache. At each level n (50 and 500 in a
full run) a few rounds run, each with, in rotating order:

- `thread_turn_1`: turn 1 of a new thread on A (`CreateThread` not counted);
- `thread_turn_n`: the long thread's next turn on A, head cached (turns n, n+1, ... one per round);
- `harness_turn_1`, `harness_turn_n`: the same turns through `HarnessService.Run` on A, turn n from
  the long thread's head state (read with `GetCheckpoint`, unmeasured) as `previous_state`;
- `pydantic_ai_turn_1`, `pydantic_ai_turn_n`: plain pydantic-ai in this process over the same history
  (`bench.thread`'s native host, reading and writing it as JSON): what the longer history costs
  pydantic-ai itself; `pydantic_ai_in_memory_turn_*` the same run on messages already decoded, so
  only pydantic-ai's own per-request work over the history grows (the floor for any cache).

At the last level each round then runs the long thread's next turn on server B, a second server on the
same file that never held its head (`thread_turn_n_miss`: the head is loaded from the store and
validated with `load_state`), and the turn after on A, whose cached head B's commit left behind
(`thread_turn_n_miss_a`). Turn n is measured once a round (one call per batch), the turn-1 variants
`TURN_1_CALLS` calls a batch, server CPU to the nanosecond; ratios are medians of per-round ratios, and the
build's own turns give a cost curve.
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from pydantic_ai.messages import ModelMessagesTypeAdapter
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    state_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

from .agents import PROMPT, native_agent
from .measure import Cost, cpu_per_call, median, median_ratio, server_cpu_per_call, summary
from .proc import ServerProcess
from .thread import turn_spec

TURN_1_CALLS = 3
"""Turn-1 variants run this many calls a batch (a new thread each): a lone 25 ms call's CPU moves with
whatever else the server did meanwhile (its sweeper, a renewal), turn n's is 2-10 times longer."""

__all__ = ("ThreadClient", "threads_section")


class ThreadClient:
    """`ThreadService` calls of the benchmark: new threads, turns, head states."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = thread_service_pb2_grpc.ThreadServiceStub(channel)

    async def create(self) -> str:
        response = await self.stub.CreateThread(thread_service_pb2.CreateThreadRequest(agent="scenario"))
        return response.thread.thread_id

    async def turn(self, thread_id: str) -> int:
        """One completed `scenario` turn; the revision it committed last."""
        spec = thread_service_pb2.ThreadRunSpec(thread_id=thread_id, request_id=uuid.uuid4().hex, text=PROMPT)
        response = await self.stub.RunThread(thread_service_pb2.RunThreadRequest(spec=spec))
        assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response
        return response.revision

    async def state(self, thread_id: str, revision: int = 0) -> state_pb2.HarnessState:
        """The state of checkpoint `revision` (the head for 0)."""
        if not revision:
            thread = await self.stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id=thread_id))
            revision = thread.thread.revision
        request = thread_service_pb2.GetCheckpointRequest(thread_id=thread_id, revision=revision)
        return (await self.stub.GetCheckpoint(request)).checkpoint.state


def _curve(by_turn: dict[int, float], every: int) -> list[dict[str, float]]:
    """The median CPU of the build's turns within 2 of turn 1 and of every `every`-th turn."""
    if not by_turn:
        return []
    marks = sorted({1, *range(every, max(by_turn) + 1, every), max(by_turn)})
    curve = []
    for mark in marks:
        near = [cpu for turn, cpu in by_turn.items() if abs(turn - mark) <= 2]
        if near:
            curve.append({"turn": mark, "cpu_ms": round(statistics.median(near) * 1e3, 3)})
    return curve


async def threads_section(
    server: ServerProcess,
    second: ServerProcess,
    channel: grpc.aio.Channel,
    second_channel: grpc.aio.Channel,
    *,
    levels: tuple[int, ...],
    rounds: int,
) -> dict[str, Any]:
    threads, threads_b = ThreadClient(channel), ThreadClient(second_channel)
    harness = harness_service_pb2_grpc.HarnessServiceStub(channel)
    native = native_agent()
    long_thread = await threads.create()
    build: dict[int, float] = {}  # turn -> server CPU, for the long thread's turns outside the rounds
    turns_done = 0

    async def long_turn(on: ThreadClient) -> None:
        nonlocal turns_done
        await on.turn(long_thread)
        turns_done += 1

    async def new_thread_turn(calls: int = 1) -> Callable[[], Awaitable[None]]:
        """Turn 1 of a new thread per call (the threads made now, unmeasured)."""
        fresh = [await threads.create() for _ in range(calls)]

        async def call() -> None:
            await threads.turn(fresh.pop())

        return call

    def harness_turn(previous: state_pb2.HarnessState | None) -> Callable[[], Awaitable[None]]:
        request = harness_service_pb2.RunRequest(spec=turn_spec(previous))

        async def call() -> None:
            response = await harness.Run(request)
            assert response.result.status == run_pb2.RUN_STATUS_COMPLETED

        return call

    def pydantic_ai_turn(stored: bytes) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            history = ModelMessagesTypeAdapter.validate_json(stored)
            async with native.run_stream_events(PROMPT, message_history=history) as events:
                async for _ in events:
                    pass
                ModelMessagesTypeAdapter.dump_json(events.all_messages())

        return call

    def pydantic_ai_in_memory_turn(stored: bytes) -> Callable[[], Awaitable[None]]:
        history = ModelMessagesTypeAdapter.validate_json(stored)

        async def call() -> None:
            async with native.run_stream_events(PROMPT, message_history=list(history)) as events:
                async for _ in events:
                    pass

        return call

    # Warm both servers and this process up on throwaway turns.
    await (await new_thread_turn())()
    await harness_turn(None)()
    await pydantic_ai_turn(b"[]")()
    await threads_b.turn(await threads_b.create())

    levels_out: list[dict[str, Any]] = []
    ratios: dict[str, float] = {}
    for level in levels:
        while turns_done < level - 1:
            build[turns_done + 1] = (await server_cpu_per_call(server, lambda: long_turn(threads), 1)).cpu_s
        first_turn = turns_done + 1
        measured: list[dict[str, Cost]] = []
        miss = level == levels[-1]
        for index in range(rounds):
            previous = await threads.state(long_thread)
            calls: dict[str, tuple[Callable[[], Awaitable[None]], bool]] = {
                "thread_turn_1": (await new_thread_turn(TURN_1_CALLS), True),
                "thread_turn_n": (lambda: long_turn(threads), True),
                "harness_turn_1": (harness_turn(None), True),
                "harness_turn_n": (harness_turn(previous), True),
                "pydantic_ai_turn_1": (pydantic_ai_turn(b"[]"), False),
                "pydantic_ai_turn_n": (pydantic_ai_turn(previous.message_history.data.encode()), False),
                "pydantic_ai_in_memory_turn_1": (pydantic_ai_in_memory_turn(b"[]"), False),
                "pydantic_ai_in_memory_turn_n": (
                    pydantic_ai_in_memory_turn(previous.message_history.data.encode()),
                    False,
                ),
            }
            names = list(calls)
            costs: dict[str, Cost] = {}
            for name in names[index % len(names) :] + names[: index % len(names)]:
                call, remote = calls[name]
                n = TURN_1_CALLS if name.endswith("_turn_1") else 1
                costs[name] = await (
                    server_cpu_per_call(server, call, n) if remote else cpu_per_call(call, n)
                )
            if miss:
                costs["thread_turn_n_miss"] = await server_cpu_per_call(
                    second, lambda: long_turn(threads_b), 1
                )
                costs["thread_turn_n_miss_a"] = await server_cpu_per_call(
                    server, lambda: long_turn(threads), 1
                )
            measured.append(costs)
        variants = list(measured[0])
        row: dict[str, Any] = {
            "level": level,
            "long_thread_turns": [first_turn, turns_done],
            "history_messages": previous.message_history.message_count,
            "history_bytes": len(previous.message_history.data.encode()),
            "cost": {name.replace("_turn_n", f"_turn_{level}"): summary(measured, name) for name in variants},
        }
        level_ratios = {
            f"thread_turn_{level}_over_turn_1": median_ratio(measured, "thread_turn_n", "thread_turn_1"),
            f"harness_turn_{level}_over_turn_1": median_ratio(measured, "harness_turn_n", "harness_turn_1"),
            f"pydantic_ai_turn_{level}_over_turn_1": median_ratio(
                measured, "pydantic_ai_turn_n", "pydantic_ai_turn_1"
            ),
            f"pydantic_ai_in_memory_turn_{level}_over_turn_1": median_ratio(
                measured, "pydantic_ai_in_memory_turn_n", "pydantic_ai_in_memory_turn_1"
            ),
            f"thread_turn_{level}_over_harness_turn_{level}": median_ratio(
                measured, "thread_turn_n", "harness_turn_n"
            ),
            f"thread_turn_1_over_harness_turn_1_at_{level}": median_ratio(
                measured, "thread_turn_1", "harness_turn_1"
            ),
        }
        if miss:
            level_ratios[f"thread_turn_{level}_miss_over_turn_1"] = median_ratio(
                measured, "thread_turn_n_miss", "thread_turn_1"
            )
            level_ratios[f"thread_turn_{level}_miss_over_hit"] = median_ratio(
                measured, "thread_turn_n_miss", "thread_turn_n"
            )
            level_ratios[f"thread_turn_{level}_miss_a_over_hit"] = median_ratio(
                measured, "thread_turn_n_miss_a", "thread_turn_n"
            )
        row["ratios"] = level_ratios
        ratios.update(level_ratios)
        levels_out.append(row)
    return {
        "levels": levels_out,
        "rounds": rounds,
        "long_thread": long_thread,
        "long_thread_turns": turns_done,
        "build_turns": len(build),
        "build_cpu_ms": _curve(build, 50),
        "build_cpu_ms_median": round(median(list(build.values())) * 1e3, 3),
        "ratios": ratios,
    }
