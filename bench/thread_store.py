"""(h) The thread store: commits per second and `RunThread` latency on SQLite and PostgreSQL, bytes per turn.

Throughput: at each level c (1 and 64 threads at once), `threads` new threads of the `scenario` agent
run `turns` turns each, c threads at a time, each thread's turns one after another (level 1 runs the
same threads' turns, one thread at a time). A commit is one checkpoint (the `scenario` turn commits 6:
5 `MID_RUN`, 1 `COMPLETED` holding the answer), counted from the revisions `RunThread` returns; commits per second are
over the level's wall time, latency is each `RunThread`'s wall time as this client saw it. SQLite runs
the levels on one server; PostgreSQL on one of two replicas on one database, then the top level again
with its workers alternating between the two (`replicas`), server CPU summed over both. On SQLite each
level also reads the server's metrics (`threadline_store_committed_writes` over
`threadline_store_durable_writes`): how many write transactions of requests each durable transaction,
each fsync, carried (`sqlite_writes_per_fsync_N`: group commit at work when above 1), and the garbage
collector's pauses, which stop the event loop: milliseconds a turn (`sqlite_gc_pause_ms_per_turn_N`)
and the longest since the server was up.

Bytes (SQLite): one thread runs `bytes_turns` turns; afterwards the SQLite file is read with `sqlite3`
and each turn is charged what its checkpoints wrote: the `data` of every `blobs` row they were the
first to refer to, plus each `checkpoints` row's payload (its text columns `kind`, `run_id`,
`request_id`, `pending`, `remaining`, `client_tools`, in bytes). That is held against what the turn
added to the state's JSON form (`GetCheckpoint` of the turn's last revision and of the one before, each
state's JSON length, history and other parts). The run records (`runs`: prompt, outcome, attempts) are
reported beside it. The long thread of (g), when it ran on the same file, is charged the same way as
a whole: everything its checkpoints wrote after its first, against its JSON's growth.

The store's cost per turn against bare transactions is `bench.bare_store`'s.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from server.mapping.state import state_from_pb, state_to_json

from .measure import ratio
from .proc import ServerProcess, gauges
from .threads import ThreadClient

__all__ = ("postgresql_levels", "thread_store_section")

_PAYLOAD = " + ".join(
    f"coalesce(length(cast({column} as blob)), 0)"
    for column in ("kind", "run_id", "request_id", "pending", "remaining", "client_tools")
)


def _percentile(values: Sequence[float], q: int) -> float:
    """The `q`-th percentile (inclusive method; the only value for one sample)."""
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def _level(
    replicas: Sequence[tuple[ServerProcess, ThreadClient]],
    at_once: int,
    threads: int,
    turns: int,
    metrics: int | None = None,
) -> dict[str, Any]:
    """`threads` new threads, `turns` turns each, `at_once` at a time, workers spread over `replicas`;
    with the (one) server's `metrics` port, how many write transactions each durable one carried."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for _ in range(threads):
        queue.put_nowait(await replicas[0][1].create())  # revision 1
    latencies: list[float] = []
    commits = 0

    async def worker(client: ThreadClient) -> None:
        nonlocal commits
        while not queue.empty():
            thread_id, revision = queue.get_nowait(), 1
            for _ in range(turns):
                started = time.perf_counter()
                committed = await client.turn(thread_id)
                latencies.append(time.perf_counter() - started)
                commits += committed - revision
                revision = committed

    def cpu() -> float:
        return sum(server.thread_cpu() for server, _client in replicas)

    names = (
        "threadline_store_committed_writes",
        "threadline_store_durable_writes",
        "threadline_gc_pause_seconds_total",
        "threadline_gc_longest_pause_seconds",
    )

    def read() -> tuple[float, ...]:
        return (0.0,) * len(names) if metrics is None else gauges(metrics, *names)

    before, cpu_before, wall = read(), cpu(), time.perf_counter()
    await asyncio.gather(*(worker(replicas[k % len(replicas)][1]) for k in range(at_once)))
    wall, spent = time.perf_counter() - wall, cpu() - cpu_before
    after = read()
    grouped = {}
    if metrics is not None:  # group commit: the writes each durable transaction (each fsync) carried
        grouped["writes_per_durable_transaction"] = round(
            ratio(after[0] - before[0], after[1] - before[1]), 3
        )
        # the garbage collector's pauses, which stop the event loop (`server.heap`)
        grouped["gc_pause_ms_per_turn"] = round((after[2] - before[2]) / max(len(latencies), 1) * 1e3, 3)
        grouped["gc_longest_pause_ms"] = round(after[3] * 1e3, 2)
    return {
        **grouped,
        "replicas": len(replicas),
        "threads_at_once": at_once,
        "threads": threads,
        "turns": len(latencies),
        "commits": commits,
        "wall_s": round(wall, 3),
        "commits_per_s": round(commits / wall, 1),
        "turns_per_s": round(len(latencies) / wall, 2),
        "latency_ms": {
            "p50": round(_percentile(latencies, 50) * 1e3, 2),
            "p99": round(_percentile(latencies, 99) * 1e3, 2),
            "max": round(max(latencies) * 1e3, 2),
        },
        "server_cpu_ms_per_commit": round(spent / commits * 1e3, 3) if commits else 0.0,
    }


