"""Durable threads driven end to end through `client.threads` against a real `threadline serve`.

The suite's server keeps its threads in memory (`--store memory`). Its "default" agent is the
scripted demo (`server/demo.py`): `delete <path>` asks for approval, `lookup` calls a plain tool,
`count` bumps a counter in capability state, `sleep <s>` sleeps, `client:<name> {json}` calls a
client tool the host declared, and anything else is echoed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import struct
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import threadline_client as tl
from threadline_client import v1

pytestmark = pytest.mark.anyio

GET_WEATHER = tl.client_tool(
    "get_weather",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    description="The weather in a city.",
)


def fresh_id(what: str = "sdk") -> str:
    return f"thread_{what}{uuid.uuid4().hex[:12]}"


def cases(events: list[tl.RunEvent]) -> list[str]:
    return [tl.event_case(e) for e in events]


async def suspended_on_delete(
    client: tl.Client, path: str = "notes.txt"
) -> tuple[tl.Thread, tl.DeferredToolCall]:
    """A new thread suspended on the approval of `delete_file(path)`, and that call."""
    thread = await client.threads.create()
    outcome = await client.threads.run(thread.thread_id, text=f"delete {path}")
    assert outcome.result.status == tl.RunStatus.SUSPENDED
    thread = await client.threads.get(thread.thread_id)
    assert thread.status == tl.ThreadStatus.SUSPENDED and thread.pending is not None
    (call,) = thread.pending.approvals
    assert (call.tool_name, tl.call_args(call)) == ("delete_file", {"path": path})
    return thread, call


async def sleeping(client: tl.Client, thread_id: str) -> tuple[tl.ThreadRunStream, str]:
    """A stream of a run that sleeps 30 s, read until the `sleep` tool is called; and the run's ID.

    Waiting for the tool call (not only `run_started`) cancels a run that is inside a tool, clear of
    its checkpoint boundaries (a cancel at a boundary is its own scenario below).
    """
    stream = client.threads.stream(thread_id, text="sleep 30")
    first = await anext(stream)
    assert tl.event_case(first) == "run_started" and first.run_id.startswith("run-")
    async for event in stream:
        if event.tool_call is not None:
            assert event.tool_call.tool_name == "sleep"
            break
    return stream, first.run_id


# --- create, get, list, delete -------------------------------------------------------------------


async def test_create_get_list_and_delete(client: tl.Client) -> None:
    label = uuid.uuid4().hex
    made = await client.threads.create(labels={"suite": label, "n": "1"})

    assert made.thread_id.startswith("thread_") and made.agent == "default"
    assert (made.status, made.revision, made.labels) == (tl.ThreadStatus.IDLE, 1, {"suite": label, "n": "1"})
    assert made.head is not None and made.head.kind == tl.CheckpointKind.CREATED and made.head.state is None
    assert made.pending is None and made.lease is None and not made.recovery_pending
    full = await client.threads.get(made.thread_id, full=True)
    assert full.head is not None and full.head.state is not None
    assert full.head.state.thread_id == made.thread_id
    assert (await client.threads.get(made.thread_id)).head.state is None  # type: ignore[union-attr]

    chosen = fresh_id()
    assert (await client.threads.create(thread_id=chosen, labels={"suite": label})).thread_id == chosen
    with pytest.raises(tl.ThreadExists) as exists:
        await client.threads.create(thread_id=chosen)
    assert (exists.value.status, exists.value.reason) == (tl.StatusCode.ALREADY_EXISTS, "THREAD_EXISTS")
    third = await client.threads.create(labels={"suite": label})

    every = {made.thread_id, chosen, third.thread_id}
    assert {t.thread_id async for t in client.threads.list(labels={"suite": label})} == every
    walked = [t.thread_id async for t in client.threads.list(labels={"suite": label}, page_size=1)]
    assert sorted(walked) == sorted(every), "every page, each thread once"
    page = await client.threads.list_page(labels={"suite": label}, page_size=2)
    assert len(page.threads) == 2 and page.next_page_token
    assert [t.thread_id async for t in client.threads.list(labels={"suite": label, "n": "1"})] == [
        made.thread_id
    ]
    assert [
        t async for t in client.threads.list(labels={"suite": label}, status=tl.ThreadStatus.SUSPENDED)
    ] == []

    with pytest.raises(tl.RevisionConflict) as conflict:
        await client.threads.delete(chosen, expected_revision=5)
    assert conflict.value.current_revision == 1
    await client.threads.delete(chosen, expected_revision=1)
    await client.threads.delete(third.thread_id)
    with pytest.raises(tl.ThreadNotFound) as gone:
        await client.threads.get(chosen)
    assert (gone.value.status, gone.value.reason) == (tl.StatusCode.NOT_FOUND, "THREAD_NOT_FOUND")
    assert [t.thread_id async for t in client.threads.list(labels={"suite": label})] == [made.thread_id]


async def test_missing_checkpoints_runs_and_threads_are_typed(client: tl.Client) -> None:
    thread = await client.threads.create()
    with pytest.raises(tl.CheckpointNotFound):
        await client.threads.checkpoint(thread.thread_id, 99)
    with pytest.raises(tl.RunNotFound):
        await client.threads.cancel(thread.thread_id, f"run-{uuid.uuid4().hex}")
    with pytest.raises(tl.ThreadNotFound):
        await client.threads.run(fresh_id("missing"), text="hello")
    with pytest.raises(tl.ThreadNotFound):
        [c async for c in client.threads.checkpoints(fresh_id("missing"))]


async def test_server_info_names_the_thread_store(client: tl.Client) -> None:
    info = await client.get_server_info()
    assert info.thread_store is not None
    assert info.thread_store.kind == v1.ThreadStoreKind.MEMORY


# --- import --------------------------------------------------------------------------------------


async def test_import_a_suspended_state_and_answer_it_by_call_id(client: tl.Client) -> None:
    held = await client.run(tl.RunSpec(text="delete notes.txt"))  # HarnessService: the host holds it
    assert held.status == tl.RunStatus.SUSPENDED and held.state is not None and held.deferred is not None

    thread = await client.threads.create(state=held.state, pending=held.deferred)

    assert thread.thread_id == held.state.thread_id
    assert thread.status == tl.ThreadStatus.SUSPENDED
    assert thread.head is not None and thread.head.kind == tl.CheckpointKind.IMPORTED
    assert thread.pending is not None
    (call,) = thread.pending.approvals  # answered from what the thread says, not from `held`
    assert call.tool_call_id == held.deferred.approvals[0].tool_call_id

    outcome = await client.threads.run(thread.thread_id, answers=tl.answers(tl.approve(call)))

    assert outcome.result.status == tl.RunStatus.COMPLETED
    assert tl.output(outcome.result) == "Tool results: delete_file: Deleted notes.txt."
    after = await client.threads.get(thread.thread_id)
    assert (after.status, after.pending, after.revision) == (tl.ThreadStatus.IDLE, None, outcome.revision)


async def test_an_import_whose_batch_does_not_match_its_state_is_refused(client: tl.Client) -> None:
    held = await client.run(tl.RunSpec(text="delete notes.txt"))
    empty = await client.new_state()
    assert held.deferred is not None

    with pytest.raises(tl.ThreadlineError) as caught:
        await client.threads.create(state=empty, pending=held.deferred)

    assert caught.value.status == tl.StatusCode.FAILED_PRECONDITION
    assert caught.value.reason == "DEFERRED_REQUEST_MISSING"
    with pytest.raises(tl.ThreadNotFound):
        await client.threads.get(empty.thread_id)


# --- streaming a turn ----------------------------------------------------------------------------


async def test_stream_a_turn(client: tl.Client) -> None:
    thread = await client.threads.create()

    async with client.threads.stream(thread.thread_id, text="lookup threadline") as stream:
        events = [event async for event in stream]

    kinds = cases(events)
    assert [e.sequence for e in events] == list(range(len(events)))
    assert kinds[0] == "run_started" and kinds[-2:] == ["thread_committed", "result"]
    assert kinds.count("result") == 1 and "checkpoint_candidate" not in kinds
    assert {"tool_call", "tool_result", "part_delta"} <= set(kinds)
    assert all(e.thread_id == thread.thread_id for e in events)
    commits = [e.thread_committed for e in events if e.thread_committed is not None]
    revisions = [c.revision for c in commits]
    assert revisions == sorted(set(revisions)) and revisions[0] > thread.revision
    assert [c.kind for c in commits[:-1]] == [tl.CheckpointKind.MID_RUN] * (len(commits) - 1)
    assert commits[-1].kind == tl.CheckpointKind.COMPLETED and not any(c.replayed for c in commits)

    outcome = stream.outcome
    assert outcome is not None and outcome == await stream.collect()
    result = outcome.result
    assert result.status == tl.RunStatus.COMPLETED and result.state is None, "the state is the checkpoint"
    assert result.request_id == stream.request_id and result.thread_id == thread.thread_id
    assert (outcome.revision, outcome.replayed) == (revisions[-1], False)
    assert (await client.threads.get(thread.thread_id)).revision == outcome.revision
    head = await client.threads.checkpoint(thread.thread_id, outcome.revision)
    assert head.kind == tl.CheckpointKind.COMPLETED and head.request_id == stream.request_id
    assert head.state is not None and head.state.message_history is not None
    assert "lookup" in head.state.message_history.data

    listed = [c async for c in client.threads.checkpoints(thread.thread_id, page_size=2)]
    assert [c.revision for c in listed] == list(range(outcome.revision, 0, -1)), "newest first, every page"
    assert all(c.state is None for c in listed)

    second = await client.threads.stream(thread.thread_id, text="hello").collect()
    assert second.revision > outcome.revision
    assert tl.output(second.result) == "You said: hello"


# --- deferred calls ------------------------------------------------------------------------------


async def test_approve_and_deny_by_answers(client: tl.Client) -> None:
    thread, call = await suspended_on_delete(client)

    approved = await client.threads.stream(thread.thread_id, answers=tl.answers(tl.approve(call))).collect()
    assert tl.output(approved.result) == "Tool results: delete_file: Deleted notes.txt."

    denied_on = await client.threads.run(thread.thread_id, text="delete b.txt")
    assert denied_on.result.deferred is not None
    (other,) = denied_on.result.deferred.approvals
    denied = await client.threads.run(thread.thread_id, answers=tl.answers(tl.deny(other, "keep it")))
    assert tl.output(denied.result) == "Tool results: delete_file: keep it"

    with pytest.raises(tl.ThreadNotSuspended) as idle:
        await client.threads.run(thread.thread_id, answers=tl.answers(tl.approve(other)))
    assert (idle.value.status, idle.value.reason) == (
        tl.StatusCode.FAILED_PRECONDITION,
        "THREAD_NOT_SUSPENDED",
    )


async def test_answers_after_a_prompt_took_the_batch_name_that_prompt_and_its_id_is_not_reused(
    client: tl.Client,
) -> None:
    thread, call = await suspended_on_delete(client, "a.txt")
    assert thread.head is not None and thread.head.kind == tl.CheckpointKind.SUSPENDED
    suspended_revision = thread.revision
    never_mind_id = f"req-{uuid.uuid4().hex}"

    # A prompt without answers continues the SUSPENDED thread: it takes the pending batch.
    never_mind = await client.threads.run(thread.thread_id, text="never mind", request_id=never_mind_id)
    assert never_mind.result.status == tl.RunStatus.COMPLETED and never_mind.revision > suspended_revision
    assert (await client.threads.get(thread.thread_id)).status == tl.ThreadStatus.IDLE

    # The host's answers to the old approval, late, under a new request ID.
    late_id = f"req-{uuid.uuid4().hex}"
    with pytest.raises(tl.ThreadNotSuspended) as late:
        await client.threads.run(thread.thread_id, answers=tl.answers(tl.approve(call)), request_id=late_id)
    assert (late.value.status, late.value.thread_id) == (tl.StatusCode.FAILED_PRECONDITION, thread.thread_id)
    assert late.value.thread_status == "THREAD_STATUS_IDLE"
    assert late.value.answered_by == tl.AnsweredBy(
        request_id=never_mind_id,
        revision=suspended_revision,
        how="prompt",
        run_revision=never_mind.revision,
        matches=True,
    )

    # The never-mind request's ID again, with another prompt: the server says what that request did.
    with pytest.raises(tl.RequestIdReused) as reused:
        await client.threads.run(thread.thread_id, text="delete b.txt", request_id=never_mind_id)
    assert reused.value.status == tl.StatusCode.INVALID_ARGUMENT
    assert (reused.value.request_id, reused.value.differs, reused.value.request_status) == (
        never_mind_id,
        ("prompt",),
        "completed",
    )
    assert (reused.value.run_id, reused.value.revision) == (never_mind.result.run_id, never_mind.revision)
    assert (await client.threads.get(thread.thread_id)).revision == never_mind.revision, "nothing ran"


async def test_an_incomplete_answer_is_refused_and_the_thread_stays_suspended(client: tl.Client) -> None:
    thread, _ = await suspended_on_delete(client)
    with pytest.raises(tl.ThreadlineError) as caught:
        await client.threads.run(thread.thread_id, answers=tl.answers())
    assert caught.value.reason == "DEFERRED_RESULTS_INCOMPLETE"
    assert (await client.threads.get(thread.thread_id)).status == tl.ThreadStatus.SUSPENDED


async def test_a_client_tool_answered_without_declaring_it_again(client: tl.Client) -> None:
    thread = await client.threads.create()
    first = await client.threads.run(
        thread.thread_id, text='client:get_weather {"city":"Paris"}', client_tools=[GET_WEATHER]
    )
    assert first.result.status == tl.RunStatus.SUSPENDED and first.result.deferred is not None
    (call,) = first.result.deferred.calls
    assert call.kind == tl.DeferredKind.EXTERNAL and tl.call_args(call) == {"city": "Paris"}
    head = await client.threads.checkpoint(thread.thread_id, first.revision)
    assert [t.name for t in head.client_tools] == ["get_weather"]

    # No client tools declared: the pending call meets the tools the head was made with.
    done = await client.threads.run(
        thread.thread_id, answers=tl.answers(tl.external_result(call, {"sky": "clear", "temp_c": 21}))
    )

    assert done.result.status == tl.RunStatus.COMPLETED
    text = tl.output(done.result)
    assert text.startswith("Tool results: get_weather:") and "21" in text and "clear" in text


# --- fork and rollback ---------------------------------------------------------------------------


async def test_a_fork_of_a_suspended_thread_is_suspended_on_the_same_calls(client: tl.Client) -> None:
    source, call = await suspended_on_delete(client)
    label = uuid.uuid4().hex

    fork = await client.threads.fork(source.thread_id, labels={"fork": label})

    assert fork.thread_id != source.thread_id and fork.labels == {"fork": label}
    assert (fork.status, fork.revision) == (tl.ThreadStatus.SUSPENDED, 1)
    assert fork.head is not None and fork.head.kind == tl.CheckpointKind.FORKED
    assert fork.pending is not None and [c.tool_call_id for c in tl.pending(fork.pending)] == [
        call.tool_call_id
    ]

    done = await client.threads.run(fork.thread_id, answers=tl.answers(tl.approve(fork.pending.approvals[0])))
    assert tl.output(done.result) == "Tool results: delete_file: Deleted notes.txt."
    assert (await client.threads.get(source.thread_id)).status == tl.ThreadStatus.SUSPENDED, (
        "source untouched"
    )

    with pytest.raises(tl.ThreadlineError) as onto_itself:
        await client.threads.fork(source.thread_id, new_thread_id=source.thread_id)
    assert onto_itself.value.reason == "FORK_THREAD_ID_CONFLICT"
    with pytest.raises(tl.ThreadExists):
        await client.threads.fork(source.thread_id, new_thread_id=fork.thread_id)
    with pytest.raises(tl.CheckpointNotFound):
        await client.threads.fork(source.thread_id, revision=999)


async def test_rollback_makes_an_earlier_checkpoint_current(client: tl.Client) -> None:
    thread = await client.threads.create()
    once = await client.threads.run(thread.thread_id, text="count")
    twice = await client.threads.run(thread.thread_id, text="count")
    assert tl.output(once.result) == "Tool results: count: 1"
    assert tl.output(twice.result) == "Tool results: count: 2"

    with pytest.raises(tl.RevisionConflict) as stale:
        await client.threads.rollback(thread.thread_id, once.revision, expected_revision=once.revision)
    assert stale.value.current_revision == twice.revision
    rolled = await client.threads.rollback(thread.thread_id, once.revision, expected_revision=twice.revision)

    assert rolled.revision == twice.revision + 1 and rolled.status == tl.ThreadStatus.IDLE
    assert rolled.head is not None and rolled.head.kind == tl.CheckpointKind.ROLLED_BACK
    again = await client.threads.run(thread.thread_id, text="count")
    assert tl.output(again.result) == "Tool results: count: 2", "the counter came back with the checkpoint"
    with pytest.raises(tl.CheckpointNotFound):
        await client.threads.rollback(thread.thread_id, 999)


# --- cancel, busy, conflict ----------------------------------------------------------------------


async def test_cancel_ends_the_run_cancelled(client: tl.Client) -> None:
    thread = await client.threads.create()
    stream, run_id = await sleeping(client, thread.thread_id)
    async with stream:
        status = await client.threads.cancel(thread.thread_id, run_id)
        assert status in (tl.ThreadRunStatus.RUNNING, tl.ThreadRunStatus.CANCELLED)
        outcome = await stream.collect()  # well before the 30 s sleep would end

    assert outcome.result.status == tl.RunStatus.CANCELLED and outcome.result.run_id == run_id
    head = await client.threads.checkpoint(thread.thread_id, outcome.revision)
    assert head.kind == tl.CheckpointKind.CANCELLED and head.run_id == run_id
    assert await client.threads.cancel(thread.thread_id, run_id) == tl.ThreadRunStatus.CANCELLED
    assert (await client.threads.get(thread.thread_id)).status == tl.ThreadStatus.IDLE


async def test_a_cancel_right_after_run_started_ends_the_run_cancelled(client: tl.Client) -> None:
    """The cancel lands while the server commits the run's first checkpoints, not inside a tool."""
    for _ in range(10):  # each lands at a different point of the first model request
        thread = await client.threads.create()
        stream = client.threads.stream(thread.thread_id, text="sleep 30", timeout=20)
        async with stream:
            first = await anext(stream)
            await client.threads.cancel(thread.thread_id, first.run_id)
            outcome = await stream.collect()
        assert outcome.result.status == tl.RunStatus.CANCELLED
        assert (await client.threads.get(thread.thread_id)).status == tl.ThreadStatus.IDLE


