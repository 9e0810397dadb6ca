"""Background runs (LIVE §3): `StartThreadRun`, the server driving detached requests, parking on SIGTERM.

Real `threadline serve` processes on both stores (two processes on one SQLite file, two replicas on one
PostgreSQL database). The crash agent's gates (`tests/thread_agents.py`) hold a run where a test needs
it; each replica's tool log counts what ran, so every guarantee is shown by what the tools executed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import PgStore, refusal, spawn_serve
from test_thread_joins import DEADLINE, HELD, create, events, spec, stub_of, until, wire
from test_thread_replicas import Replica, start_replica, start_replicas
from thread_agents import executions
from threadline.v1 import run_pb2, thread_pb2, thread_service_pb2
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
RETRYABLE = "use:retryable crash:tool:read_status"
"""Blocks inside `read_status`, which tool recovery runs again on every attempt (a retry-safe tool)."""
AT_MODEL = "use:plain crash:model"
"""Blocks while the model answers the prompt: the run's next model request is a boundary to park at."""
TTL = 2


# -- helpers -------------------------------------------------------------------------------------------


async def start(
    stub: ThreadServiceStub, thread_id: str, request_id: str, text: str
) -> ts.StartThreadRunResponse:
    response: ts.StartThreadRunResponse = await stub.StartThreadRun(
        ts.StartThreadRunRequest(spec=spec(thread_id, request_id, text)), timeout=DEADLINE
    )
    return response


async def ended(stub: ThreadServiceStub, thread_id: str, request_id: str) -> str:
    """Wait, by joining (which starts nothing), until the server ended the request by itself: "result"
    when its latest attempt ended with one, else the `request_status` it was closed with."""
    deadline = time.monotonic() + DEADLINE
    while True:
        call = stub.JoinThreadRun(ts.JoinThreadRunRequest(thread_id=thread_id, request_id=request_id))
        try:
            await events(call)
            return "result"
        except grpc.aio.AioRpcError as error:
            _code, reason, meta = refusal(error)
            if reason != "RUN_ATTEMPT_LOST" or meta["request_status"] != "running":
                return meta.get("request_status", reason)
        assert time.monotonic() < deadline, "the server never ended the request"
        await asyncio.sleep(0.1)


async def finished(
    stub: ThreadServiceStub, thread_id: str, request_id: str, text: str
) -> ts.StartThreadRunResponse:
    """`ended`, then what a `StartThreadRun` retry replays."""
    await ended(stub, thread_id, request_id)
    answer = await start(stub, thread_id, request_id, text)
    assert answer.replayed, answer
    return answer


async def lease_expired(stub: ThreadServiceStub, thread_id: str) -> None:
    """Wait until the thread is no longer RUNNING (its killed holder's lease expired)."""
    deadline = time.monotonic() + DEADLINE
    while (await stub.GetThread(ts.GetThreadRequest(thread_id=thread_id))).thread.status == (
        thread_pb2.THREAD_STATUS_RUNNING
    ):
        assert time.monotonic() < deadline, "the killed holder's lease never expired"
        await asyncio.sleep(0.1)


def prompts(thread: thread_pb2.Thread, text: str) -> int:
    """How often the history holds the user prompt `text`."""
    history = json.loads(thread.head.state.message_history.data)
    return sum(
        1
        for message in history
        for part in message["parts"]
        if part.get("part_kind") == "user-prompt" and part.get("content") == text
    )


async def full(stub: ThreadServiceStub, thread_id: str) -> thread_pb2.Thread:
    got = await stub.GetThread(ts.GetThreadRequest(thread_id=thread_id, view=ts.THREAD_VIEW_FULL))
    thread: thread_pb2.Thread = got.thread
    return thread


