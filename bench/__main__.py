"""`python -m bench`: every section, one table, one JSON file.

    .venv/bin/python -m bench                      # full sizes -> bench/results/latest.json
    .venv/bin/python -m bench --smoke --out DIR/x.json   # tiny sizes (the test suite's smoke run)

Sections: (a) one run four ways, (b) streamed deltas/s against bare grpcio, and StreamRun's CPU per
delta against its limit (pydantic-ai in-process + bare grpcio at the same packing), (c) envelope
encode + decode per message, (d) turn N of a thread against turn 1, (e) concurrent streaming runs,
and idle stream memory against its limit (pydantic-ai's idle run + grpcio's idle stream), (f)
checkpoint bytes as the history grows, (g) `ThreadService` turns 1, 50 and 500 of one thread beside
`HarnessService`, (h) the thread store's commits/s and latency on SQLite and on PostgreSQL (one and two
replicas), SQLite's bytes written per turn, and each store's cost per turn against bare transactions
writing the same rows (g and h on servers of their own, `--store sqlite:` a temporary file; h's
PostgreSQL a throwaway cluster of `tests.pgcluster`, so run it from the repo root), (i) live runs on
SQLite (two servers on one file) and PostgreSQL (two replicas on one database): `JoinThreadRun`'s time to
its first event and a join's lag, the event log's CPU, commits/s and bytes, log on against off (a third
server, `--event-log off`), and memory per idle `WatchThread` watcher, (j) busy strategies on both stores
(two servers each): ENQUEUE acceptances/s, a queue of quick requests draining by itself against one
client sending them one by one, and hand-off latency on one and across replicas, (k) dispatch intents (two
servers on SQLite files, `--dispatch-intents on` and `off`): server CPU and durable write transactions
per turn with 1 and 4 side-effecting calls and per resume turn, (l) the HTTP port (`--http-port`): a run
through Connect and gRPC-Web against gRPC, server CPU. Each section's module docstring says how
it measures; `bench.measure` says why cost is CPU time and ratios are medians of per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

from .bare_store import store_cost_section
from .checkpoints import checkpoint_section
from .concurrency import concurrency_section, idle_memory_section
from .envelope import envelope_section
from .http import http_section
from .intents import IntentSizes, intents_section
from .live import LiveSizes, LogReader, live_store_section
from .measure import ratio
from .proc import MAX_CONCURRENT_RUNS, Helper, ServerProcess, free_port, machine
from .queue import QueueSizes, queue_store_section
from .runs import run_section
from .stream_rate import stream_section
from .thread import build_thread, thread_section
from .thread_store import postgresql_levels, thread_store_section
from .threads import threads_section
from .wire import CHANNEL_OPTIONS

LATEST = Path(__file__).resolve().parent / "results" / "latest.json"
"""Where a full run writes its results (committed with docs/performance.md's numbers)."""

SECTIONS = "abcdefghijkl"


@dataclass(frozen=True)
class Sizes:
    """How much each section does; `SMOKE` only proves the code paths and the JSON shape."""

    runs_per_round: int = 5
    rounds: int = 49
    stream_deltas: int = 2000
    stream_processes: int = 2
    stream_streams: int = 2
    stream_repeat: int = 1
    stream_rounds: int = 5
    envelope_sizes: tuple[int, ...] = (10, 1000, 10000)
    envelope_rounds: int = 15
    envelope_batch_s: float = 0.15
    turns: int = 50
    turn_runs: int = 4
    turn_rounds: int = 21
    concurrency: tuple[int, ...] = (100, 1000)
    client_processes: int = 2
    idle_streams: int = 1000
    checkpoint_turns: tuple[int, ...] = (1, 10, 20, 30, 40, 50)
    checkpoint_rounds: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    thread_levels: tuple[int, ...] = (50, 500)
    thread_rounds: int = 9
    store_levels: tuple[int, ...] = (1, 64)
    store_threads: int = 64
    store_turns: int = 3
    store_bytes_turns: int = 30
    store_cost_turns: int = 100
    live_replay_events: int = 2000
    live_replay_joins: int = 50
    live_deltas: int = 200
    live_delta_ms: float = 10.0
    live_rounds: int = 10
    live_cpu_rounds: int = 11
    live_cpu_turns: int = 4
    live_side_runs: int = 64
    live_side_deltas: int = 60
    live_side_delta_ms: float = 50.0
    live_side_rounds: int = 7
    live_side_alone_s: float = 8.0
    live_watchers: int = 1000
    queue_accepts: int = 200
    queue_busy_threads: int = 64
    queue_accepts_each: int = 10
    queue_length: int = 100
    queue_across: int = 8
    queue_drain_rounds: int = 7
    intent_rounds: int = 21
    intent_turns: int = 20
    http_runs_per_round: int = 5
    http_rounds: int = 25


SMOKE = Sizes(
    runs_per_round=1,
    rounds=1,
    stream_deltas=20,
    stream_processes=1,
    stream_streams=1,
    stream_repeat=1,
    stream_rounds=1,
    envelope_sizes=(4, 12),
    envelope_rounds=1,
    envelope_batch_s=0.0,
    turns=3,
    turn_runs=1,
    turn_rounds=1,
    concurrency=(2, 4),
    client_processes=1,
    idle_streams=3,
    checkpoint_turns=(1, 2, 3),
    checkpoint_rounds=(1, 2),
    thread_levels=(2, 3),
    thread_rounds=1,
    store_levels=(1, 2),
    store_threads=2,
    store_turns=1,
    store_bytes_turns=2,
    store_cost_turns=2,
    live_replay_events=20,
    live_replay_joins=1,
    live_deltas=10,
    live_delta_ms=10.0,
    live_rounds=1,
    live_cpu_rounds=1,
    live_cpu_turns=1,
    live_side_runs=2,
    live_side_deltas=10,
    live_side_delta_ms=10.0,
    live_side_rounds=1,
    live_side_alone_s=0.3,
    live_watchers=3,
    queue_accepts=3,
    queue_busy_threads=2,
    queue_accepts_each=2,
    queue_length=3,
    queue_across=1,
    queue_drain_rounds=1,
    intent_rounds=1,
    intent_turns=1,
    http_runs_per_round=1,
    http_rounds=1,
)

# name -> (comparison, threshold, what it is)
TARGETS: dict[str, tuple[str, float, str]] = {
    "in_process_over_pydantic_ai": (
        "<=",
        1.5,
        "(a) harness in-process / pydantic-ai run_stream_events, CPU per run",
    ),
    "run_over_pydantic_ai": ("<=", 2.0, "(a) gRPC Run (server CPU) / pydantic-ai"),
    "stream_run_over_pydantic_ai": ("<=", 2.0, "(a) gRPC StreamRun (server CPU) / pydantic-ai"),
    "stream_run_over_in_process": ("<=", 1.25, "(a) gRPC StreamRun (server CPU) / harness in-process"),
    "stream_run_over_bare_grpc": (
        ">=",
        0.6,
        "(b) StreamRun text deltas / bare grpcio messages, per server CPU-second",
    ),
    "stream_run_over_limit": (
        "<=",
        1.1,
        "(b) StreamRun server CPU per delta / (pydantic-ai in-process + bare grpcio at StreamRun's packing)",
    ),
    "envelope_protobuf_over_pydantic_ai": (
        "<=",
        1.1,
        "(c) protobuf envelope enc+dec / pydantic-ai round trip (worst size)",
    ),
    "envelope_json_over_pydantic_ai": (
        "<=",
        1.1,
        "(c) JSON envelope enc+dec / pydantic-ai round trip (worst size)",
    ),
    "envelope_protobuf_per_message_growth": (
        "<=",
        1.1,
        "(c) protobuf envelope us/message, largest / smallest size",
    ),
    "turn_last_over_budget": (
        "<=",
        1.0,
        "(d) last turn / (1.5 x turn 1 + pydantic-ai's own growth), gRPC Run",
    ),
    "concurrent_runs_errors": ("<=", 0, "(e) errors among the largest level of concurrent streaming runs"),
    "kib_per_idle_stream": ("<=", 64, "(e) server memory per idle open stream, KiB"),
    "idle_stream_memory_over_limit": (
        "<=",
        1.0,
        "(e) server memory per idle open stream / (pydantic-ai idle run + grpcio idle stream)",
    ),
    "checkpoint_bytes_exponent_within_run": (
        "<=",
        1.2,
        "(f) k of checkpoint bytes ~ rounds^k inside one run (CHECKPOINT_FORM_DELTA)",
    ),
    "stream_bytes_exponent_across_turns": (
        "<=",
        1.2,
        "(f) k of all bytes a run streams ~ history^k across turns (CHECKPOINT_FORM_DELTA)",
    ),
    "thread_turn_last_over_turn_1": (
        "<=",
        1.3,
        "(g) ThreadService turn 500 / turn 1, server CPU, head cached (SQLite)",
    ),
    "sqlite_bytes_over_added_worst_turn": (
        "<=",
        2.0,
        "(h) SQLite bytes written / bytes the turn added to the state's JSON, worst turn",
    ),
    "sqlite_store_over_bare_per_turn": (
        "<=",
        1.5,
        "(h) SQLite: a turn's store calls / bare transactions writing the same rows, wall time",
    ),
    "postgresql_store_over_bare_per_turn": (
        "<=",
        1.5,
        "(h) PostgreSQL: a turn's store calls / bare transactions writing the same rows, wall time",
    ),
}
TARGETS["thread_turn_1_over_harness_turn_1"] = (
    "<=",
    1.3,
    "(g) ThreadService turn 1 / the same turn through HarnessService, server CPU (worst level)",
)
TARGETS["sqlite_commits_per_s_many_over_one"] = (
    ">=",
    4.0,
    "(h) SQLite commits per second, 64 threads at once / one at a time (group commit)",
)
TARGETS["sqlite_run_thread_p99_many_over_one"] = (
    "<=",
    10.0,
    "(h) SQLite RunThread p99 latency, 64 threads at once / one at a time",
)
TARGETS["connect_run_over_grpc_run"] = (
    "<=",
    1.3,
    "(l) Run over Connect (binary, HTTP port) / over gRPC, server CPU per run",
)
TARGETS["connect_stream_over_grpc_stream"] = (
    "<=",
    1.3,
    "(l) StreamRun over Connect (binary, HTTP port) / over gRPC, server CPU per run",
)
TARGETS["intent_cost_per_call_ms"] = (
    "<=",
    1.0,
    "(k) server CPU dispatch intents add per side-effecting call, ms (4-call turn)",
)
for _turn, _what in (
    ("turn_1_call", "1 side-effecting call"),
    ("turn_2_calls", "2 parallel side-effecting calls"),
    ("turn_4_calls", "4 parallel side-effecting calls"),
):
    TARGETS[f"intents_{_turn}_cpu_on_over_off"] = (
        "<=",
        1.10,
        f"(k) server CPU per thread turn with {_what}, --dispatch-intents on / off",
    )
    TARGETS[f"intents_{_turn}_extra_transactions"] = (
        "<=",
        0.0,
        f"(k) durable write transactions per normal turn with {_what}, intents on - off",
    )
TARGETS["intents_resume_turn_extra_transactions"] = (
    "<=",
    1.0,
    "(k) durable write transactions per resume turn approving one call, intents on - off",
)
for _store, _label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL")):
    TARGETS[f"{_store}_queue_drain_over_one_by_one"] = (
        ">=",
        0.9,
        f"(j) {_label}: runs a second of a queue of quick requests draining by itself / one client waiting for each",
    )
    TARGETS[f"{_store}_log_on_over_off_cpu_per_turn"] = (
        "<=",
        1.05,
        f"(i) {_label}: server CPU per paced streamed thread turn, --event-log on / off",
    )
    TARGETS[f"{_store}_log_on_over_off_commits_per_s"] = (
        ">=",
        0.9,
        f"(i) {_label}: (h)'s commits/s at 64 threads beside 64 paced streaming runs, log on / off",
    )
    TARGETS[f"{_store}_log_bytes_over_streamed"] = (
        "<=",
        1.1,
        f"(i) {_label}: event log bytes per paced turn / bytes streamed to its first caller",
    )


def _met(comparison: str, value: float, threshold: float) -> bool:
    return value <= threshold if comparison == "<=" else value >= threshold


async def _runs_section(
    stack: contextlib.ExitStack, server: ServerProcess, channel: grpc.aio.Channel, sizes: Sizes
) -> dict[str, Any]:
    """(a), with a second server that has metrics and traces on (exporting to `bench.otlp_sink`)."""
    sink = Helper("bench.otlp_sink").start()
    stack.callback(sink.close)
    endpoint = f"http://127.0.0.1:{sink.wait_ready()['port']}"
    observed = stack.enter_context(ServerProcess(args=("--metrics-port", "0", "--otlp-endpoint", endpoint)))
    async with grpc.aio.insecure_channel(observed.address, options=CHANNEL_OPTIONS) as observed_channel:
        section = await run_section(
            server, channel, (observed, observed_channel), runs=sizes.runs_per_round, rounds=sizes.rounds
        )
    observed.__exit__()  # flushes its last spans to the sink
    assert sink.process is not None and sink.process.stdin is not None
    sink.process.stdin.close()  # the sink answers with its count and exits
    section["spans_exported"] = sink.result()["spans"]
    return section


async def _server_sections(sizes: Sizes, wanted: str, smoke: bool, report: dict[str, Any]) -> None:
    """Every section that needs the server, on one server process (and one bare grpcio server)."""
    sections = report["sections"]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ServerProcess())
        bare = Helper("bench.bare").start()
        stack.callback(bare.close)
        bare.wait_ready()
        async with grpc.aio.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel:
            if "a" in wanted:
                sections["a_runs"] = await _runs_section(stack, server, channel, sizes)
            if "d" in wanted or "f" in wanted:
                states = await build_thread(channel, max(sizes.turns, *sizes.checkpoint_turns))
                if "d" in wanted:
                    sections["d_thread"] = await thread_section(
                        server, channel, states[: sizes.turns], runs=sizes.turn_runs, rounds=sizes.turn_rounds
                    )
                if "f" in wanted:
                    sections["f_checkpoints"] = await checkpoint_section(
                        channel,
                        states,
                        turns=list(sizes.checkpoint_turns),
                        rounds=list(sizes.checkpoint_rounds),
                    )
        if "b" in wanted:
            sections["b_stream"] = await stream_section(
                server,
                bare,
                deltas=sizes.stream_deltas,
                processes=sizes.stream_processes,
                streams=sizes.stream_streams,
                repeat=sizes.stream_repeat,
                rounds=sizes.stream_rounds,
            )
        if "e" in wanted:
            # A full run measures idle memory on fresh servers (after this one is gone); a smoke run
            # only checks the code path, here.
            if smoke:
                sections["e_idle_memory"] = idle_memory_section(
                    idle_runs=sizes.idle_streams,
                    processes=sizes.client_processes,
                    warmup_runs=0,
                    server=server,
                    bare=bare,
                    settle_s=0.05,
                )
            sections["e_concurrency"] = concurrency_section(
                server, levels=sizes.concurrency, processes=sizes.client_processes
            )
    if "e" in wanted and not smoke:
        sections["e_idle_memory"] = idle_memory_section(
            idle_runs=sizes.idle_streams, processes=sizes.client_processes, warmup_runs=20
        )


