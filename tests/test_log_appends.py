"""Grouped appends (LIVE §2.2 b, docs/live.md "How it works"): the runs of one replica share transactions.

Four paced runs (`bench.agents:paced`, each spanning many `--event-log-window-ms` windows) stream at once
on replica A. A's metrics count its append transactions and the attempt logs they wrote; the store's rows
count the writes per attempt. A join of each run on replica B, started before the run ends and so woken
by the grouped writes (SQLite: the shared file's poll; PostgreSQL: one notification naming every log a
transaction wrote), gets exactly the first caller's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from conftest import PgStore
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from test_thread_joins import create, events, spec, stub_of, until, wire
from test_thread_replicas import Replica, start_replicas
from threadline.v1 import thread_service_pb2

from bench.wire import paced_prompt
from harness.threads.database import open_database
from harness.threads.eventlog import LogWrite, pack
from harness.threads.logstore import LogMoved, open_log
from harness.threads.notify import CancelListener
from harness.threads.statements import Statement
from harness.threads.store import ThreadStore

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
RUNS = 4
DELTAS, DELAY_MS = 60, 20
"""A run of 1.2 s: about 12 windows of 100 ms, so each attempt appends about a dozen times."""
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["sqlite", "postgresql"])
async def replicas(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[Replica]]:
    """A (metrics on) and B on one store, both serving the bench's `paced` agent."""
    if request.param == "sqlite":
        url, env = f"sqlite:{tmp_path / 'threads.sqlite3'}", {}
    else:
        store: PgStore = request.getfixturevalue("pg_store")
        url, env = store.url, store.env
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # `bench.agents` for the servers
    started = await asyncio.to_thread(
        start_replicas,
        url,
        env,
        tmp_path,
        2,
        lease_ttl=10,
        args=("--agent", "paced=bench.agents:paced", "--metrics-port", "0"),
    )
    yield started
    for replica in started:
        replica.close()


def _metrics_port(replica: Replica) -> int:
    for _ in range(200):
        for line in list(replica.lines):
            if '"metrics_listening"' in line:
                return int(json.loads(line)["port"])
        time.sleep(0.05)
    raise AssertionError("no metrics_listening line")


def _counter(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{name}_total":
                return float(sample.value)
    raise AssertionError(f"no {name} in /metrics")


async def test_the_runs_of_one_replica_append_together_and_joins_elsewhere_get_every_event(
    replicas: list[Replica],
) -> None:
    a, b = replicas
    holder, joiner = stub_of(a), stub_of(b)
    port = await asyncio.to_thread(_metrics_port, a)
    for index in range(RUNS):
        await create(holder, f"paced_{index}", agent="paced")
    before = await asyncio.to_thread(_counter, port, "threadline_event_log_appends")

    async def run(index: int) -> tuple[list[bytes], list[bytes]]:
        thread_id = f"paced_{index}"
        call = holder.StreamThreadRun(
            ts.StreamThreadRunRequest(spec=spec(thread_id, f"paced-{index}", paced_prompt(DELTAS, DELAY_MS))),
            timeout=60,
        )
        head = await until(call, "run_started")
        joined = joiner.JoinThreadRun(
            ts.JoinThreadRunRequest(thread_id=thread_id, run_id=head[0].run_id), timeout=60
        )
        first = head + await events(call)
        return wire(first), wire(await events(joined))

    streams = await asyncio.gather(*(run(index) for index in range(RUNS)))
    for first, joined in streams:
        assert first and joined == first, "the join on B carries the first caller's events exactly"
        assert len(first) > DELTAS

    appends = await asyncio.to_thread(_counter, port, "threadline_event_log_appends") - before
    logs = await asyncio.to_thread(_counter, port, "threadline_event_log_appended_attempts")
    assert logs >= RUNS * 5, f"each run appended across its windows ({logs} attempt writes)"
    assert appends * 2 <= logs, f"{appends} append transactions wrote {logs} attempt logs: not grouped"


# -- the store's side, in process -------------------------------------------------------------------------


async def test_one_append_transaction_writes_several_logs_and_a_moved_one_fails_alone(
    store: ThreadStore,
) -> None:
    noted: list[tuple[str, int | None, str]] = []
    heard = asyncio.Event()
    listener = None
    if store.database.conninfo is not None:
        loop = asyncio.get_running_loop()

        def changed(thread_id: str, change: int | None, run_id: str) -> None:
            if thread_id != "probe":
                noted.append((thread_id, change, run_id))
            loop.call_soon_threadsafe(heard.set)

        listener = CancelListener(store.database.conninfo, loop, lambda _t, _r: None, changed)
        while not heard.is_set():  # notify until the listener's thread has connected and hears
            await store.worker.run(_probe(store), read=False)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(heard.wait(), 0.2)
        heard.clear()

    def opened() -> None:
        with store.worker.transaction() as (conn, now):
            for thread_id in ("t_a", "t_b", "t_c"):
                open_log(conn, thread_id, run_id=f"r_{thread_id}", request_id="q", incarnation="i", now=now)

    await store.worker.run(opened, read=False)
    data = pack([(0, b"first"), (1, b"second")])
    outcomes = await store.logs.append(
        [
            ("t_a", LogWrite("r_t_a", after=-1, last=1, data=data, count=2)),
            ("t_b", LogWrite("r_t_b", after=5, last=7, data=data, count=2)),  # not where the row is
            ("t_c", LogWrite("r_t_c", after=-1, last=1, data=data, count=2)),
        ]
    )
    assert outcomes[0] is False and outcomes[2] is False, "written; no cancel asked"
    moved = outcomes[1]
    assert isinstance(moved, LogMoved) and moved.row is not None and moved.row.last_sequence == -1
    for thread_id, written in (("t_a", 1), ("t_b", -1), ("t_c", 1)):
        row, got = await store.logs.read(thread_id, f"r_{thread_id}", after=-1)
        assert row is not None and row.last_sequence == written
        assert got == ([(0, b"first"), (1, b"second")] if written == 1 else [])
    if listener is not None:
        while len(noted) < 2:
            await asyncio.wait_for(heard.wait(), 30)
            heard.clear()
        listener.close()
        assert sorted(noted) == [("t_a", None, "r_t_a"), ("t_c", None, "r_t_c")], "one note, both logs"


_NOTIFY_PROBE = Statement(text("SELECT pg_notify('threadline_thread', '[\"probe\",0,\"\",-1]')"))


def _probe(store: ThreadStore) -> Callable[[], None]:
    def probe() -> None:
        with store.worker.transaction() as (conn, _now):
            _NOTIFY_PROBE.run(conn, {})

    return probe


async def test_sqlite_appends_skip_the_fsync_that_commits_keep(tmp_path: Path) -> None:
    database = await open_database("sqlite", str(tmp_path / "threads.db"))
    store = ThreadStore(database, replica="test")
    synchronous = Statement(text("PRAGMA synchronous"))

    def level(*, relaxed: bool) -> int:
        with store.worker.transaction(relaxed=relaxed) as (conn, _now):
            return int(synchronous.run(conn, {})[0][0])

    try:  # FULL (2) for a durable commit, NORMAL (1) for appends alone, then FULL again
        for relaxed, expected in ((False, 2), (True, 1), (False, 2)):
            work = functools.partial(level, relaxed=relaxed)
            assert await store.worker.run(work, read=False, relaxed=relaxed) == expected
    finally:
        store.close()
        await database.close()
