"""Tool recovery (SPEC §1.7–§1.9, §1.11, §2.5, §2.7.6): the reference case and the full matrix."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import Capability, SetToolMetadata
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolDefinition, ToolDenied
from pydantic_ai.toolsets import ExternalToolset, FunctionToolset

from harness import (
    INTERRUPTED_TOOL_RESULT,
    AgentContext,
    DeferredToolResume,
    ExecutableAgent,
    HarnessState,
    RunBindings,
)
from harness.testing import scripted_model
from harness.tools import RECOVERY_RETRY_SAFE_METADATA_KEY, recovery_retryable

pytestmark = pytest.mark.anyio

executed: list[tuple[str, bool]] = []


def record(name: str, ctx: RunContext[AgentContext]) -> str:
    executed.append((name, ctx.tool_call_approved))
    return f"{name} ran"


@recovery_retryable
def lookup(ctx: RunContext[AgentContext], key: str) -> str:
    return record("lookup", ctx)


def write(ctx: RunContext[AgentContext], key: str) -> str:
    return record("write", ctx)


def sensitive(ctx: RunContext[AgentContext], key: str) -> str:
    return record("sensitive", ctx)


def meta(ctx: RunContext[AgentContext], key: str) -> str:
    return record("meta", ctx)


def final_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("done")])


def reference_agent(**tools: Any) -> ExecutableAgent[str]:
    capability = Capability(
        id="acme.ops",
        tools=[lookup, write, Tool(sensitive, requires_approval=True), meta],
    )
    marker = SetToolMetadata(tools=["meta"], **{RECOVERY_RETRY_SAFE_METADATA_KEY: True})
    return ExecutableAgent(scripted_model(final_script), capabilities=[capability, marker])


def reference_checkpoint() -> HarnessState:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("start")]),
        ModelResponse(
            parts=[
                ToolCallPart("lookup", {"key": "a"}, tool_call_id="L1"),
                ToolCallPart("write", {"key": "b"}, tool_call_id="W1"),
                ToolCallPart("gone", {"key": "c"}, tool_call_id="G1"),
                ToolCallPart("sensitive", {"key": "d"}, tool_call_id="S1"),
                ToolCallPart("meta", {"key": "e"}, tool_call_id="M1"),
            ]
        ),
        ModelRequest(parts=[ToolReturnPart("write", "written", tool_call_id="W1")]),
    ]
    return HarnessState.new(thread_id="thr_recovery1", message_history=history)


def returns_by_id(state: HarnessState | None) -> dict[str, ToolReturnPart]:
    assert state is not None
    return {
        p.tool_call_id: p
        for m in state.message_history
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


@pytest.fixture(autouse=True)
def clear_executed() -> None:
    executed.clear()


async def test_reference_case_declared() -> None:
    result = await reference_agent().run(previous_state=reference_checkpoint(), tool_recovery="declared")
    assert result.status == "completed"
    assert sorted(executed) == [("lookup", False), ("meta", False)]
    returns = returns_by_id(result.state)
    assert returns["W1"].content == "written"
    for unknown in ("G1", "S1"):
        assert returns[unknown].content == INTERRUPTED_TOOL_RESULT
        assert returns[unknown].outcome == "failed"
        assert returns[unknown].metadata is None
    assert returns["L1"].content == "lookup ran"


async def test_reference_case_never() -> None:
    checkpoint = reference_checkpoint()
    result = await reference_agent().run(previous_state=checkpoint, tool_recovery="never")
    assert result.status == "completed"
    assert executed == []
    assert result.state is not None
    request = result.state.message_history[2]
    assert isinstance(request, ModelRequest)
    # The unknown results are appended into the request that holds W1's result, during preparation.
    assert [p.tool_call_id for p in request.parts if isinstance(p, ToolReturnPart)] == [
        "W1",
        "L1",
        "G1",
        "S1",
        "M1",
    ]
    assert len(result.new_messages()) == 1


async def settled_events(mode: str) -> list[tuple[str, str, str | None]]:
    """The tool call/result events a recovery run streams: (event, call id, outcome)."""
    seen: list[tuple[str, str, str | None]] = []
    async with reference_agent().stream(previous_state=reference_checkpoint(), tool_recovery=mode) as stream:
        async for item in stream:
            event = getattr(item, "event", None)
            if isinstance(event, FunctionToolCallEvent):
                seen.append(("call", event.part.tool_call_id, None))
            elif isinstance(event, FunctionToolResultEvent):
                seen.append(("result", event.part.tool_call_id, getattr(event.part, "outcome", None)))
    return seen


@pytest.mark.parametrize("mode", ["never", "declared"])
async def test_every_mode_tells_a_streaming_host_what_it_settled(mode: str) -> None:
    """`never` settles the calls in preparation, yet streams them as the native path does (issue 10, item 9)."""
    seen = await settled_events(mode)
    unknown = {"never": ["L1", "G1", "S1", "M1"], "declared": ["G1", "S1"]}[mode]
    for call_id in unknown:
        assert ("call", call_id, None) in seen
        assert ("result", call_id, "failed") in seen
        assert seen.index(("call", call_id, None)) < seen.index(("result", call_id, "failed"))
    assert "W1" not in {call_id for _, call_id, _ in seen}  # answered before this run: nothing to tell


async def test_reference_case_always() -> None:
    result = await reference_agent().run(previous_state=reference_checkpoint(), tool_recovery="always")
    assert result.status == "suspended"
    assert sorted(executed) == [("lookup", False), ("meta", False)]
    assert result.deferred is not None
    assert [a.tool_call_id for a in result.deferred.approvals] == ["S1"]
    assert returns_by_id(result.state)["G1"].content == INTERRUPTED_TOOL_RESULT


async def test_existing_unknown_result_is_never_reopened() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("start")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"key": "a"}, tool_call_id="L1")]),
        ModelRequest(
            parts=[ToolReturnPart("lookup", INTERRUPTED_TOOL_RESULT, tool_call_id="L1", outcome="failed")]
        ),
    ]
    result = await reference_agent().run(
        previous_state=HarnessState.new(message_history=history), tool_recovery="always"
    )
    assert result.status == "completed"
    assert executed == []


CASES = [
    # (tool, mode, expected): "replay" ran it, "unknown" got the unknown result, "approval" suspended
    ("lookup", "never", "unknown"),
    ("lookup", "declared", "replay"),
    ("lookup", "always", "replay"),
    ("write", "never", "unknown"),
    ("write", "declared", "unknown"),
    ("write", "always", "replay"),
    ("sensitive", "never", "unknown"),
    ("sensitive", "declared", "unknown"),
    ("sensitive", "always", "approval"),
    ("gone", "never", "unknown"),
    ("gone", "declared", "unknown"),
    ("gone", "always", "unknown"),
    ("ext", "never", "unknown"),
    ("ext", "declared", "unknown"),
    ("ext", "always", "external"),
]


def single_call_checkpoint(tool: str) -> HarnessState:
    return HarnessState.new(
        message_history=[
            ModelRequest(parts=[UserPromptPart("start")]),
            ModelResponse(parts=[ToolCallPart(tool, {"key": "k"}, tool_call_id="X1")]),
        ]
    )


def ext_bindings() -> RunBindings:
    ext = ExternalToolset(
        [
            ToolDefinition(
                name="ext",
                parameters_json_schema={"type": "object", "properties": {"key": {"type": "string"}}},
            )
        ],
        id="threadline.client",
    )
    return RunBindings.embedded(capabilities=[Capability(toolsets=[ext])])


@pytest.mark.parametrize(("tool", "mode", "expected"), CASES)
async def test_recovery_matrix_unanswered(tool: str, mode: str, expected: str) -> None:
    result = await reference_agent().run(
        previous_state=single_call_checkpoint(tool), tool_recovery=mode, bindings=ext_bindings()
    )
    returns = returns_by_id(result.state)
    if expected == "replay":
        assert result.status == "completed"
        assert executed == [(tool, False)]
        assert returns["X1"].content == f"{tool} ran"
    elif expected == "unknown":
        assert result.status == "completed"
        assert executed == []
        assert returns["X1"].content == INTERRUPTED_TOOL_RESULT
    elif expected == "approval":
        assert result.status == "suspended" and result.deferred is not None
        assert [a.tool_call_id for a in result.deferred.approvals] == ["X1"]
        assert executed == []
    else:
        assert result.status == "suspended" and result.deferred is not None
        assert [c.tool_call_id for c in result.deferred.calls] == ["X1"]


@pytest.mark.parametrize("mode", ["never", "declared", "always"])
@pytest.mark.parametrize(
    ("fact", "outcome", "content"),
    [
        ("result", "success", "external value"),
        ("failed", "failed", "it broke"),
        ("denied", "denied", "no way"),
    ],
)
async def test_retained_facts_are_consumed_in_every_mode(
    mode: str, fact: str, outcome: str, content: str
) -> None:
    agent = reference_agent()
    # Build the suspended batch the normal way, then recover it as if the resume had crashed.
    if fact != "denied":
        first = await agent.run(
            previous_state=single_call_checkpoint("ext"), tool_recovery="always", bindings=ext_bindings()
        )
        assert first.deferred is not None
        results = first.deferred.build_results(
            calls={"X1": "external value" if fact == "result" else ToolFailed("it broke")}
        )
    else:
        first = await agent.run(
            previous_state=single_call_checkpoint("sensitive"),
            tool_recovery="always",
            bindings=ext_bindings(),
        )
        assert first.deferred is not None
        results = first.deferred.build_results(approvals={"X1": ToolDenied("no way")})
    resume = DeferredToolResume(first.deferred, results, recovery=True)
    result = await agent.run(
        previous_state=first.state, deferred_resume=resume, tool_recovery=mode, bindings=ext_bindings()
    )
    assert result.status == "completed"
    returns = returns_by_id(result.state)
    assert returns["X1"].outcome == outcome
    assert returns["X1"].content == content
    assert executed == []


async def test_recovery_never_reuses_a_positive_approval() -> None:
    agent = reference_agent()
    first = await agent.run(previous_state=single_call_checkpoint("sensitive"), tool_recovery="always")
    assert first.deferred is not None
    resume = DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True), recovery=True)
    declared = await agent.run(previous_state=first.state, deferred_resume=resume, tool_recovery="declared")
    assert returns_by_id(declared.state)["X1"].content == INTERRUPTED_TOOL_RESULT
    always = await agent.run(previous_state=first.state, deferred_resume=resume, tool_recovery="always")
    assert always.status == "suspended"
    assert executed == []


async def test_recovery_resume_already_incorporated_is_dropped() -> None:
    agent = reference_agent()
    first = await agent.run(previous_state=single_call_checkpoint("sensitive"), tool_recovery="always")
    assert first.deferred is not None
    resume = DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True))
    second = await agent.run(previous_state=first.state, deferred_resume=resume)
    assert second.status == "completed"
    assert executed == [("sensitive", True)]
    replayed = DeferredToolResume(
        first.deferred, first.deferred.build_results(approve_all=True), recovery=True
    )
    third = await agent.run("more", previous_state=second.state, deferred_resume=replayed)
    assert third.status == "completed"
    assert executed == [("sensitive", True)]


async def test_recovery_batch_superseded_by_a_later_response_is_dropped() -> None:
    agent = reference_agent()
    first = await agent.run(previous_state=single_call_checkpoint("sensitive"), tool_recovery="always")
    assert first.deferred is not None
    resume = DeferredToolResume(
        first.deferred, first.deferred.build_results(approvals={"X1": False}), recovery=True
    )
    # A history that answered X1 itself, but with a new response pending another call: the batch is superseded.
    assert resume.remaining(list(reference_checkpoint().message_history)) is None


async def test_suspended_checkpoint_without_resume_is_ordinary_recovery() -> None:
    agent = reference_agent()
    first = await agent.run(previous_state=single_call_checkpoint("sensitive"), tool_recovery="always")
    assert first.status == "suspended"
    result = await agent.run("carry on", previous_state=first.state)
    assert result.status == "completed"
    assert returns_by_id(result.state)["X1"].content == INTERRUPTED_TOOL_RESULT


async def test_undelivered_input_is_kept_and_lifted() -> None:
    agent = reference_agent()
    first = await agent.run(previous_state=single_call_checkpoint("sensitive"), tool_recovery="always")
    assert first.deferred is not None
    # New input, but the run suspends again on the replayed approval before the input is sent.
    second = await agent.run("please hurry", previous_state=first.state, tool_recovery="always")
    assert second.status == "suspended"
    assert second.state is not None
    prompts = [
        p.content
        for m in second.state.message_history
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]
    assert prompts.count("please hurry") == 1
    seen: list[list[Any]] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append([p.part_kind for p in messages[-1].parts])
        return ModelResponse(parts=[TextPart("done")])

    later = ExecutableAgent(
        scripted_model(script),
        capabilities=[Capability(id="acme.ops", tools=[Tool(sensitive, requires_approval=True)])],
    )
    third = await later.run(previous_state=second.state, tool_recovery="never")
    assert third.status == "completed"
    # The lifted prompt follows the tool results in the next request.
    assert seen[0][-1] == "user-prompt"
    assert seen[0][:-1] == ["tool-return"]


# -- where the mark comes from (SPEC §1.8, §2.6): every way reaches the freshly prepared definition ----
def fetch(ctx: RunContext[AgentContext], key: str) -> str:
    return record("fetch", ctx)


async def recover_fetch(agent: ExecutableAgent[str], bindings: RunBindings | None = None) -> str:
    """Recover X1 (`fetch`) under "declared": "replay" if it ran, "unknown" if it got the unknown result."""
    result = await agent.run(
        previous_state=single_call_checkpoint("fetch"), tool_recovery="declared", bindings=bindings
    )
    assert result.status == "completed"
    content = returns_by_id(result.state)["X1"].content
    if content == "fetch ran":
        assert executed == [("fetch", False)]
        return "replay"
    assert content == INTERRUPTED_TOOL_RESULT and executed == []
    return "unknown"


def with_tools(*toolsets: Any, tools: Any = ()) -> ExecutableAgent[str]:
    return ExecutableAgent(
        scripted_model(final_script), capabilities=[Capability(id="acme.src", tools=tools, toolsets=toolsets)]
    )


class Catalog:
    """A capability built from an instance's methods (SPEC §1.8: `recovery_retryable(self.method)`)."""

    def __init__(self) -> None:
        self.lookups: list[str] = []

    def lookup_record(self, record_id: str) -> str:
        self.lookups.append(record_id)
        return f"record {record_id}"

    def write_record(self, record_id: str) -> str:
        self.lookups.append(f"write {record_id}")
        return "written"

    def capability(self) -> Capability[AgentContext]:
        return Capability(
            id="acme.catalog", tools=[recovery_retryable(self.lookup_record), self.write_record]
        )