async def _thread_sections(sizes: Sizes, wanted: str, report: dict[str, Any]) -> None:
    """(g) and (h), on a server of their own on a SQLite file of their own; (g) adds a second server."""
    sections = report["sections"]
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as directory:
        db = Path(directory) / "threads.sqlite3"
        async with contextlib.AsyncExitStack() as stack:
            metrics = free_port()  # (h) reads its group commit's figures there
            server = stack.enter_context(
                ServerProcess(store=f"sqlite:{db}", args=("--metrics-port", str(metrics)))
            )
            channel = await stack.enter_async_context(
                grpc.aio.insecure_channel(server.address, options=CHANNEL_OPTIONS)
            )
            long_thread = None
            if "g" in wanted:
                second = stack.enter_context(ServerProcess(store=f"sqlite:{db}"))
                second_channel = await stack.enter_async_context(
                    grpc.aio.insecure_channel(second.address, options=CHANNEL_OPTIONS)
                )
                sections["g_threads"] = await threads_section(
                    server,
                    second,
                    channel,
                    second_channel,
                    levels=sizes.thread_levels,
                    rounds=sizes.thread_rounds,
                )
                long_thread = sections["g_threads"]["long_thread"]
            if "h" in wanted:
                sections["h_thread_store"] = await thread_store_section(
                    server,
                    channel,
                    db,
                    levels=sizes.store_levels,
                    threads=sizes.store_threads,
                    turns=sizes.store_turns,
                    bytes_turns=sizes.store_bytes_turns,
                    long_thread=long_thread,
                    metrics=metrics,
                )
        if "h" in wanted:
            cost = await store_cost_section(
                "sqlite", str(Path(directory) / "cost.sqlite3"), turns=sizes.store_cost_turns
            )
            await _postgresql(sizes, sections["h_thread_store"], sqlite_cost=cost)


