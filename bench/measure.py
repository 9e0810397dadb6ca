"""Timing helpers: CPU per call, in this process or in the server's, and medians of per-round ratios.

Cost is CPU time, not wall time: on a shared 2-core machine wall time mostly measures the neighbours,
while the CPU a process burns for a given piece of work moves far less. In-process work is timed with
`time.process_time()` (every thread of this process, e.g. pydantic-ai's worker thread for a sync
tool); the server's with `/proc/<pid>/stat` (every thread of the server, including gRPC's). Variants
compared by a ratio are measured in the same round, one after the other, and the ratio reported is
the median of the per-round ratios, so a slow patch of the machine moves both sides together.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .proc import ServerProcess

__all__ = (
    "Cost",
    "cpu_per_call",
    "median",
    "median_ratio",
    "ratio",
    "server_cpu_per_call",
    "summary",
    "sync_cpu_per_call",
)


@dataclass(frozen=True, slots=True)
class Cost:
    """What one call cost on average over a measured batch."""

    cpu_s: float
    """CPU seconds per call (this process, or the server's)."""
    wall_s: float
    """Wall seconds per call, as the caller saw it."""

    def as_json(self) -> dict[str, float]:
        return {"cpu_ms": round(self.cpu_s * 1e3, 4), "wall_ms": round(self.wall_s * 1e3, 4)}


async def cpu_per_call(call: Callable[[], Awaitable[Any]], n: int) -> Cost:
    """Await `call()` `n` times in a row; this process's CPU and the wall time per call."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        await call()
    return Cost((time.process_time() - cpu) / n, (time.perf_counter() - wall) / n)


def sync_cpu_per_call(call: Callable[[], Any], n: int) -> Cost:
    """Call `call()` `n` times in a row; this process's CPU and the wall time per call."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        call()
    return Cost((time.process_time() - cpu) / n, (time.perf_counter() - wall) / n)


async def server_cpu_per_call(server: ServerProcess, call: Callable[[], Awaitable[Any]], n: int) -> Cost:
    """Await `call()` (an RPC) `n` times in a row; the server's CPU and the caller's wall time per call.

    The server's threads are read to the nanosecond, so batches can be short and alternate often.
    """
    cpu, wall = server.thread_cpu(), time.perf_counter()
    for _ in range(n):
        await call()
    return Cost((server.thread_cpu() - cpu) / n, (time.perf_counter() - wall) / n)


def median(values: Sequence[float]) -> float:
    """The median (0.0 for no values)."""
    return statistics.median(values) if values else 0.0


def ratio(top: float, bottom: float) -> float:
    """`top / bottom`, or 0.0 when `bottom` is 0 (a smoke run's batches are too short to tick)."""
    return top / bottom if bottom else 0.0


def median_ratio(rounds: Sequence[dict[str, Cost]], top: str, bottom: str) -> float:
    """Median over rounds of `rounds[i][top].cpu_s / rounds[i][bottom].cpu_s`."""
    return median([ratio(r[top].cpu_s, r[bottom].cpu_s) for r in rounds])


def summary(rounds: Sequence[dict[str, Cost]], name: str) -> dict[str, Any]:
    """The median CPU and wall of one variant over the rounds, with every round's CPU."""
    cpu = [r[name].cpu_s for r in rounds]
    wall = [r[name].wall_s for r in rounds]
    return {
        "cpu_ms": round(median(cpu) * 1e3, 4),
        "wall_ms": round(median(wall) * 1e3, 4),
        "cpu_ms_rounds": [round(c * 1e3, 4) for c in cpu],
    }
