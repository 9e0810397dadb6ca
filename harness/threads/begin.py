"""Begin's decision (THREADS §4 step 1): what a request does, from the thread and its run record alone.

Replay a finished request, attach to one that is running now (LIVE §2.5), refuse one (a reused ID, an interrupted request, a busy thread, a stale
revision, answers with nothing to answer), or run an attempt: the first of a new request, or the next
attempt of one whose earlier attempt did not finish (which then recovers from the head). Pure: no store,
no clock but the row's own `now`, so each case is a row of a table (`tests/test_thread_begin.py`);
`ThreadRun` reads the records, asks `decide`, and carries the decision out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import UserContent
from pydantic_ai.tools import DeferredToolResults

from ..deferred import DeferredToolRequests, DeferredToolResume, stored_resume
from ..errors import ErrorCode, HarnessError, RecordedRefusal, ThreadError
from .digest import digest_differences
from .outcome import ThreadRunOutcome
from .records import THREAD_STATUS_NAMES, CheckpointRow, QueuedKind, RunRow, ThreadRow
from .request import ThreadRunRequest
from .store import busy, conflict, interrupted, queue_busy

__all__ = (
    "Attach",
    "Cancelled",
    "Decision",
    "Enqueue",
    "GiveUp",
    "Queued",
    "Refuse",
    "Replay",
    "RunAttempt",
    "consumed_by",
    "decide",
    "not_suspended",
    "reused",
    "rollback_target",
    "rollback_unanswerable",
    "rolled_back_attempt",
)


@dataclass(frozen=True, slots=True)
class Replay:
    """The request finished before: its stored outcome is answered again."""

    outcome: ThreadRunOutcome


@dataclass(frozen=True, slots=True)
class Refuse:
    """The request is refused with `error`; nothing is written."""

    error: HarnessError | RecordedRefusal
    sweep: bool = False
    """The thread waits for the server's own work (a detached request's next attempt): start it now."""


@dataclass(frozen=True, slots=True)
class RunAttempt:
    """Run an attempt of the request (then Begin takes the lease)."""

    input: str | list[UserContent] | None
    """The prompt it runs: the request's, a next attempt's stored one, or none once an attempt committed it."""
    resume: DeferredToolResume | None
    """What the run resumes with: the host's answers, or the retained batch it recovers."""
    accepted: DeferredToolResume | None
    """The batch Begin retains until the run incorporates it."""
    normal_resume: bool
    """Whether `resume` is the host's answers (not a recovery of a retained batch)."""
    head_tools: bool
    """Whether the run takes the head's client tools: it resumes or recovers and the request named none."""
    supersede: bool = False
    """An INTERRUPT supersedes the stopped lease's request: Begin closes it CANCELLED (LIVE §4.1), not
    INTERRUPTED."""
    rollback_of: str = ""
    """A ROLLBACK's first Begin discards this request's commits first, if it may (LIVE §4.4)."""
    answer_again: bool = False
    """That first Begin answers again, with the request's answers, the batch the discarded request
    began from (LIVE §4.5): refused when there is none to go back to."""


@dataclass(frozen=True, slots=True)
class Attach:
    """The request is running now (a retry while its attempt holds the lease): follow that attempt."""

    run_id: str


@dataclass(frozen=True, slots=True)
class GiveUp:
    """A detached request whose attempts ended by a lost server `attempts` times (LIVE §3.2): close it
    INTERRUPTED instead of starting another, so a run that kills its server cannot loop."""

    attempts: int


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The request's attempt `run_id` stopped after a cancel was asked of it: close it CANCELLED (as
    `CancelThreadRun` closes a run whose holder is gone), then answer that."""

    run_id: str


@dataclass(frozen=True, slots=True)
class Enqueue:
    """The thread is busy and the request waits: accept it into the queue as `kind` (ENQUEUE: last;
    INTERRUPT: first, its holder asked to stop)."""

    kind: QueuedKind = "enqueued"


@dataclass(frozen=True, slots=True)
class Queued:
    """The request waits in the thread's queue (a retry of a queued one): follow it once it starts."""

    run_id: str


