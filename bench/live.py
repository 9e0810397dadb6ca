"""(i) Live runs: joining a run, following it from another replica, and what the event log costs.

Each store runs three servers: A and B with the event log on, sharing one store (two processes on one
SQLite file, or two replicas on one PostgreSQL database), and C with `--event-log off` on a store of its
own. Every run is a thread run started by `StreamThreadRun` on A (A holds it); "same" is a join on A,
"other" a join on B. The `paced` agent streams its deltas a provider's pace apart (`bench.agents`),
so a turn spans many `--event-log-window-ms` windows and the holder's window appends run, not only the
writes its commits carry.

- Time to first event (`replay`): one finished run of the `stream` agent with `replay_events` deltas
  (about as many events, written by its commits and 64 KiB appends), joined `replay_joins` times on A
  and on B, alternating, each read to its end: milliseconds from calling `JoinThreadRun` to its first
  response, and to its last.
- Live (`live`): `rounds` paced turns. As soon as the first caller has the run's first event, one join
  on A and one on B follow the run to its end; every event they receive that happened after their call
  (`result` aside: a join builds it from the run record) gives a lag, the holder's
  `RunEvent.occurred_at` to this process's clock at receipt (one host, one clock). Meanwhile probes
  join the running attempt from its start, alternating A and B, and read only their first response:
  the time to first event of a live join.
- CPU (`cpu_per_turn`): each of `cpu_rounds` rounds runs `cpu_turns` paced turns at once on A, and as
  many on C, in rotating order, each batch on threads of its own made beforehand; the server's CPU
  (every thread, to the nanosecond) per turn. `log_on_over_off_cpu_per_turn` is the median of the
  per-round ratios. `cpu_per_lone_turn` does the same one turn at a time: nothing for the replica's
  grouped appends to share.
- Bytes (`log_bytes`): the `run_events.data` bytes of A's CPU turns, read from the store afterwards,
  over the bytes of the `StreamThreadRunResponse` messages their first callers received (serialized
  size; gRPC's framing not counted).
- Commits beside paced runs (`beside_paced_runs`): (h)'s level (`at_once` new `scenario` threads at a
  time, `RunThread` turns, commits per wall second) on A and on C, in rotating order, while client
  processes (`bench.client paced`) keep `side_runs` paced turns streaming on that server. The level
  saturates the server, so what the paced runs streamed meanwhile is reported beside it (with the log
  on, the commits wait on the log's writes and the paced runs get more of the core). First, the paced
  runs alone for `side_alone_s` on each: the server's CPU a second and the events streamed a second.
- Idle watchers (`idle_watchers`): `watchers` `WatchThread` streams on threads of their own, opened by
  client processes on A and held; A's RSS once they are open and it is quiet, minus before, per watcher
  (as (e)'s idle streams), and the CPU A spends a second with them idle (its poll reads every watched
  thread's position: every 250 ms on SQLite, every second on PostgreSQL).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import psycopg
from threadline.v1 import run_pb2, thread_service_pb2, thread_service_pb2_grpc

from harness.threads.database import postgresql_conninfo

from .concurrency import _quiet, _settled_rss, _split
from .measure import Cost, median, median_ratio, ratio, summary
from .proc import Helper, ServerProcess, cpu_seconds, start_clients
from .thread_store import _level, _percentile
from .threads import ThreadClient
from .wire import CHANNEL_OPTIONS, PER_MESSAGE, events_of, paced_prompt

__all__ = ("LiveSizes", "LogReader", "live_store_section")

_PROBES = 10
"""Live first-event probes per replica per paced turn."""


@dataclass(frozen=True)
class LogReader:
    """What the event log holds, read straight from the store afterwards (never while measuring)."""

    kind: str
    """`sqlite` or `postgresql`."""
    location: str
    """The SQLite file, or the database's URL (the password comes from `PGPASSWORD`, as the servers')."""

    def _row(self, sql: str, params: list[Any]) -> tuple[Any, ...]:
        if self.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(f"file:{self.location}?mode=ro", uri=True)) as connection:
                return tuple(connection.execute(sql, params).fetchone())
        with psycopg.connect(postgresql_conninfo(self.location), autocommit=True) as pg:
            row = pg.execute(sql.replace("?", "%s"), params).fetchone()
        assert row is not None
        return tuple(row)

    def size(self, run_ids: Sequence[str]) -> tuple[int, int]:
        """The `run_events.data` bytes and the writes (rows) of these runs' logs."""
        params: list[Any]
        if self.kind == "sqlite":
            where, params = f"run_id IN ({','.join('?' * len(run_ids))})", list(run_ids)
        else:
            where, params = "run_id = ANY(?)", [list(run_ids)]
        total, writes = self._row(
            f"SELECT coalesce(sum(length(data)), 0), count(*) FROM run_events WHERE {where}", params
        )
        return int(total), int(writes)

    def writes(self) -> int:
        """Every log write (row) the store holds."""
        (count,) = self._row("SELECT count(*) FROM run_events", [])
        return int(count)


