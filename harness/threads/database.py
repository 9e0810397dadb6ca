"""Opening the thread store's database: the engine, its durability settings, migrations at start.

SQLite (THREADS §6): WAL, `synchronous=FULL` (a commit returns after its fsync), a busy timeout, and
`BEGIN IMMEDIATE` for write transactions, so two writers never both read and then fail to upgrade their
lock. Reads use a deferred `BEGIN` and run beside writers. The files the store opened (the database, its
WAL and shared memory) are recorded by device and inode: a file deleted or replaced under the server is
noticed (`Database.changed`) instead of taking commits that a restart would not find. A connection kept
open for the store's life holds them, so they keep their identity (SQLite removes the WAL and `-shm` when
the last connection to the file closes, and makes new ones with the next); the pool's connections open
the file without creating it, so a deleted database is not replaced by an empty one. The event log's
appends (LIVE §2.2) commit with `synchronous=NORMAL` (SQLite: their commit skips the fsync, which a
killed process does not lose, and the next `FULL` commit's fsync of the WAL covers them) or
`synchronous_commit = off` (PostgreSQL: the next durable commit flushes the WAL), set by the store's
worker per transaction (`harness.threads.worker`).

PostgreSQL (several replicas on one database): psycopg 3's synchronous driver (the store runs each
transaction whole in a worker thread), libpq's own connection string (so `PGPASSWORD`, `~/.pgpass`,
`PGPASSFILE`, `sslmode` and every libpq setting work as users know them), a bounded pool whose
connections each transaction's first statement checks (a restarted database is reconnected to, not
failed on), and timeouts on connecting, on statements and on a dead peer, so a database that stops
answering fails a transaction instead of hanging it. Replicas starting together migrate once, under an
advisory lock.

Migrations are Alembic's, applied on every start; a database whose schema is newer than this server's
refuses to serve. Opening then reads the store's page-token key, which its migration made once, so every
replica of one database signs and checks page tokens alike (`harness.threads.pages`).
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import psycopg
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from sqlalchemy import Connection, Engine, create_engine, event, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import QueuePool, StaticPool

from .schema import PAGE_TOKEN_KEY, settings
from .statements import Statement

__all__ = (
    "BEGIN",
    "POOL_SIZE",
    "Database",
    "FileIdentity",
    "SchemaTooNew",
    "StoreKind",
    "open_database",
    "password_of",
    "postgresql_conninfo",
    "redacted",
)

StoreKind = Literal["sqlite", "memory", "postgresql"]
"""Where threads live: an SQLite file, memory only (tests, demos), or PostgreSQL (several replicas)."""

BEGIN = {True: Statement(text("BEGIN")), False: Statement(text("BEGIN IMMEDIATE"))}
"""SQLite's start of a read (deferred) and of a write transaction (the write lock taken at once), run on
the driver: SQLAlchemy's path for one statement costs ten times the statement."""

BUSY_TIMEOUT_MS = 10_000
"""How long an SQLite writer waits for another process's write lock before the store reports it down."""

POOL_SIZE = 8
"""Connections per server: one per store thread, held for its life (`harness.threads.worker`)."""

PG_DEFAULTS = {
    "connect_timeout": "5",
    "application_name": "threadline",
    # A peer that stops answering (a frozen host, a cut network) fails the transaction after 10 s.
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}
"""libpq settings the store applies unless the connection string sets them."""

PG_SESSION = "-c statement_timeout=15000 -c lock_timeout=10000 -c idle_in_transaction_session_timeout=60000"
"""Server-side limits of the store's sessions: its statements are short, so a long one is a fault."""

MIGRATION_LOCK = 0x7468_7264
"""The advisory lock key replicas take to migrate one at a time ("thrd")."""

_MIGRATIONS = Path(__file__).with_name("migrations")


