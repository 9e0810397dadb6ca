"""How the thread store keeps checkpoints (THREADS §2 "History storage"), read back from a real SQLite file.

A server runs real turns; the test then opens the same file with `sqlite3` and checks what was written:
deltas no larger than what each turn added, chains that never read more than twice a checkpoint's
size, byte-identical states, data shared by forks and collected once nothing reaches it.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from conftest import ServeProcess, error_info
from grpc_health.v1 import health_pb2, health_pb2_grpc
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2, thread_service_pb2
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub

from harness import load_state
from server.mapping.state import state_from_pb

pytestmark = pytest.mark.anyio

TURNS = 30


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    return tmp_path / "threads.sqlite3"


@pytest.fixture
async def channel(
    serve_process: Callable[..., ServeProcess], store_file: Path
) -> AsyncIterator[grpc.aio.Channel]:
    served = serve_process("--store", f"sqlite:{store_file}")
    async with grpc.aio.insecure_channel(served.address) as opened:
        yield opened


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> ThreadServiceStub:
    return ThreadServiceStub(channel)


def _written(path: Path) -> int:
    with sqlite3.connect(path) as db:
        (total,) = db.execute("SELECT coalesce(sum(length(data)), 0) FROM blobs").fetchone()
    return int(total)


async def _run(stub: ThreadServiceStub, thread_id: str, request_id: str, text: str) -> int:
    response = await stub.RunThread(
        thread_service_pb2.RunThreadRequest(
            spec=thread_service_pb2.ThreadRunSpec(thread_id=thread_id, request_id=request_id, text=text)
        )
    )
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED
    return response.revision


async def _state_json(stub: ThreadServiceStub, thread_id: str, revision: int) -> bytes:
    response = await stub.GetCheckpoint(
        thread_service_pb2.GetCheckpointRequest(thread_id=thread_id, revision=revision)
    )
    return state_from_pb(response.checkpoint.state, field="state").model_dump_json().encode()


async def test_bytes_written_per_turn_are_at_most_twice_what_the_turn_added(
    stub: ThreadServiceStub, store_file: Path
) -> None:
    thread_id = "thread_storage"
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id=thread_id))
    previous = len(await _state_json(stub, thread_id, 1))
    for turn in range(TURNS):
        before = _written(store_file)
        revision = await _run(stub, thread_id, f"turn-{turn}", f"lookup threadline, turn {turn}")
        size = len(await _state_json(stub, thread_id, revision))
        added = size - previous
        assert added > 0
        assert _written(store_file) - before <= 2 * added, f"turn {turn}"
        previous = size


async def test_every_chain_reads_at_most_twice_its_checkpoint_and_rebuilds_exactly(
    stub: ThreadServiceStub, store_file: Path
) -> None:
    thread_id = "thread_chains"
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id=thread_id))
    revision = 1
    for turn in range(TURNS):
        revision = await _run(stub, thread_id, f"turn-{turn}", f"hello number {turn}")
    with sqlite3.connect(store_file) as db:
        rows = db.execute("SELECT size, chain_bytes, base_id FROM blobs").fetchall()
    assert any(base is not None for _, _, base in rows), "no checkpoint was stored as a delta"
    assert all(chain <= 2 * size for size, chain, _ in rows)
    # Every checkpoint reads back as a state the core loads to the same bytes (sha256 checked on read).
    for each in range(1, revision + 1):
        data = await _state_json(stub, thread_id, each)
        assert load_state(data).model_dump_json().encode() == data


async def test_the_state_read_back_is_byte_identical_to_the_run_s_own(
    stub: ThreadServiceStub, channel: grpc.aio.Channel
) -> None:
    """A state imported from a HarnessService run comes back exactly as the core wrote it."""
    harness = harness_service_pb2_grpc.HarnessServiceStub(channel)
    ran = await harness.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="lookup grpc")))
    source = state_from_pb(ran.result.state, field="state")
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(state=ran.result.state))
    stored = await _state_json(stub, source.thread_id, 1)
    assert hashlib.sha256(stored).digest() == hashlib.sha256(source.model_dump_json().encode()).digest()


async def test_a_fork_keeps_the_data_it_refers_to_and_deletes_collect_it(
    stub: ThreadServiceStub, store_file: Path
) -> None:
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id="source_a"))
    for turn in range(3):
        await _run(stub, "source_a", f"r{turn}", f"lookup threadline {turn}")
    before_fork = _written(store_file)
    await stub.ForkThread(thread_service_pb2.ForkThreadRequest(thread_id="source_a", new_thread_id="fork_b"))
    # The fork refers to the source's history: only its own small rest (its new thread_id) is written.
    assert _written(store_file) - before_fork < 1024
    await _run(stub, "fork_b", "more", "hello again")
    await stub.DeleteThread(thread_service_pb2.DeleteThreadRequest(thread_id="source_a"))
    listed = await stub.ListCheckpoints(thread_service_pb2.ListCheckpointsRequest(thread_id="fork_b"))
    for checkpoint in listed.checkpoints:
        assert await _state_json(stub, "fork_b", checkpoint.revision)
    await stub.DeleteThread(thread_service_pb2.DeleteThreadRequest(thread_id="fork_b"))
    with sqlite3.connect(store_file) as db:
        assert db.execute("SELECT count(*) FROM blobs").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


async def test_a_thread_created_again_under_its_id_runs_on_its_new_head(stub: ThreadServiceStub) -> None:
    thread_id = "thread_again"
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id=thread_id))
    await _run(stub, thread_id, "first", "hello from the first life")  # its head is cached now
    await stub.DeleteThread(thread_service_pb2.DeleteThreadRequest(thread_id=thread_id))
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id=thread_id))
    revision = await _run(stub, thread_id, "first", "hello from the second life")
    state = load_state(await _state_json(stub, thread_id, revision))
    text = state.model_dump_json()
    assert "second life" in text
    assert "first life" not in text


async def test_a_broken_store_answers_unavailable_and_health_says_not_serving(
    stub: ThreadServiceStub, channel: grpc.aio.Channel, store_file: Path
) -> None:
    await stub.CreateThread(thread_service_pb2.CreateThreadRequest(thread_id="thread_broken"))
    for path in store_file.parent.glob(f"{store_file.name}*"):  # the database, its WAL and shared memory
        with path.open("r+b") as file:
            file.write(b"not a database" * 4096)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id="thread_broken"))
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    info = error_info(refused.value)
    assert info is not None and info.reason == "STORE_UNAVAILABLE"
    health = health_pb2_grpc.HealthStub(channel)
    service = health_pb2.HealthCheckRequest(service="threadline.v1.ThreadService")
    for _ in range(100):  # the status is set by a task the failure scheduled
        if (await health.Check(service)).status == health_pb2.HealthCheckResponse.NOT_SERVING:
            break
        await asyncio.sleep(0.05)
    assert (await health.Check(service)).status == health_pb2.HealthCheckResponse.NOT_SERVING
    harness = health_pb2.HealthCheckRequest(service="threadline.v1.HarnessService")
    assert (await health.Check(harness)).status == health_pb2.HealthCheckResponse.SERVING
