"""Inline children: `delegate` and `resume_subagent`, run by the harness inside the parent's tool call (CHILDREN §3).

Each child run happens inside one parent tool call, with deferred tools off (rule S2); its terminal
state is retained in the parent's `a13n.subagents` registry when the run ends, so a later parent run
can continue it with a plain prompt. What the model sees of a failure is a native `ToolFailed` with a
§3.8 text; only a `DefinitionError` (a configuration bug the model cannot fix) leaves the tools and
fails the parent run. Task cancellation propagates, and a child it stops is not retained.

Events: `HarnessExtensionEvent(kind="delegation")` payloads of type `inline_delegation`, queued on the
parent's stream: `started` once the child run exists, then `completed` or `failed` (§3.9). In this
slice both reach the host when the child has ended, just before the call's tool result event.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.toolsets import FunctionToolset

from ..context import AgentContext, ChildLineage, RunBindings
from ..errors import DefinitionError, ErrorCode, HarnessError, RunCleanupError, RunError
from ..events import HarnessRunResultEvent
from ..json_text import JsonValue, canonical_json
from ..state import HarnessState
from .bookkeeping import run_children
from .definitions import (
    MAX_LISTED_CHILDREN,
    MAX_LISTED_DESCRIPTION,
    SubagentDefinition,
    child_identity,
    child_input,
    child_usage_limits,
)
from .names import inline_child_thread_id
from .registry import REGISTRY_ID, REGISTRY_VERSION, ChildRecord, Registry, load_child_state, retained_state

if TYPE_CHECKING:
    from ..results import HarnessRunResult

__all__ = ("INLINE_TOOLSET_ID", "InlineDelegationCapability", "Messages")

INLINE_TOOLSET_ID = "a13n-delegation-tools"
"""The toolset ID of the inline delegation tools (the reference's)."""

MAX_PROMPT_CHARS = 1024 * 1024
MAX_OUTPUT_BYTES = 256 * 1024
"""Largest canonical child output a parent call returns (ours: a fixed bound)."""
_ID_SPACE = 1 << 16


class Messages:
    """The model-facing texts of §3.8, exactly."""

    UNKNOWN_SUBAGENT = "Unknown inline subagent."
    UNKNOWN_CHILD = "Unknown inline child instance ID."
    MISMATCH = "Inline child instance does not match the selected subagent."
    ACTIVE = "Inline child instance is already active."
    EXHAUSTED = "Inline child ID space is exhausted."
    BEFORE_RESULT = "Inline delegation failed before a complete child result."

    @staticmethod
    def not_completed(child_id: str, code: str) -> str:
        return f"Inline child {child_id} did not complete successfully ({code})."

    @staticmethod
    def unusable(child_id: str) -> str:
        return f"Inline child {child_id} returned an unusable result."

    @staticmethod
    def not_retained(child_id: str) -> str:
        return f"Inline child {child_id} state could not be retained."

    @staticmethod
    def cleanup_failed(child_id: str) -> str:
        return f"Inline child {child_id} cleanup failed."


class InlineDelegationCapability(AbstractCapability[AgentContext]):
    """Brings `delegate(subagent, prompt)` and `resume_subagent(execution_id, prompt)` to an inline parent.

    `ExecutableAgent(..., subagents=[...])` appends it to `capabilities`; hosts do not build it.
    """

    mode = "inline"

    def __init__(self, edges: tuple[SubagentDefinition, ...]) -> None:
        self.edges: dict[str, SubagentDefinition] = {edge.name: edge for edge in edges}
        """The parent's edges by name."""
        self._toolset = FunctionToolset[AgentContext](
            [Tool(self._delegate, name="delegate"), Tool(self._resume, name="resume_subagent")],
            id=INLINE_TOOLSET_ID,
        )

    def get_toolset(self) -> FunctionToolset[AgentContext]:
        return self._toolset

    def get_instructions(self) -> str:
        return instructions(
            "Delegate work with `delegate(subagent, prompt)`; continue a child you started with "
            "`resume_subagent(execution_id, prompt)`. Subagents:",
            self.edges,
        )

    @staticmethod
    def check_state(state: HarnessState) -> None:
        """The construction check of a parent run's `previous_state` (§3.4)."""
        from .registry import check_registry

        check_registry(state)

    # -- the tools -----------------------------------------------------------------------------------
    async def _delegate(
        self,
        ctx: RunContext[AgentContext],
        subagent: str,
        prompt: Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS)],
    ) -> dict[str, Any]:
        """Start a new child of the named subagent with a task and wait for its result.

        Args:
            subagent: The subagent's name.
            prompt: The task for the child.
        """
        edge = self.edges.get(subagent)
        if edge is None:
            raise ToolFailed(Messages.UNKNOWN_SUBAGENT)
        book = run_children(ctx)
        registry = await _read_registry(ctx)
        child_id = _reserve(subagent, set(registry.children) | book.active)
        book.active.add(child_id)  # before any await: a concurrent call sees it
        try:
            state = HarnessState.new(thread_id=inline_child_thread_id(ctx.deps.thread_id, child_id))
            return await _run_child(ctx, edge, child_id, state, prompt)
        finally:
            book.active.discard(child_id)

    async def _resume(
        self,
        ctx: RunContext[AgentContext],
        execution_id: Annotated[str, Field(min_length=1, max_length=68)],
        prompt: Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS)],
    ) -> dict[str, Any]:
        """Continue a child you started earlier with a new prompt and wait for its result.

        Args:
            execution_id: The `execution_id` an earlier `delegate` returned.
            prompt: What the child should do next.
        """
        book = run_children(ctx)
        registry = await _read_registry(ctx)
        record = registry.children.get(execution_id)
        if record is None:
            raise ToolFailed(Messages.UNKNOWN_CHILD)
        edge = self.edges.get(record.subagent_name)
        if edge is None:
            raise ToolFailed(Messages.UNKNOWN_SUBAGENT)
        if edge.agent.definition_id != record.child_definition_id:
            raise ToolFailed(Messages.MISMATCH)
        if execution_id in book.active:
            raise ToolFailed(Messages.ACTIVE)
        book.active.add(execution_id)
        try:
            try:
                state = load_child_state(record)
            except Exception:
                raise ToolFailed(Messages.BEFORE_RESULT) from None
            return await _run_child(ctx, edge, execution_id, state, prompt)
        finally:
            book.active.discard(execution_id)


