"""Captured output and the pages read from it (ENVIRONMENT §6.1, §6.2).

A `CaptureWindow` keeps the newest bytes of one stream, addressed by absolute offsets from the
command's start. Reading never changes it (§6.3): there is no cursor to move, so the same offsets give
the same bytes for as long as they are retained, and any number of runs can read side by side. A page
ends on a UTF-8 character boundary so a model passing `next_offset` back never splits a character.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..json_text import JsonValue
from .errors import EnvironmentToolError

__all__ = ("CaptureWindow", "Page", "read_pair", "tail_pair")


@dataclass(frozen=True, slots=True)
class Page:
    """One stream's bytes from `start_offset` to `next_offset`, with the window as it was when read."""

    requested_offset: int
    """The offset the caller passed."""
    start_offset: int
    """`max(requested_offset, available_start)`."""
    omitted_before_bytes: int
    """Bytes asked for that were no longer retained (or, for a tail, not shown)."""
    next_offset: int
    """Where the next read continues; never inside a character."""
    available_start: int
    available_end: int
    more_available: bool
    """`next_offset < available_end`."""
    observation_closed: bool
    """No more bytes will be captured."""
    producer_complete: bool
    """Capture closed because end of file was seen, not cut off (§7.3)."""
    text: str
    """The bytes decoded as UTF-8 with replacement."""

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "requested_offset": self.requested_offset,
            "start_offset": self.start_offset,
            "omitted_before_bytes": self.omitted_before_bytes,
            "next_offset": self.next_offset,
            "available_start": self.available_start,
            "available_end": self.available_end,
            "more_available": self.more_available,
            "observation_closed": self.observation_closed,
            "producer_complete": self.producer_complete,
            "text": self.text,
        }


class CaptureWindow:
    """The newest `retained_bytes` bytes of one stream; bytes before `available_start` are gone for good."""

    def __init__(self, retained_bytes: int) -> None:
        if retained_bytes <= 0:
            raise ValueError("retained_bytes must be positive")
        self._retained = retained_bytes
        self._data = bytearray()
        self._end = 0
        self._closed = False
        self._complete = False

    @property
    def available_start(self) -> int:
        return self._end - len(self._data)

    @property
    def available_end(self) -> int:
        """Bytes captured so far (retained or not)."""
        return self._end

    @property
    def observation_closed(self) -> bool:
        return self._closed

    @property
    def producer_complete(self) -> bool:
        return self._complete

    def append(self, data: bytes) -> None:
        """Add captured bytes; the oldest fall out once the window is full. Ignored once closed."""
        if self._closed or not data:
            return
        self._end += len(data)
        if len(data) >= self._retained:
            self._data = bytearray(data[-self._retained :])
            return
        self._data += data
        excess = len(self._data) - self._retained
        if excess > 0:
            del self._data[:excess]

    def close(self, producer_complete: bool) -> None:
        """Stop capturing: at end of file (`True`), or cut off while a pipe was still held (`False`)."""
        if not self._closed:
            self._closed = True
            self._complete = producer_complete

    def read(self, offset: int, max_bytes: int) -> Page:
        """Up to `max_bytes` from `offset` (or from `available_start`, if that is later).

        Raises:
            EnvironmentToolError: `environment_offset_invalid` past `available_end`;
                `environment_request_invalid` for a negative offset.
        """
        start = self._start(offset)
        end = min(self._end, start + max(0, max_bytes))
        if end < self._end or not self._closed:
            end = start + _whole_characters(self._slice(start, end))
        return self._page(offset, start, end)

    def tail(self, max_bytes: int) -> Page:
        """The last bytes that fit in `max_bytes`, starting on a character boundary."""
        start = max(self.available_start, self._end - max(0, max_bytes))
        for _ in range(3):  # skip the rest of a character cut at the front
            if start < self._end and self._data[start - self.available_start] & 0xC0 == 0x80:
                start += 1
        return self._page(0, start, self._end)

    def _start(self, offset: int) -> int:
        if offset < 0:
            raise EnvironmentToolError(
                "environment_request_invalid",
                "Offsets cannot be negative.",
                "Pass 0, or the next_offset of the previous page.",
                {"offset": offset},
            )
        if offset > self._end:
            raise EnvironmentToolError(
                "environment_offset_invalid",
                "The offset is past the end of the captured output.",
                "Pass the next_offset of the previous page, or 0.",
                {"offset": offset, "available_end": self._end},
            )
        return max(offset, self.available_start)

    def _slice(self, start: int, end: int) -> bytes:
        base = self.available_start
        return bytes(self._data[start - base : end - base])

    def _page(self, requested: int, start: int, end: int) -> Page:
        return Page(
            requested_offset=requested,
            start_offset=start,
            omitted_before_bytes=start - requested,
            next_offset=end,
            available_start=self.available_start,
            available_end=self._end,
            more_available=end < self._end,
            observation_closed=self._closed,
            producer_complete=self._complete,
            text=self._slice(start, end).decode("utf-8", errors="replace"),
        )

    def _remaining(self, offset: int) -> int:
        return self._end - self._start(offset)


def _whole_characters(chunk: bytes) -> int:
    """The length of `chunk` without a trailing, incomplete UTF-8 character."""
    size = len(chunk)
    for back in range(1, min(4, size) + 1):
        lead = chunk[size - back]
        if lead & 0xC0 == 0x80:  # a continuation byte: keep looking for the character's first byte
            continue
        need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
        return size - back if need > back else size
    return size  # no lead byte nearby: not UTF-8 text, nothing to keep whole


def _split(budget: int, first_needs: int, second_needs: int) -> tuple[int, int]:
    """Half the budget each; what one stream does not need goes to the other (§6.2)."""
    first_half = budget // 2
    second_half = budget - first_half
    if first_needs <= first_half:
        return first_needs, budget - first_needs
    if second_needs <= second_half:
        return budget - second_needs, second_needs
    return first_half, second_half


def read_pair(
    stdout: CaptureWindow, stderr: CaptureWindow, stdout_offset: int, stderr_offset: int, max_page_bytes: int
) -> tuple[Page, Page]:
    """A page of each stream within `max_page_bytes` together, split fairly.

    Raises:
        EnvironmentToolError: `environment_offset_invalid` (details name the stream) or
            `environment_request_invalid`, before anything is read.
    """
    needs = []
    for name, window, offset in (("stdout", stdout, stdout_offset), ("stderr", stderr, stderr_offset)):
        try:
            needs.append(window._remaining(offset))
        except EnvironmentToolError as error:
            raise EnvironmentToolError(
                error.code, error.message, error.hint, {"stream": name, **error.details}
            ) from None
    out_budget, err_budget = _split(max_page_bytes, needs[0], needs[1])
    return stdout.read(stdout_offset, out_budget), stderr.read(stderr_offset, err_budget)


def tail_pair(stdout: CaptureWindow, stderr: CaptureWindow, max_page_bytes: int) -> tuple[Page, Page]:
    """The end of each stream within `max_page_bytes` together, for results with no later read (§4.3).

    `requested_offset` is 0, so `omitted_before_bytes` says how much came before the tail.
    """
    out_budget, err_budget = _split(
        max_page_bytes,
        stdout.available_end - stdout.available_start,
        stderr.available_end - stderr.available_start,
    )
    return stdout.tail(out_budget), stderr.tail(err_budget)