async def _postgresql(sizes: Sizes, section: dict[str, Any], *, sqlite_cost: dict[str, Any]) -> None:
    """(h) on a throwaway PostgreSQL cluster (fsync on), beside SQLite's figures in `section`."""
    from tests.pgcluster import cluster  # the repo root's test helper: `python -m bench` runs from there

    with cluster() as pg, contextlib.ExitStack() as stack:
        # The servers and the bare connection take the password from the environment, never a URL.
        stack.callback(os.environ.pop, "PGPASSWORD", None)
        os.environ.update(pg.env)
        url = pg.database()
        async with contextlib.AsyncExitStack() as channels:
            servers = [ServerProcess(store=url) for _ in range(2)]
            for server in servers:
                stack.callback(server.__exit__, None, None, None)
            # Started together: each waits seconds for its imports, and both migrate the one database.
            await asyncio.gather(*(asyncio.to_thread(server.__enter__) for server in servers))
            replicas = [
                (
                    server,
                    await channels.enter_async_context(
                        grpc.aio.insecure_channel(server.address, options=CHANNEL_OPTIONS)
                    ),
                )
                for server in servers
            ]
            levels = await postgresql_levels(
                replicas, levels=sizes.store_levels, threads=sizes.store_threads, turns=sizes.store_turns
            )
        cost = await store_cost_section("postgresql", pg.database(), turns=sizes.store_cost_turns)
    ratios = section["ratios"]
    ratios.update(levels.pop("ratios"))
    top = sizes.store_levels[-1]
    for at_once in sizes.store_levels:
        ratios[f"postgresql_over_sqlite_commits_per_s_{at_once}"] = round(
            ratio(ratios[f"postgresql_commits_per_s_{at_once}"], ratios[f"sqlite_commits_per_s_{at_once}"]), 4
        )
    ratios[f"postgresql_2_replicas_over_1_commits_per_s_{top}"] = round(
        ratio(
            ratios[f"postgresql_2_replicas_commits_per_s_{top}"], ratios[f"postgresql_commits_per_s_{top}"]
        ),
        4,
    )
    for name, measured in (("sqlite", sqlite_cost), ("postgresql", cost)):
        ratios[f"{name}_store_over_bare_per_turn"] = measured["store_over_bare"]
        ratios[f"{name}_store_cpu_over_bare_per_turn"] = measured["store_cpu_over_bare_cpu"]
    section["postgresql"] = levels
    section["cost_per_turn"] = {"sqlite": sqlite_cost, "postgresql": cost}


