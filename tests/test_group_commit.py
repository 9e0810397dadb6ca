"""Group commit (issue 28): commits of different threads that are ready together share one transaction
and one fsync on SQLite, each keeping its own fence check, and one whose fence failed, or whose
statement the database refused, fails alone. On PostgreSQL each commit is a transaction of its own (the
database's WAL flush already overlaps them); the same calls give the same answers there.

The writer thread is held busy by a call of the test's own while the commits queue behind it, so they
are waiting together when it takes the next ones: what a loaded server sees, without timing.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from sqlalchemy import text

from harness import HarnessState
from harness.errors import ErrorCode, ThreadError
from harness.threads import ThreadStore
from harness.threads.codec import state_parts
from harness.threads.records import Head, ThreadRow
from harness.threads.statements import Statement
from harness.threads.store import NewCheckpoint

pytestmark = pytest.mark.anyio

THREADS = 6
_REFUSED = Statement(text("SELECT no_such_column FROM threads"))
"""A statement the database refuses for what it is (a bug, `faults`)."""


async def _held(store: ThreadStore, thread_id: str) -> tuple[ThreadRow, Head]:
    """A new thread whose lease a Begin took, and its head."""
    state = HarnessState.new(thread_id=thread_id)
    checkpoint = NewCheckpoint("created", state_parts(state), pending=None, remaining=None, client_tools=())
    created, head = await store.create(
        thread_id, agent="default", thread_labels={}, checkpoint=checkpoint, accepted=None
    )
    taken, _record = await store.begin(
        created,
        run_id="run-" + thread_id,
        request_id="req-" + thread_id,
        ttl=30.0,
        record=None,
        digest="d" * 64,
        prompt="hello",
        client_tools=(),
        accepted=None,
    )
    return taken, head


def _next(head: Head, thread_id: str) -> NewCheckpoint:
    """A `MID_RUN` checkpoint whose history differs from `head`'s."""
    state = HarnessState.new(thread_id=thread_id)
    parts = state_parts(state)
    return NewCheckpoint(
        "mid_run",
        type(parts)(b'[{"kind":"request","parts":[]}]', parts.rest, parts.history_at),
        pending=None,
        remaining=None,
        client_tools=(),
        run_id="run-" + thread_id,
        request_id="req-" + thread_id,
    )


async def test_commits_ready_together_share_a_transaction_and_a_lost_fence_fails_alone(
    store: ThreadStore,
) -> None:
    ids = [f"group_{i}x{uuid.uuid4().hex[:6]}" for i in range(THREADS)]
    held = {thread_id: await _held(store, thread_id) for thread_id in ids}
    lost = ids[2]
    release = threading.Event()

    def busy() -> None:  # the writer thread (SQLite) is busy while the commits queue
        assert release.wait(30)

    blocker = store.worker.run(busy, read=False)
    transactions, calls = store.worker.durable_writes, store.worker.committed_writes
    commits = [
        asyncio.ensure_future(
            store.commit(
                thread_id,
                fence="not-the-fence" if thread_id == lost else taken.fence,
                revision=taken.revision,
                checkpoint=_next(head, thread_id),
                base=head,
                accepted=None,
                ttl=30.0,
            )
        )
        for thread_id, (taken, head) in held.items()
    ]
    await asyncio.sleep(0.05)  # every commit is queued (PostgreSQL runs them meanwhile)
    release.set()
    await blocker
    outcomes = await asyncio.gather(*commits, return_exceptions=True)

    for thread_id, outcome in zip(ids, outcomes, strict=True):
        taken, _head = held[thread_id]
        thread = await store.thread(thread_id)
        assert thread is not None
        if thread_id == lost:
            assert isinstance(outcome, ThreadError) and outcome.code == ErrorCode.LEASE_LOST
            assert thread.revision == taken.revision, "its savepoint was rolled back"
        else:
            assert not isinstance(outcome, BaseException), outcome
            assert outcome.revision == taken.revision + 1 == thread.revision
            head = await store.head(thread)
            assert head.parts.history == b'[{"kind":"request","parts":[]}]'
    written = store.worker.committed_writes - calls
    assert written == THREADS - 1
    if store.database.kind == "sqlite":
        assert store.worker.durable_writes - transactions == 1, "one transaction, one fsync, for all"
    else:
        assert store.worker.durable_writes - transactions == THREADS - 1


async def test_a_group_answers_each_call_with_its_own_refusal(store: ThreadStore) -> None:
    """A statement the database refuses (a bug) fails its own call; the group's others commit."""
    ids = [f"refused_{i}x{uuid.uuid4().hex[:6]}" for i in range(3)]
    held = {thread_id: await _held(store, thread_id) for thread_id in ids}
    release = threading.Event()

    def busy() -> None:
        assert release.wait(30)

    def refused() -> None:
        with store.worker.transaction() as (conn, _now):
            _REFUSED.run(conn, {})

    blocker = store.worker.run(busy, read=False)
    bad = store.worker.run(refused, read=False)
    commits = [
        asyncio.ensure_future(
            store.commit(
                thread_id,
                fence=taken.fence,
                revision=taken.revision,
                checkpoint=_next(head, thread_id),
                base=head,
                accepted=None,
                ttl=30.0,
            )
        )
        for thread_id, (taken, head) in held.items()
    ]
    await asyncio.sleep(0.05)
    release.set()
    await blocker
    with pytest.raises(Exception, match="no_such_column"):
        await bad
    for thread_id, committed in zip(ids, await asyncio.gather(*commits), strict=True):
        thread = await store.thread(thread_id)
        assert thread is not None and thread.revision == committed.revision == held[thread_id][0].revision + 1
    assert store.healthy
