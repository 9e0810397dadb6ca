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

Events travel encoded (`RunEvent` bytes): a thread run's attempt encodes each event once, for its log and
every stream alike, and a response is framed around those bytes, never re-encoded (the handlers pass
bytes through, `server.handlers`). `StreamRunResponse` and `StreamThreadRunResponse` (and
`JoinThreadRunResponse`) share their shape: field 1 one `event`, field 2 the packed `events`.

No response may exceed the server's `--max-message-bytes` (grpc would fail the whole stream with an
untyped RESOURCE_EXHAUSTED after the run): packed responses stay within half of it, and an event that
alone would not fit raises `ResponseTooLarge` from `add`, which the run's task turns into a typed status.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from threadline.v1 import events_pb2

__all__ = (
    "AHEAD",
    "MAX_EVENTS_PER_MESSAGE",
    "MESSAGE_EVENT_BYTES",
    "Encode",
    "Fill",
    "Outbox",
    "ResponseTooLarge",
    "encoded",
    "wait_out",
)

AHEAD = 16
"""How many responses a streamed run may produce before the stream has taken them."""

MAX_EVENTS_PER_MESSAGE = 256
"""The most events one response carries, whatever `StreamRunRequest.max_events_per_message` asks."""

MESSAGE_EVENT_BYTES = 256 * 1024
"""A response holding this many bytes of events takes no more (a larger event travels alone)."""

ENVELOPE_BYTES = 64
"""What a `StreamRunResponse` adds around its events (tags and lengths), generously."""

_SINGLE, _PACKED = b"\x0a", b"\x12"
"""The tags of field 1 (`event`) and field 2 (`events`), length-delimited."""

ItemT = TypeVar("ItemT")


class ResponseTooLarge(Exception):
    """An event that does not fit in one response under the server's message limit."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a {size}-byte event does not fit the {limit}-byte message limit")
        self.size = size
        self.limit = limit


Fill = Callable[[events_pb2.RunEvent, ItemT, int], None]
"""Writes an item into an empty `RunEvent` as the stream's event number `sequence`."""

Encode = Callable[[ItemT, int], bytes]
"""An item as the stream's event number `sequence`, encoded (`RunEvent` bytes)."""


def encoded(fill: Fill[ItemT]) -> Encode[ItemT]:
    """The `Encode` of a `Fill`."""

    def encode(item: ItemT, sequence: int) -> bytes:
        event = events_pb2.RunEvent()
        fill(event, item, sequence)
        return event.SerializeToString()

    return encode


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame(events: list[bytes], *, packed: bool) -> bytes:
    """A stream response holding `events`: one `event`, or `events` when the stream packs."""
    tag = _PACKED if packed else _SINGLE
    return b"".join(tag + _varint(len(data)) + data for data in events)


class Outbox(Generic[ItemT]):
    """One streamed run's responses: the run's task `add`s items, the stream `take`s responses."""

    def __init__(self, encode: Encode[ItemT], *, per_message: int, window_s: float, max_bytes: int) -> None:
        self._encode = encode
        self._max_bytes = max_bytes
        self._pack_bytes = min(MESSAGE_EVENT_BYTES, max_bytes // 2)
        self._per_message = min(per_message, MAX_EVENTS_PER_MESSAGE)
        self._window_s = window_s if self._per_message > 1 else 0.0
        self._responses: deque[list[bytes]] = deque()
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
        data = self._encode(item, sequence)
        size = len(data)
        if size + ENVELOPE_BYTES > self._max_bytes:
            raise ResponseTooLarge(size + ENVELOPE_BYTES, self._max_bytes)
        if self._per_message > 1 and self._responses and self._joins(size):
            self._responses[-1].append(data)
            self._newest_bytes += size
            return
        self._newest_bytes = size
        await self._room.acquire()
        self._responses.append([data])
        self._changed.set()

    def _joins(self, size: int) -> bool:
        newest = self._responses[-1]
        return len(newest) < self._per_message and self._newest_bytes + size <= self._pack_bytes

    def end(self, error: BaseException | None = None) -> None:
        """No more items: the stream ends after the responses already added, with `error` if given."""
        self._ended, self._error = True, error
        self._changed.set()

    async def take(self) -> tuple[bytes, int] | None:
        """The next response to send (encoded) and how many events it holds, or `None` once the run ended
        well (else its error is raised)."""
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
        events = self._responses.popleft()
        return frame(events, packed=self._per_message > 1), len(events)

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
