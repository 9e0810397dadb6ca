"""Child runs end to end against the suite's real `threadline serve` (CHILDREN §3-§6).

The demo serves `default`, whose inline child `helper` answers `helper, task N: <task>` (N counts
its tasks), and `demo-lead`, whose Host-managed child `reviewer` the host runs as agent
`demo-reviewer`: `ask-child delete old.txt` makes the reviewer call `delete_file`, which needs an
approval, so the child suspends on its own thread.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
import threadline_client as tl
from threadline_client import v1

pytestmark = pytest.mark.anyio

LEAD, REVIEWER = "demo-lead", "demo-reviewer"
THREAD_ID = re.compile(r"thread_[0-9a-f]{32}")
DELETED = "Tool results: delete_file: Deleted old.txt."


def _tool_result(result: tl.RunResult, tool: str) -> Any:
    """The JSON value after `Tool results: <tool>: ` in a demo agent's answer."""
    text = tl.output(result)
    prefix = f"Tool results: {tool}: "
    assert isinstance(text, str) and text.startswith(prefix), text
    return json.loads(text[len(prefix) :])


# --- inline children ------------------------------------------------------------------------------


async def test_an_inline_child_runs_in_the_call_and_is_resumed_from_the_parent_state(
    client: tl.Client,
) -> None:
    async with client.stream_run(tl.RunSpec(text="delegate tidy the notes")) as stream:
        events = [event async for event in stream]
    first = stream.result
    assert first is not None and first.status == tl.RunStatus.COMPLETED

    delegations = [e.inline_delegation for e in events if e.inline_delegation is not None]
    assert [d.action for d in delegations] == ["started", "completed"]
    assert not [e for e in events if e.lifecycle is not None and "delegation" in e.lifecycle.type]
    started, completed = delegations
    assert started.invocation_id == completed.invocation_id and started.invocation_id.startswith(
        "delegation-"
    )
    assert started.child_run_id == completed.child_run_id and started.child_run_id.startswith("run-")
    assert (started.status, completed.status) == ("running", "completed")
    assert started.subagent == completed.subagent == "helper"
    assert started.parent_run_id == completed.parent_run_id == first.run_id
    (delegate,) = [e.tool_call for e in events if e.tool_call is not None]
    assert delegate.tool_name == "delegate"
    assert started.parent_tool_call_id == completed.parent_tool_call_id == delegate.tool_call_id
    answer = _tool_result(first, "delegate")
    assert isinstance(answer, dict)
    execution_id = answer["execution_id"]
    assert re.fullmatch(r"helper-[0-9a-f]{4}", execution_id)
    assert started.child_instance_id == completed.child_instance_id == execution_id
    assert answer == {
        "execution_id": execution_id,
        "subagent": "helper",
        "output": "helper, task 1: tidy the notes",
    }
    assert first.state is not None
    assert [(c.capability_id, c.version) for c in first.state.capability_states] == [("a13n.subagents", "2")]
    assert tl.child_calls(first.deferred) == []  # inline children never reach the host

    second = await client.run(
        tl.RunSpec(text=f"resume-child {execution_id} and the desk", previous_state=first.state)
    )

    assert second.status == tl.RunStatus.COMPLETED and second.thread_id == first.thread_id
    assert _tool_result(second, "resume_subagent") == (
        {"execution_id": execution_id, "subagent": "helper", "output": "helper, task 2: and the desk"}
    )
    assert second.state is not None
    assert [(c.capability_id, c.version) for c in second.state.capability_states] == [("a13n.subagents", "2")]


# --- Host-managed children ------------------------------------------------------------------------


async def _ask_child(client: tl.Client) -> tuple[tl.RunResult, tl.DeferredToolCall]:
    parent = await client.run(tl.RunSpec(agent=LEAD, text="ask-child delete old.txt"))
    assert parent.status == tl.RunStatus.SUSPENDED
    (call,) = tl.child_calls(parent.deferred)
    return parent, call


async def _answer_parent(client: tl.Client, parent: tl.RunResult, *answers: v1.CallResult) -> tl.RunResult:
    """Resume the suspended parent with the host's answers to its batch."""
    assert parent.deferred is not None
    resume = tl.resume(parent.deferred, answers)
    return await client.run(tl.RunSpec(agent=LEAD, previous_state=parent.state, deferred_resume=resume))


