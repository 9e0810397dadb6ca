"""The threads client's own logic, without a thread server: typed errors by reason, `answers`,
how `ThreadRunStream` reads its outcome, request IDs, and `run()`'s retries against a real listener
that drops every connection."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import datetime
import itertools
import pickle
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpclib.const
import grpclib.exceptions
import pytest
import threadline_client as tl
from google.rpc import error_details_pb2
from threadline_client import v1
from threadline_client._errors import translate
from threadline_client._live import RECONNECTS

THREAD_ERRORS: list[tuple[type[tl.ThreadlineError], str, grpclib.const.Status]] = [
    (tl.ThreadNotFound, "THREAD_NOT_FOUND", grpclib.const.Status.NOT_FOUND),
    (tl.CheckpointNotFound, "CHECKPOINT_NOT_FOUND", grpclib.const.Status.NOT_FOUND),
    (tl.RunNotFound, "RUN_NOT_FOUND", grpclib.const.Status.NOT_FOUND),
    (tl.ThreadExists, "THREAD_EXISTS", grpclib.const.Status.ALREADY_EXISTS),
    (tl.RequestIdReused, "REQUEST_ID_REUSED", grpclib.const.Status.INVALID_ARGUMENT),
    (tl.ThreadNotSuspended, "THREAD_NOT_SUSPENDED", grpclib.const.Status.FAILED_PRECONDITION),
    (tl.RequestInterrupted, "REQUEST_INTERRUPTED", grpclib.const.Status.FAILED_PRECONDITION),
    (tl.ThreadBusy, "THREAD_BUSY", grpclib.const.Status.ABORTED),
    (tl.ThreadQueueFull, "THREAD_QUEUE_FULL", grpclib.const.Status.RESOURCE_EXHAUSTED),
    (tl.RevisionConflict, "REVISION_CONFLICT", grpclib.const.Status.ABORTED),
    (tl.LeaseLost, "LEASE_LOST", grpclib.const.Status.ABORTED),
    (tl.StoreUnavailable, "STORE_UNAVAILABLE", grpclib.const.Status.UNAVAILABLE),
    (tl.ListenerTooSlow, "LISTENER_TOO_SLOW", grpclib.const.Status.RESOURCE_EXHAUSTED),
    (tl.RunAttemptLost, "RUN_ATTEMPT_LOST", grpclib.const.Status.ABORTED),
    (tl.RunEventsExpired, "RUN_EVENTS_EXPIRED", grpclib.const.Status.FAILED_PRECONDITION),
]
SERVER_ERRORS: list[tuple[type[tl.ThreadlineError], str, grpclib.const.Status]] = [
    (tl.FollowerLimitReached, "FOLLOWER_LIMIT_REACHED", grpclib.const.Status.RESOURCE_EXHAUSTED),
]
"""The server's own reasons ("(server)" in the catalogue) that have a class: those of following a run."""


def grpc_error(
    status: grpclib.const.Status,
    reason: str,
    metadata: dict[str, str] | None = None,
    domain: str = "threadline",
) -> grpclib.exceptions.GRPCError:
    info = error_details_pb2.ErrorInfo(reason=reason, domain=domain, metadata=metadata or {})
    return grpclib.exceptions.GRPCError(status, f"{reason.lower()} happened", [info])


@pytest.mark.parametrize(
    ("cls", "reason", "status"),
    THREAD_ERRORS + SERVER_ERRORS,
    ids=[r for _, r, _ in THREAD_ERRORS + SERVER_ERRORS],
)
def test_each_thread_reason_is_its_own_class(
    cls: type[tl.ThreadlineError], reason: str, status: grpclib.const.Status
) -> None:
    error = translate(grpc_error(status, reason, {"k": "v"}))

    assert type(error) is cls and isinstance(error, tl.ThreadlineError)
    assert (error.status, error.reason, error.domain) == (tl.StatusCode(status.value), reason, "threadline")
    assert dict(error.metadata) == {"k": "v"}
    assert str(error) == f"{tl.StatusCode(status.value).name} {reason}: {reason.lower()} happened"
    assert repr(error).startswith(f"{cls.__name__}(status=")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and copy.reason == reason and dict(copy.metadata) == {"k": "v"}


