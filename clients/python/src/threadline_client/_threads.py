"""`Threads`: durable threads the server keeps (`ThreadService`, THREADS.md), on a `Client`'s connection.

With `HarnessService` the host stores every state and sends it back; here the server stores the
thread and the host sends only what is new: a prompt, or its answers to `Thread.pending` by call ID
(`answers(...)`). Three rules shape this module:

- Every run request carries a `request_id`, fresh (`req-<32 hex>`) unless the caller gives one. The
  server answers a request ID once: a retry gets the stored outcome (`replayed`), never a second run.
  So `run()` retries UNAVAILABLE (a transport failure, a store outage) with the same ID, up to
  `RUN_RETRIES` times within its deadline; `stream()` continues a broken stream by joining its run
  from the last sequence it received (`_live.py`), and exposes its `request_id` so a host can retry.
- A thread run outlives its RPC: leaving a stream early, a deadline or a dropped connection stops
  the events, not the run, which goes on to commit. Stop a run with `cancel(thread_id, run_id)`.
- A thread run's `RunResult` has no `state`; the state is the checkpoint at the outcome's
  `revision` (`checkpoint(thread_id, revision)`), so a turn's answer does not grow with the thread.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal, TypedDict, TypeVar

from grpclib.metadata import Deadline

from ._background import StartedRun
from ._calls import UNSET, EventResponse, Timeout, missing, raise_translated
from ._errors import RunAttemptLost, StatusCode, translate
from ._gen.threadline.v1 import (
    BusyStrategy,
    CancelThreadRunRequest,
    Checkpoint,
    ClientTool,
    CreateThreadRequest,
    DeferredToolRequests,
    DeferredToolResults,
    DeferredToolResume,
    DeleteThreadRequest,
    ForkThreadRequest,
    GetCheckpointRequest,
    GetThreadRequest,
    HarnessState,
    ListCheckpointsRequest,
    ListThreadsRequest,
    ListThreadsResponse,
    PromptParts,
    RollbackThreadRequest,
    RunThreadRequest,
    StartThreadRunRequest,
    StartThreadRunResponse,
    StreamThreadRunRequest,
    StreamThreadRunResponse,
    Thread,
    ThreadRunSpec,
    ThreadRunStatus,
    ThreadServiceStub,
    ThreadStatus,
    ThreadView,
    ToolRecovery,
    UsageLimits,
)
from ._live import LOST_RETRIES, FollowedRun, JoinedRun, Link, ThreadRunOutcome, ThreadWatch
from ._tracing import Metadata

if TYPE_CHECKING:
    from ._client import Client

__all__ = (
    "RUN_RETRIES",
    "BusyStrategyName",
    "StartedRun",
    "ThreadRunOutcome",
    "ThreadRunStream",
    "Threads",
    "new_request_id",
)

RUN_RETRIES: Final = 3
"""How many times `Threads.run` sends a request again after UNAVAILABLE, with the same request ID."""
_RETRY_BACKOFF: Final = 0.2
"""Seconds before the first retry; doubled before each next one."""

_T = TypeVar("_T")


class _CallOptions(TypedDict):
    """The keyword arguments every stub call gets: its deadline, the client's token and the trace context."""

    timeout: float | None
    metadata: Metadata | None


def new_request_id() -> str:
    """A fresh request ID, `req-<32 lowercase hex>`: what the SDK sends unless the caller gives one."""
    return f"req-{uuid.uuid4().hex}"