def logged(replica: Replica, event: str) -> list[dict[str, Any]]:
    found = []
    for line in replica.lines:
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == event:
                found.append(record)
    return found


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """`--store` URL and environment of one store per test run: an SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'threads.sqlite3'}", {}
    pg: PgStore = request.getfixturevalue("pg_store")
    return pg.url, pg.env


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[list[Replica]]:
    """Replicas a test starts (`replicas.append(...)`); all closed at its end."""
    started: list[Replica] = []
    yield started
    for replica in started:
        replica.close()


async def replica(
    started: list[Replica], store: tuple[str, dict[str, str]], workdir: Path, *args: str
) -> Replica:
    made = await asyncio.to_thread(start_replica, store[0], store[1], workdir, *args, lease_ttl=TTL)
    started.append(made)
    return made


async def pair(started: list[Replica], store: tuple[str, dict[str, str]], workdir: Path) -> list[Replica]:
    made = await asyncio.to_thread(start_replicas, store[0], store[1], workdir, 2, lease_ttl=TTL)
    started.extend(made)
    return made


# -- StartThreadRun --------------------------------------------------------------------------------------


async def test_start_answers_once_begun_and_the_server_runs_the_request_to_its_end(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    holder, other = await pair(replicas, store, tmp_path)
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_bg")
    started = await start(a, "thread_bg", "bg", HELD)
    assert started.status == thread_pb2.THREAD_RUN_STATUS_RUNNING and not started.replayed
    assert started.run_id.startswith("run-") and started.request_id == "bg" and started.revision == 1
    assert not started.HasField("result")
    # Answered while the run had not even reached its tool: it goes on with no client.
    await holder.wait_for_marker("tool:write_note")
    again = await start(b, "thread_bg", "bg", HELD)
    assert (again.run_id, again.status, again.revision, again.replayed) == (
        started.run_id,
        thread_pb2.THREAD_RUN_STATUS_RUNNING,
        1,
        False,
    ), "a retry while it runs answers the same, on any replica"
    joined = b.JoinThreadRun(
        ts.JoinThreadRunRequest(thread_id="thread_bg", request_id="bg"), timeout=DEADLINE
    )
    head = await until(joined, "tool_call")
    holder.gate.touch()
    whole = head + await events(joined)
    assert whole[-1].WhichOneof("event") == "result" and whole[-1].run_id == started.run_id
    assert [e.sequence for e in whole] == list(range(len(whole)))
    done = await start(b, "thread_bg", "bg", HELD)
    thread = (await b.GetThread(ts.GetThreadRequest(thread_id="thread_bg"))).thread
    assert done.replayed and done.status == thread_pb2.THREAD_RUN_STATUS_COMPLETED
    assert done.result.run_id == started.run_id and done.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert done.revision == thread.revision > 1 and done.result.output_json == whole[-1].result.output_json
    assert wire([whole[-1]])[0] != b"" and not done.result.HasField("state")
    ran = [*executions(holder.log, "write_note").values(), *executions(other.log, "write_note").values()]
    assert ran == [1], "write_note ran once, by the holder"


async def test_a_start_refused_before_its_run_is_refused_as_run_thread_refuses_it(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    (only,) = [await replica(replicas, store, tmp_path / "r0")]
    stub = stub_of(only)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await start(stub, "thread_none", "x", "hello")
    assert refusal(caught.value)[:2] == (grpc.StatusCode.NOT_FOUND, "THREAD_NOT_FOUND")
    await create(stub, "thread_busy")
    await start(stub, "thread_busy", "first", HELD)
    await only.wait_for_marker("tool:write_note")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await start(stub, "thread_busy", "second", "hello")
    code, reason, meta = refusal(caught.value)
    assert (code, reason, meta["request_id"]) == (grpc.StatusCode.ABORTED, "THREAD_BUSY", "first")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await start(stub, "thread_busy", "first", "a different prompt")
    assert refusal(caught.value)[1] == "REQUEST_ID_REUSED"
    only.gate.touch()
    await finished(stub, "thread_busy", "first", HELD)


async def test_a_start_of_an_attached_running_request_makes_the_server_drive_it(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """`StreamThreadRun` starts it; a `StartThreadRun` retry detaches it; kill -9 of its server, and the
    other replica finishes it with no client."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_adopt")
    call = a.StreamThreadRun(ts.StreamThreadRunRequest(spec=spec("thread_adopt", "adopt", RETRYABLE)))
    head = await until(call, "tool_call")
    await holder.wait_for_marker("tool:read_status")
    adopted = await start(b, "thread_adopt", "adopt", RETRYABLE)
    assert adopted.run_id == head[0].run_id and adopted.status == thread_pb2.THREAD_RUN_STATUS_RUNNING
    await holder.killed()
    done = await finished(b, "thread_adopt", "adopt", RETRYABLE)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED and done.result.run_id != head[0].run_id
    assert list(executions(holder.log, "read_status").values()) == [1]
    assert list(executions(other.log, "read_status").values()) == [1], "run again by its recovery"


