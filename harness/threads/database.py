"""Opening the thread store's database: the engine, SQLite's durability settings, migrations at start.

SQLite (THREADS §6): WAL, `synchronous=FULL` (a commit returns after its fsync), a busy timeout, and
`BEGIN IMMEDIATE` for write transactions, so two writers never both read and then fail to upgrade their
lock. Reads use a deferred `BEGIN` and run beside writers. Migrations are Alembic's, applied on every
start; a database whose schema is newer than this server's refuses to serve.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.pool import StaticPool

__all__ = ("READ", "Database", "SchemaTooNew", "StoreKind", "open_database")

StoreKind = Literal["sqlite", "memory"]
"""Where threads live: an SQLite file, or memory only (tests, demos)."""

READ = {"threadline_read": True}
"""Execution options of a read-only transaction (a deferred `BEGIN` on SQLite)."""

BUSY_TIMEOUT_MS = 10_000
"""How long an SQLite writer waits for another process's write lock before the store reports it down."""

_MIGRATIONS = Path(__file__).with_name("migrations")


class SchemaTooNew(Exception):
    """The database was migrated by a newer server; this one does not know its schema."""


@dataclass(frozen=True)
class Database:
    """An open store database: its engine and what kind it is."""

    engine: Engine
    """Synchronous: the store runs each transaction whole in a worker thread (`harness.threads.store`)."""
    kind: StoreKind
    location: str
    """The SQLite file's path, or `:memory:`."""

    async def close(self) -> None:
        await asyncio.to_thread(self.engine.dispose)


def _sqlite_engine(path: str | None) -> Engine:
    # Worker threads share the pool's connections, one transaction at a time each.
    threads = {"check_same_thread": False}
    if path is None:
        # One connection for the process: an in-memory database lives exactly as long as it.
        engine = create_engine("sqlite://", poolclass=StaticPool, connect_args=threads)
    else:
        engine = create_engine(f"sqlite:///{path}", pool_size=8, max_overflow=8, connect_args=threads)

    @event.listens_for(engine, "connect")
    def _connected(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own transaction handling off: `_begin` issues BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if path is not None:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        read = connection.get_execution_options().get("threadline_read", False)
        connection.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

    return engine


def _migrate(connection: Connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["connection"] = connection
    known = {script.revision for script in ScriptDirectory.from_config(config).walk_revisions()}
    current = MigrationContext.configure(connection).get_current_heads()
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        raise SchemaTooNew(
            f"the database's schema revision {', '.join(unknown)} is newer than this server knows "
            f"({', '.join(sorted(known))}); upgrade the server"
        )
    command.upgrade(config, "head")


async def open_database(kind: StoreKind, path: str | None = None) -> Database:
    """Open (creating it if needed) and migrate the store's database, in a worker thread.

    Raises:
        SchemaTooNew: The database has a newer schema.
        sqlalchemy.exc.SQLAlchemyError, OSError: It cannot be opened, created or written.
    """
    return await asyncio.to_thread(_open, kind, path)


def _open(kind: StoreKind, path: str | None) -> Database:
    if kind == "sqlite":
        assert path is not None
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = _sqlite_engine(path if kind == "sqlite" else None)
    try:
        with engine.begin() as connection:
            _migrate(connection)
        with engine.begin() as connection:
            # SQLite opens a read-only file without complaint: prove now that a write commits.
            connection.execute(text("UPDATE alembic_version SET version_num = version_num"))
    except BaseException:
        engine.dispose()
        raise
    return Database(engine, kind, path if path is not None else ":memory:")
