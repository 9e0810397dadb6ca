"""Busy strategies (LIVE §4.1–§4.3): `BUSY_STRATEGY_ENQUEUE`, `BUSY_STRATEGY_INTERRUPT`, the durable queue.

Real `threadline serve` processes on both stores (two processes on one SQLite file, two replicas on one
PostgreSQL database), the crash agent's gates holding a run where a test needs it. What ran is read from
the thread itself (each checkpoint names the request that made it) and from each replica's tool log, so
"each request ran once, in acceptance order" is shown by what the tools executed and what was committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
import test_background_runs as background
from conftest import refusal, spawn_serve
from test_background_runs import AT_MODEL, ended, full, lease_expired, pair, prompts, replica, start
from test_thread_crashes import SHIPPED, answers_to, head_history, only_answer
from test_thread_joins import DEADLINE, HELD, create, events, spec, stub_of
from test_thread_replicas import Replica, start_replicas
from thread_agents import executions
from threadline.v1 import deferred_pb2, run_pb2, thread_pb2, thread_service_pb2
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
ENQUEUE = ts.BUSY_STRATEGY_ENQUEUE
INTERRUPT = ts.BUSY_STRATEGY_INTERRUPT
PLAIN = "use:plain"
"""A queued turn: the model calls `write_note` once (the gate is open by then), then answers."""


def queued_spec(
    thread_id: str, request_id: str, text: str = PLAIN, strategy: int = ENQUEUE
) -> ts.ThreadRunSpec:
    return ts.ThreadRunSpec(thread_id=thread_id, request_id=request_id, text=text, busy_strategy=strategy)


async def enqueue(
    stub: ThreadServiceStub, thread_id: str, request_id: str, strategy: int = ENQUEUE
) -> ts.StartThreadRunResponse:
    answer: ts.StartThreadRunResponse = await stub.StartThreadRun(
        ts.StartThreadRunRequest(spec=queued_spec(thread_id, request_id, strategy=strategy)), timeout=DEADLINE
    )
    return answer


async def replayed_status(stub: ThreadServiceStub, thread_id: str, request_id: str, text: str) -> int:
    """How the request ended, from a `StartThreadRun` retry's replay (REJECT, as it was sent)."""
    again = await start(stub, thread_id, request_id, text)
    assert again.replayed, again
    return again.status


async def thread_of(stub: ThreadServiceStub, thread_id: str) -> thread_pb2.Thread:
    thread: thread_pb2.Thread = (await stub.GetThread(ts.GetThreadRequest(thread_id=thread_id))).thread
    return thread


async def made_by(stub: ThreadServiceStub, thread_id: str) -> list[str]:
    """The requests that committed the thread's checkpoints, oldest first, each once (in the order
    their runs committed: a run's several commits are one entry)."""
    listed = await stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread_id, page_size=100))
    order: list[str] = []
    for checkpoint in reversed(listed.checkpoints):
        if checkpoint.request_id and (not order or order[-1] != checkpoint.request_id):
            order.append(checkpoint.request_id)
    return order


def notes(*replicas_: Replica) -> int:
    """How many times `write_note` started, over the replicas' tool logs (each call once, or a repeat)."""
    counts = [n for r in replicas_ for n in executions(r.log, "write_note").values()]
    assert all(n == 1 for n in counts), f"a note ran twice: {counts}"
    return len(counts)


async def idle(stub: ThreadServiceStub, thread_id: str) -> thread_pb2.Thread:
    """Wait until the thread has nothing running and nothing queued."""
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while True:
        thread = await thread_of(stub, thread_id)
        if thread.status != thread_pb2.THREAD_STATUS_RUNNING and not thread.queue:
            return thread
        assert asyncio.get_running_loop().time() < deadline, f"the queue never drained: {thread}"
        await asyncio.sleep(0.1)


store = background.store
"""Each test on an SQLite file shared by the replicas, and on one PostgreSQL database."""
replicas = background.replicas


# -- the decision table (LIVE §4.1) ----------------------------------------------------------------------