Decision = Replay | Refuse | Attach | RunAttempt | GiveUp | Cancelled | Enqueue | Queued


def decide(
    thread: ThreadRow,
    record: RunRow | None,
    request: ThreadRunRequest,
    *,
    max_attempts: int = 0,
    start: bool = False,
) -> Decision:
    """What `request` does on `thread`, whose run record for the request's ID is `record` (or none);
    a detached request gets at most `max_attempts` attempts that end by a lost server (0: no cap).
    `start`: the server starts the queued `record`, its queue's head (LIVE §4.2)."""
    if record is not None:
        if not request.matches(record.digest):
            return Refuse(reused(request, record))
        if record.finished:
            if isinstance(record.outcome, HarnessError | RecordedRefusal):
                return Refuse(record.outcome)  # the error it ended with, again
            assert record.outcome is not None
            return Replay(record.outcome)
        if record.status == "interrupted":
            return Refuse(
                interrupted(
                    request.request_id,
                    record.run_id,
                    record.committed_revision,
                    attempts=record.crashed_attempts if _spent(record, max_attempts) else None,
                )
            )
        if record.status == "queued" and not start:
            return Queued(record.run_id)
    elif request.expected_revision and request.expected_revision != thread.revision:
        return Refuse(conflict(thread))
    lease = thread.live_lease
    if lease is not None:
        if record is not None and lease.request_id == request.request_id:
            return Attach(lease.run_id)  # its answers and revision are not checked again (LIVE §2.5)
        return _busy(thread, record, request, start, busy(thread, lease))
    stopped = thread.lease  # expired: its attempt stopped
    if stopped is not None and thread.cancel_requested and stopped.request_id == request.request_id:
        return Cancelled(stopped.run_id)  # asked, and never carried out by its holder
    interrupting = (request.busy_strategy in _FIRST and record is None) or (
        start and record is not None and record.queue_kind in ("interrupting", "rolling_back")
    )
    if (
        not start
        and not interrupting
        and stopped is not None
        and thread.sweep_after is not None
        and stopped.request_id != request.request_id
    ):
        # The server's own work comes first (LIVE §3.2): a detached request is never superseded.
        error = queue_busy(thread) if thread.queue else busy(thread, stopped)
        return _busy(thread, record, request, start, error, sweep=True)
    answers_now = request.answers is not None and thread.pending is not None
    if (thread.queue and not start and record is None and not answers_now and not interrupting) or (
        start and thread.pending is not None and not interrupting
    ):
        # Requests wait their turn (FIFO); answers to the pending batch go first (LIVE §4.5), and a
        # suspended thread's queue waits for them.
        return _busy(thread, record, request, start, queue_busy(thread), sweep=not start)
    if record is not None and _spent(record, max_attempts):
        return GiveUp(record.crashed_attempts)
    rollback_of = _rollback_of(thread, record, request)
    if record is None and request.answers is not None and thread.pending is None and not rollback_of:
        return Refuse(not_suspended(thread, "there is nothing to answer"))
    resume, accepted, normal = _resume(thread, record, request)  # the run checks the answers (phase A)
    if record is not None:
        input = record.prompt if record.committed_revision == 0 else None
    else:
        input = request.input
    return RunAttempt(
        input=input,
        resume=resume,
        accepted=accepted,
        normal_resume=normal,
        head_tools=not request.client_tools and (resume is not None or thread.recovery_pending),
        supersede=interrupting and stopped is not None and stopped.request_id != request.request_id,
        rollback_of=rollback_of,
        answer_again=request.answers is not None
        and (
            bool(rollback_of)
            if record is None
            else record.status == "queued" and record.queue_kind == "rolling_back"
        ),
    )