def _live_sizes(sizes: Sizes) -> LiveSizes:
    return LiveSizes(
        replay_events=sizes.live_replay_events,
        replay_joins=sizes.live_replay_joins,
        deltas=sizes.live_deltas,
        delta_ms=sizes.live_delta_ms,
        rounds=sizes.live_rounds,
        cpu_rounds=sizes.live_cpu_rounds,
        cpu_turns=sizes.live_cpu_turns,
        side_runs=sizes.live_side_runs,
        side_deltas=sizes.live_side_deltas,
        side_delta_ms=sizes.live_side_delta_ms,
        side_rounds=sizes.live_side_rounds,
        side_alone_s=sizes.live_side_alone_s,
        at_once=sizes.store_levels[-1],
        level_threads=sizes.store_threads,
        level_turns=sizes.store_turns,
        watchers=sizes.live_watchers,
        client_processes=sizes.client_processes,
    )


async def _live_sections(sizes: Sizes, report: dict[str, Any]) -> None:
    """(i) on SQLite files of its own, then on a throwaway PostgreSQL cluster (fsync on)."""
    from tests.pgcluster import cluster  # the repo root's test helper: `python -m bench` runs from there

    live = _live_sizes(sizes)
    section: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-live-") as directory:
        db = Path(directory) / "live.sqlite3"
        store = f"sqlite:{db}"
        section["sqlite"] = await live_store_section(
            "sqlite",
            (store, store),
            f"sqlite:{Path(directory) / 'off.sqlite3'}",
            LogReader("sqlite", str(db)),
            live,
        )
    with cluster() as pg, contextlib.ExitStack() as stack:
        # The servers and the bytes' reader take the password from the environment, never a URL.
        stack.callback(os.environ.pop, "PGPASSWORD", None)
        os.environ.update(pg.env)
        url = pg.database()
        section["postgresql"] = await live_store_section(
            "postgresql", (url, url), pg.database(), LogReader("postgresql", url), live
        )
    section["ratios"] = {**section["sqlite"].pop("ratios"), **section["postgresql"].pop("ratios")}
    report["sections"]["i_live"] = section


