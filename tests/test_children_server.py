"""Child runs over gRPC (CHILDREN §5, §6, §7): real `threadline serve` processes, generated stubs as the host.

The demo agents (`default` with its inline `helper`, `demo-lead` with its Host-managed `reviewer` run as
`demo-reviewer`) drive the ordinary paths; scripted `--agent`s (tests/children_server.py) give exact
control where a test needs it: an edge with usage limits, an approval raised in the tool, offered tools.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from children_server import (
    HOST_TOOLS,
    LEAD,
    NO_DEFERRED,
    REVIEWER,
    Stub,
    answer,
    approve_all,
    capability,
    delegations,
    demo_output,
    derived_thread_id,
    final,
    lifecycle_types,
    plan,
    quoted,
    refused,
    registry,
    resume_calls,
    run,
    scripted_serve,
    stream_run,
    write_agents,
)
from conftest import THREADLINE
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import deferred_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

pytestmark = pytest.mark.anyio

HOST_DELEGATE = "tool/threadline.subagents.host/delegate"
CHILD_ID = re.compile(r"^helper-[0-9a-f]{4}$")
RUN_ID = re.compile(r"^run-[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def demo() -> Iterator[LoggedServe]:
    """The demo server (`threadline serve --store memory`), shared by this module's tests."""
    with logged_serve() as running:
        yield running


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoggedServe]:
    """A server with the scripted `lead` (host-mode edge `reviewer`, `request_limit=1`) and `reviewer`."""
    with scripted_serve(tmp_path_factory.mktemp("agents")) as running:
        yield running