@dataclass(frozen=True)
class LiveSizes:
    """How much (i) does on each store (`bench.__main__.Sizes`' `live_*` fields, and (h)'s level)."""

    replay_events: int
    replay_joins: int
    deltas: int
    delta_ms: float
    rounds: int
    cpu_rounds: int
    cpu_turns: int
    side_runs: int
    side_deltas: int
    side_delta_ms: float
    side_rounds: int
    side_alone_s: float
    at_once: int
    level_threads: int
    level_turns: int
    watchers: int
    client_processes: int


@dataclass
class Replica:
    """A server under test and this process's channel to it."""

    server: ServerProcess
    channel: grpc.aio.Channel
    threads: ThreadClient = field(init=False)
    stub: thread_service_pb2_grpc.ThreadServiceAsyncStub = field(init=False)

    def __post_init__(self) -> None:
        self.threads = ThreadClient(self.channel)
        self.stub = self.threads.stub

    async def create(self, agent: str) -> str:
        response = await self.stub.CreateThread(thread_service_pb2.CreateThreadRequest(agent=agent))
        return response.thread.thread_id

    def join(self, thread_id: str, run_id: str) -> Any:
        request = thread_service_pb2.JoinThreadRunRequest(
            thread_id=thread_id, run_id=run_id, max_events_per_message=PER_MESSAGE
        )
        return self.stub.JoinThreadRun(request)


@dataclass
class Turn:
    """What the first caller of one `StreamThreadRun` turn received."""

    run_id: str = ""
    events: int = 0
    bytes: int = 0
    status: str = "no_result"
    wall_s: float = 0.0


async def _turn(
    replica: Replica, thread_id: str, text: str, on_event: Callable[[Turn], None] | None = None
) -> Turn:
    """One turn on `replica`, read to its end; `on_event` is called after each event with the turn so far."""
    spec = thread_service_pb2.ThreadRunSpec(thread_id=thread_id, request_id=uuid.uuid4().hex, text=text)
    request = thread_service_pb2.StreamThreadRunRequest(spec=spec, max_events_per_message=PER_MESSAGE)
    turn, begun = Turn(), time.perf_counter()
    async for response in replica.stub.StreamThreadRun(request, timeout=600):
        turn.bytes += response.ByteSize()
        for event in events_of(response):
            turn.events += 1
            if not turn.run_id:
                turn.run_id = event.run_id
            if event.WhichOneof("event") == "result":
                turn.status = run_pb2.RunStatus.Name(event.result.status)
            if on_event is not None:
                on_event(turn)
    turn.wall_s = time.perf_counter() - begun
    return turn


def _ms(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(_percentile(values, 50) * 1e3, 2),
        "p99_ms": round(_percentile(values, 99) * 1e3, 2),
        "max_ms": round(max(values, default=0.0) * 1e3, 2),
    }


def _rotated(names: Sequence[str], index: int) -> list[str]:
    return [*names[index % len(names) :], *names[: index % len(names)]]


