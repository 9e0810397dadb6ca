"""Declaring children (CHILDREN §2, tests D1 and D3): build-time checks, definition IDs, limits, identity, input."""

from __future__ import annotations

from typing import Any

import pytest
from children_support import Script, call, returned, text
from pydantic_ai import RunContext
from pydantic_ai.capabilities import Capability
from pydantic_ai.usage import UsageLimits

from harness import (
    AgentContext,
    DefinitionError,
    ExecutableAgent,
    HarnessState,
    InstanceIdentity,
    RunBindings,
    SubagentContext,
    SubagentDefinition,
    SubagentIdentity,
)
from harness.children import child_identity, child_input, child_usage_limits
from harness.children.host import HostDelegationCapability
from harness.children.inline import InlineDelegationCapability
from harness.errors import ErrorCode

pytestmark = pytest.mark.anyio


def agent(name: str | None = None, **kwargs: Any) -> ExecutableAgent[str]:
    return ExecutableAgent(Script(text("x")).model, name=name, **kwargs)


def edge(name: str, child: ExecutableAgent[Any], **kwargs: Any) -> SubagentDefinition:
    return SubagentDefinition(name, f"The {name}.", child, **kwargs)


def code_of(build: Any) -> str:
    with pytest.raises(DefinitionError) as caught:
        build()
    return caught.value.code.value


def test_d1_build_checks() -> None:
    researcher = agent("researcher")
    assert code_of(lambda: agent("lead", subagents=[edge("Bad Name", researcher)])) == "subagent_name_invalid"
    assert (
        code_of(lambda: agent("lead", subagents=[edge("r", researcher), edge("r", agent("other"))]))
        == "subagent_name_duplicate"
    )
    back = agent("mid", subagents=[edge("back", agent("lead"))])
    assert code_of(lambda: agent("lead", subagents=[edge("mid", back)])) == "subagent_cycle"
    assert code_of(lambda: agent("lead", subagents=[edge("self", agent("lead"))])) == "subagent_cycle"
    assert (
        code_of(lambda: agent("lead", subagents=[edge("a", researcher), edge("b", agent("b"), mode="host")]))
        == "subagent_mode_conflict"
    )
    unnamed = agent(definition_id="reviewer")
    assert code_of(lambda: agent("lead", subagents=[edge("reviewer", unnamed, mode="host")])) == (
        "subagent_definition_invalid"
    )
    assert code_of(lambda: agent(subagents=[edge("reviewer", agent("reviewer"), mode="host")])) == (
        "subagent_definition_invalid"
    )
    assert code_of(lambda: agent("lead", subagents=[edge("anon", agent())])) == "subagent_definition_invalid"


def test_d1_field_checks() -> None:
    child = agent("child")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"description": "  "}, "subagent_description_invalid"),
        ({"agent": "not an agent"}, "subagent_definition_invalid"),
        ({"mode": "async"}, "subagent_definition_invalid"),
        ({"context": SubagentContext(history="everything")}, "subagent_context_invalid"),  # type: ignore[arg-type]
        ({"context": SubagentContext(include_task="yes")}, "subagent_context_invalid"),  # type: ignore[arg-type]
        ({"context": SubagentContext(history="summary")}, "subagent_context_unsupported"),
        ({"identity": SubagentIdentity(inherit_agent_id=1)}, "subagent_identity_invalid"),  # type: ignore[arg-type]
        ({"usage_limits": {"request_limit": 3}}, "subagent_limits_invalid"),
        ({"bindings_hook": "not callable"}, "subagent_binding_invalid"),
    ]
    for overrides, code in cases:
        fields: dict[str, Any] = {"name": "child", "description": "A child.", "agent": child, **overrides}
        assert (
            code_of(lambda fields=fields: agent("lead", subagents=[SubagentDefinition(**fields)])) == code
        ), overrides
    host = {"name": "child", "description": "A child.", "agent": child, "mode": "host"}
    assert code_of(
        lambda: agent("lead", subagents=[SubagentDefinition(**host, bindings_hook=lambda b: b)])
    ) == ("subagent_binding_invalid")
    selected = SubagentContext(history="selected")
    assert code_of(lambda: agent("lead", subagents=[SubagentDefinition(**host, context=selected)])) == (
        "subagent_context_unsupported"
    )
    assert code_of(lambda: agent("lead", subagents=["researcher"])) == "subagent_definition_invalid"
    assert code_of(lambda: agent("lead", definition_id="  ")) == "subagent_definition_invalid"


