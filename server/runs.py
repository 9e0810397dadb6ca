"""The runs a server is executing: the concurrency limit and the SIGTERM drain share this one set.

The limit rejects at once instead of queueing, so an overloaded server answers RESOURCE_EXHAUSTED
and the host can back off or pick another replica; a queue would hide the overload behind latency.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from harness import HarnessRunStream

from .errors import ServerError, ServerReason

__all__ = ("ActiveRuns", "shutting_down")


def shutting_down() -> ServerError:
    """What a draining server answers a call it will not serve."""
    return ServerError(
        ServerReason.SERVER_SHUTTING_DOWN, "The server is shutting down; retry on another replica."
    )


class ActiveRuns:
    """Streams currently running, bounded by `limit`; `drain()` cancels them all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        """The most runs that may execute at once."""
        self.draining = False
        """Set by `drain()`: no new run is admitted."""
        self._streams: dict[HarnessRunStream[Any], Callable[[], None]] = {}

    def __len__(self) -> int:
        return len(self._streams)

    def admit(
        self, stream: HarnessRunStream[Any], *, cancel: Callable[[], None] | None = None
    ) -> AbstractContextManager[None]:
        """Count `stream` as running until the returned context exits; refuse it when full or draining.

        `cancel` is how `drain()` stops it (default `stream.cancel`; a thread run stops between commits).

        Checking and counting happen without an `await` between them, so concurrent calls cannot both
        take the last place; enter the context at once (`with runs.admit(stream):`).

        Raises:
            ServerError: `SERVER_SHUTTING_DOWN` while draining, `RUN_LIMIT_REACHED` at the limit.
        """
        if self.draining:
            raise shutting_down()
        if len(self._streams) >= self.limit:
            raise ServerError(
                ServerReason.RUN_LIMIT_REACHED,
                f"The server already runs its limit of {self.limit} runs; retry later.",
                details={"limit": self.limit},
            )
        self._streams[stream] = cancel or stream.cancel
        return self._admitted(stream)

    @contextmanager
    def _admitted(self, stream: HarnessRunStream[Any]) -> Iterator[None]:
        try:
            yield
        finally:
            self._streams.pop(stream, None)

    def drain(self) -> int:
        """Admit nothing more and ask every running run to stop; returns how many were asked.

        `stream.cancel()` is the core's own cancellation: each run ends with a CANCELLED result
        carrying its normalised candidate state, which its RPC still delivers to the host.
        """
        self.draining = True
        for cancel in list(self._streams.values()):
            cancel()
        return len(self._streams)
