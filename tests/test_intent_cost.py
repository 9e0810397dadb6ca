"""What dispatch intents cost the database (LIVE §5.2, §5.7): transactions counted per turn, never timed.

A normal turn whose model calls a side-effecting tool writes its intents inside the commits the turn
makes anyway (the response's commit waits for the first dispatch and carries it): no extra transaction.
A resume dispatches its approved calls before any boundary: one extra transaction for the batch. Each
count is compared with the same turn on a server with `--dispatch-intents off`, and the rows are read back
so that "no extra cost" cannot come from writing nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import grpc
import pytest
from conftest import StartServer
from test_thread_rpcs import approve_all
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

pytestmark = pytest.mark.anyio

ts = thread_service_pb2


async def turn_costs(start_server: StartServer, path: Path, intents: str) -> tuple[int, int]:
    """Durable write transactions of a normal turn with one tool call, and of a resume approving one."""
    running = await start_server(store=f"sqlite:{path}", dispatch_intents=intents)
    store = running.server.threads.store
    async with grpc.aio.insecure_channel(running.address) as channel:
        info = await harness_service_pb2_grpc.HarnessServiceStub(channel).GetServerInfo(
            harness_service_pb2.GetServerInfoRequest()
        )
        assert info.thread_store.dispatch_intents is (intents == "on"), "GetServerInfo tells the option"
        stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
        thread_id = (await stub.CreateThread(ts.CreateThreadRequest())).thread.thread_id

        async def run(**fields: object) -> tuple[int, run_pb2.RunResult]:
            before = store.worker.durable_writes
            spec = ts.ThreadRunSpec(thread_id=thread_id, **fields)  # type: ignore[arg-type]
            result = (await stub.RunThread(ts.RunThreadRequest(spec=spec))).result
            return store.worker.durable_writes - before, result

        normal, done = await run(text="sleep 0")
        assert done.status == run_pb2.RUN_STATUS_COMPLETED, done
        _asked, asked = await run(text="delete a.txt")
        assert asked.status == run_pb2.RUN_STATUS_SUSPENDED, asked
        resume, answered = await run(answers=approve_all(asked.deferred))
        assert answered.status == run_pb2.RUN_STATUS_COMPLETED, answered
    return normal, resume


def intent_states(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        return {tool: state for tool, state in db.execute("SELECT tool_name, state FROM dispatch_intents")}


async def test_intents_add_no_transaction_to_a_normal_turn_and_one_to_a_resume(
    start_server: StartServer, tmp_path: Path
) -> None:
    on = await turn_costs(start_server, tmp_path / "on.db", "on")
    off = await turn_costs(start_server, tmp_path / "off.db", "off")
    assert intent_states(tmp_path / "on.db") == {"sleep": "dispatched", "delete_file": "dispatched"}
    assert intent_states(tmp_path / "off.db") == {}
    assert on[0] == off[0], f"a normal turn: {on[0]} transactions with intents, {off[0]} without"
    assert on[1] == off[1] + 1, f"a resume: {on[1]} transactions with intents, {off[1]} without"
