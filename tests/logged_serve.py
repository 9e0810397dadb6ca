"""`threadline serve` as a subprocess whose JSON log lines are collected while it runs.

`conftest.spawn_serve` leaves stderr in a pipe; a test that sends hundreds of requests would fill it
(64 KiB) and block the server on its next log line. Here a thread drains it from the start, so a test
can read every line once the server has stopped.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from conftest import ServeProcess, spawn_serve


@dataclass
class LoggedServe:
    """A running `threadline serve` and the stderr lines it has written so far."""

    serve: ServeProcess
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @property
    def address(self) -> str:
        return self.serve.address

    def _drain(self) -> None:
        assert self.serve.process.stderr is not None
        for line in self.serve.process.stderr:
            self.lines.append(line)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, wait for the exit (drained), and for every log line; returns the exit code."""
        if self.serve.process.poll() is None:
            self.serve.process.send_signal(signal.SIGTERM)
        code = self.serve.process.wait(timeout=timeout)
        if self._reader is not None:
            self._reader.join(timeout=timeout)
        return code

    def records(self) -> list[dict[str, Any]]:
        """The JSON log lines (anything else on stderr fails the test that asks)."""
        parsed: list[dict[str, Any]] = []
        for line in self.lines:
            if line.strip():
                value = json.loads(line)
                assert isinstance(value, dict), line
                parsed.append(value)
        return parsed


@contextmanager
def logged_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[LoggedServe]:
    """`threadline serve --port 0 ARGS` (with `env` added) for the block; killed if it outlives it."""
    running = LoggedServe(spawn_serve(*args, env=env))
    running._reader = threading.Thread(target=running._drain, name="serve-stderr", daemon=True)
    running._reader.start()
    try:
        yield running
    finally:
        process = running.serve.process
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        running._reader.join(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