async def test_a_second_run_while_one_runs_is_busy(client: tl.Client) -> None:
    thread = await client.threads.create()
    stream, run_id = await sleeping(client, thread.thread_id)
    async with stream:
        running = await client.threads.get(thread.thread_id)
        assert running.status == tl.ThreadStatus.RUNNING and running.lease is not None
        assert (running.lease.run_id, running.lease.request_id) == (run_id, stream.request_id)

        # (A retry of the running request itself is not busy: it attaches to the run, see below.)
        for busy_call in (
            client.threads.run(thread.thread_id, text="hello"),
            client.threads.delete(thread.thread_id),
        ):
            with pytest.raises(tl.ThreadBusy) as busy:
                await busy_call
            assert (busy.value.status, busy.value.reason) == (tl.StatusCode.ABORTED, "THREAD_BUSY")
            assert (busy.value.run_id, busy.value.request_id) == (run_id, stream.request_id)
            expires = busy.value.lease_expires_at
            assert expires is not None and expires > datetime.datetime.now(datetime.UTC) - datetime.timedelta(
                minutes=5
            )

        await client.threads.cancel(thread.thread_id, run_id)
        first = await stream.collect()

    # Once it finished, the retry gets its stored outcome.
    retried = await client.threads.run(thread.thread_id, text="sleep 30", request_id=stream.request_id)
    assert retried.replayed and retried.result.status == tl.RunStatus.CANCELLED
    assert (retried.result.run_id, retried.revision) == (run_id, first.revision)