def _level_ratios(prefix: str, rows: list[dict[str, Any]]) -> dict[str, float]:
    ratios: dict[str, float] = {}
    for row in rows:
        at_once = row["threads_at_once"]
        ratios[f"{prefix}_commits_per_s_{at_once}"] = row["commits_per_s"]
        ratios[f"{prefix}_run_thread_p50_ms_{at_once}"] = row["latency_ms"]["p50"]
        ratios[f"{prefix}_run_thread_p99_ms_{at_once}"] = row["latency_ms"]["p99"]
        if "writes_per_durable_transaction" in row:
            ratios[f"{prefix}_writes_per_fsync_{at_once}"] = row["writes_per_durable_transaction"]
            ratios[f"{prefix}_gc_pause_ms_per_turn_{at_once}"] = row["gc_pause_ms_per_turn"]
    low, high = rows[0]["threads_at_once"], rows[-1]["threads_at_once"]
    if high > low:  # group commit's figures: the most threads at once against the fewest
        ratios[f"{prefix}_commits_per_s_many_over_one"] = ratio(
            rows[-1]["commits_per_s"], rows[0]["commits_per_s"]
        )
        ratios[f"{prefix}_run_thread_p99_many_over_one"] = ratio(
            rows[-1]["latency_ms"]["p99"], rows[0]["latency_ms"]["p99"]
        )
    return ratios


async def _json_bytes(client: ThreadClient, thread_id: str, revision: int) -> int:
    """The length in bytes of checkpoint `revision`'s state in its JSON form."""
    state = await client.state(thread_id, revision)
    return len(state_to_json(state_from_pb(state, field="state")).encode())


def _written(db: Path, thread_id: str) -> dict[int, int]:
    """Revision -> bytes its checkpoint wrote: blobs it was first to refer to, plus its row's payload."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            f"SELECT revision, history_blob, rest_blob, {_PAYLOAD} FROM checkpoints"
            " WHERE thread_id = ? ORDER BY revision",
            (thread_id,),
        ).fetchall()
        ids = sorted({blob for row in rows for blob in row[1:3]})
        sizes = dict(
            connection.execute(
                f"SELECT id, length(data) FROM blobs WHERE id IN ({','.join('?' * len(ids))})", ids
            ).fetchall()
        )
    seen: set[int] = set()
    written: dict[int, int] = {}
    for revision, history_blob, rest_blob, payload in rows:
        new = {history_blob, rest_blob} - seen
        seen |= new
        written[revision] = payload + sum(sizes[blob] for blob in new)
    return written


def _run_records(db: Path, thread_id: str) -> int:
    """Bytes of the thread's run records (prompt, outcome, attempts)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        (total,) = connection.execute(
            "SELECT coalesce(sum(coalesce(length(cast(prompt as blob)), 0)"
            " + coalesce(length(cast(outcome as blob)), 0) + length(cast(attempts as blob))), 0)"
            " FROM runs WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
    return int(total)


