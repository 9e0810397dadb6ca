"""Structured run logs: one JSON object per line on stderr, so a log pipeline needs no parser.

Every line of a run carries `thread_id`, `run_id` and the host's `request_id`, so one grep finds a
thread's whole story across replicas.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ("JsonFormatter", "configure", "log_run")

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
    LOGGER.handlers[:] = [handler]
    LOGGER.setLevel(level)
    LOGGER.propagate = False


def log_run(event: str, **fields: Any) -> None:
    """Log one run event (`run_started`, `run_finished`) with its identifying fields."""
    LOGGER.info(event, extra={_FIELDS: fields})