async def _replay(replicas: dict[str, Replica], log: LogReader, *, events: int, joins: int) -> dict[str, Any]:
    """A finished run of about `events` events, joined `joins` times on each replica."""
    holder = replicas["same"]
    thread_id = await holder.create("stream")
    turn = await _turn(holder, thread_id, str(events))
    assert turn.status == "RUN_STATUS_COMPLETED", turn
    first: dict[str, list[float]] = {name: [] for name in replicas}
    whole: dict[str, list[float]] = {name: [] for name in replicas}
    received: set[int] = set()
    for index in range(joins):
        for name in _rotated(list(replicas), index):
            count, begun, first_s = 0, time.perf_counter(), 0.0
            async for response in replicas[name].join(thread_id, turn.run_id):
                if not count:
                    first_s = time.perf_counter() - begun
                count += len(events_of(response))
            whole[name].append(time.perf_counter() - begun)
            first[name].append(first_s)
            received.add(count)
    written, writes = log.size([turn.run_id])
    return {
        "events": turn.events,
        "streamed_bytes": turn.bytes,
        "log_bytes": written,
        "log_writes": writes,
        "log_bytes_over_streamed": round(ratio(written, turn.bytes), 4),
        "events_per_join": sorted(received),
        "first_event": {name: _ms(values) for name, values in first.items()},
        "whole_replay": {name: _ms(values) for name, values in whole.items()},
    }


@dataclass
class _Followed:
    """What the joins of `_live` saw, per replica."""

    lags: dict[str, list[float]]
    probes: dict[str, list[float]]
    events: dict[str, int]


async def _follow(replica: Replica, thread_id: str, run_id: str, lags: list[float]) -> int:
    """Join the run to its end; the lag of each event that happened after the call. Events received."""
    called, received = time.time(), 0
    async for response in replica.join(thread_id, run_id):
        now = time.time()
        for event in events_of(response):
            received += 1
            happened = event.occurred_at.ToNanoseconds() / 1e9
            if event.WhichOneof("event") != "result" and happened >= called:
                lags.append(now - happened)
    return received


async def _probe(
    replicas: dict[str, Replica],
    thread_id: str,
    run_id: str,
    done: asyncio.Event,
    seen: _Followed,
    span_s: float,
) -> None:
    """While the run streams, short joins from its start, alternating replicas: time to first response."""
    names = list(replicas)
    probes = _PROBES * len(names)
    for index in range(probes):
        await asyncio.sleep(span_s / (probes + 1))
        if done.is_set():
            return
        name = names[index % len(names)]
        begun = time.perf_counter()
        call = replicas[name].join(thread_id, run_id)
        await call.read()
        seen.probes[name].append(time.perf_counter() - begun)
        call.cancel()


async def _live_turn(replicas: dict[str, Replica], text: str, seen: _Followed, span_s: float) -> Turn:
    """One paced turn on the holder; at its first event a join on each replica follows it, and probes start."""
    thread_id = await replicas["same"].create("paced")
    done = asyncio.Event()
    followers: list[asyncio.Task[Any]] = []

    def first(turn: Turn) -> None:
        if followers:
            return
        for name, replica in replicas.items():
            followers.append(asyncio.create_task(_follow(replica, thread_id, turn.run_id, seen.lags[name])))
        followers.append(asyncio.create_task(_probe(replicas, thread_id, turn.run_id, done, seen, span_s)))

    turn = await _turn(replicas["same"], thread_id, text, first)
    done.set()
    received = await asyncio.gather(*followers)
    for name, count in zip(replicas, received, strict=False):
        seen.events[name] += count
    assert turn.status == "RUN_STATUS_COMPLETED", turn
    return turn


async def _live(replicas: dict[str, Replica], *, rounds: int, deltas: int, delta_ms: float) -> dict[str, Any]:
    """Paced turns on the holder, each followed by a join on each replica and probed by short joins."""
    seen = _Followed(
        {name: [] for name in replicas}, {name: [] for name in replicas}, dict.fromkeys(replicas, 0)
    )
    text, span_s = paced_prompt(deltas, delta_ms), deltas * delta_ms / 1e3
    turns = [await _live_turn(replicas, text, seen, span_s) for _ in range(rounds)]
    return {
        "turns": len(turns),
        "events_per_turn": turns[0].events if turns else 0,
        "turn_wall_s": round(median([turn.wall_s for turn in turns]), 3),
        "joined_events": seen.events,
        "lag": {name: _ms(values) for name, values in seen.lags.items()},
        "first_event": {name: _ms(values) for name, values in seen.probes.items()},
    }


