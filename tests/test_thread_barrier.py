"""A drain that lands while a thread run commits in its pre-request barrier (LIVE §5.1), on PostgreSQL.

The barrier's commit is held back by a lock the test takes on `checkpoints`; the server is sent SIGTERM
while it waits there, and its drain cancels the run. The cancellation must wait for the commit (the
holder's record of its revision is never cut from the commit), then stop the run before its model
request is sent: the run ends CANCELLED with its candidate committed after the barrier's MID_RUN
checkpoint, and the model never saw the request (the crash agent's model would have marked it).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from conftest import PgStore
from logged_serve import logged_serve
from thread_agents import AGENT_NAME, GATE_ENV, TOOL_LOG_ENV, markers
from threadline.v1 import events_pb2, run_pb2, thread_pb2, thread_service_pb2, thread_service_pb2_grpc

if TYPE_CHECKING:
    from threadline.v1.thread_service_pb2_grpc import ThreadServiceAsyncStub as Stub

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent
DEADLINE = 60.0
"""Seconds any awaited condition may take on a loaded 2-core machine."""


def _waiting_on_a_lock(store: PgStore, dbname: str) -> bool:
    with store.cluster.connect(dbname) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
            (dbname,),
        ).fetchone()
    return row is not None and int(str(row[0])) > 0


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not await asyncio.to_thread(condition):
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)


async def test_a_drain_during_the_barrier_commit_waits_for_it_and_sends_no_request(
    pg_store: PgStore, tmp_path: Path
) -> None:
    dbname = pg_store.url.rsplit("/", 1)[-1]
    log = tmp_path / "tools.jsonl"
    env = {
        **pg_store.env,
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p),
        TOOL_LOG_ENV: str(log),
        GATE_ENV: str(tmp_path / "gate"),  # never made: a model asked about the prompt would block there
    }
    args = (*pg_store.args, "--agent", f"{AGENT_NAME}=thread_agents:build", "--drain-grace", "60")
    with logged_serve(*args, env=env) as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            stub: Stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            created = await stub.CreateThread(thread_service_pb2.CreateThreadRequest(agent=AGENT_NAME))
            thread_id = created.thread.thread_id

            lock = pg_store.cluster.connect(dbname)
            lock.autocommit = False
            lock.execute("LOCK TABLE checkpoints IN EXCLUSIVE MODE")  # writes wait; reads go on
            spec = thread_service_pb2.ThreadRunSpec(
                thread_id=thread_id, request_id="req-drained", text="use:plain crash:model"
            )
            call = stub.StreamThreadRun(
                thread_service_pb2.StreamThreadRunRequest(spec=spec), timeout=DEADLINE
            )
            events = asyncio.ensure_future(_read(call))
            try:
                await _until(lambda: _waiting_on_a_lock(pg_store, dbname), "the barrier's commit waits")
                served.serve.process.terminate()
                await _until(lambda: any('"server_draining"' in line for line in served.lines), "draining")
                await asyncio.sleep(0.2)  # the cancel is asked while the commit still waits
            finally:
                lock.rollback()
                lock.close()
            try:
                received = await asyncio.wait_for(events, DEADLINE)
            except BaseException:
                print("".join(served.lines))
                raise
        # Our one SIGTERM drains it; `stop()` would send a second one, which may find it past its handler.
        assert served.serve.process.wait(timeout=DEADLINE) == 0
        served.stop(timeout=DEADLINE)

    kinds = [e.WhichOneof("event") for e in received]
    result = received[-1].result
    assert kinds[-1] == "result" and result.status == run_pb2.RUN_STATUS_CANCELLED, kinds
    committed = [
        (e.thread_committed.revision, e.thread_committed.kind)
        for e in received
        if e.HasField("thread_committed")
    ]
    assert committed == [(2, thread_pb2.CHECKPOINT_KIND_MID_RUN), (3, thread_pb2.CHECKPOINT_KIND_CANCELLED)]
    # The barrier's commit is announced after its request started, as every MID_RUN commit is.
    started = kinds.index("lifecycle")
    assert received[started].lifecycle.type == "model_request_started"
    assert kinds.index("thread_committed") > started
    assert [m["at"] for m in markers(log)] == [], "the model was never asked"

    with logged_serve(*pg_store.args, env=pg_store.env) as again:
        async with grpc.aio.insecure_channel(again.address) as channel:
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            listed = await stub.ListCheckpoints(
                thread_service_pb2.ListCheckpointsRequest(thread_id=thread_id)
            )
            assert [(c.revision, c.kind, c.request_id) for c in listed.checkpoints] == [
                (3, thread_pb2.CHECKPOINT_KIND_CANCELLED, "req-drained"),
                (2, thread_pb2.CHECKPOINT_KIND_MID_RUN, "req-drained"),
                (1, thread_pb2.CHECKPOINT_KIND_CREATED, ""),
            ]
            thread = (await stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id=thread_id))).thread
            assert thread.status == thread_pb2.THREAD_STATUS_IDLE and thread.revision == 3


async def _read(
    call: grpc.aio.UnaryStreamCall[
        thread_service_pb2.StreamThreadRunRequest, thread_service_pb2.StreamThreadRunResponse
    ],
) -> list[events_pb2.RunEvent]:
    received: list[events_pb2.RunEvent] = []
    async for response in call:
        received.extend([response.event] if response.HasField("event") else list(response.events))
    return received
