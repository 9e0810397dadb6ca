"""Every code example of the design document (SPEC Part 1) runs as written, with `from harness import ...`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo

import harness
from harness import AgentContext, ExecutableAgent, RunBindings
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
EMBEDDING = ROOT / "docs" / "embedding.md"


def fresh_bindings() -> RunBindings:
    return RunBindings.embedded()


def approve_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("confirm", {}, tool_call_id="C1")])
    return ModelResponse(parts=[TextPart(f"confirmed: {returns[-1].content}")])


def confirm() -> str:
    return "yes"


executable = ExecutableAgent(
    scripted_model(approve_then_answer),
    capabilities=[Capability(id="acme.confirm", tools=[Tool(confirm, requires_approval=True)])],
)


async def test_continue_serialize_fork_stream_suspend_and_recover() -> None:
    # §1.3 Continue a Thread
    from harness import HarnessState

    initial_state = HarnessState.new(thread_id="thr_productthread1")
    first = await executable.run("Draft the plan", bindings=fresh_bindings(), previous_state=initial_state)
    if first.state is None:
        raise RuntimeError("No continuation state is available")
    second = await executable.run(
        "Review it",
        bindings=fresh_bindings(),
        previous_state=first.state,
        deferred_resume=harness.DeferredToolResume(
            first.deferred, first.deferred.build_results(approve_all=True)
        )
        if first.deferred
        else None,
    )
    assert first.thread_id == second.thread_id and first.run_id != second.run_id

    # §1.4 Serialize the state
    state = second.state
    assert state is not None
    payload = state.model_dump_json()
    restored = HarnessState.model_validate_json(payload)
    assert restored == state

    # §1.5 Fork a Thread
    branch_state = state.fork(thread_id="thr_productbranch1")
    assert branch_state.thread_id != state.thread_id
    assert branch_state.message_history == state.message_history

    # §1.6 Export while streaming
    async with executable.stream("Work", bindings=fresh_bindings()) as stream:
        async for _item in stream:
            checkpoint_candidate = await stream.export_state()
    assert checkpoint_candidate.thread_id == stream.thread_id

    # §1.10 Structured suspension
    from harness import DeferredToolResume

    first = await executable.run("Ask for confirmation", bindings=fresh_bindings())
    if first.status != "suspended" or first.state is None or first.deferred is None:
        raise RuntimeError("Expected a suspended run")
    results = first.deferred.build_results(approve_all=True)
    second = await executable.run(
        bindings=fresh_bindings(),
        previous_state=first.state,
        deferred_resume=DeferredToolResume(first.deferred, results),
    )
    assert second.output == "confirmed: yes"

    # §1.9 Recover by policy
    checkpoint = first.state
    result = await executable.run(
        bindings=fresh_bindings(), previous_state=checkpoint, tool_recovery="declared"
    )  # The default; use "never" to disable all replay.
    assert result.status == "completed"

    # §1.11 Recover an interrupted deferred continuation
    accepted: Any = DeferredToolResume(first.deferred, results)
    recovery_input = (
        DeferredToolResume(accepted.requests, accepted.results, recovery=True)
        if accepted is not None
        else None
    )
    result = await executable.run(
        bindings=fresh_bindings(),
        previous_state=checkpoint,
        deferred_resume=recovery_input,
        tool_recovery="declared",
    )
    # The positive approval is never reused as replay permission: the unmarked call gets the unknown result.
    assert result.status == "completed"
    assert accepted.remaining(list(result.state.message_history)) is None  # type: ignore[union-attr]


def read_record(record_id: str) -> str:
    return f"record {record_id}"


def search_records(query: str) -> list[str]:
    return [query]


async def test_declare_retryable_tools_at_the_source() -> None:
    # §1.8, as written
    from pydantic_ai import Tool
    from pydantic_ai.capabilities import Capability

    from harness.tools import RECOVERY_RETRY_SAFE_METADATA_KEY, recovery_retryable

    @recovery_retryable
    def lookup_record(record_id: str) -> str:
        return read_record(record_id)

    catalog = Capability(
        id="acme.catalog", tools=[lookup_record, recovery_retryable(Tool(search_records, name="search"))]
    )
    assert catalog.tools[0].metadata == {RECOVERY_RETRY_SAFE_METADATA_KEY: True}  # type: ignore[union-attr]
    original = Tool(search_records, name="search", requires_approval=True, metadata={"team": "a"})
    marked = recovery_retryable(original)
    assert original.metadata == {"team": "a"}
    assert marked.metadata == {"team": "a", RECOVERY_RETRY_SAFE_METADATA_KEY: True}
    assert marked.requires_approval and marked.name == "search"


class CounterState(BaseModel):
    value: int


async def test_capability_state_example() -> None:
    # §1.13, inside a tool (`context` is the run's `ctx.deps`)
    async def bump(ctx: RunContext[AgentContext]) -> int:
        context = ctx.deps
        current = await context.state.read("acme.counter", CounterState, version="1")
        await context.state.write(
            "acme.counter", CounterState(value=(current.value if current else 0) + 1), version="1"
        )
        return (current.value if current else 0) + 1

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("bump", {}, tool_call_id="B1")])
        return ModelResponse(parts=[TextPart("ok")])

    agent = ExecutableAgent(
        scripted_model(script), capabilities=[Capability(id="acme.counter", tools=[bump])]
    )
    result = await agent.run("count")
    assert result.state is not None
    assert result.state.agent_context_state.get("acme.counter").data == {"value": 1}  # type: ignore[union-attr]


def test_public_surface_is_exactly_all() -> None:
    public = {name for name in vars(harness) if not name.startswith("_")}
    modules = {name for name, value in vars(harness).items() if type(value).__name__ == "module"}
    assert public - modules == set(harness.__all__)
    assert harness.__all__ == sorted(harness.__all__, key=lambda n: (not n.isupper(), n))


def test_readme_embedding_example_runs() -> None:
    section = EMBEDDING.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/embedding.md has no embedding example"
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(code.group(1), "docs/embedding.md", "exec"), namespace)


def test_readme_checkpoint_example_runs() -> None:
    """The checkpoint example of docs/embedding.md, on its first example's agent, stores one state per candidate."""
    import ast
    import asyncio

    section = EMBEDDING.read_text(encoding="utf-8")
    first, second = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(first, "docs/embedding.md", "exec"), namespace)

    class Store(dict[str, list[str]]):
        def save(self, thread_id: str, state_json: str) -> None:
            self.setdefault(thread_id, []).append(state_json)

    store = Store()
    namespace.update(store=store, state=harness.HarnessState.new(thread_id="thr_readme1"))
    namespace.update(HarnessCheckpointEvent=harness.HarnessCheckpointEvent)
    namespace.update(HarnessRunResultEvent=harness.HarnessRunResultEvent)
    code = compile(second, "docs/embedding.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    asyncio.run(eval(code, namespace))
    assert namespace["result"].status == "suspended"
    assert len(store["thr_readme1"]) == 2  # after the request started and after it completed