class ThreadRunStream(FollowedRun):
    """The events of one `StreamThreadRun` call; iterate it once.

    The events are those of `Client.stream_run` without checkpoint candidates, plus a
    `thread_committed` event after each checkpoint the run commits; the terminal commit's comes
    right before `result`. Packed responses are unpacked as `RunStream` does.

    A stream that breaks (UNAVAILABLE: a lost connection, a server draining) continues by itself
    with `JoinThreadRun` from the last sequence it received, so no event comes twice and none is
    lost; before its first event it sends the request again (same `request_id`). When the attempt
    is lost (`RunAttemptLost`: its server crashed or stopped past its lease), it sends its request
    again, which runs the request's next attempt or attaches to it: the events go on with that
    attempt's `run_started` (a new `run_id`, sequences from 0). `reconnects` counts both.
    `Threads.stream(..., reconnect=False)` turns that off.

    Leaving the stream (`aclose`, the end of `async with`, a deadline) ends the call, not the run:
    the run goes on to its terminal commit on the server. To learn its outcome, send the same
    request again with `request_id=stream.request_id`, or `Threads.join_run(thread_id, run_id=...)`;
    to stop it, `Threads.cancel`.

    Args:
        responses: The call's responses (`ThreadServiceStub.stream_thread_run`).
        thread_id: The thread the request runs.
        request_id: The request ID the request carries.
        request: The request sent, to send again; with `link`, for reconnects.
        link: How to make the calls a reconnect takes; None = no reconnect.
    """

    def __init__(
        self,
        responses: AsyncIterator[StreamThreadRunResponse],
        *,
        thread_id: str,
        request_id: str,
        request: StreamThreadRunRequest | None = None,
        link: Link | None = None,
    ) -> None:
        super().__init__(
            responses, thread_id=thread_id, request_id=request_id, link=link if request is not None else None
        )
        self._request = request
        self._lost = 0

    def _reconnect(self) -> AsyncIterator[EventResponse]:
        if self._run_id:
            return super()._reconnect()
        # Nothing received: whether or not the request started, sending it again is safe.
        assert self._link is not None and self._request is not None
        return self._link.stream(self._request)

    async def _next_attempt(self, lost: RunAttemptLost) -> AsyncIterator[EventResponse] | None:
        assert self._link is not None and self._request is not None
        self._lost += 1
        if self._lost > LOST_RETRIES:
            return None
        self._follow_attempt("")
        return self._link.stream(self._request)

    async def aclose(self) -> None:
        """Stop reading and close the call; the run itself goes on on the server. Idempotent."""
        await super().aclose()