async def test_a_host_managed_child_suspends_for_approval_then_answers_the_parent(client: tl.Client) -> None:
    parent, call = await _ask_child(client)

    assert parent.deferred is not None and not parent.deferred.approvals
    assert parent.deferred.calls == [call]
    assert call.kind == tl.DeferredKind.EXTERNAL
    assert call.target_identity == "tool/threadline.subagents.host/delegate"
    child = call.child
    assert child is not None and child.parent is not None
    assert (child.action, child.agent, child.subagent_name) == (tl.ChildAction.START, REVIEWER, "reviewer")
    assert THREAD_ID.fullmatch(child.thread_id) and child.thread_id != parent.thread_id
    assert json.loads(child.input) == {
        "delegated_task": "delete old.txt",
        "parent_task": "ask-child delete old.txt",
    }
    lineage = child.parent
    assert (lineage.parent_agent, lineage.parent_thread_id, lineage.parent_run_id) == (
        LEAD,
        parent.thread_id,
        parent.run_id,
    )
    assert (lineage.parent_tool_call_id, lineage.subagent_name, lineage.delegation_id) == (
        call.tool_call_id,
        "reviewer",
        child.thread_id,
    )
    assert json.loads(call.metadata_json)["threadline.child"]["thread_id"] == child.thread_id

    suspended = await client.run_child(call)

    assert suspended.status == tl.RunStatus.SUSPENDED, suspended.failure
    assert suspended.thread_id == child.thread_id and suspended.lineage == lineage
    assert suspended.deferred is not None and not suspended.deferred.calls
    (approval,) = suspended.deferred.approvals
    assert (approval.tool_name, tl.call_args(approval)) == ("delete_file", {"path": "old.txt"})
    with pytest.raises(ValueError, match="SUSPENDED"):
        tl.child_answer(call, suspended)  # the host answers the child first

    resumed = tl.resume(suspended.deferred, [tl.approve(approval)])
    done = await client.run_child(call, state=suspended.state, deferred_resume=resumed)

    assert done.status == tl.RunStatus.COMPLETED and done.thread_id == child.thread_id
    assert done.lineage == lineage
    assert tl.output(done) == DELETED
    answer = tl.child_answer(call, done)
    assert answer.tool_call_id == call.tool_call_id and json.loads(answer.value_json) == {
        "execution_id": child.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": DELETED,
    }

    assert parent.deferred is not None
    finished = await _answer_parent(client, parent, answer)

    assert finished.status == tl.RunStatus.COMPLETED and finished.thread_id == parent.thread_id
    assert _tool_result(finished, "delegate") == json.loads(answer.value_json)


async def test_the_child_run_started_event_carries_the_lineage(client: tl.Client) -> None:
    _, call = await _ask_child(client)
    assert call.child is not None
    state = await client.new_state(thread_id=call.child.thread_id)

    async with client.stream_run(tl.child_spec(call, state)) as stream:
        first = await anext(stream)
        rest = [event async for event in stream]

    assert first.run_started is not None and first.run_started.lineage == call.child.parent
    assert stream.result is not None and stream.result.status == tl.RunStatus.SUSPENDED
    assert tl.event_case(rest[-1]) == "result"