# -- the server drives detached requests -------------------------------------------------------------------


async def test_kill_9_of_a_detached_holder_and_another_replica_runs_its_next_attempt(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_crash")
    started = await start(a, "thread_crash", "crash", HELD)
    await holder.wait_for_marker("tool:write_note")
    await holder.killed()
    # Nobody retries: within the lease and a sweep, the other replica runs attempt 2 by itself.
    done = await finished(b, "thread_crash", "crash", HELD)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED and done.result.run_id != started.run_id
    assert done.result.request_id == "crash"
    # A join by request follows the request's latest attempt: the one that finished it.
    joined = await events(
        b.JoinThreadRun(
            ts.JoinThreadRunRequest(thread_id="thread_crash", request_id="crash"), timeout=DEADLINE
        )
    )
    assert joined[-1].result.run_id == done.result.run_id
    assert prompts(await full(b, "thread_crash"), HELD) == 1, "the prompt once in the history"
    # write_note started once, on the killed holder; its recovery (declared) did not run it again.
    assert list(executions(holder.log, "write_note").values()) == [1]
    assert executions(other.log, "write_note") == {}


async def test_kill_9_right_after_begin_and_a_retry_finds_the_same_request(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """Killed as soon as Begin committed (the run waits for its first model answer): a retry on the other
    replica answers the same request, one record, and the prompt is in the history once."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_begun")
    started = await start(a, "thread_begun", "begun", AT_MODEL)
    await holder.wait_for_marker("model")
    await holder.killed()
    retried = await start(b, "thread_begun", "begun", AT_MODEL)
    assert retried.request_id == "begun" and retried.revision >= started.revision == 1
    assert retried.status == thread_pb2.THREAD_RUN_STATUS_RUNNING or retried.replayed
    done = await finished(b, "thread_begun", "begun", AT_MODEL)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert prompts(await full(b, "thread_begun"), AT_MODEL) == 1
    ran = [*executions(holder.log, "write_note").values(), *executions(other.log, "write_note").values()]
    assert ran == [1], "the model never answered on the killed holder: write_note ran once, elsewhere"


async def test_a_detached_request_is_never_superseded_and_a_request_that_finds_it_due_starts_it(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """The other replica's sweeper waits an hour between passes: only the refused request can start the
    due attempt, at once."""
    holder = await replica(replicas, store, tmp_path / "r0")
    other = await replica(replicas, store, tmp_path / "r1", "--sweep-interval", "3600")
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_due")
    await start(a, "thread_due", "due", RETRYABLE)
    await holder.wait_for_marker("tool:read_status")
    await holder.killed()
    await lease_expired(b, "thread_due")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await b.RunThread(ts.RunThreadRequest(spec=spec("thread_due", "newcomer", "hello")), timeout=DEADLINE)
    code, reason, meta = refusal(caught.value)
    assert (code, reason, meta["request_id"]) == (grpc.StatusCode.ABORTED, "THREAD_BUSY", "due")
    done = await finished(b, "thread_due", "due", RETRYABLE)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert list(executions(other.log, "read_status").values()) == [1]
    # Afterwards the thread takes new requests again.
    after = await b.RunThread(
        ts.RunThreadRequest(spec=spec("thread_due", "newcomer", "hello")), timeout=DEADLINE
    )
    assert after.result.status == run_pb2.RUN_STATUS_COMPLETED


async def test_a_run_that_kills_its_server_on_every_attempt_ends_interrupted_after_three(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    first = await replica(replicas, store, tmp_path / "r0")
    await create(stub_of(first), "thread_doomed")
    await start(stub_of(first), "thread_doomed", "doomed", RETRYABLE)
    holder = first
    for attempt in range(1, 4):
        await holder.wait_for_marker("tool:read_status")
        await holder.killed()  # the tool "kills its server"
        holder = await replica(replicas, store, tmp_path / f"r{attempt}")
    # The fourth replica's sweeper closes the request instead of starting a fourth attempt.
    stub = stub_of(holder)
    assert await ended(stub, "thread_doomed", "doomed") == "interrupted"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await start(stub, "thread_doomed", "doomed", RETRYABLE)
    code, reason, meta = refusal(caught.value)
    assert (code, reason, meta["attempts"]) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "REQUEST_INTERRUPTED",
        "3",
    )
    ran = [n for r in replicas for n in executions(r.log, "read_status").values()]
    assert ran == [1, 1, 1], "one execution per attempt, three attempts"
    holder.gate.touch()
    thread = (await stub.GetThread(ts.GetThreadRequest(thread_id="thread_doomed"))).thread
    assert thread.status != thread_pb2.THREAD_STATUS_RUNNING
    after = await stub.RunThread(
        ts.RunThreadRequest(spec=spec("thread_doomed", "next", "hello")), timeout=DEADLINE
    )
    assert after.result.status == run_pb2.RUN_STATUS_COMPLETED, "the thread goes on"


async def test_a_cancel_asked_of_a_holder_that_then_died_is_closed_by_the_sweeper(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    holder, other = await pair(replicas, store, tmp_path)
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_cancel")
    started = await start(a, "thread_cancel", "cancel", HELD)
    await holder.wait_for_marker("tool:write_note")
    holder.stalled()  # it can no longer hear the cancel, nor act on it
    asked = await b.CancelThreadRun(
        ts.CancelThreadRunRequest(thread_id="thread_cancel", run_id=started.run_id)
    )
    assert asked.status == thread_pb2.THREAD_RUN_STATUS_RUNNING, "its lease was live: the holder is asked"
    await holder.killed()
    done = await finished(b, "thread_cancel", "cancel", HELD)
    assert done.status == thread_pb2.THREAD_RUN_STATUS_CANCELLED and done.result.run_id == started.run_id
    assert executions(other.log, "write_note") == {}, "closed, not run again"


async def test_a_server_driven_start_that_fails_its_checks_closes_the_request_with_that_error(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    holder = await replica(replicas, store, tmp_path / "r0")
    await create(stub_of(holder), "thread_gone")
    await start(stub_of(holder), "thread_gone", "gone", HELD)
    await holder.wait_for_marker("tool:write_note")
    await holder.killed()
    # The next server serves the default agent only: the thread's agent is gone.
    served = await asyncio.to_thread(spawn_serve, "--store", store[0], "--lease-ttl", str(TTL), env=store[1])
    try:
        stub = ThreadServiceStub(grpc.aio.insecure_channel(served.address))
        assert await ended(stub, "thread_gone", "gone") == "error"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await start(stub, "thread_gone", "gone", HELD)
        _code, reason, _meta = refusal(caught.value)
        assert reason == "AGENT_UNKNOWN"
        thread = (await stub.GetThread(ts.GetThreadRequest(thread_id="thread_gone"))).thread
        assert thread.status == thread_pb2.THREAD_STATUS_IDLE, "a bad request never blocks its thread"
    finally:
        served.process.kill()
        served.process.wait(timeout=10)
        for pipe in (served.process.stdout, served.process.stderr):
            if pipe is not None:
                pipe.close()


# -- parking on SIGTERM -------------------------------------------------------------------------------------


async def test_sigterm_parks_a_detached_run_at_its_next_model_request_and_another_replica_completes_it(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """With `--max-run-attempts 1`, a parked attempt that counted would end the request INTERRUPTED."""
    holder = await replica(replicas, store, tmp_path / "r0", "--max-run-attempts", "1")
    other = await replica(replicas, store, tmp_path / "r1", "--max-run-attempts", "1")
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_park")
    started = await start(a, "thread_park", "park", AT_MODEL)
    await holder.wait_for_marker("model")
    holder.serve.process.send_signal(signal.SIGTERM)
    holder.gate.touch()  # the model answers; write_note runs; the run parks before the next request
    assert await asyncio.to_thread(holder.serve.process.wait, DEADLINE) == 0
    (parked,) = logged(holder, "run_parked")
    assert parked["run_id"] == started.run_id
    done = await finished(b, "thread_park", "park", AT_MODEL)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED and done.result.run_id != started.run_id
    assert "write_note: noted hello" in done.result.output_json, "the real result, no unknown result"
    assert prompts(await full(b, "thread_park"), AT_MODEL) == 1
    assert list(executions(holder.log, "write_note").values()) == [1]
    assert executions(other.log, "write_note") == {}, "resumed from the parked checkpoint"


async def test_a_parked_run_is_taken_up_by_the_note_not_the_sweep_interval_on_postgresql(
    pg_store: PgStore, replicas: list[Replica], tmp_path: Path
) -> None:
    """The other replica's sweeper waits an hour between passes: only the parking commit's notification
    (`threadline_thread`, work due now) can wake it, and it does (LIVE §3.2 "early when notified")."""
    store = (pg_store.url, pg_store.env)
    holder = await replica(replicas, store, tmp_path / "r0")
    other = await replica(replicas, store, tmp_path / "r1", "--sweep-interval", "3600")
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_noted")
    started = await start(a, "thread_noted", "noted", AT_MODEL)
    await holder.wait_for_marker("model")
    holder.serve.process.send_signal(signal.SIGTERM)
    holder.gate.touch()
    assert await asyncio.to_thread(holder.serve.process.wait, DEADLINE) == 0
    assert [p["run_id"] for p in logged(holder, "run_parked")] == [started.run_id]
    assert await ended(b, "thread_noted", "noted") == "result", "the other replica ran the next attempt"
    assert list(executions(holder.log, "write_note").values()) == [1]
    assert executions(other.log, "write_note") == {}


async def test_an_attached_run_a_start_made_server_driven_parks_on_sigterm_too(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """`StreamThreadRun` starts it, a `StartThreadRun` retry elsewhere adopts it; its holder learns so at
    its next renewal, and SIGTERM then parks it instead of cancelling it."""
    holder, other = await pair(replicas, store, tmp_path)
    other.gate.touch()
    a, b = stub_of(holder), stub_of(other)
    await create(a, "thread_adopted")
    call = a.StreamThreadRun(ts.StreamThreadRunRequest(spec=spec("thread_adopted", "adopted", AT_MODEL)))
    await until(call, "run_started")
    await holder.wait_for_marker("model")
    await start(b, "thread_adopted", "adopted", AT_MODEL)
    seen = (await b.GetThread(ts.GetThreadRequest(thread_id="thread_adopted"))).thread.lease.expire_time
    deadline = time.monotonic() + DEADLINE
    while (
        await b.GetThread(ts.GetThreadRequest(thread_id="thread_adopted"))
    ).thread.lease.expire_time == seen:
        assert time.monotonic() < deadline, "the holder never renewed its lease"
        await asyncio.sleep(0.05)
    holder.serve.process.send_signal(signal.SIGTERM)
    holder.gate.touch()
    assert await asyncio.to_thread(holder.serve.process.wait, DEADLINE) == 0
    assert [r["run_id"] for r in logged(holder, "run_parked")] != []
    done = await finished(b, "thread_adopted", "adopted", AT_MODEL)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert list(executions(holder.log, "write_note").values()) == [1]
    assert executions(other.log, "write_note") == {}


async def test_a_start_of_an_attached_request_whose_attempt_died_runs_it_server_driven(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    """The `StartThreadRun` retry runs the next attempt and the request is the server's from then on:
    when that attempt's server dies too, a third server finishes it with no client."""
    first = await replica(replicas, store, tmp_path / "r0")
    second = await replica(replicas, store, tmp_path / "r1")
    await create(stub_of(first), "thread_orphan")
    call = stub_of(first).StreamThreadRun(
        ts.StreamThreadRunRequest(spec=spec("thread_orphan", "orphan", RETRYABLE))
    )
    await until(call, "tool_call")
    await first.wait_for_marker("tool:read_status")
    await first.killed()
    await lease_expired(stub_of(second), "thread_orphan")  # nobody drives it: its request was attached
    answer = await start(stub_of(second), "thread_orphan", "orphan", RETRYABLE)
    assert answer.status == thread_pb2.THREAD_RUN_STATUS_RUNNING and not answer.replayed
    await second.wait_for_marker("tool:read_status")
    await second.killed()
    third = await replica(replicas, store, tmp_path / "r2")
    third.gate.touch()
    done = await finished(stub_of(third), "thread_orphan", "orphan", RETRYABLE)
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED and done.result.run_id != answer.run_id
    ran = [n for r in (first, second, third) for n in executions(r.log, "read_status").values()]
    assert ran == [1, 1, 1], "each attempt ran the retry-safe tool once"
