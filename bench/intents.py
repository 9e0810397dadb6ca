"""(k) What dispatch intents cost (LIVE §5.7): server CPU and store transactions per turn, intents on and off.

Two servers on SQLite files of their own, one with `--dispatch-intents on` (the default) and one with
`off`, serve the `fanout` agent; the same turns run on both in alternating rounds:
- a normal turn whose one response calls 1, 2 or 4 side-effecting tools at once (`fanout`, prompt "1",
  "2", "4"); off, the same tools run as plain tools with no intent recorded;
- a resume turn approving one call (prompt `approve`, then its answers).

CPU is each server's own (its threads' CPU time across the round's turns, `bench.proc`), the ratio the
median of per-round ratios (`bench.measure`). Transactions are each server's durable write transactions
(`threadline_store_durable_writes` on its metrics port) across the turn: the design's budget is +0 in a
normal turn (the response's commit carries its first dispatch) and +1 in a resume (its approved calls
dispatch before any commit). `intent_cost_per_call_ms` is the server CPU intents add per
side-effecting call: the median over rounds of (CPU on − CPU off) / 4 for the 4-call turn (the 1- and
2-call figures beside it), held against the 1 ms budget. Also reported: wall time per turn, and the delay between a tool's result
and the `thread_committed` after it, which is the barrier's commit before the next model request.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

import grpc
from threadline.v1 import deferred_pb2, run_pb2, thread_service_pb2, thread_service_pb2_grpc

from .measure import ratio
from .proc import ServerProcess, free_port, gauge
from .wire import CHANNEL_OPTIONS

__all__ = ("IntentSizes", "intents_section")

ts = thread_service_pb2


@dataclass(frozen=True)
class IntentSizes:
    rounds: int = 21
    turns: int = 20
    """Turns of each kind per round and server."""


def _writes(port: int) -> float:
    return gauge(port, "threadline_store_durable_writes")


@dataclass
class _Server:
    process: ServerProcess
    metrics: int
    stub: Any = None

    async def turn(self, thread_id: str, **fields: Any) -> tuple[run_pb2.RunResult, list[float]]:
        """One turn, streamed; its result and the delays from each tool result to the next commit."""
        call = self.stub.StreamThreadRun(
            ts.StreamThreadRunRequest(spec=ts.ThreadRunSpec(thread_id=thread_id, **fields))
        )
        result: run_pb2.RunResult | None = None
        delays: list[float] = []
        result_at: float | None = None
        async for response in call:
            events = list(response.events) if len(response.events) else [response.event]
            for event in events:
                kind = event.WhichOneof("event")
                if kind == "tool_result" and result_at is None:
                    result_at = time.perf_counter()
                elif kind == "thread_committed" and result_at is not None:
                    delays.append(time.perf_counter() - result_at)
                    result_at = None
                elif kind == "result":
                    result = event.result
        assert result is not None
        return result, delays


async def _round(server: _Server, sizes: IntentSizes) -> dict[str, Any]:
    """`sizes.turns` turns of each kind on `server`: CPU, wall and transactions per turn."""
    out: dict[str, Any] = {}
    delays: list[float] = []
    for kind in ("1", "2", "4", "resume"):
        thread_id = (await server.stub.CreateThread(ts.CreateThreadRequest(agent="fanout"))).thread.thread_id
        cpu = wall = writes = 0.0
        for _ in range(sizes.turns):
            if kind == "resume":
                asked, _ = await server.turn(thread_id, text="approve")
                assert asked.status == run_pb2.RUN_STATUS_SUSPENDED, asked
                [approval] = asked.deferred.approvals
                answers = deferred_pb2.DeferredToolResults(
                    approvals=[
                        deferred_pb2.ApprovalResult(
                            tool_call_id=approval.tool_call_id, approved=deferred_pb2.ToolApproved()
                        )
                    ]
                )
                fields: dict[str, Any] = {"answers": answers}
            else:
                fields = {"text": kind}
            before_w, before_c, before_t = (
                _writes(server.metrics),
                server.process.thread_cpu(),
                time.perf_counter(),
            )
            done, seen = await server.turn(thread_id, **fields)
            wall += time.perf_counter() - before_t
            cpu += server.process.thread_cpu() - before_c
            writes += _writes(server.metrics) - before_w
            assert done.status == run_pb2.RUN_STATUS_COMPLETED, done
            delays.extend(seen)
        out[kind] = {"cpu_s": cpu / sizes.turns, "wall_s": wall / sizes.turns, "writes": writes / sizes.turns}
    out["delays"] = delays
    return out


async def _measure(on: _Server, off: _Server, sizes: IntentSizes) -> dict[str, Any]:
    rounds: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for index in range(sizes.rounds):
        first, second = (on, off) if index % 2 == 0 else (off, on)
        a = await _round(first, sizes)
        b = await _round(second, sizes)
        rounds.append((a, b) if first is on else (b, a))
    result: dict[str, Any] = {}
    kinds = (("1", "turn_1_call"), ("2", "turn_2_calls"), ("4", "turn_4_calls"), ("resume", "resume_turn"))
    for kind, name in kinds:
        result[f"{name}_cpu_on_over_off"] = round(
            statistics.median(ratio(r_on[kind]["cpu_s"], r_off[kind]["cpu_s"]) for r_on, r_off in rounds), 3
        )
        result[f"{name}_transactions_on"] = statistics.median(r_on[kind]["writes"] for r_on, _ in rounds)
        result[f"{name}_transactions_off"] = statistics.median(r_off[kind]["writes"] for _, r_off in rounds)
        result[f"{name}_wall_ms_on"] = round(statistics.median(r[kind]["wall_s"] for r, _ in rounds) * 1e3, 3)
        result[f"{name}_wall_ms_off"] = round(
            statistics.median(r[kind]["wall_s"] for _, r in rounds) * 1e3, 3
        )
    for calls in (1, 2, 4):
        extra = [(r_on[str(calls)]["cpu_s"] - r_off[str(calls)]["cpu_s"]) / calls for r_on, r_off in rounds]
        result[f"intent_cost_per_call_ms_{calls}"] = round(statistics.median(extra) * 1e3, 3)
    result["intent_cost_per_call_ms"] = result["intent_cost_per_call_ms_4"]
    on_delays = [d for r_on, _ in rounds for d in r_on["delays"]]
    off_delays = [d for _, r_off in rounds for d in r_off["delays"]]
    result["result_to_commit_ms_on"] = round(statistics.median(on_delays) * 1e3, 3) if on_delays else 0.0
    result["result_to_commit_ms_off"] = round(statistics.median(off_delays) * 1e3, 3) if off_delays else 0.0
    return result


def intents_section(stores: tuple[str, str], sizes: IntentSizes) -> dict[str, Any]:
    """(k) on two SQLite stores (`sqlite:PATH` each): intents on against off."""
    ports = (free_port(), free_port())
    on = ServerProcess(store=stores[0], args=("--metrics-port", str(ports[0])))
    off = ServerProcess(store=stores[1], args=("--metrics-port", str(ports[1]), "--dispatch-intents", "off"))
    with on, off:

        async def main() -> dict[str, Any]:
            async with (
                grpc.aio.insecure_channel(on.address, options=CHANNEL_OPTIONS) as a,
                grpc.aio.insecure_channel(off.address, options=CHANNEL_OPTIONS) as b,
            ):
                servers = (
                    _Server(on, ports[0], thread_service_pb2_grpc.ThreadServiceStub(a)),
                    _Server(off, ports[1], thread_service_pb2_grpc.ThreadServiceStub(b)),
                )
                return await _measure(*servers, sizes)

        return asyncio.run(main())