async def _bytes(client: ThreadClient, db: Path, turns: int) -> dict[str, Any]:
    thread_id = await client.create()
    revisions = [1]
    for _ in range(turns):
        revisions.append(await client.turn(thread_id))
    sizes = [await _json_bytes(client, thread_id, revision) for revision in revisions]
    written = _written(db, thread_id)
    per_turn = []
    for turn in range(1, len(revisions)):
        low, high = revisions[turn - 1], revisions[turn]
        stored = sum(written[r] for r in range(low + 1, high + 1))
        added = sizes[turn] - sizes[turn - 1]
        per_turn.append(
            {
                "turn": turn,
                "commits": high - low,
                "bytes_written": stored,
                "json_bytes_added": added,
                "ratio": round(ratio(stored, added), 4),
            }
        )
    total_written = sum(row["bytes_written"] for row in per_turn)
    total_added = sizes[-1] - sizes[0]
    return {
        "turns": turns,
        "per_turn": per_turn,
        "json_bytes_at_end": sizes[-1],
        "bytes_written": total_written,
        "json_bytes_added": total_added,
        "run_record_bytes_per_turn": round(_run_records(db, thread_id) / turns, 1) if turns else 0.0,
    }


async def _long_thread_bytes(client: ThreadClient, db: Path, thread_id: str) -> dict[str, Any]:
    written = _written(db, thread_id)
    first, head = min(written), max(written)
    added = await _json_bytes(client, thread_id, head) - await _json_bytes(client, thread_id, first)
    stored = sum(size for revision, size in written.items() if revision > first)
    return {"thread_id": thread_id, "revisions": head, "bytes_written": stored, "json_bytes_added": added}


async def thread_store_section(
    server: ServerProcess,
    channel: grpc.aio.Channel,
    db: Path,
    *,
    levels: tuple[int, ...],
    threads: int,
    turns: int,
    bytes_turns: int,
    long_thread: str | None = None,
    metrics: int | None = None,
) -> dict[str, Any]:
    """SQLite: the levels on one server (its metrics on port `metrics`), then the bytes it wrote."""
    client = ThreadClient(channel)
    await client.turn(await client.create())  # warm-up
    rows = [await _level([(server, client)], at_once, threads, turns, metrics) for at_once in levels]
    written = await _bytes(client, db, bytes_turns)
    ratios = _level_ratios("sqlite", rows)
    per_turn = [row["ratio"] for row in written["per_turn"]]
    ratios["sqlite_bytes_over_added_worst_turn"] = max(per_turn, default=0.0)
    ratios["sqlite_bytes_over_added_median_turn"] = statistics.median(per_turn) if per_turn else 0.0
    ratios["sqlite_bytes_over_added"] = ratio(written["bytes_written"], written["json_bytes_added"])
    result: dict[str, Any] = {"store": "sqlite", "levels": rows, "bytes": written}
    if long_thread is not None:
        long = await _long_thread_bytes(client, db, long_thread)
        ratios["sqlite_bytes_over_added_long_thread"] = ratio(long["bytes_written"], long["json_bytes_added"])
        result["long_thread_bytes"] = long
    result["ratios"] = ratios
    return result


async def postgresql_levels(
    replicas: Sequence[tuple[ServerProcess, grpc.aio.Channel]],
    *,
    levels: tuple[int, ...],
    threads: int,
    turns: int,
) -> dict[str, Any]:
    """PostgreSQL: the levels on the first replica, then the top level spread over all of them."""
    clients = [(server, ThreadClient(channel)) for server, channel in replicas]
    for _server, client in clients:
        await client.turn(await client.create())  # warm-up
    rows = [await _level(clients[:1], at_once, threads, turns) for at_once in levels]
    spread = await _level(clients, levels[-1], threads, turns)
    ratios = _level_ratios("postgresql", rows)
    ratios.update(_level_ratios(f"postgresql_{len(clients)}_replicas", [spread]))
    return {"levels": rows, "replicas": spread, "ratios": ratios}
