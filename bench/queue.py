"""(j) Busy strategies: accepting requests into a thread's queue, handing the thread off, draining a queue.

Each store runs two servers sharing one store (two processes on one SQLite file, or two replicas on one
PostgreSQL database), A and B, both with `--max-queued-runs` above what is measured. Threads use the
`paced` agent: a paced prompt holds the thread (its turn streams for a while), any other prompt is one
quick turn.

- Acceptance (`accept`): a thread held by a paced turn on A; `accepts` `BUSY_STRATEGY_ENQUEUE`
  `StartThreadRun` calls, one after another, alternating A and B: milliseconds per call (p50/p99) and
  acceptances a second. Then `busy_threads` threads held at once, one client per thread enqueueing
  `accepts_each` requests one after another, all clients together: acceptances a second over all.
  After each, the holders are cancelled and the queues drain to their end before anything else runs.
- Draining (`drain`): a thread held by a paced turn with `queue` quick requests queued behind it; the
  holder is cancelled, and the queue runs by itself (each terminal commit hands off to the next):
  runs a second from the cancel to the last request's result, over the same number of the same quick
  requests sent to a free thread of A by one client that waits for each (`RunThread`):
  `drain_over_one_by_one` (≥ 0.9 is the target: a queue must not be slower than a waiting client), the
  median of `drain_rounds` rounds, each running both in alternating order.
- Hand-off (`hand_off`): for the drained queue, each request's `run_started` (the holder's clock,
  from its log) minus its predecessor's terminal checkpoint (the store's clock, the same host): the
  latency of a hand-off on one replica (p50/p99). Across replicas: `across` times, a thread held by an
  attached paced turn on A with one quick request queued, A is sent SIGTERM (its drain cancels the
  turn, whose terminal commit hands off; A, draining, starts nothing), so B starts it: its sweeper
  woken by the note on PostgreSQL, at its next pass (`--sweep-interval`, 1 s) on a shared SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import time
import uuid
from dataclasses import dataclass
from typing import Any

import grpc
from threadline.v1 import run_pb2, thread_pb2, thread_service_pb2, thread_service_pb2_grpc

from .measure import median, ratio
from .proc import ServerProcess
from .thread_store import _percentile
from .wire import CHANNEL_OPTIONS, paced_prompt

__all__ = ("QueueSizes", "queue_store_section")


def summary(values: list[float]) -> dict[str, float]:
    """p50 and p99 of `values` (milliseconds), and how many."""
    return {
        "p50": round(_percentile(values, 50), 2),
        "p99": round(_percentile(values, 99), 2),
        "samples": len(values),
    }


ts = thread_service_pb2
_HOLD = paced_prompt(4000, 10)
"""A turn that holds its thread for about 40 s (cancelled once measured)."""
_QUICK = "go"
"""One undelayed delta: a quick turn."""


@dataclass(frozen=True)
class QueueSizes:
    accepts: int
    busy_threads: int
    accepts_each: int
    queue: int
    across: int
    drain_rounds: int


class _Threads:
    """The calls (j) makes on one server."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = thread_service_pb2_grpc.ThreadServiceStub(channel)

    async def create(self) -> str:
        made = await self.stub.CreateThread(ts.CreateThreadRequest(agent="paced"))
        return made.thread.thread_id

    async def start(self, thread_id: str, text: str, strategy: int = 0, request_id: str = "") -> Any:
        spec = ts.ThreadRunSpec(
            thread_id=thread_id, request_id=request_id or uuid.uuid4().hex, text=text, busy_strategy=strategy
        )
        return await self.stub.StartThreadRun(ts.StartThreadRunRequest(spec=spec))

    async def hold(self, thread_id: str) -> str:
        """Start a paced turn in the background; its run ID once it holds the thread."""
        started = await self.start(thread_id, _HOLD)
        assert started.status == thread_pb2.THREAD_RUN_STATUS_RUNNING, started
        return str(started.run_id)

    async def enqueue(self, thread_id: str, request_id: str = "") -> float:
        """One ENQUEUE acceptance; its milliseconds."""
        began = time.perf_counter()
        answer = await self.start(thread_id, _QUICK, ts.BUSY_STRATEGY_ENQUEUE, request_id)
        assert answer.status == thread_pb2.THREAD_RUN_STATUS_QUEUED, answer
        return (time.perf_counter() - began) * 1000

    async def result(self, thread_id: str, request_id: str) -> run_pb2.RunResult:
        """The request's result, by joining it (waiting while it is queued)."""
        call = self.stub.JoinThreadRun(ts.JoinThreadRunRequest(thread_id=thread_id, request_id=request_id))
        last: Any = None
        async for response in call:
            events = list(response.events) or [response.event]
            last = events[-1]
        assert last is not None and last.WhichOneof("event") == "result", last
        return last.result

    async def started_at(self, thread_id: str, request_id: str) -> float:
        """When the request's attempt started (`run_started.occurred_at`, the holder's clock)."""
        call = self.stub.JoinThreadRun(ts.JoinThreadRunRequest(thread_id=thread_id, request_id=request_id))
        async for response in call:
            first = (list(response.events) or [response.event])[0]
            call.cancel()
            return float(first.occurred_at.seconds) + first.occurred_at.nanos / 1e9
        raise AssertionError("no run_started")

    async def ended_at(self, thread_id: str) -> dict[str, float]:
        """Each request's last checkpoint's time (the store's clock): its terminal commit."""
        listed = await self.stub.ListCheckpoints(
            ts.ListCheckpointsRequest(thread_id=thread_id, page_size=1000)
        )
        ends: dict[str, float] = {}
        for checkpoint in listed.checkpoints:  # newest first: the first seen is a request's last
            if checkpoint.request_id and checkpoint.request_id not in ends:
                ends[checkpoint.request_id] = (
                    checkpoint.create_time.seconds + checkpoint.create_time.nanos / 1e9
                )
        return ends

    async def cancel(self, thread_id: str, run_id: str) -> None:
        await self.stub.CancelThreadRun(ts.CancelThreadRunRequest(thread_id=thread_id, run_id=run_id))