async def test_a_child_continued_by_resume_subagent_runs_on_its_saved_state(client: tl.Client) -> None:
    parent, call = await _ask_child(client)
    assert call.child is not None and parent.deferred is not None
    with pytest.raises(ValueError, match="pass its saved state"):
        await client.run_child(call, deferred_resume=tl.resume(parent.deferred, []))
    suspended = await client.run_child(call)
    assert suspended.deferred is not None
    done = await client.run_child(
        call,
        state=suspended.state,
        deferred_resume=tl.resume(suspended.deferred, [tl.deny(suspended.deferred.approvals[0], "Keep it.")]),
    )
    assert tl.output(done) == "Tool results: delete_file: Keep it."
    answered = await _answer_parent(client, parent, tl.child_answer(call, done))
    assert answered.status == tl.RunStatus.COMPLETED

    again = await client.run(
        tl.RunSpec(
            agent=LEAD, text=f"resume-child {call.child.thread_id} lookup grpc", previous_state=answered.state
        )
    )

    assert again.status == tl.RunStatus.SUSPENDED
    (follow,) = tl.child_calls(again.deferred)
    assert follow.target_identity == "tool/threadline.subagents.host/resume_subagent"
    assert follow.child is not None and follow.child.action == tl.ChildAction.CONTINUE
    assert follow.child.thread_id == call.child.thread_id and follow.child.agent == REVIEWER
    with pytest.raises(ValueError, match="exists already"):
        await client.run_child(follow)  # a continued child runs on the state the host kept
    continued = await client.run_child(follow, state=done.state)
    assert continued.status == tl.RunStatus.COMPLETED and continued.thread_id == call.child.thread_id
    assert tl.output(continued).startswith("Tool results: lookup: gRPC is a remote")
    assert done.state is not None and continued.state is not None
    assert done.state.message_history is not None and continued.state.message_history is not None
    assert continued.state.message_history.message_count > done.state.message_history.message_count


async def test_a_crashed_child_resume_recovers_from_its_checkpoint(client: tl.Client) -> None:
    """The approval resume is cut after its first checkpoint (SPEC §1.11, CHILDREN §6.1): the host
    resumes from that checkpoint with the accepted batch and `recovery=True`, and the child completes
    once (the approved call is not run twice)."""
    parent, call = await _ask_child(client)
    suspended = await client.run_child(call)
    assert suspended.deferred is not None and suspended.state is not None
    accepted = tl.resume(suspended.deferred, [tl.approve(suspended.deferred.approvals[0])])

    spec = tl.child_spec(call, suspended.state, deferred_resume=accepted, checkpoints=True)
    checkpoint: tl.HarnessState | None = None
    async with client.stream_run(spec) as stream:
        async for event in stream:
            if event.checkpoint_candidate is not None:
                checkpoint = event.checkpoint_candidate.state
                break  # the crash: the run is cancelled here
    assert stream.result is None and checkpoint is not None
    assert checkpoint.thread_id == suspended.thread_id
    # The checkpoint already holds the approved call's result: nothing of the batch remains.
    assert await client.remaining_deferred(accepted, checkpoint) is None

    recovery = v1.DeferredToolResume(requests=accepted.requests, results=accepted.results, recovery=True)
    recovered = await client.run_child(call, state=checkpoint, deferred_resume=recovery)

    assert recovered.status == tl.RunStatus.COMPLETED and tl.output(recovered) == DELETED
    assert recovered.lineage == suspended.lineage
    assert recovered.state is not None and recovered.state.message_history is not None
    history = json.loads(recovered.state.message_history.data)
    returns = [
        part for message in history for part in message["parts"] if part.get("part_kind") == "tool-return"
    ]
    assert [part["tool_name"] for part in returns] == ["delete_file"]

    assert parent.deferred is not None
    finished = await _answer_parent(client, parent, tl.child_answer(call, recovered))
    assert finished.status == tl.RunStatus.COMPLETED
    assert _tool_result(finished, "delegate") == json.loads(tl.child_answer(call, recovered).value_json)


async def test_a_child_recovered_from_its_suspended_state_gets_no_approval_reuse(client: tl.Client) -> None:
    """Recovery from the suspended checkpoint itself: a positive approval is never replay permission,
    so the approved call gets the unknown result and the child completes; the parent is answered."""
    parent, call = await _ask_child(client)
    suspended = await client.run_child(call)
    assert suspended.deferred is not None
    accepted = tl.resume(suspended.deferred, [tl.approve(suspended.deferred.approvals[0])], recovery=True)

    recovered = await client.run_child(call, state=suspended.state, deferred_resume=accepted)

    assert recovered.status == tl.RunStatus.COMPLETED
    unknown = _tool_result(recovered, "delete_file")
    assert isinstance(unknown, dict) and "interrupted" in unknown["error"]
    assert parent.deferred is not None
    finished = await _answer_parent(client, parent, tl.child_answer(call, recovered))
    assert finished.status == tl.RunStatus.COMPLETED


