"""Begin's decision (THREADS §4 step 1; `harness.threads.begin.decide`) as a table of cases.

Each row is a thread, the run record for the request's ID (or none) and the request: what Begin decides.
Pure values, no store: the store's own behaviour under these decisions is what the thread tests and the
crash matrix check.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolResults
from pydantic_ai.usage import RunUsage

from harness import ClientTool, DeferredToolRequests, DeferredToolResume
from harness.deferred import DeferredToolCall
from harness.errors import ErrorCode, HarnessError, ThreadError
from harness.threads.begin import (
    Attach,
    Enqueue,
    Queued,
    Refuse,
    Replay,
    RunAttempt,
    decide,
    rollback_target,
)
from harness.threads.outcome import ThreadRunOutcome
from harness.threads.records import Attempt, CheckpointRow, Lease, QueuedRun, RunRow, ThreadRow
from harness.threads.request import ThreadRunRequest

NOW = 1_000_000.0
TOOL = ClientTool(name="pick_color", description="Ask the user for a color.")
HEAD_TOOL = ClientTool(name="pick_size", description="Ask the user for a size.")


def batch() -> DeferredToolRequests:
    return DeferredToolRequests(
        approvals=[
            DeferredToolCall.of(ToolCallPart("delete_file", {"path": "a.txt"}, "call_a"), "tool/x/delete")
        ]
    )


ANSWERS = batch().build_results(approvals={"call_a": True})
RETAINED = DeferredToolResume(batch(), ANSWERS)


def thread(**changes: Any) -> ThreadRow:
    row = ThreadRow(
        thread_id="t_begin",
        incarnation="i1",
        agent="default",
        labels={},
        create_time=NOW,
        update_time=NOW,
        revision=3,
        pending=None,
        accepted=None,
        fence="f1",
        lease=None,
        cancel_requested=False,
        last_request_id=None,
        now=NOW,
    )
    return dataclasses.replace(row, **changes)


def lease(expires: float, *, request_id: str = "req-other") -> Lease:
    return Lease(run_id="run-other", request_id=request_id, replica="r1", expires=expires)


def request(**changes: Any) -> ThreadRunRequest:
    fields: dict[str, Any] = {
        "thread_id": "t_begin",
        "request_id": "req-1",
        "expected_revision": 0,
        "input": "hello",
        "answers": None,
        "tool_recovery": "declared",
        "client_tools": (),
        "usage_limits": None,
    }
    fields.update(changes)
    return ThreadRunRequest(**fields)


def record(
    status: str, *, outcome: Any = None, committed: int = 0, of: ThreadRunRequest | None = None
) -> RunRow:
    return RunRow(
        request_id="req-1",
        digest=(of or request()).digest,
        prompt="hello",
        status=status,  # type: ignore[arg-type]
        outcome=outcome,
        attempts=(Attempt("run-1", "r1", "f1", NOW, ()),),
        run_id="run-1",
        committed_revision=committed,
    )


OUTCOME = ThreadRunOutcome(
    thread_id="t_begin",
    run_id="run-1",
    request_id="req-1",
    status="completed",
    revision=4,
    committed=True,
    output_json='"done"',
    usage=RunUsage(),
    failure=None,
    deferred=None,
    started_at=datetime(2026, 1, 1, tzinfo=UTC),
    ended_at=datetime(2026, 1, 1, tzinfo=UTC),
)
STORED_ERROR = HarnessError(
    "The run lost its lease.", code=ErrorCode.LEASE_LOST, details={"thread_id": "t_begin"}
)


ENQUEUE = {"busy_strategy": "enqueue"}
INTERRUPT = {"busy_strategy": "interrupt"}
ROLLBACK = {"busy_strategy": "rollback"}
WAITING = (QueuedRun("req-queued", "run-queued", "enqueued", NOW),)


def queued(**changes: Any) -> ThreadRow:
    """A thread with one request waiting in its queue."""
    return thread(queue_length=1, queue=WAITING, **changes)


def waiting_record() -> RunRow:
    """The queued record of `request(**ENQUEUE)`."""
    return dataclasses.replace(
        record("queued", of=request(**ENQUEUE)), attempts=(), run_id="run-queued", queue_kind="enqueued"
    )


def refused(code: ErrorCode) -> tuple[str, ErrorCode]:
    return ("refuse", code)


def attempt(
    input: Any, *, resume: str | None = None, head_tools: bool = False
) -> tuple[str, Any, str | None, bool]:
    return ("attempt", input, resume, head_tools)


def summary(decision: Any) -> tuple[Any, ...]:
    """A decision as a row's expected value: its kind and what distinguishes it."""
    if isinstance(decision, Refuse):
        return ("refuse", decision.error.code)
    if isinstance(decision, Replay):
        return ("replay", decision.outcome.run_id)
    if isinstance(decision, Attach):
        return ("attach", decision.run_id)
    if isinstance(decision, Enqueue):
        return ("enqueue",) if decision.kind == "enqueued" else ("enqueue", decision.kind)
    if isinstance(decision, Queued):
        return ("queued", decision.run_id)
    assert isinstance(decision, RunAttempt)
    resume = None
    if decision.resume is not None:
        resume = "answers" if decision.normal_resume else "recovery"
        assert decision.accepted is not None, "a resumed batch is retained until incorporated"
    else:
        assert decision.accepted is None
    superseding = ("supersede",) if decision.supersede else ()
    rolling = (("rollback_of", decision.rollback_of),) if decision.rollback_of else ()
    return ("attempt", decision.input, resume, decision.head_tools, *superseding, *rolling)


