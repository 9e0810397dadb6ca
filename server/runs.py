"""The runs a server is executing: the concurrency limit and the SIGTERM drain share this one set.

The limit rejects at once instead of queueing, so an overloaded server answers RESOURCE_EXHAUSTED
and the host can back off or pick another replica; a queue would hide the overload behind latency.
"""

from __future__ import annotations

from typing import Any

from harness import HarnessRunStream

__all__ = ("ActiveRuns",)


class ActiveRuns:
    """Streams currently running, bounded by `limit`; `drain()` cancels them all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        """The most runs that may execute at once."""
        self.draining = False
        """Set by `drain()`: no new run is admitted."""
        self._streams: set[HarnessRunStream[Any]] = set()

    def __len__(self) -> int:
        return len(self._streams)

    def admit(self, stream: HarnessRunStream[Any]) -> bool:
        """Count `stream` as running, unless the server is full (or draining)."""
        if self.draining or len(self._streams) >= self.limit:
            return False
        self._streams.add(stream)
        return True

    def release(self, stream: HarnessRunStream[Any]) -> None:
        """Stop counting `stream` (idempotent)."""
        self._streams.discard(stream)

    def drain(self) -> int:
        """Admit nothing more and ask every running run to stop; returns how many were asked.

        `stream.cancel()` is the core's own cancellation: each run ends with a CANCELLED result
        carrying its normalised candidate state, which its RPC still delivers to the host.
        """
        self.draining = True
        for stream in list(self._streams):
            stream.cancel()
        return len(self._streams)