@pytest.fixture
async def stub(demo: LoggedServe) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(demo.address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


@pytest.fixture
async def scripted_stub(scripted: LoggedServe) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(scripted.address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


# -- inline children ------------------------------------------------------------------------------------


def tool_call_ids(events: list[Any], name: str) -> list[str]:
    return [
        e.tool_call.tool_call_id
        for e in events
        if e.WhichOneof("event") == "tool_call" and e.tool_call.tool_name == name
    ]


async def test_inline_delegate_resume_and_fork_over_stream_run(stub: Stub) -> None:
    events, first = await stream_run(stub, text="delegate find X")
    started, completed = delegations(events)
    assert "inline_delegation" not in lifecycle_types(events)
    assert all(e.lifecycle.kind != "delegation" for e in events if e.WhichOneof("event") == "lifecycle")
    assert (started.action, started.status, completed.action, completed.status) == (
        "started",
        "running",
        "completed",
        "completed",
    )
    [call_id] = tool_call_ids(events, "delegate")
    # First slice (§3.9): both are parent items, directly before the delegate call's result.
    kinds = [e.WhichOneof("event") for e in events]
    at = kinds.index("inline_delegation")
    assert kinds[at : at + 3] == ["inline_delegation", "inline_delegation", "tool_result"]
    assert events[at + 2].tool_result.tool_call_id == call_id
    assert [e.sequence for e in events] == list(range(len(events)))
    for event in (started, completed):
        assert event.invocation_id == started.invocation_id and event.invocation_id.startswith("delegation-")
        assert CHILD_ID.match(event.child_instance_id) and event.subagent == "helper"
        assert event.child_instance_id == started.child_instance_id
        assert RUN_ID.match(event.child_run_id) and event.child_run_id == started.child_run_id
        assert event.child_run_id != first.run_id
        assert (event.parent_run_id, event.parent_tool_call_id) == (first.run_id, call_id)
        assert event.parent_agent_instance_id
    child_id = started.child_instance_id
    assert quoted(demo_output(first), "delegate") == {
        "execution_id": child_id,
        "subagent": "helper",
        "output": "helper, task 1: find X",
    }
    [record] = registry(first.state).values()
    assert sorted(record) == [
        "child_definition_id",
        "child_instance_id",
        "child_thread_id",
        "refs",
        "state",
        "subagent_name",
    ]
    child_thread = derived_thread_id("threadline.inline-child", first.thread_id, child_id)
    assert (record["child_instance_id"], record["subagent_name"], record["child_definition_id"]) == (
        child_id,
        "helper",
        "demo-helper",
    )
    assert record["child_thread_id"] == child_thread == record["state"]["thread_id"]

    events, second = await stream_run(stub, text=f"resume-child {child_id} go on", previous_state=first.state)
    again = delegations(events)
    assert [(d.action, d.child_instance_id) for d in again] == [
        ("started", child_id),
        ("completed", child_id),
    ]
    assert again[0].child_run_id not in (started.child_run_id, "") and again[0].parent_run_id == second.run_id
    assert quoted(demo_output(second), "resume_subagent")["output"] == "helper, task 2: go on"
    assert registry(second.state)[child_id]["child_thread_id"] == child_thread

    # ForkState re-keys the registry deterministically (§3.5); the stored child state moves on load.
    fork = harness_service_pb2.ForkStateRequest(state=second.state, thread_id="thread_branch1")
    branch = (await stub.ForkState(fork)).state
    assert branch.SerializeToString(deterministic=True) == (
        await stub.ForkState(fork)
    ).state.SerializeToString(deterministic=True)
    rekeyed = registry(branch)[child_id]
    branch_child = derived_thread_id("threadline.inline-child", "thread_branch1", child_id)
    assert rekeyed["child_thread_id"] == branch_child != child_thread
    assert rekeyed["state"] == registry(second.state)[child_id]["state"]  # stored state untouched
    assert registry(second.state)[child_id]["child_thread_id"] == child_thread  # the source is unchanged
    assert branch.message_history.data == second.state.message_history.data

    _, third = await stream_run(stub, text=f"resume-child {child_id} more", previous_state=branch)
    assert third.thread_id == "thread_branch1"
    assert quoted(demo_output(third), "resume_subagent")["output"] == "helper, task 3: more"
    moved = registry(third.state)[child_id]
    assert moved["child_thread_id"] == moved["state"]["thread_id"] == branch_child


# -- Host-managed children --------------------------------------------------------------------------------


def child_metadata(call: deferred_pb2.DeferredToolCall) -> dict[str, Any]:
    metadata = json.loads(call.metadata_json)["threadline.child"]
    assert isinstance(metadata, dict)
    return metadata


def assert_typed_matches_metadata(call: deferred_pb2.DeferredToolCall, parent_agent: str) -> None:
    """`DeferredToolCall.child` is `metadata_json`'s "threadline.child", with `parent` ready to copy (§5.2)."""
    meta, child = child_metadata(call), call.child
    actions = {"start": deferred_pb2.CHILD_ACTION_START, "continue": deferred_pb2.CHILD_ACTION_CONTINUE}
    assert child.action == actions[meta["action"]]
    assert (child.subagent_name, child.agent, child.child_definition_id, child.thread_id, child.input) == (
        meta["subagent_name"],
        meta["agent"],
        meta["child_definition_id"],
        meta["thread_id"],
        meta["input"],
    )
    parent = meta["parent"]
    assert parent["agent"] == parent_agent
    assert child.parent == deferred_pb2.ChildLineage(
        parent_thread_id=parent["thread_id"],
        parent_run_id=parent["run_id"],
        parent_tool_call_id=parent["tool_call_id"],
        parent_agent_instance_id=parent["agent_instance_id"],
        subagent_name=meta["subagent_name"],
        delegation_id=meta["thread_id"],
        parent_agent=parent_agent,
    )
    limits = meta["usage_limits"]
    assert (json.loads(child.usage_limits_json) if child.usage_limits_json else None) == limits


async def ask_child(stub: Stub, task: str) -> tuple[run_pb2.RunResult, deferred_pb2.DeferredToolCall]:
    """`demo-lead` asks for its `reviewer`: suspended, one external call carrying the child request."""
    parent = await run(stub, agent="demo-lead", text=f"ask-child {task}")
    assert parent.status == run_pb2.RUN_STATUS_SUSPENDED, parent.failure
    [call] = parent.deferred.calls
    assert not parent.deferred.approvals
    assert (call.tool_name, call.target_identity, call.kind) == (
        "delegate",
        HOST_DELEGATE,
        deferred_pb2.DEFERRED_KIND_EXTERNAL,
    )
    assert_typed_matches_metadata(call, "demo-lead")
    return parent, call


async def child_state(stub: Stub, call: deferred_pb2.DeferredToolCall) -> state_pb2.HarnessState:
    state = (await stub.NewState(harness_service_pb2.NewStateRequest(thread_id=call.child.thread_id))).state
    assert state.thread_id == call.child.thread_id
    return state


async def test_host_child_end_to_end_with_an_approval(stub: Stub) -> None:
    parent, call = await ask_child(stub, "delete old.txt")
    child = call.child
    assert child.action == deferred_pb2.CHILD_ACTION_START
    assert (child.subagent_name, child.agent, child.child_definition_id) == (
        "reviewer",
        "demo-reviewer",
        "demo-reviewer",
    )
    # The admission key: parent thread, response ordinal 1 (the first response holds the call), call ID.
    assert child.thread_id == derived_thread_id(
        "threadline.host-child", parent.thread_id, "1", call.tool_call_id
    )
    assert json.loads(child.input) == {
        "delegated_task": "delete old.txt",
        "parent_task": "ask-child delete old.txt",
    }
    assert (child.parent.parent_thread_id, child.parent.parent_run_id) == (parent.thread_id, parent.run_id)
    assert child.parent.parent_tool_call_id == call.tool_call_id and child.usage_limits_json == ""
    assert capability(parent.state, "a13n.subagents") is None  # S5

    events, suspended = await stream_run(
        stub,
        agent=child.agent,
        text=child.input,
        previous_state=await child_state(stub, call),
        lineage=child.parent,
    )
    assert events[0].run_started.lineage == child.parent  # parent_agent included
    assert suspended.lineage == child.parent and suspended.thread_id == child.thread_id
    assert suspended.status == run_pb2.RUN_STATUS_SUSPENDED  # lineage did not turn interaction off (S3)
    assert [a.tool_name for a in suspended.deferred.approvals] == ["delete_file"]

    events, done = await stream_run(
        stub,
        agent=child.agent,
        previous_state=suspended.state,
        deferred_resume=approve_all(suspended),
        lineage=child.parent,
    )
    assert events[0].run_started.lineage == child.parent == done.lineage
    assert demo_output(done) == "Tool results: delete_file: Deleted old.txt."

    events, answered = await stream_run(
        stub,
        agent="demo-lead",
        previous_state=parent.state,
        deferred_resume=resume_calls(parent, answer(call, json.loads(done.output_json))),
    )
    assert not events[0].run_started.HasField("lineage") and not answered.HasField("lineage")
    assert quoted(demo_output(answered), "delegate") == {
        "execution_id": child.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": "Tool results: delete_file: Deleted old.txt.",
    }
    assert capability(answered.state, "a13n.subagents") is None


async def test_a_replayed_request_names_the_same_child_thread(stub: Stub) -> None:
    parent, call = await ask_child(stub, "lookup grpc")
    again = await run(
        stub, agent="demo-lead", previous_state=parent.state, tool_recovery=run_pb2.TOOL_RECOVERY_ALWAYS
    )
    assert again.status == run_pb2.RUN_STATUS_SUSPENDED, again.failure
    [replayed] = again.deferred.calls
    assert replayed.tool_call_id == call.tool_call_id
    assert replayed.child.thread_id == call.child.thread_id  # the admission key (§6.2)
    assert_typed_matches_metadata(replayed, "demo-lead")
    assert replayed.child.parent.parent_run_id == again.run_id != parent.run_id
    assert json.loads(replayed.child.input) == {
        "delegated_task": "lookup grpc"
    }  # no new input: no parent_task
    # Unsaved and not replayed: the call gets the unknown result, and no child is asked for.
    declared = await run(
        stub, agent="demo-lead", previous_state=parent.state, tool_recovery=run_pb2.TOOL_RECOVERY_DECLARED
    )
    assert declared.status == run_pb2.RUN_STATUS_COMPLETED and not declared.deferred.calls
    assert "delegate:" in demo_output(declared) and call.child.thread_id not in demo_output(declared)
    assert "No tool result was recorded because execution was interrupted" in demo_output(declared)


async def completed_child(stub: Stub, call: deferred_pb2.DeferredToolCall) -> run_pb2.RunResult:
    done = await run(
        stub,
        agent=call.child.agent,
        text=call.child.input,
        previous_state=await child_state(stub, call),
        lineage=call.child.parent,
    )
    assert done.status == run_pb2.RUN_STATUS_COMPLETED, done.failure
    return done


async def cut(stub: Stub, spec: run_pb2.RunSpec, *, at: str = "run_started") -> list[Any]:
    """A `StreamRun` the client cancels at the first event of case `at`: the events it saw until then."""
    call = stub.StreamRun(harness_service_pb2.StreamRunRequest(spec=spec))
    seen = []
    async for response in call:
        seen.append(response.event)
        if response.event.WhichOneof("event") == at:
            break
    call.cancel()
    assert seen[0].WhichOneof("event") == "run_started" and seen[-1].WhichOneof("event") == at
    return seen


async def test_an_interrupted_parent_resume_consumes_the_saved_child_answer(stub: Stub) -> None:
    parent, call = await ask_child(stub, "lookup grpc")
    done = await completed_child(stub, call)
    saved = resume_calls(parent, answer(call, json.loads(done.output_json)))  # persisted before the resume
    seen = await cut(
        stub,
        run_pb2.RunSpec(
            agent="demo-lead", previous_state=parent.state, deferred_resume=saved, checkpoints=True
        ),
    )
    assert len(seen) == 1
    # No checkpoint reached the host: its last candidate is the suspended one, with the saved answer.
    saved.recovery = True
    recovered = await run(
        stub,
        agent="demo-lead",
        previous_state=parent.state,
        deferred_resume=saved,
        tool_recovery=run_pb2.TOOL_RECOVERY_NEVER,
    )
    assert quoted(demo_output(recovered), "delegate") == {
        "execution_id": call.child.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": demo_output(done),
    }


@pytest.mark.parametrize(
    ("at", "tool_result"),
    [
        # Cut before any checkpoint: the last candidate is the suspended one; the approval is not reused
        # as replay permission (§6.1), so the approved call gets the unknown result.
        ("run_started", "No tool result was recorded because execution was interrupted"),
        # Cut after the checkpoint that holds the approved call's result: nothing remains to hand over.
        ("checkpoint_candidate", "Deleted old.txt."),
    ],
)
async def test_a_child_crash_is_recovered_from_its_checkpoint(stub: Stub, at: str, tool_result: str) -> None:
    parent, call = await ask_child(stub, "delete old.txt")
    child = call.child
    suspended = await run(
        stub,
        agent=child.agent,
        text=child.input,
        previous_state=await child_state(stub, call),
        lineage=child.parent,
    )
    assert [a.tool_name for a in suspended.deferred.approvals] == ["delete_file"]
    accepted = approve_all(suspended)
    seen = await cut(
        stub,
        run_pb2.RunSpec(
            agent=child.agent,
            previous_state=suspended.state,
            deferred_resume=accepted,
            checkpoints=True,
            lineage=child.parent,
        ),
        at=at,
    )
    candidates = [
        e.checkpoint_candidate.state for e in seen if e.WhichOneof("event") == "checkpoint_candidate"
    ]
    last = candidates[-1] if candidates else suspended.state
    remaining = await stub.RemainingDeferred(
        harness_service_pb2.RemainingDeferredRequest(resume=accepted, state=last)
    )
    resume: dict[str, Any] = {}
    if remaining.HasField("remaining"):
        resume["deferred_resume"] = remaining.remaining
        resume["deferred_resume"].recovery = True
    assert remaining.HasField("remaining") is (at == "run_started")
    recovered = await run(stub, agent=child.agent, previous_state=last, lineage=child.parent, **resume)
    assert recovered.lineage == child.parent and recovered.thread_id == child.thread_id
    text = demo_output(recovered)
    assert text.startswith("Tool results: delete_file: ") and tool_result in text

    answered = await run(
        stub,
        agent="demo-lead",
        previous_state=parent.state,
        deferred_resume=resume_calls(parent, answer(call, json.loads(recovered.output_json))),
    )
    assert quoted(demo_output(answered), "delegate")["output"] == text


# -- refusals ---------------------------------------------------------------------------------------------


async def refusal_of(stub: Stub, **spec: Any) -> tuple[grpc.StatusCode, str, dict[str, str], list[str]]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await run(stub, **spec)
    return refused(caught.value)


async def test_an_edge_the_parent_agent_does_not_declare_is_refused(stub: Stub) -> None:
    _, call = await ask_child(stub, "lookup grpc")
    state = await child_state(stub, call)
    no_edge = deferred_pb2.ChildLineage()
    no_edge.CopyFrom(call.child.parent)
    no_edge.parent_agent = "default"  # its only edge is the inline `helper`
    code, reason, metadata, fields = await refusal_of(
        stub, agent="demo-reviewer", text=call.child.input, previous_state=state, lineage=no_edge
    )
    assert (code, reason, fields) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "CHILD_EDGE_UNKNOWN",
        ["spec.lineage.parent_agent"],
    )
    assert metadata == {"parent_agent": "default", "subagent": "reviewer", "agent": "demo-reviewer"}
    # The right parent, the wrong child agent.
    code, reason, metadata, fields = await refusal_of(
        stub, agent="default", text=call.child.input, previous_state=state, lineage=call.child.parent
    )
    assert (code, reason, fields) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "CHILD_EDGE_UNKNOWN",
        ["spec.lineage.parent_agent"],
    )
    assert metadata == {"parent_agent": "demo-lead", "subagent": "reviewer", "agent": "default"}