CATALOGUE = Path(__file__).resolve().parents[3] / "docs" / "errors.md"
"""The server's error catalogue: its rows marked "(threads)" are ThreadService's reasons."""


def test_the_classes_cover_exactly_the_threads_reasons() -> None:
    assert {cls.__name__ for cls, _, _ in THREAD_ERRORS} <= set(tl.__all__)
    assert len({reason for _, reason, _ in THREAD_ERRORS}) == len(THREAD_ERRORS)
    # A reason the server adds to the catalogue fails here until it has its class.
    rows = re.findall(r"^\| `([A-Z_]+)` \(threads\) \| ([A-Z_]+) \|", CATALOGUE.read_text("utf-8"), re.M)
    assert [(reason, status.name) for _, reason, status in THREAD_ERRORS] == rows
    server = dict(
        re.findall(r"^\| `([A-Z_]+)` \(server\) \| ([A-Z_]+) \|", CATALOGUE.read_text("utf-8"), re.M)
    )
    assert {cls.__name__ for cls, _, _ in SERVER_ERRORS} <= set(tl.__all__)
    assert all(server.get(reason) == status.name for _, reason, status in SERVER_ERRORS), server


def test_metadata_becomes_typed_attributes() -> None:
    busy = translate(
        grpc_error(
            grpclib.const.Status.ABORTED,
            "THREAD_BUSY",
            {"run_id": "run-1", "request_id": "req-1", "lease_expires_at": "2030-01-02T03:04:05.250Z"},
        )
    )
    assert isinstance(busy, tl.ThreadBusy)
    assert (busy.run_id, busy.request_id) == ("run-1", "req-1")
    assert busy.lease_expires_at == datetime.datetime(2030, 1, 2, 3, 4, 5, 250_000, tzinfo=datetime.UTC)
    assert busy.queue_length == 0, "a server before queues sends none"
    queued = translate(
        grpc_error(
            grpclib.const.Status.ABORTED,
            "THREAD_BUSY",
            {"run_id": "run-q", "request_id": "req-q", "lease_expires_at": "", "queue_length": "3"},
        )
    )
    assert isinstance(queued, tl.ThreadBusy)
    assert (queued.request_id, queued.lease_expires_at, queued.queue_length) == ("req-q", None, 3)
    full = translate(
        grpc_error(
            grpclib.const.Status.RESOURCE_EXHAUSTED,
            "THREAD_QUEUE_FULL",
            {"thread_id": "t1", "limit": "16", "queue_length": "16"},
        )
    )
    assert isinstance(full, tl.ThreadQueueFull)
    assert (full.thread_id, full.limit, full.queue_length) == ("t1", 16, 16)

    conflict = translate(
        grpc_error(grpclib.const.Status.ABORTED, "REVISION_CONFLICT", {"current_revision": "7"})
    )
    assert isinstance(conflict, tl.RevisionConflict) and conflict.current_revision == 7

    interrupted = translate(
        grpc_error(
            grpclib.const.Status.FAILED_PRECONDITION,
            "REQUEST_INTERRUPTED",
            {"run_id": "run-2", "revision": "4"},
        )
    )
    assert isinstance(interrupted, tl.RequestInterrupted)
    assert (interrupted.run_id, interrupted.revision, interrupted.attempts) == ("run-2", 4, None)
    # The attributes survive pickling, since they are read from the metadata.
    assert pickle.loads(pickle.dumps(interrupted)).revision == 4
    capped = translate(
        grpc_error(
            grpclib.const.Status.FAILED_PRECONDITION,
            "REQUEST_INTERRUPTED",
            {"run_id": "run-2", "revision": "4", "attempts": "3"},
        )
    )
    assert isinstance(capped, tl.RequestInterrupted) and capped.attempts == 3
    assert pickle.loads(pickle.dumps(capped)).attempts == 3

    slow = translate(
        grpc_error(
            grpclib.const.Status.RESOURCE_EXHAUSTED,
            "LISTENER_TOO_SLOW",
            {"thread_id": "t-1", "run_id": "run-3", "request_id": "req-3", "backlog": "8192"},
        )
    )
    assert isinstance(slow, tl.ListenerTooSlow)
    assert (slow.thread_id, slow.run_id, slow.request_id, slow.backlog) == ("t-1", "run-3", "req-3", 8192)

    lost = translate(
        grpc_error(
            grpclib.const.Status.ABORTED,
            "RUN_ATTEMPT_LOST",
            {
                "run_id": "run-4",
                "request_id": "req-4",
                "last_sequence": "17",
                "request_status": "running",
                "next_run_id": "run-5",
            },
        )
    )
    assert isinstance(lost, tl.RunAttemptLost)
    assert (lost.run_id, lost.request_id, lost.last_sequence, lost.request_status, lost.next_run_id) == (
        "run-4",
        "req-4",
        17,
        "running",
        "run-5",
    )
    expired = translate(
        grpc_error(
            grpclib.const.Status.FAILED_PRECONDITION,
            "RUN_EVENTS_EXPIRED",
            {
                "run_id": "run-6",
                "request_id": "req-6",
                "request_status": "completed",
                "revision": "9",
                "why": "retention",
            },
        )
    )
    assert isinstance(expired, tl.RunEventsExpired)
    assert (expired.run_id, expired.request_id, expired.request_status, expired.revision, expired.why) == (
        "run-6",
        "req-6",
        "completed",
        9,
        "retention",
    )
    full = translate(
        grpc_error(grpclib.const.Status.RESOURCE_EXHAUSTED, "FOLLOWER_LIMIT_REACHED", {"limit": "1024"})
    )
    assert isinstance(full, tl.FollowerLimitReached) and full.limit == 1024
    assert pickle.loads(pickle.dumps(full)).limit == 1024