async def test_a_failed_child_answer_is_seen_by_the_parent_model(client: tl.Client) -> None:
    parent, call = await _ask_child(client)
    assert call.child is not None and parent.deferred is not None
    failed = await client.run_child(call, usage_limits=v1.UsageLimits(request_limit=0))
    assert failed.status == tl.RunStatus.FAILED and failed.failure is not None
    answer = tl.child_answer(call, failed)
    message = f"Child {call.child.thread_id} did not complete successfully ({failed.failure.code})."
    assert answer.failed is not None and answer.failed.message == message

    finished = await _answer_parent(client, parent, answer)

    assert _tool_result(finished, "delegate") == {"error": message}  # a failed call, to the model


async def test_a_wrong_child_answer_and_a_wrong_lineage_are_refused(client: tl.Client) -> None:
    parent, call = await _ask_child(client)
    assert call.child is not None and call.child.parent is not None and parent.deferred is not None
    wrong = tl.external_result(
        call, {"execution_id": "thread_other", "subagent": "reviewer", "status": "running"}
    )
    with pytest.raises(tl.ThreadlineError) as caught:
        await _answer_parent(client, parent, wrong)
    assert (caught.value.status, caught.value.reason) == (
        tl.StatusCode.FAILED_PRECONDITION,
        "CHILD_RESULT_INVALID",
    )

    running = await _answer_parent(client, parent, tl.child_running(call))
    assert _tool_result(running, "delegate") == (
        {"execution_id": call.child.thread_id, "subagent": "reviewer", "status": "running"}
    )

    state = await client.new_state(thread_id=call.child.thread_id)
    undeclared = copy.deepcopy(call.child.parent)
    undeclared.subagent_name = "nobody"
    with pytest.raises(tl.ThreadlineError) as caught:
        await client.run(tl.RunSpec(agent=REVIEWER, text="hello", previous_state=state, lineage=undeclared))
    assert (caught.value.status, caught.value.reason) == (
        tl.StatusCode.FAILED_PRECONDITION,
        "CHILD_EDGE_UNKNOWN",
    )

    own = copy.deepcopy(call.child.parent)
    own.parent_thread_id = call.child.thread_id
    with pytest.raises(tl.ThreadlineError) as caught:
        await client.run(tl.RunSpec(agent=REVIEWER, text="hello", previous_state=state, lineage=own))
    assert (caught.value.status, caught.value.reason) == (
        tl.StatusCode.INVALID_ARGUMENT,
        "CHILD_LINEAGE_INVALID",
    )


# --- server info and the deferred_tools mode ------------------------------------------------------


async def test_server_info_lists_the_children_and_reserves_the_delegation_tools(client: tl.Client) -> None:
    info = await client.get_server_info()
    agents = {agent.name: agent for agent in info.agents}

    assert [(s.name, s.mode, s.agent) for s in agents["default"].subagents] == [
        ("helper", v1.SubagentMode.INLINE, "")
    ]
    assert [(s.name, s.mode, s.agent, s.child_definition_id) for s in agents[LEAD].subagents] == [
        ("reviewer", v1.SubagentMode.HOST, REVIEWER, REVIEWER)
    ]
    assert all(s.description for name in ("default", LEAD) for s in agents[name].subagents)
    for name, category in (("default", v1.ToolCategory.PLAIN), (LEAD, v1.ToolCategory.EXTERNAL)):
        tools = {tool.name: tool.category for tool in agents[name].tools}
        assert (tools["delegate"], tools["resume_subagent"]) == (category, category), name
    assert not agents[REVIEWER].subagents

    clash = tl.client_tool("delegate", {"type": "object", "properties": {}})
    with pytest.raises(tl.ThreadlineError) as caught:
        await client.run(tl.RunSpec(text="hello", client_tools=[clash]))
    assert (caught.value.status, caught.value.reason) == (
        tl.StatusCode.INVALID_ARGUMENT,
        "CLIENT_TOOL_INVALID",
    )


async def test_without_a_deferred_lifecycle_the_host_child_tools_are_absent(client: tl.Client) -> None:
    result = await client.run(
        tl.RunSpec(agent=LEAD, text="ask-child x", deferred_tools=tl.DeferredToolsMode.UNSUPPORTED)
    )

    assert result.status == tl.RunStatus.COMPLETED
    assert result.deferred is None and tl.child_calls(result.deferred) == []
    # The scripted model calls `delegate` anyway: the tool is not on the run's surface (nor is the
    # approval-gated `delete_file`), so the model is told it is unknown and answers in text.
    available = "'count', 'fetch_status', 'lookup', 'sleep'"
    assert _tool_result(result, "delegate") == (
        {"error": f"Unknown tool name: 'delegate'. Available tools: {available}"}
    )


