"""(f) Bytes a StreamRun sends with checkpoint candidates on, as the history grows.

Two ways the history grows: across a thread (the `scenario` turn from the states of section d, so
the previous history grows by 6 messages a turn, and each run sends one candidate after each of its
`model_request_started` / `model_request_completed` events), and inside one run (the `rounds` agent
calling its tool N times, so the run itself adds 2 messages a round and sends 2 candidates a round).
Bytes are the serialized size of each `StreamRunResponse`, split into checkpoint candidates, the
terminal result, and everything else. Growth is summarised as the exponent `k` of a least-squares fit
`bytes ~ size^k` in log-log space: 1 is linear, 2 quadratic.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import grpc
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

from .agents import PROMPT

__all__ = ("checkpoint_section", "growth_exponent")


def growth_exponent(xs: list[float], ys: list[float]) -> float:
    """The slope of the least-squares line through `(log x, log y)`."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(points) < 2:
        return 0.0
    mean_x = sum(p[0] for p in points) / len(points)
    mean_y = sum(p[1] for p in points) / len(points)
    var = sum((p[0] - mean_x) ** 2 for p in points)
    if var == 0:
        return 0.0
    return sum((p[0] - mean_x) * (p[1] - mean_y) for p in points) / var


async def _stream_bytes(
    stub: harness_service_pb2_grpc.HarnessServiceAsyncStub, spec: run_pb2.RunSpec
) -> dict[str, int]:
    sizes: Counter[str] = Counter()
    async for response in stub.StreamRun(harness_service_pb2.StreamRunRequest(spec=spec)):
        kind = response.event.WhichOneof("event") or ""
        bucket = kind if kind in ("checkpoint_candidate", "result") else "other"
        sizes[bucket] += response.ByteSize()
        sizes[f"{bucket}_count"] += 1
        if kind == "result":
            sizes["final_history"] = len(response.event.result.state.message_history.data.encode())
            sizes["final_messages"] = response.event.result.state.message_history.message_count
    sizes["total"] = sizes["checkpoint_candidate"] + sizes["result"] + sizes["other"]
    return dict(sizes)


async def checkpoint_section(
    channel: grpc.aio.Channel,
    states: list[state_pb2.HarnessState | None],
    *,
    turns: list[int],
    rounds: list[int],
) -> dict[str, Any]:
    stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
    across: list[dict[str, Any]] = []
    for turn in turns:
        spec = run_pb2.RunSpec(agent="scenario", text=PROMPT, checkpoints=True)
        previous = states[turn - 1]
        if previous is not None:
            spec.previous_state.CopyFrom(previous)
        sizes = await _stream_bytes(stub, spec)
        across.append(
            {
                "turn": turn,
                "previous_messages": previous.message_history.message_count if previous else 0,
                "previous_history_bytes": len(previous.message_history.data.encode()) if previous else 2,
                **sizes,
            }
        )
    within: list[dict[str, Any]] = []
    for count in rounds:
        spec = run_pb2.RunSpec(agent="rounds", text=str(count), checkpoints=True)
        within.append({"rounds": count, **await _stream_bytes(stub, spec)})
    # Across turns the run is the same, so what grows is the previous history; inside a run, the rounds.
    across_exponent = growth_exponent(
        [float(row["final_history"]) for row in across],
        [float(row["checkpoint_candidate"]) for row in across],
    )
    within_exponent = growth_exponent(
        [float(row["rounds"]) for row in within], [float(row["checkpoint_candidate"]) for row in within]
    )
    result_exponent = growth_exponent(
        [float(row["rounds"]) for row in within], [float(row["result"]) for row in within]
    )
    last = within[-1] if within else {}
    return {
        "across_turns": across,
        "within_run": within,
        "ratios": {
            "checkpoint_bytes_exponent_across_turns": across_exponent,
            "checkpoint_bytes_exponent_within_run": within_exponent,
            "result_bytes_exponent_within_run": result_exponent,
            "checkpoint_bytes_over_final_state_bytes_longest_run": (
                last.get("checkpoint_candidate", 0) / last["result"] if last.get("result") else 0.0
            ),
        },
    }
