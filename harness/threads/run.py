"""One request of a thread, run through THREADS §4: Begin, Run, Finish; recovery on a next attempt.

The run executes in a task of its own (`ThreadRun`), not in its caller's: a caller that goes away stops
receiving events, and the run goes on to its terminal commit. Every commit is fenced; the holder also
measures its lease on its own monotonic clock, so a stalled process stops before it could commit late.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic_ai.tools import DeferredToolResults

from .._run import HarnessRunStream
from ..client_tools import ClientTool
from ..deferred import UNANSWERED_APPROVAL_MESSAGE, DeferredToolRequests, DeferredToolResume
from ..errors import (
    ErrorCode,
    HarnessError,
    RecordedRefusal,
    Refusal,
    RunCleanupError,
    ThreadError,
    error_reason,
)
from ..events import HarnessCheckpointEvent, HarnessRunResultEvent
from ..results import HarnessRunResult
from ..run_request import RunRequest
from ..state import HarnessState
from .begin import (
    Attach,
    Cancelled,
    Enqueue,
    GiveUp,
    Queued,
    Refuse,
    Replay,
    RunAttempt,
    consumed_by,
    decide,
    rollback_target,
    rollback_unanswerable,
    rolled_back_attempt,
)
from .codec import state_parts
from .commits import Committer
from .detached import spec_json
from .eventlog import AttemptLog, Numbered
from .intents import IntentCall
from .items import TERMINAL_KIND as _KIND
from .items import replay
from .join import follow_on, until_started
from .lease import LeaseKeeper, Lost
from .outcome import ThreadCommittedEvent, ThreadRunOutcome
from .records import (
    AnsweredHow,
    CheckpointKind,
    CheckpointRow,
    Head,
    RunRow,
    RunRowStatus,
    StateParts,
    ThreadRow,
)
from .request import RunHost, ThreadRunRequest
from .store import Finish, NewCheckpoint, busy, conflict, interrupted, lease_lost

__all__ = ("LISTENER_BACKLOG", "Started", "ThreadRun")

LOGGER = logging.getLogger("threadline.threads")

LISTENER_BACKLOG = 8192
"""How many items a run keeps for its listener that it has not taken (a stream's outbox and gRPC's own
buffers come on top); a listener further behind is detached with `LISTENER_TOO_SLOW`."""

_YIELD_AT = 64
"""Past this many untaken items the run yields to the event loop after each one, so its listener gets its
turns and the backlog measures the listener's lag, not the run holding the loop (a scripted model streams
a whole response without ever waiting)."""

_BEGIN_TRIES = 4
"""How often a request re-reads and decides again after its Begin lost a compare-and-set race."""
_MOVED = (ErrorCode.THREAD_BUSY, ErrorCode.REVISION_CONFLICT)
_CLOSED = ("completed", "created")
"""Heads that leave no call open (a finished turn, a new thread): a Begin on one reads no intents."""
"""A compare-and-set lost to another writer: read again and decide again."""


@dataclass(frozen=True, slots=True)
class Started:
    """What `StartThreadRun` answers (LIVE §3.1): the attempt running the request and the head it began
    from, or the outcome of a request that had finished (`replayed`)."""

    run_id: str
    revision: int
    replayed: ThreadRunOutcome | None = None
    queue_position: int = 0
    """The request waits in the thread's queue at this place (1 = next); 0: it runs, or ran."""


@dataclass(frozen=True, slots=True)
class _End:
    """The last entry a listener takes: the run ended (with `error`, if it raised), or left it behind."""

    error: BaseException | None