async def lineage_refusals(
    stub: Stub,
) -> list[tuple[str, tuple[grpc.StatusCode, str, dict[str, str], list[str]]]]:
    """A bad parent run ID, a parent thread equal to the child's own, and an edge name that is not one
    (with `parent_agent` set, so the edge would be looked up): (the field at fault, the refusal)."""
    _, call = await ask_child(stub, "lookup grpc")
    state = await child_state(stub, call)
    assert call.child.parent.parent_agent == "demo-lead"
    bad_run = deferred_pb2.ChildLineage()
    bad_run.CopyFrom(call.child.parent)
    bad_run.parent_run_id = "run-not-hex"
    own_thread = deferred_pb2.ChildLineage()
    own_thread.CopyFrom(call.child.parent)
    own_thread.parent_thread_id = call.child.thread_id
    bad_name = deferred_pb2.ChildLineage()
    bad_name.CopyFrom(call.child.parent)
    bad_name.subagent_name = "Not An Edge"
    found = []
    for lineage, field in (
        (bad_run, "parent_run_id"),
        (own_thread, "parent_thread_id"),
        (bad_name, "subagent_name"),
    ):
        found.append(
            (
                field,
                await refusal_of(
                    stub, agent="demo-reviewer", text=call.child.input, previous_state=state, lineage=lineage
                ),
            )
        )
    return found