async def test_a_stale_expected_revision_is_a_conflict(client: tl.Client) -> None:
    thread = await client.threads.create()
    moved = await client.threads.run(thread.thread_id, text="hello", expected_revision=thread.revision)
    assert moved.revision > thread.revision

    with pytest.raises(tl.RevisionConflict) as caught:
        await client.threads.run(thread.thread_id, text="hello", expected_revision=thread.revision)

    assert (caught.value.status, caught.value.reason) == (tl.StatusCode.ABORTED, "REVISION_CONFLICT")
    assert caught.value.current_revision == moved.revision
    assert (await client.threads.get(thread.thread_id)).revision == moved.revision, "nothing ran"
    with pytest.raises(tl.RevisionConflict):
        await client.threads.stream(thread.thread_id, text="hello", expected_revision=1).collect()


# --- request IDs: retry, replay, reuse -----------------------------------------------------------


async def test_the_same_request_id_runs_once_and_replays(client: tl.Client) -> None:
    thread = await client.threads.create()
    request_id = f"req-{uuid.uuid4().hex}"

    first = await client.threads.run(
        thread.thread_id, text="hello", request_id=request_id, expected_revision=thread.revision
    )
    # The retry carries the now stale expected_revision: a finished request is replayed regardless.
    again = await client.threads.run(
        thread.thread_id, text="hello", request_id=request_id, expected_revision=thread.revision
    )
    async with client.threads.stream(
        thread.thread_id, text="hello", request_id=request_id, expected_revision=thread.revision
    ) as stream:
        replay_events = [event async for event in stream]

    assert not first.replayed and again.replayed
    assert again.revision == first.revision
    assert again.result.run_id == first.result.run_id and again.result.request_id == request_id
    assert tl.output(again.result) == tl.output(first.result) == "You said: hello"
    assert cases(replay_events) == ["run_started", "thread_committed", "result"]
    assert (
        stream.outcome is not None and stream.outcome.replayed and stream.outcome.revision == first.revision
    )
    assert all(e.run_id == first.result.run_id for e in replay_events)
    # One run: the thread did not move, and every checkpoint of the request has the same run.
    assert (await client.threads.get(thread.thread_id)).revision == first.revision
    runs = {
        c.run_id async for c in client.threads.checkpoints(thread.thread_id) if c.request_id == request_id
    }
    assert runs == {first.result.run_id}

    with pytest.raises(tl.RequestIdReused) as reused:
        await client.threads.run(thread.thread_id, text="something else", request_id=request_id)
    assert (reused.value.status, reused.value.reason) == (tl.StatusCode.INVALID_ARGUMENT, "REQUEST_ID_REUSED")