class ThreadRun:
    """A request running in its own task; `items()` follows it until the caller stops listening.

    The run never waits for its listener: it keeps at most `LISTENER_BACKLOG` items the listener has not
    taken, and a listener that falls further behind is detached with `LISTENER_TOO_SLOW` while the run
    goes on to its terminal commit.
    """

    def __init__(
        self,
        host: RunHost,
        request: ThreadRunRequest,
        *,
        detached: bool = False,
        driven: bool = False,
        queued: str = "",
        read: tuple[ThreadRow, RunRow] | None = None,
        outcome_only: bool = False,
    ) -> None:
        self._host = host
        self.request = request
        self._outcome_only = outcome_only
        """The listener takes only the outcome (`RunThread`): no other item is queued for it."""
        self._queued = queued
        """The run ID a queued request was accepted with, when the server starts it (its queue's head)."""
        self._read = read
        """The thread and the request's record as the server just read them to start it: Begin decides on
        them, not on a second read of the same rows (its compare-and-set sends a stale one back to read)."""
        self.detached = detached
        """Server-driven (`StartThreadRun`, a sweeper's next attempt): no listener; parked by a drain."""
        self._driven = driven
        """Started by the server itself (a sweeper): a start that fails the host's checks closes the record."""
        self.started: asyncio.Future[Started] = asyncio.get_running_loop().create_future()
        """Resolved once Begin committed (or the request was found finished or running); raises what
        refused it."""
        self._queue: asyncio.Queue[Numbered | _End] = asyncio.Queue(LISTENER_BACKLOG + 1)  # + its end
        self._recorded = False
        """Whether the attempt this call follows keeps a log (a listener that falls behind reads on from it)."""
        self._listening = True
        self._holder: _Holder | None = None
        self._cancel_asked = False
        self._park_asked = False
        """A drain came before the holder: it parks (detached) or cancels (attached) once it holds."""
        self.run_id = ""
        self.task = asyncio.create_task(self._main())

    def cancel(self) -> None:
        """Stop the run (`CancelThreadRun`, a drain): it ends CANCELLED with its candidate committed."""
        self._cancel_asked = True
        if self._holder is not None:
            self._holder.request_cancel()

    def drain(self) -> None:
        """The server drains (SIGTERM): a detached run parks at its next model request (LIVE §3.3), an
        attached one is cancelled as THREADS says."""
        self._park_asked = True
        if self._holder is not None:
            if self._holder.detached:
                self._holder.park()
            else:
                self.cancel()

    async def before_model_request(
        self, state: HarnessState, pending_input: DeferredToolResume | None
    ) -> None:
        """The run's barrier (`RunBarrier`): its holder commits `state` before the request is sent."""
        assert self._holder is not None  # the stream is iterated only by its holder
        await self._holder.barrier(state, pending_input)

    async def before_tool_call(
        self, call_id: str, tool_name: str, args: dict[str, Any], *, tool_kind: str, retryable: bool
    ) -> None:
        """The run's dispatch gate (`RunBarrier`): its holder records the call's intent first."""
        assert self._holder is not None
        await self._holder.gate(IntentCall(call_id, tool_name, retryable))

    def detach(self) -> None:
        """The caller went away: drop what is queued and everything the run still produces."""
        self._listening = False
        while not self._queue.empty():
            self._queue.get_nowait()

    async def items(self) -> AsyncIterator[Numbered]:
        """The run's events in order, numbered by the attempt; raises the error the run ended with.

        A listener that falls `LISTENER_BACKLOG` events behind reads on from the attempt's log (LIVE §2.6),
        where the attempt keeps one; else it gets `LISTENER_TOO_SLOW`.
        """
        last = -1
        while not isinstance(entry := await self._queue.get(), _End):
            last = entry.sequence
            yield entry
        error = entry.error
        if isinstance(error, ThreadError) and error.code == ErrorCode.LISTENER_TOO_SLOW and self._recorded:
            async for event in follow_on(self._host, self.request.thread_id, self.run_id, after=last):
                yield event
            return
        if error is not None:
            raise error

    async def _offer(self, item: Numbered) -> None:
        """Queue `item` for the listener, unless it left, takes only the outcome, or fell
        `LISTENER_BACKLOG` items behind."""
        if not self._listening or (self._outcome_only and not isinstance(item.item, ThreadRunOutcome)):
            return
        queue = self._queue
        if queue.qsize() < LISTENER_BACKLOG:
            queue.put_nowait(item)
            if queue.qsize() > _YIELD_AT:
                await asyncio.sleep(0)
            return
        self.detach()
        queue.put_nowait(_End(self._too_slow()))

    @property
    def _ids(self) -> dict[str, str]:
        return {
            "thread_id": self.request.thread_id,
            "run_id": self.run_id,
            "request_id": self.request.request_id,
        }

    def _too_slow(self) -> ThreadError:
        ids = self._ids
        error = ThreadError(
            f"This call fell more than {LISTENER_BACKLOG} events behind its run and was detached; the run "
            "goes on. Retry the request with the same request_id for its outcome once it ended.",
            code=ErrorCode.LISTENER_TOO_SLOW,
            details={**ids, "backlog": LISTENER_BACKLOG},
        )
        LOGGER.warning(
            "listener_detached",
            extra={"fields": {"reason": error.code.value.upper(), "backlog": LISTENER_BACKLOG, **ids}},
        )
        return error

    def _end(self, error: BaseException | None) -> None:
        if self._listening:
            self._queue.put_nowait(_End(error))

    async def _main(self) -> None:
        try:
            await self._run_all()
        finally:
            if not self.started.done():
                self.started.cancel()  # the task was cancelled before Begin (the server stops)

    async def _run_all(self) -> None:
        try:
            # `aclosing`: a cancellation between items closes the run here and now.
            async with contextlib.aclosing(self._execute()) as items:
                async for item in items:
                    await self._offer(item)
        except BaseException as error:
            if not isinstance(error, HarnessError | Refusal | asyncio.CancelledError):
                LOGGER.error("run_crashed", exc_info=error, extra={"fields": self._ids})
            if not self.started.done() and not isinstance(error, asyncio.CancelledError):
                self.started.set_exception(error)
                self.started.exception()  # retrieved: a caller not waiting for it learns through `items()`
            self._end(error)
            if isinstance(error, asyncio.CancelledError):
                raise
            return
        self._end(None)

    # -- Begin ----------------------------------------------------------------------------------------

    async def _execute(self) -> AsyncGenerator[Numbered, None]:
        host, request = self._host, self.request
        store = host.store
        races = 0
        read, self._read = self._read, None
        while True:
            record: RunRow | None
            if read is not None:
                (thread, record), read = read, None
            else:
                thread, record = await host.thread_and_record(request.thread_id, request.request_id)
            decision = decide(
                thread, record, request, max_attempts=host.max_run_attempts, start=bool(self._queued)
            )
            if isinstance(decision, Refuse):
                if decision.sweep:
                    host.sweep_soon()
                error = decision.error
                if isinstance(error, ThreadError) and error.code is ErrorCode.THREAD_NOT_SUSPENDED:
                    error = await self._consumed(thread, error)
                raise host.launcher.refused_again(error) if isinstance(error, RecordedRefusal) else error
            if isinstance(decision, Replay):
                outcome = decision.outcome
                self._announce(Started(outcome.run_id, outcome.revision, replayed=outcome))
                encode = host.encode
                for sequence, replayed in enumerate(replay(outcome)):
                    yield Numbered(sequence, replayed, None if encode is None else encode(replayed, sequence))
                return
            if isinstance(decision, Cancelled):
                await host.cancel(request.thread_id, decision.run_id)
                continue  # decide again: the request ended CANCELLED
            if isinstance(decision, GiveUp):
                assert record is not None
                try:
                    await store.close_request(thread, record.request_id, status="interrupted", outcome=None)
                except ThreadError as error:
                    if error.code in _MOVED and (races := races + 1) < _BEGIN_TRIES:
                        continue
                    raise
                LOGGER.warning(
                    "request_interrupted",
                    extra={"fields": {**self._ids, "run_id": record.run_id, "attempts": decision.attempts}},
                )
                raise interrupted(
                    record.request_id, record.run_id, record.committed_revision, attempts=decision.attempts
                )
            if isinstance(decision, Attach):
                if self.detached and not await store.detach(request.thread_id, request.request_id):
                    continue  # it finished meanwhile: decide again (a replay)
                assert record is not None
                self._announce(Started(decision.run_id, record.begin_revision))
                if self.detached:
                    return  # nobody listens: the run goes on where it runs
                async for event in self._attach(thread, decision.run_id):
                    yield event
                return
            if isinstance(decision, Enqueue | Queued):
                if isinstance(decision, Enqueue):
                    try:
                        queued = await self._enqueue(thread, decision)
                    except ThreadError as error:
                        if error.code in _MOVED and (races := races + 1) < _BEGIN_TRIES:
                            continue  # free now, or accepted meanwhile: decide again
                        raise
                else:
                    waiting = [entry.request_id for entry in thread.queue]
                    if request.request_id not in waiting:  # accepted after our read of the thread
                        races += 1
                        continue
                    place = waiting.index(request.request_id) + 1
                    queued = Started(decision.run_id, thread.revision, queue_position=place)
                self._announce(queued)
                if self.detached:
                    return  # `StartThreadRun`: QUEUED; the server starts it in its turn
                await until_started(store, request.thread_id, request.request_id)
                continue  # it started (attach), or ended (replay), or the thread went away
            head, state = await host.head_state(thread)
            rollback: Head | None = None
            answering = decision.answer_again
            try:
                if decision.rollback_of:
                    target = await self._rollback_target(thread, decision.rollback_of, answering=answering)
                    if target:
                        rollback, state = await host.revision_state(thread.thread_id, target)
                        head = rollback
                        decision = rolled_back_attempt(decision, rollback.checkpoint, request)
                if answering and rollback is None:
                    # The batch these answers were for is gone: another request moved the head since.
                    raise rollback_unanswerable(thread.thread_id, thread.revision)
            except ThreadError as error:
                if self._driven and record is not None:
                    await self._failed_start(thread, record.request_id, error)
                raise
            not_started = frozenset[str]()
            if store.intents and (head.checkpoint.kind not in _CLOSED or thread.recovery_pending):
                # The head may leave calls open: those its intents show never started (LIVE §5.3).
                not_started = await store.calls_not_started(thread)
                batch = thread.pending if rollback is None else rollback.checkpoint.pending
                if decision.resume is None and batch is not None and not_started:
                    # Continued without answers: the approvals that never ran are denied (LIVE §5.4).
                    denials = batch.deny_unanswered(UNANSWERED_APPROVAL_MESSAGE, not_started)
                    if denials is not None:
                        decision = dataclasses.replace(decision, resume=denials, accepted=denials)
            tools = list(head.checkpoint.client_tools if decision.head_tools else request.client_tools)
            run = RunRequest(
                decision.input,
                previous_state=state,
                deferred_resume=decision.resume,
                tool_recovery=request.tool_recovery,
                usage_limits=request.usage_limits,
                barrier=self,
                run_id=self._queued or None,
                calls_not_started=not_started,
            )
            try:
                stream = host.launcher.stream(thread.agent, run, client_tools=tools)
            except (HarnessError, Refusal) as error:
                if self._driven and record is not None:
                    await self._failed_start(thread, record.request_id, error)
                raise
            recorded = host.log_settings.enabled and host.encode is not None
            with host.launcher.admit(
                stream, cancel=self.drain, request_id=request.request_id, agent=thread.agent
            ) as begun:
                await host.launcher.prepare(stream, request_id=request.request_id)
                sent = time.monotonic()
                try:
                    taken, _record = await store.begin(
                        thread,
                        run_id=stream.run_id,
                        request_id=request.request_id,
                        ttl=host.lease_ttl,
                        record=record,
                        digest=request.digest,
                        digest_parts=request.digest_parts,
                        prompt=request.input,
                        client_tools=tools,
                        accepted=decision.accepted,
                        log=recorded,
                        spec=spec_json(request) if self.detached else None,
                        superseded=_superseded(thread) if decision.supersede else None,
                        rollback=None if rollback is None else rollback.checkpoint,
                        rolled_back=bool(decision.rollback_of),
                        consumes=_consumes(thread, rollback, decision),
                        not_started=not_started,
                    )
                except ThreadError as error:
                    if error.code in _MOVED and (races := races + 1) < _BEGIN_TRIES:
                        continue  # the thread moved between our read and our write: decide again
                    raise
                if time.monotonic() - sent > host.lease_ttl:
                    raise lease_lost(thread.thread_id)
                begun()
                self.run_id = stream.run_id
                self._recorded = recorded
                self._announce(Started(stream.run_id, taken.revision))
                if rollback is not None:
                    LOGGER.info(
                        "run_rolled_back",
                        extra={
                            "fields": {
                                **self._ids,
                                "of": decision.rollback_of,
                                "to": rollback.checkpoint.revision,
                            }
                        },
                    )
                    head = _copy_of(rollback, taken)
                holder = _Holder(
                    host,
                    taken,
                    head,
                    tools,
                    stream,
                    sent,
                    normal_resume=decision.normal_resume,
                    recorded=recorded,
                    detached=_record.detached,
                    not_started=not_started,
                    offer=self._offer,
                )
                self._holder = holder
                if self._cancel_asked:
                    holder.request_cancel()
                elif self._park_asked:
                    self.drain()
                with host.running(self):
                    async for item in holder.run():
                        yield item
                return

    async def _consumed(self, thread: ThreadRow, error: ThreadError) -> ThreadError:
        """`THREAD_NOT_SUSPENDED` with what the request that consumed the batch did (`begin.consumed_by`)."""
        answered = thread.answered
        if answered is None:
            return error
        store = self._host.store
        consumer = await store.run_record(thread.thread_id, answered.request_id)
        checkpoint = await store.checkpoint(thread.thread_id, answered.revision)
        batch = checkpoint.pending if isinstance(checkpoint, CheckpointRow) else None
        return consumed_by(error, consumer, batch, self.request.answers)

    async def _rollback_target(self, thread: ThreadRow, interrupted: str, *, answering: bool) -> int:
        """The revision a ROLLBACK of `interrupted` goes back to, or 0 (`begin.rollback_target`)."""
        store = self._host.store
        record = await store.run_record(thread.thread_id, interrupted)
        if record is None or record.begin_revision <= 0 or record.begin_revision > thread.revision:
            return 0
        after = thread.revision - record.begin_revision
        since = await store.checkpoints(thread.thread_id, limit=after, before=None) if after else []
        return rollback_target(thread, record, since, answering=answering)

    def _announce(self, started: Started) -> None:
        """Resolve `started` once: a queued request's caller decides again after it started."""
        if not self.started.done():
            self.started.set_result(started)

    async def _enqueue(self, thread: ThreadRow, decision: Enqueue) -> Started:
        """Accept the request into the busy thread's queue (LIVE §4.2) under the run ID its first
        attempt will take. The checks a start makes run now, on the head as it is (a request the
        server would refuse is refused before it waits); they run again when it starts."""
        host, request = self._host, self.request
        holder, answers = "", None
        if request.answers is None:
            head, state = await host.head_state(thread)
        else:  # a ROLLBACK answering again the batch its holder began from (LIVE §4.5)
            head, state, answers, holder = await self._answering_again(thread, request.answers)
        tools = list(head.checkpoint.client_tools if not request.client_tools else request.client_tools)
        check = RunRequest(
            request.input,
            previous_state=state,
            deferred_resume=answers,
            tool_recovery=request.tool_recovery,
            usage_limits=request.usage_limits,
        )
        host.launcher.stream(thread.agent, check, client_tools=tools)  # raises what a start would
        run_id = f"run-{uuid.uuid4().hex}"
        written, place, asked = await host.store.enqueue(
            thread,
            request_id=request.request_id,
            run_id=run_id,
            digest=request.digest,
            digest_parts=request.digest_parts,
            prompt=request.input,
            spec=spec_json(request, answers=answers),
            expected_revision=request.expected_revision,
            limit=host.max_queued_runs,
            kind=decision.kind,
            rolls_back=holder,
        )
        self.run_id = run_id
        if asked:
            host.cancel_here(thread.thread_id, asked)  # another replica's holder hears it by its note
        fields = {**self._ids, "queue_position": place, "kind": decision.kind, "interrupts": asked}
        LOGGER.info("run_queued", extra={"fields": fields})
        return Started(run_id, written.revision, queue_position=place)

    async def _answering_again(
        self, thread: ThreadRow, answers: DeferredToolResults
    ) -> tuple[Head, HarnessState, DeferredToolResume, str]:
        """What a queued ROLLBACK's answers answer (LIVE §4.5): the batch of the checkpoint the running
        request began from, with that checkpoint, its state, and the running request's ID.

        Raises:
            ThreadError: `thread_not_suspended` when that checkpoint waits on no batch, or the running
                request is an interrupting one (a ROLLBACK never discards it); `revision_conflict` when
                nothing runs any more (decide again).
        """
        lease = thread.live_lease
        if lease is None:
            raise conflict(thread)
        holder = await self._host.store.run_record(thread.thread_id, lease.request_id)
        if holder is None or holder.begin_revision <= 0 or holder.queue_kind not in (None, "enqueued"):
            raise rollback_unanswerable(thread.thread_id, thread.revision, interrupting=True)
        head, state = await self._host.revision_state(thread.thread_id, holder.begin_revision)
        pending = head.checkpoint.pending
        if pending is None:
            raise rollback_unanswerable(thread.thread_id, holder.begin_revision)
        return head, state, DeferredToolResume(pending, answers), holder.request_id

    async def _failed_start(self, thread: ThreadRow, request_id: str, error: HarnessError | Refusal) -> None:
        """A server-driven start failed the host's checks (the agent is gone, a check fails on the head it
        found): the record ends with that error and the thread is released (LIVE §3.2), so a bad request
        never blocks its thread. Losing the race to another writer leaves the record to it."""
        outcome = error if isinstance(error, HarnessError) else RecordedRefusal.of(error)
        try:
            await self._host.store.close_request(thread, request_id, status="error", outcome=outcome)
        except ThreadError as lost:
            if lost.code not in _MOVED:
                raise
            return
        LOGGER.warning("start_failed", extra={"fields": {**self._ids, "reason": error_reason(error)}})

    async def _attach(self, thread: ThreadRow, run_id: str) -> AsyncIterator[Numbered]:
        """Follow the request's running attempt from its first event (LIVE §2.5); an attempt that keeps
        no log (its holder has the log off) answers `THREAD_BUSY` as before."""
        host = self._host
        log = await host.store.logs.log(thread.thread_id, run_id)
        lease = thread.live_lease
        if log is None:
            assert lease is not None
            raise busy(thread, lease)
        self.run_id, self._recorded = run_id, True
        with host.follower_slot():
            async for event in follow_on(self._host, thread.thread_id, run_id, after=-1):
                yield event