async def test_invalid_lineage_is_refused_naming_its_field(stub: Stub) -> None:
    for field, (code, reason, metadata, _) in await lineage_refusals(stub):
        assert (code, reason, metadata) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "CHILD_LINEAGE_INVALID",
            {"field": field},
        )


async def test_invalid_lineage_has_its_bad_request_field(stub: Stub) -> None:
    for field, (_, _, _, fields) in await lineage_refusals(stub):
        assert fields == [f"spec.lineage.{field}"]


async def test_a_wrong_child_answer_is_refused_before_the_model_runs(stub: Stub) -> None:
    parent, call = await ask_child(stub, "lookup grpc")
    good = {
        "execution_id": call.child.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": "x",
    }
    for wrong in ({**good, "status": "done"}, {**good, "execution_id": "thread_someoneelse1"}):
        batch = resume_calls(
            parent, deferred_pb2.CallResult(tool_call_id=call.tool_call_id, value_json=json.dumps(wrong))
        )
        code, reason, metadata, _ = await refusal_of(
            stub, agent="demo-lead", previous_state=parent.state, deferred_resume=batch
        )
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "CHILD_RESULT_INVALID")
        assert metadata.get("tool_call_id") == call.tool_call_id


async def test_a_child_request_answered_without_a_deferred_lifecycle_is_a_surface_mismatch(
    stub: Stub,
) -> None:
    parent, call = await ask_child(stub, "lookup grpc")
    done = await completed_child(stub, call)
    code, reason, _, _ = await refusal_of(
        stub,
        agent="demo-lead",
        previous_state=parent.state,
        deferred_resume=resume_calls(parent, answer(call, json.loads(done.output_json))),
        deferred_tools=run_pb2.DEFERRED_TOOLS_MODE_UNSUPPORTED,
    )
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "DEFERRED_SURFACE_MISMATCH")
    # Continued without the answer and without a deferred lifecycle: the host-mode tool is absent, so the
    # pending call gets the unknown result (§6.2) and nothing suspends.
    absent = await run(
        stub,
        agent="demo-lead",
        previous_state=parent.state,
        deferred_tools=run_pb2.DEFERRED_TOOLS_MODE_UNSUPPORTED,
    )
    assert "No tool result was recorded because execution was interrupted" in demo_output(absent)
    assert not absent.deferred.calls


