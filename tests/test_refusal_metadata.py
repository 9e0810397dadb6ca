"""Refusals that say what happened (LIVE §5.5): `THREAD_NOT_SUSPENDED` names who consumed the batch,
`REQUEST_ID_REUSED` names what the original did and where the new request differs.

A real `threadline serve` per store (an SQLite file, a PostgreSQL database) serving the crash agent; the
metadata is read from the `ErrorInfo` a gRPC client gets.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import grpc
import psycopg
import pytest
import test_background_runs as background
from conftest import refusal
from test_background_runs import replica
from test_thread_crashes import answers_to
from test_thread_joins import DEADLINE, create, stub_of
from test_thread_replicas import Replica
from threadline.v1 import deferred_pb2, run_pb2, thread_pb2, thread_service_pb2
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
store = background.store
replicas = background.replicas


async def run(stub: ThreadServiceStub, spec: ts.ThreadRunSpec) -> ts.RunThreadResponse:
    response: ts.RunThreadResponse = await stub.RunThread(ts.RunThreadRequest(spec=spec), timeout=DEADLINE)
    return response


async def refused_with(stub: ThreadServiceStub, spec: ts.ThreadRunSpec) -> tuple[str, dict[str, str]]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await run(stub, spec)
    _code, reason, meta = refusal(caught.value)
    return reason, meta


async def suspended_batch(stub: ThreadServiceStub, thread_id: str) -> ts.RunThreadResponse:
    await create(stub, thread_id)
    first = await run(stub, ts.ThreadRunSpec(thread_id=thread_id, request_id="ask", text="use:batch"))
    assert first.result.status == run_pb2.RUN_STATUS_SUSPENDED
    return first


async def test_answers_after_a_prompt_took_the_batch_learn_who_took_it_and_how(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    stub = stub_of(await replica(replicas, store, tmp_path / "r0"))
    first = await suspended_batch(stub, "thread_prompted")
    answers = answers_to(first.result.deferred)
    moved_on = await run(
        stub, ts.ThreadRunSpec(thread_id="thread_prompted", request_id="moved", text="never mind")
    )
    assert moved_on.result.status == run_pb2.RUN_STATUS_COMPLETED

    late = ts.ThreadRunSpec(thread_id="thread_prompted", request_id="late", answers=answers)
    reason, meta = await refused_with(stub, late)
    assert reason == "THREAD_NOT_SUSPENDED"
    assert meta == {
        "thread_id": "thread_prompted",
        "status": "THREAD_STATUS_IDLE",
        "request_id": "moved",
        "revision": str(first.revision),
        "answered": "prompt",
        "run_revision": str(moved_on.revision),
        "matches": "true",
    }

    # Answers naming other calls than that batch's (one left out) do not match it.
    partial = deferred_pb2.DeferredToolResults()
    partial.CopyFrom(answers)
    del partial.approvals[1]
    reason, meta = await refused_with(
        stub, ts.ThreadRunSpec(thread_id="thread_prompted", request_id="partial", answers=partial)
    )
    assert (reason, meta["request_id"], meta["matches"]) == ("THREAD_NOT_SUSPENDED", "moved", "false")


async def test_a_rollback_that_restores_the_batch_forgets_who_had_consumed_it(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    stub = stub_of(await replica(replicas, store, tmp_path / "r0"))
    first = await suspended_batch(stub, "thread_restored")
    answers = answers_to(first.result.deferred)
    await run(stub, ts.ThreadRunSpec(thread_id="thread_restored", request_id="answered", answers=answers))
    back = await stub.RollbackThread(
        ts.RollbackThreadRequest(thread_id="thread_restored", revision=first.revision)
    )
    assert back.thread.status == thread_pb2.THREAD_STATUS_SUSPENDED, back

    # Back to the thread's start, which waits on nothing: nobody consumed a batch since the restore.
    await stub.RollbackThread(ts.RollbackThreadRequest(thread_id="thread_restored", revision=1))
    reason, meta = await refused_with(
        stub, ts.ThreadRunSpec(thread_id="thread_restored", request_id="late", answers=answers)
    )
    assert reason == "THREAD_NOT_SUSPENDED"
    assert {k: meta[k] for k in ("request_id", "revision", "answered", "run_revision", "matches")} == {
        "request_id": "",
        "revision": "0",
        "answered": "",
        "run_revision": "0",
        "matches": "false",
    }


async def test_a_reused_request_id_names_the_original_and_what_differs(
    store: tuple[str, dict[str, str]], replicas: list[Replica], tmp_path: Path
) -> None:
    stub = stub_of(await replica(replicas, store, tmp_path / "r0"))
    await create(stub, "thread_reused")
    original = await run(stub, ts.ThreadRunSpec(thread_id="thread_reused", request_id="once", text="hello"))
    expected = {
        "request_id": "once",
        "run_id": original.result.run_id,
        "revision": str(original.revision),
        "status": "completed",
    }
    cases = {
        "prompt": ts.ThreadRunSpec(thread_id="thread_reused", request_id="once", text="hello again"),
        "prompt,busy_strategy": ts.ThreadRunSpec(
            thread_id="thread_reused", request_id="once", text="other", busy_strategy=ts.BUSY_STRATEGY_ENQUEUE
        ),
        "expected_revision": ts.ThreadRunSpec(
            thread_id="thread_reused", request_id="once", text="hello", expected_revision=original.revision
        ),
    }
    for differs, spec in cases.items():
        reason, meta = await refused_with(stub, spec)
        assert (reason, meta) == ("REQUEST_ID_REUSED", {**expected, "differs": differs})

    # A record made before the parts were kept cannot say: `unknown`, never a guess.
    forget_parts(store, "thread_reused", "once")
    reason, meta = await refused_with(stub, cases["prompt"])
    assert (reason, meta["differs"]) == ("REQUEST_ID_REUSED", "unknown")


def forget_parts(store: tuple[str, dict[str, str]], thread_id: str, request_id: str) -> None:
    """Make the record look as an older server left it: no part digests."""
    url, env = store
    statement = "UPDATE runs SET digest_parts = NULL WHERE thread_id = {p} AND request_id = {p}"
    if url.startswith("sqlite:"):
        with sqlite3.connect(url.removeprefix("sqlite:")) as db:
            db.execute(statement.format(p="?"), (thread_id, request_id))
        return
    with psycopg.connect(url, password=env.get("PGPASSWORD")) as db:
        db.execute(statement.format(p="%s"), (thread_id, request_id))