def _frame_header(header: bytes) -> tuple[int, int, int]:
    """An HTTP/2 frame header's (payload length, type, stream ID)."""
    return int.from_bytes(header[:3], "big"), header[3], struct.unpack(">I", header[5:9])[0] & 0x7FFFFFFF


@asynccontextmanager
async def cutting_proxy(upstream: str) -> AsyncIterator[tuple[str, list[str]]]:
    """A loopback proxy to `upstream` whose first connection is cut just as the server starts to
    answer a call (its first HEADERS frame on a stream): the server ran the call, the client never
    hears back. Later connections pass through. Yields its address and one entry per connection."""
    host, _, port = upstream.rpartition(":")
    seen: list[str] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def until_the_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Relay the server's frames (SETTINGS, PING, ...) up to the call's response headers."""
        while True:
            header = await reader.readexactly(9)
            length, kind, stream_id = _frame_header(header)
            payload = await reader.readexactly(length)
            if kind == 0x1 and stream_id != 0:
                return  # the call's response: never delivered
            writer.write(header + payload)
            await writer.drain()

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        if seen:
            seen.append("passed")
            await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
            return
        seen.append("cut")
        forward = asyncio.ensure_future(pipe(client_reader, server_writer))
        try:
            await until_the_answer(server_reader, client_writer)
        finally:
            forward.cancel()
            client_writer.transport.abort()
            server_writer.transport.abort()

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{proxy.sockets[0].getsockname()[1]}", seen
    finally:
        proxy.close()


async def test_run_retries_a_lost_answer_with_the_same_request_id(
    client: tl.Client, server_addr: str, server_token: str | None
) -> None:
    thread = await client.threads.create()

    async with (
        cutting_proxy(server_addr) as (addr, seen),
        tl.Client(addr, token=server_token, timeout=60.0) as cut,
    ):
        outcome = await cut.threads.run(thread.thread_id, text="hello")

    # The first attempt ran and committed; its answer was lost, so the SDK sent the request again
    # under the same ID, and the server answered it from its record instead of running it twice.
    assert seen == ["cut", "passed"]
    assert outcome.replayed and outcome.result.status == tl.RunStatus.COMPLETED
    assert tl.output(outcome.result) == "You said: hello"
    after = await client.threads.get(thread.thread_id)
    assert after.revision == outcome.revision
    runs = {c.run_id async for c in client.threads.checkpoints(thread.thread_id) if c.run_id}
    assert runs == {outcome.result.run_id}


# --- live runs: join, attach, reconnect, watch (LIVE §2) -----------------------------------------


class Forwarder:
    """A loopback TCP forwarder to `upstream` that can cut every connection it carries.

    `cut(down_for)` closes each connection at once (both sides, as a network failure would) and,
    for `down_for` seconds, closes every new one as soon as it is accepted; then it forwards again.
    """

    def __init__(self, upstream: str) -> None:
        self.point_to(upstream)
        self._live: set[asyncio.StreamWriter] = set()
        self._down_until = 0.0
        self.accepted = 0
        """Connections accepted, refused ones included."""
        self.cuts = 0
        self.addr = ""

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if asyncio.get_running_loop().time() < self._down_until:
            client_writer.transport.abort()
            return
        server_reader, server_writer = await asyncio.open_connection(*self._upstream)
        pair = {client_writer, server_writer}
        self._live |= pair
        try:
            await asyncio.gather(
                self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer)
            )
        finally:
            self._live -= pair

    def point_to(self, upstream: str) -> None:
        """Forward the connections accepted from now on to `upstream` (`host:port`)."""
        host, _, port = upstream.rpartition(":")
        self._upstream = (host.strip("[]"), int(port))

    def cut(self, down_for: float = 0.5) -> None:
        self.cuts += 1
        self._down_until = asyncio.get_running_loop().time() + down_for
        self.close()

    def close(self) -> None:
        for writer in list(self._live):
            writer.transport.abort()


@asynccontextmanager
async def forwarder(upstream: str) -> AsyncIterator[Forwarder]:
    relay = Forwarder(upstream)
    listener = await asyncio.start_server(relay._handle, "127.0.0.1", 0)
    relay.addr = f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        yield relay
    finally:
        listener.close()
        relay.close()


async def streamed(
    client: tl.Client, thread_id: str, text: str
) -> tuple[list[tl.RunEvent], tl.ThreadRunStream]:
    async with client.threads.stream(thread_id, text=text) as stream:
        events = [event async for event in stream]
    return events, stream


async def test_a_finished_run_joined_from_the_start_is_its_stream_again(client: tl.Client) -> None:
    thread = await client.threads.create()
    events, stream = await streamed(client, thread.thread_id, "lookup threadline")
    run_id = events[0].run_id

    async with client.threads.join_run(thread.thread_id, run_id=run_id) as joined:
        again = [event async for event in joined]

    # The same attempt: the same sequence numbers and the same content, the result included.
    assert [e.sequence for e in again] == [e.sequence for e in events] == list(range(len(events)))
    assert again == events
    assert joined.outcome == stream.outcome and joined.reconnects == 0
    assert (joined.run_id, joined.last_sequence, joined.request_id) == (
        run_id,
        events[-1].sequence,
        stream.request_id,
    )
    # Named by its request, or as the thread's latest run, it is the same attempt.
    by_request = await client.threads.join_run(thread.thread_id, request_id=stream.request_id).collect()
    latest = client.threads.join_run(thread.thread_id)
    assert [e async for e in latest] == events and by_request == stream.outcome

    with pytest.raises(tl.RunNotFound):
        await client.threads.join_run(thread.thread_id, run_id=f"run-{uuid.uuid4().hex}").collect()
    with pytest.raises(tl.ThreadNotFound):
        await client.threads.join_run(fresh_id("missing"), run_id=run_id).collect()


async def test_a_join_after_a_sequence_sends_exactly_the_events_after_it(client: tl.Client) -> None:
    thread = await client.threads.create()
    events, _ = await streamed(client, thread.thread_id, "lookup threadline")
    run_id, last = events[0].run_id, events[-1].sequence

    for after in (0, 1, len(events) // 2, last - 1):
        async with client.threads.join_run(thread.thread_id, run_id=run_id, after_sequence=after) as joined:
            assert [e async for e in joined] == events[after + 1 :], after
    # After the last one there is nothing left to send, and that is no error.
    nothing = client.threads.join_run(thread.thread_id, run_id=run_id, after_sequence=last)
    assert [e async for e in nothing] == [] and nothing.outcome is None


async def test_a_stream_cut_mid_run_is_resumed_without_a_gap_or_a_repeat(
    client: tl.Client, server_addr: str, server_token: str | None
) -> None:
    thread = await client.threads.create()

    async with (
        forwarder(server_addr) as relay,
        tl.Client(relay.addr, token=server_token, timeout=60.0) as cut,
    ):
        received: list[tl.RunEvent] = []
        async with cut.threads.stream(thread.thread_id, text="sleep 3") as stream:
            async for event in stream:
                received.append(event)
                if event.tool_call is not None and not relay.cuts:
                    relay.cut(down_for=0.5)  # mid-run: the sleep has 3 s to go
        outcome = stream.outcome

    assert relay.cuts == 1 and stream.reconnects >= 1 and relay.accepted >= 3, "cut, refused, then joined"
    assert outcome is not None and outcome.result.status == tl.RunStatus.COMPLETED
    assert [e.sequence for e in received] == list(range(len(received))), "no event twice, none lost"
    # Exactly the uncut stream: what a join from the start reads once the run is over.
    whole = [e async for e in client.threads.join_run(thread.thread_id, run_id=received[0].run_id)]
    assert received == whole
    assert cases(received).count("tool_call") == 1 and cases(received)[-1] == "result"
    assert (await client.threads.get(thread.thread_id)).revision == outcome.revision


async def test_a_join_cut_mid_run_reconnects_from_its_last_sequence(
    client: tl.Client, server_addr: str, server_token: str | None
) -> None:
    thread = await client.threads.create()
    stream, run_id = await sleeping_briefly(client, thread.thread_id)
    async with (
        stream,
        forwarder(server_addr) as relay,
        tl.Client(relay.addr, token=server_token, timeout=60.0) as cut,
    ):
        received: list[tl.RunEvent] = []
        async with cut.threads.join_run(thread.thread_id, run_id=run_id) as joined:
            async for event in joined:
                received.append(event)
                if event.tool_call is not None and not relay.cuts:
                    relay.cut(down_for=0.5)
        first = [e async for e in stream]

    assert relay.cuts == 1 and joined.reconnects >= 1
    assert [e.sequence for e in received] == list(range(len(received)))
    assert received[-len(first) :] == first and cases(received)[-1] == "result"


async def sleeping_briefly(client: tl.Client, thread_id: str) -> tuple[tl.ThreadRunStream, str]:
    """A stream of a `sleep 3` run, read up to its `run_started`; and the run's ID."""
    stream = client.threads.stream(thread_id, text="sleep 3")
    first = await anext(stream)
    assert tl.event_case(first) == "run_started"
    return stream, first.run_id


