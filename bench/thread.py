"""(d) A thread continued `turns` times: what turn `turns` costs against turn 1.

The thread is built through the server (`Run` of the `scenario` agent, each turn continuing from the
state the previous one returned; 6 messages a turn, so turn 50 starts from 294). Then turn 1 (a new
thread) and the last turn (from the state before it) are re-run side by side, `runs` times each per
round: the server is stateless, so re-running a turn from the same state costs what that turn cost.
The same two turns are measured for a host on plain pydantic-ai that keeps its thread as native JSON
(`ModelMessagesTypeAdapter.validate_json`, `Agent.run_stream_events`, `dump_json` of all messages)
and for the harness in-process (`load_state`, `ExecutableAgent.stream`, `model_dump_json`).

The target's budget for the last turn is 1.5 x turn 1 plus what the longer history costs pydantic-ai
itself (the pydantic-ai host's last turn minus its first: reading and writing the history, and its
own per-request work over it). `validate_json` of the history alone is reported beside it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from pydantic_ai.messages import ModelMessagesTypeAdapter
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

from harness import load_state
from server.mapping.state import state_from_pb, state_to_json

from .agents import PROMPT, native_agent, scenario
from .measure import (
    Cost,
    cpu_per_call,
    median,
    median_ratio,
    ratio,
    server_cpu_per_call,
    summary,
    sync_cpu_per_call,
)
from .proc import ServerProcess

__all__ = ("build_thread", "thread_section", "turn_spec")


def turn_spec(previous: state_pb2.HarnessState | None, **fields: Any) -> run_pb2.RunSpec:
    """A `scenario` turn continuing from `previous` (a new thread for `None`)."""
    spec = run_pb2.RunSpec(agent="scenario", text=PROMPT, **fields)
    if previous is not None:
        spec.previous_state.CopyFrom(previous)
    return spec


async def build_thread(channel: grpc.aio.Channel, turns: int) -> list[state_pb2.HarnessState | None]:
    """`states[i]` is the previous state of turn `i + 1` (`None` for turn 1)."""
    stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
    states: list[state_pb2.HarnessState | None] = [None]
    for _ in range(turns):
        response = await stub.Run(harness_service_pb2.RunRequest(spec=turn_spec(states[-1])))
        assert response.result.status == run_pb2.RUN_STATUS_COMPLETED
        states.append(response.result.state)
    return states[:turns]


async def thread_section(
    server: ServerProcess,
    channel: grpc.aio.Channel,
    states: list[state_pb2.HarnessState | None],
    *,
    runs: int,
    rounds: int,
) -> dict[str, Any]:
    stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
    last = len(states)
    previous = states[-1]
    assert previous is not None
    previous_json = state_to_json(state_from_pb(previous, field="state"))
    history_json = previous.message_history.data.encode()
    agent = scenario()
    native = native_agent()
    empty_json = b"[]"
    new_thread_json = state_to_json(load_state({"schema_version": "1", "thread_id": "thr_bench"}))

    def grpc_turn(state: state_pb2.HarnessState | None) -> Callable[[], Awaitable[None]]:
        request = harness_service_pb2.RunRequest(spec=turn_spec(state))

        async def call() -> None:
            response = await stub.Run(request)
            assert response.result.status == run_pb2.RUN_STATUS_COMPLETED

        return call

    def harness_turn(stored: str) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            async with agent.stream(PROMPT, previous_state=load_state(stored)) as stream:
                async for _ in stream:
                    pass
            assert stream.result is not None and stream.result.state is not None
            stream.result.state.model_dump_json()

        return call

    def pydantic_ai_turn(stored: bytes) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            history = ModelMessagesTypeAdapter.validate_json(stored)
            async with native.run_stream_events(PROMPT, message_history=history) as events:
                async for _ in events:
                    pass
                ModelMessagesTypeAdapter.dump_json(events.all_messages())

        return call

    calls: dict[str, tuple[Callable[[], Awaitable[None]], bool]] = {
        "grpc_turn_1": (grpc_turn(None), True),
        f"grpc_turn_{last}": (grpc_turn(previous), True),
        "in_process_turn_1": (harness_turn(new_thread_json), False),
        f"in_process_turn_{last}": (harness_turn(previous_json), False),
        "pydantic_ai_turn_1": (pydantic_ai_turn(empty_json), False),
        f"pydantic_ai_turn_{last}": (pydantic_ai_turn(history_json), False),
    }
    for call, _ in calls.values():
        await call()
    measured: list[dict[str, Cost]] = []
    names = list(calls)
    for index in range(rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
        costs: dict[str, Cost] = {}
        for name in order:
            call, remote = calls[name]
            costs[name] = await (
                server_cpu_per_call(server, call, runs) if remote else cpu_per_call(call, runs)
            )
        costs["validate_history"] = sync_cpu_per_call(
            lambda: ModelMessagesTypeAdapter.validate_json(history_json), runs
        )
        measured.append(costs)

    def med(name: str) -> float:
        return median([m[name].cpu_s for m in measured])

    grpc_1, grpc_n = med("grpc_turn_1"), med(f"grpc_turn_{last}")
    growth = med(f"pydantic_ai_turn_{last}") - med("pydantic_ai_turn_1")
    budget = 1.5 * grpc_1 + growth
    strict_budget = 1.5 * grpc_1 + med("validate_history")
    in_process_budget = 1.5 * med("in_process_turn_1") + growth
    return {
        "turns": last,
        "history_messages": previous.message_history.message_count,
        "history_bytes": len(history_json),
        "runs_per_round": runs,
        "rounds": rounds,
        "cost": {name: summary(measured, name) for name in [*names, "validate_history"]},
        "budget_ms": round(budget * 1e3, 3),
        "budget_strict_ms": round(strict_budget * 1e3, 3),
        "pydantic_ai_growth_ms": round(growth * 1e3, 3),
        "ratios": {
            f"turn_{last}_over_turn_1": median_ratio(measured, f"grpc_turn_{last}", "grpc_turn_1"),
            f"turn_{last}_over_budget": ratio(grpc_n, budget),
            f"turn_{last}_over_strict_budget": ratio(grpc_n, strict_budget),
            f"in_process_turn_{last}_over_turn_1": median_ratio(
                measured, f"in_process_turn_{last}", "in_process_turn_1"
            ),
            f"in_process_turn_{last}_over_budget": ratio(med(f"in_process_turn_{last}"), in_process_budget),
            f"pydantic_ai_turn_{last}_over_turn_1": median_ratio(
                measured, f"pydantic_ai_turn_{last}", "pydantic_ai_turn_1"
            ),
        },
    }
