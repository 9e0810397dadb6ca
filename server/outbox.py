"""The responses of one `StreamRun` on their way from the task that runs it to grpc's stream.

The run produces in a task of its own, up to `AHEAD` responses ahead of the stream: grpc.aio waits
for each message's write to complete before asking for the next, and with nothing else to do the
event loop would sleep and be woken by grpc's poller thread for every single event.

Each message costs the server a `sendmsg` and a wake-up (bench/: a quarter of a 3-request
`StreamRun`'s CPU at one event per message), so a host may let events share a message
(`StreamRunRequest.max_events_per_message`). An event then joins the newest response while the
stream has not taken it yet. A stream that keeps up would still send one event per message, so
while it is *hot* (its previous response went out less than `window` ago) the next response waits
out the rest of that window, and events produced meanwhile join it. A stream that was quiet for
`window` sends its next event at once: an event waits at most `window`, and only in a burst.

No response may exceed the server's `--max-message-bytes` (grpc would fail the whole stream with an
untyped RESOURCE_EXHAUSTED after the run): packed responses stay within half of it, and an event that
alone would not fit raises `ResponseTooLarge` from `add`, which the run's task turns into a typed status.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from threadline.v1 import events_pb2, harness_service_pb2, thread_service_pb2

__all__ = ("AHEAD", "MAX_EVENTS_PER_MESSAGE", "MESSAGE_EVENT_BYTES", "Outbox", "ResponseTooLarge", "wait_out")

AHEAD = 16
"""How many responses a streamed run may produce before the stream has taken them."""

MAX_EVENTS_PER_MESSAGE = 256
"""The most events one response carries, whatever `StreamRunRequest.max_events_per_message` asks."""

MESSAGE_EVENT_BYTES = 256 * 1024
"""A response holding this many bytes of events takes no more (a larger event travels alone)."""

ENVELOPE_BYTES = 64
"""What a `StreamRunResponse` adds around its events (tags and lengths), generously."""

ItemT = TypeVar("ItemT")


class ResponseTooLarge(Exception):
    """An event that does not fit in one response under the server's message limit."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a {size}-byte event does not fit the {limit}-byte message limit")
        self.size = size
        self.limit = limit


Fill = Callable[[events_pb2.RunEvent, ItemT, int], None]
"""Writes an item into an empty `RunEvent` as the stream's event number `sequence`."""


StreamResponse = harness_service_pb2.StreamRunResponse | thread_service_pb2.StreamThreadRunResponse
"""The two stream responses: the same shape (`event`, or `events` when packed)."""
ResponseT = TypeVar(
    "ResponseT", harness_service_pb2.StreamRunResponse, thread_service_pb2.StreamThreadRunResponse
)


class Outbox(Generic[ItemT, ResponseT]):
    """One streamed run's responses: the run's task `add`s items, the stream `take`s responses."""

    def __init__(
        self,
        fill: Fill[ItemT],
        *,
        per_message: int,
        window_s: float,
        max_bytes: int,
        response_type: type[ResponseT],
    ) -> None:
        self._fill = fill
        self._response_type: type[ResponseT] = response_type
        self._max_bytes = max_bytes
        self._pack_bytes = min(MESSAGE_EVENT_BYTES, max_bytes // 2)
        self._per_message = min(per_message, MAX_EVENTS_PER_MESSAGE)
        self._window_s = window_s if self._per_message > 1 else 0.0
        self._responses: deque[ResponseT] = deque()
        self._newest_bytes = 0  # of the events in `_responses[-1]`
        self._room = asyncio.Semaphore(AHEAD)
        self._changed = asyncio.Event()
        self._ended = False
        self._error: BaseException | None = None
        self._loop = asyncio.get_running_loop()
        self._hot_until = 0.0
        self._sequence = 0

    async def add(self, item: ItemT) -> None:
        """Write `item` as the stream's next event; waits while `AHEAD` responses are untaken."""
        sequence = self._sequence
        self._sequence += 1
        response = self._response_type()
        if self._per_message <= 1:
            self._fits(response.event, item, sequence)
        elif self._responses and self._joins():
            newest = self._responses[-1]
            event = newest.events.add()
            try:
                size = self._fits(event, item, sequence)
            except ResponseTooLarge:
                del newest.events[-1]  # the queued response must not carry it
                raise
            if self._newest_bytes + size <= self._pack_bytes:
                self._newest_bytes += size
                return
            response.events.add().CopyFrom(event)  # too large to join: it travels on its own
            del newest.events[-1]
            self._newest_bytes = size
        else:
            self._newest_bytes = self._fits(response.events.add(), item, sequence)
        await self._room.acquire()
        self._responses.append(response)
        self._changed.set()

    def _fits(self, event: events_pb2.RunEvent, item: ItemT, sequence: int) -> int:
        """Fill `event`; its size, or `ResponseTooLarge` when it could not be sent at all."""
        self._fill(event, item, sequence)
        size = event.ByteSize()
        if size + ENVELOPE_BYTES > self._max_bytes:
            raise ResponseTooLarge(size + ENVELOPE_BYTES, self._max_bytes)
        return size

    def _joins(self) -> bool:
        newest = self._responses[-1]
        return len(newest.events) < self._per_message and self._newest_bytes < self._pack_bytes

    def end(self, error: BaseException | None = None) -> None:
        """No more items: the stream ends after the responses already added, with `error` if given."""
        self._ended, self._error = True, error
        self._changed.set()

    async def take(self) -> ResponseT | None:
        """The next response to send, or `None` once the run ended well (else its error is raised)."""
        while not self._responses:
            if self._ended:
                if self._error is not None:
                    raise self._error
                return None
            self._changed.clear()
            await self._changed.wait()
        wait = self._hot_until - self._loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        self._room.release()
        return self._responses.popleft()

    def sent(self) -> None:
        """The stream wrote the response it took last: it stays hot for `window_s`."""
        if self._window_s:
            self._hot_until = self._loop.time() + self._window_s


async def wait_out(task: asyncio.Task[None]) -> None:
    """Wait until a stream's producer `task` ended. Its own error already reached the stream
    (`Outbox.end`); a cancellation of the waiting task itself keeps propagating."""
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
    except BaseException:
        pass
