"""Host-managed children in the core (CHILDREN §4, §6; tests H1-H9, H11-H14 at the core level).

The parent suspends with a child request (a deferred external call); the test plays the Host: it runs the
child as an ordinary thread with the request's lineage, and answers the parent with `ChildRequest.answer`.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from children_support import Script, call, calls, returned, text
from pydantic_ai import Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.exceptions import CallDeferred, ToolFailed
from pydantic_ai.messages import ModelResponse, ToolReturn
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import UsageLimits

from harness import (
    INTERRUPTED_TOOL_RESULT,
    AgentContext,
    ChildLineage,
    ChildRequest,
    ClientTool,
    DeferredToolResume,
    DefinitionError,
    ExecutableAgent,
    HarnessExtensionEvent,
    HarnessRunResult,
    HarnessState,
    RunBindings,
    RunError,
    SubagentDefinition,
    client_tools_capability,
)
from harness.children import child_requests, host_child_thread_id

pytestmark = pytest.mark.anyio

IDENTITY = "tool/threadline.subagents.host/delegate"


def derived(parent_thread: str, ordinal: int, call_id: str) -> str:
    digest = hashlib.sha256(
        f"threadline.host-child\0{parent_thread}\0{ordinal}\0{call_id}".encode()
    ).hexdigest()
    return f"thread_{digest[:32]}"


def sensitive(x: str) -> str:
    return f"did {x}"


approval_tools = Capability(id="acme.sensitive", tools=[Tool(sensitive, requires_approval=True)])


def reviewer(script: Script, **kwargs: Any) -> ExecutableAgent[str]:
    return ExecutableAgent(script.model, name="reviewer", **kwargs)


def lead(parent: Script, child: ExecutableAgent[Any] | None = None, **kwargs: Any) -> ExecutableAgent[str]:
    child = child if child is not None else reviewer(Script())
    return ExecutableAgent(
        parent.model,
        name="lead",
        subagents=[
            SubagentDefinition("reviewer", "Reviews plans.", child, mode="host", **kwargs.pop("edge", {}))
        ],
        **kwargs,
    )


def delegate(prompt: str = "check", call_id: str = "p1") -> ModelResponse:
    return call("delegate", {"subagent_name": "reviewer", "prompt": prompt}, call_id)


async def suspend_h1(
    parent: Script | None = None, **kwargs: Any
) -> tuple[ExecutableAgent[str], HarnessRunResult[str]]:
    agent = lead(parent or Script(delegate(), text("got it")), **kwargs)
    result = await agent.run("Review the plan", previous_state=HarnessState.new(thread_id="thr_parent1"))
    assert result.status == "suspended", result.failure
    return agent, result


async def test_h1_the_request() -> None:
    _, result = await suspend_h1()
    deferred = result.deferred
    assert deferred is not None
    assert [item.tool_call_id for item in deferred.calls] == ["p1"] and deferred.approvals == []
    assert deferred.kind("p1") == "external"
    assert deferred.calls[0].target_identity == IDENTITY
    metadata = deferred.metadata["p1"]
    assert metadata["threadline.deferred_function_id"] == IDENTITY
    request = metadata["threadline.child"]
    thread_id = derived("thr_parent1", 1, "p1")
    assert thread_id == host_child_thread_id("thr_parent1", 1, "p1")
    assert request == {
        "action": "start",
        "subagent_name": "reviewer",
        "agent": "reviewer",
        "child_definition_id": "reviewer",
        "thread_id": thread_id,
        "input": '{"delegated_task":"check","parent_task":"Review the plan"}',
        "parent": {
            "agent": "lead",
            "thread_id": "thr_parent1",
            "run_id": result.run_id,
            "tool_call_id": "p1",
            "agent_instance_id": request["parent"]["agent_instance_id"],
        },
        "usage_limits": None,
    }
    assert result.state is not None and result.state.agent_context_state.entries == {}
    typed = child_requests(deferred)["p1"]
    assert (typed.action, typed.thread_id, typed.agent, typed.input) == (
        "start",
        thread_id,
        "reviewer",
        request["input"],
    )
    assert typed.lineage() == ChildLineage(
        parent_thread_id="thr_parent1",
        parent_run_id=result.run_id,
        parent_tool_call_id="p1",
        parent_agent_instance_id=request["parent"]["agent_instance_id"],
        subagent_name="reviewer",
        delegation_id=thread_id,
    )


async def test_the_edge_limits_travel_in_the_request() -> None:
    _, result = await suspend_h1(edge={"usage_limits": UsageLimits(request_limit=7)})
    typed = child_requests(result.deferred)["p1"]
    assert typed.usage_limits == UsageLimits(request_limit=7)
    assert result.deferred.metadata["p1"]["threadline.child"]["usage_limits"]["request_limit"] == 7


async def run_child(
    request: ChildRequest, child: ExecutableAgent[str], **kwargs: Any
) -> tuple[list[Any], HarnessRunResult[str]]:
    items: list[Any] = []
    async with child.stream(
        request.input,
        bindings=RunBindings.embedded(lineage=request.lineage(), **kwargs),
        previous_state=HarnessState.new(thread_id=request.thread_id),
    ) as stream:
        async for item in stream:
            items.append(item)
    assert stream.result is not None
    return items, stream.result


async def test_h2_h4_a_child_suspends_for_an_approval_then_answers_the_parent() -> None:
    """The scenario: a Host-managed child that suspends, is approved, finishes, and answers the parent."""
    agent, suspended = await suspend_h1()
    request = child_requests(suspended.deferred)["p1"]
    child_script = Script(call("sensitive", {"x": "a"}, "c1"), text("child finished"))
    child = reviewer(child_script, capabilities=[approval_tools])
    items, first = await run_child(request, child)
    # H2: lineage did not turn interaction off.
    assert first.status == "suspended" and [a.tool_call_id for a in first.deferred.approvals] == ["c1"]
    started = items[0].event
    assert isinstance(started, HarnessExtensionEvent)
    assert started.payload == {"type": "run_started", "lineage": request.lineage().to_jsonable()}
    assert first.lineage == request.lineage()
    with pytest.raises(ValueError):
        request.answer(first)
    resumed = await child.run(
        bindings=RunBindings.embedded(lineage=request.lineage()),
        previous_state=first.state,
        deferred_resume=DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True)),
    )
    assert resumed.status == "completed" and resumed.output == "child finished"
    assert returned(resumed, "c1").content == "did a"
    # H4: the answer.
    answer = request.answer(resumed)
    assert answer == {
        "execution_id": request.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": "child finished",
    }
    final = await agent.run(
        previous_state=suspended.state,
        deferred_resume=DeferredToolResume(
            suspended.deferred, suspended.deferred.build_results(calls={"p1": answer})
        ),
    )
    assert final.status == "completed" and final.output == "got it"
    part = returned(final, "p1")
    assert part.content == answer and part.outcome != "failed"
    assert final.state.agent_context_state.entries == {}


async def test_h3_the_host_turns_deferred_tools_off_for_a_child() -> None:
    _, suspended = await suspend_h1()
    request = child_requests(suspended.deferred)["p1"]
    child_script = Script(text("child finished"))
    _, result = await run_child(
        request, reviewer(child_script, capabilities=[approval_tools]), deferred_tools_supported=False
    )
    assert result.status == "completed" and child_script.offered == [[]]


async def test_failure_and_running_answers() -> None:
    agent, suspended = await suspend_h1(Script(delegate(), text("noted")))
    request = child_requests(suspended.deferred)["p1"]
    failing = reviewer(
        Script(call("boom", {}, "b1"), text("x")), capabilities=[Capability(tools=[Tool(_boom, name="boom")])]
    )
    _, failed = await run_child(request, failing)
    answer = request.answer(failed)
    assert isinstance(answer, ToolFailed)
    assert (
        answer.message == f"Child {request.thread_id} did not complete successfully (tool_execution_failed)."
    )
    final = await agent.run(
        previous_state=suspended.state,
        deferred_resume=DeferredToolResume(
            suspended.deferred, suspended.deferred.build_results(calls={"p1": answer})
        ),
    )
    assert (returned(final, "p1").outcome, returned(final, "p1").content) == ("failed", answer.message)
    running = request.running()
    assert running == {"execution_id": request.thread_id, "subagent": "reviewer", "status": "running"}
    went_on = await lead(Script(text("waiting"))).run(
        previous_state=suspended.state,
        deferred_resume=DeferredToolResume(
            suspended.deferred, suspended.deferred.build_results(calls={"p1": running})
        ),
    )
    assert went_on.status == "completed" and returned(went_on, "p1").content == running


def _boom() -> str:
    raise RuntimeError("no")


async def test_h5_bad_answers_are_refused_before_any_model_call() -> None:
    _, suspended = await suspend_h1()
    deferred = suspended.deferred
    thread_id = child_requests(deferred)["p1"].thread_id
    good = {"execution_id": thread_id, "subagent": "reviewer", "status": "completed", "output": "fine"}
    bad: list[Any] = [
        {**good, "execution_id": "thread_other"},
        {**good, "status": "done"},
        {"execution_id": thread_id, "subagent": "reviewer", "status": "running", "output": "early"},
        {"execution_id": thread_id, "subagent": "reviewer", "status": "completed"},
        {**good, "subagent": "writer"},
        ToolReturn(return_value={"execution_id": thread_id, "subagent": "reviewer"}),
        "just text",
    ]
    parent = Script(text("never"))
    agent = lead(parent)
    for answer in bad:
        with pytest.raises(RunError) as caught:
            await agent.run(
                previous_state=suspended.state,
                deferred_resume=DeferredToolResume(deferred, deferred.build_results(calls={"p1": answer})),
            )
        assert (caught.value.code.value, caught.value.details) == (
            "child_result_invalid",
            {"tool_call_id": "p1"},
        ), answer
    metadata = deferred.metadata
    del metadata["p1"]["threadline.child"]
    from harness import DeferredToolRequests

    stripped = DeferredToolRequests(calls=deferred.calls, metadata=metadata)
    with pytest.raises(RunError) as caught:
        await agent.run(
            previous_state=suspended.state,
            deferred_resume=DeferredToolResume(stripped, stripped.build_results(calls={"p1": good})),
        )
    assert caught.value.code.value == "deferred_metadata_invalid"
    assert parent.calls == 0
    # A ToolReturn with a proper value and a ModelRetry-style failure pass the check.
    ok = await agent.run(
        previous_state=suspended.state,
        deferred_resume=DeferredToolResume(
            deferred, deferred.build_results(calls={"p1": ToolReturn(return_value=good)})
        ),
    )
    assert ok.status == "completed"


async def test_h6_an_interrupted_parent_resume_consumes_the_child_answer() -> None:
    def sensitive_local() -> str:
        raise AssertionError("a recovered approval must not run")

    tools = Capability(id="acme.local", tools=[Tool(sensitive_local, requires_approval=True)])
    parent = Script(
        calls(
            ("delegate", {"subagent_name": "reviewer", "prompt": "check"}, "p1"),
            ("sensitive_local", {}, "a1"),
        ),
        text("after"),
    )
    agent = lead(parent, capabilities=[tools])
    suspended = await agent.run("Review the plan", previous_state=HarnessState.new(thread_id="thr_parent1"))
    assert suspended.status == "suspended"
    deferred = suspended.deferred
    request = child_requests(deferred)["p1"]
    answer = {
        "execution_id": request.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": "ok",
    }
    accepted = DeferredToolResume(
        deferred, deferred.build_results(calls={"p1": answer}, approvals={"a1": True}), recovery=True
    )
    result = await agent.run(previous_state=suspended.state, deferred_resume=accepted, tool_recovery="never")
    assert result.status == "completed"
    assert (returned(result, "p1").outcome, returned(result, "p1").content) == ("success", answer)
    assert returned(result, "a1").content == INTERRUPTED_TOOL_RESULT


async def test_h7_a_lost_answer() -> None:
    _, suspended = await suspend_h1()
    first_thread = child_requests(suspended.deferred)["p1"].thread_id
    declared = await lead(Script(text("went on"))).run(previous_state=suspended.state)
    assert returned(declared, "p1").content == INTERRUPTED_TOOL_RESULT
    again = await lead(Script(text("never"))).run(previous_state=suspended.state, tool_recovery="always")
    assert again.status == "suspended"
    request = child_requests(again.deferred)["p1"]
    assert request.thread_id == first_thread
    assert request.input == '{"delegated_task":"check"}'  # a run without input has no parent_task


async def test_h9_no_deferred_lifecycle() -> None:
    parent = Script(text("alone"))
    result = await lead(parent).run("hi", bindings=RunBindings.embedded(deferred_tools_supported=False))
    assert result.status == "completed" and "delegate" not in parent.offered[0]
    assert "resume_subagent" not in parent.offered[0]
    assert "reviewer" not in (parent.instructions[0] or "")
    on = Script(text("x"))
    await lead(on).run("hi")
    assert {"delegate", "resume_subagent"} <= set(on.offered[0])
    assert "- reviewer: Reviews plans." in (on.instructions[0] or "")
    _, suspended = await suspend_h1()
    off = RunBindings.embedded(deferred_tools_supported=False)
    continued = await lead(Script(text("went on"))).run(previous_state=suspended.state, bindings=off)
    assert returned(continued, "p1").content == INTERRUPTED_TOOL_RESULT
    nothing = Script(text("never"))
    deferred = suspended.deferred
    with pytest.raises(DefinitionError) as caught:
        await lead(nothing).run(
            previous_state=suspended.state,
            bindings=off,
            deferred_resume=DeferredToolResume(
                deferred, deferred.build_results(calls={"p1": ToolFailed("no")})
            ),
        )
    assert caught.value.code.value == "deferred_surface_mismatch" and nothing.calls == 0


async def test_h11_lineage_checks_at_construction() -> None:
    _, suspended = await suspend_h1()
    request = child_requests(suspended.deferred)["p1"]
    child = reviewer(Script(text("never")))
    good = request.lineage()
    from dataclasses import replace

    for lineage in (
        replace(good, parent_thread_id=request.thread_id),  # the child's own thread
        replace(good, parent_thread_id="Not A Thread"),
        replace(good, parent_run_id="run-1"),
        replace(good, parent_tool_call_id=" "),
        replace(good, subagent_name="Bad Name"),
        replace(good, delegation_id="x" * 257),
    ):
        with pytest.raises(RunError) as caught:
            await child.run(
                request.input,
                bindings=RunBindings.embedded(lineage=lineage),
                previous_state=HarnessState.new(thread_id=request.thread_id),
            )
        assert caught.value.code.value == "child_lineage_invalid"
    with pytest.raises(RunError):
        await child.run("x", bindings=RunBindings.embedded(lineage={"parent_thread_id": "thr_a"}))


async def test_h12_the_per_response_request_budget() -> None:
    parent = Script(
        calls(
            ("delegate", {"subagent_name": "reviewer", "prompt": "a" * 8000}, "p1"),
            ("delegate", {"subagent_name": "reviewer", "prompt": "b" * 8000}, "p2"),
        )
    )
    result = await lead(parent).run("t" * 20_000)
    assert result.status == "suspended"
    pending = [item.tool_call_id for item in result.deferred.calls]
    assert len(pending) == 1
    refused = ({"p1", "p2"} - set(pending)).pop()
    part = returned(result, refused)
    assert (part.outcome, part.content) == ("failed", "Child request is too large.")


async def test_h13_repeated_call_ids_name_different_children() -> None:
    parent = Script(delegate(call_id="p1"), delegate(prompt="again", call_id="p1"), text("done"))
    agent = lead(parent)
    first = await agent.run("Review the plan", previous_state=HarnessState.new(thread_id="thr_parent1"))
    one = child_requests(first.deferred)["p1"]
    answer = {"execution_id": one.thread_id, "subagent": "reviewer", "status": "completed", "output": "ok"}
    second = await agent.run(
        previous_state=first.state,
        deferred_resume=DeferredToolResume(
            first.deferred, first.deferred.build_results(calls={"p1": answer})
        ),
    )
    assert second.status == "suspended"
    two = child_requests(second.deferred)["p1"]
    assert one.thread_id == derived("thr_parent1", 1, "p1") and two.thread_id == derived(
        "thr_parent1", 2, "p1"
    )
    replay = await lead(Script(text("never"))).run(previous_state=second.state, tool_recovery="always")
    assert child_requests(replay.deferred)["p1"].thread_id == two.thread_id


async def test_resume_subagent_finds_its_edge_in_history() -> None:
    parent = Script(
        delegate(),
        call("resume_subagent", {"execution_id": "thread_unknown", "prompt": "x"}, "r0"),
    )
    agent = lead(parent)
    first = await agent.run("Review the plan", previous_state=HarnessState.new(thread_id="thr_parent1"))
    request = child_requests(first.deferred)["p1"]
    answer = {
        "execution_id": request.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": "ok",
    }
    # The model first names an unknown execution, then continues the real one.
    parent.steps.append(call("resume_subagent", {"execution_id": request.thread_id, "prompt": "more"}, "r1"))
    second = await agent.run(
        previous_state=first.state,
        deferred_resume=DeferredToolResume(
            first.deferred, first.deferred.build_results(calls={"p1": answer})
        ),
    )
    assert returned(second, "r0").content == "Unknown child execution ID."
    assert second.status == "suspended"
    cont = child_requests(second.deferred)["r1"]
    assert (cont.action, cont.thread_id, cont.subagent_name) == ("continue", request.thread_id, "reviewer")
    assert second.deferred.calls[0].target_identity == "tool/threadline.subagents.host/resume_subagent"
    # An unknown edge name.
    unknown = await lead(
        Script(call("delegate", {"subagent_name": "writer", "prompt": "x"}, "u1"), text("ok"))
    ).run("x")
    assert returned(unknown, "u1").content == "Unknown subagent."


async def test_h10_fork_leaves_host_managed_children_alone() -> None:
    agent, suspended = await suspend_h1(
        Script(delegate(), text("got it"), call("resume_subagent", {"execution_id": "", "prompt": "x"}, "r1"))
    )
    branch = suspended.state.fork(thread_id="thr_branch1")
    assert branch.message_history == suspended.state.message_history
    assert branch.agent_context_state == suspended.state.agent_context_state
    request = child_requests(suspended.deferred)["p1"]
    answer = {
        "execution_id": request.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": "ok",
    }
    done = await agent.run(
        previous_state=suspended.state,
        deferred_resume=DeferredToolResume(
            suspended.deferred, suspended.deferred.build_results(calls={"p1": answer})
        ),
    )
    later = done.state.fork(thread_id="thr_branch2")
    again = await lead(
        Script(call("resume_subagent", {"execution_id": request.thread_id, "prompt": "more"}, "r2"))
    ).run("More", previous_state=later)
    cont = child_requests(again.deferred)["r2"]
    assert (cont.action, cont.thread_id, cont.subagent_name) == ("continue", request.thread_id, "reviewer")
    assert cont.parent["thread_id"] == "thr_branch2"


async def test_h14_the_child_key_is_the_harness_own() -> None:
    def queued() -> str:
        raise CallDeferred(
            metadata={"threadline.child": {"action": "start", "thread_id": "thread_x"}, "queue": "q1"}
        )

    agent = ExecutableAgent(
        Script(call("queued", {}, "q1"), text("done")).model,
        capabilities=[Capability(id="acme.queue", tools=[queued])],
    )
    suspended = await agent.run("go")
    metadata = suspended.deferred.metadata["q1"]
    assert metadata["queue"] == "q1" and "threadline.child" not in metadata
    assert child_requests(suspended.deferred) == {}
    result = await agent.run(
        previous_state=suspended.state,
        deferred_resume=DeferredToolResume(
            suspended.deferred, suspended.deferred.build_results(calls={"q1": "any value"})
        ),
    )
    assert result.status == "completed"


async def test_a_child_crash_is_recovered_from_its_checkpoint() -> None:
    """A Host-managed child's own checkpoint recovers like a root thread's (S4, H8)."""
    _, suspended = await suspend_h1()
    request = child_requests(suspended.deferred)["p1"]
    ran: list[str] = []
    box: dict[str, Any] = {}

    async def act(ctx: RunContext[AgentContext], x: str) -> str:
        ran.append(x)
        box["checkpoint"] = await box["stream"].export_state()
        box["stream"].cancel()  # the crash: nothing after this point is recorded
        return "acted"

    external = client_tools_capability([ClientTool("lookup")])
    assert external is not None
    actions = Capability(id="acme.act", tools=[Tool(act, requires_approval=True)])
    child_steps = Script(calls(("lookup", {}, "c1"), ("act", {"x": "a"}, "c2")), text("child finished"))
    child = reviewer(child_steps, capabilities=[actions, external])
    _, first = await run_child(request, child)
    assert first.status == "suspended"
    accepted = DeferredToolResume(
        first.deferred, first.deferred.build_results(calls={"c1": "looked up"}, approvals={"c2": True})
    )
    bindings = RunBindings.embedded(lineage=request.lineage())
    async with child.stream(
        bindings=bindings, previous_state=first.state, deferred_resume=accepted
    ) as stream:
        box["stream"] = stream
        async for _ in stream:
            pass
    assert stream.result is not None and stream.result.status == "cancelled" and ran == ["a"]
    checkpoint: HarnessState = box["checkpoint"]
    kept = accepted.remaining(checkpoint.message_history)
    assert kept is not None
    recovered = await child.run(
        bindings=RunBindings.embedded(lineage=request.lineage()),
        previous_state=checkpoint,
        deferred_resume=DeferredToolResume(kept.requests, kept.results, recovery=True),
        tool_recovery="never",
    )
    assert recovered.status == "completed" and ran == ["a"]
    assert returned(recovered, "c1").content == "looked up"
    assert returned(recovered, "c2").content == INTERRUPTED_TOOL_RESULT
    answer = request.answer(recovered)
    assert isinstance(answer, dict) and answer["output"] == "child finished"