def test_thread_not_suspended_names_who_answered_the_batch() -> None:
    by_prompt = translate(
        grpc_error(
            grpclib.const.Status.FAILED_PRECONDITION,
            "THREAD_NOT_SUSPENDED",
            {
                "thread_id": "t1",
                "status": "THREAD_STATUS_IDLE",
                "request_id": "req-never-mind",
                "revision": "3",
                "answered": "prompt",
                "run_revision": "5",
                "matches": "true",
            },
        )
    )
    assert isinstance(by_prompt, tl.ThreadNotSuspended)
    assert by_prompt.status == tl.StatusCode.FAILED_PRECONDITION, "the gRPC code, as on every error"
    assert (by_prompt.thread_id, by_prompt.thread_status) == ("t1", "THREAD_STATUS_IDLE")
    assert by_prompt.answered_by == tl.AnsweredBy(
        request_id="req-never-mind", revision=3, how="prompt", run_revision=5, matches=True
    )
    assert pickle.loads(pickle.dumps(by_prompt)).answered_by == by_prompt.answered_by
    by_answers = translate(
        grpc_error(
            grpclib.const.Status.FAILED_PRECONDITION,
            "THREAD_NOT_SUSPENDED",
            {
                "thread_id": "t1",
                "status": "THREAD_STATUS_IDLE",
                "request_id": "req-a",
                "revision": "2",
                "answered": "answers",
                "run_revision": "0",
                "matches": "false",
            },
        )
    )
    assert isinstance(by_answers, tl.ThreadNotSuspended)
    assert by_answers.answered_by == tl.AnsweredBy("req-a", 2, "answers", 0, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        by_answers.answered_by.matches = True  # type: ignore[misc,union-attr]

    # Nothing consumed a batch (since a rollback restored one): empty and "0".
    none_since = {
        "thread_id": "t1",
        "status": "THREAD_STATUS_IDLE",
        "request_id": "",
        "revision": "0",
        "answered": "",
        "run_revision": "0",
        "matches": "false",
    }
    # An older server sends only thread_id and status; a ROLLBACK refusal sends began_at instead.
    older = {"thread_id": "t1", "status": "THREAD_STATUS_IDLE"}
    rollback = {"thread_id": "t1", "status": "THREAD_STATUS_RUNNING", "began_at": "4"}
    unknown_how = {**none_since, "request_id": "req-x", "answered": "telepathy"}
    for metadata in (none_since, older, rollback, unknown_how):
        error = translate(
            grpc_error(grpclib.const.Status.FAILED_PRECONDITION, "THREAD_NOT_SUSPENDED", metadata)
        )
        assert isinstance(error, tl.ThreadNotSuspended) and error.answered_by is None, metadata
        assert error.thread_id == "t1"


def test_request_id_reused_says_what_the_original_did() -> None:
    reused = translate(
        grpc_error(
            grpclib.const.Status.INVALID_ARGUMENT,
            "REQUEST_ID_REUSED",
            {
                "request_id": "req-1",
                "run_id": "run-1",
                "revision": "7",
                "status": "completed",
                "differs": "prompt,expected_revision",
            },
        )
    )
    assert isinstance(reused, tl.RequestIdReused)
    assert reused.status == tl.StatusCode.INVALID_ARGUMENT, "the gRPC code, as on every error"
    assert (reused.request_id, reused.run_id, reused.revision, reused.request_status) == (
        "req-1",
        "run-1",
        7,
        "completed",
    )
    assert reused.differs == ("prompt", "expected_revision")
    assert pickle.loads(pickle.dumps(reused)).differs == ("prompt", "expected_revision")
    assert tl.RequestIdReused.DIFFERS_PARTS == ("prompt", "answers", "expected_revision", "busy_strategy")

    def differs(metadata: dict[str, str]) -> tuple[str, ...] | None:
        error = translate(grpc_error(grpclib.const.Status.INVALID_ARGUMENT, "REQUEST_ID_REUSED", metadata))
        assert isinstance(error, tl.RequestIdReused)
        return error.differs

    assert differs({"differs": "answers,busy_strategy"}) == ("answers", "busy_strategy")
    assert differs({"differs": "unknown"}) is None, "a record an older server made"
    assert differs({"differs": ""}) == ()
    # An older server sends no metadata of the original at all.
    older = translate(grpc_error(grpclib.const.Status.INVALID_ARGUMENT, "REQUEST_ID_REUSED"))
    assert isinstance(older, tl.RequestIdReused)
    assert (older.request_id, older.run_id, older.revision, older.request_status, older.differs) == (
        "",
        "",
        0,
        "",
        None,
    )
    running = translate(
        grpc_error(
            grpclib.const.Status.INVALID_ARGUMENT,
            "REQUEST_ID_REUSED",
            {"request_id": "req-2", "run_id": "run-2", "revision": "0", "status": "running", "differs": "x"},
        )
    )
    assert isinstance(running, tl.RequestIdReused)
    assert (running.revision, running.request_status) == (0, "running")


def test_thread_busy_tells_whether_its_holder_is_this_request() -> None:
    held = translate(
        grpc_error(
            grpclib.const.Status.ABORTED,
            "THREAD_BUSY",
            {"run_id": "run-1", "request_id": "req-1", "lease_expires_at": "", "queue_length": "2"},
        )
    )
    assert isinstance(held, tl.ThreadBusy)
    assert held.is_own("req-1") and not held.is_own("req-2") and not held.is_own("")
    assert held.queue_length == 2
    assert pickle.loads(pickle.dumps(held)).is_own("req-1")
    nameless = translate(grpc_error(grpclib.const.Status.ABORTED, "THREAD_BUSY"))
    assert isinstance(nameless, tl.ThreadBusy)
    assert not nameless.is_own("") and not nameless.is_own("req-1") and nameless.queue_length == 0


HARNESS = Path(__file__).resolve().parents[3] / "harness"
"""The server's core, whose fixed texts the SDK repeats."""


def test_the_cores_fixed_texts() -> None:
    assert tl.UNANSWERED_APPROVAL_MESSAGE == "Not approved: the thread continued without an answer."
    assert tl.NOT_EXECUTED_TOOL_RESULT == "The tool call was not executed: its tool is no longer available."
    # Where the core defines a constant of the same name, its text is the SDK's.
    source = "\n".join(path.read_text("utf-8") for path in sorted(HARNESS.rglob("*.py")))
    found = {
        name: ast.literal_eval(literal)
        for name, literal in re.findall(r'^([A-Z_]+) = ("[^"\n]*")$', source, re.M)
        if name in ("UNANSWERED_APPROVAL_MESSAGE", "NOT_EXECUTED_TOOL_RESULT")
    }
    assert "NOT_EXECUTED_TOOL_RESULT" in found
    assert all(getattr(tl, name) == text for name, text in found.items()), found


def test_missing_or_malformed_metadata_reads_as_empty() -> None:
    busy = translate(grpc_error(grpclib.const.Status.ABORTED, "THREAD_BUSY", {"lease_expires_at": "soon"}))
    assert isinstance(busy, tl.ThreadBusy)
    assert (busy.run_id, busy.request_id, busy.lease_expires_at) == ("", "", None)
    conflict = translate(
        grpc_error(grpclib.const.Status.ABORTED, "REVISION_CONFLICT", {"current_revision": "x"})
    )
    assert isinstance(conflict, tl.RevisionConflict) and conflict.current_revision == 0
    slow = translate(
        grpc_error(grpclib.const.Status.RESOURCE_EXHAUSTED, "LISTENER_TOO_SLOW", {"backlog": "many"})
    )
    assert isinstance(slow, tl.ListenerTooSlow)
    assert (slow.thread_id, slow.run_id, slow.request_id, slow.backlog) == ("", "", "", 0)
    lost = translate(grpc_error(grpclib.const.Status.ABORTED, "RUN_ATTEMPT_LOST", {"last_sequence": "?"}))
    assert isinstance(lost, tl.RunAttemptLost)
    assert (lost.run_id, lost.last_sequence, lost.next_run_id) == ("", 0, "")


def test_other_reasons_and_domains_stay_plain_threadline_errors() -> None:
    other = translate(grpc_error(grpclib.const.Status.INVALID_ARGUMENT, "STATE_INVALID"))
    foreign = translate(grpc_error(grpclib.const.Status.NOT_FOUND, "THREAD_NOT_FOUND", domain="elsewhere"))
    bare = translate(grpclib.exceptions.GRPCError(grpclib.const.Status.UNAVAILABLE, "down"))
    for error in (other, foreign, bare):
        assert type(error) is tl.ThreadlineError
    assert other is not None and other.reason == "STATE_INVALID"


# --- answers ---------------------------------------------------------------------------------------


def _batch() -> tl.DeferredToolRequests:
    return tl.DeferredToolRequests(
        calls=[
            tl.DeferredToolCall(tool_call_id="c1", tool_name="t", kind=tl.DeferredKind.EXTERNAL),
            tl.DeferredToolCall(tool_call_id="q1", tool_name="ask", kind=tl.DeferredKind.QUESTION),
        ],
        approvals=[tl.DeferredToolCall(tool_call_id="a1", tool_name="d", kind=tl.DeferredKind.APPROVAL)],
    )


def test_answers_sorts_each_answer_into_its_category_in_order() -> None:
    batch = _batch()
    ext, question, approval = batch.calls[0], batch.calls[1], batch.approvals[0]
    replies: list[v1.ApprovalResult | v1.CallResult] = [
        tl.external_result(question, "yes"),
        tl.approve(approval),
        tl.external_failure(ext, "boom"),
    ]

    results = tl.answers(*replies)

    assert results == v1.DeferredToolResults(
        calls=[
            v1.CallResult(tool_call_id="q1", value_json='"yes"'),
            v1.CallResult(tool_call_id="c1", failed=v1.ToolFailedResult(message="boom")),
        ],
        approvals=[v1.ApprovalResult(tool_call_id="a1", approved=v1.ToolApproved())],
    )
    # The same answers build the HarnessService resume, around the same results.
    assert tl.resume(batch, replies) == tl.DeferredToolResume(requests=batch, results=results)
    assert tl.answers() == v1.DeferredToolResults()


def test_answers_refuses_anything_else() -> None:
    with pytest.raises(TypeError, match="ApprovalResult or a CallResult, not str"):
        tl.answers("yes")  # type: ignore[arg-type]  # the mistake under test


# --- ThreadRunStream -------------------------------------------------------------------------------


def _started(seq: int = 0) -> tl.RunEvent:
    return tl.RunEvent(sequence=seq, run_started=v1.RunStarted())


def _committed(seq: int, revision: int, kind: tl.CheckpointKind, *, replayed: bool = False) -> tl.RunEvent:
    return tl.RunEvent(
        sequence=seq, thread_committed=v1.ThreadCommitted(revision=revision, kind=kind, replayed=replayed)
    )


RESULT = tl.RunResult(status=tl.RunStatus.COMPLETED, output_json='"hi"')


def _result(seq: int) -> tl.RunEvent:
    return tl.RunEvent(sequence=seq, result=RESULT)


async def _responses(*responses: v1.StreamThreadRunResponse) -> AsyncIterator[v1.StreamThreadRunResponse]:
    for response in responses:
        yield response


def _stream(*responses: v1.StreamThreadRunResponse) -> tl.ThreadRunStream:
    return tl.ThreadRunStream(_responses(*responses), thread_id="thread_t", request_id="req-1")


@pytest.mark.anyio
async def test_the_outcome_is_the_last_commit_before_the_result() -> None:
    stream = _stream(
        v1.StreamThreadRunResponse(event=_started()),
        v1.StreamThreadRunResponse(
            events=[_committed(1, 2, tl.CheckpointKind.MID_RUN), _committed(2, 3, tl.CheckpointKind.MID_RUN)]
        ),
        v1.StreamThreadRunResponse(events=[_committed(3, 4, tl.CheckpointKind.COMPLETED), _result(4)]),
    )
    seen: list[int] = []
    async for event in stream:
        seen.append(stream.revision)
        assert (stream.outcome is None) == (event.result is None)
    assert seen == [0, 2, 3, 4, 4]
    outcome = await stream.collect()
    assert outcome == tl.ThreadRunOutcome(result=RESULT, revision=4, replayed=False)
    assert stream.outcome == outcome
    assert (stream.thread_id, stream.request_id) == ("thread_t", "req-1")


@pytest.mark.anyio
async def test_a_replay_says_so_and_a_run_without_commits_has_revision_zero() -> None:
    replay = _stream(
        v1.StreamThreadRunResponse(event=_started()),
        v1.StreamThreadRunResponse(event=_committed(1, 9, tl.CheckpointKind.COMPLETED, replayed=True)),
        v1.StreamThreadRunResponse(event=_result(2)),
    )
    outcome = await replay.collect()
    assert (outcome.revision, outcome.replayed) == (9, True)

    closed = await _stream(v1.StreamThreadRunResponse(events=[_started(), _result(1)])).collect()
    assert (closed.revision, closed.replayed) == (0, False)


@pytest.mark.anyio
async def test_a_thread_stream_without_its_result_is_a_protocol_error() -> None:
    stream = _stream(v1.StreamThreadRunResponse(event=_started()))
    with pytest.raises(tl.ProtocolError, match="ended without its terminal result"):
        await stream.collect()
    empty = _stream(v1.StreamThreadRunResponse())
    with pytest.raises(tl.ProtocolError) as caught:
        await anext(empty)
    assert caught.value.message == "the server's response has no StreamThreadRunResponse.event or .events"


# --- request IDs and the request ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_request_gets_a_fresh_request_id_unless_given() -> None:
    async with tl.Client("127.0.0.1:1") as client:  # nothing is sent until the stream is read
        ids = {client.threads.stream("thread_t", text="hi").request_id for _ in range(50)}
        given = client.threads.stream("thread_t", text="hi", request_id="req-mine")
    assert len(ids) == 50 and all(re.fullmatch(r"req-[0-9a-f]{32}", i) for i in ids)
    assert given.request_id == "req-mine"


@pytest.mark.anyio
async def test_a_prompt_is_text_or_parts_not_both() -> None:
    async with tl.Client("127.0.0.1:1") as client:
        with pytest.raises(ValueError, match="not both"):
            client.threads.stream("thread_t", text="hi", parts=v1.PromptParts())
        with pytest.raises(ValueError, match="not both"):
            await client.threads.run("thread_t", text="hi", parts=v1.PromptParts())


# --- run() retries UNAVAILABLE ---------------------------------------------------------------------


@asynccontextmanager
async def dropping_listener() -> AsyncIterator[tuple[str, list[float]]]:
    """A loopback listener that accepts each connection and closes it at once (a transport failure);
    yields its address and the monotonic times it accepted connections at."""
    accepted: list[float] = []

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(time.monotonic())
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}", accepted
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.anyio
async def test_run_retries_a_transport_failure_three_times_then_raises_unavailable() -> None:
    async with dropping_listener() as (addr, accepted), tl.Client(addr, timeout=30.0) as client:
        started = time.monotonic()
        with pytest.raises(tl.ThreadlineError) as caught:
            await client.threads.run("thread_t", text="hi")
    assert caught.value.status == tl.StatusCode.UNAVAILABLE
    assert len(accepted) == 1 + 3
    gaps = [b - a for a, b in zip([started, *accepted], accepted, strict=False)][1:]
    # 0.2, 0.4, 0.8 s of backoff: a lower bound that holds on any machine (no upper bound needed).
    assert all(gap >= backoff for gap, backoff in zip(gaps, (0.2, 0.4, 0.8), strict=True)), gaps