async def test_an_unknown_deferred_tools_mode_is_input_invalid(stub: Stub) -> None:
    code, reason, _, fields = await refusal_of(stub, agent="demo-lead", text="hi", deferred_tools=7)
    assert (code, reason, fields) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INPUT_INVALID",
        ["spec.deferred_tools"],
    )


@pytest.mark.parametrize(
    ("agent", "name"), [("default", "delegate"), ("demo-lead", "delegate"), ("demo-lead", "resume_subagent")]
)
async def test_a_client_tool_named_like_a_delegation_tool_is_refused(
    stub: Stub, agent: str, name: str
) -> None:
    tool = run_pb2.ClientTool(name=name, description="Mine.", parameters_json_schema='{"type":"object"}')
    code, reason, _, _ = await refusal_of(stub, agent=agent, text="hi", client_tools=[tool])
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "CLIENT_TOOL_INVALID")


# -- the edge's limits, and runs without a deferred lifecycle (scripted agents) ----------------------------


async def scripted_request(
    stub: Stub, child_plan: str
) -> tuple[run_pb2.RunResult, deferred_pb2.DeferredToolCall]:
    parent = await run(
        stub, agent=LEAD, text=plan(("delegate", {"subagent_name": REVIEWER, "prompt": child_plan}))
    )
    assert parent.status == run_pb2.RUN_STATUS_SUSPENDED, parent.failure
    [call] = parent.deferred.calls
    assert_typed_matches_metadata(call, LEAD)
    assert json.loads(call.child.usage_limits_json)["request_limit"] == 1
    return parent, call


