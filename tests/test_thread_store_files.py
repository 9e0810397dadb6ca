"""A SQLite store's files changing under a running `threadline serve` (THREADS §6, docs/threads.md "Operations").

A database file deleted or replaced while the server runs is noticed by its identity (device and
inode): ThreadService answers `UNAVAILABLE STORE_UNAVAILABLE`, its health turns `NOT_SERVING` without
waiting for traffic, HarnessService is unaffected, and nothing answered OK after the change is missing
when a server starts on the path again. A file renamed away and back is the same database and serves
again. A `-shm` truncated or made immutable kills the server (SIGBUS: SQLite maps it); the database it
leaves is consistent and holds every acknowledged commit. Several servers sharing one file never take
each other's files for changed ones.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path

import grpc
import pytest
from conftest import create_thread, fresh_thread_id, get_thread, refused, run_thread, user_prompts
from grpc_health.v1 import health_pb2, health_pb2_grpc
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2, thread_service_pb2
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub

pytestmark = pytest.mark.anyio

DEADLINE = 60.0
"""Seconds the server may take to notice a change on a loaded 2-core machine (it checks every second)."""
THREADS = "threadline.v1.ThreadService"
HARNESS = "threadline.v1.HarnessService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def store_args(path: Path) -> tuple[str, str]:
    return "--store", f"sqlite:{path}"


def companions(path: Path) -> list[Path]:
    """The WAL and shared-memory files SQLite keeps beside `path`."""
    return [path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


@asynccontextmanager
async def serving(path: Path) -> AsyncIterator[tuple[LoggedServe, grpc.aio.Channel, ThreadServiceStub]]:
    with logged_serve(*store_args(path)) as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            yield served, channel, ThreadServiceStub(channel)


async def health(channel: grpc.aio.Channel, service: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return int((await stub.Check(health_pb2.HealthCheckRequest(service=service))).status)


async def until_health(channel: grpc.aio.Channel, status: int) -> None:
    """Wait for ThreadService's health to become `status` (set by the server's own check)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while (now := await health(channel, THREADS)) != status:
        assert loop.time() < deadline, f"ThreadService health stayed {now}"
        await asyncio.sleep(0.1)


async def harness_serves(channel: grpc.aio.Channel) -> None:
    assert await health(channel, HARNESS) == SERVING
    ran = await harness_service_pb2_grpc.HarnessServiceStub(channel).Run(
        harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello"))
    )
    assert ran.result.status == run_pb2.RUN_STATUS_COMPLETED


async def all_refused(stub: ThreadServiceStub, existing: str) -> None:
    """A create, a run of `existing`, a read and a list: each answers UNAVAILABLE STORE_UNAVAILABLE.

    None is answered OK, so none can be missing from the store a restart finds.
    """
    ts = thread_service_pb2
    run = ts.ThreadRunSpec(thread_id=existing, request_id="after", text="after the change")
    for call in (
        stub.CreateThread(ts.CreateThreadRequest(thread_id=fresh_thread_id())),
        stub.RunThread(ts.RunThreadRequest(spec=run)),
        stub.GetThread(ts.GetThreadRequest(thread_id=existing)),
        stub.ListThreads(ts.ListThreadsRequest()),
    ):
        assert (await refused(call))[:2] == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")


def why_logged(served: LoggedServe, words: str) -> None:
    whys = [r.get("why", "") for r in served.records() if r["event"] == "store_unavailable"]
    assert any(words in why for why in whys), f"store_unavailable must say {words!r}: {whys}"


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as db:
        (verdict,) = db.execute("PRAGMA integrity_check").fetchone()
    return str(verdict)


@asynccontextmanager
async def restarted(path: Path, answered: dict[str, int]) -> AsyncIterator[ThreadServiceStub]:
    """A server on `path` again: every thread answered OK is at its revision, the block's checks run,
    a new thread is made and run; then the file passes `PRAGMA integrity_check`."""
    async with serving(path) as (served, channel, stub):
        for thread_id, revision in answered.items():
            assert (await get_thread(stub, thread_id)).revision == revision, thread_id
        yield stub
        thread = await create_thread(stub)
        await run_thread(stub, thread.thread_id, text="serving again")
        assert await health(channel, THREADS) == SERVING
        assert served.stop() == 0
    assert integrity(path) == "ok"


# --- deleted, replaced, renamed away and back ---------------------------------------------------------


@pytest.mark.parametrize("deleted", ["the file", "the file, its -wal and -shm"])
async def test_a_store_deleted_under_the_server_is_unavailable_and_answers_nothing_it_loses(
    tmp_path: Path, deleted: str
) -> None:
    path = tmp_path / "threads.db"
    async with serving(path) as (served, channel, stub):
        before = await create_thread(stub)
        await run_thread(stub, before.thread_id, text="hello")
        for each in [path, *(companions(path) if "-wal" in deleted else [])]:
            each.unlink()
        await until_health(channel, NOT_SERVING)  # noticed with no request at all
        await all_refused(stub, before.thread_id)
        await harness_serves(channel)
        assert await health(channel, THREADS) == NOT_SERVING, "no store to recover to"
        assert served.stop() == 0
    why_logged(served, "was deleted")
    # The next server starts on an empty store: the file that was there is gone.
    async with restarted(path, {}):
        pass


