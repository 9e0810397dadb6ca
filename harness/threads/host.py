"""`DurableHost`: the durable Host of SPEC §1.15, kept by the server for hosts that want it (THREADS).

It owns every thread rule that is not a single run's: creating and importing threads, reading them,
forking, rolling back, deleting, cancelling, and starting runs (`harness.threads.run`). States come and go
in the core's own forms; the gRPC mapping lives in the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from typing import Any

from .._loading import load_state
from .._resume_checks import check_pending, check_remaining
from ..client_tools import ClientTool
from ..deferred import DeferredToolRequests, DeferredToolResume, stored_resume
from ..errors import ErrorCode, InputError, StateError, ThreadError, error_reason
from ..state import HarnessState
from .appends import Appends
from .cache import CachedHead, HeadCache
from .codec import state_parts
from .detached import next_attempt
from .eventlog import Encoder, LogSettings, Numbered
from .join import ChangeKind, attempt_of, follow_on, until_started, watch
from .outcome import ThreadRunOutcome
from .pages import PageTokens
from .records import CheckpointKind, CheckpointRow, Head, RunRow, RunRowStatus, ThreadRow, ThreadStatus
from .request import Launcher, ThreadRunRequest
from .run import Started, ThreadRun
from .store import NewCheckpoint, ThreadStore, busy, conflict, not_found

LOGGER = logging.getLogger("threadline.threads")

__all__ = ("MAX_LABEL_FILTERS", "DurableHost", "check_labels", "check_storable")

MAX_LABELS = 32
MAX_LABEL_FILTERS = MAX_LABELS
"""`ListThreads` label filters: more keys than a thread can have labels would never match."""
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
_OFF_LOOP_BYTES = 256 * 1024
"""A head larger than this is validated in a worker thread, so other callers keep being served."""
_CAS_TRIES = 4
_SWEEP_BATCH = 32
"""Threads a sweeper pass reads at most (LIVE §3.2)."""


def check_storable(value: str, *, field: str) -> str:
    """Text the store keeps or looks up (an ID, a label, a filter) holds no NUL: PostgreSQL text cannot,
    and a request must not fail differently on each store, nor make its statement fail.

    Raises:
        InputError: `input_invalid` at `field`.
    """
    if "\x00" in value:
        raise InputError(
            f"{field} must not contain a NUL character.",
            code=ErrorCode.INPUT_INVALID,
            details={"field": field},
        )
    return value


def check_labels(labels: Mapping[str, str], *, field: str = "labels") -> dict[str, str]:
    """THREADS §2: at most 32; keys `^[a-z][a-z0-9_.-]{0,62}$`; values at most 256 characters (no NUL)."""
    if len(labels) > MAX_LABELS:
        raise InputError(
            f"A thread has at most {MAX_LABELS} labels.",
            code=ErrorCode.INPUT_INVALID,
            details={"field": field, "count": len(labels)},
        )
    for key, value in labels.items():
        if not _LABEL_KEY.fullmatch(key):
            raise InputError(
                "A label key must match ^[a-z][a-z0-9_.-]{0,62}$.",
                code=ErrorCode.INPUT_INVALID,
                details={"field": field, "key": key[:64]},
            )
        if len(value) > 256 or "\x00" in value:
            raise InputError(
                "A label value has at most 256 characters, none of them NUL.",
                code=ErrorCode.INPUT_INVALID,
                details={"field": field, "key": key},
            )
    return dict(labels)


class DurableHost:
    """Threads on `store`, runs through `launcher`, leases of `lease_ttl` seconds, a head cache."""

    def __init__(
        self,
        store: ThreadStore,
        launcher: Launcher,
        *,
        lease_ttl: float,
        cache_bytes: int = 256 * 1024 * 1024,
        encode: Encoder | None = None,
        log_settings: LogSettings | None = None,
        max_run_attempts: int = 3,
        max_queued_runs: int = 16,
    ) -> None:
        self.store = store
        self.launcher = launcher
        self.lease_ttl = lease_ttl
        self.max_run_attempts = max_run_attempts
        """A detached request closes INTERRUPTED once this many attempts ended by a lost server."""
        self.max_queued_runs = max_queued_runs
        """How many requests may wait in one thread's queue; one more is refused `THREAD_QUEUE_FULL`."""
        self._sweep_now = asyncio.Event()
        self.encode = encode
        """The wire form of every event a run streams (the server's `RunEvent` bytes); with none, events
        are not encoded and no event log is kept."""
        self.log_settings = log_settings or LogSettings()
        self.follower_slot: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
        """Taken by an attached retry while it follows (a server bounds them with `--max-followers`)."""
        self.on_log: Callable[[int, int], None] | None = None
        """Told of each event log write: its bytes and the events left out since (a server counts them)."""
        self.appends = Appends(store.logs)
        """The grouped appends of the logs of the attempts this host runs."""
        self.cache = HeadCache(cache_bytes)
        self.pages = PageTokens(store.database.page_key)
        """The page tokens of this store's listings (every replica's host makes the same)."""
        self.on_commit: Callable[[], None] | None = None
        """Told of every checkpoint a run commits (a server counts them)."""
        self._running: dict[tuple[str, str], ThreadRun] = {}
        self._runs: set[ThreadRun] = set()
        store.listen_for_cancels(self.cancel_here, self.sweep_soon)
        store.on_hand_off = self._handed
        self._hand_offs: set[asyncio.Task[None]] = set()

    # -- reading ------------------------------------------------------------------------------------

    async def thread(self, thread_id: str) -> ThreadRow:
        found = await self.store.thread(thread_id)
        if found is None:
            raise not_found(thread_id)
        return found

    async def thread_and_record(self, thread_id: str, request_id: str) -> tuple[ThreadRow, RunRow | None]:
        """The thread (`NOT_FOUND` without it) and the record of `request_id` on it, read together."""
        found, record = await self.store.thread_and_record(thread_id, request_id)
        if found is None:
            raise not_found(thread_id)
        return found, record

    async def head_state(self, thread: ThreadRow) -> tuple[Head, HarnessState]:
        """The thread's head and its validated state: from the cache, else loaded with `load_state`."""
        key = (thread.thread_id, thread.incarnation, thread.revision)
        cached = self.cache.get(key)
        if cached is not None:
            return cached.head, cached.state
        head = await self.store.head(thread)
        state = await _load(head.parts.json())
        self.cache.put(key, CachedHead(head, state))
        return head, state

    async def revision_state(self, thread_id: str, revision: int) -> tuple[Head, HarnessState]:
        """A committed checkpoint with its validated state (loaded as `head_state` loads a head)."""
        found = await self._stored(thread_id, revision)
        return found, await _load(found.parts.json())

    def remember(self, thread: ThreadRow, head: Head, state: HarnessState) -> None:
        """Cache a head a run just committed, so the thread's next turn does not reload it."""
        self.cache.put(
            (thread.thread_id, thread.incarnation, head.checkpoint.revision), CachedHead(head, state)
        )

    async def checkpoint(self, thread_id: str, revision: int) -> tuple[CheckpointRow, HarnessState]:
        found = await self._stored(thread_id, revision)
        return found.checkpoint, await _load(found.parts.json())

    async def _stored(self, thread_id: str, revision: int) -> Head:
        """A checkpoint with its state's parts, or THREAD_NOT_FOUND / CHECKPOINT_NOT_FOUND."""
        found = await self.store.checkpoint(thread_id, revision, with_state=True)
        if not isinstance(found, Head):
            await self.thread(thread_id)  # THREAD_NOT_FOUND first
            raise _no_checkpoint(thread_id, revision)
        return found

    async def head_checkpoint(self, thread: ThreadRow) -> CheckpointRow:
        found = await self.store.checkpoint(thread.thread_id, thread.revision)
        if not isinstance(found, CheckpointRow):
            raise not_found(thread.thread_id)
        return found

    async def checkpoints(
        self, thread_id: str, *, limit: int, page_token: str = ""
    ) -> tuple[list[CheckpointRow], str]:
        """A page of at most `limit` of the thread's checkpoints, newest first, and the next page's token
        ("" after the last page).

        Raises:
            InputError: `input_invalid` at `page_token` for a token not of this thread's listing.
            ThreadError: `thread_not_found`.
        """
        before = self.pages.checkpoints_before(page_token, thread_id=thread_id) if page_token else None
        rows = await self.store.checkpoints(thread_id, limit=limit + 1, before=before)
        if not rows:
            await self.thread(thread_id)
        if len(rows) <= limit:
            return rows, ""
        return rows[:limit], self.pages.checkpoints_token(rows[limit - 1].revision, thread_id=thread_id)

    async def threads(
        self,
        *,
        limit: int,
        labels: Mapping[str, str],
        status: ThreadStatus | None,
        page_token: str = "",
    ) -> tuple[list[tuple[ThreadRow, CheckpointRow]], str]:
        """A page of at most `limit` threads having every label of `labels` (at most `MAX_LABEL_FILTERS`),
        each with its head checkpoint, and the next page's token ("" after the last page).

        Raises:
            InputError: `input_invalid` at `labels` for too many filters, at `page_token` for a token not
                of this listing (the same filter and status).
        """
        if len(labels) > MAX_LABEL_FILTERS:
            # A thread has at most 32 labels: more filters can never match, and would only grow the query.
            raise InputError(
                f"A label filter has at most {MAX_LABEL_FILTERS} keys.",
                code=ErrorCode.INPUT_INVALID,
                details={"field": "labels", "count": len(labels), "limit": MAX_LABEL_FILTERS},
            )
        after = self.pages.threads_after(page_token, labels=labels, status=status) if page_token else None
        rows = await self.store.threads(limit=limit + 1, labels_filter=labels, status=status, after=after)
        if len(rows) <= limit:
            return rows, ""
        last, _head = rows[limit - 1]
        token = self.pages.threads_token((last.update_time, last.thread_id), labels=labels, status=status)
        return rows[:limit], token

    # -- creating -----------------------------------------------------------------------------------

    async def create(
        self,
        *,
        thread_id: str | None,
        agent: str,
        labels: Mapping[str, str],
        state: HarnessState | None,
        pending: DeferredToolRequests | None,
        accepted: DeferredToolResume | None,
        client_tools: Sequence[ClientTool],
    ) -> ThreadRow:
        """A new thread: `HarnessState.new`, or an imported state with its pending or accepted batch."""
        labels = check_labels(labels)
        if pending is not None and accepted is not None:
            raise InputError(
                "Give the batch the state is suspended on (`pending`) or an accepted resume, not both.",
                code=ErrorCode.INPUT_INVALID,
                details={"field": "accepted"},
            )
        if state is None:
            if pending is not None or accepted is not None:
                raise InputError(
                    "`pending` and `accepted` need the `state` they belong to.",
                    code=ErrorCode.INPUT_INVALID,
                    details={"field": "pending" if pending is not None else "accepted"},
                )
            state = HarnessState.new(thread_id=thread_id or None)
            kind: CheckpointKind = "created"
        else:
            if thread_id and thread_id != state.thread_id:
                raise StateError(
                    "thread_id must equal state.thread_id.",
                    code=ErrorCode.STATE_INVALID,
                    details={"thread_id": thread_id[:256], "state_thread_id": state.thread_id},
                )
            kind = "imported"
        remaining: DeferredToolResume | None = None
        if pending is not None:
            check_pending(pending, await _messages(state))
        if accepted is not None:
            resume = DeferredToolResume(*_parts(accepted), recovery=True)
            kept = check_remaining(resume, await _messages(state))
            remaining = None if kept is None else DeferredToolResume(*_parts(kept))
        created, head = await self.store.create(
            state.thread_id,
            agent=agent,
            thread_labels=labels,
            checkpoint=NewCheckpoint(
                kind,
                state_parts(state),
                pending=pending,
                remaining=remaining,
                client_tools=tuple(client_tools),
            ),
            accepted=remaining,
        )
        if kind == "created":  # the server made this state itself: its first turn need not load it
            self.remember(created, head, state)
        return created

    async def fork(
        self, thread_id: str, *, revision: int, new_thread_id: str | None, labels: Mapping[str, str]
    ) -> ThreadRow:
        """A new thread whose first checkpoint is the core's `fork()` of a committed checkpoint."""
        labels = check_labels(labels)
        source = await self.thread(thread_id)
        if new_thread_id == thread_id:
            raise StateError(
                "A fork needs a thread ID of its own.",
                code=ErrorCode.FORK_THREAD_ID_CONFLICT,
                details={"thread_id": thread_id},
            )
        found = await self._stored(thread_id, revision or source.revision)
        row = found.checkpoint
        forked = (await _load(found.parts.json())).fork(thread_id=new_thread_id or None)
        created, _head = await self.store.create(
            forked.thread_id,
            agent=source.agent,
            thread_labels=labels,
            checkpoint=NewCheckpoint(
                "forked",
                state_parts(forked),
                pending=row.pending,
                remaining=row.remaining,
                client_tools=row.client_tools,
            ),
            accepted=row.remaining,
            base=found,
        )
        return created

    async def rollback(self, thread_id: str, *, revision: int, expected_revision: int) -> ThreadRow:
        for attempt in range(_CAS_TRIES):
            thread = await self.thread(thread_id)
            self._check_free(thread, expected_revision)
            found = await self.store.checkpoint(thread_id, revision)  # copied by reference: no data read
            if not isinstance(found, CheckpointRow):
                raise _no_checkpoint(thread_id, revision)
            try:
                return await self.store.rollback(thread, found)
            except ThreadError as error:
                if not self._retry(error, attempt):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def delete(self, thread_id: str, *, expected_revision: int) -> None:
        for attempt in range(_CAS_TRIES):
            thread = await self.thread(thread_id)
            self._check_free(thread, expected_revision)
            try:
                await self.store.delete(thread)
                return
            except ThreadError as error:
                if not self._retry(error, attempt):
                    raise

    @staticmethod
    def _check_free(thread: ThreadRow, expected_revision: int) -> None:
        lease = thread.live_lease
        if lease is not None:
            raise busy(thread, lease)
        if expected_revision and expected_revision != thread.revision:
            raise conflict(thread)

    @staticmethod
    def _retry(error: ThreadError, attempt: int) -> bool:
        """Whether a failed compare-and-set is worth deciding again (the thread moved meanwhile)."""
        return error.code == ErrorCode.REVISION_CONFLICT and attempt + 1 < _CAS_TRIES

    # -- runs ---------------------------------------------------------------------------------------

    def run(
        self,
        request: ThreadRunRequest,
        *,
        detached: bool = False,
        driven: bool = False,
        queued: str = "",
        read: tuple[ThreadRow, RunRow] | None = None,
        outcome_only: bool = False,
    ) -> ThreadRun:
        """Start `request` in a task of its own; follow it with `ThreadRun.items()`. `detached`: the
        server drives it (`StartThreadRun`); `driven`: the server itself started it (a next attempt);
        `queued`: it is its queue's head, accepted under that run ID; `read`: the thread and the
        request's record, just read; `outcome_only`: the caller follows only the outcome (`RunThread`),
        so no other event is handed to it."""
        run = ThreadRun(
            self,
            request,
            detached=detached,
            driven=driven,
            queued=queued,
            read=read,
            outcome_only=outcome_only,
        )
        self._runs.add(run)
        run.task.add_done_callback(lambda _task: self._runs.discard(run))
        return run

    async def start(self, request: ThreadRunRequest) -> Started:
        """`StartThreadRun` (LIVE §3.1): run `request` detached; answer once Begin committed (or with the
        request's replay, or its running attempt). The run goes on when the caller leaves.

        Raises:
            What `RunThread` raises before its run starts.
        """
        run = self.run(request, detached=True)
        run.detach()
        return await asyncio.shield(run.started)

    def sweep_soon(self) -> None:
        """A request here found a detached request's next attempt due, or another replica parked one
        (PostgreSQL's note): the sweeper starts it now."""
        self._sweep_now.set()

    @contextlib.contextmanager
    def running(self, run: ThreadRun) -> Iterator[None]:
        """Register `run` under its ids while it holds its lease, for `cancel`."""
        key = (run.request.thread_id, run.run_id)
        self._running[key] = run
        try:
            yield
        finally:
            self._running.pop(key, None)

    async def cancel(self, thread_id: str, run_id: str = "", *, request_id: str = "") -> RunRowStatus:
        """THREADS §3 `CancelThreadRun`: ask the holder, or close a run whose holder is gone; the run
        named by its ID or by its request's (that request's latest attempt).

        Raises:
            ThreadError: `thread_not_found`, `run_not_found`; InputError: ids naming two requests.
        """
        thread = await self.thread(thread_id)
        if request_id:
            run_id, _request_id = await attempt_of(self.store, thread, run_id=run_id, request_id=request_id)
        outcome = ThreadRunOutcome.cancelled(
            thread_id=thread_id,
            run_id=run_id,
            request_id=thread.lease.request_id if thread.lease is not None else "",
            revision=thread.revision,
            at=thread.now,
        )
        status, live = await self.store.cancel(thread_id, run_id, outcome=outcome)
        if live:
            self.cancel_here(thread_id, run_id)
        return status

    def cancel_here(self, thread_id: str, run_id: str) -> None:
        """Cancel `run_id` if this process holds it (asked here, or by another replica)."""
        local = self._running.get((thread_id, run_id))
        if local is not None:
            local.cancel()

    # -- following --------------------------------------------------------------------------------------

    async def join(
        self, thread_id: str, *, run_id: str = "", request_id: str = "", after: int = -1
    ) -> tuple[str, str, AsyncGenerator[Numbered, None]]:
        """`JoinThreadRun` (LIVE §2.4): the attempt followed (`run_id`, `request_id`) and its events
        after `after`. The events raise how the attempt ended (`follow`).

        Raises:
            ThreadError: `thread_not_found`, `run_not_found`; InputError: ids naming two requests.
        """
        thread = await self.thread(thread_id)
        run_id, request_id = await attempt_of(self.store, thread, run_id=run_id, request_id=request_id)
        events = follow_on(self, thread_id, run_id, after=after)
        if any(queued.run_id == run_id for queued in thread.queue):
            events = _once_started(self.store, thread_id, request_id, events)
        return run_id, request_id, events

    def watch(self, thread_id: str) -> AsyncGenerator[tuple[ThreadRow, tuple[ChangeKind, ...]], None]:
        """`WatchThread` (LIVE §2.7): the thread's snapshot, then one per change."""
        return watch(self.store, thread_id)

    async def sweep(self, interval: float) -> None:
        """Every `interval` seconds until cancelled, and at once when asked (`sweep_soon`): take up the
        server's own work that is due (LIVE §3.2), delete event logs past their retention and mark lost
        the open logs whose holder is gone (LIVE §2.3), so a log nobody follows or takes over expires too."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sweep_now.wait(), interval)
            self._sweep_now.clear()
            try:
                await self._take_up_due()
                await self.store.logs.sweep(retention=self.log_settings.retention_s, grace=self.lease_ttl / 3)
            except ThreadError:
                pass  # the store is down: the next pass tries again
            except Exception as error:  # a bug: logged, and the sweeper goes on
                LOGGER.error("sweep_failed", exc_info=error)

    async def _take_up_due(self) -> None:
        """Claim each due thread (so other replicas skip it), then do its work; a replica with no room
        for a run (draining, or at its run limit) claims nothing."""
        if not self.launcher.has_room():
            return
        for thread_id, seen in await self.store.due(_SWEEP_BATCH):
            if not self.launcher.has_room():
                return
            claim = await self.store.move_sweep(thread_id, seen=seen, after=self.lease_ttl)
            if claim is not None:
                await self._take_up(thread_id, claim)

    async def _take_up(self, thread_id: str, claim: float) -> None:
        """The claimed thread's due work: (a) a detached request's next attempt, (c) closing a run whose
        cancel was asked of a holder now gone, (b) starting its queue's head; else none is left (or not
        yet: a lease renewed)."""
        thread, record, head = await self.store.due_work(thread_id)
        if thread is None:
            return
        live = thread.live_lease
        if live is not None:  # renewed by a holder that did not move the work with its lease
            await self.store.move_sweep(thread_id, seen=claim, after=live.expires - thread.now)
            return
        stopped = thread.lease
        if stopped is not None and record is not None and record.status == "running":
            if thread.cancel_requested:
                await self.cancel(thread_id, stopped.run_id)  # closes it CANCELLED, releasing the thread
                return
            if record.detached:
                await self._start_driven(thread, claim, record, queued="")
                return
        # The head of the queue (`head` is read only when there is one), superseding an attached
        # request whose holder is gone (LIVE §4.2).
        if (
            head is not None
            and head.status == "queued"
            and (thread.pending is None or thread.queue[0].kind != "enqueued")
        ):
            await self._start_driven(thread, claim, head, queued=head.run_id)
            return
        await self.store.move_sweep(thread_id, seen=claim, after=None)

    async def _start_driven(self, thread: ThreadRow, claim: float, record: RunRow, *, queued: str) -> None:
        """Start the server-driven `record` of `thread` (both just read): its next attempt, or
        (`queued`) its first from the queue. A start refused (no room after all, a race) leaves the work
        due at the next pass; a failed start's close has cleared it already."""
        thread_id = thread.thread_id
        run = self.run(
            next_attempt(thread_id, record), detached=True, driven=True, queued=queued, read=(thread, record)
        )
        run.detach()
        await asyncio.wait([run.started])
        if not run.started.cancelled() and (error := run.started.exception()) is not None:
            LOGGER.info(
                "sweep_start_refused",
                extra={"fields": {**_request_ids(thread_id, record), "reason": error_reason(error)}},
            )
            await self.store.move_sweep(thread_id, seen=claim, after=0.0)

    def _handed(self, thread_id: str, claim: float) -> None:
        """A run here ended and kept its queue's head for this replica (LIVE §4.2 hand-off): start it
        now, as a sweeper would once it claimed it."""
        task = asyncio.ensure_future(self._hand_off(thread_id, claim))
        self._hand_offs.add(task)
        task.add_done_callback(self._hand_offs.discard)

    async def _hand_off(self, thread_id: str, claim: float) -> None:
        try:
            await self._take_up(thread_id, claim)
        except ThreadError:
            self.sweep_soon()  # the store is down: the sweeper retries (the claim lapses at its TTL)
        except Exception as error:  # a bug: logged; the head is due for any replica at the claim's end
            LOGGER.error("hand_off_failed", exc_info=error, extra={"fields": {"thread_id": thread_id}})

    async def drain(self, grace: float) -> None:
        """Wait up to `grace` seconds for the runs to end (the caller cancelled their streams)."""
        tasks = [run.task for run in self._runs]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)