CASES: dict[str, tuple[ThreadRow, RunRow | None, ThreadRunRequest, tuple[Any, ...]]] = {
    # -- a new request (no record) --
    "new: a prompt on an idle thread runs it": (thread(), None, request(), attempt("hello")),
    "new: expected_revision at the head runs": (
        thread(),
        None,
        request(expected_revision=3),
        attempt("hello"),
    ),
    "new: a stale expected_revision is a conflict": (
        thread(),
        None,
        request(expected_revision=2),
        refused(ErrorCode.REVISION_CONFLICT),
    ),
    "new: a live lease is busy": (
        thread(lease=lease(NOW + 5)),
        None,
        request(),
        refused(ErrorCode.THREAD_BUSY),
    ),
    "new: an expired lease recovers, with the head's client tools": (
        thread(lease=lease(NOW - 1)),
        None,
        request(),
        attempt("hello", head_tools=True),
    ),
    "new: the request's own client tools win over the head's": (
        thread(lease=lease(NOW - 1)),
        None,
        request(client_tools=(TOOL,)),
        attempt("hello"),
    ),
    "new: answers without a pending batch: not suspended": (
        thread(),
        None,
        request(input=None, answers=ANSWERS),
        refused(ErrorCode.THREAD_NOT_SUSPENDED),
    ),
    "new: answers to the pending batch resume it": (
        thread(pending=batch()),
        None,
        request(input=None, answers=ANSWERS),
        attempt(None, resume="answers", head_tools=True),
    ),
    "new: answers that do not fit the batch are the run's to refuse (its phase A), not Begin's": (
        thread(pending=batch()),
        None,
        request(input=None, answers=DeferredToolResults(approvals={"call_b": True})),
        attempt(None, resume="answers", head_tools=True),
    ),
    "new: a prompt on a thread with a retained batch recovers it": (
        thread(accepted=RETAINED),
        None,
        request(),
        attempt("hello", resume="recovery", head_tools=True),
    ),
    "new: a conflict is decided before busy": (
        thread(lease=lease(NOW + 5)),
        None,
        request(expected_revision=2),
        refused(ErrorCode.REVISION_CONFLICT),
    ),
    # -- a retry (a record with this request ID) --
    "retry: another body under the same ID is reused": (
        thread(),
        record("completed", outcome=OUTCOME),
        request(input="something else"),
        refused(ErrorCode.REQUEST_ID_REUSED),
    ),
    "retry: a finished request replays its outcome": (
        thread(lease=lease(NOW + 5)),  # even while another run holds the thread
        record("completed", outcome=OUTCOME),
        request(),
        ("replay", "run-1"),
    ),
    "retry: a request that ended in an error gets it again": (
        thread(),
        record("error", outcome=STORED_ERROR),
        request(),
        refused(ErrorCode.LEASE_LOST),
    ),
    "retry: an interrupted request is refused": (
        thread(),
        record("interrupted"),
        request(),
        refused(ErrorCode.REQUEST_INTERRUPTED),
    ),
    "retry: its own record running under a live lease attaches to that attempt (LIVE §2.5)": (
        thread(lease=lease(NOW + 5, request_id="req-1")),
        record("running", of=request(expected_revision=2)),
        request(expected_revision=2),
        ("attach", "run-other"),
    ),
    "retry: a running record under another request's live lease is busy": (
        thread(lease=lease(NOW + 5)),
        record("running"),
        request(),
        refused(ErrorCode.THREAD_BUSY),
    ),
    "retry: a running record whose lease expired runs its next attempt with the stored prompt": (
        thread(lease=lease(NOW - 1)),
        record("running"),
        request(),
        attempt("hello", head_tools=True),
    ),
    "retry: once an attempt committed, the next one runs without the prompt": (
        thread(lease=lease(NOW - 1)),
        record("running", committed=4),
        request(),
        attempt(None, head_tools=True),
    ),
    "retry: a stale expected_revision does not refuse a retry (its first attempt moved the head)": (
        thread(lease=lease(NOW - 1), revision=5),
        record("running", committed=4, of=request(expected_revision=3)),
        request(expected_revision=3),
        attempt(None, head_tools=True),
    ),
    "retry: a retried answer with the batch no longer pending recovers the retained batch": (
        thread(lease=lease(NOW - 1), accepted=RETAINED),
        record("running", of=request(input=None, answers=ANSWERS)),
        request(input=None, answers=ANSWERS),
        attempt("hello", resume="recovery", head_tools=True),
    ),
    # -- busy strategies (LIVE §4.1, §4.2) --
    "enqueue: a free thread with an empty queue runs it now": (
        thread(),
        None,
        request(**ENQUEUE),
        attempt("hello"),
    ),
    "enqueue: a live lease queues it": (
        thread(lease=lease(NOW + 5)),
        None,
        request(**ENQUEUE),
        ("enqueue",),
    ),
    "enqueue: a waiting queue queues it last": (queued(), None, request(**ENQUEUE), ("enqueue",)),
    "enqueue: a detached request's due attempt queues it": (
        thread(lease=lease(NOW - 1), sweep_after=NOW - 1),
        None,
        request(**ENQUEUE),
        ("enqueue",),
    ),
    "enqueue: an expired attached lease is superseded, as REJECT does": (
        thread(lease=lease(NOW - 1)),
        None,
        request(**ENQUEUE),
        attempt("hello", head_tools=True),
    ),
    "enqueue: a stale expected_revision is a conflict at acceptance": (
        thread(lease=lease(NOW + 5)),
        None,
        request(expected_revision=2, **ENQUEUE),
        refused(ErrorCode.REVISION_CONFLICT),
    ),
    "enqueue: answers on a running thread are never queued": (
        thread(lease=lease(NOW + 5)),
        None,
        request(input=None, answers=ANSWERS, **ENQUEUE),
        refused(ErrorCode.THREAD_NOT_SUSPENDED),
    ),
    "reject: a waiting queue is busy (FIFO)": (queued(), None, request(), refused(ErrorCode.THREAD_BUSY)),
    "reject: answers to a suspended thread run ahead of its waiting queue": (
        queued(pending=batch()),
        None,
        request(input=None, answers=ANSWERS),
        attempt(None, resume="answers", head_tools=True),
    ),
    "enqueue: a prompt on a suspended thread with a queue waits behind it": (
        queued(pending=batch()),
        None,
        request(**ENQUEUE),
        ("enqueue",),
    ),
    "interrupt: a free thread runs it now": (thread(), None, request(**INTERRUPT), attempt("hello")),
    "interrupt: a live lease queues it first (its holder is asked to stop)": (
        thread(lease=lease(NOW + 5)),
        None,
        request(**INTERRUPT),
        ("enqueue", "interrupting"),
    ),
    "interrupt: a waiting queue: it runs now, ahead of it": (
        queued(),
        None,
        request(**INTERRUPT),
        attempt("hello"),
    ),
    "interrupt: a detached request's due attempt is closed CANCELLED, and it runs now": (
        thread(lease=lease(NOW - 1), sweep_after=NOW - 1),
        None,
        request(**INTERRUPT),
        (*attempt("hello", head_tools=True), "supersede"),
    ),
    "interrupt: an attached request whose lease expired is closed CANCELLED, not INTERRUPTED": (
        thread(lease=lease(NOW - 1)),
        None,
        request(**INTERRUPT),
        (*attempt("hello", head_tools=True), "supersede"),
    ),
    "interrupt: answers on a running thread are never queued": (
        thread(lease=lease(NOW + 5)),
        None,
        request(input=None, answers=ANSWERS, **INTERRUPT),
        refused(ErrorCode.THREAD_NOT_SUSPENDED),
    ),
    "rollback: a live lease queues it first": (
        thread(lease=lease(NOW + 5)),
        None,
        request(**ROLLBACK),
        ("enqueue", "rolling_back"),
    ),
    "rollback: a free thread runs it now, with nothing to discard": (
        thread(),
        None,
        request(**ROLLBACK),
        attempt("hello"),
    ),
    "rollback: a lost holder's request is closed CANCELLED and discarded": (
        thread(lease=lease(NOW - 1)),
        None,
        request(**ROLLBACK),
        (*attempt("hello", head_tools=True), "supersede", ("rollback_of", "req-other")),
    ),
    "rollback: a detached request's due attempt is closed CANCELLED and discarded": (
        thread(lease=lease(NOW - 1), sweep_after=NOW - 1),
        None,
        request(**ROLLBACK),
        (*attempt("hello", head_tools=True), "supersede", ("rollback_of", "req-other")),
    ),
    "rollback: answers on a running thread are queued first, for the batch its holder began from": (
        thread(lease=lease(NOW + 5)),
        None,
        request(input=None, answers=ANSWERS, **ROLLBACK),
        ("enqueue", "rolling_back"),
    ),
    "rollback: answers with a lost holder run now, to answer again the batch it began from": (
        thread(lease=lease(NOW - 1)),
        None,
        request(input=None, answers=ANSWERS, **ROLLBACK),
        (*attempt(None, head_tools=True), "supersede", ("rollback_of", "req-other")),
    ),
    "rollback: answers on a free thread with no batch: not suspended": (
        thread(),
        None,
        request(input=None, answers=ANSWERS, **ROLLBACK),
        refused(ErrorCode.THREAD_NOT_SUSPENDED),
    ),
    "rollback: answers to a suspended thread run now, as answers": (
        thread(pending=batch()),
        None,
        request(input=None, answers=ANSWERS, **ROLLBACK),
        attempt(None, resume="answers", head_tools=True),
    ),
    "retry: a queued request waits for its turn": (
        queued(),
        waiting_record(),
        request(**ENQUEUE),
        ("queued", "run-queued"),
    ),
}
START_CASES: dict[str, tuple[ThreadRow, RunRow, tuple[Any, ...]]] = {
    "start: the queue's head runs its prompt on the head": (queued(), waiting_record(), attempt("hello")),
    "start: it supersedes an attached request whose lease expired, recovering": (
        queued(lease=lease(NOW - 1), sweep_after=NOW - 1),
        waiting_record(),
        attempt("hello", head_tools=True),
    ),
    "start: a live lease refuses it (the sweeper tries again)": (
        queued(lease=lease(NOW + 5)),
        waiting_record(),
        refused(ErrorCode.THREAD_BUSY),
    ),
    "start: a suspended head holds it": (
        queued(pending=batch()),
        waiting_record(),
        refused(ErrorCode.THREAD_BUSY),
    ),
    "start: an interrupting head starts whatever the head is, a suspended one too": (
        queued(pending=batch()),
        dataclasses.replace(waiting_record(), queue_kind="interrupting"),
        attempt("hello"),
    ),
    "start: a rolling-back head discards the request its acceptance interrupted": (
        queued(),
        dataclasses.replace(waiting_record(), queue_kind="rolling_back", rollback_of="req-x"),
        (*attempt("hello"), ("rollback_of", "req-x")),
    ),
    "start: one cancelled meanwhile replays, never runs": (
        queued(),
        dataclasses.replace(waiting_record(), status="cancelled", outcome=OUTCOME),
        ("replay", "run-1"),
    ),
}