async def test_a_retry_of_a_running_request_attaches_from_its_first_event(client: tl.Client) -> None:
    thread = await client.threads.create()
    stream = client.threads.stream(thread.thread_id, text="sleep 3")
    async with stream:
        first: list[tl.RunEvent] = []
        async for event in stream:
            first.append(event)
            if event.tool_call is not None:
                break  # the run is inside its 3 s sleep

        # The same request again (same ID, same body): no THREAD_BUSY, the attempt from sequence 0;
        # and RunThread waits for its result.
        waiting = asyncio.ensure_future(
            client.threads.run(thread.thread_id, text="sleep 3", request_id=stream.request_id)
        )
        async with client.threads.stream(
            thread.thread_id, text="sleep 3", request_id=stream.request_id
        ) as again:
            attached = [event async for event in again]
        waited = await waiting
        first += [event async for event in stream]

    assert attached == first and [e.sequence for e in attached] == list(range(len(attached)))
    assert again.outcome == stream.outcome and not again.replayed
    assert waited.result == attached[-1].result and not waited.replayed
    assert waited.result.status == tl.RunStatus.COMPLETED and waited.revision == again.revision
    runs = {
        c.run_id
        async for c in client.threads.checkpoints(thread.thread_id)
        if c.request_id == stream.request_id
    }
    assert runs == {first[0].run_id}, "one run"


async def test_a_watch_sees_a_run_start_commit_and_end(client: tl.Client) -> None:
    thread = await client.threads.create()
    updates: list[tl.ThreadUpdate] = []
    async with client.threads.watch_thread(thread.thread_id, timeout=60) as watch:
        snapshot = await anext(watch)
        assert snapshot.changes == (tl.ThreadChange.SNAPSHOT,)
        assert (snapshot.thread.thread_id, snapshot.thread.revision) == (thread.thread_id, thread.revision)
        assert snapshot.thread.status == tl.ThreadStatus.IDLE
        run = asyncio.ensure_future(client.threads.run(thread.thread_id, text="lookup threadline"))
        async for update in watch:
            updates.append(update)
            if tl.ThreadChange.RUN_ENDED in update.changes:
                break
        outcome = await run

        await client.threads.delete(thread.thread_id)
        with pytest.raises(tl.ThreadNotFound):
            await anext(watch)

    seen = [kind for update in updates for kind in update.changes]
    assert {tl.ThreadChange.RUN_STARTED, tl.ThreadChange.COMMITTED, tl.ThreadChange.RUN_ENDED} <= set(seen)
    assert tl.ThreadChange.SNAPSHOT not in seen
    assert seen.index(tl.ThreadChange.RUN_STARTED) <= seen.index(tl.ThreadChange.COMMITTED)
    assert seen.index(tl.ThreadChange.COMMITTED) <= seen.index(tl.ThreadChange.RUN_ENDED)
    sequences = [snapshot.change_sequence] + [u.change_sequence for u in updates]
    assert sequences == sorted(set(sequences)), "each update newer than the last"
    started = next(u for u in updates if tl.ThreadChange.RUN_STARTED in u.changes)
    assert started.thread.status == tl.ThreadStatus.RUNNING and started.thread.lease is not None
    assert started.thread.lease.run_id == outcome.result.run_id
    ended = updates[-1].thread
    assert (ended.status, ended.lease, ended.revision) == (tl.ThreadStatus.IDLE, None, outcome.revision)


async def test_a_cut_watch_reconnects_to_a_new_snapshot(
    client: tl.Client, server_addr: str, server_token: str | None
) -> None:
    thread = await client.threads.create()
    async with (
        forwarder(server_addr) as relay,
        tl.Client(relay.addr, token=server_token, timeout=60.0) as cut,
        cut.threads.watch_thread(thread.thread_id, timeout=60) as watch,
    ):
        first = await anext(watch)
        relay.cut(down_for=0.5)
        moved = await client.threads.run(thread.thread_id, text="hello")  # while it is cut
        again = await anext(watch)

    assert first.changes == again.changes == (tl.ThreadChange.SNAPSHOT,)
    assert watch.reconnects >= 1 and again.change_sequence > first.change_sequence
    assert again.thread.revision == moved.revision