async def _accept(a: _Threads, b: _Threads, sizes: QueueSizes) -> dict[str, Any]:
    thread_id = await a.create()
    holder = await a.hold(thread_id)
    began = time.perf_counter()
    latencies = [await (a, b)[i % 2].enqueue(thread_id, f"a{i:04d}") for i in range(sizes.accepts)]
    one = {"per_s": round(sizes.accepts / (time.perf_counter() - began), 1), "ms": summary(latencies)}
    await a.cancel(thread_id, holder)
    await a.result(thread_id, f"a{sizes.accepts - 1:04d}")  # drained: nothing left running after
    threads = [await a.create() for _ in range(sizes.busy_threads)]
    holders = [await a.hold(thread) for thread in threads]

    async def client(index: int, thread: str) -> list[float]:
        return [await (a, b)[index % 2].enqueue(thread, f"b{n:04d}") for n in range(sizes.accepts_each)]

    began = time.perf_counter()
    per_client = await asyncio.gather(*(client(i, thread) for i, thread in enumerate(threads)))
    elapsed = time.perf_counter() - began
    for thread, run_id in zip(threads, holders, strict=True):
        await a.cancel(thread, run_id)
    await asyncio.gather(*(a.result(thread, f"b{sizes.accepts_each - 1:04d}") for thread in threads))
    many = {
        "threads": sizes.busy_threads,
        "per_s": round(sizes.busy_threads * sizes.accepts_each / elapsed, 1),
        "ms": summary([ms for each in per_client for ms in each]),
    }
    return {"one_thread": one, "busy_threads": many}


async def _drain(a: _Threads, b: _Threads, sizes: QueueSizes) -> tuple[dict[str, Any], dict[str, Any]]:
    """`drain_rounds` rounds, each a queue draining and the same requests one by one, in alternating
    order: one drain of 100 spreads by ±15 % from run to run, so the ratio is the median of the rounds'."""
    rounds: list[dict[str, float]] = []
    gaps: list[float] = []
    for index in range(sizes.drain_rounds):
        if index % 2:
            waited = await _one_by_one(a, sizes.queue)
            drained = await _queue_drained(a, b, sizes.queue, gaps)
        else:
            drained = await _queue_drained(a, b, sizes.queue, gaps)
            waited = await _one_by_one(a, sizes.queue)
        rounds.append(
            {
                "queue_runs_per_s": round(sizes.queue / drained, 1),
                "one_by_one_runs_per_s": round(sizes.queue / waited, 1),
                "drain_over_one_by_one": round(ratio(waited, drained), 4),
            }
        )
    drain = {
        "requests": sizes.queue,
        **{key: median([each[key] for each in rounds]) for key in rounds[0]},
        "rounds": rounds,
    }
    return drain, summary(gaps)