@pytest.mark.anyio
async def test_start_run_retries_a_transport_failure_as_run_does() -> None:
    async with dropping_listener() as (addr, accepted), tl.Client(addr, timeout=30.0) as client:
        with pytest.raises(tl.ThreadlineError) as caught:
            await client.threads.start_run("thread_t", text="hi")
        assert caught.value.status == tl.StatusCode.UNAVAILABLE and len(accepted) == 1 + 3
        with pytest.raises(tl.ThreadlineError) as caught:
            await client.threads.start_run("thread_t", text="hi", timeout=0.5)
        assert caught.value.status == tl.StatusCode.UNAVAILABLE and len(accepted) == 4 + 2
        with pytest.raises(ValueError, match="not both"):
            await client.threads.start_run("thread_t", text="hi", parts=v1.PromptParts())


@pytest.mark.anyio
async def test_run_retries_only_within_its_deadline() -> None:
    async with dropping_listener() as (addr, accepted), tl.Client(addr) as client:
        with pytest.raises(tl.ThreadlineError) as caught:
            await client.threads.run("thread_t", text="hi", timeout=0.5)
    # A retry that would start past the deadline is not made: after the first one (at 0.2 s), the
    # next backoff (0.4 s) no longer fits.
    assert caught.value.status == tl.StatusCode.UNAVAILABLE
    assert len(accepted) == 2