async def test_a_lost_attempt_is_followed_into_the_next_one(
    serve_with: Callable[..., AbstractContextManager[Any]], tmp_path: Path
) -> None:
    """Two servers on one SQLite file; the one running the turn is killed (-9) mid-run.

    The host's stream (through a forwarder, then pointed at the other server) reconnects by joining
    the run there, hears RUN_ATTEMPT_LOST once the dead server's lease is over, and sends its request
    again, which becomes the next attempt; a join by request on the other server follows it too.
    """
    store = ("--store", f"sqlite:{tmp_path / 'threads.db'}", "--lease-ttl", "2")
    with serve_with(*store) as first, serve_with(*store) as second:
        async with (
            tl.Client(second.addr, timeout=60.0) as other,
            forwarder(first.addr) as relay,
            tl.Client(relay.addr, timeout=60.0) as host,
        ):
            thread = await other.threads.create()
            stream = host.threads.stream(thread.thread_id, text="sleep 3")
            joined = other.threads.join_run(thread.thread_id, request_id=stream.request_id)
            async with stream, joined:
                received: list[tl.RunEvent] = []
                async for event in stream:
                    received.append(event)
                    if event.tool_call is not None:
                        break  # inside the 3 s sleep
                lost_run = received[0].run_id
                following = aiter(joined)
                followed = [await anext(following)]  # the join follows the running attempt now
                relay.point_to(second.addr)
                first.process.kill()  # kill -9 of the run's server
                received += [event async for event in stream]
                followed += [event async for event in following]

        starts = [i for i, event in enumerate(received) if event.run_started is not None]
        assert len(starts) == 2 and stream.reconnects >= 2, "joined, lost, then the request again"
        nxt = received[starts[1] :]
        assert nxt[0].run_id != lost_run and [e.sequence for e in nxt] == list(range(len(nxt)))
        assert [e.sequence for e in received[: starts[1]]] == list(range(starts[1])), "no gap, no repeat"
        # The join by request: the lost attempt's written events, then the next attempt whole.
        assert followed[-len(nxt) :] == nxt and joined.reconnects >= 1
        assert [e.run_id for e in followed[: -len(nxt)]] == [lost_run] * (len(followed) - len(nxt))
        assert followed[: -len(nxt)] == received[: len(followed) - len(nxt)]
        assert stream.outcome == joined.outcome and stream.outcome is not None


# --- background runs: start_run, events, result, cancel (LIVE §3) --------------------------------


async def test_a_started_run_answers_running_at_once_and_its_result_is_the_completed_outcome(
    client: tl.Client,
) -> None:
    thread = await client.threads.create()
    started = await client.threads.start_run(thread.thread_id, text="sleep 3")

    # Answered once the run holds the thread, well before its 3 s sleep ends.
    assert started.status == tl.ThreadRunStatus.RUNNING and not started.replayed
    assert started.run_id.startswith("run-") and started.request_id.startswith("req-")
    assert (started.thread_id, started.revision, started.outcome) == (thread.thread_id, thread.revision, None)
    running = await client.threads.get(thread.thread_id)
    assert running.status == tl.ThreadStatus.RUNNING and running.lease is not None
    assert (running.lease.run_id, running.lease.request_id) == (started.run_id, started.request_id)
    # The same request again while it runs answers the same.
    again = await client.threads.start_run(thread.thread_id, text="sleep 3", request_id=started.request_id)
    assert (again.run_id, again.status, again.revision, again.replayed) == (
        started.run_id,
        tl.ThreadRunStatus.RUNNING,
        thread.revision,
        False,
    )

    outcome = await started.result()

    assert outcome.result.status == tl.RunStatus.COMPLETED and not outcome.replayed
    assert (outcome.result.run_id, outcome.result.request_id) == (started.run_id, started.request_id)
    assert outcome.revision == (await client.threads.get(thread.thread_id)).revision > thread.revision
    # Once it finished, the same request again replays it: nothing runs again.
    done = await client.threads.start_run(thread.thread_id, text="sleep 3", request_id=started.request_id)
    assert (done.run_id, done.status, done.revision, done.replayed) == (
        started.run_id,
        tl.ThreadRunStatus.COMPLETED,
        outcome.revision,
        True,
    )
    assert done.outcome is not None and done.outcome.result == outcome.result and done.outcome.replayed
    assert await done.result() == done.outcome
    assert (await client.threads.get(thread.thread_id)).revision == outcome.revision