class SchemaTooNew(Exception):
    """The database was migrated by a newer server; this one does not know its schema."""


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """One of the files an SQLite store opened, as it was then."""

    path: str
    device: int
    inode: int

    @classmethod
    def of(cls, path: str) -> FileIdentity:
        found = os.stat(path)
        return cls(path, found.st_dev, found.st_ino)

    def changed(self) -> str | None:
        """Why the file at `path` is no longer this one (a `stat`, no descriptor), or None."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return f"{self.path} was deleted"
        except OSError as error:
            return f"{self.path} cannot be checked ({error.strerror})"
        if (found.st_dev, found.st_ino) != (self.device, self.inode):
            return f"{self.path} was replaced by another file"
        return None


@dataclass(frozen=True)
class Database:
    """An open store database: its engine and what kind it is."""

    engine: Engine
    """Synchronous: the store runs each transaction whole in a worker thread (`harness.threads.store`)."""
    kind: StoreKind
    location: str
    """The SQLite file's path, `:memory:`, or PostgreSQL's location without its password."""
    page_key: bytes = field(repr=False)
    """The key of the store's page tokens, the same for every replica (`harness.threads.pages`)."""
    conninfo: str | None = field(default=None, repr=False)
    """PostgreSQL's connection string, for connections outside the pool (`harness.threads.notify`)."""
    files: tuple[FileIdentity, ...] = ()
    """SQLite: the database file, its WAL and its `-shm` as opened (none in memory or on PostgreSQL)."""
    keeper: sqlite3.Connection | None = field(default=None, repr=False)
    """SQLite: the connection that holds `files` open from start to close."""
    on_close: list[Callable[[], None]] = field(default_factory=list, repr=False)
    """Run first when the database closes, off the event loop: the store's threads give their
    connections back (so a clean stop leaves SQLite's WAL checkpointed into the file, and no session
    open on PostgreSQL)."""

    def changed(self) -> str | None:
        """Why the files at the store's path are not those it opened (deleted, replaced), or None.

        Only the files opened are ever written: a file put back under the same identity (renamed away
        and back) is the same database, one put in its place is another, refused until a restart.
        """
        for opened in self.files:
            why = opened.changed()
            if why is not None:
                return why
        return None

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        for close in self.on_close:
            close()
        self.engine.dispose()
        if self.keeper is not None:
            self.keeper.close()


def _sqlite_uri(path: str, mode: Literal["rw", "rwc"]) -> str:
    return f"file:{quote(os.path.abspath(path))}?mode={mode}"


