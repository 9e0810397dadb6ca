"""One attempt's event log, as its holder keeps it (LIVE §2.1–§2.3): numbering, what is recorded, writes.

The attempt numbers every item it streams (so every stream of it carries the same numbers), encodes it
once with the host's encoder (the server's `RunEvent` bytes: harness/ never parses them) and buffers the
recorded ones. The buffer is written in order, one write in flight (`turn`): by each of the holder's
commits, or by an append once its oldest event is a window old or it holds 64 KiB (`appends`: grouped
with the other attempts' of the replica). Past a
quarter of the cap text deltas are not recorded (`part_end` carries the whole part); near the cap only
commits and markers are; an event over 1 MiB never is. Each run of events left out is recorded as one
`EventsOmitted`, at the place of its last event, so every follower on every replica reads the same log.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic_ai.messages import PartDeltaEvent

from ..events import HarnessEvent
from .items import ThreadRunItem
from .outcome import ThreadCommittedEvent, ThreadRunOutcome

__all__ = (
    "APPEND_BYTES",
    "EVENT_MAX_BYTES",
    "AttemptLog",
    "Encoder",
    "EventsOmitted",
    "LogSettings",
    "LogWrite",
    "Numbered",
    "OmissionReason",
    "pack",
    "unpack",
)

EVENT_MAX_BYTES = 1024 * 1024
"""An event larger than this is never recorded."""
APPEND_BYTES = 64 * 1024
"""A buffer holding this much is appended without waiting out the window."""
RESERVE_BYTES = 64 * 1024
"""The room near the cap kept for `thread_committed` events and markers."""
UNWRITTEN_MAX_BYTES = 4 * 1024 * 1024
"""While the store is down, at most this much waits to be written; what comes beyond is omitted."""

OmissionReason = Literal["deltas_coalesced", "log_full", "event_too_large", "store_unavailable"]

_FRAME = struct.Struct(">QI")


def pack(events: list[tuple[int, bytes]]) -> bytes:
    """The `run_events.data` of one write: each event its sequence, its length and its bytes."""
    return b"".join(_FRAME.pack(sequence, len(data)) + data for sequence, data in events)


def unpack(data: bytes) -> Iterator[tuple[int, bytes]]:
    """The events `pack` wrote, in order."""
    view, at = memoryview(data), 0
    while at < len(view):
        sequence, size = _FRAME.unpack_from(view, at)
        at += _FRAME.size
        yield sequence, bytes(view[at : at + size])
        at += size


@dataclass(frozen=True, slots=True)
class EventsOmitted:
    """Events `first_sequence` to `sequence` of the attempt that its log does not hold, and why."""

    thread_id: str
    run_id: str
    first_sequence: int
    sequence: int
    reason: OmissionReason
    occurred_at: datetime


Encoder = Callable[[ThreadRunItem | EventsOmitted, int], bytes]
"""The host's wire form of an item as the attempt's `sequence`-th event (the server's `RunEvent`)."""


@dataclass(frozen=True, slots=True)
class Numbered:
    """One event of an attempt's stream: its number, the item (none when read from a log), its bytes."""

    sequence: int
    item: ThreadRunItem | None
    data: bytes | None
    """The encoded event; `None` only for a host without an encoder."""


@dataclass(frozen=True, slots=True)
class LogSettings:
    """The event log options of one replica (`--event-log`, `--event-log-window-ms`, ...)."""

    enabled: bool = True
    window_s: float = 0.1
    max_bytes: int = 32 * 1024 * 1024
    retention_s: float = 86400.0
    max_followers: int = 1024


@dataclass(frozen=True, slots=True)
class LogWrite:
    """One write of a log: a compare-and-set from `after` (the row's `last_sequence`) to `last`."""

    run_id: str
    after: int
    last: int
    data: bytes
    """`pack`ed events; empty when the write only proves the log still open (a commit's check)."""
    count: int
    end: bool = False
    """The attempt's terminal commit or release: the log is `ended`."""
    result_sequence: int | None = None


class AttemptLog:
    """The holder's side of one attempt's log: numbers items, buffers what is recorded, writes it."""

    def __init__(
        self,
        settings: LogSettings,
        encode: Encoder | None,
        *,
        thread_id: str,
        run_id: str,
        recorded: bool,
        report: Callable[[int, int], None] | None = None,
    ) -> None:
        self._settings = settings
        self._report = report
        self._reported_omitted = 0
        self._encode = encode
        self._thread_id = thread_id
        self.run_id = run_id
        self.recorded = recorded and encode is not None
        """Whether this attempt has a log (its Begin opened one)."""
        self.next_sequence = 0
        self.written = -1
        """The last sequence the log holds (-1: none)."""
        self._buffer: list[tuple[int, bytes]] = []
        self._buffer_bytes = 0
        self._oldest = 0.0
        self._log_bytes = 0
        """Written and buffered bytes: what the cap counts."""
        self._omitting: tuple[int, int, OmissionReason] | None = None
        self.turn = asyncio.Lock()
        """Held by the one write in flight (an append or a commit)."""
        self.on_pending: Callable[[], None] | None = None
        """Called when events start waiting to be written, and when they reach `APPEND_BYTES`."""
        self.omitted = 0
        """Events left out so far (a server counts them)."""

    # -- numbering ------------------------------------------------------------------------------------

    def number(self, item: ThreadRunItem) -> Numbered:
        """`item` as the attempt's next event, recorded unless the rules above leave it out."""
        sequence = self.next_sequence
        self.next_sequence += 1
        data = None if self._encode is None else self._encode(item, sequence)
        if (
            self.recorded and data is not None and not isinstance(item, ThreadRunOutcome)
        ):  # built from the record
            self._record(sequence, item, data)
        return Numbered(sequence, item, data)

    def _record(self, sequence: int, item: ThreadRunItem, data: bytes) -> None:
        size = len(data)
        cap = self._settings.max_bytes
        used = self._log_bytes
        reason: OmissionReason | None = None
        if size > EVENT_MAX_BYTES:
            reason = "event_too_large"
        elif isinstance(item, ThreadCommittedEvent):
            if used + size > cap:
                reason = "log_full"
        elif used + size > cap - RESERVE_BYTES:
            reason = "log_full"
        elif _is_delta(item) and used + size > cap // 4:
            reason = "deltas_coalesced"
        elif self._buffer_bytes + size > UNWRITTEN_MAX_BYTES:
            reason = "store_unavailable"
        if reason is not None:
            self.omitted += 1
            if self._omitting is not None and self._omitting[2] == reason:
                self._omitting = (self._omitting[0], sequence, reason)
            else:
                self._close_omission()
                self._omitting = (sequence, sequence, reason)
            return
        self._close_omission()
        self._buffer_event(sequence, data)

    def _close_omission(self) -> None:
        """Record the run of omitted events that ended: its marker at its last event's place."""
        if self._omitting is None:
            return
        first, last, reason = self._omitting
        self._omitting = None
        self._mark(first, last, reason)

    def _mark(self, first: int, last: int, reason: OmissionReason, *, front: bool = False) -> None:
        assert self._encode is not None
        marker = EventsOmitted(self._thread_id, self.run_id, first, last, reason, datetime.now(UTC))
        data = self._encode(marker, last)  # a marker is small: the reserve always has room for it
        self._buffer_event(last, data, front=front)

    def _buffer_event(self, sequence: int, data: bytes, *, front: bool = False) -> None:
        first = not self._buffer
        if first:
            self._oldest = time.monotonic()
        if front:
            self._buffer.insert(0, (sequence, data))
        else:
            self._buffer.append((sequence, data))
        before = self._buffer_bytes
        self._buffer_bytes += len(data)
        self._log_bytes += len(data)
        if self.on_pending is not None and (first or before < APPEND_BYTES <= self._buffer_bytes):
            self.on_pending()

    @property
    def pending(self) -> bool:
        """Whether events wait to be written."""
        return bool(self._buffer)

    # -- writing --------------------------------------------------------------------------------------

    def due_in(self) -> float:
        """Seconds until the buffer is due for an append (0: now)."""
        if self._buffer_bytes >= APPEND_BYTES:
            return 0.0
        return max(0.0, self._oldest + self._settings.window_s - time.monotonic())

    def take(self, *, end: bool = False, result_sequence: int | None = None) -> LogWrite | None:
        """The next write: everything buffered (and, at the end, the run of omitted events still open).
        None for an attempt without a log. The events stay buffered until `wrote`."""
        if not self.recorded:
            return None
        if end or self._omitting is not None:
            self._close_omission()
        events = self._buffer
        last = events[-1][0] if events else self.written
        return LogWrite(
            self.run_id,
            after=self.written,
            last=last,
            data=pack(events) if events else b"",
            count=len(events),
            end=end,
            result_sequence=result_sequence,
        )

    def wrote(self, write: LogWrite) -> None:
        """`write` is in the log: drop its events from the buffer (and report its bytes, its omissions)."""
        self.landed_through(write.last)
        if self._report is not None:
            self._report(len(write.data), self.omitted - self._reported_omitted)
            self._reported_omitted = self.omitted

    def landed_through(self, last: int) -> None:
        """The log holds every buffered event up to `last` (a write whose answer was lost did land)."""
        kept = [event for event in self._buffer if event[0] > last]
        self._buffer_bytes = sum(len(data) for _sequence, data in kept)
        self._buffer = kept
        self.written = max(self.written, last)
        if kept:
            self._oldest = time.monotonic()

    def rewind(self, last: int) -> None:
        """The log holds events only up to `last` (a database crash took back relaxed appends): the
        range dropped is recorded as omitted, ahead of what is still buffered."""
        if last >= self.written:
            return
        dropped_first, dropped_last = last + 1, self.written
        self.written = last
        self._mark(dropped_first, dropped_last, "store_unavailable", front=True)


def _is_delta(item: ThreadRunItem) -> bool:
    return isinstance(item, HarnessEvent) and isinstance(item.event, PartDeltaEvent)
