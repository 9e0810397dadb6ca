"""What a database error does to the thread store (`harness.threads.faults`), on real databases.

Only an outage moves the store's health. A statement the database refuses for what it is (SQLite's
expression depth limit, a NUL PostgreSQL text cannot hold) is raised unchanged with health untouched,
and a statement that waited too long for a lock is `store_unavailable` (worth a retry) with health
untouched too. The store's page-token key is made once by its migration and kept across restarts, and a
database migrated by an older server gets one when it is upgraded.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from conftest import PgStore
from sqlalchemy import create_engine
from sqlalchemy.exc import DataError, OperationalError

from harness import HarnessState
from harness.errors import ErrorCode, ThreadError
from harness.threads import StoreKind, ThreadStore, open_database
from harness.threads import database as database_module
from harness.threads.codec import state_parts
from harness.threads.pages import PageTokens
from harness.threads.schema import SCHEMA_REVISION
from harness.threads.store import NewCheckpoint

pytestmark = pytest.mark.anyio

THOUSAND = {f"k{i}": "v" for i in range(1000)}


def migrated_to(path: Path, revision: str) -> None:
    """An SQLite file as an older server's migrations left it, at `revision`."""
    config = Config()
    config.set_main_option("script_location", str(Path(database_module.__file__).with_name("migrations")))
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    engine.dispose()


async def test_a_0002_store_upgrades_in_place_and_its_threads_take_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    migrated_to(path, "0002")
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO threads (namespace, thread_id, incarnation, agent, labels, create_time, update_time,"
            " revision, fence, cancel_requested) VALUES ('', 't', 'i', 'a', '{}', 1, 1, 1, 'f', 0)"
        )
    upgraded = await opened("sqlite", str(path))
    try:
        thread = await upgraded.thread("t")
        assert thread is not None and thread.change_seq == 0
    finally:
        upgraded.close()
        await upgraded.database.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(SCHEMA_REVISION,)]
        assert db.execute("SELECT queue_length, sweep_after FROM threads").fetchall() == [(0, None)]
        assert db.execute("SELECT count(*) FROM run_logs").fetchall() == [(0,)]


async def opened(kind: StoreKind, location: str) -> ThreadStore:
    database = await open_database(kind, location)
    return ThreadStore(database, replica="test")


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[ThreadStore]:
    store = await opened("sqlite", str(tmp_path / "threads.db"))
    yield store
    store.close()
    await store.database.close()


@pytest.fixture
async def pg_thread_store(pg_store: PgStore) -> AsyncIterator[ThreadStore]:
    previous = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = pg_store.env["PGPASSWORD"]
    try:
        store = await opened("postgresql", pg_store.url)
    finally:
        if previous is None:
            del os.environ["PGPASSWORD"]
        else:
            os.environ["PGPASSWORD"] = previous
    yield store
    store.close()
    await store.database.close()


def watched(store: ThreadStore) -> list[bool]:
    """Every health change of `store` from now on."""
    changes: list[bool] = []
    store.on_health = changes.append
    return changes


async def test_a_statement_sqlite_refuses_leaves_health_alone(sqlite_store: ThreadStore) -> None:
    changes = watched(sqlite_store)
    with pytest.raises(OperationalError, match="Expression tree is too large"):
        await sqlite_store.threads(limit=10, labels_filter=THOUSAND, status=None, after=None)
    assert sqlite_store.healthy and changes == []
    assert await sqlite_store.threads(limit=10, labels_filter={}, status=None, after=None) == []


async def test_a_value_postgresql_cannot_hold_leaves_health_alone(pg_thread_store: ThreadStore) -> None:
    changes = watched(pg_thread_store)
    with pytest.raises(DataError):
        await pg_thread_store.threads(limit=10, labels_filter={"k": "\x00"}, status=None, after=None)
    with pytest.raises(DataError):
        await pg_thread_store.thread("a\x00")
    assert pg_thread_store.healthy and changes == []