def reused(request: ThreadRunRequest, record: RunRow) -> ThreadError:
    """`request_id_reused`, with what the original request did (LIVE §5.5): its last attempt, its last
    commit (0: none), its status, and the parts in which this request differs from it."""
    differs = (
        "unknown"
        if request.digest_parts is None
        else digest_differences(record.digest_parts, request.digest_parts)
    )
    return ThreadError(
        f"Request {request.request_id!r} was already used for a different request (it differs in: {differs}).",
        code=ErrorCode.REQUEST_ID_REUSED,
        details={
            "request_id": request.request_id,
            "run_id": record.run_id,
            "revision": record.committed_revision,
            "status": record.status,
            "differs": differs,
        },
    )


def not_suspended(thread: ThreadRow, why: str) -> ThreadError:
    """`thread_not_suspended`, naming who consumed the last pending batch (LIVE §5.5): that request,
    the `SUSPENDED` checkpoint whose batch it was, and how (`answers` or `prompt`); empty when no
    request consumed one since a batch was restored. `consumed_by` adds what needs reads."""
    answered = thread.answered
    return ThreadError(
        f"Thread {thread.thread_id!r} is not suspended: {why}.",
        code=ErrorCode.THREAD_NOT_SUSPENDED,
        details={
            "thread_id": thread.thread_id,
            "status": THREAD_STATUS_NAMES[thread.status],
            "request_id": "" if answered is None else answered.request_id,
            "revision": 0 if answered is None else answered.revision,
            "answered": "" if answered is None else answered.how,
            "run_revision": 0,
            "matches": False,
        },
    )


def consumed_by(
    error: ThreadError,
    consumer: RunRow | None,
    batch: DeferredToolRequests | None,
    answers: DeferredToolResults | None,
) -> ThreadError:
    """`error` (`not_suspended`) with the consuming request's last commit (`run_revision`, 0: none) and
    whether `answers` name exactly the call IDs of the `batch` it consumed (`matches`): a client that
    sees `true` knows its answers were for that batch, already consumed."""
    named = set() if answers is None else {*answers.calls, *answers.approvals}
    details = {
        **error.details,
        "run_revision": 0 if consumer is None else consumer.committed_revision,
        "matches": batch is not None and bool(named) and named == set(batch.tool_call_ids()),
    }
    return ThreadError(error.message, code=error.code, details=details)


def _busy(
    thread: ThreadRow,
    record: RunRow | None,
    request: ThreadRunRequest,
    start: bool,
    error: ThreadError,
    *,
    sweep: bool = False,
) -> Decision:
    """The thread is busy: a new ENQUEUE, INTERRUPT or ROLLBACK request waits in its queue (answers
    only with ROLLBACK, to the batch the request it rolls back began from; others' batch is being
    consumed, LIVE §4.5); any other is refused with `error`."""
    if start or record is not None or request.busy_strategy == "reject":
        return Refuse(error, sweep=sweep)
    if request.answers is not None and request.busy_strategy != "rollback":
        return Refuse(
            not_suspended(
                thread, "it is running, its pending batch is being consumed, and answers are never queued"
            )
        )
    return Enqueue(_KINDS[request.busy_strategy])


_FIRST = ("interrupt", "rollback")
"""The strategies whose requests are queued first and stop the current run."""
_KINDS: dict[str, QueuedKind] = {
    "enqueue": "enqueued",
    "interrupt": "interrupting",
    "rollback": "rolling_back",
}


def _rollback_of(thread: ThreadRow, record: RunRow | None, request: ThreadRunRequest) -> str:
    """The request whose commits a ROLLBACK attempt discards first: the one it supersedes now (a new
    request with no live lease), or the one its acceptance interrupted (a queued one's first start);
    none once its first Begin ran (`rolled_back`)."""
    if record is None:
        stopped = thread.lease
        if request.busy_strategy == "rollback" and stopped is not None:
            return stopped.request_id
        return ""
    if record.queue_kind == "rolling_back" and not record.rolled_back and record.status == "queued":
        return record.rollback_of or ""
    return ""