async def _queue_drained(a: _Threads, b: _Threads, queue: int, gaps: list[float]) -> float:
    """Seconds from cancelling a held thread's turn to the last of `queue` queued requests' result; each
    hand-off's gap (ms) is added to `gaps`."""
    thread_id = await a.create()
    holder = await a.hold(thread_id)
    order = [f"q{i:03d}" for i in range(queue)]
    for i, request_id in enumerate(order):
        await (a, b)[i % 2].enqueue(thread_id, request_id)
    began = time.perf_counter()
    await a.cancel(thread_id, holder)
    last = await a.result(thread_id, order[-1])
    drained = time.perf_counter() - began
    assert last.status == run_pb2.RUN_STATUS_COMPLETED, last
    ends = await a.ended_at(thread_id)
    for before, after in itertools.pairwise(order):
        gaps.append((await a.started_at(thread_id, after) - ends[before]) * 1000)
    return drained


async def _one_by_one(a: _Threads, queue: int) -> float:
    """Seconds for one client to send `queue` quick requests to a free thread, waiting for each."""
    free = await a.create()
    began = time.perf_counter()
    for _ in range(queue):
        spec = ts.ThreadRunSpec(thread_id=free, request_id=uuid.uuid4().hex, text=_QUICK)
        await a.stub.RunThread(ts.RunThreadRequest(spec=spec))
    return time.perf_counter() - began


async def _across(stores: tuple[str, str], sizes: QueueSizes, store_args: tuple[str, ...]) -> dict[str, Any]:
    """A hand-off to the other replica: the finisher drains (SIGTERM) and starts nothing."""
    gaps: list[float] = []
    with ServerProcess(store=stores[1], args=store_args) as other:
        async with grpc.aio.insecure_channel(other.address, options=CHANNEL_OPTIONS) as channel_b:
            b = _Threads(channel_b)
            for _ in range(sizes.across):
                with ServerProcess(store=stores[0], args=(*store_args, "--drain-grace", "30")) as first:
                    async with grpc.aio.insecure_channel(first.address, options=CHANNEL_OPTIONS) as channel_a:
                        a = _Threads(channel_a)
                        thread_id = await a.create()
                        spec = ts.ThreadRunSpec(thread_id=thread_id, request_id="held", text=_HOLD)
                        call = a.stub.StreamThreadRun(ts.StreamThreadRunRequest(spec=spec))
                        await call.read()  # run_started: it holds the thread
                        await b.enqueue(thread_id, "next")
                        assert first.process is not None
                        first.process.send_signal(signal.SIGTERM)
                        result = await b.result(thread_id, "next")
                        assert result.status == run_pb2.RUN_STATUS_COMPLETED, result
                        ends = await b.ended_at(thread_id)
                        gaps.append((await b.started_at(thread_id, "next") - ends["held"]) * 1000)
                        with contextlib.suppress(grpc.aio.AioRpcError):
                            await call.read()
    return summary(gaps)


async def queue_store_section(kind: str, stores: tuple[str, str], sizes: QueueSizes) -> dict[str, Any]:
    """(j) on one store (`kind`): two servers on `stores`."""
    args = ("--max-queued-runs", str(max(sizes.accepts, sizes.queue, sizes.accepts_each) + 8))
    section: dict[str, Any] = {}
    with (
        ServerProcess(store=stores[0], args=args) as first,
        ServerProcess(store=stores[1], args=args) as second,
    ):
        async with (
            grpc.aio.insecure_channel(first.address, options=CHANNEL_OPTIONS) as channel_a,
            grpc.aio.insecure_channel(second.address, options=CHANNEL_OPTIONS) as channel_b,
        ):
            a, b = _Threads(channel_a), _Threads(channel_b)
            section["accept"] = await _accept(a, b, sizes)
            section["drain"], same = await _drain(a, b, sizes)
    section["hand_off_ms"] = {"same_replica": same, "across_replicas": await _across(stores, sizes, args)}
    hand_off = section["hand_off_ms"]
    section["ratios"] = {
        f"{kind}_queue_drain_over_one_by_one": round(section["drain"]["drain_over_one_by_one"], 4),
        f"{kind}_enqueue_accepts_per_s_one_thread": section["accept"]["one_thread"]["per_s"],
        f"{kind}_enqueue_accepts_per_s_busy_threads": section["accept"]["busy_threads"]["per_s"],
        f"{kind}_enqueue_accept_p99_ms": section["accept"]["one_thread"]["ms"]["p99"],
        **{
            f"{kind}_hand_off_{q}_ms_{where}": hand_off[f"{where}_replica{'s' if where == 'across' else ''}"][
                q
            ]
            for where in ("same", "across")
            for q in ("p50", "p99")
        },
    }
    return section
