"""(f) Bytes a StreamRun sends with checkpoint candidates on, as the history grows.

Two ways the history grows: across a thread (the `scenario` turn from the states of section d, so
the previous history grows by 6 messages a turn, and each run sends one candidate after each of its
`model_request_started` / `model_request_completed` events), and inside one run (the `rounds` agent
calling its tool N times, so the run itself adds 2 messages a round and sends 2 candidates a round).
Bytes are the serialized size of each `StreamRunResponse`, split into checkpoint candidates, the
terminal result, and everything else, for both `CheckpointForm`s: FULL (every candidate carries the
whole state; the default) and DELTA (the history as an edit of the previous candidate's, rebuilt and
checked against its digest here as a host would). Growth is summarised as the exponent `k` of a
least-squares fit `bytes ~ size^k` in log-log space: 1 is linear, 2 quadratic, 0 flat. Ratios without
a suffix are the DELTA form's; `_full` ones the FULL form's.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from typing import Any

import grpc
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

from .measure import ratio
from .thread import turn_spec

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
    base = spec.previous_state.message_history.data.encode() if spec.HasField("previous_state") else b"[]"
    sizes: Counter[str] = Counter()
    async for response in stub.StreamRun(harness_service_pb2.StreamRunRequest(spec=spec)):
        event = response.event
        kind = event.WhichOneof("event") or ""
        bucket = kind if kind in ("checkpoint_candidate", "result") else "other"
        sizes[bucket] += response.ByteSize()
        sizes[f"{bucket}_count"] += 1
        if kind == "checkpoint_candidate" and event.checkpoint_candidate.HasField("history_delta"):
            # Rebuild as a host would, so the bytes counted are bytes that really carry the state.
            delta = event.checkpoint_candidate.history_delta
            base = base[: delta.keep_bytes] + delta.append.encode()
            assert hashlib.sha256(base).digest() == event.checkpoint_candidate.state.message_history.sha256
        if kind == "result":
            sizes["final_history"] = len(event.result.state.message_history.data.encode())
            sizes["final_messages"] = event.result.state.message_history.message_count
    sizes["total"] = sizes["checkpoint_candidate"] + sizes["result"] + sizes["other"]
    return dict(sizes)


_FORMS = {"full": run_pb2.CHECKPOINT_FORM_FULL, "delta": run_pb2.CHECKPOINT_FORM_DELTA}


async def checkpoint_section(
    channel: grpc.aio.Channel,
    states: list[state_pb2.HarnessState | None],
    *,
    turns: list[int],
    rounds: list[int],
) -> dict[str, Any]:
    stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
    forms: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    for form, value in _FORMS.items():
        across: list[dict[str, Any]] = []
        for turn in turns:
            previous = states[turn - 1]
            sizes = await _stream_bytes(stub, turn_spec(previous, checkpoints=True, checkpoint_form=value))
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
            spec = run_pb2.RunSpec(agent="rounds", text=str(count), checkpoints=True, checkpoint_form=value)
            within.append({"rounds": count, **await _stream_bytes(stub, spec)})
        forms[form] = {"across_turns": across, "within_run": within}
        suffix = "" if form == "delta" else "_full"
        # Across turns the run is the same, so what grows is the history (measured at the run's end,
        # so turn 1's is not an empty `[]`); inside a run, the rounds.
        history = [float(row["final_history"]) for row in across]
        ratios[f"checkpoint_bytes_exponent_across_turns{suffix}"] = growth_exponent(
            history, [float(row["checkpoint_candidate"]) for row in across]
        )
        ratios[f"stream_bytes_exponent_across_turns{suffix}"] = growth_exponent(
            history, [float(row["total"]) for row in across]
        )
        ratios[f"checkpoint_bytes_exponent_within_run{suffix}"] = growth_exponent(
            [float(row["rounds"]) for row in within], [float(row["checkpoint_candidate"]) for row in within]
        )
        last = within[-1] if within else {}
        ratios[f"checkpoint_bytes_over_final_state_bytes_longest_run{suffix}"] = ratio(
            last.get("checkpoint_candidate", 0), last.get("result", 0)
        )
    return {"forms": forms, "ratios": ratios}