async def test_a_marked_bound_method_is_replayed_on_its_instance() -> None:
    """SPEC §1.8, §2.6: `recovery_retryable(self.method)` marks the method; the unmarked one is not replayed."""
    catalog = Catalog()
    agent = ExecutableAgent(scripted_model(final_script), capabilities=[catalog.capability()])
    checkpoint = HarnessState.new(
        message_history=[
            ModelRequest(parts=[UserPromptPart("start")]),
            ModelResponse(
                parts=[
                    ToolCallPart("lookup_record", {"record_id": "r1"}, tool_call_id="L1"),
                    ToolCallPart("write_record", {"record_id": "r2"}, tool_call_id="W1"),
                ]
            ),
        ]
    )
    result = await agent.run(previous_state=checkpoint, tool_recovery="declared")
    assert result.status == "completed"
    assert catalog.lookups == ["r1"]
    returns = returns_by_id(result.state)
    assert (returns["L1"].content, returns["L1"].outcome) == ("record r1", "success")
    assert (returns["W1"].content, returns["W1"].outcome) == (INTERRUPTED_TOOL_RESULT, "failed")


async def test_a_dynamic_toolset_marks_the_tools_it_builds_for_this_run() -> None:
    """SPEC §1.8, §2.5.4: marks are read from this run's prepared definitions (after dynamic toolsets).

    The same checkpoint, recovered twice: the dynamic toolset marks `fetch` only when this run's
    bindings say so, so the saved call alone never decides.
    """

    def build(ctx: RunContext[AgentContext]) -> FunctionToolset[AgentContext]:
        tool = recovery_retryable(fetch) if ctx.deps.metadata.get("retry_safe") else Tool(fetch)
        return FunctionToolset([tool], id="acme.dynamic")

    agent = with_tools(build)
    assert await recover_fetch(agent, RunBindings.embedded(metadata={"retry_safe": True})) == "replay"
    executed.clear()
    assert await recover_fetch(agent, RunBindings.embedded(metadata={"retry_safe": False})) == "unknown"