def instructions(lead: str, edges: dict[str, SubagentDefinition]) -> str:
    """The tool instructions: a lead sentence and `name: description` lines (at most 64, each cut to 512)."""
    lines = [lead]
    for edge in list(edges.values())[:MAX_LISTED_CHILDREN]:
        lines.append(f"- {edge.name}: {edge.description.strip()[:MAX_LISTED_DESCRIPTION]}")
    return "\n".join(lines)


def _reserve(name: str, taken: set[str]) -> str:
    """`<name>-<4 hex>`: from a random 16-bit start, the first suffix no retained or active child holds."""
    start = secrets.randbelow(_ID_SPACE)
    for step in range(_ID_SPACE):
        candidate = f"{name}-{(start + step) % _ID_SPACE:04x}"
        if candidate not in taken:
            return candidate
    raise ToolFailed(Messages.EXHAUSTED)


async def _read_registry(ctx: RunContext[AgentContext]) -> Registry:
    try:
        registry = await ctx.deps.state.read(REGISTRY_ID, Registry, version=REGISTRY_VERSION)
    except HarnessError:
        raise ToolFailed(Messages.BEFORE_RESULT) from None
    return registry if registry is not None else Registry(children={})


class _Events:
    """The `inline_delegation` events of one child run, queued on the parent's stream."""

    def __init__(self, ctx: RunContext[AgentContext], edge: SubagentDefinition, child_id: str) -> None:
        self._hooks = ctx.deps._hooks
        self._base: dict[str, JsonValue] = {
            "type": "inline_delegation",
            "invocation_id": f"delegation-{secrets.token_urlsafe(12)}",
            "child_instance_id": child_id,
            "subagent": edge.name,
            "parent_run_id": ctx.deps.run_id,
            "parent_agent_instance_id": ctx.deps.instance.agent_instance_id,
            "parent_tool_call_id": ctx.tool_call_id or "",
        }
        self.child_run_id: str | None = None

    def _emit(self, action: str, status: str) -> None:
        if self._hooks is None:
            return
        payload = {**self._base, "action": action, "status": status}
        if self.child_run_id is not None:
            payload["child_run_id"] = self.child_run_id
        self._hooks.queue_event("delegation", payload)

    def started(self, child_run_id: str) -> None:
        self.child_run_id = child_run_id
        self._emit("started", "running")

    def completed(self) -> None:
        self._emit("completed", "completed")

    def failed(self, status: str) -> None:
        self._emit("failed", status)