async def _queue_sections(sizes: Sizes, report: dict[str, Any]) -> None:
    """(j) on an SQLite file shared by two servers, then on a throwaway PostgreSQL cluster (fsync on)."""
    from tests.pgcluster import cluster  # the repo root's test helper: `python -m bench` runs from there

    queue = QueueSizes(
        accepts=sizes.queue_accepts,
        busy_threads=sizes.queue_busy_threads,
        accepts_each=sizes.queue_accepts_each,
        queue=sizes.queue_length,
        across=sizes.queue_across,
        drain_rounds=sizes.queue_drain_rounds,
    )
    section: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as directory:
        store = f"sqlite:{Path(directory) / 'queue.sqlite3'}"
        section["sqlite"] = await queue_store_section("sqlite", (store, store), queue)
    with cluster() as pg, contextlib.ExitStack() as stack:
        stack.callback(os.environ.pop, "PGPASSWORD", None)
        os.environ.update(pg.env)
        url = pg.database()
        section["postgresql"] = await queue_store_section("postgresql", (url, url), queue)
    section["ratios"] = {**section["sqlite"].pop("ratios"), **section["postgresql"].pop("ratios")}
    report["sections"]["j_queue"] = section


def _intents_section(sizes: Sizes) -> dict[str, Any]:
    """(k) on two SQLite files, one server each (intents on, off)."""
    with tempfile.TemporaryDirectory(prefix="bench-intents-") as directory:
        stores = (f"sqlite:{Path(directory) / 'on.sqlite3'}", f"sqlite:{Path(directory) / 'off.sqlite3'}")
        measured = intents_section(stores, IntentSizes(rounds=sizes.intent_rounds, turns=sizes.intent_turns))
    ratios: dict[str, float] = {}
    ratios["intent_cost_per_call_ms"] = measured["intent_cost_per_call_ms"]
    for turn in ("turn_1_call", "turn_2_calls", "turn_4_calls", "resume_turn"):
        if turn != "resume_turn":
            ratios[f"intents_{turn}_cpu_on_over_off"] = measured[f"{turn}_cpu_on_over_off"]
        ratios[f"intents_{turn}_extra_transactions"] = (
            measured[f"{turn}_transactions_on"] - measured[f"{turn}_transactions_off"]
        )
    return {**measured, "ratios": ratios}