async def test_with_metadata_marks_a_whole_toolset() -> None:
    """SPEC §2.6: `AbstractToolset.with_metadata(**{RECOVERY_RETRY_SAFE_METADATA_KEY: True})`."""
    marked = FunctionToolset([fetch], id="acme.fetch").with_metadata(
        **{RECOVERY_RETRY_SAFE_METADATA_KEY: True}
    )
    assert await recover_fetch(with_tools(marked)) == "replay"
    executed.clear()
    other = FunctionToolset([fetch], id="acme.fetch").with_metadata(team="search")
    assert await recover_fetch(with_tools(other)) == "unknown"


@pytest.mark.parametrize(("value", "expected"), [(True, "replay"), (1, "unknown"), ("yes", "unknown")])
async def test_definition_metadata_an_integration_sets_counts_only_as_true(value: Any, expected: str) -> None:
    """SPEC §1.8, §2.6: the key set on `ToolDefinition.metadata` (here by a prepare function); only `True`."""

    async def prepare(ctx: RunContext[AgentContext], tool_def: ToolDefinition) -> ToolDefinition:
        return replace(
            tool_def, metadata={**(tool_def.metadata or {}), RECOVERY_RETRY_SAFE_METADATA_KEY: value}
        )

    assert await recover_fetch(with_tools(tools=[Tool(fetch, prepare=prepare)])) == expected