def test_d1_a_valid_parent_ends_its_capabilities_with_the_delegation_capability() -> None:
    catalog = Capability(id="acme.catalog", tools=[])
    inline = agent("lead", capabilities=[catalog], subagents=[edge("researcher", agent("researcher"))])
    assert isinstance(inline.delegation, InlineDelegationCapability)
    assert inline.capabilities == (catalog, inline.delegation)
    assert sorted(inline.delegation.get_toolset().tools) == ["delegate", "resume_subagent"]
    assert inline.delegation.get_toolset().id == "a13n-delegation-tools"
    host = agent("lead", subagents=[edge("reviewer", agent("reviewer"), mode="host")])
    assert isinstance(host.delegation, HostDelegationCapability)
    assert host.capabilities[-1] is host.delegation
    assert sorted(host.delegation.get_toolset().tools) == ["delegate", "resume_subagent"]
    assert host.delegation.get_toolset().id == "threadline.subagents.host"
    plain = agent("solo")
    assert plain.delegation is None and plain.capabilities == ()


def test_definition_ids_default_to_the_name_and_can_be_pinned() -> None:
    assert agent("researcher").definition_id == "researcher"
    assert agent("researcher", definition_id="researcher.v1").definition_id == "researcher.v1"
    assert agent().definition_id is None
    pinned = agent(definition_id="anonymous-child")
    lead = agent(subagents=[edge("helper", pinned)])  # an unnamed inline parent is fine
    assert lead.subagents[0].agent is pinned


def test_the_limit_minimum() -> None:
    child = UsageLimits(request_limit=200)
    assert child_usage_limits(child, UsageLimits(tool_calls_limit=3)) == UsageLimits(
        request_limit=50, tool_calls_limit=3
    )
    assert child_usage_limits(child, UsageLimits(request_limit=None, tool_calls_limit=3)) == UsageLimits(
        request_limit=200, tool_calls_limit=3
    )
    assert child_usage_limits(None, None) is None
    assert child_usage_limits(None, UsageLimits(request_limit=None)) == UsageLimits(request_limit=None)
    counted = child_usage_limits(
        UsageLimits(input_tokens_limit=10, count_tokens_before_request=True),
        UsageLimits(input_tokens_limit=5),
    )
    assert counted is not None and counted.input_tokens_limit == 5 and counted.count_tokens_before_request


async def test_d3_the_inline_child_runs_with_the_minimum() -> None:
    seen: list[UsageLimits | None] = []

    def probe(ctx: RunContext[AgentContext]) -> str:
        seen.append(ctx.usage_limits)
        return "ok"

    for edge_limits, expected in (
        (UsageLimits(tool_calls_limit=3), UsageLimits(request_limit=50, tool_calls_limit=3)),
        (
            UsageLimits(request_limit=None, tool_calls_limit=3),
            UsageLimits(request_limit=200, tool_calls_limit=3),
        ),
    ):
        child = ExecutableAgent(
            Script(call("probe", {}, "c1"), text("probed")).model,
            name="researcher",
            capabilities=[Capability(id="acme.probe", tools=[probe])],
            usage_limits=UsageLimits(request_limit=200),
        )
        lead = ExecutableAgent(
            Script(call("delegate", {"subagent": "researcher", "prompt": "go"}, "p1"), text("done")).model,
            name="lead",
            subagents=[edge("researcher", child, usage_limits=edge_limits)],
        )
        result = await lead.run("Do it")
        assert result.status == "completed"
        assert returned(result, "p1").content["output"] == "probed"  # type: ignore[index]
        assert seen[-1] == expected