async def _once_started(
    store: ThreadStore, thread_id: str, request_id: str, events: AsyncGenerator[Numbered, None]
) -> AsyncGenerator[Numbered, None]:
    """A join of a queued request: its first attempt's events, once it left the queue (LIVE §4.2)."""
    async with contextlib.aclosing(events):
        await until_started(store, thread_id, request_id)
        async for event in events:
            yield event


def _request_ids(thread_id: str, record: RunRow) -> dict[str, str]:
    return {"thread_id": thread_id, "run_id": record.run_id, "request_id": record.request_id}


def _parts(resume: DeferredToolResume) -> tuple[Any, Any]:
    requests, results, _recovery = stored_resume(resume)
    return requests, results


def _no_checkpoint(thread_id: str, revision: int) -> ThreadError:
    return ThreadError(
        f"Thread {thread_id!r} has no checkpoint {revision}.",
        code=ErrorCode.CHECKPOINT_NOT_FOUND,
        details={"thread_id": thread_id, "revision": revision},
    )


async def _messages(state: HarnessState) -> list[Any]:
    """The state's messages, decoded off the event loop for a large history (only a batch's checks need
    them: an import without one is stored as the bytes it came with)."""
    if len(state.message_history_json()) > _OFF_LOOP_BYTES:
        return await asyncio.to_thread(lambda: list(state.message_history))
    return list(state.message_history)


async def _load(data: bytes) -> HarnessState:
    """`load_state`, off the event loop for a large head."""
    if len(data) > _OFF_LOOP_BYTES:
        return await asyncio.to_thread(load_state, data)
    return load_state(data)
