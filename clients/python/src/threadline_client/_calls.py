"""What every call of both services shares: the deadline argument, error translation, and the
reader of a streamed run's responses (`StreamRun` and `StreamThreadRun` answer in the same shape).
"""

from __future__ import annotations

import contextlib
import enum
from collections import deque
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Final, NoReturn, Protocol, Self

from ._errors import ProtocolError, ThreadlineError, translate
from ._gen.threadline.v1 import RunEvent, RunResult

__all__ = ("UNSET", "EventStream", "Timeout", "missing", "raise_translated")


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET: Final = _Unset.UNSET
Timeout = float | None | _Unset
"""A call's deadline in seconds: a number, `None` for none, or unset for the client's default."""


def raise_translated(exc: Exception) -> NoReturn:
    """Re-raise a transport's exception as the `ThreadlineError` it means (or as it is)."""
    translated = translate(exc)
    if translated is None or translated is exc:
        raise exc
    raise translated from exc


def missing(what: str) -> ProtocolError:
    """A response without a field the contract requires."""
    return ProtocolError(f"the server's response has no {what}")


class EventResponse(Protocol):
    """`StreamRunResponse` and `StreamThreadRunResponse`: one event, or several packed."""

    @property
    def event(self) -> RunEvent | None: ...

    @property
    def events(self) -> Sequence[RunEvent]: ...


class EventStream:
    """The events of one streamed run, one at a time, in `sequence` order; iterate it once.

    Packed responses (`events`) are unpacked here: the unread rest of one waits until read. A
    response without events ends the stream and cancels the call with a `ProtocolError`, and so
    does a stream that ends without its `result` event. Subclasses look at each event in `_accept`.

    Args:
        responses: The call's responses, from the generated stub.
    """

    def __init__(self, responses: AsyncIterator[EventResponse]) -> None:
        self._responses = responses
        self._pending: deque[RunEvent] = deque()  # the unread rest of a packed response
        self._iterating = False
        self._done = False
        self.result: RunResult | None = None
        """The run's terminal result, once its `result` event has been received."""

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> RunEvent:
        if self._done:
            raise StopAsyncIteration
        if self._iterating:
            raise RuntimeError(f"this {type(self).__name__} is already being read")
        event = self._pending.popleft() if self._pending else await self._receive()
        await self._accept(event)
        if event.result is not None:
            self.result = event.result
        return event

    async def _accept(self, event: RunEvent) -> None:
        """Look at (or fill in) an event before the host sees it; raise to end the stream."""

    def _result_due(self) -> bool:
        """Whether a stream that ends without a `result` event broke the contract (it always did)."""
        return True

    async def _receive(self) -> RunEvent:
        """The first event of the next response; the others it packed wait in `_pending`."""
        self._iterating = True
        try:
            response = await anext(self._responses)
        except StopAsyncIteration:
            self._done = True
            if self.result is None and self._result_due():
                raise ProtocolError("the stream ended without its terminal result") from None
            raise
        except Exception as exc:
            self._done = True
            raise_translated(exc)
        finally:
            self._iterating = False
        if response.event is not None:
            return response.event
        if not response.events:
            await self._abandon()
            raise missing(f"{type(response).__name__}.event or .events")
        self._pending.extend(response.events[1:])
        return response.events[0]

    async def _drain(self) -> RunResult:
        """Read the remaining events and return the terminal result."""
        async for _ in self:
            pass
        if self.result is None:
            raise RuntimeError(
                f"this {type(self).__name__} ended before its result (closed, or ended by an error)"
            )
        return self.result

    async def aclose(self) -> None:
        """Stop reading and close the call. Idempotent."""
        self._done = True
        self._pending.clear()
        close = getattr(self._responses, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception as exc:
                raise_translated(exc)

    async def _abandon(self) -> None:
        """Cancel the call after a protocol error, which is the error the host then sees."""
        with contextlib.suppress(ThreadlineError):
            await self.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