@pytest.mark.parametrize("case", list(START_CASES))
def test_a_queue_start_decides(case: str) -> None:
    row, queued_record, expected = START_CASES[case]
    assert summary(decide(row, queued_record, request(**ENQUEUE), start=True)) == expected


def checkpoint_row(revision: int, request_id: str) -> CheckpointRow:
    return CheckpointRow(
        thread_id="t_begin",
        revision=revision,
        kind="mid_run",
        run_id="run-1",
        request_id=request_id,
        create_time=NOW,
        pending=None,
        remaining=None,
        client_tools=(),
        history_blob=1,
        rest_blob=2,
        history_at=0,
    )


def test_a_rollback_goes_back_only_over_the_interrupted_requests_own_commits() -> None:
    """LIVE §4.4: where it began, if it committed and every later checkpoint is its own."""
    x = dataclasses.replace(record("cancelled", outcome=OUTCOME), request_id="req-x", begin_revision=3)
    head = thread(revision=5)
    mine = [checkpoint_row(5, "req-x"), checkpoint_row(4, "req-x")]
    assert rollback_target(head, x, mine) == 3
    assert rollback_target(head, x, [checkpoint_row(5, "req-y"), checkpoint_row(4, "req-x")]) == 0
    assert rollback_target(head, x, [checkpoint_row(5, ""), checkpoint_row(4, "req-x")]) == 0, (
        "a rollback since"
    )
    assert rollback_target(thread(revision=3), x, []) == 0, "it committed nothing"
    assert rollback_target(thread(revision=3), x, [], answering=True) == 3, (
        "it committed nothing, but its Begin took the batch the ROLLBACK answers again"
    )
    assert rollback_target(head, x, mine, answering=True) == 3
    assert rollback_target(thread(revision=2), x, [], answering=True) == 0
    assert rollback_target(head, None, mine) == 0
    assert rollback_target(head, dataclasses.replace(x, begin_revision=0), mine) == 0


def test_a_queue_busy_names_its_head_and_no_lease() -> None:
    decision = decide(queued(), None, request())
    assert isinstance(decision, Refuse) and isinstance(decision.error, ThreadError)
    assert decision.error.details == {
        "run_id": "run-queued",
        "request_id": "req-queued",
        "lease_expires_at": "",
        "queue_length": 1,
    }


@pytest.mark.parametrize("case", list(CASES))
def test_begin_decides(case: str) -> None:
    row, run_record, asked, expected = CASES[case]
    assert summary(decide(row, run_record, asked)) == expected


def test_a_refusal_carries_the_error_the_host_gets() -> None:
    decision = decide(thread(lease=lease(NOW + 5)), None, request())
    assert isinstance(decision, Refuse) and isinstance(decision.error, ThreadError)
    assert (
        decision.error.details["run_id"] == "run-other"
        and decision.error.details["request_id"] == "req-other"
    )
    stored = decide(thread(), record("error", outcome=STORED_ERROR), request())
    assert isinstance(stored, Refuse) and stored.error is STORED_ERROR