@pytest.mark.anyio
async def test_a_stream_that_never_connects_tries_again_then_raises_unavailable() -> None:
    async with dropping_listener() as (addr, accepted), tl.Client(addr, timeout=30.0) as client:
        stream = client.threads.stream("thread_t", text="hi")
        with pytest.raises(tl.ThreadlineError) as caught:
            await stream.collect()
    # Nothing received: the request is sent again (same request ID), RECONNECTS times, then it gives up.
    assert caught.value.status == tl.StatusCode.UNAVAILABLE
    assert len(accepted) == 1 + RECONNECTS and stream.reconnects == RECONNECTS
    gaps = [b - a for a, b in itertools.pairwise(accepted)]
    assert all(gap >= backoff for gap, backoff in zip(gaps, (0.2, 0.4, 0.8, 1.6, 2.0), strict=True)), gaps


@pytest.mark.anyio
async def test_without_reconnect_a_stream_does_not_retry() -> None:
    async with dropping_listener() as (addr, accepted), tl.Client(addr, timeout=30.0) as client:
        stream = client.threads.stream("thread_t", text="hi", reconnect=False)
        with pytest.raises(tl.ThreadlineError) as caught:
            await stream.collect()
        joined = client.threads.join_run("thread_t", run_id="run-1", reconnect=False)
        with pytest.raises(tl.ThreadlineError) as join_caught:
            await joined.collect()
        watch = client.threads.watch_thread("thread_t", reconnect=False)
        with pytest.raises(tl.ThreadlineError) as watch_caught:
            await anext(watch)
    assert caught.value.status == join_caught.value.status == watch_caught.value.status
    assert caught.value.status == tl.StatusCode.UNAVAILABLE
    assert len(accepted) == 3 and stream.reconnects == joined.reconnects == watch.reconnects == 0


@pytest.mark.anyio
async def test_a_join_and_a_watch_reconnect_within_their_deadline() -> None:
    async with dropping_listener() as (addr, accepted), tl.Client(addr) as client:
        joined = client.threads.join_run("thread_t", run_id="run-1", timeout=0.5)
        with pytest.raises(tl.ThreadlineError) as caught:
            await joined.collect()
        assert caught.value.status == tl.StatusCode.UNAVAILABLE
        # As run(): after the reconnect at 0.2 s, the next pause (0.4 s) no longer fits.
        assert len(accepted) == 2 and joined.reconnects == 1
        async with client.threads.watch_thread("thread_t", timeout=0.5) as watch:
            with pytest.raises(tl.ThreadlineError) as watch_caught:
                await anext(watch)
        assert watch_caught.value.status == tl.StatusCode.UNAVAILABLE
        assert len(accepted) == 4 and watch.reconnects == 1
