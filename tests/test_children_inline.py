"""Inline children (CHILDREN §3, §6.3; tests I1-I10): delegate, resume, fork, flag off, failures, events, recovery."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from children_support import (
    Script,
    call,
    calls,
    delegation_events,
    registry,
    returned,
    returns,
    text,
    user_prompts,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
from pydantic_ai.messages import FunctionToolResultEvent, ModelMessage, ModelResponse
from pydantic_ai.tools import RunContext

from harness import (
    INTERRUPTED_TOOL_RESULT,
    AgentContext,
    ClientTool,
    ExecutableAgent,
    HarnessEvent,
    HarnessRunResultEvent,
    HarnessState,
    RunBindings,
    StateError,
    SubagentDefinition,
    client_tools_capability,
)
from harness.children import inline_child_thread_id
from harness.children.inline import Messages
from harness.children.registry import Registry

pytestmark = pytest.mark.anyio

DEFERRAL_UNAVAILABLE = "Deferred tool interaction is unavailable for this Run."
RECORD_KEYS = {
    "child_definition_id",
    "child_instance_id",
    "child_thread_id",
    "refs",
    "state",
    "subagent_name",
}


def derived(parent_thread: str, child_id: str) -> str:
    digest = hashlib.sha256(f"threadline.inline-child\0{parent_thread}\0{child_id}".encode()).hexdigest()
    return f"thread_{digest[:32]}"


def lead_with(child: ExecutableAgent[Any], parent: Script, **edge: Any) -> ExecutableAgent[str]:
    return ExecutableAgent(
        parent.model, name="lead", subagents=[SubagentDefinition("researcher", "Finds facts.", child, **edge)]
    )


def researcher(script: Script, **kwargs: Any) -> ExecutableAgent[str]:
    return ExecutableAgent(script.model, name="researcher", **kwargs)


def delegate(prompt: str = "find X", call_id: str = "p1", name: str = "researcher") -> ModelResponse:
    return call("delegate", {"subagent": name, "prompt": prompt}, call_id)


def resume(execution_id: str, prompt: str = "go on", call_id: str = "p2") -> ModelResponse:
    return call("resume_subagent", {"execution_id": execution_id, "prompt": prompt}, call_id)


async def streamed(agent: ExecutableAgent[Any], *args: Any, **kwargs: Any) -> tuple[list[Any], Any]:
    items: list[Any] = []
    async with agent.stream(*args, **kwargs) as stream:
        async for item in stream:
            items.append(item)
    assert isinstance(items[-1], HarnessRunResultEvent)
    return items, items[-1].result


def with_registry(state: HarnessState, children: Any, *, version: str = "2") -> HarnessState:
    data = json.loads(state.model_dump_json())
    data["agent_context_state"]["entries"]["a13n.subagents"] = {
        "version": version,
        "data": {"children": children},
    }
    return HarnessState.model_validate(data)


async def run_i1() -> tuple[list[Any], Any, Script]:
    child = Script(text("child answer 1"))
    lead = lead_with(researcher(child), Script(delegate(), text("done")))
    items, result = await streamed(
        lead, "Do the task", previous_state=HarnessState.new(thread_id="thr_parent1")
    )
    return items, result, child


async def test_i1_start() -> None:
    items, result, child = await run_i1()
    assert result.status == "completed" and result.output == "done"
    content = returned(result, "p1").content
    child_id = content["execution_id"]
    assert content == {"execution_id": child_id, "subagent": "researcher", "output": "child answer 1"}
    assert child_id.startswith("researcher-") and len(child_id) == len("researcher-") + 4
    int(child_id[-4:], 16)
    records = registry(result.state)
    assert list(records) == [child_id] and set(records[child_id]) == RECORD_KEYS
    record = records[child_id]
    assert record["child_thread_id"] == derived("thr_parent1", child_id) == record["state"]["thread_id"]
    assert (record["child_definition_id"], record["subagent_name"], record["refs"]) == (
        "researcher",
        "researcher",
        [],
    )
    assert user_prompts(child.sent[0]) == ['{"delegated_task":"find X","parent_task":"Do the task"}']
    assert result.state.refs == ()
    # Events: started then completed, directly before p1's tool result event.
    events = delegation_events(items)
    assert [(e["action"], e["status"]) for e in events] == [
        ("started", "running"),
        ("completed", "completed"),
    ]
    child_run_ids = {m["run_id"] for m in record["state"]["message_history"] if m["kind"] == "response"}
    for event in events:
        assert event["type"] == "inline_delegation" and event["parent_tool_call_id"] == "p1"
        assert event["child_instance_id"] == child_id and event["subagent"] == "researcher"
        assert event["parent_run_id"] == result.run_id
        assert {event["child_run_id"]} == child_run_ids
    assert events[0]["invocation_id"] == events[1]["invocation_id"]
    assert events[0]["invocation_id"].startswith("delegation-")
    positions = [
        i
        for i, item in enumerate(items)
        if isinstance(item, HarnessEvent) and getattr(item.event, "kind", None) == "delegation"
    ]
    tool_result = next(
        i
        for i, item in enumerate(items)
        if isinstance(item, HarnessEvent)
        and isinstance(item.event, FunctionToolResultEvent)
        and item.event.tool_call_id == "p1"
    )
    assert positions == [tool_result - 2, tool_result - 1]


async def test_i2_continue_and_i3_fork() -> None:
    _, first, _ = await run_i1()
    child_id = returned(first, "p1").content["execution_id"]
    before = registry(first.state)[child_id]
    child = Script(text("child answer 2"))
    lead = lead_with(researcher(child), Script(resume(child_id), text("done 2")))
    second = await lead.run("Continue", previous_state=first.state)
    assert second.status == "completed"
    assert returned(second, "p2").content == {
        "execution_id": child_id,
        "subagent": "researcher",
        "output": "child answer 2",
    }
    after = registry(second.state)[child_id]
    assert after["child_thread_id"] == before["child_thread_id"] == after["state"]["thread_id"]
    assert len(before["state"]["message_history"]) == 2 and len(after["state"]["message_history"]) == 4
    run_ids = [m["run_id"] for m in after["state"]["message_history"] if m["kind"] == "response"]
    assert len(set(run_ids)) == 2
    assert user_prompts(child.sent[0])[-1] == '{"delegated_task":"go on","parent_task":"Continue"}'

    # I3: fork re-keys the record deterministically; the stored child state moves lazily.
    source_json = second.state.model_dump_json()
    branch = second.state.fork(thread_id="thr_branch1")
    again = second.state.fork(thread_id="thr_branch1")
    assert branch.model_dump_json() == again.model_dump_json()
    assert second.state.model_dump_json() == source_json
    forked = registry(branch)[child_id]
    assert forked["child_thread_id"] == derived("thr_branch1", child_id)
    assert forked["state"] == after["state"]
    assert branch.message_history == second.state.message_history
    lead = lead_with(researcher(Script(text("child answer 3"))), Script(resume(child_id), text("done 3")))
    third = await lead.run("Continue", previous_state=branch)
    moved = registry(third.state)[child_id]
    assert moved["child_thread_id"] == moved["state"]["thread_id"] == derived("thr_branch1", child_id)
    assert moved["state"]["environment_states"] == {}
    assert moved["state"]["message_history"][:4] == after["state"]["message_history"]
    assert len(moved["state"]["message_history"]) == 6


async def test_i4_deferred_tools_are_off_inside_an_inline_child() -> None:
    def sensitive() -> str:
        return "done"

    def asks() -> str:
        raise CallDeferred()

    def gate(ctx: RunContext[AgentContext]) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        return "passed"

    tools = Capability(id="acme.tools", tools=[Tool(sensitive, requires_approval=True), asks, gate])
    external = client_tools_capability([ClientTool("ext_lookup")])
    assert external is not None
    child = Script(calls(("asks", {}, "c1"), ("gate", {}, "c2")), text("ok"))
    lead = lead_with(researcher(child, capabilities=[tools, external]), Script(delegate(), text("done")))
    result = await lead.run("Do the task")
    assert result.status == "completed"
    assert child.offered[0] == ["asks", "gate"]
    stored = registry(result.state)
    child_history = HarnessState.model_validate(next(iter(stored.values()))["state"]).message_history
    for call_id in ("c1", "c2"):
        part = next(p for p in returns(child_history) if p.tool_call_id == call_id)
        assert (part.outcome, part.content) == ("failed", DEFERRAL_UNAVAILABLE)
    assert returned(result, "p1").content["output"] == "ok"


async def test_i5_a_hook_that_turns_deferred_tools_on_fails_the_parent() -> None:
    child = Script(text("never"))
    lead = lead_with(
        researcher(child),
        Script(delegate(), text("done")),
        bindings_hook=lambda bindings: RunBindings(
            instance=bindings.instance, lineage=bindings.lineage, deferred_tools_supported=True
        ),
    )
    result = await lead.run("Do the task")
    assert result.status == "failed" and result.failure.code == "subagent_binding_invalid"
    assert child.calls == 0


async def test_a_hook_that_returns_something_else_fails_the_parent() -> None:
    child = Script(text("never"))
    lead = lead_with(researcher(child), Script(delegate(), text("done")), bindings_hook=lambda bindings: None)
    items, result = await streamed(lead, "Do the task")
    assert result.status == "failed" and result.failure.code == "subagent_binding_invalid"
    assert child.calls == 0
    assert [(e["action"], e["status"]) for e in delegation_events(items)] == [("failed", "dispatch_rejected")]


async def test_an_oversized_child_output_is_unusable_but_retained() -> None:
    big = "x" * (256 * 1024)
    lead = lead_with(researcher(Script(text(big))), Script(delegate(), text("noted")))
    items, result = await streamed(lead, "Do the task")
    child_id = next(iter(registry(result.state)))
    part = returned(result, "p1")
    assert (part.outcome, part.content) == ("failed", f"Inline child {child_id} returned an unusable result.")
    assert [e["status"] for e in delegation_events(items)] == ["running", "output_rejected"]


async def test_a_hook_may_adjust_metadata() -> None:
    seen: list[dict[str, Any]] = []

    def probe(ctx: RunContext[AgentContext]) -> str:
        seen.append(dict(ctx.deps.metadata))
        return "ok"

    from dataclasses import replace

    child = researcher(Script(call("probe", {}, "c1"), text("ok")), capabilities=[Capability(tools=[probe])])
    lead = lead_with(
        child,
        Script(delegate(), text("done")),
        bindings_hook=lambda bindings: replace(bindings, metadata={"extra": 1}),
    )
    assert (await lead.run("Do the task")).status == "completed"
    assert seen == [{"extra": 1}]


async def test_i6_a_child_tool_failure_is_retained() -> None:
    def boom() -> str:
        raise RuntimeError("child tool broke")

    child = Script(call("boom", {}, "x1"), text("unreachable"))
    lead = lead_with(
        researcher(child, capabilities=[Capability(tools=[boom])]), Script(delegate(), text("noted"))
    )
    items, result = await streamed(lead, "Do the task")
    assert result.status == "completed"
    part = returned(result, "p1")
    child_id = next(iter(registry(result.state)))
    assert part.outcome == "failed"
    assert part.content == f"Inline child {child_id} did not complete successfully (tool_execution_failed)."
    stored = HarnessState.model_validate(registry(result.state)[child_id]["state"])
    assert returned(stored, "x1").content == INTERRUPTED_TOOL_RESULT
    assert [(e["action"], e["status"]) for e in delegation_events(items)] == [
        ("started", "running"),
        ("failed", "failed"),
    ]


async def test_i7_model_facing_failures() -> None:
    lead = lead_with(
        researcher(Script()),
        Script(
            calls(
                ("delegate", {"subagent": "nobody", "prompt": "x"}, "p1"),
                ("resume_subagent", {"execution_id": "researcher-0000", "prompt": "x"}, "p2"),
            ),
            text("x"),
        ),
    )
    result = await lead.run("Do the task")
    assert (returned(result, "p1").outcome, returned(result, "p1").content) == (
        "failed",
        Messages.UNKNOWN_SUBAGENT,
    )
    assert (returned(result, "p2").outcome, returned(result, "p2").content) == (
        "failed",
        Messages.UNKNOWN_CHILD,
    )
    assert Messages.UNKNOWN_SUBAGENT == "Unknown inline subagent."
    assert Messages.UNKNOWN_CHILD == "Unknown inline child instance ID."

    _, first, _ = await run_i1()
    child_id = next(iter(registry(first.state)))
    # A record of another definition.
    records = copy.deepcopy(registry(first.state))
    records[child_id]["child_definition_id"] = "researcher.v0"
    lead = lead_with(researcher(Script()), Script(resume(child_id), text("x")))
    result = await lead.run("Continue", previous_state=with_registry(first.state, records))
    assert returned(result, "p2").content == "Inline child instance does not match the selected subagent."
    # A record whose edge is gone.
    other = ExecutableAgent(
        Script(resume(child_id), text("x")).model,
        name="lead",
        subagents=[SubagentDefinition("writer", "Writes.", ExecutableAgent(Script().model, name="writer"))],
    )
    result = await other.run("Continue", previous_state=first.state)
    assert returned(result, "p2").content == "Unknown inline subagent."
    # Two concurrent continuations of one child.
    child = Script(text("child answer 2"))
    lead = lead_with(
        researcher(child),
        Script(
            calls(
                ("resume_subagent", {"execution_id": child_id, "prompt": "a"}, "p2"),
                ("resume_subagent", {"execution_id": child_id, "prompt": "b"}, "p3"),
            ),
            text("x"),
        ),
    )
    result = await lead.run("Continue", previous_state=first.state)
    outcomes = sorted(
        (returned(result, cid).outcome or "success", str(returned(result, cid).content))
        for cid in ("p2", "p3")
    )
    assert outcomes[0] == ("failed", "Inline child instance is already active.")
    assert child.calls == 1
    # A retained child whose own registry has an unsupported version: its run cannot be constructed.
    nested_child = ExecutableAgent(
        Script(text("never")).model,
        name="researcher",
        subagents=[SubagentDefinition("helper", "Helps.", ExecutableAgent(Script().model, name="helper"))],
    )
    records = copy.deepcopy(registry(first.state))
    records[child_id]["state"]["agent_context_state"]["entries"]["a13n.subagents"] = {
        "version": "1",
        "data": {"children": {}},
    }
    parent = Script(resume(child_id), text("went on"))
    lead = lead_with(nested_child, parent)
    result = await lead.run("Continue", previous_state=with_registry(first.state, records))
    assert result.status == "completed" and result.output == "went on"
    assert returned(result, "p2").content == "Inline delegation failed before a complete child result."


async def test_the_id_space_can_be_exhausted() -> None:
    _, first, _ = await run_i1()
    record = next(iter(registry(first.state).values()))
    from harness.children.inline import _reserve

    taken = {f"researcher-{n:04x}" for n in range(1 << 16)}
    with pytest.raises(Exception) as caught:
        _reserve("researcher", taken)
    assert str(caught.value) == "Inline child ID space is exhausted."
    assert _reserve("researcher", taken - {"researcher-00ff"}) == "researcher-00ff"
    assert record["child_instance_id"] not in {
        _reserve("researcher", {record["child_instance_id"]}) for _ in range(50)
    }


async def test_i8_crash_mid_child_and_recovery() -> None:
    box: dict[str, Any] = {}

    async def child_step(messages: list[ModelMessage]) -> ModelResponse:
        box["checkpoint"] = await box["stream"].export_state()
        box["stream"].cancel()
        return text("child answer 1")

    class Async(Script):
        async def __call__(self, messages: list[ModelMessage], info: Any) -> ModelResponse:  # type: ignore[override]
            self.sent.append(list(messages))
            return await child_step(messages)

    child = Async()
    lead = lead_with(researcher(child), Script(delegate(), text("done")))
    async with lead.stream("Do the task", previous_state=HarnessState.new(thread_id="thr_parent1")) as stream:
        box["stream"] = stream
        async for _ in stream:
            pass
    result = stream.result
    assert result is not None and result.status == "cancelled"
    checkpoint: HarnessState = box["checkpoint"]
    assert checkpoint.agent_context_state.get("a13n.subagents") is None
    last = checkpoint.message_history[-1]
    assert isinstance(last, ModelResponse) and [p.tool_call_id for p in last.parts] == ["p1"]
    assert result.state.agent_context_state.get("a13n.subagents") is None
    assert returned(result, "p1").content == INTERRUPTED_TOOL_RESULT

    # Recovery of the checkpoint: "declared" gives the unknown result and starts no child.
    idle = Script(text("never"))
    declared = await lead_with(researcher(idle), Script(text("recovered"))).run(previous_state=checkpoint)
    assert returned(declared, "p1").content == INTERRUPTED_TOOL_RESULT and idle.calls == 0
    assert declared.state.agent_context_state.get("a13n.subagents") is None
    # "always" re-executes the call: a new child with its own ID.
    again = Script(text("child answer again"))
    always = await lead_with(researcher(again), Script(text("recovered"))).run(
        previous_state=checkpoint, tool_recovery="always"
    )
    assert again.calls == 1
    assert returned(always, "p1").content["output"] == "child answer again"
    assert len(registry(always.state)) == 1


async def test_i9_an_orphan_record_after_the_child_ended() -> None:
    lead = lead_with(researcher(Script(text("child answer 1"))), Script(delegate(), text("done")))
    async with lead.stream("Do the task") as stream:
        async for item in stream:
            if (
                isinstance(item, HarnessEvent)
                and getattr(item.event, "payload", {}).get("action") == "completed"
            ):
                orphaned = await stream.export_state()
                break
    assert len(registry(orphaned)) == 1
    last = orphaned.message_history[-1]
    assert isinstance(last, ModelResponse) and last.parts[0].tool_call_id == "p1"
    result = await lead_with(researcher(Script()), Script(text("recovered"))).run(previous_state=orphaned)
    assert returned(result, "p1").content == INTERRUPTED_TOOL_RESULT
    assert registry(result.state) == registry(orphaned)


async def test_i10_a_bad_registry_fails_construction_and_fork() -> None:
    _, first, _ = await run_i1()
    child_id = next(iter(registry(first.state)))
    records = registry(first.state)
    v1 = with_registry(first.state, records, version="1")
    second = copy.deepcopy(records[child_id])
    second["child_instance_id"] = "researcher-ffff" if child_id != "researcher-ffff" else "researcher-fffe"
    duplicate = with_registry(first.state, {**records, second["child_instance_id"]: second})
    stored_ref = copy.deepcopy(records)
    stored_ref[child_id]["state"] = {"key": "child/1", "digest": "0" * 64, "size": 10}
    in_store = with_registry(first.state, stored_ref)
    parent = Script(text("never"))
    lead = lead_with(researcher(Script()), parent)
    for state, code in (
        (v1, "capability_state_version_unsupported"),
        (duplicate, "capability_state_invalid"),
        (in_store, "state_store_missing"),
    ):
        with pytest.raises(StateError) as caught:
            await lead.run("Continue", previous_state=state)
        assert caught.value.code.value == code
        assert caught.value.details["capability_id"] == "a13n.subagents"
    assert parent.calls == 0
    for state, code in (
        (v1, "capability_state_version_unsupported"),
        (duplicate, "capability_state_invalid"),
    ):
        with pytest.raises(StateError) as caught:
            state.fork(thread_id="thr_branch1")
        assert caught.value.code.value == code
    # A run of a definition without inline children passes the namespace through unchanged.
    plain = await ExecutableAgent(Script(text("fine")).model).run("hi", previous_state=v1)
    assert plain.state.agent_context_state.get("a13n.subagents") == v1.agent_context_state.get(
        "a13n.subagents"
    )


async def test_i12_nested_children_are_re_keyed_when_the_child_is_loaded() -> None:
    def executed(messages: list[ModelMessage], call_id: str) -> str:
        return str(next(p.content["execution_id"] for p in returns(messages) if p.tool_call_id == call_id))

    helper = ExecutableAgent(Script(text("grand 1"), text("grand 2")).model, name="helper")
    middle = Script(
        call("delegate", {"subagent": "helper", "prompt": "sub"}, "r1"),
        text("child done"),
        lambda messages: call(
            "resume_subagent", {"execution_id": executed(messages, "r1"), "prompt": "more"}, "r2"
        ),
        text("child done 2"),
    )
    nested = ExecutableAgent(
        middle.model, name="researcher", subagents=[SubagentDefinition("helper", "Helps.", helper)]
    )
    parent = Script(
        delegate(),
        text("done"),
        lambda messages: resume(executed(messages, "p1")),
        text("done 2"),
    )
    lead = lead_with(nested, parent)
    first = await lead.run("Do the task", previous_state=HarnessState.new(thread_id="thr_parent1"))
    child_id = next(iter(registry(first.state)))
    inner = HarnessState.model_validate(registry(first.state)[child_id]["state"])
    grand_id = next(iter(registry(inner)))
    assert registry(inner)[grand_id]["child_thread_id"] == derived(inner.thread_id, grand_id)
    branch = first.state.fork(thread_id="thr_branch1")
    second = await lead.run("Continue", previous_state=branch)
    assert returned(second, "p2").content["output"] == "child done 2"
    moved = HarnessState.model_validate(registry(second.state)[child_id]["state"])
    assert moved.thread_id == derived("thr_branch1", child_id)
    grand = registry(moved)[grand_id]
    assert grand["child_thread_id"] == grand["state"]["thread_id"] == derived(moved.thread_id, grand_id)
    assert len(grand["state"]["message_history"]) == 4


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(st.from_regex(r"[a-z][a-z0-9_-]{1,8}", fullmatch=True), min_size=1, max_size=20),
    suffixes=st.lists(st.integers(0, 0xFFFF), min_size=20, max_size=20, unique=True),
    branch=st.from_regex(r"thr_[a-z0-9]{1,12}", fullmatch=True),
)
def test_fork_of_random_registries(names: list[str], suffixes: list[int], branch: str) -> None:
    source = "thr_sourcethread"
    if branch == source:
        return
    children: dict[str, Any] = {}
    for name, suffix in zip(names, suffixes, strict=False):
        child_id = f"{name}-{suffix:04x}"
        state = HarnessState.new(thread_id=derived(source, child_id))
        children[child_id] = {
            "child_definition_id": name,
            "child_instance_id": child_id,
            "child_thread_id": state.thread_id,
            "refs": [],
            "state": json.loads(state.model_dump_json()),
            "subagent_name": name,
        }
    state = with_registry(HarnessState.new(thread_id=source), children)
    forked = state.fork(thread_id=branch)
    assert forked.model_dump_json() == state.fork(thread_id=branch).model_dump_json()
    records = registry(forked)
    assert Registry.model_validate({"children": records}).children.keys() == children.keys()
    threads = [record["child_thread_id"] for record in records.values()]
    assert len(set(threads)) == len(threads)
    assert threads == [derived(branch, key) for key in records]
    assert all(records[key]["state"] == children[key]["state"] for key in children)


async def test_the_thread_derivation_helper_matches() -> None:
    assert inline_child_thread_id("thr_parent1", "researcher-1a2b") == derived(
        "thr_parent1", "researcher-1a2b"
    )