def _ratios(sections: dict[str, Any]) -> dict[str, float]:
    ratios: dict[str, float] = {}
    for section in sections.values():
        ratios.update(section.get("ratios", {}))
    envelope = sections.get("c_envelope")
    if envelope:
        sizes = list(envelope["sizes"])
        for name in ("protobuf", "json"):
            ratios[f"envelope_{name}_over_pydantic_ai"] = max(
                ratios[f"envelope_{name}_over_pydantic_ai_{size}"] for size in sizes
            )
        ratios["envelope_protobuf_per_message_growth"] = ratios[
            f"envelope_protobuf_per_message_{sizes[-1]}_over_{sizes[0]}"
        ]
    thread = sections.get("d_thread")
    if thread:
        ratios["turn_last_over_budget"] = ratios[f"turn_{thread['turns']}_over_budget"]
    threads = sections.get("g_threads")
    if threads:
        last = threads["levels"][-1]["level"]
        ratios["thread_turn_last_over_turn_1"] = ratios[f"thread_turn_{last}_over_turn_1"]
        ratios["thread_turn_1_over_harness_turn_1"] = max(
            ratios[f"thread_turn_1_over_harness_turn_1_at_{level['level']}"] for level in threads["levels"]
        )
    concurrency = sections.get("e_concurrency")
    if concurrency:
        ratios["concurrent_runs_errors"] = float(concurrency["levels"][-1]["errors"])
    idle = sections.get("e_idle_memory")
    if idle:
        ratios["kib_per_idle_stream"] = float(idle["kib_per_idle_stream"])
        ratios["idle_stream_memory_over_limit"] = ratios.pop("idle_stream_memory_over_limit")  # beside it
    return {name: round(value, 4) for name, value in ratios.items()}


