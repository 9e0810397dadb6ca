"""Live runs (LIVE §2): the attempt's event log, `JoinThreadRun`, attached retries, `WatchThread`.

Real `threadline serve` processes on real stores: one process on an SQLite file, two processes sharing
that file, and two replicas on one PostgreSQL database. A run is held mid-way by the crash agent's gate
(`tests/thread_agents.py`), so a test joins, retries or kills its holder while it is known to be running;
the tool log counts what ran. Every join of an attempt must carry the same events, byte for byte, as the
stream of its first caller.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import PgStore, refusal
from test_thread_replicas import Replica, start_replicas
from thread_agents import AGENT_NAME, executions
from threadline.v1 import (
    events_pb2,
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
)
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
DEADLINE = 60.0
HELD = "use:plain crash:tool:write_note"
"""The crash agent's run blocks inside `write_note` until its replica's gate opens."""


# -- helpers -------------------------------------------------------------------------------------------


def spec(thread_id: str, request_id: str, text: str) -> ts.ThreadRunSpec:
    return ts.ThreadRunSpec(thread_id=thread_id, request_id=request_id, text=text)


def stub_of(replica: Replica) -> ThreadServiceStub:
    return ThreadServiceStub(grpc.aio.insecure_channel(replica.address))


async def create(stub: ThreadServiceStub, thread_id: str, agent: str = AGENT_NAME) -> None:
    await stub.CreateThread(ts.CreateThreadRequest(thread_id=thread_id, agent=agent))


async def events(call: Any) -> list[events_pb2.RunEvent]:
    """Every event of a stream to its end (its error raised)."""
    out: list[events_pb2.RunEvent] = []
    while (response := await asyncio.wait_for(call.read(), DEADLINE)) is not grpc.aio.EOF:
        out.extend(response.events) if len(response.events) else out.append(response.event)
    return out


async def until(call: Any, kind: str) -> list[events_pb2.RunEvent]:
    """The events of a stream up to and including the first of `kind`."""
    out: list[events_pb2.RunEvent] = []
    while True:
        response = await asyncio.wait_for(call.read(), DEADLINE)
        assert response is not grpc.aio.EOF, f"the stream ended before {kind}"
        out.append(response.event)
        if response.event.WhichOneof("event") == kind:
            return out


def wire(received: list[events_pb2.RunEvent]) -> list[bytes]:
    return [event.SerializeToString() for event in received]


async def join(stub: ThreadServiceStub, thread_id: str, **fields: Any) -> list[events_pb2.RunEvent]:
    return await events(
        stub.JoinThreadRun(ts.JoinThreadRunRequest(thread_id=thread_id, **fields), timeout=DEADLINE)
    )


async def join_refused(
    stub: ThreadServiceStub, thread_id: str, **fields: Any
) -> tuple[Any, str, dict[str, str]]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await join(stub, thread_id, **fields)
    return refusal(caught.value)


async def wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not await predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def _pair(url: str, env: dict[str, str], tmp_path: Path) -> AsyncIterator[list[Replica]]:
    replicas = await asyncio.to_thread(start_replicas, url, env, tmp_path, 2, lease_ttl=3)
    yield replicas
    for replica in replicas:
        replica.close()


@pytest.fixture
async def sqlite_pair(tmp_path: Path) -> AsyncIterator[list[Replica]]:
    """Two server processes on one SQLite file (they see each other's writes by the 250 ms poll)."""
    async for replicas in _pair(f"sqlite:{tmp_path / 'threads.sqlite3'}", {}, tmp_path):
        yield replicas


@pytest.fixture
async def pg_pair(pg_store: PgStore, tmp_path: Path) -> AsyncIterator[list[Replica]]:
    """Two replicas on one PostgreSQL database (NOTIFY and the 1 s poll)."""
    async for replicas in _pair(pg_store.url, pg_store.env, tmp_path):
        yield replicas


@pytest.fixture(params=["sqlite", "postgresql"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Replica]]:
    """Both kinds of pair, one per test run."""
    if request.param == "sqlite":
        url, env = f"sqlite:{tmp_path / 'threads.sqlite3'}", {}
    else:
        store: PgStore = request.getfixturevalue("pg_store")
        url, env = store.url, store.env
    async for replicas in _pair(url, env, tmp_path):
        yield replicas


# -- one process -----------------------------------------------------------------------------------------


async def test_a_join_replays_a_finished_attempt_exactly_and_ends_with_its_result(
    sqlite_pair: list[Replica],
) -> None:
    holder = sqlite_pair[0]
    holder.gate.touch()  # nothing blocks
    stub = stub_of(holder)
    await create(stub, "thread_finished", agent="default")
    first = await events(
        stub.StreamThreadRun(
            ts.StreamThreadRunRequest(spec=spec("thread_finished", "r1", "lookup tea")), timeout=DEADLINE
        )
    )
    assert first[-1].WhichOneof("event") == "result" and first[-2].WhichOneof("event") == "thread_committed"
    run_id = first[0].run_id
    assert wire(await join(stub, "thread_finished", run_id=run_id)) == wire(first)
    assert wire(await join(stub, "thread_finished", request_id="r1")) == wire(first)
    assert wire(await join(stub, "thread_finished")) == wire(first), "neither id: the latest attempt"
    k = len(first) // 2
    assert wire(await join(stub, "thread_finished", run_id=run_id, after_sequence=k)) == wire(first[k + 1 :])
    packed = await join(stub, "thread_finished", run_id=run_id, max_events_per_message=64)
    assert wire(packed) == wire(first)
    # The other process on the same file reads the same log.
    assert wire(await join(stub_of(sqlite_pair[1]), "thread_finished", run_id=run_id)) == wire(first)

    code, reason, meta = await join_refused(stub, "thread_finished", run_id="run-" + "0" * 32)
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND")
    code, reason, meta = await join_refused(stub, "thread_finished", run_id=run_id, request_id="other")
    assert (code, reason, meta["field"]) == (grpc.StatusCode.INVALID_ARGUMENT, "INPUT_INVALID", "request_id")
    code, reason, _ = await join_refused(stub, "thread_nothing_here")
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "THREAD_NOT_FOUND")
    await create(stub, "thread_norun", agent="default")
    code, reason, _ = await join_refused(stub, "thread_norun")
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND")