async def test_a_store_replaced_under_the_server_is_refused_not_written(tmp_path: Path) -> None:
    path, other = tmp_path / "threads.db", tmp_path / "restored.db"
    async with serving(other) as (served, _channel, stub):
        kept = await create_thread(stub)
        assert served.stop() == 0
    async with serving(path) as (served, channel, stub):
        before = await create_thread(stub)
        other.replace(path)  # another database in its place, as a restore under a running server would
        await all_refused(stub, before.thread_id)
        await until_health(channel, NOT_SERVING)
        await harness_serves(channel)
        assert served.stop() == 0
    why_logged(served, "was replaced")
    # What docs/threads.md asks of a restore: the old -wal and -shm belong to the replaced database.
    for each in companions(path):
        each.unlink(missing_ok=True)
    async with restarted(path, {kept.thread_id: kept.revision}) as stub:
        refusal = await refused(
            stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id=before.thread_id))
        )
        assert refusal[1] == "THREAD_NOT_FOUND", "the served database is the one put in place"


async def test_a_store_renamed_away_and_back_is_the_same_database_and_serves_again(tmp_path: Path) -> None:
    path, away = tmp_path / "threads.db", tmp_path / "elsewhere.db"
    async with serving(path) as (served, channel, stub):
        before = await create_thread(stub)
        path.rename(away)
        await until_health(channel, NOT_SERVING)
        await all_refused(stub, before.thread_id)
        away.rename(path)
        await until_health(channel, SERVING)  # the probe finds the file it opened back at the path
        done = await run_thread(stub, before.thread_id, text="back")
        assert served.stop() == 0
    async with restarted(path, {before.thread_id: done.revision}):
        pass


async def test_servers_sharing_one_file_never_take_it_for_changed(tmp_path: Path) -> None:
    """The WAL and -shm of a shared file outlive the server that made them: no false alarm."""
    path = tmp_path / "threads.db"
    made: dict[str, int] = {}
    async with serving(path) as (first, _c1, stub1):
        thread = await create_thread(stub1)
        made[thread.thread_id] = thread.revision
        async with serving(path) as (second, channel2, stub2):
            thread = await create_thread(stub2)
            made[thread.thread_id] = thread.revision
            assert first.stop() == 0  # the first server's connections close; the second's stay
            async with serving(path) as (third, channel3, stub3):
                for stub in (stub2, stub3):
                    thread = await create_thread(stub)
                    made[thread.thread_id] = (
                        await run_thread(stub, thread.thread_id, text="shared")
                    ).revision
                await asyncio.sleep(3)  # a few of the servers' own checks
                for stub, channel in ((stub2, channel2), (stub3, channel3)):
                    assert await health(channel, THREADS) == SERVING
                    for thread_id in made:
                        await get_thread(stub, thread_id)
                assert third.stop() == 0
            assert second.stop() == 0
    for served in (first, second, third):
        assert not [r for r in served.records() if r["event"] == "store_unavailable"]
    async with restarted(path, made):
        pass


# --- the -shm mapping taken away: SIGBUS, and a consistent database --------------------------------


def immutable_files_supported(tmp_path: Path) -> bool:
    """Whether `chattr +i` works here (root with CAP_LINUX_IMMUTABLE, a file system that has it)."""
    chattr = shutil.which("chattr")
    if chattr is None or os.geteuid() != 0:
        return False
    probe = tmp_path / "probe"
    probe.write_text("")
    tried = subprocess.run([chattr, "+i", str(probe)], capture_output=True, check=False)
    subprocess.run([chattr, "-i", str(probe)], capture_output=True, check=False)
    probe.unlink()
    return tried.returncode == 0


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("how", ["truncated", "immutable"])
async def test_a_shm_taken_away_kills_the_server_and_leaves_every_acknowledged_commit(
    tmp_path: Path, how: str
) -> None:
    if how == "immutable" and not immutable_files_supported(tmp_path):
        pytest.skip("chattr +i does not work here (not root, or no such file attribute)")
    path = tmp_path / "threads.db"
    shm = companions(path)[1]
    acknowledged: dict[str, int] = {}
    with ExitStack() as stack:
        async with serving(path) as (served, _channel, stub):
            for n in range(3):
                thread = await create_thread(stub)
                for turn in range(3):
                    done = await run_thread(stub, thread.thread_id, text=f"thread {n} turn {turn}")
                acknowledged[thread.thread_id] = done.revision
            if how == "truncated":
                os.truncate(shm, 0)
            else:
                stack.enter_context(immutable(shm))
            # The crash comes at the transaction's first read of the -shm, before it writes anything.
            with pytest.raises(grpc.aio.AioRpcError) as crashed:
                await run_thread(stub, next(iter(acknowledged)), text="after the change")
            assert crashed.value.code() == grpc.StatusCode.UNAVAILABLE
            assert await asyncio.to_thread(served.serve.process.wait, DEADLINE) == -signal.SIGBUS
        if how == "immutable":
            # A -shm the server cannot write is refused at start, before anything could crash.
            with pytest.raises(RuntimeError, match="--store"), logged_serve(*store_args(path)):
                pass
    async with restarted(path, acknowledged) as stub:
        for thread_id in acknowledged:
            history = user_prompts((await get_thread(stub, thread_id, full=True)).head.state)
            assert len(history) == 3 and "after the change" not in history
