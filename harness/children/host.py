"""Host-managed children: the deferring `delegate`/`resume_subagent` tools and the child request (CHILDREN §4, §6).

A host-mode parent cannot call its Host, so admitting a child is a deferred external call: the tool
records the request in the run's tool bookkeeping and raises `CallDeferred`; the suspension export puts
the request into the call's metadata under `threadline.child` (a harness-owned key, like
`threadline.deferred_function_id`). The Host runs the child as an ordinary thread and answers the
parent's call with `ChildRequest.answer(child_result)`; phase A checks that answer
(`check_child_answers`).

The tools leave the surface when the run's bindings have `deferred_tools_supported=False`: a Host that
cannot answer deferred calls cannot manage children.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

from pydantic import Field
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    ToolReturn,
    ToolReturnPart,
)
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from ..context import AgentContext, ChildLineage
from ..deferred import DeferredToolRequests, identity_for
from ..errors import ErrorCode, RunError
from ..json_text import JsonValue, canonical_json
from .bookkeeping import HostRequestEntry, run_children
from .definitions import SubagentDefinition, child_input, limits_from_jsonable, limits_to_jsonable
from .inline import instructions
from .names import NAME_PATTERN, host_child_thread_id

if TYPE_CHECKING:
    from ..results import HarnessRunResult

__all__ = (
    "CHILD_METADATA_KEY",
    "HOST_TOOLSET_ID",
    "HOST_TOOL_IDENTITIES",
    "MAX_CHILD_REQUESTS_BYTES",
    "ChildRequest",
    "HostDelegationCapability",
    "check_child_answer",
    "child_requests",
)

HOST_TOOLSET_ID = "threadline.subagents.host"
"""The toolset ID of the host-mode tools; their identities are `tool/threadline.subagents.host/<name>`."""
CHILD_METADATA_KEY = "threadline.child"
"""Request metadata key of a child request (harness-owned: dropped from what tools pass to `CallDeferred`)."""
HOST_TOOL_IDENTITIES = frozenset(
    {identity_for(HOST_TOOLSET_ID, "delegate"), identity_for(HOST_TOOLSET_ID, "resume_subagent")}
)
"""The target identities whose pending calls are child requests."""
MAX_CHILD_REQUESTS_BYTES = 48 * 1024
"""The canonical bytes the child requests of one parent model response may take together (§4.2)."""
MAX_PROMPT_CHARS = 16_384

UNKNOWN_SUBAGENT = "Unknown subagent."
UNKNOWN_EXECUTION = "Unknown child execution ID."
TOO_LARGE = "Child request is too large."

_ANSWER_STATUSES = frozenset({"completed", "running"})


class HostDelegationCapability(AbstractCapability[AgentContext]):
    """Brings the deferring `delegate(subagent_name, prompt)` and `resume_subagent(execution_id, prompt)`.

    `ExecutableAgent(..., subagents=[...])` appends it for a parent whose edges are `mode="host"`.
    """

    mode = "host"

    def __init__(self, edges: tuple[SubagentDefinition, ...], *, parent_agent: str) -> None:
        self.edges: dict[str, SubagentDefinition] = {edge.name: edge for edge in edges}
        """The parent's edges by name."""
        self.parent_agent = parent_agent
        """The parent executable's `name` (what the request calls `parent.agent`)."""
        self._toolset = FunctionToolset[AgentContext](
            [
                Tool(self._delegate, name="delegate", prepare=_only_with_deferred_tools),
                Tool(self._resume, name="resume_subagent", prepare=_only_with_deferred_tools),
            ],
            id=HOST_TOOLSET_ID,
        )
        self._instructions = instructions(
            "Hand work to a subagent with `delegate(subagent_name, prompt)`; continue one with "
            "`resume_subagent(execution_id, prompt)`. The answer arrives later as the call's result. Subagents:",
            self.edges,
        )

    def get_toolset(self) -> FunctionToolset[AgentContext]:
        return self._toolset

    def get_instructions(self) -> Any:
        text = self._instructions

        def when_offered(ctx: RunContext[AgentContext]) -> str:
            return text if ctx.deps.deferred_tools_supported else ""

        return when_offered

    @staticmethod
    def check_state(state: object) -> None:
        """Host-managed children leave nothing in the parent's state to check (S5)."""

    # -- the tools -----------------------------------------------------------------------------------
    async def _delegate(
        self,
        ctx: RunContext[AgentContext],
        subagent_name: Annotated[str, Field(pattern=NAME_PATTERN.pattern)],
        prompt: Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS)],
    ) -> None:
        """Hand a task to the named subagent; the Host runs it and the result arrives as this call's answer.

        Args:
            subagent_name: The subagent's name.
            prompt: The task for the child.
        """
        edge = self.edges.get(subagent_name)
        if edge is None:
            raise ToolFailed(UNKNOWN_SUBAGENT)
        ordinal = _response_ordinal(ctx.messages)
        thread_id = host_child_thread_id(ctx.deps.thread_id, ordinal, ctx.tool_call_id or "")
        self._defer(ctx, edge, "start", thread_id, prompt, ordinal)

    async def _resume(
        self,
        ctx: RunContext[AgentContext],
        execution_id: Annotated[str, Field(min_length=1, max_length=256)],
        prompt: Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS)],
    ) -> None:
        """Continue a child started earlier; the Host runs it and the result arrives as this call's answer.

        Args:
            execution_id: The `execution_id` of an earlier answer.
            prompt: What the child should do next.
        """
        name = _edge_of_execution(ctx.messages, execution_id)
        if name is None:
            raise ToolFailed(UNKNOWN_EXECUTION)
        edge = self.edges.get(name)
        if edge is None:
            raise ToolFailed(UNKNOWN_SUBAGENT)
        self._defer(ctx, edge, "continue", execution_id, prompt, _response_ordinal(ctx.messages))

    def _defer(
        self,
        ctx: RunContext[AgentContext],
        edge: SubagentDefinition,
        action: Literal["start", "continue"],
        thread_id: str,
        prompt: str,
        ordinal: int,
    ) -> NoReturn:
        deps = ctx.deps
        request: dict[str, Any] = {
            "action": action,
            "subagent_name": edge.name,
            "agent": edge.agent.name,
            "child_definition_id": edge.agent.definition_id,
            "thread_id": thread_id,
            "input": child_input(
                prompt,
                context=edge.context,
                parent_input=deps._hooks.own_input if deps._hooks is not None else None,
            ),
            "parent": {
                "agent": self.parent_agent,
                "thread_id": deps.thread_id,
                "run_id": deps.run_id,
                "tool_call_id": ctx.tool_call_id or "",
                "agent_instance_id": deps.instance.agent_instance_id,
            },
            "usage_limits": limits_to_jsonable(edge.usage_limits),
        }
        size = len(canonical_json(request).encode())
        book = run_children(ctx)
        call_id = ctx.tool_call_id or ""
        used = sum(
            entry.size
            for key, entry in book.host_requests.items()
            if entry.response_ordinal == ordinal and key != call_id
        )
        if used + size > MAX_CHILD_REQUESTS_BYTES:
            raise ToolFailed(TOO_LARGE)
        book.host_requests[call_id] = HostRequestEntry(ordinal, request, size)
        raise CallDeferred()


