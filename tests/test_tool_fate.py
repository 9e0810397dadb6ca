"""Truthful tool-call fate under `kill -9` (LIVE §5.7), on both stores: what each call gets after a crash,
counted from the tools' own log (`tests/thread_agents.py`: `write_note` plain, `transfer` approval,
`dispatch` external).

The rows `before_tool` (normal run and approving resume), `tool:`, `after_tool:` and `model:results`
are in `tests/test_thread_crashes.py`; this file holds the batch, the unanswered approvals, the replica
that does not gate, and the rollback after a call ran.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import grpc
import pytest
from test_thread_crashes import (
    DEADLINE,
    DECLARED,
    NEVER,
    POLL,
    SHIPPED,
    Scene,
    answers,
    answers_to,
    create_thread,
    head_history,
    only_answer,
    retry_while_busy,
    run_thread,
    run_until_killed,
    spec,
)
from test_thread_crashes import scene as scene  # the fixture: both stores
from thread_agents import executions, markers
from threadline.v1 import deferred_pb2, run_pb2, thread_pb2, thread_service_pb2

from harness import INTERRUPTED_TOOL_RESULT, UNANSWERED_APPROVAL_MESSAGE

if TYPE_CHECKING:
    from threadline.v1.thread_service_pb2_grpc import ThreadServiceAsyncStub as Stub

pytestmark = pytest.mark.anyio

ts = thread_service_pb2


async def suspended_batch(stub: Stub, prompt: str) -> tuple[str, deferred_pb2.DeferredToolRequests]:
    """A thread suspended on `use:batch`'s three items: `dispatch` (external), two `transfer` approvals."""
    thread_id = await create_thread(stub)
    asked = await run_thread(stub, spec(thread_id, "req-ask", text=prompt))
    assert asked.result.status == run_pb2.RUN_STATUS_SUSPENDED, asked.result
    thread, _ = await head_history(stub, thread_id)
    return thread_id, thread.pending


def approve_both(pending: deferred_pb2.DeferredToolRequests) -> deferred_pb2.DeferredToolResults:
    [ship] = pending.calls
    return deferred_pb2.DeferredToolResults(
        calls=[deferred_pb2.CallResult(tool_call_id=ship.tool_call_id, value_json=f'"{SHIPPED}"')],
        approvals=[
            deferred_pb2.ApprovalResult(tool_call_id=a.tool_call_id, approved=deferred_pb2.ToolApproved())
            for a in pending.approvals
        ],
    )


async def both_inside(scene: Scene) -> None:
    """Wait until both transfers are inside their tool (started: both were dispatched, together)."""
    deadline = time.monotonic() + DEADLINE
    while len([m for m in markers(scene.log) if m["at"] == "tool:transfer"]) < 2:
        assert time.monotonic() < deadline, "the transfers never both started"
        await asyncio.sleep(POLL)


@pytest.mark.parametrize("mode", [DECLARED, NEVER], ids=["declared", "never"])
async def test_a_batch_killed_inside_one_transfer_gives_both_the_unknown_result(
    scene: Scene, mode: int
) -> None:
    scene.replicas = False  # one server at a time: the kill lands where both transfers run
    stub = await scene.start()
    thread_id, pending = await suspended_batch(stub, "use:batch crash:tool:transfer")
    pays = [a.tool_call_id for a in pending.approvals]
    [ship] = [c.tool_call_id for c in pending.calls]
    resume = spec(thread_id, "req-answer", answers=approve_both(pending))
    call = stub.StreamThreadRun(ts.StreamThreadRunRequest(spec=resume))

    async def drain() -> None:
        async for _ in call:
            pass

    reader = asyncio.ensure_future(drain())
    await both_inside(scene)
    await scene.kill()
    with pytest.raises(grpc.aio.AioRpcError):
        await asyncio.wait_for(reader, DEADLINE)
    stub = await scene.start_after_crash()

    resume.tool_recovery = mode
    response = await retry_while_busy(stub, resume, holder="req-answer")
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response.result
    _thread, history = await head_history(stub, thread_id)
    for pay in pays:
        # Both may have acted (both started): neither runs again, neither is called "not started".
        assert (only_answer(history, pay).content, only_answer(history, pay).outcome) == (
            INTERRUPTED_TOOL_RESULT,
            "failed",
        )
    assert (only_answer(history, ship).content, only_answer(history, ship).outcome) == (SHIPPED, "success")
    assert executions(scene.log, "transfer") == {pay: 1 for pay in pays}


async def test_a_prompt_without_answers_denies_the_approvals_honestly_even_across_a_crash(
    scene: Scene,
) -> None:
    stub = await scene.start()
    thread_id, pending = await suspended_batch(stub, "use:batch")
    pays = [a.tool_call_id for a in pending.approvals]
    [ship] = [c.tool_call_id for c in pending.calls]
    # Killed after its Begin (the model blocks on the request carrying the prompt and the denials): the
    # denials were written with the Begin, and the retry applies them once.
    moved_on = spec(thread_id, "req-moved-on", text="never mind crash:model:results")
    _doomed, stub = await run_until_killed(scene, stub, moved_on, "model:results")
    moved_on.tool_recovery = DECLARED
    response = await retry_while_busy(stub, moved_on, holder="req-moved-on")
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response.result

    thread, history = await head_history(stub, thread_id)
    assert thread.status == thread_pb2.THREAD_STATUS_IDLE and not thread.recovery_pending
    for pay in pays:
        answer = only_answer(history, pay)
        assert (answer.content, answer.outcome) == (UNANSWERED_APPROVAL_MESSAGE, "denied")
    # The external call may have been run by its host: it stays under tool recovery (DECLARED: unknown).
    assert only_answer(history, ship).content == INTERRUPTED_TOOL_RESULT
    assert executions(scene.log, "transfer") == {}