async def test_a_lock_held_past_the_busy_timeout_is_unavailable_but_no_outage(tmp_path: Path) -> None:
    """Another process holding SQLite's write lock: this write gives up after the busy timeout (10 s)."""
    path = tmp_path / "threads.db"
    store = await opened("sqlite", str(path))
    changes = watched(store)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(ThreadError) as caught:
            await _a_write(store)
        assert caught.value.code == ErrorCode.STORE_UNAVAILABLE
        assert store.healthy and changes == []
    finally:
        holder.rollback()
        holder.close()
        store.close()
        await store.database.close()


async def test_a_new_file_locked_past_the_busy_timeout_by_another_starting_process_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two servers starting at once on a new SQLite file: the second finds it locked while the first
    migrates (on a loaded machine, past the busy timeout) and opens it once it is free."""
    monkeypatch.setattr(database_module, "BUSY_TIMEOUT_MS", 300)  # so the lock outlasts the busy timeout
    path = tmp_path / "threads.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # as a migration of the new file holds it
    released = False

    def release() -> None:
        nonlocal released
        released = True
        holder.rollback()

    loop = asyncio.get_running_loop()
    loop.call_later(2.0, release)  # several busy timeouts later
    try:
        database = await open_database("sqlite", str(path))
    finally:
        holder.close()
    try:
        assert released, "it opened only once the lock was released"
        store = ThreadStore(database, replica="test")
        await _a_write(store)
        store.close()
    finally:
        await database.close()


async def test_a_row_locked_past_the_lock_timeout_is_unavailable_but_no_outage(
    pg_store: PgStore, pg_thread_store: ThreadStore
) -> None:
    """A session holding the thread's row: this write gives up after `lock_timeout` (10 s)."""
    await _a_write(pg_thread_store, thread_id="thread_locked")
    changes = watched(pg_thread_store)
    with pg_store.cluster.connect(pg_store.url.rsplit("/", 1)[1]) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM threads WHERE thread_id = 'thread_locked' FOR UPDATE")
        with pytest.raises(ThreadError) as caught:
            await pg_thread_store.cancel("thread_locked", "run-" + "0" * 32, outcome="{}")
        holder.execute("ROLLBACK")
    assert caught.value.code == ErrorCode.STORE_UNAVAILABLE
    assert pg_thread_store.healthy and changes == []


async def _a_write(store: ThreadStore, thread_id: str = "thread_write") -> None:
    state = HarnessState.new(thread_id=thread_id)
    checkpoint = NewCheckpoint("created", state_parts(state), pending=None, remaining=None, client_tools=())
    await store.create(thread_id, agent="default", thread_labels={}, checkpoint=checkpoint, accepted=None)


# --- the page-token key ------------------------------------------------------------------------------


async def test_the_page_token_key_is_the_store_s_and_survives_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "threads.db")
    first = await opened("sqlite", path)
    token = PageTokens(first.database.page_key).checkpoints_token(3, thread_id="thread_x")
    first.close()
    await first.database.close()
    again = await opened("sqlite", path)
    try:
        assert again.database.page_key == first.database.page_key and len(again.database.page_key) == 32
        assert PageTokens(again.database.page_key).checkpoints_before(token, thread_id="thread_x") == 3
    finally:
        again.close()
        await again.database.close()
    other = await opened("sqlite", str(tmp_path / "other.db"))
    try:
        assert other.database.page_key != first.database.page_key, "each store makes its own"
    finally:
        other.close()
        await other.database.close()


async def test_a_store_an_older_server_migrated_gets_its_key_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    migrated_to(path, "0001")  # as revision 0001 left it: no settings table
    upgraded = await opened("sqlite", str(path))
    try:
        assert len(upgraded.database.page_key) == 32
    finally:
        upgraded.close()
        await upgraded.database.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(SCHEMA_REVISION,)]
        assert db.execute("SELECT count(*) FROM store_settings").fetchall() == [(1,)]