async def _only_with_deferred_tools(
    ctx: RunContext[AgentContext], tool_def: ToolDefinition
) -> ToolDefinition | None:
    return tool_def if ctx.deps.deferred_tools_supported else None


def _response_ordinal(messages: list[ModelMessage]) -> int:
    """How many responses the history holds up to the newest one (the one with the running call)."""
    return sum(1 for message in messages if isinstance(message, ModelResponse))


def _edge_of_execution(messages: list[ModelMessage], execution_id: str) -> str | None:
    """The `subagent` of the newest child answer with this `execution_id` in the history (§4.2)."""
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            if not isinstance(part, ToolReturnPart) or part.tool_name not in ("delegate", "resume_subagent"):
                continue
            content: Any = part.content
            if (
                isinstance(content, dict)
                and content.get("execution_id") == execution_id
                and content.get("status") in _ANSWER_STATUSES
                and isinstance(content.get("subagent"), str)
            ):
                return str(content["subagent"])
    return None


# --- the request a Host reads ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChildRequest:
    """A typed, detached view of one pending child request (`child_requests(batch)`)."""

    tool_call_id: str
    """The parent's pending call; answer it in `DeferredToolResults.calls[tool_call_id]`."""
    action: Literal["start", "continue"]
    """`"start"` (from `delegate`) or `"continue"` (from `resume_subagent`)."""
    subagent_name: str
    """The edge."""
    agent: str
    """The child executable's `name`, which is also the name a server serves it under."""
    child_definition_id: str
    """The child's stable definition ID."""
    thread_id: str
    """The child's thread: derived for `start` (the admission key), the model's `execution_id` for `continue`."""
    input: str
    """The child run's prompt."""
    parent: Mapping[str, str]
    """`agent`, `thread_id`, `run_id`, `tool_call_id`, `agent_instance_id` of the parent run."""
    usage_limits: UsageLimits | None
    """The edge's ceiling (a Host running the child takes the minimum with the child's own limits)."""

    @classmethod
    def from_metadata(cls, tool_call_id: str, request: Mapping[str, Any]) -> ChildRequest:
        """Read a `threadline.child` object.

        Raises:
            ValueError: it is not a well-formed child request.
        """
        parent = request.get("parent")
        fields = ("action", "subagent_name", "agent", "child_definition_id", "thread_id", "input")
        if not all(isinstance(request.get(name), str) for name in fields) or not isinstance(parent, dict):
            raise ValueError("not a child request")
        if request["action"] not in ("start", "continue"):
            raise ValueError("unknown child request action")
        return cls(
            tool_call_id=tool_call_id,
            action=request["action"],
            subagent_name=request["subagent_name"],
            agent=request["agent"],
            child_definition_id=request["child_definition_id"],
            thread_id=request["thread_id"],
            input=request["input"],
            parent={key: str(value) for key, value in parent.items()},
            usage_limits=limits_from_jsonable(request.get("usage_limits")),
        )

    def lineage(self) -> ChildLineage:
        """The lineage of the child run's bindings (`delegation_id` = the child's thread ID)."""
        return ChildLineage(
            parent_thread_id=self.parent["thread_id"],
            parent_run_id=self.parent["run_id"],
            parent_tool_call_id=self.parent["tool_call_id"],
            parent_agent_instance_id=self.parent["agent_instance_id"],
            subagent_name=self.subagent_name,
            delegation_id=self.thread_id,
        )

    def running(self) -> dict[str, JsonValue]:
        """The admission answer: the parent continues while the child works."""
        return {"execution_id": self.thread_id, "subagent": self.subagent_name, "status": "running"}

    def answer(self, result: HarnessRunResult[Any]) -> dict[str, JsonValue] | ToolFailed:
        """The parent's answer from the child's terminal result (§4.4).

        Returns:
            The success object for a completed child; `ToolFailed("Child <thread> did not complete
            successfully (<code>).")` for a failed or cancelled one (`child_cancelled`).

        Raises:
            ValueError: the child is suspended (answer after it ends, or answer `running()`).
        """
        if result.status == "suspended":
            raise ValueError("A suspended child has no answer yet: resume it first, or answer running().")
        if result.status == "completed":
            import json

            return {
                "execution_id": self.thread_id,
                "subagent": self.subagent_name,
                "status": "completed",
                "output": json.loads(result.output_json()),
            }
        code = result.failure.code if result.failure is not None else "child_cancelled"
        return ToolFailed(f"Child {self.thread_id} did not complete successfully ({code}).")