async def test_the_edge_limits_bound_the_child() -> None:
    def tick() -> str:
        return "tick"

    steps = [call("tick", {}, f"t{i}") for i in range(5)]
    child = ExecutableAgent(
        Script(*steps).model, name="ticker", capabilities=[Capability(id="acme.tick", tools=[tick])]
    )
    lead = ExecutableAgent(
        Script(call("delegate", {"subagent": "ticker", "prompt": "tick"}, "p1"), text("done")).model,
        name="lead",
        subagents=[edge("ticker", child, usage_limits=UsageLimits(tool_calls_limit=3))],
    )
    result = await lead.run("Do it")
    part = returned(result, "p1")
    assert part.outcome == "failed"
    assert isinstance(part.content, str)
    assert part.content.endswith("did not complete successfully (usage_limit_exceeded).")


def test_child_identity_and_input() -> None:
    parent = InstanceIdentity("acme", "user-7", "inst-1", claims={"agent_id": "lead", "tier": "gold"})
    reviewer = agent("reviewer")
    derived = child_identity(parent, edge("reviewer", reviewer), agent_instance_id="inst-2")
    assert (derived.issuer, derived.subject, derived.agent_instance_id) == ("acme", "user-7", "inst-2")
    assert derived.claims == {"agent_id": "reviewer", "tier": "gold"}
    inherited = child_identity(
        parent,
        edge("reviewer", reviewer, identity=SubagentIdentity(inherit_agent_id=True)),
        agent_instance_id="x",
    )
    assert inherited.claims == {"agent_id": "lead", "tier": "gold"}
    context = SubagentContext()
    assert child_input("find X", context=context, parent_input="Do the task") == (
        '{"delegated_task":"find X","parent_task":"Do the task"}'
    )
    assert child_input("find X", context=context, parent_input=None) == '{"delegated_task":"find X"}'
    assert child_input("find X", context=SubagentContext(include_task=False), parent_input="t") == (
        '{"delegated_task":"find X"}'
    )
    selected = child_input(
        "find X", context=SubagentContext(history="selected"), parent_input="", parent_messages=()
    )
    assert selected == '{"delegated_task":"find X","parent_history":"[]"}'


async def test_the_inline_child_identity_and_lineage_reach_the_child_run() -> None:
    seen: list[AgentContext] = []

    def whoami(ctx: RunContext[AgentContext]) -> str:
        seen.append(ctx.deps)
        return "me"

    child = ExecutableAgent(
        Script(call("whoami", {}, "c1"), text("ok")).model,
        name="researcher",
        capabilities=[Capability(id="acme.who", tools=[whoami])],
    )
    lead = ExecutableAgent(
        Script(call("delegate", {"subagent": "researcher", "prompt": "go"}, "p1"), text("done")).model,
        name="lead",
        subagents=[edge("researcher", child)],
    )
    bindings = RunBindings(
        instance=InstanceIdentity("acme", "user-7", "inst-1", claims={"agent_id": "lead"}),
        metadata={"tenant": "t1"},
    )
    result = await lead.run(
        "Do it", bindings=bindings, previous_state=HarnessState.new(thread_id="thr_parent1")
    )
    assert result.status == "completed"
    deps = seen[0]
    child_id = returned(result, "p1").content["execution_id"]  # type: ignore[index]
    assert deps.instance == InstanceIdentity("acme", "user-7", child_id, claims={"agent_id": "researcher"})
    assert deps.deferred_tools_supported is False
    assert dict(deps.metadata) == {"tenant": "t1"}
    assert deps.lineage is not None
    assert (deps.lineage.parent_thread_id, deps.lineage.parent_run_id) == ("thr_parent1", result.run_id)
    assert (deps.lineage.parent_tool_call_id, deps.lineage.parent_agent_instance_id) == ("p1", "inst-1")
    assert (deps.lineage.subagent_name, deps.lineage.delegation_id) == ("researcher", child_id)
    assert ErrorCode.SUBAGENT_BINDING_INVALID.value == "subagent_binding_invalid"