async def test_the_store_info_tells_the_event_log_options(sqlite_pair: list[Replica]) -> None:
    async with grpc.aio.insecure_channel(sqlite_pair[0].address) as channel:
        info = await harness_service_pb2_grpc.HarnessServiceStub(channel).GetServerInfo(
            harness_service_pb2.GetServerInfoRequest()
        )
    store = info.thread_store
    assert store.event_log and store.event_log_max_bytes == 32 * 1024 * 1024
    assert store.event_retention.seconds == 86400


# -- live, on every store --------------------------------------------------------------------------------


async def test_a_live_run_is_joined_elsewhere_and_a_retry_attaches(
    pair: list[Replica],
) -> None:
    """The holder's first caller, its attached retries (`StreamThreadRun` from 0, `RunThread` to the
    result) and joins on both processes receive identical events; the tool ran once."""
    holder, other = pair
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_live")
    first_call = a.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_live", "live", HELD)), timeout=DEADLINE
    )
    head = await until(first_call, "tool_call")  # the run is inside write_note now
    await holder.wait_for_marker("tool:write_note")
    run_id = head[0].run_id
    # Joins see written events only: the holder appends within its window, so the tool call arrives.
    joined_here = a.JoinThreadRun(
        ts.JoinThreadRunRequest(thread_id="thread_live", run_id=run_id), timeout=DEADLINE
    )
    joined_there = b.JoinThreadRun(
        ts.JoinThreadRunRequest(thread_id="thread_live", request_id="live"), timeout=DEADLINE
    )
    assert wire(await until(joined_there, "tool_call")) == wire(head)
    attached = b.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_live", "live", HELD)), timeout=DEADLINE
    )
    assert wire(await until(attached, "tool_call")) == wire(head), "a retry attaches from sequence 0"
    waited = asyncio.ensure_future(
        b.RunThread(ts.RunThreadRequest(spec=spec("thread_live", "live", HELD)), timeout=DEADLINE)
    )
    await asyncio.sleep(0.3)
    assert not waited.done(), "RunThread's retry waits for the running attempt"
    holder.gate.touch()
    rest = await events(first_call)
    whole = head + rest
    assert whole[-1].WhichOneof("event") == "result"
    assert [e.sequence for e in whole] == list(range(len(whole)))
    assert wire(await events(joined_here)) == wire(whole)
    assert wire(head + await events(joined_there)) == wire(whole)
    assert wire(head + await events(attached)) == wire(whole)
    result = await waited
    assert not result.replayed and result.result.run_id == run_id
    assert result.result.status == run_pb2.RUN_STATUS_COMPLETED
    ran = [*executions(holder.log, "write_note").values(), *executions(other.log, "write_note").values()]
    assert ran == [1], "one call of write_note, executed once, by the holder"