async def test_enqueue_on_a_free_thread_runs_at_once(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    only = await replica(replicas, store, tmp_path / "r0")
    only.gate.touch()
    stub = stub_of(only)
    await create(stub, "thread_free")
    done = await stub.RunThread(ts.RunThreadRequest(spec=queued_spec("thread_free", "now")), timeout=DEADLINE)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED and not done.replayed
    assert (await made_by(stub, "thread_free")) == ["now"] and notes(only) == 1


async def test_requests_enqueued_behind_a_run_wait_then_run_once_each_in_acceptance_order(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """Accepted on both replicas while the holder runs; REJECT is refused meanwhile; the queue drains
    in order by hand-off, each request once, with no client."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_q")
    first = await start(a, "thread_q", "first", HELD)
    await holder.wait_for_marker("tool:write_note")
    accepted = [await enqueue(stub, "thread_q", f"q{i}") for i, stub in enumerate((b, a, b), start=1)]
    assert [(r.status, r.queue_position, r.request_id) for r in accepted] == [
        (thread_pb2.THREAD_RUN_STATUS_QUEUED, i, f"q{i}") for i in (1, 2, 3)
    ]
    thread = await thread_of(b, "thread_q")
    assert all(r.run_id.startswith("run-") and r.revision == thread.revision for r in accepted)
    assert thread.status == thread_pb2.THREAD_STATUS_RUNNING and thread.lease.request_id == "first"
    assert [(q.request_id, q.run_id, q.kind) for q in thread.queue] == [
        (r.request_id, r.run_id, thread_pb2.QUEUED_RUN_KIND_ENQUEUED) for r in accepted
    ]
    again = await enqueue(a, "thread_q", "q2")
    assert (again.status, again.run_id, again.queue_position) == (
        thread_pb2.THREAD_RUN_STATUS_QUEUED,
        accepted[1].run_id,
        2,
    ), "a retry of a queued request answers the same"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await start(b, "thread_q", "late", "hello")
    code, reason, meta = refusal(caught.value)
    assert (code, reason, meta["request_id"], meta["queue_length"]) == (
        grpc.StatusCode.ABORTED,
        "THREAD_BUSY",
        "first",
        "3",
    )
    holder.gate.touch()
    for request_id in ("first", "q1", "q2", "q3"):
        assert (request_id, await ended(b, "thread_q", request_id)) == (request_id, "result")
    assert (await made_by(b, "thread_q")) == ["first", "q1", "q2", "q3"]
    assert notes(holder, other) == 4, "write_note ran once per request"
    done = await enqueue(a, "thread_q", "q3")  # a retry, with the same strategy (it is in the digest)
    assert (
        done.replayed
        and done.status == thread_pb2.THREAD_RUN_STATUS_COMPLETED
        and done.result.run_id == accepted[2].run_id
    )
    assert first.status == thread_pb2.THREAD_RUN_STATUS_RUNNING
    # Once drained, REJECT runs at once again.
    await idle(b, "thread_q")
    plain = await b.RunThread(ts.RunThreadRequest(spec=spec("thread_q", "after", "hello")), timeout=DEADLINE)
    assert plain.result.status == run_pb2.RUN_STATUS_COMPLETED


async def test_a_queued_stream_follows_its_run_from_sequence_0_once_it_starts(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_sq")
    await start(a, "thread_sq", "first", HELD)
    await holder.wait_for_marker("tool:write_note")
    call = b.StreamThreadRun(
        ts.StreamThreadRunRequest(spec=queued_spec("thread_sq", "waits")), timeout=DEADLINE
    )
    waited = asyncio.ensure_future(
        a.RunThread(ts.RunThreadRequest(spec=queued_spec("thread_sq", "waits")), timeout=DEADLINE)
    )
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not (await thread_of(a, "thread_sq")).queue:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    [queued] = (await thread_of(a, "thread_sq")).queue
    assert not waited.done(), "RunThread waits while its request is queued"
    holder.gate.touch()
    streamed = await events(call)
    assert [e.sequence for e in streamed] == list(range(len(streamed)))
    assert {e.run_id for e in streamed} == {queued.run_id}
    assert streamed[0].WhichOneof("event") == "run_started" and streamed[-1].WhichOneof("event") == "result"
    assert streamed[-1].result.request_id == "waits"
    result = await waited
    assert (
        result.result.run_id == queued.run_id and result.result.output_json == streamed[-1].result.output_json
    )
    assert (await made_by(a, "thread_sq")) == ["first", "waits"] and notes(holder, other) == 2


async def test_the_queue_is_bounded_and_a_queued_request_can_be_cancelled_before_it_runs(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    only = await replica(replicas, store, tmp_path / "r0", "--max-queued-runs", "2")
    stub = stub_of(only)
    await create(stub, "thread_bound")
    await start(stub, "thread_bound", "first", HELD)
    await only.wait_for_marker("tool:write_note")
    one, two = await enqueue(stub, "thread_bound", "one"), await enqueue(stub, "thread_bound", "two")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await enqueue(stub, "thread_bound", "three")
    code, reason, meta = refusal(caught.value)
    assert (code, reason, meta["limit"], meta["queue_length"]) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "THREAD_QUEUE_FULL",
        "2",
        "2",
    )
    cancelled = await stub.CancelThreadRun(
        ts.CancelThreadRunRequest(thread_id="thread_bound", request_id="one")
    )
    assert cancelled.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED
    assert [q.request_id for q in (await thread_of(stub, "thread_bound")).queue] == ["two"]
    replay = await enqueue(stub, "thread_bound", "one")
    assert replay.replayed and replay.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED
    assert replay.run_id == one.run_id and replay.result.status == run_pb2.RUN_STATUS_CANCELLED
    assert replay.result.request_id == "one" and not replay.result.HasField("state")
    three = await enqueue(stub, "thread_bound", "three")  # room again
    assert three.queue_position == 2
    by_run = await stub.CancelThreadRun(
        ts.CancelThreadRunRequest(thread_id="thread_bound", run_id=three.run_id)
    )
    assert by_run.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED
    only.gate.touch()
    assert await ended(stub, "thread_bound", "two") == "result"
    await idle(stub, "thread_bound")
    assert (await made_by(stub, "thread_bound")) == ["first", "two"], "the cancelled requests never ran"
    assert notes(only) == 2
    assert two.queue_position == 2


async def test_a_suspended_head_holds_the_queue_until_its_answers_ran(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """ENQUEUE requests wait while the thread waits on answers (LIVE §4.2); the answers run ahead of
    them, and when that run ends the queue goes on."""
    only = await replica(replicas, store, tmp_path / "r0")
    stub = stub_of(only)
    await create(stub, "thread_held")
    batch = f"use:batch {AT_MODEL.split()[1]}"
    await start(stub, "thread_held", "asks", batch)
    await only.wait_for_marker("model")
    waiting = await enqueue(stub, "thread_held", "next")
    only.gate.touch()
    assert await ended(stub, "thread_held", "asks") == "result"
    thread = await thread_of(stub, "thread_held")
    assert thread.status == thread_pb2.THREAD_STATUS_SUSPENDED
    assert [q.request_id for q in thread.queue] == ["next"], "the queue waits for the answers"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await start(stub, "thread_held", "prompt", "hello")
    assert refusal(caught.value)[1:3] == ("THREAD_BUSY", refusal(caught.value)[2])
    assert (
        refusal(caught.value)[2]["request_id"] == "next"
        and refusal(caught.value)[2]["lease_expires_at"] == ""
    )
    answered = await stub.RunThread(
        ts.RunThreadRequest(
            spec=ts.ThreadRunSpec(
                thread_id="thread_held", request_id="answer", answers=answers_to(thread.pending)
            )
        ),
        timeout=DEADLINE,
    )
    assert answered.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert await ended(stub, "thread_held", "next") == "result"
    assert (await made_by(stub, "thread_held")) == ["asks", "answer", "next"]
    assert waiting.queue_position == 1


async def test_answers_on_a_running_thread_are_refused_not_queued(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    only = await replica(replicas, store, tmp_path / "r0")
    stub = stub_of(only)
    await create(stub, "thread_ans")
    await start(stub, "thread_ans", "first", HELD)
    await only.wait_for_marker("tool:write_note")
    # A ROLLBACK's answers would answer the batch X began from: X began from an idle head (LIVE §4.5).
    for strategy in (ENQUEUE, INTERRUPT, ts.BUSY_STRATEGY_ROLLBACK):
        answers = ts.ThreadRunSpec(
            thread_id="thread_ans", request_id=f"late-{strategy}", busy_strategy=strategy
        )
        answers.answers.calls.add(tool_call_id="call-1", value_json='"x"')
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.RunThread(ts.RunThreadRequest(spec=answers), timeout=DEADLINE)
        assert refusal(caught.value)[:2] == (grpc.StatusCode.FAILED_PRECONDITION, "THREAD_NOT_SUSPENDED")
    assert not (await thread_of(stub, "thread_ans")).queue
    only.gate.touch()
    assert await ended(stub, "thread_ans", "first") == "result"


# -- crashes and races (LIVE §4.8) --------------------------------------------------------------------------


async def test_kill_9_of_the_holder_with_three_queued_runs_each_once_in_order_on_the_other(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """The holder's attached request is superseded by the queue's head (a recovery run), then each of the
    three runs once, in acceptance order, with no client."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_k")
    call = a.StreamThreadRun(ts.StreamThreadRunRequest(spec=spec("thread_k", "attached", HELD)))
    await holder.wait_for_marker("tool:write_note")
    for request_id in ("k1", "k2", "k3"):
        await enqueue(b, "thread_k", request_id)
    await holder.killed()
    call.cancel()
    for request_id in ("k1", "k2", "k3"):
        assert await ended(b, "thread_k", request_id) == "result"
    assert (await made_by(b, "thread_k"))[-3:] == ["k1", "k2", "k3"]
    assert list(executions(holder.log, "write_note").values()) == [1]
    # k1 is a recovery run: its model request carries the killed write_note's interrupted result, which
    # the crash agent answers in text; k2 and k3 each write their note once, on the survivor.
    assert notes(other) == 2
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await b.RunThread(ts.RunThreadRequest(spec=spec("thread_k", "attached", HELD)), timeout=DEADLINE)
    assert refusal(caught.value)[1] == "REQUEST_INTERRUPTED", "the dead holder's request was superseded"


async def test_twenty_clients_enqueueing_through_two_replicas_each_run_once_in_queue_order(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """20 at once on a busy thread: 16 accepted (the default bound), 4 `THREAD_QUEUE_FULL`; the 16 run
    once each, in the order the queue accepted them."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    stubs = (stub_of(holder), stub_of(other))
    await create(stubs[0], "thread_20")
    await start(stubs[0], "thread_20", "first", HELD)
    await holder.wait_for_marker("tool:write_note")

    async def one(i: int) -> str:
        try:
            await enqueue(stubs[i % 2], "thread_20", f"c{i:02d}")
            return "queued"
        except grpc.aio.AioRpcError as error:
            return refusal(error)[1]

    outcomes = await asyncio.gather(*(one(i) for i in range(20)))
    assert sorted(outcomes) == ["THREAD_QUEUE_FULL"] * 4 + ["queued"] * 16
    order = [q.request_id for q in (await thread_of(stubs[1], "thread_20")).queue]
    assert len(order) == 16
    holder.gate.touch()
    for request_id in order:
        assert await ended(stubs[1], "thread_20", request_id) == "result"
    assert (await made_by(stubs[0], "thread_20")) == ["first", *order]
    assert notes(holder, other) == 17


# -- INTERRUPT (LIVE §4.3) ----------------------------------------------------------------------------------


async def test_interrupt_stops_the_holder_on_the_other_replica_and_runs_next_ahead_of_the_queue(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """Accepted on B while A's run holds the thread: queued first (ahead of an earlier ENQUEUE), A's run
    is stopped as a cancel stops it (PostgreSQL's note, or the holder's own log writes on SQLite) and
    ends CANCELLED, then the interrupting request runs, then the enqueued one."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_int")
    await start(a, "thread_int", "first", HELD)
    await holder.wait_for_marker("tool:write_note")
    later = await enqueue(b, "thread_int", "later")
    now = await enqueue(b, "thread_int", "now", INTERRUPT)
    assert (later.queue_position, now.status, now.queue_position) == (
        1,
        thread_pb2.THREAD_RUN_STATUS_QUEUED,
        1,
    )
    # Read before the stopped holder hands off, the queue is [now, later]; "now" may have started
    # already, leaving [later] (the order they ran in is checked on the checkpoints below).
    waiting = [(q.request_id, q.kind) for q in (await thread_of(b, "thread_int")).queue]
    expected = [
        ("now", thread_pb2.QUEUED_RUN_KIND_INTERRUPTING),
        ("later", thread_pb2.QUEUED_RUN_KIND_ENQUEUED),
    ]
    assert waiting in (expected, expected[1:])
    assert await ended(b, "thread_int", "first") == "result", "the holder stopped, with no gate opened"
    assert await replayed_status(b, "thread_int", "first", HELD) == thread_pb2.THREAD_RUN_STATUS_CANCELLED
    holder.gate.touch()  # the interrupting request may have started on the holder's replica
    for request_id in ("now", "later"):
        assert await ended(b, "thread_int", request_id) == "result"
    assert (await made_by(b, "thread_int")) == ["first", "now", "later"]
    assert list(executions(holder.log, "write_note").values())[:1] == [1]
    notes(holder, other)  # no call ran twice


async def test_interrupt_closes_a_lost_holders_request_cancelled_and_runs_at_once(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """A server-driven request whose next attempt is due, and an attached one whose server was lost,
    are each closed CANCELLED by the INTERRUPT's Begin (REJECT would be refused, or supersede the
    attached one INTERRUPTED); neither runs again."""
    holder = await replica(replicas, store, tmp_path / "r0")
    # The survivor's sweeper sleeps: the due attempt waits for the INTERRUPT, not for a sweep.
    other = await replica(replicas, store, tmp_path / "r1", "--sweep-interval", "3600")
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_bglost")
    await create(a, "thread_attlost")
    await start(a, "thread_bglost", "bg", HELD)
    await holder.wait_for_marker("tool:write_note")
    call = a.StreamThreadRun(ts.StreamThreadRunRequest(spec=spec("thread_attlost", "att", HELD)))
    await holder.wait_for_marker("tool:write_note", seen=1)
    await holder.killed()
    call.cancel()
    await lease_expired(b, "thread_bglost")
    await lease_expired(b, "thread_attlost")
    for thread_id, lost, text in (("thread_bglost", "bg", HELD), ("thread_attlost", "att", HELD)):
        done = await b.RunThread(
            ts.RunThreadRequest(spec=queued_spec(thread_id, "instead", strategy=INTERRUPT)), timeout=DEADLINE
        )
        assert done.result.status == run_pb2.RUN_STATUS_COMPLETED and not done.replayed
        assert await replayed_status(b, thread_id, lost, text) == thread_pb2.THREAD_RUN_STATUS_CANCELLED
        assert (await made_by(b, thread_id))[-1] == "instead"
    # Each lost run's note started once (the two threads' calls share their scripted call ID).
    assert sum(executions(holder.log, "write_note").values()) == 2
    notes(other)  # whatever the interrupting turns wrote, each call once


async def test_kill_9_of_the_holder_after_an_interrupt_was_accepted_runs_the_interrupt_once(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """The holder is stopped (SIGSTOP) before it can hear the INTERRUPT, then killed: the survivor's
    sweeper closes the old request CANCELLED once its lease expired and starts the interrupting one on
    its last commit; the old write_note ran once."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_ik")
    call = a.StreamThreadRun(ts.StreamThreadRunRequest(spec=spec("thread_ik", "old", HELD)))
    await holder.wait_for_marker("tool:write_note")
    holder.stalled()
    accepted = await enqueue(b, "thread_ik", "new", INTERRUPT)
    assert (accepted.status, accepted.queue_position) == (thread_pb2.THREAD_RUN_STATUS_QUEUED, 1)
    await holder.killed()
    call.cancel()
    assert await ended(b, "thread_ik", "new") == "result"
    retried = await b.RunThread(ts.RunThreadRequest(spec=spec("thread_ik", "old", HELD)), timeout=DEADLINE)
    assert retried.replayed and retried.result.status == run_pb2.RUN_STATUS_CANCELLED
    assert (await made_by(b, "thread_ik"))[-1] == "new"
    assert list(executions(holder.log, "write_note").values()) == [1]
    notes(other)


# -- ROLLBACK (LIVE §4.4) -----------------------------------------------------------------------------------

ROLLBACK = ts.BUSY_STRATEGY_ROLLBACK


async def kinds(stub: ThreadServiceStub, thread_id: str) -> list[tuple[int, int, str]]:
    """The thread's checkpoints, oldest first: revision, kind, request."""
    listed = await stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread_id, page_size=100))
    return [(c.revision, c.kind, c.request_id) for c in reversed(listed.checkpoints)]


async def test_rollback_stops_the_holder_on_the_other_replica_and_answers_again_from_where_it_began(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """A's run X is stopped (CANCELLED, its candidate committed and kept listed); the ROLLBACK's Begin
    copies the checkpoint X began from as a ROLLED_BACK head, and the new request runs on it: X's
    prompt is not in what it answers."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_rb")
    await a.RunThread(ts.RunThreadRequest(spec=spec("thread_rb", "before", "hello")), timeout=DEADLINE)
    began = (await thread_of(a, "thread_rb")).revision
    await start(a, "thread_rb", "x", HELD)
    await holder.wait_for_marker("tool:write_note")
    redo = await enqueue(b, "thread_rb", "redo", ROLLBACK)
    assert (redo.status, redo.queue_position) == (thread_pb2.THREAD_RUN_STATUS_QUEUED, 1)
    assert await ended(b, "thread_rb", "x") == "result"
    holder.gate.touch()  # the ROLLBACK may have started on the holder's replica
    assert await ended(b, "thread_rb", "redo") == "result"
    assert await replayed_status(b, "thread_rb", "x", HELD) == thread_pb2.THREAD_RUN_STATUS_CANCELLED
    listed = await kinds(b, "thread_rb")
    x_commits = [r for r, _kind, request in listed if request == "x"]
    assert x_commits and min(x_commits) == began + 1, "X's commits stay listed"
    [(copy, _kind, _)] = [c for c in listed if c[1] == thread_pb2.CHECKPOINT_KIND_ROLLED_BACK]
    assert copy == max(x_commits) + 1 and all(r > copy for r, _k, q in listed if q == "redo")
    got = await b.GetCheckpoint(ts.GetCheckpointRequest(thread_id="thread_rb", revision=copy))
    source = await b.GetCheckpoint(ts.GetCheckpointRequest(thread_id="thread_rb", revision=began))
    assert got.checkpoint.state.message_history.data == source.checkpoint.state.message_history.data
    assert prompts(await full(b, "thread_rb"), HELD) == 0, "X's input is gone from the head"
    assert prompts(await full(b, "thread_rb"), PLAIN) == 1


async def test_rollback_of_a_lost_holders_request_closes_it_cancelled_and_discards_it(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """No live lease: the ROLLBACK runs at once; its Begin closes the lost request CANCELLED and copies
    where it began (one ROLLED_BACK checkpoint), in one transaction."""
    holder = await replica(replicas, store, tmp_path / "r0")
    other = await replica(replicas, store, tmp_path / "r1", "--sweep-interval", "3600")
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_rblost")
    await start(a, "thread_rblost", "lost", HELD)
    await holder.wait_for_marker("tool:write_note")
    await holder.killed()
    await lease_expired(b, "thread_rblost")
    done = await b.RunThread(
        ts.RunThreadRequest(spec=queued_spec("thread_rblost", "redo", strategy=ROLLBACK)), timeout=DEADLINE
    )
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert await replayed_status(b, "thread_rblost", "lost", HELD) == thread_pb2.THREAD_RUN_STATUS_CANCELLED
    listed = await kinds(b, "thread_rblost")
    assert [k for _r, k, _q in listed].count(thread_pb2.CHECKPOINT_KIND_ROLLED_BACK) == 1
    assert prompts(await full(b, "thread_rblost"), HELD) == 0
    assert sum(executions(holder.log, "write_note").values()) == 1


async def test_a_rollback_behind_an_interrupt_discards_nothing_of_the_interrupts_input(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """X is stopped for the INTERRUPT queued first; when the ROLLBACK's turn comes the head holds the
    interrupting request's commits too, so nothing is copied (LIVE §8, 14)."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_rbint")
    await start(a, "thread_rbint", "x", HELD)
    await holder.wait_for_marker("tool:write_note")
    await enqueue(b, "thread_rbint", "first", INTERRUPT)
    await enqueue(b, "thread_rbint", "second", ROLLBACK)
    assert await ended(b, "thread_rbint", "x") == "result"
    holder.gate.touch()
    for request_id in ("first", "second"):
        assert await ended(b, "thread_rbint", request_id) == "result"
    assert (await made_by(b, "thread_rbint")) == ["x", "first", "second"]
    assert thread_pb2.CHECKPOINT_KIND_ROLLED_BACK not in [k for _r, k, _q in await kinds(b, "thread_rbint")]


async def test_kill_9_after_a_rollbacks_begin_runs_its_next_attempt_without_rolling_back_again(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """The ROLLBACK's own run is held in its tool and its server killed: its copy, lease and mark were
    one transaction, so the survivor runs attempt 2 on the ROLLED_BACK head and copies nothing more."""
    first, second = await pair(replicas, store, tmp_path)
    stubs = (stub_of(first), stub_of(second))
    await create(stubs[0], "thread_rbk")
    await start(stubs[0], "thread_rbk", "x", HELD)
    await first.wait_for_marker("tool:write_note")
    redo = queued_spec("thread_rbk", "redo", HELD, ROLLBACK)
    await stubs[1].StartThreadRun(ts.StartThreadRunRequest(spec=redo), timeout=DEADLINE)
    assert await ended(stubs[1], "thread_rbk", "x") == "result"
    # The ROLLBACK (it holds in write_note too) now runs on one replica; both gates are closed.
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while True:
        at = [r for r in (first, second) if r.markers_at("tool:write_note") > (1 if r is first else 0)]
        if at:
            break
        assert asyncio.get_running_loop().time() < deadline, "the ROLLBACK never reached its tool"
        await asyncio.sleep(0.05)
    [runner] = at
    survivor = second if runner is first else first
    survivor.gate.touch()
    await runner.killed()
    assert await ended(stub_of(survivor), "thread_rbk", "redo") == "result"
    listed = await kinds(stub_of(survivor), "thread_rbk")
    assert [k for _r, k, _q in listed].count(thread_pb2.CHECKPOINT_KIND_ROLLED_BACK) == 1
    assert prompts(await full(stub_of(survivor), "thread_rbk"), HELD) == 1, "the ROLLBACK's, once"
    # X's note and the ROLLBACK's, once each: declared recovery did not run the killed one again.
    assert (
        sum(executions(first.log, "write_note").values()) + sum(executions(second.log, "write_note").values())
        == 2
    )


def answered_again(pending: deferred_pb2.DeferredToolRequests) -> deferred_pb2.DeferredToolResults:
    """Other answers to the batch `answers_to` answers: another result, the approvals the other way."""
    [ship] = pending.calls
    pay, deny = pending.approvals
    return deferred_pb2.DeferredToolResults(
        calls=[deferred_pb2.CallResult(tool_call_id=ship.tool_call_id, value_json=f'"{AGAIN}"')],
        approvals=[
            deferred_pb2.ApprovalResult(tool_call_id=pay.tool_call_id, denied=deferred_pb2.ToolDenied()),
            deferred_pb2.ApprovalResult(tool_call_id=deny.tool_call_id, approved=deferred_pb2.ToolApproved()),
        ],
    )


AGAIN = "shipped again"


@pytest.mark.parametrize(
    ("point", "ran"),
    [("model:results", True), ("before_tool:transfer", False)],
    ids=["after-its-tool", "before-its-tool"],
)
async def test_a_rollback_with_answers_undoes_the_holders_answers_and_answers_its_batch_again(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path, point: str, ran: bool
) -> None:
    """LIVE §4.5, "undo that answer, answer again": X answers the pending batch and runs; a ROLLBACK
    from the other replica carries other answers to that batch, checked at acceptance against the
    checkpoint X began from (answers that do not pair are refused and nothing waits). X is stopped;
    the ROLLBACK's Begin copies that SUSPENDED checkpoint and makes its answers the accepted batch: the
    head holds its answers, not X's, and each transfer ran at most once, by whom approved it."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_redo")
    prompt = f"use:batch crash:{point}"
    asked = await a.RunThread(ts.RunThreadRequest(spec=spec("thread_redo", "asks", prompt)), timeout=DEADLINE)
    assert asked.result.status == run_pb2.RUN_STATUS_SUSPENDED
    suspended = await thread_of(a, "thread_redo")
    pending = suspended.pending
    [ship] = [c.tool_call_id for c in pending.calls]
    pay, deny = [c.tool_call_id for c in pending.approvals]
    x = ts.ThreadRunSpec(thread_id="thread_redo", request_id="x", answers=answers_to(pending))
    await a.StartThreadRun(ts.StartThreadRunRequest(spec=x), timeout=DEADLINE)
    await holder.wait_for_marker(point)

    wrong = ts.ThreadRunSpec(thread_id="thread_redo", request_id="wrong", busy_strategy=ROLLBACK)
    wrong.answers.calls.add(tool_call_id="no-such-call", value_json='"x"')
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await b.StartThreadRun(ts.StartThreadRunRequest(spec=wrong), timeout=DEADLINE)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refusal(caught.value)
    assert not (await thread_of(b, "thread_redo")).queue, "refused at acceptance: nothing waits"

    redo = ts.ThreadRunSpec(
        thread_id="thread_redo", request_id="redo", answers=answered_again(pending), busy_strategy=ROLLBACK
    )
    queued = await b.StartThreadRun(ts.StartThreadRunRequest(spec=redo), timeout=DEADLINE)
    assert (queued.status, queued.queue_position) == (thread_pb2.THREAD_RUN_STATUS_QUEUED, 1)
    assert await ended(b, "thread_redo", "x") == "result"
    holder.gate.touch()  # the ROLLBACK may start on the holder's replica
    assert await ended(b, "thread_redo", "redo") == "result"
    replayed = await b.StartThreadRun(ts.StartThreadRunRequest(spec=x), timeout=DEADLINE)
    assert replayed.replayed and replayed.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED

    listed = await kinds(b, "thread_redo")
    [(copy, _kind, _)] = [c for c in listed if c[1] == thread_pb2.CHECKPOINT_KIND_ROLLED_BACK]
    assert [r for r, _k, q in listed if q == "x"], "X's commits stay listed"
    assert all(r > copy for r, _k, q in listed if q == "redo") and listed[-1][2] == "redo"
    got = await b.GetCheckpoint(ts.GetCheckpointRequest(thread_id="thread_redo", revision=copy))
    assert got.checkpoint.pending == pending, "the copy waits on the batch X began from"
    thread, history = await head_history(b, "thread_redo")
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE
    assert (only_answer(history, ship).content, only_answer(history, deny).content) == (
        AGAIN,
        "transferred 99",
    )
    assert only_answer(history, pay).outcome == "denied"
    assert not [p for m in history for p in m.parts if SHIPPED in str(getattr(p, "content", ""))], (
        "X's answers"
    )
    assert transfers(holder, other) == ({pay, deny} if ran else {deny}), "X's approval ran at most once"


def transfers(*replicas_: Replica) -> set[str]:
    """The transfer calls that ran, over the replicas' tool logs (each once)."""
    counts = [(call, n) for r in replicas_ for call, n in executions(r.log, "transfer").items()]
    assert all(n == 1 for _call, n in counts) and len({c for c, _n in counts}) == len(counts), counts
    return {call for call, _n in counts}


async def test_a_rollback_with_answers_of_a_lost_holder_that_committed_nothing_answers_again_at_once(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """X answered the batch and was killed before its tool and before any commit: no live lease, so
    the ROLLBACK with other answers runs at once. X committed nothing, yet its Begin took the batch,
    so the copy is made (the amendment to LIVE §4.4 in docs/live.md): the batch is answered again."""
    holder = await replica(replicas, store, tmp_path / "r0")
    other = await replica(replicas, store, tmp_path / "r1", "--sweep-interval", "3600")
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_redolost")
    prompt = "use:batch crash:before_tool:transfer"
    await a.RunThread(ts.RunThreadRequest(spec=spec("thread_redolost", "asks", prompt)), timeout=DEADLINE)
    pending = (await thread_of(a, "thread_redolost")).pending
    began = (await thread_of(a, "thread_redolost")).revision
    [ship] = [c.tool_call_id for c in pending.calls]
    pay, deny = [c.tool_call_id for c in pending.approvals]
    x = ts.ThreadRunSpec(thread_id="thread_redolost", request_id="x", answers=answers_to(pending))
    await a.StartThreadRun(ts.StartThreadRunRequest(spec=x), timeout=DEADLINE)
    await holder.wait_for_marker("before_tool:transfer")
    await holder.killed()
    await lease_expired(b, "thread_redolost")
    assert (await thread_of(b, "thread_redolost")).revision == began, "X committed nothing"
    redo = ts.ThreadRunSpec(
        thread_id="thread_redolost",
        request_id="redo",
        answers=answered_again(pending),
        busy_strategy=ROLLBACK,
    )
    done = await b.RunThread(ts.RunThreadRequest(spec=redo), timeout=DEADLINE)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED
    replayed = await b.StartThreadRun(ts.StartThreadRunRequest(spec=x), timeout=DEADLINE)
    assert replayed.replayed and replayed.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED
    listed = await kinds(b, "thread_redolost")
    copies = [r for r, k, _q in listed if k == thread_pb2.CHECKPOINT_KIND_ROLLED_BACK]
    assert copies == [began + 1], "one copy, the first commit after where X began"
    _thread, history = await head_history(b, "thread_redolost")
    assert (only_answer(history, ship).content, only_answer(history, deny).content) == (
        AGAIN,
        "transferred 99",
    )
    assert only_answer(history, pay).outcome == "denied"
    assert transfers(holder, other) == {deny}


async def test_every_replica_killed_with_requests_queued_and_none_running_runs_each_once_after_restart(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """LIVE §4.8's last row: the thread waits on answers with three requests queued behind them (so
    nothing runs), and every replica is killed -9. The queue is in the store alone: after a restart it is
    listed as it was, the answers run ahead of it, then each request once, in acceptance order."""
    first, second = await pair(replicas, store, tmp_path)
    a, b = stub_of(first), stub_of(second)
    await create(a, "thread_all")
    await start(a, "thread_all", "asks", "use:batch crash:model")
    await first.wait_for_marker("model")
    for request_id, stub in (("w1", a), ("w2", b), ("w3", a)):
        await enqueue(stub, "thread_all", request_id)
    first.gate.touch()
    assert await ended(a, "thread_all", "asks") == "result"
    before = await thread_of(b, "thread_all")
    await asyncio.gather(first.killed(), second.killed())

    again = await asyncio.to_thread(start_replicas, store[0], store[1], tmp_path / "again", 2, lease_ttl=2)
    replicas.extend(again)
    for restarted in again:
        restarted.gate.touch()
    c = stub_of(again[1])
    after = await thread_of(c, "thread_all")
    assert before.status == thread_pb2.THREAD_STATUS_SUSPENDED, before
    assert after.status == thread_pb2.THREAD_STATUS_SUSPENDED and list(after.queue) == list(before.queue), (
        after
    )
    answered = await c.RunThread(
        ts.RunThreadRequest(
            spec=ts.ThreadRunSpec(
                thread_id="thread_all", request_id="answer", answers=answers_to(after.pending)
            )
        ),
        timeout=DEADLINE,
    )
    assert answered.result.status == run_pb2.RUN_STATUS_COMPLETED
    for request_id in ("w1", "w2", "w3"):
        assert await ended(c, "thread_all", request_id) == "result"
    assert (await made_by(c, "thread_all")) == ["asks", "answer", "w1", "w2", "w3"]
    assert notes(first, second, *again) == 3
    assert not (await idle(c, "thread_all")).queue


async def test_queued_requests_whose_start_fails_its_checks_end_with_that_error_and_free_the_thread(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """Accepted while their agent was served; the only server left serves it no more (every replica
    killed, one restarted without it). Each queued start fails the check a start makes: the record ends
    with that error (a retry replays it), the queue goes on to the next, and the thread is not blocked."""
    holder = await replica(replicas, store, tmp_path / "r0")
    a = stub_of(holder)
    await create(a, "thread_gone")
    await start(a, "thread_gone", "x", HELD)
    await holder.wait_for_marker("tool:write_note")
    for request_id in ("g1", "g2"):
        await enqueue(a, "thread_gone", request_id)
    await holder.killed()
    served = await asyncio.to_thread(spawn_serve, "--store", store[0], "--lease-ttl", "2", env=store[1])
    without = Replica(served, tmp_path / "gone.jsonl", tmp_path / "gone-gate")
    replicas.append(without)
    c = stub_of(without)
    for request_id in ("x", "g1", "g2"):
        assert await ended(c, "thread_gone", request_id) == "error", request_id
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await c.StartThreadRun(
            ts.StartThreadRunRequest(spec=queued_spec("thread_gone", "g2")), timeout=DEADLINE
        )
    assert refusal(caught.value)[1] == "AGENT_UNKNOWN", "the retry replays the start's error"
    thread = await idle(c, "thread_gone")
    assert (thread.status, list(thread.queue)) == (thread_pb2.THREAD_STATUS_IDLE, [])
    assert notes(holder) == 1, "the queued requests never ran a tool"


SLOW = "sleep 30"
"""A demo agent's turn that would sleep 30 s: a queued request that must never finish here."""


async def cancelled_and_queue_went_on(
    stub: ThreadServiceStub, thread_id: str, racing: str, after: str
) -> None:
    """`racing` ended CANCELLED, never having finished its sleep (it never ran, or ran and was stopped);
    `after`, queued behind it, then ran once; nothing is left running or queued."""
    assert await ended(stub, thread_id, after) == "result"
    again = await stub.StartThreadRun(
        ts.StartThreadRunRequest(spec=queued_spec(thread_id, racing, SLOW)), timeout=DEADLINE
    )
    assert again.replayed and again.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED, again
    assert not again.result.output_json or "Tool results" not in again.result.output_json
    thread = await idle(stub, thread_id)
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE
    assert (await made_by(stub, thread_id))[-1] == after


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.05, 0.2])
async def test_a_cancel_racing_the_hand_off_of_its_request_never_lets_it_finish(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path, delay: float
) -> None:
    """LIVE §4.8's race: the cancel (sent to the other replica) lands `delay` after the run ahead ended,
    i.e. around the hand-off's start of the request: it never runs, or runs and is stopped; whatever the
    interleaving, the request ends CANCELLED and the queue goes on."""
    holder, other = await pair(replicas, store, tmp_path)
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_race", agent="default")
    await start(a, "thread_race", "ahead", "sleep 1")
    await enqueue_text(b, "thread_race", "racing", SLOW)
    await enqueue_text(b, "thread_race", "after", "hello")
    assert await ended(b, "thread_race", "ahead") == "result"
    await asyncio.sleep(delay)
    cancel = await b.CancelThreadRun(ts.CancelThreadRunRequest(thread_id="thread_race", request_id="racing"))
    assert cancel.status in (thread_pb2.THREAD_RUN_STATUS_RUNNING, thread_pb2.THREAD_RUN_STATUS_CANCELLED)
    await cancelled_and_queue_went_on(b, "thread_race", "racing", "after")


async def test_a_cancel_racing_the_sweepers_start_of_its_request_never_lets_it_finish(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """The holder is killed: the survivor's sweeper starts the queue's head once the lease expired, and
    the cancel is sent the moment the expiry is seen, around that start."""
    holder, other = await pair(replicas, store, tmp_path)
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_sweeprace", agent="default")
    call = a.StreamThreadRun(ts.StreamThreadRunRequest(spec=spec("thread_sweeprace", "ahead", SLOW)))
    await call.read()  # run_started: it holds the thread
    await enqueue_text(b, "thread_sweeprace", "racing", SLOW)
    await enqueue_text(b, "thread_sweeprace", "after", "hello")
    await holder.killed()
    call.cancel()
    await lease_expired(b, "thread_sweeprace")
    cancel = await b.CancelThreadRun(
        ts.CancelThreadRunRequest(thread_id="thread_sweeprace", request_id="racing")
    )
    assert cancel.status in (thread_pb2.THREAD_RUN_STATUS_RUNNING, thread_pb2.THREAD_RUN_STATUS_CANCELLED)
    await cancelled_and_queue_went_on(b, "thread_sweeprace", "racing", "after")


async def enqueue_text(stub: ThreadServiceStub, thread_id: str, request_id: str, text: str) -> None:
    answer = await stub.StartThreadRun(
        ts.StartThreadRunRequest(spec=queued_spec(thread_id, request_id, text)), timeout=DEADLINE
    )
    assert answer.status == thread_pb2.THREAD_RUN_STATUS_QUEUED, answer


@contextlib.contextmanager
def thread_row_locked(store: tuple[str, dict[str, str]], thread_id: str) -> Iterator[None]:
    """Another writer holds the thread's row (PostgreSQL: `FOR UPDATE`; SQLite: the file's write lock),
    so a replica's transaction on it waits inside, before it can commit."""
    url, env = store
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.removeprefix("sqlite:"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
    else:
        conn = psycopg.connect(url, password=env.get("PGPASSWORD"))
        conn.execute("SELECT 1 FROM threads WHERE thread_id = %s FOR UPDATE", (thread_id,))
    try:
        yield
    finally:
        conn.rollback()
        conn.close()


async def test_kill_9_of_the_accepting_replica_before_its_enqueue_commits_then_the_retry_enqueues_once(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """LIVE §4.8's first row: B's acceptance transaction waits behind a held row lock and B is killed
    -9 there. The client sees UNAVAILABLE; nothing was written (no queue entry, no record), and its retry
    through A enqueues the request once: it runs once, after the holder."""
    holder, accepting = await pair(replicas, store, tmp_path)
    a, b = stub_of(holder), stub_of(accepting)
    await create(a, "thread_acc")
    await start(a, "thread_acc", "x", HELD)
    await holder.wait_for_marker("tool:write_note")
    with thread_row_locked(store, "thread_acc"):
        sent = asyncio.ensure_future(enqueue(b, "thread_acc", "late"))
        await asyncio.sleep(0.5)  # inside its transaction (or not yet there: nothing is written either way)
        await accepting.killed()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await sent
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value
    assert not (await thread_of(a, "thread_acc")).queue, "nothing was written"
    retried = await enqueue(a, "thread_acc", "late")
    assert retried.status in (thread_pb2.THREAD_RUN_STATUS_QUEUED, thread_pb2.THREAD_RUN_STATUS_RUNNING)
    holder.gate.touch()
    assert await ended(a, "thread_acc", "late") == "result"
    assert (await made_by(a, "thread_acc")).count("late") == 1
    assert notes(holder, accepting) == 2, "the holder's note and the retried request's, once each"
