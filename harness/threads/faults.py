"""What a database error says about the store (THREADS §7 "Store faults"): down, contended, or neither.

- An **outage**: the database cannot be reached or used for any request (a connection or I/O failure,
  a full disk, a read-only or corrupt file, a server shutting down or out of resources). The store
  raises `store_unavailable`, and the service's health is NOT_SERVING until a transaction succeeds.
- **Contention**: this statement waited too long (a lock held by another writer, a statement timeout,
  a deadlock or serialization failure). `store_unavailable` too, since a retry may succeed, but the
  database answered: health does not move.
- A **statement** the database refused for what it is (too many variables, an expression too deep, a
  value out of range or one the driver cannot send, malformed SQL). The database answered, or would
  have: health does not move, and the error is raised unchanged, for the server to answer as the bug
  it is (`INTERNAL_ERROR`, logged). Requests are checked so that none can build such a statement
  (`MAX_LABEL_FILTERS`, `check_storable`).

Anything not known to be contention or a statement's fault counts as an outage.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy.exc import CompileError, DataError, DBAPIError

__all__ = ("Fault", "fault_of")

Fault = Literal["outage", "contention", "statement"]

_SQLITE_STATEMENT = frozenset({1, 18, 20, 21, 25})
"""SQLite primary result codes that blame the statement: SQLITE_ERROR ("too many SQL variables",
"Expression tree is too large", a syntax error), TOOBIG, MISMATCH, MISUSE, RANGE."""
_SQLITE_CONTENTION = frozenset({5, 6})
"""SQLITE_BUSY (another process held the write lock past the busy timeout), SQLITE_LOCKED. Every other
code (NOMEM, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB, …) is an outage."""

_PG_STATEMENT = ("0A", "21", "22", "42", "54")
"""PostgreSQL SQLSTATE classes that blame the statement: feature not supported, cardinality, data
exception, syntax or access rule, program limit exceeded."""
_PG_OUTAGE = frozenset({"42501"})
"""Insufficient privilege: class 42, but no request of the store can succeed (as SQLite's READONLY)."""
_PG_CONTENTION = frozenset({"57014", "55P03", "40001", "40P01"})
"""Statement timeout, lock timeout, serialization failure, deadlock. Connection (08), insufficient
resources (53), an administrator or a shutdown (57P), system error (58), internal error (XX), and an
error without a code (the connection failed): outages."""


def fault_of(error: BaseException) -> Fault:
    """What `error`, raised by one of the store's transactions, says about the database."""
    if isinstance(error, CompileError):
        return "statement"
    if not isinstance(error, DBAPIError) or error.connection_invalidated:
        return "outage"
    if isinstance(error, DataError):  # a value refused, by the database or the driver (a NUL on PostgreSQL)
        return "statement"
    code = getattr(error.orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        primary = code & 0xFF
        if primary in _SQLITE_STATEMENT:
            return "statement"
        return "contention" if primary in _SQLITE_CONTENTION else "outage"
    state = getattr(error.orig, "sqlstate", None)
    if not isinstance(state, str) or not state or state in _PG_OUTAGE:
        return "outage"
    if state in _PG_CONTENTION:
        return "contention"
    return "statement" if state.startswith(_PG_STATEMENT) else "outage"