async def test_the_edge_limits_cap_a_child_run_that_names_its_parent_agent(scripted_stub: Stub) -> None:
    stub = scripted_stub
    parent, call = await scripted_request(stub, plan(("note", {"text": "one"})))  # two model requests
    state = await child_state(stub, call)
    capped = await run(
        stub, agent=REVIEWER, text=call.child.input, previous_state=state, lineage=call.child.parent
    )
    assert capped.status == run_pb2.RUN_STATUS_FAILED and capped.failure.code == "usage_limit_exceeded"
    assert capped.usage.requests == 1 and capped.lineage == call.child.parent
    correlation = deferred_pb2.ChildLineage()
    correlation.CopyFrom(call.child.parent)
    correlation.parent_agent = ""  # correlation only: the run's ordinary limits
    free = await run(stub, agent=REVIEWER, text=call.child.input, previous_state=state, lineage=correlation)
    assert final(free)["results"] == [{"outcome": "success", "value": "one"}]
    assert free.usage.requests == 2 and free.lineage == correlation
    # The capped child failed: the host tells the parent so (§4.4), and the parent's model sees it.
    message = f"Child {call.child.thread_id} did not complete successfully ({capped.failure.code})."
    failed = deferred_pb2.CallResult(
        tool_call_id=call.tool_call_id, failed=deferred_pb2.ToolFailedResult(message=message)
    )
    told = await run(
        stub, agent=LEAD, previous_state=parent.state, deferred_resume=resume_calls(parent, failed)
    )
    assert final(told)["results"] == [{"outcome": "failed", "value": message}]


