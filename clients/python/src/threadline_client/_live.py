"""Following live runs and threads (LIVE §2): `JoinedRun`, `ThreadWatch`, and the reconnects they share.

A thread run's events are numbered by its attempt, so every stream of one attempt (the first call,
an attached retry, a join) carries the same sequence numbers. That is what lets a broken stream be
continued without a gap or a repeat: `JoinThreadRun(run_id, after_sequence = the last one received)`.
`FollowedRun` does that by itself after a transport failure (UNAVAILABLE: a lost connection, a server
draining, a store outage), up to `RECONNECTS` failed calls in a row, 0.2 s apart and doubling to 2 s,
within the stream's deadline. Each kind of stream decides what a lost attempt (`RunAttemptLost`)
means: `Threads.stream` sends its own request again (same `request_id`), which attaches to the
request's next attempt or becomes it; `JoinedRun` joined by request follows the next attempt once
one runs. A watch (`ThreadWatch`) reconnects to a new snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Final, NamedTuple, Self

from grpclib.metadata import Deadline

from ._calls import EventResponse, EventStream, missing, raise_translated
from ._errors import RunAttemptLost, StatusCode, ThreadlineError, translate
from ._gen.threadline.v1 import (
    JoinThreadRunRequest,
    JoinThreadRunResponse,
    ListCheckpointsRequest,
    RunEvent,
    RunResult,
    StreamThreadRunRequest,
    StreamThreadRunResponse,
    Thread,
    ThreadChange,
    ThreadServiceStub,
    WatchThreadRequest,
    WatchThreadResponse,
)
from ._tracing import Metadata

__all__ = (
    "RECONNECTS",
    "FollowedRun",
    "JoinedRun",
    "Link",
    "ThreadRunOutcome",
    "ThreadUpdate",
    "ThreadWatch",
)

RECONNECTS: Final = 5
"""How many calls in a row may fail UNAVAILABLE before a followed stream gives up and raises."""
_BACKOFF: Final = 0.2
"""Seconds before the first reconnect; doubled before each next one, up to `_BACKOFF_MAX`."""
_BACKOFF_MAX: Final = 2.0
_LATER_RUN_PAGE: Final = 16
"""Checkpoints a join reads, newest first, to find the attempt a lost one's request ended in."""
LOST_RETRIES: Final = 3
"""How many lost attempts in a row `Threads.stream` follows with a retry of its request."""


@dataclass(frozen=True, slots=True)
class Link:
    """How a followed stream makes its calls: the stub, the call's metadata and one deadline for all."""

    stub: Callable[[], ThreadServiceStub]
    metadata: Metadata | None
    deadline: Deadline | None
    max_events_per_message: int

    def join(
        self, thread_id: str, *, run_id: str = "", request_id: str = "", after_sequence: int | None = None
    ) -> AsyncIterator[JoinThreadRunResponse]:
        request = JoinThreadRunRequest(
            thread_id=thread_id,
            run_id=run_id,
            request_id=request_id,
            after_sequence=after_sequence,
            max_events_per_message=self.max_events_per_message,
        )
        return self.stub().join_thread_run(request, deadline=self.deadline, metadata=self.metadata)

    def stream(self, request: StreamThreadRunRequest) -> AsyncIterator[StreamThreadRunResponse]:
        return self.stub().stream_thread_run(request, deadline=self.deadline, metadata=self.metadata)

    def watch(self, thread_id: str) -> AsyncIterator[WatchThreadResponse]:
        return self.stub().watch_thread(
            WatchThreadRequest(thread_id=thread_id), deadline=self.deadline, metadata=self.metadata
        )

    async def later_run(self, thread_id: str, request_id: str, lost_run_id: str) -> str:
        """The run of the newest checkpoint `request_id` committed in an attempt after `lost_run_id`; "" if none."""
        request = ListCheckpointsRequest(thread_id=thread_id, page_size=_LATER_RUN_PAGE)
        try:
            page = await self.stub().list_checkpoints(request, deadline=self.deadline, metadata=self.metadata)
        except Exception:
            return ""  # the lost attempt's error says more than this one would
        for checkpoint in page.checkpoints:
            if checkpoint.request_id == request_id:
                return checkpoint.run_id if checkpoint.run_id != lost_run_id else ""
        return ""

    async def pause(self, failures: int) -> bool:
        """Wait before reconnect number `failures` (1, 2, ...); False when that would pass the deadline."""
        delay = min(_BACKOFF * 2 ** (failures - 1), _BACKOFF_MAX)
        if self.deadline is not None and self.deadline.time_remaining() <= delay:
            return False
        await asyncio.sleep(delay)
        return True