def child_requests(batch: DeferredToolRequests) -> dict[str, ChildRequest]:
    """The pending Host-managed child requests of `batch`, by tool call ID: typed, detached views
    (CHILDREN §4.4). Here, not a method of the batch: `harness.deferred` knows nothing of children."""
    metadata = batch.metadata  # a copy: the views share nothing with the batch
    out: dict[str, ChildRequest] = {}
    for item in batch.calls:
        if item.target_identity not in HOST_TOOL_IDENTITIES:
            continue
        request = metadata.get(item.tool_call_id, {}).get(CHILD_METADATA_KEY)
        if isinstance(request, dict):
            try:
                out[item.tool_call_id] = ChildRequest.from_metadata(item.tool_call_id, request)
            except ValueError:
                continue
    return out


def check_child_answer(call_id: str, request: object, answer: object) -> None:
    """Phase A's child check (§4.4, after §2.7.4 step 7) for one pending host-mode call.

    Raises:
        RunError: `deferred_metadata_invalid` (no `threadline.child` object in the request metadata) or
            `child_result_invalid` (details `tool_call_id`).
    """
    if not isinstance(request, dict):
        raise RunError(
            f"Request metadata for {call_id!r} has no {CHILD_METADATA_KEY} object.",
            code=ErrorCode.DEFERRED_METADATA_INVALID,
            details={"tool_call_id": call_id},
        )
    if isinstance(answer, ToolFailed | ModelRetry | RetryPromptPart):
        return
    value = answer.return_value if isinstance(answer, ToolReturn) else answer
    status = value.get("status") if isinstance(value, dict) else None
    expected = {"execution_id", "subagent", "status", *(("output",) if status == "completed" else ())}
    if (
        not isinstance(value, dict)
        or set(value) != expected
        or status not in _ANSWER_STATUSES
        or value.get("execution_id") != request.get("thread_id")
        or value.get("subagent") != request.get("subagent_name")
    ):
        raise RunError(
            f"The answer to child request {call_id!r} is not a child answer for its thread.",
            code=ErrorCode.CHILD_RESULT_INVALID,
            details={"tool_call_id": call_id},
        )