def _table(report: dict[str, Any]) -> str:
    lines = [f"{'measure':<46} {'value':>10}  {'target':>8}  met"]
    lines.append("-" * len(lines[0]))
    for name, value in report["ratios"].items():
        target = report["targets"].get(name)
        if target is None:
            lines.append(f"{name:<46} {value:>10.3f}")
        else:
            mark = "yes" if target["met"] else "NO"
            lines.append(
                f"{name:<46} {value:>10.3f}  {target['comparison'] + ' ' + str(target['threshold']):>8}  {mark}"
            )
    return "\n".join(lines)


def _merged(previous: dict[str, Any], partial: dict[str, Any], wanted: str) -> dict[str, Any]:
    """A run of some sections written into the last full run: its other sections are kept, and the
    rerun is recorded (`sections_rerun`) so a reader knows which numbers are from when."""
    merged = dict(previous)
    sections = dict(previous.get("sections", {}))
    for name, section in partial["sections"].items():
        # What this run did not measure (e.g. (h)'s long-thread bytes, which need (g)) stays as it was.
        kept = sections.get(name, {})
        sections[name] = {
            **kept,
            **{
                key: {**kept[key], **value}
                if isinstance(value, dict) and isinstance(kept.get(key), dict)
                else value
                for key, value in section.items()
            },
        }
    merged["sections"] = sections
    merged["sections_rerun"] = [
        *previous.get("sections_rerun", []),
        {
            "sections": wanted,
            "generated_at": partial["generated_at"],
            "command": f"python -m bench --sections {wanted}",
            "machine_load_average_at_start": partial["machine"].get("load_average_at_start"),
        },
    ]
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check the code paths, not speed")
    parser.add_argument("--out", type=Path, help=f"where to write the JSON (default: {LATEST})")
    parser.add_argument(
        "--sections", default=SECTIONS, help="which sections to run, e.g. 'ac' (default: all)"
    )
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    out: Path = args.out or LATEST
    if args.smoke and out.resolve() == LATEST.resolve():
        parser.error("a smoke run never writes bench/results/latest.json; pass --out")
    started = time.perf_counter()
    report: dict[str, Any] = {
        "schema": 1,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench" + (" --smoke" if args.smoke else ""),
        "smoke": args.smoke,
        "machine": machine(),
        "server": {"max_concurrent_runs": MAX_CONCURRENT_RUNS},
        "sizes": asdict(sizes),
        "sections": {},
    }
    wanted = args.sections
    if "c" in wanted:
        report["sections"]["c_envelope"] = envelope_section(
            sizes=sizes.envelope_sizes, rounds=sizes.envelope_rounds, min_batch_s=sizes.envelope_batch_s
        )
    if set(wanted) & set("abdef"):
        asyncio.run(_server_sections(sizes, wanted, args.smoke, report))
    if set(wanted) & set("gh"):
        asyncio.run(_thread_sections(sizes, wanted, report))
    if "i" in wanted:
        asyncio.run(_live_sections(sizes, report))
    if "j" in wanted:
        asyncio.run(_queue_sections(sizes, report))
    if "k" in wanted:
        report["sections"]["k_intents"] = _intents_section(sizes)
    if "l" in wanted:
        report["sections"]["l_http"] = asyncio.run(
            http_section(runs=sizes.http_runs_per_round, rounds=sizes.http_rounds)
        )
    if set(wanted) != set(SECTIONS) and not args.smoke and out.exists():
        report = _merged(json.loads(out.read_text()), report, wanted)
    report["ratios"] = _ratios(report["sections"])
    report["targets"] = {
        name: {
            "comparison": comparison,
            "threshold": threshold,
            "value": report["ratios"][name],
            "met": _met(comparison, report["ratios"][name], threshold),
            "what": what,
        }
        for name, (comparison, threshold, what) in TARGETS.items()
        if name in report["ratios"]
    }
    report["duration_s"] = round(time.perf_counter() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(_table(report))
    print(f"\nwrote {out} in {report['duration_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