async def test_kill_9_of_the_holder_ends_a_join_elsewhere_with_run_attempt_lost(
    pair: list[Replica],
) -> None:
    holder, other = pair
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_lost")
    call = a.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_lost", "lost", HELD)), timeout=DEADLINE
    )
    head = await until(call, "tool_call")
    await holder.wait_for_marker("tool:write_note")
    joined = b.JoinThreadRun(
        ts.JoinThreadRunRequest(thread_id="thread_lost", request_id="lost"), timeout=DEADLINE
    )
    assert wire(await until(joined, "tool_call")) == wire(head)
    await holder.killed()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await events(joined)
    code, reason, meta = refusal(caught.value)
    assert (code, reason) == (grpc.StatusCode.ABORTED, "RUN_ATTEMPT_LOST")
    assert meta["run_id"] == head[0].run_id and meta["request_id"] == "lost"
    assert int(meta["last_sequence"]) >= head[-1].sequence and meta["request_status"] == "running"
    # Final: a later join of that attempt ends the same way, after the same events.
    code, reason, again = await join_refused(b, "thread_lost", run_id=head[0].run_id)
    assert reason == "RUN_ATTEMPT_LOST" and again["last_sequence"] == meta["last_sequence"]
    # A retry is the next attempt, on the replica that is left.
    other.gate.touch()
    retried = await b.RunThread(ts.RunThreadRequest(spec=spec("thread_lost", "lost", HELD)), timeout=DEADLINE)
    assert retried.result.run_id != head[0].run_id and not retried.replayed
    # The join changed nothing of what ran: write_note started once, on the killed holder, and its
    # recovery (the default tool recovery) did not run it again.
    assert list(executions(holder.log, "write_note").values()) == [1]
    assert executions(other.log, "write_note") == {}


async def test_kill_9_of_the_holder_just_after_its_terminal_commit_leaves_a_complete_log(
    pair: list[Replica],
) -> None:
    """The terminal commit writes the rest of the log with it: a join elsewhere replays every event
    through the terminal `thread_committed` and the `result`, and nothing follows."""
    holder, other = pair
    holder.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_ended")
    call = a.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_ended", "ended", HELD)), timeout=DEADLINE
    )
    whole = await until(call, "result")  # the terminal commit landed before its result was sent
    await holder.killed()
    assert whole[-2].WhichOneof("event") == "thread_committed"
    assert wire(await join(b, "thread_ended", run_id=whole[0].run_id)) == wire(whole)
    assert list(executions(holder.log, "write_note").values()) == [1]


async def test_kill_9_of_the_joiners_replica_and_a_join_elsewhere_continues_after_its_last_event(
    pair: list[Replica],
) -> None:
    """The run goes on; a join on the holder from the last sequence the dead joiner received continues
    with no gap and no repeat; the tool ran once."""
    holder, joiner = pair
    a, b = stub_of(holder), stub_of(joiner)
    await create(a, "thread_joiner")
    first = a.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_joiner", "joiner", HELD)), timeout=DEADLINE
    )
    head = await until(first, "tool_call")
    await holder.wait_for_marker("tool:write_note")
    received = await until(
        b.JoinThreadRun(ts.JoinThreadRunRequest(thread_id="thread_joiner", run_id=head[0].run_id)),
        "tool_call",
    )
    await joiner.killed()
    again = a.JoinThreadRun(
        ts.JoinThreadRunRequest(
            thread_id="thread_joiner", run_id=head[0].run_id, after_sequence=received[-1].sequence
        ),
        timeout=DEADLINE,
    )
    holder.gate.touch()
    whole = head + await events(first)
    assert wire(received + await events(again)) == wire(whole)
    assert list(executions(holder.log, "write_note").values()) == [1]