async def test_without_a_deferred_lifecycle_nothing_suspends(scripted_stub: Stub) -> None:
    stub = scripted_stub
    info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
    [lead] = [agent for agent in info.agents if agent.name == LEAD]
    categories = {tool.name: tool.category for tool in lead.tools}
    assert all(categories[name] == harness_service_pb2.TOOL_CATEGORY_EXTERNAL for name in HOST_TOOLS)
    gated = plan(("gate", {}))
    supported = await run(stub, agent=LEAD, text=gated)
    assert supported.status == run_pb2.RUN_STATUS_SUSPENDED
    assert [a.tool_name for a in supported.deferred.approvals] == ["gate"]
    result = await run(stub, agent=LEAD, text=gated, deferred_tools=run_pb2.DEFERRED_TOOLS_MODE_UNSUPPORTED)
    offered = final(result)
    assert not set(HOST_TOOLS) & set(offered["tools"]) and {"gate", "note"} <= set(offered["tools"])
    assert offered["results"] == [{"outcome": "failed", "value": NO_DEFERRED}]
    assert not result.deferred.calls and not result.deferred.approvals


# -- start-up and server info ------------------------------------------------------------------------------


def serve_exit(tmp_path: Path, *agents: str) -> subprocess.CompletedProcess[str]:
    path = write_agents(tmp_path / "agents")
    flags = [flag for spec in agents for flag in ("--agent", spec)]
    return subprocess.run(
        [str(THREADLINE), "serve", "--port", "0", "--store", "memory", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(path)},
    )


def test_a_host_mode_child_not_served_under_its_name_stops_the_start(tmp_path: Path) -> None:
    for agents in (
        (f"{LEAD}=child_agents:lead",),
        (f"{LEAD}=child_agents:lead", "other=child_agents:reviewer"),
    ):
        done = serve_exit(tmp_path, *agents)
        assert done.returncode == 2, done.stderr
        assert "child_agent_unknown" in done.stderr and "'reviewer'" in done.stderr
        assert "Traceback" not in done.stderr and not done.stdout


def test_a_factory_whose_edge_is_refused_stops_the_start(tmp_path: Path) -> None:
    done = serve_exit(tmp_path, "bad=child_agents:bad_edge")
    assert done.returncode == 2, done.stderr
    assert "subagent_name_invalid" in done.stderr and "Traceback" not in done.stderr and not done.stdout


async def test_server_info_lists_the_edges_and_the_delegation_tools(stub: Stub) -> None:
    info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
    agents = {agent.name: agent for agent in info.agents}
    edges = {
        name: [(e.name, e.mode, e.agent, e.child_definition_id) for e in agent.subagents]
        for name, agent in agents.items()
    }
    assert edges == {
        # An inline child's agent is not served, so `agent` is empty; its definition ID is still given.
        "default": [("helper", harness_service_pb2.SUBAGENT_MODE_INLINE, "", "demo-helper")],
        "demo-lead": [("reviewer", harness_service_pb2.SUBAGENT_MODE_HOST, "demo-reviewer", "demo-reviewer")],
        "demo-reviewer": [],
    }
    assert all(e.description for agent in agents.values() for e in agent.subagents)
    expected = {
        "default": harness_service_pb2.TOOL_CATEGORY_PLAIN,
        "demo-lead": harness_service_pb2.TOOL_CATEGORY_EXTERNAL,
    }
    for name, category in expected.items():
        tools = {tool.name: tool.category for tool in agents[name].tools}
        assert {tools[tool] for tool in HOST_TOOLS} == {category}, tools
    assert not set(HOST_TOOLS) & {tool.name for tool in agents["demo-reviewer"].tools}