def rollback_target(
    thread: ThreadRow, interrupted: RunRow | None, since: Sequence[CheckpointRow], *, answering: bool = False
) -> int:
    """The revision a ROLLBACK goes back to (LIVE §4.4): where the `interrupted` request began, provided
    it committed something and every checkpoint `since` then (the newest first, down to the one after
    it) is its own; else 0: nothing is copied, it never discards another request's input. `answering`:
    the ROLLBACK answers that checkpoint's batch again (LIVE §4.5), so it is copied even when the
    request committed nothing: its Begin took that batch, and the copy gives it back to be answered."""
    if interrupted is None or interrupted.begin_revision <= 0:
        return 0
    after = thread.revision - interrupted.begin_revision
    if after < 0 or (after == 0 and not answering) or len(since) != after:
        return 0
    if any(checkpoint.request_id != interrupted.request_id for checkpoint in since):
        return 0
    return interrupted.begin_revision


def rolled_back_attempt(attempt: RunAttempt, target: CheckpointRow, request: ThreadRunRequest) -> RunAttempt:
    """`attempt` as it runs on the copy of `target`: that checkpoint's retained batch (the discarded
    request's dropped) and client tools, as `RollbackThread` leaves the thread (LIVE §4.4); or, with
    the request's answers, that checkpoint's batch answered again (LIVE §4.5).

    Raises:
        ThreadError: `thread_not_suspended` when the request has answers and `target` waits on no batch.
    """
    if request.answers is not None:
        if target.pending is None:
            raise rollback_unanswerable(request.thread_id, target.revision)
        answered = DeferredToolResume(target.pending, request.answers)
        return dataclasses.replace(
            attempt,
            resume=answered,
            accepted=answered,
            normal_resume=True,
            head_tools=not request.client_tools,
        )
    resume: DeferredToolResume | None = None
    if target.remaining is not None:
        requests, results, _recovery = stored_resume(target.remaining)
        resume = DeferredToolResume(requests, results, recovery=True)
    return dataclasses.replace(
        attempt,
        resume=resume,
        accepted=target.remaining,
        normal_resume=False,
        head_tools=not request.client_tools and resume is not None,
    )


def rollback_unanswerable(thread_id: str, revision: int, *, interrupting: bool = False) -> ThreadError:
    """A ROLLBACK's answers find no batch to answer where the request it discards began (LIVE §4.5):
    that checkpoint (`revision`) waits on none, or the running request is an interrupting one, whose
    input a ROLLBACK never discards."""
    why = (
        "the running request is itself an INTERRUPT or ROLLBACK, which a ROLLBACK never discards"
        if interrupting
        else f"the request it discards began from revision {revision}, which waits on no batch"
    )
    return ThreadError(
        f"Thread {thread_id!r} has no batch for these answers: {why}. Send the ROLLBACK without answers.",
        code=ErrorCode.THREAD_NOT_SUSPENDED,
        details={"thread_id": thread_id, "status": THREAD_STATUS_NAMES["running"], "began_at": revision},
    )


def _spent(record: RunRow, max_attempts: int) -> bool:
    """Whether a detached request's attempts that ended by a lost server reached the cap."""
    return record.detached and max_attempts > 0 and record.crashed_attempts >= max_attempts


def _resume(
    thread: ThreadRow, record: RunRow | None, request: ThreadRunRequest
) -> tuple[DeferredToolResume | None, DeferredToolResume | None, bool]:
    """The resume to run with, the batch to retain, and whether it is a normal (answers) resume."""
    answers = request.answers
    if record is None and answers is not None and thread.pending is not None:
        resume = DeferredToolResume(thread.pending, answers)
        return resume, resume, True
    if thread.accepted is not None:
        requests, results, _recovery = stored_resume(thread.accepted)
        return DeferredToolResume(requests, results, recovery=True), thread.accepted, False
    return None, None, False
