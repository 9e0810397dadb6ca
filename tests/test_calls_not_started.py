"""Calls known not started (SPEC §2.5.8 as LIVE §5.3 adds it) and the honest denial of unanswered approvals
(LIVE §5.4), in process: the core decides from the fact a host passes (`calls_not_started`), whatever
the tool-recovery mode says, and `HarnessService`'s behaviour (nothing passed) stays §2.5.4's.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolApproved
from pydantic_ai.toolsets import ExternalToolset
from test_recovery import returns_by_id

from harness import (
    INTERRUPTED_TOOL_RESULT,
    NOT_EXECUTED_TOOL_RESULT,
    UNANSWERED_APPROVAL_MESSAGE,
    AgentContext,
    DeferredToolResume,
    ErrorCode,
    ExecutableAgent,
    HarnessState,
    InputError,
    RunBindings,
)
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio

ran: list[tuple[str, dict[str, Any], bool]] = []


def write(ctx: RunContext[AgentContext], key: str) -> str:
    ran.append(("write", {"key": key}, ctx.tool_call_approved))
    return f"wrote {key}"


def transfer(ctx: RunContext[AgentContext], amount: int) -> str:
    ran.append(("transfer", {"amount": amount}, ctx.tool_call_approved))
    return f"sent {amount}"


@pytest.fixture(autouse=True)
def clear() -> None:
    ran.clear()


def done(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("done")])


def agent(*, with_transfer: bool = True, with_external: bool = False) -> ExecutableAgent[str]:
    tools: list[Any] = [write]
    if with_transfer:
        tools.append(Tool(transfer, requires_approval=True))
    toolsets: list[Any] = []
    if with_external:
        toolsets.append(ExternalToolset([_external_def()], id="host.tools"))
    return ExecutableAgent(
        scripted_model(done), capabilities=[Capability(id="acme.ops", tools=tools, toolsets=toolsets)]
    )


def _external_def() -> Any:
    from pydantic_ai.tools import ToolDefinition

    return ToolDefinition(name="ship", parameters_json_schema={"type": "object", "properties": {}})


def pending(*calls: ToolCallPart) -> HarnessState:
    """A checkpoint whose last response's calls are all unanswered (a crash before any result)."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=list(calls)),
    ]
    return HarnessState.new(thread_id="thr_notstarted", message_history=history)


W1 = ToolCallPart("write", {"key": "a"}, tool_call_id="W1")
T1 = ToolCallPart("transfer", {"amount": 10}, tool_call_id="T1")


@pytest.mark.parametrize("mode", ["declared", "never", "always"])
async def test_a_plain_call_known_not_started_runs_once_in_every_mode(mode: str) -> None:
    result = await agent().run(previous_state=pending(W1), tool_recovery=mode, calls_not_started={"W1"})
    assert result.status == "completed"
    assert ran == [("write", {"key": "a"}, False)]
    assert returns_by_id(result.state)["W1"].content == "wrote a"


@pytest.mark.parametrize("mode", ["declared", "never"])
async def test_without_the_fact_the_same_call_gets_the_unknown_result(mode: str) -> None:
    result = await agent().run(previous_state=pending(W1), tool_recovery=mode)
    assert ran == []
    assert returns_by_id(result.state)["W1"].content == INTERRUPTED_TOOL_RESULT


async def test_an_approval_tool_known_not_started_asks_for_approval_again() -> None:
    result = await agent().run(previous_state=pending(T1), tool_recovery="never", calls_not_started=["T1"])
    assert result.status == "suspended" and ran == []
    assert result.deferred is not None
    assert [item.tool_call_id for item in result.deferred.approvals] == ["T1"]


async def approved_then_lost() -> tuple[HarnessState, DeferredToolResume]:
    """`transfer` suspended for approval, approved with other arguments; the resume "crashed" before
    the call ran, so the host retains the batch as `recovery=True`."""
    first = await agent().run(previous_state=pending(T1), tool_recovery="always")
    assert first.deferred is not None and first.state is not None
    answers = first.deferred.build_results(approvals={"T1": ToolApproved(override_args={"amount": 7})})
    return first.state, DeferredToolResume(first.deferred, answers, recovery=True)


async def test_a_retained_approval_is_used_exactly_when_its_call_is_known_not_started() -> None:
    state, retained = await approved_then_lost()
    used = await agent().run(previous_state=state, deferred_resume=retained, calls_not_started={"T1"})
    assert used.status == "completed"
    assert ran == [("transfer", {"amount": 7}, True)], "once, with the approval and its arguments"
    assert returns_by_id(used.state)["T1"].content == "sent 7"

    ran.clear()
    unknown = await agent().run(previous_state=state, deferred_resume=retained, tool_recovery="declared")
    assert ran == [] and returns_by_id(unknown.state)["T1"].content == INTERRUPTED_TOOL_RESULT


async def test_a_gone_tool_of_a_call_not_started_is_not_executed_never_unknown() -> None:
    result = await agent(with_transfer=False).run(
        previous_state=pending(W1, T1), tool_recovery="always", calls_not_started={"T1"}
    )
    returns = returns_by_id(result.state)
    assert (returns["T1"].content, returns["T1"].outcome) == (NOT_EXECUTED_TOOL_RESULT, "failed")
    assert returns["W1"].content == "wrote a", "W1 replays under ALWAYS, as §2.5.4 says"

    state, retained = await approved_then_lost()
    gone = agent(with_transfer=False)
    kept = await gone.run(previous_state=state, deferred_resume=retained, calls_not_started={"T1"})
    assert kept.status == "completed", "a recovery batch's approval of a gone tool is no mismatch"
    assert returns_by_id(kept.state)["T1"].content == NOT_EXECUTED_TOOL_RESULT
    lost = await gone.run(previous_state=state, deferred_resume=retained)
    assert returns_by_id(lost.state)["T1"].content == INTERRUPTED_TOOL_RESULT
    assert ran == [("write", {"key": "a"}, False)]


async def test_an_external_call_in_the_set_follows_its_mode() -> None:
    ship = ToolCallPart("ship", {}, tool_call_id="X1")
    host = RunBindings.embedded(deferred_tools_supported=True)
    result = await agent(with_external=True).run(
        previous_state=pending(ship), tool_recovery="declared", calls_not_started={"X1"}, bindings=host
    )
    assert returns_by_id(result.state)["X1"].content == INTERRUPTED_TOOL_RESULT


async def test_unanswered_approvals_are_denied_honestly_once() -> None:
    first = await agent().run(previous_state=pending(T1), tool_recovery="always")
    assert first.deferred is not None
    assert first.deferred.deny_unanswered(UNANSWERED_APPROVAL_MESSAGE, ()) is None
    denials = first.deferred.deny_unanswered(UNANSWERED_APPROVAL_MESSAGE, {"T1"})
    assert denials is not None and denials.recovery
    for tools in (agent(), agent(with_transfer=False)):  # its tool may be gone: a denial runs nothing
        result = await tools.run("carry on", previous_state=first.state, deferred_resume=denials)
        assert result.status == "completed"
        answer = returns_by_id(result.state)["T1"]
        assert (answer.content, answer.outcome) == (UNANSWERED_APPROVAL_MESSAGE, "denied")
    assert ran == []


@pytest.mark.parametrize("bad", ["W1", b"W1", 3, [1]])
async def test_calls_not_started_must_be_call_ids(bad: Any) -> None:
    with pytest.raises(InputError) as caught:
        agent().stream(previous_state=pending(W1), calls_not_started=bad)
    assert caught.value.code is ErrorCode.INPUT_INVALID
