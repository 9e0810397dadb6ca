"""The harness's hold on a run's tools: recovery decisions, resume surface checks, deferral rules.

One `RunTooling` exists per run. The agent-level `HarnessCapability` (always first, so its wrapper
toolset is outermost) routes every `get_tools`/`call_tool` and the `after_tool_validate` hook to the
run's `RunTooling` through `ctx.deps`. At the run's first step it sees the freshly prepared tool
surface (after dynamic toolsets, prepare functions and `SetToolMetadata`) and:

- checks a deferred resume against it (SPEC §2.7.4 phase B → `deferred_surface_mismatch`);
- turns each tool-recovery candidate into a replay or the unknown result (SPEC §2.5.4), by editing
  the native per-call results the first `CallToolsNode` holds, before it reads them;
- remembers identities (`tool/<toolset id>/<name>`) for the deferred calls a suspension exports.

On every step it hides deferring tools when the host cannot answer them (SPEC §2.7.7), gives replays
`tool_call_approved=False` and re-defers replayed approval/external tools (replay is never an
approval), and records a tool's unexpected exception so the run can end FAILED (SPEC §2.2.5).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import exceptions as native_exceptions
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ToolFailed
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import RunContext, ToolApproved, ToolDefinition, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.toolsets.prefixed import PrefixedToolset
from pydantic_ai.toolsets.renamed import RenamedToolset

from ._recovery_input import ToolRecovery
from .context import RunHooks
from .deferred import (
    DEFERRED_FUNCTION_ID_METADATA_KEY,
    DeferredCategory,
    DeferredToolKind,
    DeferredToolResume,
    identity_for,
    item_id,
    stored_items,
    stored_metadata,
    stored_resume,
)
from .errors import DefinitionError, ErrorCode
from .tools import is_recovery_retryable

__all__ = (
    "INTERRUPTED_TOOL_RESULT",
    "NOT_EXECUTED_TOOL_RESULT",
    "HarnessCapability",
    "PendingDeferredItem",
    "RunTooling",
    "ToolFailure",
    "ToolGate",
    "pending_items",
)

INTERRUPTED_TOOL_RESULT = (
    "No tool result was recorded because execution was interrupted. The operation may have partially or "
    "fully completed. Check the current state before deciding whether to retry it."
)
"""The unknown result: what a call whose result was never recorded is answered with (SPEC §2.5.3)."""

NOT_EXECUTED_TOOL_RESULT = "The tool call was not executed: its tool is no longer available."
"""What a call known not to have started gets when its tool is gone (SPEC §2.5.8): never the unknown
result, which would claim it may have run."""

DEFERRAL_UNAVAILABLE = "Deferred tool interaction is unavailable for this Run."

ToolGate = Callable[[str, str, dict[str, Any], str, bool], Awaitable[None]]
"""`(call_id, tool_name, args, tool_kind, retryable)`, awaited before a side-effecting tool starts
(the stream's `before_tool_call`, which calls the host's barrier)."""

_GATED_KINDS = ("function", "unapproved")
"""The tools a gate covers: output functions and external tools run nothing of the host's here."""


@dataclass(frozen=True, slots=True)
class PendingDeferredItem:
    """One item of a resume batch as phase B (§2.7.4 steps 10-12) and tool recovery see it."""

    tool_call_id: str
    """The model call ID."""
    tool_name: str
    """The target call's tool name (the name on the current surface)."""
    category: DeferredCategory
    """`"calls"` (external result or question) or `"approvals"`."""
    kind: DeferredToolKind
    """`"approval"`, `"question"` or `"external"`."""
    target_identity: str
    """Identity of the tool that deferred the call; a present tool must have exactly this identity."""
    function_id: str | None
    """`DEFERRED_FUNCTION_ID_METADATA_KEY` of a call deferred by a function tool; `None` otherwise."""
    answered_with_failure: bool
    """The answer is a `ToolFailed` (an absent tool without function ID may be answered so, step 11)."""
    answered_with_denial: bool
    """The answer is a denial (`False` or `ToolDenied`): an approval of an absent tool may be (step 12)."""


