"""Structured run logs: one JSON object per line on stderr (or `--log-format text`), so a log pipeline
needs no parser.

Every line logged while a run executes, ours and any library's (pydantic-ai, grpc, a tool's own logger),
carries the run's `thread_id`, `run_id` and the host's `request_id` (`run_context`, a context variable the
run's tasks inherit), and with traces on the current `trace_id` and `span_id`, so one grep finds a
thread's whole story across replicas; `RunLog` writes a run's first and last line and its crash, if any.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import trace

from .metrics import CURRENT, Service
from .tracing import RunSpan

if TYPE_CHECKING:
    from pydantic_ai.usage import RunUsage

__all__ = (
    "LOGGER",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "JsonFormatter",
    "RunLog",
    "RunScope",
    "RunStatus",
    "TextFormatter",
    "configure",
    "log_run",
    "run_context",
)

LOGGER = logging.getLogger("threadline.server")
_FIELDS = "fields"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("json", "text")
_RUN: ContextVar[Mapping[str, Any]] = ContextVar("threadline_run", default=MappingProxyType({}))


@contextmanager
def run_context(**fields: Any) -> Iterator[None]:
    """Every line logged inside the block (and in the tasks it starts) carries `fields`."""
    token = _RUN.set({**_RUN.get(), **fields})
    try:
        yield
    finally:
        _RUN.reset(token)


class _RunFields(logging.Filter):
    """Add the current run's ids and trace to a record (a record's own fields win)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run = _RUN.get()
        span = trace.get_current_span().get_span_context()  # the invalid span unless traces are on
        if span.is_valid:
            run = {**run, "trace_id": format(span.trace_id, "032x"), "span_id": format(span.span_id, "016x")}
        if run:
            setattr(record, _FIELDS, {**run, **getattr(record, _FIELDS, {})})
        return True


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


class TextFormatter(logging.Formatter):
    """Format a record as `TS LEVEL EVENT key=value ...` on one line (for a terminal)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        fields = " ".join(
            f"{key}={json.dumps(value, default=str) if not isinstance(value, str) or ' ' in value else value}"
            for key, value in getattr(record, _FIELDS, {}).items()
        )
        line = f"{ts} {record.levelname.lower():7} {record.getMessage()}{' ' + fields if fields else ''}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "info", format: str = "json") -> None:
    """Send every log to stderr (stdout carries only `listening on ...`): the server's own lines at
    `level`, other libraries' from WARNING (from DEBUG with `level` "debug"), each line with the ids
    of the run it belongs to."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    handler.addFilter(_RunFields())
    number = logging.getLevelNamesMapping()[level.upper()]
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if number == logging.DEBUG else max(number, logging.WARNING))
    # The durable host's own lines (`harness.threads`: run_crashed, store_unavailable, late renewals) too.
    for logger in (LOGGER, logging.getLogger("threadline.threads")):
        logger.handlers[:] = [handler]
        logger.setLevel(number)
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


class RunScope:
    """What a run has while it executes, whichever service runs it: its ids on every log line
    (`run_context`), its `threadline.run` span, and its metrics (started, finished, duration, tokens).

    `start()` and `end()` from the same task: the span is attached to its context and detached again.
    """

    def __init__(self, service: Service, agent: str, fields: Mapping[str, str]) -> None:
        self._service, self._agent, self._fields = service, agent, fields
        self._metrics = CURRENT.get()
        self._span = RunSpan(service, agent, fields)
        self._context: AbstractContextManager[None] = nullcontext()
        self._started = 0.0
        self._first = True

    def start(self) -> None:
        self._started = time.monotonic()
        self._context = run_context(**self._fields)
        self._context.__enter__()
        self._span.start()
        if self._metrics is not None:
            self._metrics.run_started(self._service, self._agent)

    def elapsed(self) -> float:
        """Seconds since `start()`."""
        return time.monotonic() - self._started

    def first_event(self) -> None:
        """The run's first event is out (metrics: time to first event); later calls do nothing."""
        if self._first and self._metrics is not None:
            self._metrics.first_event_seconds.labels(self._service).observe(self.elapsed())
        self._first = False

    def end(self, status: str, usage: RunUsage | None = None, reason: str | None = None) -> None:
        """The run ended `status` (refused with `reason`, if it was), having used `usage` of its model."""
        if self._metrics is not None:
            self._metrics.run_finished(self._service, self._agent, status, self.elapsed(), usage)
        self._span.end(status, reason)
        self._context.__exit__(None, None, None)


class RunLog:
    """The `run_started` and `run_finished` lines of one HarnessService run (and its `RunScope`), as a
    context manager.

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
        self._usage: RunUsage | None = None
        self._scope = RunScope("harness", agent, self.fields)

    def __enter__(self) -> RunLog:
        self._scope.start()
        log_run("run_started", agent=self._agent, **self.fields)
        return self

    def __exit__(self, *exc: object) -> None:
        status = self._status or "client_cancelled"
        duration_ms = round(self._scope.elapsed() * 1000, 3)
        log_run("run_finished", status=status, duration_ms=duration_ms, **self._extra, **self.fields)
        self._scope.end(status, self._usage, self._extra.get("reason"))

    def ended(self, status: RunStatus, usage: RunUsage | None = None) -> None:
        """The run delivered its result with this status (and used this much of its model)."""
        self._status, self._usage = status, usage

    def first_event(self) -> None:
        """The run's first event is out (metrics: time to first event)."""
        self._scope.first_event()

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