async def _close(call: AsyncIterator[object]) -> None:
    close = getattr(call, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()


def _events(response: EventResponse) -> list[RunEvent]:
    return [response.event] if response.event is not None else list(response.events)


@dataclass(frozen=True, slots=True)
class ThreadRunOutcome:
    """How a thread run ended: `Threads.run`, or `ThreadRunStream.collect()`."""

    result: RunResult
    """The terminal result; `state` is unset (it is the checkpoint at `revision`)."""
    revision: int
    """The revision of the run's terminal checkpoint, the thread's head after it. 0 when the run
    committed nothing (a run `cancel` closed after its server was gone)."""
    replayed: bool
    """True when the server answered an already finished request again: nothing ran this time."""


class FollowedRun(EventStream):
    """The events of one thread run, read on across the calls its reconnects take; iterate it once.

    The events are those `StreamThreadRun` sends: the core's events without checkpoint candidates,
    a `thread_committed` after each commit, the `result` last. `revision`, `replayed` and `outcome`
    say what the events showed so far. Without a `link`, nothing is reconnected.

    Args:
        responses: The first call's responses.
        thread_id: The thread of the run.
        request_id: The request the run serves, when known.
        link: How to make the calls a reconnect takes; None = no reconnect.
    """

    def __init__(
        self,
        responses: AsyncIterator[EventResponse],
        *,
        thread_id: str,
        request_id: str,
        link: Link | None = None,
    ) -> None:
        super().__init__(self._follow(responses) if link is not None else responses)
        self.thread_id: Final = thread_id
        """The thread of the run."""
        self._request_id = request_id
        self._link = link
        self.revision = 0
        """The revision of the latest checkpoint the stream reported committed; 0 before any."""
        self.replayed = False
        """True once the stream showed that it replays an already finished request."""
        self.reconnects = 0
        """How many times the stream continued on a new call (a reconnect, or a next attempt)."""
        self._run_id = ""  # the attempt followed, once known
        self._after: int | None = None  # the last sequence received of that attempt
        self._received = False  # any event yielded
        self._ended = False  # the last event received was a result

    @property
    def request_id(self) -> str:
        """The request the run serves: send it again (same body) to retry without running twice."""
        return self._request_id

    @property
    def run_id(self) -> str:
        """The attempt the stream follows, from the last event received; empty before the first."""
        return self._run_id

    @property
    def last_sequence(self) -> int | None:
        """The sequence of the last event received of `run_id`; None before the first."""
        return self._after if self._run_id else None

    async def _accept(self, event: RunEvent) -> None:
        self._received = True
        committed = event.thread_committed
        if committed is not None:
            self.revision = committed.revision
            self.replayed = self.replayed or committed.replayed
        if event.result is not None and event.result.request_id:
            self._request_id = event.result.request_id

    @property
    def outcome(self) -> ThreadRunOutcome | None:
        """The run's outcome once its `result` event has been read; None before."""
        if self.result is None:
            return None
        return ThreadRunOutcome(result=self.result, revision=self.revision, replayed=self.replayed)

    async def collect(self) -> ThreadRunOutcome:
        """Read the remaining events and return the run's outcome.

        Raises:
            ThreadlineError: As iterating does (`ProtocolError` when the stream ends without a result).
            RuntimeError: The stream was closed, or an error ended it, before its result.
        """
        result = await self._drain()
        return ThreadRunOutcome(result=result, revision=self.revision, replayed=self.replayed)

    async def _follow(self, call: AsyncIterator[EventResponse]) -> AsyncIterator[EventResponse]:
        """The responses of `call`, then of each call a reconnect takes, until one ends the stream."""
        failures = 0
        try:
            while True:
                try:
                    async for response in call:
                        failures = 0
                        for event in _events(response):
                            self._run_id, self._after = event.run_id or self._run_id, event.sequence
                            self._ended = event.result is not None
                        yield response
                    return
                except Exception as exc:
                    error = translate(exc)
                    if error is None or self._link is None:
                        raise
                    await _close(call)
                    if self._ended and error.status == StatusCode.UNAVAILABLE:
                        return  # the result arrived, only the call's end did not
                    if error.status == StatusCode.UNAVAILABLE:
                        failures += 1
                        if failures > RECONNECTS or not await self._link.pause(failures):
                            raise
                        call = self._reconnect()
                    elif isinstance(error, RunAttemptLost):
                        following = await self._next_attempt(error)
                        if following is None:
                            raise
                        call = following
                    else:
                        raise
                    self.reconnects += 1
        finally:
            await _close(call)

    def _follow_attempt(self, run_id: str) -> None:
        """Follow another attempt from its first event (`run_id` empty: the one the next call names)."""
        self._run_id, self._after = run_id, None

    def _reconnect(self) -> AsyncIterator[EventResponse]:
        """The call that continues after a transport failure."""
        assert self._link is not None
        return self._link.join(self.thread_id, run_id=self._run_id, after_sequence=self._after)

    async def _next_attempt(self, lost: RunAttemptLost) -> AsyncIterator[EventResponse] | None:
        """The call that follows the request's next attempt after `lost`; None = raise it."""
        return None


def still_pending(request_status: str) -> bool:
    """Whether a request of this status (as the server spells it) may still run a next attempt."""
    name = request_status.upper().removeprefix("THREAD_RUN_STATUS_").removeprefix("REQUEST_STATUS_")
    return name in ("RUNNING", "QUEUED")


class JoinedRun(FollowedRun):
    """The events of one attempt of a thread run, as `JoinThreadRun` follows it (`Threads.join_run`).

    It reconnects by itself after a transport failure, from the last sequence it received. Joined
    by `request_id`, it follows the request's next attempt when one was lost (from that attempt's
    first event, `run_started` with a new `run_id`), once one runs, or the attempt the request ended
    in (its terminal checkpoint names it) if that one ran and ended meanwhile; joined by `run_id` alone, a lost
    attempt raises `RunAttemptLost`. It ends as a retry of the request would: after the `result`,
    or with the run's own error.

    Args: as `FollowedRun`; `run_id`, `request_id`, `after_sequence` as the join asked.
    """

    def __init__(
        self,
        responses: AsyncIterator[JoinThreadRunResponse],
        *,
        thread_id: str,
        run_id: str = "",
        request_id: str = "",
        after_sequence: int | None = None,
        link: Link | None = None,
    ) -> None:
        super().__init__(responses, thread_id=thread_id, request_id=request_id, link=link)
        self._by_request: Final = request_id
        self._run_id, self._after = run_id, after_sequence
        self._waits = 0  # asks about a lost attempt that names no next one yet
        self._from = after_sequence

    def _result_due(self) -> bool:
        # A join after the attempt's last sequence has nothing to send, the result included.
        return self._received or self._from is None

    def _reconnect(self) -> AsyncIterator[EventResponse]:
        assert self._link is not None
        return self._link.join(
            self.thread_id, run_id=self._run_id, request_id=self._by_request, after_sequence=self._after
        )

    async def _next_attempt(self, lost: RunAttemptLost) -> AsyncIterator[EventResponse] | None:
        assert self._link is not None
        if not self._by_request:
            return None
        if lost.next_run_id and lost.next_run_id != self._run_id:
            self._follow_attempt(lost.next_run_id)
            self._waits = 0
            return self._link.join(self.thread_id, run_id=self._run_id, request_id=self._by_request)
        if not still_pending(lost.request_status):
            # It ended, maybe in a next attempt that ran and finished while this one was read: its
            # terminal checkpoint names it.
            ended_in = await self._link.later_run(
                self.thread_id, self._by_request, lost.run_id or self._run_id
            )
            if not ended_in:
                return None
            self._follow_attempt(ended_in)
            return self._link.join(self.thread_id, run_id=ended_in, request_id=self._by_request)
        # No next attempt yet: ask about the lost one again, which names the next once it runs.
        self._waits += 1
        if not await self._link.pause(self._waits):
            return None
        return self._link.join(
            self.thread_id,
            run_id=lost.run_id or self._run_id,
            request_id=self._by_request,
            after_sequence=self._after,
        )


class ThreadUpdate(NamedTuple):
    """One message of a watch: the thread as it is now, and what changed since the previous one."""

    thread: Thread
    """The thread in the BASIC view."""
    change_sequence: int
    """Grows with every change of what `Thread` shows."""
    changes: tuple[ThreadChange, ...]
    """What changed: `(SNAPSHOT,)` on the first message and after each reconnect; several kinds when
    changes merged while the previous message was unread."""


class ThreadWatch:
    """The changes of one thread (`Threads.watch_thread`): an async iterator of `ThreadUpdate`.

    The first update is the thread's snapshot (`ThreadChange.SNAPSHOT`), then one per change. After a
    transport failure it reconnects by itself and yields a new snapshot, whose `change_sequence`
    tells what was missed. It ends by raising: `ThreadNotFound` once the thread is deleted, or the
    error that ended it (the deadline, if one was given). Use it as `async with` to close the call.

    Args:
        link: How to make the calls.
        thread_id: The thread watched.
        reconnect: False = a transport failure raises instead.
    """

    def __init__(self, link: Link, thread_id: str, *, reconnect: bool = True) -> None:
        self._link = link
        self.thread_id: Final = thread_id
        """The thread watched."""
        self._reconnect = reconnect
        self._call: AsyncIterator[WatchThreadResponse] | None = None
        self._done = False
        self.reconnects = 0
        """How many times the watch continued on a new call."""

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ThreadUpdate:
        if self._done:
            raise StopAsyncIteration
        failures = 0
        while True:
            if self._call is None:
                self._call = self._link.watch(self.thread_id)
            try:
                response = await anext(self._call)
            except StopAsyncIteration:
                self._done = True
                raise
            except Exception as exc:
                error = translate(exc)
                await self._close_call()
                if (
                    self._reconnect
                    and isinstance(error, ThreadlineError)
                    and error.status == StatusCode.UNAVAILABLE
                    and failures < RECONNECTS
                ):
                    failures += 1
                    if await self._link.pause(failures):
                        self.reconnects += 1
                        continue
                self._done = True
                raise_translated(exc)
            if response.thread is None:
                await self.aclose()
                raise missing("WatchThreadResponse.thread")
            return ThreadUpdate(response.thread, response.change_sequence, tuple(response.changes))

    async def _close_call(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            await _close(call)

    async def aclose(self) -> None:
        """Stop watching and close the call. Idempotent."""
        self._done = True
        await self._close_call()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