@dataclass(eq=False)
class _Gating:
    """One dispatch write being gathered (`_Holder.gate`)."""

    calls: list[IntentCall] = dataclasses.field(default_factory=list)
    task: asyncio.Future[None] | None = None


class _Holder:
    """The run of a thread whose lease this process holds: it drives the core run, commits at each barrier
    and at the end through its `Committer`, and stops the run when its `LeaseKeeper` loses the lease."""

    def __init__(
        self,
        host: RunHost,
        thread: ThreadRow,
        head: Head,
        tools: list[ClientTool],
        stream: HarnessRunStream[Any],
        sent: float,
        *,
        normal_resume: bool,
        recorded: bool,
        detached: bool,
        not_started: frozenset[str] = frozenset(),
        offer: Callable[[Numbered], Awaitable[None]] | None = None,
    ) -> None:
        self._host = host
        self._detached = detached
        self._park_asked = False
        self._thread = thread
        self._start_head = head
        self._tools = tuple(tools)
        self._stream = stream
        self._lease = LeaseKeeper(host, thread, sent, self.request_cancel, self._ids)
        self._log = AttemptLog(
            host.log_settings,
            host.encode,
            thread_id=thread.thread_id,
            run_id=stream.run_id,
            recorded=recorded,
        )
        self._commits = Committer(host, thread, head, self._lease, self._log, self._new_intents)
        self._normal_resume = normal_resume
        self._started_at = datetime.now(UTC)
        self._first_event = True
        self._unannounced: list[ThreadCommittedEvent] = []
        """Barrier commits whose `thread_committed` waits for its `model_request_started` to be yielded."""
        self._status = "interrupted"
        """How the run ended, as its `run_finished` line says (the result's status, or `error`)."""
        self._held: tuple[StateParts, DeferredToolResume | None] | None = None
        """A response's `MID_RUN` commit held for its first dispatch (LIVE §5.2): the state and the batch
        not incorporated yet. Committed with that dispatch, or superseded by the next commit."""
        self._at_barrier: HarnessState | None = None
        """The state the latest barrier committed (its candidate moves nothing)."""
        self._answer: tuple[StateParts, DeferredToolResume | None] | None = None
        """A response that calls no tool, held for the commit that follows it: the terminal one, or an
        output validator's retry request's boundary (docs/threads.md, issue 28)."""
        self._gating: _Gating | None = None
        """The dispatch write the next gated call joins (`gate`)."""
        self._dispatched: set[str] = set()
        """The calls this attempt let start: their retained approvals are spent."""
        self._issued: set[str] = set()
        """The calls this attempt's commits issued intents for."""
        self._not_started = not_started
        """The calls Begin took as never started (LIVE §5.3)."""
        self._offer = offer if offer is not None else _nobody
        """Hands an item to the run's listener between the stream's own (a dispatch's commit)."""
        self._reason: dict[str, str] = {}

    @property
    def _ids(self) -> dict[str, str]:
        return {"thread_id": self._thread.thread_id, "run_id": self._stream.run_id}

    async def run(self) -> AsyncIterator[Numbered]:
        started = time.monotonic()
        lease = self._thread.lease
        ids = {**self._ids, "request_id": lease.request_id if lease is not None else ""}
        LOGGER.info(
            "run_started", extra={"fields": {"agent": self._thread.agent, "service": "threads", **ids}}
        )
        try:
            async for item in self._run():
                yield item
        finally:
            duration_ms = round((time.monotonic() - started) * 1000, 3)
            LOGGER.info(
                "run_finished",
                extra={"fields": {"status": self._status, "duration_ms": duration_ms, **self._reason, **ids}},
            )

    async def _run(self) -> AsyncIterator[Numbered]:
        renewer = asyncio.create_task(self._lease.keep())
        appending = self._host.appends.attempt(
            self._log, self._lease, self._thread.thread_id, self.request_cancel
        )
        number = self._log.number
        stream = self._stream
        try:
            with appending:
                try:
                    async with stream:
                        async for item in stream:
                            self._lease.check()
                            if self._lease.lost is not None:
                                continue  # cancelled: let the stream close, commit nothing
                            if isinstance(item, HarnessCheckpointEvent):
                                for committed in await self._mid_run(item.state):
                                    yield number(committed)
                            elif isinstance(item, HarnessRunResultEvent):
                                renewer.cancel()
                                async for end in self._finish(item.result):
                                    yield end
                            else:
                                if self._first_event:
                                    # `run_started`: its time is what a replay reports as the run's start.
                                    self._first_event = False
                                    self._started_at = getattr(item, "occurred_at", self._started_at)
                                yield number(item)
                except Lost as lost:
                    self._lease.lost = lost.error
                except HarnessError as error:
                    if self._status == "parked":
                        raise self._lease.lost or error from None
                    self._ended("error", error)
                    if self._lease.lost is None:
                        await self._failed(error)
                    raise
                except Exception:
                    self._status = "internal_error"
                    if self._lease.lost is None:
                        await self._release(
                            "interrupted", None, pending=None, accepted=self._commits.accepted
                        )
                    raise
                if self._lease.lost is not None:
                    if self._status != "parked":
                        self._ended("error", self._lease.lost)
                    raise self._lease.lost
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewer

    def request_cancel(self) -> None:
        """Stop the run; the core delivers it at the holder's next wait on the stream, never in a commit."""
        self._stream.cancel()

    @property
    def detached(self) -> bool:
        """Whether the server is to finish the run: detached at Begin, or made so since (a renewal said)."""
        return self._detached or self._lease.server_driven

    def park(self) -> None:
        """Park at the next model request (LIVE §3.3): commit there, give the lease up, stop; no terminal
        commit, so another replica's sweeper runs the next attempt from that checkpoint."""
        self._park_asked = True

    def _ended(self, status: str, error: HarnessError | None = None) -> None:
        self._status = status
        if error is not None:
            self._reason = {"reason": error.code.value.upper()}

    def _retained(self, remaining: DeferredToolResume | None) -> DeferredToolResume | None:
        """The accepted batch to keep with a commit: what the history has not incorporated yet.

        After a recovery run its positive approvals are dropped: a recovery never reuses one (SPEC §2.7.6),
        but for calls that never started here (LIVE §5.3), which the next attempt may still prove not started.
        """
        if remaining is not None and not self._normal_resume:
            remaining = remaining.without_positive_approvals(
                keep=() if not self._host.store.intents else self._not_started - self._dispatched
            )
        return remaining

    async def barrier(self, state: HarnessState, pending_input: DeferredToolResume | None) -> None:
        """Before a model request (THREADS §4 step 2, LIVE §5.1): its tool results and input are
        committed before it is sent. A lost lease cancels the run (`LeaseKeeper.lose`), so the request never goes."""
        if self._lease.check() is not None or self._lease.lost is not None:
            return
        self._held = self._answer = None  # this state holds the held response too
        self._at_barrier = state
        with contextlib.suppress(Lost):
            if self._park_asked:
                await self._park(state_parts(state), pending_input)
                return
            if await self._mid_run_commit(state_parts(state), pending_input):
                self._unannounced.append(self._committed("mid_run"))

    def _new_intents(self) -> list[IntentCall]:
        """The side-effecting calls of the latest response that no commit of this attempt issued yet:
        the commit that calls this is the first to hold that response (LIVE §5.2)."""
        calls = [
            IntentCall(call.tool_call_id, call.tool_name, retryable)
            for call, retryable in self._stream.side_effect_calls()
            if call.tool_call_id not in self._issued
        ]
        self._issued.update(call.call_id for call in calls)
        return calls

    async def gate(self, call: IntentCall) -> None:
        """Before a side-effecting tool starts (LIVE §5.2): its intent dispatched, durably, or the tool
        does not start. Calls gated together (one tools step) share one write: the first yields the loop
        once before writing, a call gated after a write started waits for the next. The holder also
        records the call, so that its retained approval is dropped (`_retained`)."""
        self._dispatched.add(call.call_id)
        if not self._host.store.intents:
            return
        batch = self._gating
        if batch is None:
            batch = self._gating = _Gating()
            batch.task = asyncio.ensure_future(self._dispatch(batch))
        batch.calls.append(call)
        assert batch.task is not None
        await asyncio.shield(batch.task)
        if (lost := self._lease.check()) is not None:
            raise Lost(lost)  # past its own lease: another replica may have taken the thread over

    async def _dispatch(self, batch: _Gating) -> None:
        """One dispatch write for the calls gated by now; retried while the store is down until the lease's
        own expiry (the write is idempotent, so an unknown outcome is settled by writing it again)."""
        await asyncio.sleep(0)  # the calls started together join this write
        self._gating = None
        held, self._held = self._held, None
        if held is not None:  # the response's own commit, with its first dispatch
            parts, pending = held
            accepted = self._retained(pending)
            checkpoint = self._checkpoint("mid_run", parts, pending=None, remaining=accepted)
            await self._commits.commit(checkpoint, accepted=accepted, dispatched=batch.calls)
            # Announced at once, after the response's tool calls (everything yielded before was offered:
            # the run is waiting on its stream, inside the tool's gate).
            await self._offer(self._log.number(self._committed("mid_run")))
            return
        store, lease = self._host.store, self._lease
        delay = 0.05
        while True:
            if (lost := lease.check()) is not None:
                raise Lost(lost)
            try:
                await store.dispatch(
                    self._thread.thread_id,
                    fence=lease.fence,
                    run_id=self._stream.run_id,
                    revision=self._commits.revision,
                    calls=batch.calls,
                )
                return
            except ThreadError as error:
                if error.code == ErrorCode.LEASE_LOST:
                    lease.lose(error)
                    raise Lost(error) from None
                if error.code != ErrorCode.STORE_UNAVAILABLE or time.monotonic() + delay > lease.expiry:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _park(self, parts: StateParts, pending_input: DeferredToolResume | None) -> None:
        """The barrier commit of a parked attempt: what moved since the head, the lease ending now; then
        the run stops with the core's cancellation, holding nothing more to write."""
        moved = parts != self._commits.base.parts
        accepted = self._retained(pending_input)
        checkpoint = self._checkpoint("mid_run", parts, pending=None, remaining=accepted) if moved else None
        await self._commits.commit(checkpoint, accepted=accepted, park=self._request_id)
        self._status = "parked"
        LOGGER.info("run_parked", extra={"fields": {**self._ids, "revision": self._commits.revision}})
        self._lease.lose(_parked(self._thread.thread_id, self._stream.run_id, self._request_id))

    async def _mid_run(self, state: HarnessState) -> list[ThreadCommittedEvent]:
        """A candidate: announce the commits made since (a barrier's, a dispatch's), and commit what moved
        (a response, a hook's change). A response whose calls a gate will cover is held for the first
        of them to dispatch (LIVE §5.2): one transaction for both, none more in a normal turn. A response
        that calls no tool is held for the commit that follows it (nothing runs in between that a
        crash could leave half done): the terminal commit holds the answer."""
        announced, self._unannounced = self._unannounced, []
        if state is self._at_barrier:  # the candidate of the barrier this holder just committed
            return announced
        parts, pending = state_parts(state), self._stream.pending_deferred_input
        moved = parts != self._commits.base.parts
        if self._host.store.intents and moved and self._calls_to_issue():
            self._held = (parts, pending)
            return announced
        self._held = self._answer = None
        if moved and self._stream.answered():
            self._answer = (parts, pending)
            return announced
        if await self._mid_run_commit(parts, pending):
            announced.append(self._committed("mid_run"))
        return announced

    def _calls_to_issue(self) -> bool:
        """Whether the latest response has side-effecting calls no commit of this attempt issued yet."""
        return any(call.tool_call_id not in self._issued for call, _ in self._stream.side_effect_calls())

    async def _mid_run_commit(self, parts: StateParts, pending_input: DeferredToolResume | None) -> bool:
        """Commit a `MID_RUN` checkpoint of `parts`, unless nothing moved since the head."""
        if parts == self._commits.base.parts:
            return False
        accepted = self._retained(pending_input)
        await self._commits.commit(
            self._checkpoint("mid_run", parts, pending=None, remaining=accepted), accepted=accepted
        )
        return True

    @property
    def _request_id(self) -> str:
        lease = self._thread.lease  # taken at Begin for this request
        assert lease is not None
        return lease.request_id

    def _checkpoint(
        self,
        kind: CheckpointKind,
        parts: StateParts,
        *,
        pending: DeferredToolRequests | None,
        remaining: DeferredToolResume | None,
    ) -> NewCheckpoint:
        """A checkpoint of this run's state, made with its client tools."""
        return NewCheckpoint(
            kind,
            parts,
            pending=pending,
            remaining=remaining,
            client_tools=self._tools,
            run_id=self._stream.run_id,
            request_id=self._request_id,
        )

    def _committed(self, kind: CheckpointKind) -> ThreadCommittedEvent:
        return ThreadCommittedEvent(
            thread_id=self._thread.thread_id,
            run_id=self._stream.run_id,
            revision=self._commits.revision,
            kind=kind,
            replayed=False,
            occurred_at=datetime.now(UTC),
        )

    async def _finish(self, result: HarnessRunResult[Any]) -> AsyncIterator[Numbered]:
        self._held = None  # the terminal commit holds it
        state = result.state
        if state is None:
            await self._commit_answer()
        self._answer = None
        accepted = self._retained(self._stream.pending_deferred_input)
        pending = result.deferred
        kind = _KIND[result.status]
        outcome = ThreadRunOutcome.of(
            result,
            request_id=self._request_id,
            revision=self._commits.revision + (1 if state is not None else 0),
            committed=state is not None,
            started_at=self._started_at,
        )
        checkpoint = (
            None
            if state is None
            else self._checkpoint(kind, state_parts(state), pending=pending, remaining=accepted)
        )
        finish = Finish(self._request_id, result.status, outcome, pending, accepted)
        # Numbered before the commit, which writes the `thread_committed` into the log (LIVE §2.1); the
        # commit event and the result share the outcome's time, live and in a replay alike.
        ending = [self._log.number(committed) for committed in self._unannounced]
        self._unannounced = []
        if state is not None:
            committed = dataclasses.replace(
                self._committed(kind), revision=outcome.revision, occurred_at=outcome.ended_at
            )
            ending.append(self._log.number(committed))
        ending.append(self._log.number(outcome))
        await self._commits.commit(
            checkpoint, accepted=accepted, finish=finish, result_sequence=ending[-1].sequence
        )
        self._ended(result.status)
        if state is not None:
            self._host.remember(self._thread, self._commits.base, state)
        for event in ending:
            yield event

    async def _failed(self, error: HarnessError) -> None:
        """The core raised after the run started (THREADS §4 step 3)."""
        if error.code == ErrorCode.DEFERRED_SURFACE_MISMATCH:
            # Nothing ran. A normal resume's answers are dropped and the thread waits on its batch again.
            if self._normal_resume:
                await self._release(
                    "error", error, pending=self._start_head.checkpoint.pending, accepted=None
                )
            else:
                await self._release("error", error, pending=None, accepted=self._commits.accepted)
            return
        if (
            isinstance(error, RunCleanupError)
            and error.outcome is not None
            and error.outcome.state is not None
        ):
            accepted = self._retained(self._stream.pending_deferred_input)
            checkpoint = self._checkpoint(
                "failed", state_parts(error.outcome.state), pending=None, remaining=accepted
            )
            finish = Finish(self._request_id, "error", error, None, accepted)
            self._answer = None  # the failed state holds it
            with contextlib.suppress(Lost):
                await self._commits.commit(checkpoint, accepted=accepted, finish=finish)
            return
        await self._release("interrupted", None, pending=None, accepted=self._commits.accepted)

    async def _release(
        self,
        status: RunRowStatus,
        outcome: HarnessError | None,
        *,
        pending: DeferredToolRequests | None,
        accepted: DeferredToolResume | None,
    ) -> None:
        """Release the lease without a checkpoint, closing the record as `status` (a held answer is
        committed first, as it would have been without the hold)."""
        with contextlib.suppress(Lost):
            if self._answer is not None and accepted is self._commits.accepted:
                await self._commit_answer()
                accepted = self._commits.accepted
            finish = Finish(self._request_id, status, outcome, pending, accepted)
            await self._commits.commit(None, accepted=accepted, finish=finish)

    async def _commit_answer(self) -> None:
        """Commit a held answer on its own: the run ends without a checkpoint that holds it."""
        answer, self._answer = self._answer, None
        if answer is not None:
            await self._mid_run_commit(*answer)