async def test_a_started_runs_events_are_its_attempt_from_run_started_to_result_each_once(
    client: tl.Client,
) -> None:
    thread = await client.threads.create()
    started = await client.threads.start_run(thread.thread_id, text="sleep 1")

    async with started.events() as joined:  # live: the run is in its sleep
        events = [event async for event in joined]

    assert [e.sequence for e in events] == list(range(len(events))), "from sequence 0, each once"
    assert cases(events)[0] == "run_started" and cases(events)[-1] == "result"
    assert cases(events).count("tool_call") == 1 and {e.run_id for e in events} == {started.run_id}
    assert joined.outcome == await started.result() and joined.request_id == started.request_id
    last = events[-1].sequence
    for after in (0, 1, len(events) // 2, last - 1):
        async with started.events(after_sequence=after) as rest:
            assert [e async for e in rest] == events[after + 1 :], after
    nothing = started.events(after_sequence=last)
    assert [e async for e in nothing] == [] and nothing.outcome is None


async def test_a_started_run_cancelled_ends_cancelled(client: tl.Client) -> None:
    thread = await client.threads.create()
    started = await client.threads.start_run(thread.thread_id, text="sleep 3")
    async with started.events() as joined:
        async for event in joined:
            if event.tool_call is not None:
                break  # inside its sleep, clear of its checkpoint boundaries

    status = await started.cancel()
    outcome = await started.result()  # well before the 3 s sleep would end

    assert status in (tl.ThreadRunStatus.RUNNING, tl.ThreadRunStatus.CANCELLED)
    assert outcome.result.status == tl.RunStatus.CANCELLED and outcome.result.run_id == started.run_id
    head = await client.threads.checkpoint(thread.thread_id, outcome.revision)
    assert head.kind == tl.CheckpointKind.CANCELLED and head.run_id == started.run_id
    assert await started.cancel() == tl.ThreadRunStatus.CANCELLED
    assert (await client.threads.get(thread.thread_id)).status == tl.ThreadStatus.IDLE


async def test_a_run_known_only_by_its_request_id_is_cancelled_by_it(client: tl.Client) -> None:
    thread = await client.threads.create()
    request_id = f"req-{uuid.uuid4().hex}"
    started = await client.threads.start_run(thread.thread_id, text="sleep 3", request_id=request_id)
    async with started.events() as joined:
        async for event in joined:
            if event.tool_call is not None:
                break

    status = await client.threads.cancel(thread.thread_id, request_id=request_id)
    outcome = await started.result()

    assert status in (tl.ThreadRunStatus.RUNNING, tl.ThreadRunStatus.CANCELLED)
    assert outcome.result.status == tl.RunStatus.CANCELLED and outcome.result.request_id == request_id
    both = await client.threads.cancel(thread.thread_id, started.run_id, request_id=request_id)
    assert both == tl.ThreadRunStatus.CANCELLED
    with pytest.raises(tl.RunNotFound):
        await client.threads.cancel(thread.thread_id, request_id=f"req-{uuid.uuid4().hex}")
    with pytest.raises(tl.ThreadlineError) as caught:
        await client.threads.cancel(thread.thread_id)
    assert caught.value.reason == "INPUT_INVALID"


async def test_a_start_on_a_busy_thread_is_thread_busy(client: tl.Client) -> None:
    thread = await client.threads.create()
    first = await client.threads.start_run(thread.thread_id, text="sleep 3")

    with pytest.raises(tl.ThreadBusy) as busy:
        await client.threads.start_run(thread.thread_id, text="hello")

    assert (busy.value.status, busy.value.reason) == (tl.StatusCode.ABORTED, "THREAD_BUSY")
    assert (busy.value.run_id, busy.value.request_id) == (first.run_id, first.request_id)
    await first.cancel()
    assert (await first.result()).result.status == tl.RunStatus.CANCELLED


async def test_thread_busy_tells_a_request_its_own_holder_from_anothers(client: tl.Client) -> None:
    thread = await client.threads.create()
    sleeping_id = f"req-{uuid.uuid4().hex}"
    first = await client.threads.start_run(thread.thread_id, text="sleep 30", request_id=sleeping_id)
    try:
        own_id = f"req-{uuid.uuid4().hex}"
        with pytest.raises(tl.ThreadBusy) as busy:
            await client.threads.start_run(thread.thread_id, text="hello", request_id=own_id)
        assert (busy.value.run_id, busy.value.request_id) == (first.run_id, sleeping_id)
        assert busy.value.is_own(sleeping_id) and not busy.value.is_own(own_id)
        assert busy.value.queue_length == 0
    finally:
        await first.cancel()
    assert (await first.result()).result.status == tl.RunStatus.CANCELLED


# --- busy strategies: the thread's queue ----------------------------------------------------------


async def requests_of_checkpoints(client: tl.Client, thread_id: str) -> list[str]:
    """The requests that committed the thread's checkpoints, oldest first, each run once."""
    order: list[str] = []
    newest_first = [c async for c in client.threads.checkpoints(thread_id)]
    for checkpoint in reversed(newest_first):
        if checkpoint.request_id and (not order or order[-1] != checkpoint.request_id):
            order.append(checkpoint.request_id)
    return order


async def test_an_enqueued_start_waits_its_turn_then_runs(client: tl.Client) -> None:
    thread = await client.threads.create()
    stream, sleeping_run = await sleeping(client, thread.thread_id)
    async with stream:
        queued = await client.threads.start_run(thread.thread_id, text="hello", busy_strategy="enqueue")
        assert (queued.status, queued.queue_position) == (tl.ThreadRunStatus.QUEUED, 1)
        assert queued.run_id.startswith("run-") and not queued.replayed
        waiting = (await client.threads.get(thread.thread_id)).queue
        assert [(q.request_id, q.run_id, q.kind) for q in waiting] == [
            (queued.request_id, queued.run_id, tl.QueuedRunKind.ENQUEUED)
        ]
        assert waiting[0].create_time is not None
        with pytest.raises(tl.ThreadBusy) as busy:
            await client.threads.start_run(thread.thread_id, text="hello")
        assert (busy.value.run_id, busy.value.queue_length) == (sleeping_run, 1)
        await client.threads.cancel(thread.thread_id, sleeping_run)
        outcome = await queued.result()

    assert outcome.result.status == tl.RunStatus.COMPLETED and outcome.result.run_id == queued.run_id
    after = await client.threads.get(thread.thread_id)
    assert after.queue == [] and after.status == tl.ThreadStatus.IDLE


async def test_a_full_queue_is_refused_and_a_queued_request_is_cancelled_before_it_runs(
    client: tl.Client,
) -> None:
    thread = await client.threads.create()
    stream, sleeping_run = await sleeping(client, thread.thread_id)
    async with stream:
        queued = [
            await client.threads.start_run(
                thread.thread_id, text="hello", request_id=f"q{i:02d}", busy_strategy="enqueue"
            )
            for i in range(16)
        ]
        assert [q.queue_position for q in queued] == list(range(1, 17))
        with pytest.raises(tl.ThreadQueueFull) as full:
            await client.threads.start_run(thread.thread_id, text="hello", busy_strategy="enqueue")
        assert (full.value.status, full.value.limit, full.value.queue_length) == (
            tl.StatusCode.RESOURCE_EXHAUSTED,
            16,
            16,
        )
        status = await client.threads.cancel(thread.thread_id, request_id="q00")
        assert status == tl.ThreadRunStatus.CANCELLED
        assert (await queued[0].result()).result.status == tl.RunStatus.CANCELLED
        assert len((await client.threads.get(thread.thread_id)).queue) == 15
        await client.threads.cancel(thread.thread_id, sleeping_run)
        last = await queued[-1].result()

    assert last.result.status == tl.RunStatus.COMPLETED
    after = await client.threads.get(thread.thread_id)
    assert (after.status, after.queue) == (tl.ThreadStatus.IDLE, [])
    ran = await requests_of_checkpoints(client, thread.thread_id)
    assert ran[-15:] == [f"q{i:02d}" for i in range(1, 16)], "the rest ran once each, in order"


async def test_an_interrupt_stops_the_running_turn_and_runs_ahead_of_the_queue(client: tl.Client) -> None:
    thread = await client.threads.create()
    stream, _sleeping_run = await sleeping(client, thread.thread_id)
    async with stream:
        later = await client.threads.start_run(
            thread.thread_id, text="hello", request_id="later", busy_strategy="enqueue"
        )
        now = await client.threads.start_run(
            thread.thread_id, text="hello", request_id="now", busy_strategy="interrupt"
        )
        assert (later.queue_position, now.status, now.queue_position) == (1, tl.ThreadRunStatus.QUEUED, 1)
        # Read before the stopped run hands off, the queue is [now, later]; on a fast server "now" may
        # have started already, leaving [later] (the order it ran in is checked on the checkpoints).
        waiting = [(q.request_id, q.kind) for q in (await client.threads.get(thread.thread_id)).queue]
        expected = [("now", tl.QueuedRunKind.INTERRUPTING), ("later", tl.QueuedRunKind.ENQUEUED)]
        assert waiting in (expected, expected[1:])
        stopped = await stream.collect()  # nobody cancelled it: the interrupt did, well before 30 s

    assert stopped.result.status == tl.RunStatus.CANCELLED
    assert (await now.result()).result.status == tl.RunStatus.COMPLETED
    assert (await later.result()).result.status == tl.RunStatus.COMPLETED
    ran = await requests_of_checkpoints(client, thread.thread_id)
    assert ran[-3:] == [stream.request_id, "now", "later"]
    after = await client.threads.get(thread.thread_id)
    assert (after.status, after.queue) == (tl.ThreadStatus.IDLE, [])


async def test_a_rollback_throws_the_running_turn_away_and_answers_again_from_where_it_began(
    client: tl.Client,
) -> None:
    thread = await client.threads.create()
    await client.threads.run(thread.thread_id, text="hello", request_id="before")
    began = (await client.threads.get(thread.thread_id)).revision
    stream, _sleeping_run = await sleeping(client, thread.thread_id)
    async with stream:
        redo = await client.threads.start_run(
            thread.thread_id, text="lookup grpc", request_id="redo", busy_strategy="rollback"
        )
        assert (redo.status, redo.queue_position) == (tl.ThreadRunStatus.QUEUED, 1)
        stopped = await stream.collect()  # the rollback stopped it

    assert stopped.result.status == tl.RunStatus.CANCELLED
    assert (await redo.result()).result.status == tl.RunStatus.COMPLETED
    listed = list(reversed([c async for c in client.threads.checkpoints(thread.thread_id)]))
    discarded = [c.revision for c in listed if c.request_id == stream.request_id]
    assert discarded and min(discarded) > began, "the stopped turn's checkpoints stay listed"
    [copy] = [c for c in listed if c.kind == tl.CheckpointKind.ROLLED_BACK]
    assert copy.revision == max(discarded) + 1
    assert all(c.revision > copy.revision for c in listed if c.request_id == "redo")
    copied = await client.threads.checkpoint(thread.thread_id, copy.revision)
    source = await client.threads.checkpoint(thread.thread_id, began)
    assert copied.state is not None and source.state is not None
    assert copied.state.message_history == source.state.message_history
    head = await client.threads.get(thread.thread_id, full=True)
    assert head.head is not None and head.head.state is not None
    assert head.head.state.message_history is not None
    assert "sleep 30" not in head.head.state.message_history.data


async def test_a_rollback_with_answers_undoes_an_approval_and_answers_the_batch_again(
    client: tl.Client,
) -> None:
    """ "Undo that answer, answer again" (LIVE §4.5): the approved turn is stopped and thrown away, and the
    same approval is answered again, denied; answers to a running turn without ROLLBACK are refused."""
    thread = await client.threads.create()
    asked = await client.threads.run(thread.thread_id, text="delete notes.txt then sleep 30")
    assert asked.result.status == tl.RunStatus.SUSPENDED
    pending = (await client.threads.get(thread.thread_id)).pending
    assert pending is not None
    (call,) = pending.approvals
    approved = client.threads.stream(thread.thread_id, answers=tl.answers(tl.approve(call)))
    async with approved:
        async for event in approved:
            if event.tool_call is not None and event.tool_call.tool_name == "sleep":
                break  # the delete ran; the turn sleeps
        with pytest.raises(tl.ThreadNotSuspended):
            await client.threads.run(
                thread.thread_id, answers=tl.answers(tl.deny(call)), busy_strategy="enqueue"
            )
        redo = await client.threads.start_run(
            thread.thread_id, answers=tl.answers(tl.deny(call, "keep it")), busy_strategy="rollback"
        )
        assert (redo.status, redo.queue_position) == (tl.ThreadRunStatus.QUEUED, 1)
        stopped = await approved.collect()  # the rollback stopped it

    assert stopped.result.status == tl.RunStatus.CANCELLED
    done = await redo.result()
    assert tl.output(done.result) == "Tool results: delete_file: keep it"
    listed = [c async for c in client.threads.checkpoints(thread.thread_id)]
    assert [c.kind for c in listed].count(tl.CheckpointKind.ROLLED_BACK) == 1
    head = await client.threads.get(thread.thread_id, full=True)
    assert head.head is not None and head.head.state is not None and head.head.state.message_history
    assert "Deleted" not in head.head.state.message_history.data, "the approved turn is gone from the head"


async def test_run_with_enqueue_waits_for_its_turn(client: tl.Client) -> None:
    thread = await client.threads.create()
    request_id = f"req-{uuid.uuid4().hex}"
    stream, sleeping_run = await sleeping(client, thread.thread_id)
    async with stream:
        waiting = asyncio.ensure_future(
            client.threads.run(thread.thread_id, text="hello", request_id=request_id, busy_strategy="enqueue")
        )
        while not (await client.threads.get(thread.thread_id)).queue:
            await asyncio.sleep(0.05)
        assert not waiting.done(), "run waits while its request is queued"
        await client.threads.cancel(thread.thread_id, sleeping_run)
        outcome = await waiting

    assert outcome.result.status == tl.RunStatus.COMPLETED and outcome.result.request_id == request_id
    with pytest.raises(ValueError):
        await client.threads.run(thread.thread_id, text="hello", busy_strategy="later")  # type: ignore[arg-type]


async def test_a_started_runs_result_follows_its_next_attempt_after_its_server_is_killed(
    serve_with: Callable[..., AbstractContextManager[Any]], tmp_path: Path
) -> None:
    """Two servers on one SQLite file; the one running the background turn is killed (-9).

    No client drives the request: the other server's sweeper runs its next attempt once the lease
    is over, and `result()` and `events()`, asked of the other server, follow it there.
    """
    store = ("--store", f"sqlite:{tmp_path / 'threads.db'}", "--lease-ttl", "2")
    with serve_with(*store) as first, serve_with(*store) as second:
        async with (
            tl.Client(first.addr, timeout=60.0) as holder,
            tl.Client(second.addr, timeout=60.0) as other,
        ):
            thread = await other.threads.create()
            started = await holder.threads.start_run(thread.thread_id, text="sleep 3")
            async with started.events() as joined:
                async for event in joined:
                    if event.tool_call is not None:
                        break  # inside the 3 s sleep
            first.process.kill()
            # Its outcome, read from anywhere: the same request again, then its result.
            followed = await other.threads.start_run(
                thread.thread_id, text="sleep 3", request_id=started.request_id
            )
            outcome = await followed.result()
            async with followed.events() as again:
                events = [event async for event in again]

    assert followed.request_id == started.request_id and not followed.replayed
    assert outcome.result.status == tl.RunStatus.COMPLETED and outcome.result.run_id != started.run_id
    assert outcome.result.request_id == started.request_id
    assert cases(events)[0] == "run_started" and events[-1].result == outcome.result
    assert {e.run_id for e in events} == {outcome.result.run_id}, "the request's latest attempt"


async def test_a_started_run_whose_attempts_all_lost_their_server_raises_request_interrupted(
    serve_with: Callable[..., AbstractContextManager[Any]], tmp_path: Path
) -> None:
    """With `--max-run-attempts 1`, the one attempt's server killed (-9) closes the request INTERRUPTED:
    the join by request ends with no result, and `result()` reads how it ended by a retry."""
    store = ("--store", f"sqlite:{tmp_path / 'threads.db'}", "--lease-ttl", "2", "--max-run-attempts", "1")
    with serve_with(*store) as first, serve_with(*store) as second:
        async with (
            tl.Client(first.addr, timeout=60.0) as holder,
            tl.Client(second.addr, timeout=60.0) as other,
        ):
            thread = await other.threads.create()
            started = await holder.threads.start_run(thread.thread_id, text="sleep 3")
            async with started.events() as joined:
                async for event in joined:
                    if event.tool_call is not None:
                        break
            first.process.kill()
            with pytest.raises(tl.RequestInterrupted) as interrupted:
                # The same request, asked of the other server: RUNNING while its lease lasts.
                followed = await other.threads.start_run(
                    thread.thread_id, text="sleep 3", request_id=started.request_id
                )
                await followed.result()
            after = await other.threads.get(thread.thread_id)

    assert interrupted.value.attempts == 1 and interrupted.value.run_id == started.run_id
    assert interrupted.value.revision == after.revision > thread.revision, "its commits stay"
    assert after.status == tl.ThreadStatus.IDLE


async def test_a_started_runs_result_is_read_by_starting_it_again_where_no_join_can_tell_it(
    start_server: Callable[..., str],
) -> None:
    """A server that keeps no event log answers every join UNIMPLEMENTED: `result()` then asks the
    same request again, RUNNING while it runs, until it replays the outcome."""
    async with tl.Client(start_server("--event-log", "off"), timeout=60.0) as blind:
        thread = await blind.threads.create()
        started = await blind.threads.start_run(thread.thread_id, text="sleep 1")
        with pytest.raises(tl.ThreadlineError) as refused:
            await started.events().collect()
        outcome = await started.result()
        head = await blind.threads.get(thread.thread_id)

    assert refused.value.status == tl.StatusCode.UNIMPLEMENTED
    assert outcome.result.status == tl.RunStatus.COMPLETED and outcome.replayed
    assert (outcome.result.run_id, outcome.revision) == (started.run_id, head.revision)