# --- the helpers offline --------------------------------------------------------------------------


def _request(thread_id: str = "thread_" + "c" * 32) -> tl.DeferredToolCall:
    lineage = v1.ChildLineage(
        parent_thread_id="thread_" + "p" * 32,
        parent_run_id="run-" + "0" * 32,
        parent_tool_call_id="p1",
        parent_agent_instance_id="inst",
        subagent_name="reviewer",
        delegation_id=thread_id,
        parent_agent=LEAD,
    )
    child = v1.ChildRequest(
        action=tl.ChildAction.START,
        subagent_name="reviewer",
        agent=REVIEWER,
        child_definition_id=REVIEWER,
        thread_id=thread_id,
        input='{"delegated_task":"x"}',
        parent=lineage,
    )
    return tl.DeferredToolCall(
        tool_call_id="p1", tool_name="delegate", kind=tl.DeferredKind.EXTERNAL, child=child
    )


def test_child_calls_picks_the_child_requests_of_a_batch() -> None:
    plain = tl.DeferredToolCall(tool_call_id="c1", tool_name="add", kind=tl.DeferredKind.EXTERNAL)
    request = _request()
    batch = tl.DeferredToolRequests(calls=[plain, request])
    assert tl.child_calls(batch) == [request]
    assert tl.child_calls(None) == []
    with pytest.raises(ValueError, match="no `child`"):
        tl.child_answer(plain, tl.RunResult(status=tl.RunStatus.COMPLETED, output_json='"x"'))


def test_child_spec_runs_the_requested_agent_on_the_child_thread() -> None:
    request = _request()
    assert request.child is not None
    state = tl.HarnessState(thread_id=request.child.thread_id)

    spec = tl.child_spec(request, state, tool_recovery=v1.ToolRecovery.NEVER, request_id="r1")
    assert (spec.agent, spec.text, spec.previous_state, spec.lineage) == (
        REVIEWER,
        request.child.input,
        state,
        request.child.parent,
    )
    assert (spec.tool_recovery, spec.request_id, spec.deferred_resume) == (v1.ToolRecovery.NEVER, "r1", None)

    resume = tl.resume(tl.DeferredToolRequests(), [])
    answering = tl.child_spec(request, state, deferred_resume=resume)
    assert answering.text is None and answering.deferred_resume == resume  # answers carry no new input

    with pytest.raises(ValueError, match="this state is 'thread_other'"):
        tl.child_spec(request, tl.HarnessState(thread_id="thread_other"))
    with pytest.raises(TypeError, match="agent"):
        tl.child_spec(request, state, agent="x")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("result", "code"),
    [
        (
            tl.RunResult(status=tl.RunStatus.FAILED, failure=v1.Failure(code="usage_limit_exceeded")),
            "usage_limit_exceeded",
        ),
        (tl.RunResult(status=tl.RunStatus.CANCELLED), "child_cancelled"),
    ],
    ids=["failed", "cancelled"],
)
def test_child_answer_of_a_child_that_did_not_complete(result: tl.RunResult, code: str) -> None:
    request = _request()
    result.thread_id = "thread_" + "c" * 32
    answer = tl.child_answer(request, result, answered_by="tests")
    assert answer.failed is not None and answer.value_json is None and answer.answered_by == "tests"
    assert answer.failed.message == f"Child thread_{'c' * 32} did not complete successfully ({code})."


def test_child_answer_refuses_a_suspended_child_and_another_thread() -> None:
    request = _request()
    suspended = tl.RunResult(status=tl.RunStatus.SUSPENDED, thread_id="thread_" + "c" * 32)
    with pytest.raises(ValueError, match="SUSPENDED"):
        tl.child_answer(request, suspended)
    other = tl.RunResult(status=tl.RunStatus.COMPLETED, thread_id="thread_other", output_json='"x"')
    with pytest.raises(ValueError, match="this result is 'thread_other'"):
        tl.child_answer(request, other)