async def test_a_replica_that_does_not_gate_breaks_the_claim_so_nothing_runs_twice(scene: Scene) -> None:
    """`tool:transfer` on a replica with `--dispatch-intents off` resuming a batch a gating replica
    suspended: the recovery elsewhere gives the call the unknown result, never a run with the old
    approval (its intent still reads "issued": only the `intents_fence` chain says it is not vouched for)."""
    scene.replicas = False
    stub = await scene.start()
    thread_id, pending = await suspended_batch(stub, "use:batch crash:tool:transfer")
    pay = pending.approvals[0].tool_call_id
    gating = scene.store
    await scene.kill()
    scene.store = (*gating, "--dispatch-intents", "off")
    stub = await scene._connect(await scene._spawn())
    scene.store = gating  # the server after the crash gates again
    resume = spec(thread_id, "req-answer", answers=answers_to(pending))
    _doomed, stub = await run_until_killed(scene, stub, resume, "tool:transfer")
    assert executions(scene.log, "transfer") == {pay: 1}

    resume.tool_recovery = DECLARED
    response = await retry_while_busy(stub, resume, holder="req-answer")
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED, response.result
    _thread, history = await head_history(stub, thread_id)
    assert only_answer(history, pay).content == INTERRUPTED_TOOL_RESULT
    assert executions(scene.log, "transfer") == {pay: 1}, "never run again with the old approval"


async def test_an_approval_made_pending_again_after_its_call_ran_is_never_called_not_started(
    scene: Scene,
) -> None:
    """Approve `transfer` (it runs), roll back to the suspended checkpoint, then go on without answers:
    the call has a dispatched intent, so it gets the unknown result, not the denial; it ran once."""
    stub = await scene.start()
    thread_id, pending = await suspended_batch(stub, "use:batch")
    pay = pending.approvals[0].tool_call_id
    asked, _ = await head_history(stub, thread_id)
    done = await run_thread(stub, spec(thread_id, "req-answer", answers=answers_to(pending)))
    assert done.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert executions(scene.log, "transfer") == {pay: 1}
    back = await stub.RollbackThread(ts.RollbackThreadRequest(thread_id=thread_id, revision=asked.revision))
    assert back.thread.status == thread_pb2.THREAD_STATUS_SUSPENDED

    moved_on = await run_thread(stub, spec(thread_id, "req-moved-on", text="never mind"))
    assert moved_on.result.status == run_pb2.RUN_STATUS_COMPLETED, moved_on.result
    _thread, history = await head_history(stub, thread_id)
    [answer] = answers(history, pay)
    assert (answer.content, answer.outcome) == (INTERRUPTED_TOOL_RESULT, "failed")
    deny = pending.approvals[1].tool_call_id
    assert only_answer(history, deny).content == UNANSWERED_APPROVAL_MESSAGE, "never dispatched: denied"
    assert executions(scene.log, "transfer") == {pay: 1}


@pytest.mark.parametrize("how", ["fork", "import"])
async def test_a_forked_or_imported_batch_keeps_its_claim_so_its_approvals_are_denied_honestly(
    scene: Scene, how: str
) -> None:
    """`ForkThread` copies the source's rows for its pending batch; `CreateThread` with `pending` issues
    rows for its approvals (the import says they are pending): either way a prompt without answers
    denies them with the fixed text, and nothing runs."""
    stub = await scene.start()
    source_id, pending = await suspended_batch(stub, "use:batch")
    if how == "fork":
        made = await stub.ForkThread(ts.ForkThreadRequest(thread_id=source_id))
    else:
        head = await stub.GetThread(ts.GetThreadRequest(thread_id=source_id, view=ts.THREAD_VIEW_FULL))
        # A host moves the thread in anew: the old one (and its rows) gone, its state and batch imported.
        await stub.DeleteThread(ts.DeleteThreadRequest(thread_id=source_id))
        made = await stub.CreateThread(
            ts.CreateThreadRequest(agent="crash", state=head.thread.head.state, pending=pending)
        )
    thread_id = made.thread.thread_id
    assert made.thread.status == thread_pb2.THREAD_STATUS_SUSPENDED
    moved_on = await run_thread(stub, spec(thread_id, "req-moved-on", text="never mind"))
    assert moved_on.result.status == run_pb2.RUN_STATUS_COMPLETED, moved_on.result
    _thread, history = await head_history(stub, thread_id)
    for approval in pending.approvals:
        answer = only_answer(history, approval.tool_call_id)
        assert (answer.content, answer.outcome) == (UNANSWERED_APPROVAL_MESSAGE, "denied")
    assert executions(scene.log, "transfer") == {}