def _child_bindings(
    ctx: RunContext[AgentContext], edge: SubagentDefinition, child_id: str, events: _Events
) -> RunBindings:
    """Fresh bindings (§3.2 step 5): derived identity, deferred tools off, the parent's metadata, lineage."""
    deps = ctx.deps
    bindings = RunBindings(
        instance=child_identity(deps.instance, edge, agent_instance_id=child_id),
        deferred_tools_supported=False,
        metadata=deps.metadata,
        lineage=ChildLineage(
            parent_thread_id=deps.thread_id,
            parent_run_id=deps.run_id,
            parent_tool_call_id=ctx.tool_call_id or "",
            parent_agent_instance_id=deps.instance.agent_instance_id,
            subagent_name=edge.name,
            delegation_id=child_id,
        ),
    )
    if edge.bindings_hook is None:
        return bindings
    try:
        adjusted = edge.bindings_hook(bindings)
    except Exception as error:
        events.failed("dispatch_rejected")
        raise DefinitionError(
            f"The bindings_hook of subagent {edge.name!r} raised {type(error).__name__}.",
            code=ErrorCode.SUBAGENT_BINDING_INVALID,
            details={"name": edge.name},
        ) from error
    if (
        not isinstance(adjusted, RunBindings)
        or adjusted.instance != bindings.instance
        or adjusted.lineage != bindings.lineage
        or adjusted.deferred_tools_supported is not False
    ):
        events.failed("dispatch_rejected")
        raise DefinitionError(
            f"The bindings_hook of subagent {edge.name!r} must return RunBindings with the same instance and "
            "lineage and deferred tools off.",
            code=ErrorCode.SUBAGENT_BINDING_INVALID,
            details={"name": edge.name},
        )
    return adjusted


async def _run_child(
    ctx: RunContext[AgentContext],
    edge: SubagentDefinition,
    child_id: str,
    state: HarnessState,
    prompt: str,
) -> dict[str, Any]:
    """Run the child once, retain its terminal state, and turn its result into the call's return (§3.3)."""
    events = _Events(ctx, edge, child_id)
    hooks = ctx.deps._hooks
    text = child_input(
        prompt,
        context=edge.context,
        parent_input=hooks.own_input if hooks is not None else None,
        parent_messages=ctx.messages,
    )
    bindings = _child_bindings(ctx, edge, child_id, events)
    limits = child_usage_limits(edge.agent.usage_limits, edge.usage_limits)
    try:
        stream = edge.agent.stream(text, bindings=bindings, previous_state=state, usage_limits=limits)
    except DefinitionError:
        events.failed("dispatch_failed")
        raise
    except Exception:
        events.failed("dispatch_failed")
        raise ToolFailed(Messages.BEFORE_RESULT) from None
    events.started(stream.run_id)
    try:
        result = await _drive(stream)
    except RunCleanupError as error:
        outcome = error.outcome
        if outcome is not None and outcome.state is not None:
            await _retain_or_fail(ctx, edge, child_id, outcome.state, events)
        events.failed("cleanup_failed")
        raise ToolFailed(Messages.cleanup_failed(child_id)) from None
    except DefinitionError:
        events.failed("dispatch_failed")
        raise
    except Exception:
        events.failed("dispatch_failed")
        raise ToolFailed(Messages.BEFORE_RESULT) from None
    if result.state is not None:
        await _retain_or_fail(ctx, edge, child_id, result.state, events)
    if result.status == "completed":
        try:
            output: JsonValue = json.loads(result.output_json())
            too_large = len(canonical_json(output).encode()) > MAX_OUTPUT_BYTES
        except Exception:
            too_large = True
        if too_large:
            events.failed("output_rejected")
            raise ToolFailed(Messages.unusable(child_id))
        events.completed()
        return {"execution_id": child_id, "subagent": edge.name, "output": output}
    code = result.failure.code if result.failure is not None else "child_cancelled"
    events.failed(result.status)
    raise ToolFailed(Messages.not_completed(child_id, code))


async def _drive(stream: Any) -> HarnessRunResult[Any]:
    async with stream:
        async for item in stream:
            if isinstance(item, HarnessRunResultEvent):
                result: HarnessRunResult[Any] = item.result
                return result
    raise RunError("The inline child's stream ended without a result.", code=ErrorCode.CHILD_RESULT_MISSING)


async def _retain_or_fail(
    ctx: RunContext[AgentContext],
    edge: SubagentDefinition,
    child_id: str,
    state: HarnessState,
    events: _Events,
) -> None:
    """Write the child's record (§3.4): read, replace and write with no suspension in between."""
    try:
        record = ChildRecord(
            child_definition_id=edge.agent.definition_id or "",
            child_instance_id=child_id,
            child_thread_id=state.thread_id,
            refs=[],
            state=retained_state(state),
            subagent_name=edge.name,
        )
        registry = await _read_registry(ctx)
        children = {**registry.children, child_id: record}
        await ctx.deps.state.write(REGISTRY_ID, Registry(children=children), version=REGISTRY_VERSION)
    except Exception:
        events.failed("state_rejected")
        raise ToolFailed(Messages.not_retained(child_id)) from None
