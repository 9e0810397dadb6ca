"""`ExecutableAgent`: a reusable agent definition that runs harness threads (SPEC §2.0, DESIGN "entry point").

It holds no per-run or per-thread state: every run gets fresh bindings, a fresh `AgentContext` and
capability state seeded from the previous `HarnessState`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Generic, TypeVar, overload

from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import UserContent
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.usage import RunUsage, UsageLimits

from ._recovery_input import ToolRecovery
from ._run import HarnessRunStream, consume
from ._tooling import HarnessCapability
from .barrier import RunBarrier
from .children.definitions import SubagentDefinition, check_subagents
from .children.host import HostDelegationCapability
from .children.inline import InlineDelegationCapability
from .context import AgentContext, RunBindings
from .deferred import DeferredToolResume
from .errors import DefinitionError, ErrorCode
from .results import HarnessRunResult
from .run_request import RunRequest
from .state import HarnessState

__all__ = ("ExecutableAgent",)

OutputT = TypeVar("OutputT")


class ExecutableAgent(Generic[OutputT]):
    """A reusable agent definition: model, output type, prompts and the capabilities that bring its tools.

    Example:
        ```python
        agent = ExecutableAgent(model, capabilities=[catalog], instructions="Be brief.", name="demo")
        lead = ExecutableAgent(model, name="lead", subagents=[SubagentDefinition("helper", "Helps.", agent)])
        first = await agent.run("Draft the plan", bindings=RunBindings.embedded(), previous_state=HarnessState.new())
        ```
    """

    @overload
    def __init__(
        self: ExecutableAgent[str],
        model: Model | str,
        *,
        capabilities: Sequence[AbstractCapability[Any]] = (),
        instructions: str | Sequence[str] | None = None,
        system_prompt: str | Sequence[str] = (),
        name: str | None = None,
        usage_limits: UsageLimits | None = None,
        subagents: Sequence[SubagentDefinition] = (),
        definition_id: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        model: Model | str,
        *,
        capabilities: Sequence[AbstractCapability[Any]] = (),
        instructions: str | Sequence[str] | None = None,
        system_prompt: str | Sequence[str] = (),
        output_type: type[OutputT],
        name: str | None = None,
        usage_limits: UsageLimits | None = None,
        subagents: Sequence[SubagentDefinition] = (),
        definition_id: str | None = None,
    ) -> None: ...
    def __init__(
        self,
        model: Model | str,
        *,
        capabilities: Sequence[AbstractCapability[Any]] = (),
        instructions: str | Sequence[str] | None = None,
        system_prompt: str | Sequence[str] = (),
        output_type: Any = str,
        name: str | None = None,
        usage_limits: UsageLimits | None = None,
        subagents: Sequence[SubagentDefinition] = (),
        definition_id: str | None = None,
    ) -> None:
        if definition_id is not None and (not isinstance(definition_id, str) or not definition_id.strip()):
            raise DefinitionError(
                "definition_id must be a non-blank string.", code=ErrorCode.SUBAGENT_DEFINITION_INVALID
            )
        self.definition_id: str | None = definition_id if definition_id is not None else name
        """The stable definition ID (default: `name`); retained inline children record their child's."""
        mode, edges = check_subagents(
            subagents, parent_name=name, parent_definition_id=self.definition_id, executable=ExecutableAgent
        )
        self.subagents: tuple[SubagentDefinition, ...] = edges
        """The child edges (CHILDREN §2), checked."""
        self.delegation: InlineDelegationCapability | HostDelegationCapability | None = None
        """The capability that brings the delegation tools, when there are edges (last in `capabilities`)."""
        if mode == "inline":
            self.delegation = InlineDelegationCapability(edges)
        elif mode == "host":
            assert name is not None  # check_subagents requires it for host-mode edges
            self.delegation = HostDelegationCapability(edges, parent_agent=name)
        self.system_prompt: tuple[str, ...] = (
            (system_prompt,) if isinstance(system_prompt, str) else tuple(system_prompt)
        )
        """The system prompt strings put at the front of every run's history (SPEC §2.2.3)."""
        self.output_type: Any = output_type
        """The output type a completed run's output validates against."""
        self.usage_limits = usage_limits
        """The default usage limits of every run."""
        self.name = name
        """The agent's name (servers list agents by it)."""
        self.capabilities: tuple[AbstractCapability[Any], ...] = (
            (*capabilities, self.delegation) if self.delegation is not None else tuple(capabilities)
        )
        """The native capabilities that bring the agent's tools (the delegation capability last)."""
        self.output_adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        """Validates and dumps outputs (`HarnessRunResult.output_json`)."""
        self.native: Agent[AgentContext, Any] = Agent(
            model,
            output_type=[output_type, NativeDeferredToolRequests],
            instructions=instructions,
            system_prompt=self.system_prompt,
            deps_type=AgentContext,
            name=name,
            # First, so its wrapper toolset is outermost and sees every tool (SPEC §2.5.6).
            capabilities=[HarnessCapability(), *self.capabilities],
        )
        """The native pydantic-ai agent every run drives (private use: runs go through `run`/`stream`)."""

    def stream(
        self,
        input: str | Sequence[UserContent] | None = None,
        *,
        bindings: RunBindings | None = None,
        previous_state: HarnessState | None = None,
        tool_recovery: ToolRecovery = "declared",
        deferred_resume: DeferredToolResume | None = None,
        usage: RunUsage | None = None,
        usage_limits: UsageLimits | None = None,
        checkpoints: bool = False,
        barrier: RunBarrier | None = None,
        run_id: str | None = None,
        calls_not_started: Collection[str] = (),
    ) -> HarnessRunStream[OutputT]:
        """Start a run as a stream: `async with agent.stream(...) as s: async for item in s: ...`.

        Every construction check (SPEC §2.2.2) runs here, synchronously; the arguments are those of
        `run`, plus `checkpoints`: offer a `HarnessCheckpointEvent` after each `model_request_started`
        and `model_request_completed` event (where `export_state()` moves, SPEC §2.3.4), and `barrier`:
        awaited before each model request with the state that ends with it (`harness.barrier`), and
        `run_id`: the run's ID when the host allocated it before the run (`run-<32 lowercase hex>`,
        else `RunError` `run_id_invalid`).
        """
        request = RunRequest(
            input,
            bindings=bindings,
            previous_state=previous_state,
            tool_recovery=tool_recovery,
            deferred_resume=deferred_resume,
            usage=usage,
            usage_limits=usage_limits,
            checkpoints=checkpoints,
            barrier=barrier,
            run_id=run_id,
            calls_not_started=calls_not_started,
        )
        return HarnessRunStream(self, request)

    async def run(
        self,
        input: str | Sequence[UserContent] | None = None,
        *,
        bindings: RunBindings | None = None,
        previous_state: HarnessState | None = None,
        tool_recovery: ToolRecovery = "declared",
        deferred_resume: DeferredToolResume | None = None,
        usage: RunUsage | None = None,
        usage_limits: UsageLimits | None = None,
        barrier: RunBarrier | None = None,
        run_id: str | None = None,
        calls_not_started: Collection[str] = (),
    ) -> HarnessRunResult[OutputT]:
        """Run to the terminal result. Construction checks raise when awaited, before any model request.

        The parameters are typed for the host; the checks still run for values that are not (each
        wrong value has its SPEC §2.2.2 code).

        Args:
            input: A `str`, a sequence of native user content, or `None` to continue without a prompt.
            bindings: Fresh `RunBindings` (default `RunBindings.embedded()`).
            previous_state: The thread's `HarnessState` to continue (default: a new thread).
            tool_recovery: `"declared"` (default), `"never"` or `"always"` for unanswered calls.
            deferred_resume: A `DeferredToolResume` answering the previous run's pending calls.
            usage: A native `RunUsage` baseline.
            usage_limits: Native `UsageLimits` (default: the agent's).
            barrier: Awaited before each model request (`harness.barrier`); a durable host commits there.
            run_id: The run's ID, allocated by the host before the run (default: the run makes one).
            calls_not_started: Calls of the last response the host knows never started (SPEC §2.5.8):
                each is dispatched as a new call (with a retained approval, if any), never given the
                unknown result; a gone tool's gets `NOT_EXECUTED_TOOL_RESULT`.
        """
        stream = self.stream(
            input,
            bindings=bindings,
            previous_state=previous_state,
            tool_recovery=tool_recovery,
            deferred_resume=deferred_resume,
            usage=usage,
            usage_limits=usage_limits,
            barrier=barrier,
            run_id=run_id,
            calls_not_started=calls_not_started,
        )
        return await consume(stream)