class Threads:
    """`ThreadService`: threads the server stores, runs one at a time, and answers exactly once.

    ```python
    thread = await client.threads.create(labels={"user": "ada"})
    outcome = await client.threads.run(thread.thread_id, text="delete notes.txt")
    if outcome.result.status == tl.RunStatus.SUSPENDED:
        (call,) = outcome.result.deferred.approvals
        outcome = await client.threads.run(thread.thread_id, answers=tl.answers(tl.approve(call)))
    ```

    Get it as `client.threads`: it shares the client's connection, token, TLS and default timeout.
    Every method takes `timeout=` (seconds, `None` = none; default the client's), for one call or,
    for the listings, for each page. Failures raise `ThreadlineError`, of the subclass its reason
    names (`ThreadNotFound`, `ThreadBusy`, `RevisionConflict`, ...; see `threadline_client._errors`).

    Args:
        client: The connection.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    def __repr__(self) -> str:
        return f"Threads({self._client.target!r})"

    # --- threads -------------------------------------------------------------------------------

    async def create(
        self,
        *,
        thread_id: str = "",
        agent: str = "",
        labels: Mapping[str, str] | None = None,
        state: HarnessState | None = None,
        pending: DeferredToolRequests | None = None,
        accepted: DeferredToolResume | None = None,
        client_tools: Sequence[ClientTool] = (),
        timeout: Timeout = UNSET,
    ) -> Thread:
        """Create a thread: empty, or importing a state the host held (e.g. from `HarnessService`).

        Args:
            thread_id: The new thread's ID; empty = `state.thread_id` with a state, else a
                server-generated `thread_<32 hex>`.
            agent: The agent of every run of the thread; empty = the server's default agent.
            labels: Up to 32 labels to find it by (`list(labels=...)`); set now, never changed.
            state: A host-held state to import (validated like a run's previous state).
            pending: The batch `state` is suspended on, exactly as `RunResult.deferred` gave it;
                the thread is then SUSPENDED, and its next run answers it by call ID.
            accepted: A resume the host accepted whose run did not finish; the next run recovers
                what its history lacks. Not together with `pending`.
            client_tools: The client tools `state` was made with, for a resume that declares none.
            timeout: Deadline in seconds; default the client's.

        Raises:
            ThreadExists: The ID is in use.
            ThreadlineError: E.g. `STATE_INVALID`, `INPUT_INVALID`, `AGENT_UNKNOWN`, or a
                `pending` batch that does not match the state.
        """
        request = CreateThreadRequest(
            thread_id=thread_id,
            agent=agent,
            labels=dict(labels or {}),
            state=state,
            pending=pending,
            accepted=accepted,
            client_tools=list(client_tools),
        )
        try:
            response = await self._stub().create_thread(request, **self._options(timeout))
        except Exception as exc:
            raise_translated(exc)
        return _required(response.thread, "CreateThreadResponse.thread")

    async def get(self, thread_id: str, *, full: bool = False, timeout: Timeout = UNSET) -> Thread:
        """A thread as it is now; `full=True` adds its head checkpoint's `state`.

        Raises:
            ThreadNotFound: No thread has this ID.
        """
        view = ThreadView.FULL if full else ThreadView.BASIC
        try:
            response = await self._stub().get_thread(
                GetThreadRequest(thread_id=thread_id, view=view), **self._options(timeout)
            )
        except Exception as exc:
            raise_translated(exc)
        return _required(response.thread, "GetThreadResponse.thread")

    async def list_page(
        self,
        *,
        labels: Mapping[str, str] | None = None,
        status: ThreadStatus | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: Timeout = UNSET,
    ) -> ListThreadsResponse:
        """One page of `list`: its `threads` and the `next_page_token` (empty on the last page).

        Args:
            labels: Only threads with every one of these labels.
            status: Only threads with this status; None = any.
            page_size: Threads per page; 0 = the server's default (100), at most 1000.
            page_token: The previous page's `next_page_token`; empty = the first page. Pass the
                same filters with it.
            timeout: Deadline in seconds; default the client's.
        """
        request = ListThreadsRequest(
            page_size=page_size,
            page_token=page_token,
            labels=[f"{key}={value}" for key, value in (labels or {}).items()],
            status=status if status is not None else ThreadStatus.UNSPECIFIED,
        )
        try:
            return await self._stub().list_threads(request, **self._options(timeout))
        except Exception as exc:
            raise_translated(exc)

    async def list(
        self,
        *,
        labels: Mapping[str, str] | None = None,
        status: ThreadStatus | None = None,
        page_size: int = 0,
        timeout: Timeout = UNSET,
    ) -> AsyncIterator[Thread]:
        """Every matching thread, newest `update_time` first, walking every page.

        ```python
        async for thread in client.threads.list(labels={"user": "ada"}):
            ...
        ```

        Args:
            labels: Only threads with every one of these labels.
            status: Only threads with this status; None = any.
            page_size: Threads per request; 0 = the server's default (100), at most 1000.
            timeout: Deadline of each page's call; default the client's.
        """
        token = ""
        while True:
            page = await self.list_page(
                labels=labels, status=status, page_size=page_size, page_token=token, timeout=timeout
            )
            for thread in page.threads:
                yield thread
            token = page.next_page_token
            if not token:
                return

    async def delete(self, thread_id: str, *, expected_revision: int = 0, timeout: Timeout = UNSET) -> None:
        """Delete a thread with its checkpoints and run records.

        Args:
            thread_id: The thread.
            expected_revision: Delete only if this is still the head; 0 = whatever the head is.
            timeout: Deadline in seconds; default the client's.

        Raises:
            ThreadNotFound: No thread has this ID.
            ThreadBusy: A run holds the thread.
            RevisionConflict: The head is not `expected_revision`.
        """
        request = DeleteThreadRequest(thread_id=thread_id, expected_revision=expected_revision)
        try:
            await self._stub().delete_thread(request, **self._options(timeout))
        except Exception as exc:
            raise_translated(exc)

    async def fork(
        self,
        thread_id: str,
        *,
        revision: int = 0,
        new_thread_id: str = "",
        labels: Mapping[str, str] | None = None,
        timeout: Timeout = UNSET,
    ) -> Thread:
        """Branch a new thread from a committed checkpoint, with the same agent.

        The new thread's first checkpoint (FORKED, revision 1) keeps the source checkpoint's
        pending batch, retained answers and client tools: a fork of a SUSPENDED checkpoint is
        SUSPENDED on the same calls. Environment states are cleared (SPEC §1.5).

        Args:
            thread_id: The source thread (it may be running: a fork reads committed checkpoints).
            revision: The checkpoint to branch from; 0 = the head.
            new_thread_id: The new thread's ID; empty = server-generated.
            labels: The new thread's labels.
            timeout: Deadline in seconds; default the client's.

        Raises:
            ThreadNotFound, CheckpointNotFound: No such source.
            ThreadExists: `new_thread_id` is in use (the source's own ID is `FORK_THREAD_ID_CONFLICT`).
        """
        request = ForkThreadRequest(
            thread_id=thread_id, revision=revision, new_thread_id=new_thread_id, labels=dict(labels or {})
        )
        try:
            response = await self._stub().fork_thread(request, **self._options(timeout))
        except Exception as exc:
            raise_translated(exc)
        return _required(response.thread, "ForkThreadResponse.thread")

    async def rollback(
        self, thread_id: str, revision: int, *, expected_revision: int = 0, timeout: Timeout = UNSET
    ) -> Thread:
        """Make an earlier checkpoint current again, as a new head (ROLLED_BACK); nothing is deleted.

        The thread's status follows the copied checkpoint: SUSPENDED again on its calls if it was.
        Answering them again runs them again.

        Args:
            thread_id: The thread.
            revision: The checkpoint to copy.
            expected_revision: Roll back only if this is still the head; 0 = whatever the head is.
            timeout: Deadline in seconds; default the client's.

        Raises:
            CheckpointNotFound: The thread has no such revision.
            ThreadBusy: A run holds the thread.
            RevisionConflict: The head is not `expected_revision`.
        """
        request = RollbackThreadRequest(
            thread_id=thread_id, revision=revision, expected_revision=expected_revision
        )
        try:
            response = await self._stub().rollback_thread(request, **self._options(timeout))
        except Exception as exc:
            raise_translated(exc)
        return _required(response.thread, "RollbackThreadResponse.thread")

    # --- checkpoints ---------------------------------------------------------------------------

    async def checkpoints(
        self, thread_id: str, *, page_size: int = 0, timeout: Timeout = UNSET
    ) -> AsyncIterator[Checkpoint]:
        """Every checkpoint of a thread, newest first, without its `state`, walking every page.

        Args:
            thread_id: The thread.
            page_size: Checkpoints per request; 0 = the server's default (100), at most 1000.
            timeout: Deadline of each page's call; default the client's.

        Raises:
            ThreadNotFound: No thread has this ID.
        """
        token = ""
        while True:
            request = ListCheckpointsRequest(thread_id=thread_id, page_size=page_size, page_token=token)
            try:
                page = await self._stub().list_checkpoints(request, **self._options(timeout))
            except Exception as exc:
                raise_translated(exc)
            for checkpoint in page.checkpoints:
                yield checkpoint
            token = page.next_page_token
            if not token:
                return

    async def checkpoint(self, thread_id: str, revision: int, *, timeout: Timeout = UNSET) -> Checkpoint:
        """One checkpoint with its `state` and pending batch, e.g. the state a run's outcome points at.

        Raises:
            ThreadNotFound: No thread has this ID.
            CheckpointNotFound: The thread has no such revision.
        """
        request = GetCheckpointRequest(thread_id=thread_id, revision=revision)
        try:
            response = await self._stub().get_checkpoint(request, **self._options(timeout))
        except Exception as exc:
            raise_translated(exc)
        return _required(response.checkpoint, "GetCheckpointResponse.checkpoint")

    # --- runs ----------------------------------------------------------------------------------

    def stream(
        self,
        thread_id: str,
        *,
        text: str | None = None,
        parts: PromptParts | None = None,
        answers: DeferredToolResults | None = None,
        request_id: str | None = None,
        expected_revision: int = 0,
        tool_recovery: ToolRecovery | None = None,
        client_tools: Sequence[ClientTool] = (),
        usage_limits: UsageLimits | None = None,
        busy_strategy: BusyStrategyName = "reject",
        reconnect: bool = True,
        timeout: Timeout = UNSET,
    ) -> ThreadRunStream:
        """Run the thread's next turn and stream its events, `thread_committed` then `result` last.

        ```python
        async with client.threads.stream(thread_id, text="lookup grpc") as stream:
            async for event in stream:
                ...
        outcome = stream.outcome  # result, revision, replayed
        ```

        A broken stream continues by itself (see `ThreadRunStream`): it joins its run from the last
        sequence it received, and sends its request again (same `request_id`) when the attempt was
        lost, so the host sees every event of the run once. With `reconnect=False` a transport error
        ends the stream instead; sending the same request again with `request_id=stream.request_id`
        then attaches to the running request from its first event, or replays a finished one.

        Args:
            thread_id: The thread.
            text: A text prompt. Not together with `parts`; neither = no new input.
            parts: A prompt of several parts.
            answers: Answers to every item of `Thread.pending`, by call ID (`answers(...)`).
            request_id: This request's ID, unique per thread; None or empty = a fresh one.
            expected_revision: Run only if this is still the head; 0 = whatever the head is.
            tool_recovery: How to settle calls the head left unanswered; None = DECLARED.
            client_tools: The host's tools for this run; none on a resume or recovery = the head
                checkpoint's.
            usage_limits: Limits on the run's model usage; None = the agent's own.
            busy_strategy: When the thread is busy: `"reject"` (the default: `ThreadBusy`);
                `"enqueue"`: wait in the thread's queue (`Thread.queue`) and run after the requests
                accepted before it; `"interrupt"`: stop the running turn (it ends CANCELLED, its
                progress committed) and run next, ahead of the enqueued ones; `"rollback"`: as
                `"interrupt"`, and the stopped turn's commits are discarded first (a ROLLED_BACK
                checkpoint copies where it began). The stream's events start when the request does.
            reconnect: False = a transport failure or a lost attempt ends the stream.
            timeout: Deadline of the call (not of the run), reconnects included; default the client's.

        Raises:
            ValueError: Both `text` and `parts`.
            ThreadlineError: While iterating, e.g. `ThreadBusy`, `RevisionConflict`,
                `ThreadNotSuspended`, `RequestIdReused`, or a `DEFERRED_*` reason for the answers;
                `ListenerTooSlow` when the loop fell too far behind the run, which goes on.
        """
        spec = _run_spec(
            thread_id,
            text=text,
            parts=parts,
            answers=answers,
            request_id=request_id,
            expected_revision=expected_revision,
            tool_recovery=tool_recovery,
            client_tools=client_tools,
            usage_limits=usage_limits,
            busy_strategy=busy_strategy,
        )
        request = StreamThreadRunRequest(
            spec=spec, max_events_per_message=self._client._max_events_per_message
        )
        link = self._link(timeout)
        return ThreadRunStream(
            link.stream(request),
            thread_id=thread_id,
            request_id=spec.request_id,
            request=request,
            link=link if reconnect else None,
        )

    def join_run(
        self,
        thread_id: str,
        *,
        run_id: str | None = None,
        request_id: str | None = None,
        after_sequence: int | None = None,
        reconnect: bool = True,
        timeout: Timeout = UNSET,
    ) -> JoinedRun:
        """Follow a run of the thread from any replica (`JoinThreadRun`): its events, then live ones.

        ```python
        async with client.threads.join_run(thread_id, run_id=run_id, after_sequence=k) as joined:
            async for event in joined:
                ...  # every event with a sequence above k, each once, the result last
        outcome = joined.outcome
        ```

        The events are the attempt's own, with the sequence numbers and content its first stream
        had (a log may skip numbers: each skipped range ends with an `events_omitted` event). It
        reconnects by itself after a transport failure, from the last sequence it received. Joined
        by `request_id`, a lost attempt is followed into the request's next attempt once one runs
        (its events from `run_started`, under a new `run_id`); otherwise `RunAttemptLost` ends it.

        Args:
            thread_id: The thread.
            run_id: The attempt to follow (any attempt's run ID). None: `request_id`'s latest,
                else the one holding the thread, else the thread's latest.
            request_id: The request whose latest attempt to follow.
            after_sequence: Only events with a greater sequence (the last one a host received);
                None = from the first (`run_started`, sequence 0).
            reconnect: False = a transport failure or a lost attempt ends the stream.
            timeout: Deadline of the whole join, reconnects included; default the client's.

        Raises:
            ThreadlineError: While iterating: `ThreadNotFound`, `RunNotFound`; the run's own error
                status; `RunAttemptLost`; `RunEventsExpired` (past retention, or never recorded: a
                retry of the request replays its result); `FollowerLimitReached`; UNIMPLEMENTED
                from a server with its event log off.
        """
        link = self._link(timeout)
        run, request = run_id or "", request_id or ""
        return JoinedRun(
            link.join(thread_id, run_id=run, request_id=request, after_sequence=after_sequence),
            thread_id=thread_id,
            run_id=run,
            request_id=request,
            after_sequence=after_sequence,
            link=link if reconnect else None,
        )

    def watch_thread(self, thread_id: str, *, reconnect: bool = True, timeout: Timeout = None) -> ThreadWatch:
        """Watch a thread's changes (`WatchThread`): its snapshot, then one update per change.

        ```python
        async with client.threads.watch_thread(thread_id) as watch:
            async for thread, change_sequence, changes in watch:
                if tl.ThreadChange.RUN_ENDED in changes:
                    ...
        ```

        A slow reader gets fewer, newer updates, never a backlog (changes merge while one is unread).
        After a transport failure it reconnects and yields a new snapshot.

        Args:
            thread_id: The thread.
            reconnect: False = a transport failure ends the watch.
            timeout: Deadline of the whole watch; default none (a watch lasts as long as it is read).

        Raises:
            ThreadNotFound: While iterating: no such thread, or it was deleted.
            FollowerLimitReached: The server follows as many as it may.
        """
        return ThreadWatch(self._link(timeout), thread_id, reconnect=reconnect)

    async def run(
        self,
        thread_id: str,
        *,
        text: str | None = None,
        parts: PromptParts | None = None,
        answers: DeferredToolResults | None = None,
        request_id: str | None = None,
        expected_revision: int = 0,
        tool_recovery: ToolRecovery | None = None,
        client_tools: Sequence[ClientTool] = (),
        usage_limits: UsageLimits | None = None,
        busy_strategy: BusyStrategyName = "reject",
        timeout: Timeout = UNSET,
    ) -> ThreadRunOutcome:
        """Run the thread's next turn and return its outcome (`RunThread`).

        UNAVAILABLE (the server unreachable, the connection lost, `STORE_UNAVAILABLE`) is retried
        up to `RUN_RETRIES` times, 0.2 s apart and doubling, with the same request ID, so the run
        happens at most once; `outcome.replayed` says the server answered it from its record.

        Args: as `stream`; `timeout` bounds the whole call, retries included.

        Returns:
            The result (its `state` unset), the revision of its terminal checkpoint, and whether
            the server replayed it.

        Raises:
            ValueError: Both `text` and `parts`.
            ThreadlineError: E.g. `ThreadBusy`, `RevisionConflict`, `ThreadNotSuspended`,
                `RequestIdReused`, `RequestInterrupted`, `LeaseLost`; UNAVAILABLE once retries run out.
        """
        spec = _run_spec(
            thread_id,
            text=text,
            parts=parts,
            answers=answers,
            request_id=request_id,
            expected_revision=expected_revision,
            tool_recovery=tool_recovery,
            client_tools=client_tools,
            usage_limits=usage_limits,
            busy_strategy=busy_strategy,
        )
        stub = self._stub()
        deadline = self._deadline(timeout)
        metadata = self._client._call_metadata()
        response = await _retried(
            lambda: stub.run_thread(RunThreadRequest(spec=spec), deadline=deadline, metadata=metadata),
            deadline,
        )
        result = _required(response.result, "RunThreadResponse.result")
        return ThreadRunOutcome(result=result, revision=response.revision, replayed=response.replayed)

    async def start_run(
        self,
        thread_id: str,
        *,
        text: str | None = None,
        parts: PromptParts | None = None,
        answers: DeferredToolResults | None = None,
        request_id: str | None = None,
        expected_revision: int = 0,
        tool_recovery: ToolRecovery | None = None,
        client_tools: Sequence[ClientTool] = (),
        usage_limits: UsageLimits | None = None,
        busy_strategy: BusyStrategyName = "reject",
        timeout: Timeout = UNSET,
    ) -> StartedRun:
        """Start the thread's next turn in the background (`StartThreadRun`) and return at once.

        ```python
        started = await client.threads.start_run(thread_id, text="summarise the logs")
        print(started.run_id, started.status)  # run-..., RUNNING
        outcome = await started.result()  # later, from anywhere: start_run again with its request_id
        ```

        The server answers as soon as the run holds the thread, and drives the request to its end
        with no client: if its server is lost, another replica (or the restarted server) runs its
        next attempt. The checks and errors before the run are `run`'s. The same request again
        (same `request_id` and input) answers the same while it runs (the `run_id` of its current
        attempt), and once it finished, `replayed` with its status, `result` and terminal
        `revision`; a request that ended with an error raises that error again. UNAVAILABLE is
        retried as `run` retries it, with the same request ID.

        Args: as `run`; `timeout` bounds this call only (retries included), not the run.

        Returns:
            A `StartedRun`: `run_id`, `request_id`, `revision` (the head the run began from),
            `status` (RUNNING; QUEUED with `queue_position` when `busy_strategy="enqueue"` found the
            thread busy), `replayed`; `events()`, `result()`, `cancel()`.

        Raises:
            ValueError: Both `text` and `parts`.
            ThreadlineError: E.g. `ThreadBusy`, `ThreadQueueFull`, `RevisionConflict`,
                `ThreadNotSuspended`, `RequestIdReused`, `RequestInterrupted`; UNAVAILABLE once
                retries run out.
        """
        spec = _run_spec(
            thread_id,
            text=text,
            parts=parts,
            answers=answers,
            request_id=request_id,
            expected_revision=expected_revision,
            tool_recovery=tool_recovery,
            client_tools=client_tools,
            usage_limits=usage_limits,
            busy_strategy=busy_strategy,
        )
        response = await self._start(spec, self._deadline(timeout), self._client._call_metadata())
        return StartedRun(self, spec, response)

    async def cancel(
        self, thread_id: str, run_id: str = "", *, request_id: str = "", timeout: Timeout = UNSET
    ) -> ThreadRunStatus:
        """Ask a thread's run to stop; it ends CANCELLED with its progress committed.

        Returns as soon as the server recorded the request, before the run ends.

        Args:
            thread_id: The thread.
            run_id: The run (`RunEvent.run_id`, `Thread.lease.run_id`, `ThreadBusy.run_id`).
            request_id: Or the request whose run to stop (its latest attempt): for a host that
                knows only the `request_id` it sent. Either is required; both must name one request.
            timeout: Deadline in seconds; default the client's.

        Returns:
            The run record's status: RUNNING while the run stops, CANCELLED when its server was
            gone and the record was closed at once, or the status of a run that had ended.

        Raises:
            RunNotFound: The thread never had this run (or request).
            ThreadlineError: INVALID_ARGUMENT `INPUT_INVALID`: neither ID, or the two name different
                requests.
        """
        request = CancelThreadRunRequest(thread_id=thread_id, run_id=run_id, request_id=request_id)
        try:
            response = await self._stub().cancel_thread_run(request, **self._options(timeout))
        except Exception as exc:
            raise_translated(exc)
        return response.status

    # --- plumbing ------------------------------------------------------------------------------

    def _stub(self) -> ThreadServiceStub:
        return self._client._connect_threads()

    def _deadline(self, timeout: Timeout) -> Deadline | None:
        seconds = self._client._deadline(timeout)
        return Deadline.from_timeout(seconds) if seconds is not None else None

    def _link(self, timeout: Timeout) -> Link:
        """One deadline and one metadata (the trace context now) for a stream and its reconnects."""
        return Link(
            stub=self._stub,
            metadata=self._client._call_metadata(),
            deadline=self._deadline(timeout),
            max_events_per_message=self._client._max_events_per_message,
        )

    async def _start(
        self, spec: ThreadRunSpec, deadline: Deadline | None, metadata: Metadata | None
    ) -> StartThreadRunResponse:
        """`StartThreadRun` of `spec`, UNAVAILABLE retried as `run` retries it (`start_run`, and the
        replay `StartedRun.result` reads)."""
        stub = self._stub()
        return await _retried(
            lambda: stub.start_thread_run(
                StartThreadRunRequest(spec=spec), deadline=deadline, metadata=metadata
            ),
            deadline,
        )

    def _options(self, timeout: Timeout) -> _CallOptions:
        return {"timeout": self._client._deadline(timeout), "metadata": self._client._call_metadata()}


async def _retried(send: Callable[[], Awaitable[_T]], deadline: Deadline | None) -> _T:
    """`send()`'s answer, sent again after UNAVAILABLE up to `RUN_RETRIES` times, 0.2 s apart and
    doubling, while the next try still fits before `deadline`; any other error is raised at once."""
    attempt = 0
    while True:
        try:
            return await send()
        except Exception as exc:
            error = translate(exc)
            backoff = _RETRY_BACKOFF * 2**attempt
            if (
                error is None
                or error.status != StatusCode.UNAVAILABLE
                or attempt == RUN_RETRIES
                or (deadline is not None and deadline.time_remaining() <= backoff)
            ):
                raise_translated(exc)
        attempt += 1
        await asyncio.sleep(backoff)


BusyStrategyName = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a run request does when its thread is busy (`ThreadRunSpec.busy_strategy`)."""
_BUSY_STRATEGIES: dict[str, BusyStrategy] = {
    "reject": BusyStrategy.UNSPECIFIED,
    "enqueue": BusyStrategy.ENQUEUE,
    "interrupt": BusyStrategy.INTERRUPT,
    "rollback": BusyStrategy.ROLLBACK,
}
"""`reject` is sent as the field's default (unset), as before strategies existed."""


def _run_spec(
    thread_id: str,
    *,
    text: str | None,
    parts: PromptParts | None,
    answers: DeferredToolResults | None,
    request_id: str | None,
    expected_revision: int,
    tool_recovery: ToolRecovery | None,
    client_tools: Sequence[ClientTool],
    usage_limits: UsageLimits | None,
    busy_strategy: BusyStrategyName,
) -> ThreadRunSpec:
    if text is not None and parts is not None:
        raise ValueError("give the prompt as text or as parts, not both")
    strategy = _BUSY_STRATEGIES.get(busy_strategy)
    if strategy is None:
        raise ValueError(f"busy_strategy must be one of {sorted(_BUSY_STRATEGIES)}, not {busy_strategy!r}")
    spec = ThreadRunSpec(
        thread_id=thread_id,
        request_id=request_id or new_request_id(),
        expected_revision=expected_revision,
        answers=answers,
        tool_recovery=tool_recovery if tool_recovery is not None else ToolRecovery.UNSPECIFIED,
        client_tools=list(client_tools),
        usage_limits=usage_limits,
        busy_strategy=strategy,
    )
    # Set after construction: one case of the `prompt` oneof, or none.
    if text is not None:
        spec.text = text
    elif parts is not None:
        spec.parts = parts
    return spec


def _required(value: _T | None, what: str) -> _T:
    if value is None:  # pragma: no cover - the server always sets it
        raise missing(what)
    return value