def _sqlite_engine(path: str | None) -> Engine:
    """The pool of a file's (or memory's) connections."""
    # Worker threads share the connections, one transaction at a time each.
    if path is None:
        # One connection for the process: an in-memory database lives exactly as long as it.
        engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        # `mode=rw`: a connection opened once the file is gone fails instead of creating an empty one.
        uri = _sqlite_uri(path, "rw")

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)

        engine = create_engine(
            "sqlite://", creator=connect, poolclass=QueuePool, pool_size=POOL_SIZE, max_overflow=POOL_SIZE
        )

    @event.listens_for(engine, "connect")
    def _connected(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own transaction handling off: the store issues BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if path is not None:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:  # SQLAlchemy's own transactions: migrations at start
        BEGIN[False].run(connection, {})

    return engine


def postgresql_conninfo(location: str) -> str:
    """The libpq connection string the store uses for `location` (a URL or a key=value DSN).

    Raises:
        ValueError: `location` is not a valid libpq connection string (the message never holds it).
    """
    try:
        params = {key: str(value) for key, value in conninfo_to_dict(location).items() if value is not None}
    except psycopg.ProgrammingError as error:
        # libpq quotes the offending part, which may be the password: keep only its words.
        raise ValueError(re.sub(r'"[^"]*"', '"…"', str(error).strip())[:200]) from None
    for key, value in PG_DEFAULTS.items():
        params.setdefault(key, value)
    params["options"] = f"{params.get('options', '')} {PG_SESSION}".strip()
    return make_conninfo("", **params)


def password_of(location: str) -> str | None:
    """The password written into `location` itself, if any (it should come from elsewhere)."""
    try:
        password = conninfo_to_dict(location).get("password")
    except psycopg.ProgrammingError:
        return None
    return str(password) if password else None


def redacted(location: str) -> str:
    """`location` as it may be logged: `postgresql://user@host:port/dbname`, never a password."""
    try:
        params = conninfo_to_dict(location)
    except psycopg.ProgrammingError:
        return "postgresql://(invalid)"
    user = f"{params['user']}@" if params.get("user") else ""
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{params.get('host', '')}{port}/{params.get('dbname', '')}"


def _postgresql_engine(location: str) -> Engine:
    """The pool of the store's sessions."""
    conninfo = postgresql_conninfo(location)

    def connect() -> Any:
        return psycopg.connect(conninfo)

    # `creator`: libpq parses the connection string itself, password sources included.
    return create_engine(
        "postgresql+psycopg://",
        creator=connect,
        pool_size=POOL_SIZE,
        max_overflow=0,
        pool_timeout=10,
        # No pre-ping: the store's first statement of each transaction checks the connection
        # (`StoreWorker._begin`), which saves a round trip a transaction.
    )


LOCKED_WAIT_S = 60.0
"""How long a server starting on an SQLite file that another process holds locked (it is migrating it,
or making it WAL) keeps trying before it gives up."""


def _migrate_when_free(engine: Engine) -> None:
    """Migrate; on SQLite, while another process starting on the same new file holds it locked past the
    busy timeout (two servers started at once on a loaded machine), wait and try again."""
    deadline = time.monotonic() + LOCKED_WAIT_S
    delay = 0.1
    while True:
        try:
            with engine.begin() as connection:
                _migrate(connection)
            return
        except OperationalError as error:
            locked = isinstance(error.orig, sqlite3.OperationalError) and "locked" in str(error.orig)
            if not locked or time.monotonic() + delay > deadline:
                raise
        engine.dispose()  # a connection that failed halfway through its set-up is not reused
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def _migrate(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Held to the end of the migration's transaction: replicas starting together migrate once.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
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

    `path` is the SQLite file, or PostgreSQL's connection string.

    Raises:
        SchemaTooNew: The database has a newer schema.
        sqlalchemy.exc.SQLAlchemyError, sqlite3.Error, OSError: It cannot be opened, created or written.
    """
    return await asyncio.to_thread(_open, kind, path)


def _open(kind: StoreKind, path: str | None) -> Database:
    keeper: sqlite3.Connection | None = None
    if kind == "postgresql":
        assert path is not None
        engine = _postgresql_engine(path)
    else:
        if kind == "sqlite":
            assert path is not None
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # The one connection that may create the file; the pool's only open it.
            keeper = sqlite3.connect(
                _sqlite_uri(path, "rwc"),
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        engine = _sqlite_engine(path if kind == "sqlite" else None)
    try:
        _migrate_when_free(engine)
        with engine.begin() as connection:
            # SQLite opens a read-only file without complaint: prove now that a write commits.
            connection.execute(text("UPDATE alembic_version SET version_num = version_num"))
            key = connection.execute(
                select(settings.c.value).where(settings.c.name == PAGE_TOKEN_KEY)
            ).scalar_one()
        files: tuple[FileIdentity, ...] = ()
        if keeper is not None:
            assert path is not None
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()  # opens the WAL and -shm
            real = os.path.realpath(path)  # SQLite names them after the file a link points to
            names = (os.path.abspath(path), f"{real}-wal", f"{real}-shm")
            files = tuple(FileIdentity.of(name) for name in names)
    except BaseException:
        engine.dispose()
        if keeper is not None:
            keeper.close()
        raise
    if kind == "postgresql":
        assert path is not None
        return Database(
            engine,
            kind,
            redacted(path),
            bytes.fromhex(key),
            postgresql_conninfo(path),
        )
    if path is None:
        return Database(engine, kind, ":memory:", bytes.fromhex(key))
    return Database(engine, kind, path, bytes.fromhex(key), files=files, keeper=keeper)