async def _cpu(
    on: Replica, other: Replica, off: Replica, log: LogReader, sizes: LiveSizes, turns: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Server CPU per paced turn, `turns` at once, log on (A) and off (C); then A's log bytes over
    what it streamed."""
    servers = {"log_on": on, "log_off": off}
    measured: list[dict[str, Cost]] = []
    streamed: list[Turn] = []
    other_cpu = 0.0
    text = paced_prompt(sizes.deltas, sizes.delta_ms)
    for index in range(sizes.cpu_rounds):
        costs: dict[str, Cost] = {}
        for name in _rotated(list(servers), index):
            replica = servers[name]
            threads = [await replica.create("paced") for _ in range(turns)]
            cpu, wall, other_before = (
                replica.server.thread_cpu(),
                time.perf_counter(),
                other.server.thread_cpu(),
            )
            done = await asyncio.gather(*(_turn(replica, thread_id, text) for thread_id in threads))
            costs[name] = Cost(
                (replica.server.thread_cpu() - cpu) / turns, (time.perf_counter() - wall) / turns
            )
            assert all(turn.status == "RUN_STATUS_COMPLETED" for turn in done), done
            if name == "log_on":
                other_cpu += other.server.thread_cpu() - other_before
                streamed.extend(done)
        measured.append(costs)
    written, writes = log.size([turn.run_id for turn in streamed])
    sent = sum(turn.bytes for turn in streamed)
    cost = {name: summary(measured, name) for name in servers}
    writes_per_turn = ratio(writes, len(streamed))
    per_turn = {
        "rounds": sizes.cpu_rounds,
        "turns_at_once": turns,
        "events_per_turn": streamed[0].events if streamed else 0,
        "turn_wall_s": round(median([turn.wall_s for turn in streamed]), 3),
        "cost": cost,
        "log_writes_per_turn": round(writes_per_turn, 1),
        # What the log adds, spread over its writes (the appends' transactions, mostly).
        "server_cpu_ms_per_log_write": round(
            ratio(cost["log_on"]["cpu_ms"] - cost["log_off"]["cpu_ms"], writes_per_turn), 3
        ),
        # The other replica follows nothing; on PostgreSQL it still hears each write's notification.
        "other_replica_cpu_ms_per_turn": round(ratio(other_cpu, len(streamed)) * 1e3, 3),
        "log_on_over_off": round(median_ratio(measured, "log_on", "log_off"), 4),
    }
    written_json = {
        "turns": len(streamed),
        "log_bytes_per_turn": round(ratio(written, len(streamed)), 1),
        "streamed_bytes_per_turn": round(ratio(sent, len(streamed)), 1),
        "log_bytes_over_streamed": round(ratio(written, sent), 4),
    }
    return per_turn, written_json


async def _beside_level(
    replica: Replica, helpers: list[Helper], sizes: LiveSizes, log: LogReader | None, other: Replica
) -> dict[str, Any]:
    """One level of (h) on `replica` while its paced clients stream."""
    for helper in helpers:
        helper.send()
    running = sum(helper.result()["running"] for helper in helpers)
    writes = log.writes() if log is not None else 0
    other_cpu = other.server.thread_cpu()
    level = await _level(
        [(replica.server, replica.threads)], sizes.at_once, sizes.level_threads, sizes.level_turns
    )
    other_cpu = other.server.thread_cpu() - other_cpu
    writes = log.writes() - writes if log is not None else 0
    for helper in helpers:
        helper.send()
    side = [helper.result() for helper in helpers]
    streamed = sum(result["events_between"] for result in side)
    outcomes: dict[str, int] = {}
    for result in side:
        for status, count in result["outcomes"].items():
            outcomes[status] = outcomes.get(status, 0) + count
    return {
        **level,
        "paced_runs_streaming": running,
        "paced_turns": sum(result["turns"] for result in side),
        "paced_outcomes": outcomes,
        "paced_events_per_s": round(ratio(streamed, level["wall_s"]), 1),
        "log_writes_per_s": round(writes / level["wall_s"], 1),
        "other_replica_cpu_s": round(other_cpu, 3),
    }


async def _paced_alone(
    replica: Replica, helpers: list[Helper], seconds: float, log: LogReader | None
) -> dict[str, Any]:
    """The server's CPU a second, and the events streamed a second, with only the paced runs."""
    for helper in helpers:
        helper.send()
    running = sum(helper.result()["running"] for helper in helpers)
    writes = log.writes() if log is not None else 0
    cpu, wall = replica.server.thread_cpu(), time.perf_counter()
    await asyncio.sleep(seconds)
    cpu, wall = replica.server.thread_cpu() - cpu, time.perf_counter() - wall
    writes = log.writes() - writes if log is not None else 0
    for helper in helpers:
        helper.send()
    streamed = sum(helper.result()["events_between"] for helper in helpers)
    return {
        "paced_runs_streaming": running,
        "wall_s": round(wall, 3),
        "server_cpu_s_per_s": round(cpu / wall, 4),
        "paced_events_per_s": round(streamed / wall, 1),
        "server_cpu_us_per_paced_event": round(ratio(cpu, streamed) * 1e6, 1),
        "log_writes_per_s": round(writes / wall, 1),
    }


async def _beside(
    on: Replica, other: Replica, off: Replica, log: LogReader, sizes: LiveSizes
) -> dict[str, Any]:
    """(h)'s level on A and on C while `side_runs` paced turns keep streaming on the same server."""
    servers = {"log_on": on, "log_off": off}
    text = paced_prompt(sizes.side_deltas, sizes.side_delta_ms)
    shares = [n for n in _split(sizes.side_runs, sizes.client_processes) if n]
    helpers: dict[str, list[Helper]] = {}
    rows: list[dict[str, Any]] = []
    try:
        for name, replica in servers.items():
            helpers[name] = start_clients(
                "paced", replica.server.address, [{"runs": n, "text": text} for n in shares]
            )
        for _name, replica in servers.items():  # warm-up, as (h)
            await replica.threads.turn(await replica.threads.create())
        alone = {
            name: await _paced_alone(
                servers[name], helpers[name], sizes.side_alone_s, log if name == "log_on" else None
            )
            for name in servers
        }
        for index in range(sizes.side_rounds):
            row: dict[str, Any] = {}
            for name in _rotated(list(servers), index):
                reader = log if name == "log_on" else None
                row[name] = await _beside_level(servers[name], helpers[name], sizes, reader, other)
            rows.append(row)
    finally:
        for started in helpers.values():
            for helper in started:
                helper.close()
    per_round = [ratio(row["log_on"]["commits_per_s"], row["log_off"]["commits_per_s"]) for row in rows]
    return {
        "threads_at_once": sizes.at_once,
        "paced_runs": sizes.side_runs,
        "paced_prompt": text,
        "paced_runs_alone": alone,
        "paced_runs_alone_log_on_over_off_cpu": round(
            ratio(alone["log_on"]["server_cpu_s_per_s"], alone["log_off"]["server_cpu_s_per_s"]), 4
        ),
        "rounds": rows,
        "commits_per_s": {name: median([row[name]["commits_per_s"] for row in rows]) for name in servers},
        "paced_events_per_s": {
            name: median([row[name]["paced_events_per_s"] for row in rows]) for name in servers
        },
        "log_on_over_off_commits_per_s": round(median(per_round), 4),
    }


def _watchers(replica: Replica, *, watchers: int, processes: int) -> dict[str, Any]:
    """`watchers` idle `WatchThread` streams on A: its RSS per watcher and its CPU a second."""
    pid = replica.server.pid
    shares = [n for n in _split(watchers, processes) if n]
    helpers = start_clients("watch", replica.server.address, [{"runs": n} for n in shares])
    try:
        _quiet(pid, window_s=0.5, limit_s=60)
        before = _settled_rss(pid, 0.5)
        started = time.perf_counter()
        for helper in helpers:
            helper.send()
        opened = sum(helper.result()["open"] for helper in helpers)
        # Held watchers are polled (SQLite every 250 ms): quiet here means no more than the poll.
        _quiet(pid, window_s=1.0, idle_cpu_s=0.2, limit_s=60)
        open_after_s = time.perf_counter() - started
        during = _settled_rss(pid, 0.5)
        cpu, wall = cpu_seconds(pid), time.perf_counter()
        time.sleep(2.0)
        idle_cpu = (cpu_seconds(pid) - cpu) / (time.perf_counter() - wall)
        for helper in helpers:
            helper.send()
        outcomes: dict[str, int] = {}
        for helper in helpers:
            for status, count in helper.result()["outcomes"].items():
                outcomes[status] = outcomes.get(status, 0) + count
    finally:
        for helper in helpers:
            helper.close()
    return {
        "open_watchers": opened,
        "idle_after_s": round(open_after_s, 3),
        "rss_before_mib": round(before / 2**20, 2),
        "rss_open_mib": round(during / 2**20, 2),
        "kib_per_idle_watcher": round((during - before) / opened / 1024, 2) if opened else 0.0,
        "server_cpu_ms_per_s_idle": round(idle_cpu * 1e3, 2),
        "outcomes_after_cancel": outcomes,
    }


async def live_store_section(
    kind: str, stores: tuple[str, str], off_store: str, log: LogReader, sizes: LiveSizes
) -> dict[str, Any]:
    """(i) on one store: A and B on `stores` (one file or database, twice), C (`--event-log off`) on `off_store`."""
    servers = [
        ServerProcess(store=stores[0]),
        ServerProcess(store=stores[1]),
        ServerProcess(store=off_store, args=("--event-log", "off")),
    ]
    with contextlib.ExitStack() as stack:
        for server in servers:
            stack.callback(server.__exit__, None, None, None)
        # Started together: each waits seconds for its imports, and A and B migrate the one store.
        await asyncio.gather(*(asyncio.to_thread(server.__enter__) for server in servers))
        async with contextlib.AsyncExitStack() as channels:
            a, b, c = [
                Replica(
                    server,
                    await channels.enter_async_context(
                        grpc.aio.insecure_channel(server.address, options=CHANNEL_OPTIONS)
                    ),
                )
                for server in servers
            ]
            for replica in (a, b, c):  # warm-up: a paced turn on each
                await _turn(replica, await replica.create("paced"), paced_prompt(2, 1))
            replicas = {"same": a, "other": b}
            clock = time.perf_counter()
            durations: dict[str, float] = {}

            def took(part: str) -> None:
                nonlocal clock
                durations[part] = round(time.perf_counter() - clock, 1)
                clock = time.perf_counter()

            replay = await _replay(replicas, log, events=sizes.replay_events, joins=sizes.replay_joins)
            took("replay")
            live = await _live(replicas, rounds=sizes.rounds, deltas=sizes.deltas, delta_ms=sizes.delta_ms)
            took("live")
            cpu, written = await _cpu(a, b, c, log, sizes, sizes.cpu_turns)
            took("cpu_per_turn")
            lone, _lone_written = await _cpu(a, b, c, log, sizes, 1)
            took("cpu_per_lone_turn")
            beside = await _beside(a, b, c, log, sizes)
            took("beside_paced_runs")
            watchers = _watchers(a, watchers=sizes.watchers, processes=sizes.client_processes)
            took("idle_watchers")
    ratios: dict[str, float] = {}
    for measure, figures in (
        ("replay_first_event", replay["first_event"]),
        ("live_first_event", live["first_event"]),
        ("live_lag", live["lag"]),
    ):
        for name in ("same", "other"):
            for q in ("p50", "p99"):
                ratios[f"{kind}_{measure}_{q}_ms_{name}"] = figures[name][f"{q}_ms"]
    ratios[f"{kind}_log_on_over_off_cpu_per_turn"] = cpu["log_on_over_off"]
    ratios[f"{kind}_log_on_over_off_cpu_per_lone_turn"] = lone["log_on_over_off"]
    ratios[f"{kind}_log_on_over_off_commits_per_s"] = beside["log_on_over_off_commits_per_s"]
    ratios[f"{kind}_log_on_over_off_cpu_paced_runs_alone"] = beside["paced_runs_alone_log_on_over_off_cpu"]
    ratios[f"{kind}_log_bytes_over_streamed"] = written["log_bytes_over_streamed"]
    ratios[f"{kind}_kib_per_idle_watcher"] = watchers["kib_per_idle_watcher"]
    return {
        "replay": replay,
        "live": live,
        "cpu_per_turn": cpu,
        "cpu_per_lone_turn": lone,
        "log_bytes": written,
        "beside_paced_runs": beside,
        "idle_watchers": watchers,
        "duration_s": durations,
        "ratios": ratios,
    }
