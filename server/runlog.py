"""Structured run logs: one JSON object per line on stderr, so a log pipeline needs no parser.

Every line of a run carries `thread_id`, `run_id` and the host's `request_id`, so one grep finds a
thread's whole story across replicas; `RunLog` writes a run's first and last line and its crash, if any.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ("LOGGER", "JsonFormatter", "RunLog", "RunStatus", "configure", "log_run")

LOGGER = logging.getLogger("threadline.server")
_FIELDS = "fields"


class JsonFormatter(logging.Formatter):
    """Format a record as `{"ts", "level", "event", ...fields}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        line.update(getattr(record, _FIELDS, {}))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, separators=(",", ":"), default=str)


def configure(level: int = logging.INFO) -> None:
    """Send the server's logs to stderr as JSON lines (stdout carries only `listening on ...`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    # The durable host's own lines (`harness.threads`: run_crashed, store_unavailable, late renewals) too.
    for logger in (LOGGER, logging.getLogger("threadline.threads")):
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


def log_run(event: str, **fields: Any) -> None:
    """Log one run event (`run_started`, `run_finished`) with its identifying fields."""
    LOGGER.info(event, extra={_FIELDS: fields})


RunStatus = Literal[
    "completed",
    "suspended",
    "failed",
    "cancelled",
    "client_cancelled",
    "error",
    "internal_error",
    "undelivered",
]
"""How a run ended, as its `run_finished` line says: the result's status, or what ended the RPC instead."""


class RunLog:
    """The `run_started` and `run_finished` lines of one run, as a context manager.

    Usage:
        with RunLog(agent="default", thread_id=..., run_id=..., request_id=...) as log:
            log.ended(result.status)     # or log.refused(reason), log.crashed(error), log.undelivered(size)

    Leaving the block without an outcome means the client went away (`client_cancelled`). A crash is
    logged with its traceback and the run's ids; hosts only ever get a status without internals.
    """

    def __init__(self, *, agent: str, thread_id: str, run_id: str, request_id: str) -> None:
        self.fields: dict[str, Any] = {"thread_id": thread_id, "run_id": run_id, "request_id": request_id}
        self._agent = agent
        self._status: RunStatus | None = None
        self._extra: dict[str, Any] = {}
        self._started = 0.0

    def __enter__(self) -> RunLog:
        self._started = time.monotonic()
        log_run("run_started", agent=self._agent, **self.fields)
        return self

    def __exit__(self, *exc: object) -> None:
        status = self._status or "client_cancelled"
        duration_ms = round((time.monotonic() - self._started) * 1000, 3)
        log_run("run_finished", status=status, duration_ms=duration_ms, **self._extra, **self.fields)

    def ended(self, status: RunStatus) -> None:
        """The run delivered its result with this status."""
        self._status = status

    def refused(self, reason: str) -> None:
        """The core raised after the run started: the RPC ends with that error's status."""
        self._status, self._extra = "error", {"reason": reason}

    def crashed(self, error: BaseException) -> None:
        """An unexpected exception: logged now, with its traceback and the run's ids."""
        self._status = "internal_error"
        LOGGER.error("run_crashed", exc_info=error, extra={_FIELDS: self.fields})

    def undelivered(self, size: int) -> None:
        """The run ended, but its answer is larger than the server may send."""
        self._extra = {"result_status": self._status, "size": size}
        self._status = "undelivered"
