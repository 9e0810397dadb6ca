"""Background runs (LIVE §3): `StartedRun`, the handle `Threads.start_run` returns.

`StartThreadRun` answers as soon as the run holds the thread, and the server drives the request to
its end with no client: if its server is lost, another replica (or the restarted server) runs its
next attempt under a new `run_id`. So the handle names the request, not one attempt: `events()`
joins it by `request_id` (following its next attempts), `result()` waits for its end the same way
and reads the outcome, and `cancel()` stops it (any attempt's `run_id` names the request).

How `result()` reads the outcome: it joins the request by `request_id` to its end. A join that ends
with the `result` is the outcome. A join that cannot tell how the request ended (`RunAttemptLost`:
the server closed the request without a result of that attempt, as a sweeper cancelling it, the
attempt cap interrupting it or a server-driven start failing its checks do; `RunEventsExpired`; or
UNIMPLEMENTED from a server that keeps no event log) is followed by the same `StartThreadRun`
again (the spec kept here): it replays the outcome, or raises the error status the request ended
with (e.g. `RequestInterrupted`). If that answers RUNNING, `result()` waits (0.2 s, doubling to
2 s) and joins again, within its deadline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._calls import UNSET, Timeout, missing
from ._errors import RunAttemptLost, RunEventsExpired, StatusCode, ThreadlineError
from ._gen.threadline.v1 import StartThreadRunResponse, ThreadRunSpec, ThreadRunStatus
from ._live import JoinedRun, ThreadRunOutcome

if TYPE_CHECKING:
    from ._threads import Threads

__all__ = ("StartedRun",)

_MAX_WAITS: Final = 5
"""`result()` looks again at a running request it cannot join up to every 2 s (0.2 s, doubling)."""


class StartedRun:
    """A thread run started in the background (`Threads.start_run`): what the server answered, and
    how to follow, wait for and stop it.

    ```python
    started = await client.threads.start_run(thread_id, text="summarise the logs")
    async with started.events() as events:  # a join by request: its next attempts too
        async for event in events:
            ...
    outcome = await started.result()  # ThreadRunOutcome(result, revision, replayed)
    ```

    The handle holds the request's spec: `result()` sends it again (same `request_id`) to read an
    outcome no join can give. Its attributes are the server's answer and never change: `run_id`
    stays the attempt the answer named (`events()` and `result()` follow later ones by themselves,
    and `cancel()` with it stops the request whichever attempt runs it).

    Args:
        threads: The threads client that started it.
        spec: The spec sent, to send again.
        response: The server's answer.
    """

    def __init__(self, threads: Threads, spec: ThreadRunSpec, response: StartThreadRunResponse) -> None:
        self._threads = threads
        self._spec = spec
        self.thread_id: Final = spec.thread_id
        """The thread the request runs."""
        self.run_id: Final = response.run_id
        """The attempt running the request now, or the one it ended in (when `replayed`)."""
        self.request_id: Final = response.request_id or spec.request_id
        """The request's ID: `start_run` again with it (and the same input) to read its state."""
        self.revision: Final = response.revision
        """RUNNING: the head the run began from. Replayed: the revision of its terminal checkpoint."""
        self.status: Final = response.status
        """`ThreadRunStatus.RUNNING` while the run goes on; QUEUED while it waits in the thread's
        queue (`busy_strategy="enqueue"`); for a finished request (`replayed`), how it ended
        (COMPLETED, SUSPENDED, FAILED, CANCELLED)."""
        self.queue_position: Final = response.queue_position
        """QUEUED: its place in `Thread.queue` when the server answered (1 = next); else 0."""
        self.replayed: Final = response.replayed
        """True when the request had already finished: nothing ran again, `outcome` is how it ended."""
        self.outcome: Final = _replayed(response)
        """The stored outcome when `replayed` (its result's `state` unset, `revision` its terminal
        checkpoint); None while the run goes on. `result()` returns it too."""

    def __repr__(self) -> str:
        return (
            f"StartedRun(thread_id={self.thread_id!r}, run_id={self.run_id!r}, "
            f"request_id={self.request_id!r}, revision={self.revision}, status={self.status!s}, "
            f"queue_position={self.queue_position}, replayed={self.replayed})"
        )

    def events(
        self, *, after_sequence: int | None = None, reconnect: bool = True, timeout: Timeout = UNSET
    ) -> JoinedRun:
        """The run's events, as `Threads.join_run` follows them: the written ones, then live ones.

        Without `after_sequence`, the request's latest attempt from its first event (`run_started`,
        sequence 0), and each next attempt after a lost one (from its `run_started`, a new `run_id`).
        With `after_sequence`, the attempt `run_id` from the event after that sequence (then, should
        that attempt be lost, the request's next ones).

        Args:
            after_sequence: Only events of `run_id` with a greater sequence; None = the request's
                latest attempt from its first event.
            reconnect: False = a transport failure or a lost attempt ends the stream.
            timeout: Deadline of the whole join, reconnects included; default the client's.
        """
        run_id = self.run_id if after_sequence is not None else None
        return self._threads.join_run(
            self.thread_id,
            run_id=run_id,
            request_id=self.request_id,
            after_sequence=after_sequence,
            reconnect=reconnect,
            timeout=timeout,
        )

    async def result(self, *, timeout: Timeout = UNSET) -> ThreadRunOutcome:
        """Wait for the request's end, following its next attempts, and return its outcome.

        For a request that had already finished (`replayed`), its outcome at once. Otherwise the
        outcome is the `result` of the join by request (`replayed` False); when the join cannot tell
        it (the server closed the request without a result of the attempt joined: cancelled after
        its server was lost, interrupted after its attempt cap, a server-driven start that failed;
        or its events are not kept), the same `StartThreadRun` again replays it (`replayed` True).

        Args:
            timeout: Deadline of the whole wait, the join and the replay; default the client's, None =
                as long as the run takes.

        Raises:
            RequestInterrupted: The server closed the request INTERRUPTED (`attempts`: its attempts
                ended by a lost server, the server's `--max-run-attempts`).
            RunAttemptLost, RunEventsExpired: The request still ran when the deadline came.
            ThreadlineError: The error the request ended with; UNAVAILABLE once reconnects run out.
        """
        if self.outcome is not None:
            return self.outcome
        link = self._threads._link(timeout)
        waits = 0
        while True:
            joined = JoinedRun(
                link.join(self.thread_id, request_id=self.request_id),
                thread_id=self.thread_id,
                request_id=self.request_id,
                link=link,
            )
            try:
                async with joined:
                    return await joined.collect()
            except ThreadlineError as error:
                if not _unreadable(error):
                    raise
                ended = error
            # The join cannot tell how the request ended: the same request again replays it.
            outcome = _replayed(await self._threads._start(self._spec, link.deadline, link.metadata))
            if outcome is not None:
                return outcome
            # Still running, in an attempt whose events this server cannot give: look again later.
            waits = min(waits + 1, _MAX_WAITS)
            if not await link.pause(waits):
                raise ended

    async def cancel(self, *, timeout: Timeout = UNSET) -> ThreadRunStatus:
        """Ask the request's run to stop (`CancelThreadRun` with `run_id`); it ends CANCELLED.

        Returns once the server recorded it: RUNNING while the run stops, CANCELLED when its server
        was gone and the request was closed at once, or the status of a request that had ended.
        `result()` then returns the CANCELLED outcome.

        Args:
            timeout: Deadline in seconds; default the client's.
        """
        return await self._threads.cancel(self.thread_id, self.run_id, timeout=timeout)


def _unreadable(error: ThreadlineError) -> bool:
    """Whether a join by request ended without telling how the request ended: a lost attempt whose
    request the server closed without a result of it (or whose next attempt never came in time),
    events no longer kept, or a server that keeps no event log."""
    return isinstance(error, RunAttemptLost | RunEventsExpired) or error.status == StatusCode.UNIMPLEMENTED


def _replayed(response: StartThreadRunResponse) -> ThreadRunOutcome | None:
    """The outcome a `StartThreadRun` answer replays; None while the request runs."""
    if not response.replayed:
        return None
    if response.result is None:  # pragma: no cover - the server always sets it
        raise missing("StartThreadRunResponse.result")
    return ThreadRunOutcome(result=response.result, revision=response.revision, replayed=True)
