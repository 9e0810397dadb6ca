"""How the store runs a statement: built once as SQLAlchemy Core, compiled once per dialect, run on the driver.

A turn runs the same dozen statements for every commit (Begin, the fenced commits, renewals). Going
through SQLAlchemy's execution path costs ~0.1–0.2 ms of Python per statement, twelve times what the
driver itself needs, so statements are written once as Core constructs (the schema stays the one source
of names and types), compiled once per dialect with named parameters, and executed on the DBAPI cursor
of the transaction's own connection. Every statement of the store runs this way (`queries` names them),
the cold ones too, so there is one way to run one.
"""

from __future__ import annotations

import contextlib
from collections import namedtuple
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.base import Executable

__all__ = ("Statement", "StatementFamily", "on_driver")

K = TypeVar("K", bound=Hashable)

_NAMED_SQLITE = sqlite.dialect(paramstyle="named")
"""sqlite3 takes a dict with `:name`; psycopg's own dialect already uses `%(name)s`."""


_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA")


def _dialect(conn: Connection) -> Dialect:
    return _NAMED_SQLITE if conn.dialect.name == "sqlite" else conn.dialect


class Statement:
    """One statement: `run(conn, params)` returns its rows as named tuples (none without a result)."""

    executed = 0
    """How many statements that read or write rows ran in this process, transaction control (`BEGIN`,
    savepoints, pragmas) not counted (the benchmark compares them with bare transactions')."""

    def __init__(self, statement: Executable) -> None:
        self._statement = statement
        self._compiled: dict[str, tuple[str, dict[str, Any]]] = {}
        self._row: dict[str, Any] = {}
        self.control = False
        """Transaction control (`BEGIN`, savepoints, pragmas), known once compiled: not in `executed`."""

    def _sql(self, conn: Connection, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The dialect's SQL and the parameters: the statement's own literals, then `params`."""
        name = conn.dialect.name
        compiled = self._compiled.get(name)
        if compiled is None:
            done: Any = self._statement.compile(dialect=_dialect(conn))  # type: ignore[attr-defined]
            literals = {key: value for key, value in done.params.items() if value is not None}
            compiled = self._compiled[name] = (str(done), literals)
            self.control = compiled[0].lstrip().upper().startswith(_CONTROL)
        sql, literals = compiled
        return sql, {**literals, **params}

    def run(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        """Execute on `conn`'s transaction. Driver errors are raised as SQLAlchemy's would be
        (`IntegrityError`, `OperationalError`, ... with `connection_invalidated`), and a connection the
        database dropped is invalidated, so callers handle one family of errors and the pool heals."""
        sql, bound = self._sql(conn, params)
        return self._execute(conn, sql, bound, lambda cursor: cursor.execute(sql, bound))

    def run_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute once per row of parameters, in one driver call (a statement without a result)."""
        if rows:
            sql, _bound = self._sql(conn, {})
            many = [self._sql(conn, row)[1] for row in rows]
            self._execute(conn, sql, many, lambda cursor: cursor.executemany(sql, many))

    def _execute(self, conn: Connection, sql: str, bound: Any, call: Callable[[Any], object]) -> list[Any]:
        raw: Any = conn.connection.dbapi_connection
        Statement.executed += not self.control
        cursor = raw.cursor()
        try:
            call(cursor)
            description = cursor.description
            if description is None:
                return []
            rows = cursor.fetchall()
        except conn.dialect.loaded_dbapi.Error as error:
            raise _refused(conn, sql, bound, error, raw, cursor) from error
        finally:
            with contextlib.suppress(Exception):  # a dead connection's cursor may not close cleanly
                cursor.close()
        shape: Any = self._row.get(conn.dialect.name)
        if shape is None:
            names = [column[0] for column in description]
            shape = self._row[conn.dialect.name] = namedtuple("Row", names, rename=True)
        return [shape._make(row) for row in rows]

    def first(self, conn: Connection, params: Mapping[str, Any]) -> Any | None:
        rows = self.run(conn, params)
        return rows[0] if rows else None


def on_driver(conn: Connection, what: str, call: Callable[[Any], object]) -> None:
    """`call(dbapi_connection)` (a driver's own COMMIT or ROLLBACK), its errors raised as a statement's
    are (`Statement.run`)."""
    raw: Any = conn.connection.dbapi_connection
    try:
        call(raw)
    except conn.dialect.loaded_dbapi.Error as error:
        raise _refused(conn, what, {}, error, raw, None) from error


def _refused(conn: Connection, sql: str, bound: Any, error: Any, raw: Any, cursor: Any) -> Exception:
    """The driver's `error` as SQLAlchemy's; a connection the database dropped is invalidated first."""
    disconnect = conn.dialect.is_disconnect(error, raw, cursor) or _gone(error)
    if disconnect:
        # The database went away: this connection and every other one in the pool are dead.
        conn.invalidate(error)
        conn.engine.dispose(close=False)
    refused: Exception = DBAPIError.instance(
        sql, bound, error, conn.dialect.loaded_dbapi.Error, connection_invalidated=disconnect
    )
    return refused


def _gone(error: Exception) -> bool:
    """A server that ended the session (a restart, an administrator: SQLSTATE 57P, connection class
    08), which psycopg does not always report as a broken connection."""
    state = getattr(error, "sqlstate", None) or ""
    return isinstance(state, str) and state.startswith(("08", "57P"))


class StatementFamily(Generic[K]):
    """Statements that differ only in their shape (the columns they set, the filters they hold): one
    `Statement` per shape `K`, built on first use."""

    def __init__(self, build: Callable[[K], Executable]) -> None:
        self._build = build
        self._members: dict[K, Statement] = {}

    def __getitem__(self, shape: K) -> Statement:
        member = self._members.get(shape)
        if member is None:
            member = self._members[shape] = Statement(self._build(shape))
        return member