async def test_an_integrations_marked_external_definition_is_deferred_again() -> None:
    """SPEC §1.8, §2.5.4: an external tool marked in its `ToolDefinition` is replayed under "declared",
    and a replayed external tool defers again (`CallDeferred`): the run suspends on the same call.
    """
    definition = ToolDefinition(
        name="fetch",
        parameters_json_schema={"type": "object", "properties": {"key": {"type": "string"}}},
        metadata={RECOVERY_RETRY_SAFE_METADATA_KEY: True},
    )
    agent = with_tools(ExternalToolset([definition], id="acme.integration"))
    result = await agent.run(previous_state=single_call_checkpoint("fetch"), tool_recovery="declared")
    assert result.status == "suspended" and result.deferred is not None
    assert [(c.tool_call_id, c.target_identity) for c in result.deferred.calls] == [
        ("X1", "tool/acme.integration/fetch")
    ]
    assert result.deferred.approvals == []
    assert "X1" not in returns_by_id(result.state)


async def test_recovery_under_never_consumes_facts_but_not_a_positive_approval() -> None:
    """SPEC §1.11, §2.7.6: under "never" a retained external result is still consumed, while the
    batch's positive approval is not reused: that call gets the unknown result and nothing runs.
    """
    agent = reference_agent()
    checkpoint = HarnessState.new(
        message_history=[
            ModelRequest(parts=[UserPromptPart("start")]),
            ModelResponse(
                parts=[
                    ToolCallPart("ext", {"key": "k"}, tool_call_id="E1"),
                    ToolCallPart("sensitive", {"key": "k"}, tool_call_id="S1"),
                ]
            ),
        ]
    )
    first = await agent.run(previous_state=checkpoint, tool_recovery="always", bindings=ext_bindings())
    assert first.status == "suspended" and first.deferred is not None
    assert [c.tool_call_id for c in first.deferred.calls] == ["E1"]
    assert [a.tool_call_id for a in first.deferred.approvals] == ["S1"]
    results = first.deferred.build_results(calls={"E1": "external value"}, approve_all=True)
    resume = DeferredToolResume(first.deferred, results, recovery=True)
    result = await agent.run(
        previous_state=first.state, deferred_resume=resume, tool_recovery="never", bindings=ext_bindings()
    )
    assert result.status == "completed"
    assert executed == []
    returns = returns_by_id(result.state)
    assert (returns["E1"].content, returns["E1"].outcome) == ("external value", "success")
    assert (returns["S1"].content, returns["S1"].outcome) == (INTERRUPTED_TOOL_RESULT, "failed")
