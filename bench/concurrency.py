"""(e) Many concurrent streaming runs, and what an idle open stream costs the server in memory.

Runs: `levels` (100, then 1 000) StreamRuns of the `scenario` agent started at once from `processes`
client processes (`bench.client runs`), each read to its result: completed, errors (by status),
runs per wall second, server CPU per run, and the server's peak RSS (`VmHWM`) after each level.

Idle streams: in a server that has only warmed up, `idle_runs` StreamRuns of the `idle` agent are
opened and held inside their model request (the stream is open, the run is waiting on its model, as
with a slow provider). Memory per idle stream is the server's RSS once they are all open and idle
minus its RSS before, divided by their number; the clients then cancel them. The same is measured on
the bare grpcio server (`bench.bare`) with streams that send one message and wait: grpc's own floor;
and, with no server at all, for as many idle runs of plain pydantic-ai and of the harness, each in a
process of its own (`bench.idle_reference`): what the run itself holds. The limit an idle stream is
measured against is the sum of its two parts on their own: `idle_stream_memory_over_limit` is the
server's memory per idle stream over pydantic-ai's per idle run plus grpcio's per idle stream.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from typing import Any

from .measure import ratio
from .proc import Helper, ServerProcess, cpu_seconds, rss, start_clients

__all__ = ("concurrency_section", "idle_memory_section")


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def concurrency_section(server: ServerProcess, *, levels: tuple[int, ...], processes: int) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    for level in levels:
        shares = [n for n in _split(level, processes) if n]
        helpers = start_clients("runs", server.address, [{"runs": n} for n in shares])
        cpu, wall = server.cpu(), time.perf_counter()
        for helper in helpers:
            helper.send()
        outcomes: Counter[str] = Counter()
        latency_p50: list[float] = []
        latency_max = 0.0
        for helper in helpers:
            result = helper.result()
            outcomes.update(result["outcomes"])
            latency_p50.append(result["latency_p50_s"])
            latency_max = max(latency_max, result["latency_max_s"])
            helper.close()
        wall_s, cpu_s = time.perf_counter() - wall, server.cpu() - cpu
        completed = outcomes.get("RUN_STATUS_COMPLETED", 0)
        results.append(
            {
                "concurrent_runs": level,
                "completed": completed,
                "errors": level - completed,
                "outcomes": dict(outcomes),
                "wall_s": round(wall_s, 3),
                "runs_per_s": round(ratio(completed, wall_s), 2),
                "server_cpu_ms_per_run": round(cpu_s / level * 1e3, 3),
                "latency_p50_s": round(statistics.median(latency_p50), 3),
                "latency_max_s": round(latency_max, 3),
                "server_peak_rss_mib": round(server.peak_rss() / 2**20, 1),
            }
        )
    return {"levels": results, "processes": processes}


def idle_memory_section(
    *,
    idle_runs: int,
    processes: int,
    warmup_runs: int,
    server: ServerProcess | None = None,
    bare: Helper | None = None,
    settle_s: float = 0.5,
) -> dict[str, Any]:
    """Idle stream memory of a fresh server and a fresh bare server (or of the ones given, for a smoke run)."""
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(ServerProcess())
            (warm,) = start_clients("runs", server.address, [{"runs": warmup_runs}])
            warm.send()
            warm.result()
            warm.close()
        threadline = _idle_memory(
            server.address,
            server.pid,
            idle_runs=idle_runs,
            processes=processes,
            bare=False,
            settle_s=settle_s,
        )
        if bare is None:
            bare = Helper("bench.bare").start()
            stack.callback(bare.close)
            bare.wait_ready()
        floor = _idle_memory(
            bare.ready["address"],
            bare.pid,
            idle_runs=idle_runs,
            processes=processes,
            bare=True,
            settle_s=settle_s,
        )
    reference = {variant: _reference(variant, idle_runs) for variant in ("pydantic_ai", "harness")}
    per_stream = threadline["kib_per_idle_stream"]
    return {
        **threadline,
        "bare_grpc": floor,
        "in_process_kib_per_idle_run": reference,
        "ratios": {
            "idle_stream_memory_over_bare_grpc": ratio(per_stream, floor["kib_per_idle_stream"]),
            "idle_stream_memory_over_pydantic_ai": ratio(per_stream, reference["pydantic_ai"]),
            "idle_stream_memory_over_limit": ratio(
                per_stream, reference["pydantic_ai"] + floor["kib_per_idle_stream"]
            ),
        },
    }


def _reference(variant: str, runs: int) -> float:
    """KiB per idle run of `variant` in a process of its own, with no server (`bench.idle_reference`)."""
    finished = subprocess.run(
        [sys.executable, "-m", "bench.idle_reference", variant, str(runs)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    value: float = json.loads(finished.stdout)["kib_per_idle_run"]
    return value


def _idle_memory(
    address: str, pid: int, *, idle_runs: int, processes: int, bare: bool, settle_s: float
) -> dict[str, Any]:
    """Open `idle_runs` idle streams against `address`; the server's RSS per stream, then cancel them."""
    shares = [n for n in _split(idle_runs, processes) if n]
    options = {"hold_s": 600, "bare": bare}
    helpers = start_clients("idle", address, [{**options, "runs": n} for n in shares])
    _quiet(pid, window_s=settle_s)
    before = _settled_rss(pid, settle_s)
    started = time.perf_counter()
    for helper in helpers:
        helper.send()
    opened = [helper.result() for helper in helpers]
    # Every stream has sent its first event; the runs are idle once the server stops burning CPU
    # (each is then waiting inside its model request).
    _quiet(pid, window_s=settle_s)
    open_after_s = time.perf_counter() - started
    during = _settled_rss(pid, settle_s)
    for helper in helpers:
        helper.send()
    outcomes: Counter[str] = Counter()
    for helper in helpers:
        outcomes.update(helper.result()["outcomes"])
        helper.close()
    _quiet(pid, window_s=settle_s)
    after = _settled_rss(pid, settle_s)
    open_streams = sum(o["open"] for o in opened)
    return {
        "open_streams": open_streams,
        "idle_after_s": round(open_after_s, 3),
        "rss_before_mib": round(before / 2**20, 2),
        "rss_open_mib": round(during / 2**20, 2),
        "rss_after_cancel_mib": round(after / 2**20, 2),
        "kib_per_idle_stream": round((during - before) / open_streams / 1024, 2) if open_streams else 0.0,
        "outcomes_after_cancel": dict(outcomes),
    }


def _quiet(pid: int, *, window_s: float = 0.5, idle_cpu_s: float = 0.03, limit_s: float = 120) -> None:
    """Wait until process `pid` burns less than `idle_cpu_s` of CPU in `window_s`."""
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        cpu = cpu_seconds(pid)
        time.sleep(window_s)
        if cpu_seconds(pid) - cpu < idle_cpu_s:
            return


def _settled_rss(pid: int, settle_s: float) -> int:
    samples = []
    for _ in range(5):
        samples.append(rss(pid))
        time.sleep(settle_s / 5)
    return int(statistics.median(samples))