@dataclass(frozen=True, slots=True)
class ToolFailure:
    """A tool function's unexpected exception, recorded so the run ends FAILED with a safe state."""

    tool_call_id: str
    tool_name: str
    error: Exception


@dataclass(eq=False)
class RunTooling:
    """Per-run tool bookkeeping; see the module docstring."""

    mode: ToolRecovery
    """This run's tool-recovery mode."""
    deferred_tools_supported: bool
    """Whether deferring tools stay on the surface."""
    recovery_candidates: dict[str, ToolCallPart] = field(default_factory=dict)
    """Unresolved calls (no retained fact) to be replayed or answered unknown at the first step."""
    resume: DeferredToolResume | None = None
    """The batch whose requests phase B checks (a normal resume, or the retained batch of recovery)."""
    native_results: MutableMapping[str, Any] | None = None
    """The first `CallToolsNode`'s per-call results, edited in place at the first step."""
    replay_ids: set[str] = field(default_factory=set)
    """Calls this run replays: never approvals (`tool_call_approved=False`)."""
    tool_failure: ToolFailure | None = None
    """The first unexpected tool exception, if any."""
    surface_error: DefinitionError | None = None
    """A phase-B failure, kept in case native code wraps it on the way out."""
    children: Any = None
    """The delegation tools' bookkeeping (`harness.children.bookkeeping.RunChildren`), made on first use."""
    not_started: frozenset[str] = frozenset()
    """Calls the host knows never started (SPEC §2.5.8): dispatched fresh, never the unknown result."""
    kept_approvals: Mapping[str, str] = field(default_factory=dict)
    """Those of them a retained positive approval answers (call ID → tool name): each runs with it,
    unless its tool is gone."""
    gate: ToolGate | None = None
    """Awaited before each `function`/`unapproved` tool starts (a host's dispatch intent)."""
    _first_step_done: bool = False
    _tools: dict[str, ToolsetTool[Any]] = field(default_factory=dict)
    _ctx: RunContext[Any] | None = None

    # -- the surface ---------------------------------------------------------------------------------
    async def on_tools(
        self, ctx: RunContext[Any], tools: dict[str, ToolsetTool[Any]]
    ) -> dict[str, ToolsetTool[Any]]:
        """Filter this step's surface and, at the first step, run phase B and recovery decisions."""
        if not self.deferred_tools_supported:
            tools = {name: tool for name, tool in tools.items() if not tool.tool_def.defer}
        self._tools, self._ctx = tools, ctx
        if not self._first_step_done:
            self._first_step_done = True
            if self.resume is not None:
                await self._check_surface(ctx, tools)
            self._decide_recovery(tools)
        return tools

    async def identity(self, tool_name: str) -> str | None:
        """The identity of a tool on the latest surface, or `None` when it is not there."""
        tool = self._tools.get(tool_name)
        if tool is None or self._ctx is None:
            return None
        return await _identity(self._ctx, tool_name, tool)

    def gated(self, calls: Sequence[ToolCallPart]) -> list[tuple[ToolCallPart, bool]]:
        """Those of `calls` that name a `function` or `unapproved` tool on the latest surface (what a
        gate covers), each with whether its tool is recovery-retryable."""
        found: list[tuple[ToolCallPart, bool]] = []
        for call in calls:
            tool = self._tools.get(call.tool_name)
            if tool is not None and tool.tool_def.kind in _GATED_KINDS:
                found.append((call, is_recovery_retryable(tool.tool_def)))
        return found

    def tool_kind(self, tool_name: str) -> str | None:
        """The kind (`function`, `external`, `unapproved`, `output`) of a tool on the latest surface."""
        tool = self._tools.get(tool_name)
        return tool.tool_def.kind if tool is not None else None

    async def _check_surface(self, ctx: RunContext[Any], tools: Mapping[str, ToolsetTool[Any]]) -> None:
        assert self.resume is not None
        for item in pending_items(self.resume):
            tool = tools.get(item.tool_name)
            identity = await _identity(ctx, item.tool_name, tool) if tool is not None else None
            if tool is not None and identity != item.target_identity:
                self._mismatch(item, "the tool's identity changed")
            kind = tool.tool_def.kind if tool is not None else None
            if item.category == "calls":
                if tool is None:
                    if item.function_id is None and item.answered_with_failure:
                        continue
                    self._mismatch(item, "the tool is no longer available")
                elif kind == "external":
                    if item.function_id is not None:
                        self._mismatch(item, "a function's deferred call is now an external tool")
                elif kind in ("function", "unapproved"):
                    if item.function_id != identity:
                        self._mismatch(item, "the call was not deferred by this function tool")
                else:
                    self._mismatch(item, f"a {kind} tool cannot answer a deferred call")
            elif tool is None:
                # Answered by a denial, or retained by a recovery (SPEC §2.7.4 rule 12, as amended by
                # LIVE §5.3-§5.4): no tool runs for it, so its absence is no mismatch.
                if not (item.answered_with_denial or self.resume.recovery):
                    self._mismatch(item, "the approved tool is no longer available")
            elif kind not in _GATED_KINDS:
                self._mismatch(item, "the approved tool cannot be approved")

    def _mismatch(self, item: PendingDeferredItem, why: str) -> None:
        self.surface_error = DefinitionError(
            f"Deferred tool call {item.tool_call_id!r} ({item.tool_name}) no longer fits this run's tools: {why}.",
            code=ErrorCode.DEFERRED_SURFACE_MISMATCH,
            details={"tool_call_id": item.tool_call_id, "tool_name": item.tool_name},
        )
        raise self.surface_error

    def _decide_recovery(self, tools: Mapping[str, ToolsetTool[Any]]) -> None:
        """Each recovery candidate replayed or answered (§2.5.4, §2.5.8), by the fresh surface."""
        if not self.recovery_candidates and not self.kept_approvals:
            return
        assert self.native_results is not None, "recovery needs the first step's native results"
        for call_id, call in self.recovery_candidates.items():
            tool = tools.get(call.tool_name)
            fresh = call_id in self.not_started
            if tool is None:
                self.native_results[call_id] = ToolFailed(
                    NOT_EXECUTED_TOOL_RESULT if fresh else INTERRUPTED_TOOL_RESULT
                )
            elif fresh and tool.tool_def.kind in _GATED_KINDS:
                self._replay(call_id)  # never started: a new call, whatever the mode says
            elif self.mode == "never" or (
                self.mode == "declared" and not is_recovery_retryable(tool.tool_def)
            ):
                self.native_results[call_id] = ToolFailed(INTERRUPTED_TOOL_RESULT)
            else:
                self._replay(call_id)
        for call_id, tool_name in self.kept_approvals.items():
            if tool_name not in tools:
                self.native_results[call_id] = ToolFailed(NOT_EXECUTED_TOOL_RESULT)

    def _replay(self, call_id: str) -> None:
        assert self.native_results is not None
        self.native_results[call_id] = ToolApproved()
        self.replay_ids.add(call_id)

    # -- dispatch ------------------------------------------------------------------------------------
    async def call(
        self,
        wrapped: AbstractToolset[Any],
        name: str,
        args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        """Call a tool: the gate first, replays unapproved, deferrals refused when unsupported, exceptions
        recorded. The gate's own failure is the host's, not the tool's: it propagates unrecorded."""
        if ctx.tool_call_id in self.replay_ids:
            ctx = replace(ctx, tool_call_approved=False)
        if self.gate is not None and tool.tool_def.kind in _GATED_KINDS:
            await self.gate(
                ctx.tool_call_id or "", name, args, tool.tool_def.kind, is_recovery_retryable(tool.tool_def)
            )
        try:
            return await wrapped.call_tool(name, args, ctx, tool)
        except (CallDeferred, ApprovalRequired):
            if self.deferred_tools_supported:
                raise
            raise ToolFailed(DEFERRAL_UNAVAILABLE) from None
        except Exception as error:
            if not _is_native_control(error) and self.tool_failure is None:
                self.tool_failure = ToolFailure(ctx.tool_call_id or "", name, error)
            raise

    def after_validate(self, call: ToolCallPart, tool_def: ToolDefinition) -> None:
        """A replayed approval/external tool defers again: replay never satisfies an approval."""
        if call.tool_call_id not in self.replay_ids:
            return
        if tool_def.kind == "unapproved":
            raise ApprovalRequired()
        if tool_def.kind == "external":
            raise CallDeferred()


def pending_items(resume: DeferredToolResume) -> tuple[PendingDeferredItem, ...]:
    """Each item of `resume` with what phase B checks: category, kind, target identity, function ID.

    Call it on a resume that passed `preflight_resume` (items are then well formed).
    """
    requests, results, _ = stored_resume(resume)
    calls, approvals = stored_items(requests)
    metadata = stored_metadata(requests)
    items: list[PendingDeferredItem] = []
    for category, group in (("calls", calls), ("approvals", approvals)):
        for item in group:
            call_id = item_id(item)
            function_id = None
            if category == "calls":
                recorded = metadata.get(call_id, {}).get(DEFERRED_FUNCTION_ID_METADATA_KEY)
                function_id = recorded if isinstance(recorded, str) else None
            answer = (results.calls if category == "calls" else results.approvals).get(call_id)
            items.append(
                PendingDeferredItem(
                    tool_call_id=call_id,
                    tool_name=item.target_call.tool_name,
                    category="calls" if category == "calls" else "approvals",
                    kind=requests.kind(call_id),
                    target_identity=item.target_identity,
                    function_id=function_id,
                    answered_with_failure=isinstance(answer, ToolFailed),
                    answered_with_denial=answer is False or isinstance(answer, ToolDenied),
                )
            )
    return tuple(items)


def _is_native_control(error: BaseException) -> bool:
    """Native control flow (retries, failures, deferrals, skips) keeps its native meaning."""
    return type(error).__module__ == native_exceptions.__name__


async def _identity(ctx: RunContext[Any], name: str, tool: ToolsetTool[Any]) -> str:
    """`tool/<innermost defining toolset id>/<name before prefix/rename wrappers>`."""
    toolset = tool.toolset
    while isinstance(toolset, WrapperToolset):
        if isinstance(toolset, PrefixedToolset):
            name = name.removeprefix(f"{toolset.prefix}_")
        elif isinstance(toolset, RenamedToolset):
            name = toolset.name_map.get(name, name)
        inner = (await toolset.wrapped.get_tools(ctx)).get(name)
        if inner is None:
            break
        toolset = inner.toolset
    return identity_for(toolset.id, name)


class _HarnessToolset(WrapperToolset[Any]):
    """The outermost toolset of every harness run; delegates the decisions to the run's `RunTooling`."""

    async def _collect_instruction_contributions(self, ctx: RunContext[Any]) -> list[Any]:
        # pydantic-ai 2.68 gathers toolset instructions through this (private) walk. Without deferred
        # support the external tools left the surface, so their toolsets' instructions go too (SPEC
        # §2.7.7): the model must not be told about tools it cannot call.
        contributions = await super()._collect_instruction_contributions(ctx)
        tooling = _tooling_of(ctx)
        if tooling is None or tooling.deferred_tools_supported:
            return contributions
        return [c for c in contributions if not isinstance(c.source, ExternalToolset)]

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self.wrapped.get_tools(ctx)
        tooling = _tooling_of(ctx)
        return tools if tooling is None else await tooling.on_tools(ctx, tools)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        tooling = _tooling_of(ctx)
        if tooling is None:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        return await tooling.call(self.wrapped, name, tool_args, ctx, tool)


def _tooling_of(ctx: RunContext[Any]) -> RunTooling | None:
    return getattr(ctx.deps, "_tooling", None)


class HarnessCapability(AbstractCapability[Any]):
    """Installed first on every `ExecutableAgent`, so its wrapper toolset is the outermost."""

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _HarnessToolset(toolset)

    async def after_tool_validate(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        tooling = _tooling_of(ctx)
        if tooling is not None:
            tooling.after_validate(call, tool_def)
        return args

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        hooks: RunHooks | None = getattr(ctx.deps, "_hooks", None)  # deps: the run's AgentContext
        if hooks is not None:
            await hooks.model_request_started(ctx)
        return request_context