async def test_a_holder_stalled_past_its_lease_is_lost_for_its_joiners_and_writes_nothing_more(
    pair: list[Replica],
) -> None:
    """SIGSTOP of the holder past TTL x 4/3: a join elsewhere ends RUN_ATTEMPT_LOST (the joiner marked the
    log lost); after SIGCONT the holder's stream ends LEASE_LOST and its log is as the joiner left it."""
    holder, other = pair
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_stalled")
    call = a.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_stalled", "st", HELD)), timeout=DEADLINE
    )
    head = await until(call, "tool_call")
    await holder.wait_for_marker("tool:write_note")
    joined = b.JoinThreadRun(
        ts.JoinThreadRunRequest(thread_id="thread_stalled", request_id="st"), timeout=DEADLINE
    )
    assert wire(await until(joined, "tool_call")) == wire(head)
    holder.stalled()
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await events(joined)
    finally:
        holder.gate.touch()  # once resumed, the tool returns and the holder tries to go on
        holder.resumed()
    code, reason, lost = refusal(caught.value)
    assert (code, reason) == (grpc.StatusCode.ABORTED, "RUN_ATTEMPT_LOST")
    with pytest.raises(grpc.aio.AioRpcError) as stopped:
        await events(call)
    assert refusal(stopped.value)[1] == "LEASE_LOST"
    code, reason, again = await join_refused(b, "thread_stalled", run_id=head[0].run_id)
    assert reason == "RUN_ATTEMPT_LOST" and again["last_sequence"] == lost["last_sequence"]
    thread = await b.GetThread(ts.GetThreadRequest(thread_id="thread_stalled"))
    assert thread.thread.revision == 1 or thread.thread.head.run_id == head[0].run_id


async def test_a_join_keeps_following_when_its_replicas_listener_connection_is_killed(
    pg_store: PgStore, tmp_path: Path
) -> None:
    """`pg_terminate_backend` of every listening connection mid-join: the 1 s poll still wakes the
    follower, and the join gets every event with no gap."""
    holder, other = await asyncio.to_thread(
        start_replicas, pg_store.url, pg_store.env, tmp_path, 2, lease_ttl=3
    )
    try:
        a, b = stub_of(holder), stub_of(other)
        await create(a, "thread_unheard")
        call = a.StreamThreadRun(
            ts.StreamThreadRunRequest(spec=spec("thread_unheard", "u", HELD)), timeout=DEADLINE
        )
        head = await until(call, "tool_call")
        await holder.wait_for_marker("tool:write_note")
        joined = b.JoinThreadRun(
            ts.JoinThreadRunRequest(thread_id="thread_unheard", request_id="u"), timeout=DEADLINE
        )
        assert wire(await until(joined, "tool_call")) == wire(head)
        database = pg_store.url.rsplit("/", 1)[-1]
        with pg_store.cluster.connect(database) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND query LIKE 'LISTEN%%'",
                (database,),
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        holder.gate.touch()
        whole = head + await events(call)
        assert wire(head + await events(joined)) == wire(whole)
    finally:
        holder.close()
        other.close()


# -- watch -------------------------------------------------------------------------------------------