async def _nobody(item: Numbered) -> None:
    """No listener to hand an item to."""


def _consumes(thread: ThreadRow, rollback: Head | None, decision: RunAttempt) -> AnsweredHow | None:
    """How a Begin consumes the batch of the suspended head it begins from (LIVE §5.5), if it does."""
    pending = thread.pending if rollback is None else rollback.checkpoint.pending
    if pending is None:
        return None
    return "answers" if decision.normal_resume else "prompt"


def _parked(thread_id: str, run_id: str, request_id: str) -> ThreadError:
    """What a listener of a parked attempt gets: the attempt is over, the request goes on elsewhere."""
    return ThreadError(
        f"Attempt {run_id} of request {request_id!r} was parked by its server's shutdown; its next "
        "attempt runs on another replica (join the request to follow it).",
        code=ErrorCode.RUN_ATTEMPT_LOST,
        details={
            "thread_id": thread_id,
            "run_id": run_id,
            "request_id": request_id,
            "request_status": "running",
        },
    )


def _superseded(thread: ThreadRow) -> ThreadRunOutcome:
    """What an INTERRUPT's Begin closes the stopped lease's request with (LIVE §4.1)."""
    stopped = thread.lease
    assert stopped is not None
    return ThreadRunOutcome.cancelled(
        thread_id=thread.thread_id,
        run_id=stopped.run_id,
        request_id=stopped.request_id,
        revision=thread.revision,
        at=thread.now,
    )


def _copy_of(source: Head, thread: ThreadRow) -> Head:
    """The `rolled_back` checkpoint a ROLLBACK's Begin wrote of `source` (its data by reference)."""
    copy = dataclasses.replace(
        source.checkpoint,
        revision=thread.revision,
        kind="rolled_back",
        run_id="",
        request_id="",
        create_time=thread.update_time,
    )
    return Head(copy, source.parts, source.history, source.rest)