async def test_a_watch_on_another_process_names_each_change(
    pair: list[Replica],
) -> None:
    holder, other = pair
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_watched")
    watch = b.WatchThread(ts.WatchThreadRequest(thread_id="thread_watched"), timeout=DEADLINE)
    first = await asyncio.wait_for(watch.read(), DEADLINE)
    assert list(first.changes) == [ts.THREAD_CHANGE_SNAPSHOT] and first.thread.revision == 1
    seen: set[int] = set()
    call = a.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_watched", "w", HELD)), timeout=DEADLINE
    )
    await until(call, "tool_call")
    started = await asyncio.wait_for(watch.read(), DEADLINE)
    seen.update(started.changes)
    assert ts.THREAD_CHANGE_RUN_STARTED in seen and started.thread.lease.run_id
    holder.gate.touch()
    await events(call)
    last = started
    while ts.THREAD_CHANGE_RUN_ENDED not in seen:
        last = await asyncio.wait_for(watch.read(), DEADLINE)
        assert last.change_sequence > started.change_sequence
        seen.update(last.changes)
    assert ts.THREAD_CHANGE_COMMITTED in seen and not last.thread.HasField("lease")
    await a.DeleteThread(ts.DeleteThreadRequest(thread_id="thread_watched"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        while True:
            await asyncio.wait_for(watch.read(), DEADLINE)
    assert refusal(caught.value)[1] == "THREAD_NOT_FOUND"


async def test_a_watcher_sees_a_crashed_holders_lease_expire(pg_pair: list[Replica]) -> None:
    holder, other = pg_pair
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_expiring")
    call = a.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_expiring", "e", HELD)), timeout=DEADLINE
    )
    await until(call, "tool_call")
    await until(call, "thread_committed")  # the tool's dispatch, with its response: the last commit
    watch = b.WatchThread(ts.WatchThreadRequest(thread_id="thread_expiring"), timeout=DEADLINE)
    assert (await watch.read()).thread.HasField("lease")
    await holder.killed()
    changed = await asyncio.wait_for(watch.read(), DEADLINE)
    assert list(changed.changes) == [ts.THREAD_CHANGE_LEASE_EXPIRED]
    assert changed.thread.recovery_pending


# -- bounds, retention, options -------------------------------------------------------------------------------


async def test_past_the_soft_cap_deltas_are_omitted_and_markers_cover_every_gap(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    server = await asyncio.to_thread(_one, url, tmp_path, "--event-log-max-bytes", str(1 << 20))
    try:
        stub = stub_of(server)
        await create(stub, "thread_big", agent="default")
        prompt = "y" * 8 * 12_000  # ~12 000 deltas of ~80 bytes: past the 256 KiB soft cap
        first = await events(
            stub.StreamThreadRun(
                ts.StreamThreadRunRequest(spec=spec("thread_big", "big", prompt)), timeout=DEADLINE
            )
        )
        assert [e.sequence for e in first] == list(range(len(first))), "the first caller gets everything"
        joined = await join(stub, "thread_big", request_id="big")
        assert sum(len(e.SerializeToString()) for e in joined) <= 1 << 20
        markers = [e for e in joined if e.WhichOneof("event") == "events_omitted"]
        assert markers and {m.events_omitted.reason for m in markers} == {
            events_pb2.OMISSION_REASON_DELTAS_COALESCED
        }
        covered: list[int] = []
        for event in joined:
            if event.WhichOneof("event") == "events_omitted":
                covered.extend(range(event.events_omitted.first_sequence, event.sequence + 1))
            else:
                covered.append(event.sequence)
        assert covered == list(range(len(first))), "every number, once: an event or inside a marker"
        by_sequence = {e.sequence: e for e in first}
        for event in joined:
            if event.WhichOneof("event") != "events_omitted":
                assert event == by_sequence[event.sequence]
        assert any(e.WhichOneof("event") == "part_end" for e in joined), "part_end carries the whole part"
    finally:
        server.close()


def _one(url: str, tmp_path: Path, *args: str) -> Replica:
    from test_thread_replicas import start_replica

    return start_replica(url, {}, tmp_path / "one", *args, lease_ttl=3)


async def test_expired_logs_are_swept_and_the_result_stays_readable(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    server = await asyncio.to_thread(_one, url, tmp_path, "--event-retention", "1", "--sweep-interval", "0.2")
    try:
        stub = stub_of(server)
        await create(stub, "thread_old", agent="default")
        done = await stub.RunThread(
            ts.RunThreadRequest(spec=spec("thread_old", "old", "hello")), timeout=DEADLINE
        )

        async def expired() -> bool:
            try:
                await join(stub, "thread_old", request_id="old")
            except grpc.aio.AioRpcError as error:
                code, reason, meta = refusal(error)
                assert (code, reason, meta["why"]) == (
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "RUN_EVENTS_EXPIRED",
                    "retention",
                )
                assert meta["revision"] == str(done.revision) and meta["request_status"] == "completed"
                return True
            return False

        await wait_for(expired, "the sweeper never deleted the log")
        again = await stub.RunThread(
            ts.RunThreadRequest(spec=spec("thread_old", "old", "hello")), timeout=DEADLINE
        )
        assert again.replayed and again.revision == done.revision
    finally:
        server.close()


async def test_with_the_log_off_joins_are_unimplemented_and_retries_busy(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    server = await asyncio.to_thread(_one, url, tmp_path, "--event-log", "off")
    try:
        stub = stub_of(server)
        await create(stub, "thread_off")
        call = stub.StreamThreadRun(
            ts.StreamThreadRunRequest(spec=spec("thread_off", "off", HELD)), timeout=DEADLINE
        )
        await until(call, "tool_call")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await join(stub, "thread_off")
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(grpc.aio.AioRpcError) as busy:
            await stub.RunThread(ts.RunThreadRequest(spec=spec("thread_off", "off", HELD)), timeout=DEADLINE)
        assert refusal(busy.value)[1] == "THREAD_BUSY", "an attempt without a log cannot be attached"
        server.gate.touch()
        await events(call)
    finally:
        server.close()


async def test_followers_beyond_the_limit_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    server = await asyncio.to_thread(_one, url, tmp_path, "--max-followers", "1")
    try:
        stub = stub_of(server)
        await create(stub, "thread_crowded", agent="default")
        watch = stub.WatchThread(ts.WatchThreadRequest(thread_id="thread_crowded"), timeout=DEADLINE)
        await watch.read()
        code, reason, meta = await join_refused(stub, "thread_crowded")
        assert (code, reason, meta["limit"]) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "FOLLOWER_LIMIT_REACHED",
            "1",
        )
        watch.cancel()
        await asyncio.sleep(0.2)
        code, reason, _ = await join_refused(stub, "thread_crowded")
        assert reason == "RUN_NOT_FOUND", "the slot was given back"
    finally:
        server.close()


async def test_a_watcher_that_reads_nothing_is_sent_fewer_newer_snapshots(tmp_path: Path) -> None:
    """Changes that arrive while a watcher is not reading merge into its next message: through hundreds of
    changes it is sent what its flow-control window holds plus the newest snapshot, never a backlog."""
    url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    server = await asyncio.to_thread(_one, url, tmp_path)
    labels = {f"k{i}": "v" * 250 for i in range(32)}  # about 8 KiB a message: few fit in 64 KiB
    try:
        stub = stub_of(server)
        await stub.CreateThread(
            ts.CreateThreadRequest(thread_id="thread_busy", agent="default", labels=labels)
        )
        options = [("grpc.http2.bdp_probe", 0)]  # the receive window stays at its initial 64 KiB
        async with grpc.aio.insecure_channel(server.address, options=options) as channel:
            watch = ThreadServiceStub(channel).WatchThread(
                ts.WatchThreadRequest(thread_id="thread_busy"), timeout=DEADLINE * 3
            )
            first = await watch.read()
            for turn in range(100):  # a Begin and its commits each: hundreds of changes
                await stub.RunThread(
                    ts.RunThreadRequest(spec=spec("thread_busy", f"t{turn}", "hello")), timeout=DEADLINE
                )
            final = (await stub.GetThread(ts.GetThreadRequest(thread_id="thread_busy"))).thread
            received = [first]
            while received[-1].thread.revision != final.revision or received[-1].thread.HasField("lease"):
                received.append(await asyncio.wait_for(watch.read(), DEADLINE))
            watch.cancel()
    finally:
        server.close()
    sequences = [message.change_sequence for message in received]
    assert sequences == sorted(set(sequences)), "each message newer than the last"
    changes = received[-1].change_sequence - first.change_sequence
    assert changes >= 200, "a Begin and at least one commit a turn"
    assert len(received) <= 40, f"{len(received)} messages for {changes} changes: a backlog, not the newest"


async def test_500_followers_of_one_run_receive_the_same_events(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    server = await asyncio.to_thread(_one, url, tmp_path)
    try:
        stub = stub_of(server)
        await create(stub, "thread_crowd")
        call = stub.StreamThreadRun(
            ts.StreamThreadRunRequest(spec=spec("thread_crowd", "c", HELD)), timeout=DEADLINE
        )
        head = await until(call, "tool_call")
        await server.wait_for_marker("tool:write_note")
        async with grpc.aio.insecure_channel(server.address) as channel:
            followers = ThreadServiceStub(channel)
            joins = [
                followers.JoinThreadRun(
                    ts.JoinThreadRunRequest(thread_id="thread_crowd", run_id=head[0].run_id),
                    timeout=DEADLINE * 2,
                )
                for _ in range(500)
            ]
            prefixes = await asyncio.gather(*(until(join, "tool_call") for join in joins))
            server.gate.touch()
            whole = head + await events(call)
            rests = await asyncio.gather(*(events(join) for join in joins))
    finally:
        server.close()
    assert whole[-1].WhichOneof("event") == "result"
    for prefix, rest in zip(prefixes, rests, strict=True):
        assert wire(prefix + rest) == wire(whole)
