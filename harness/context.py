"""Per-run bindings from the host and the run context tools see as `ctx.deps` (SPEC §2.2.1).

Nothing here crosses runs: a host builds fresh `RunBindings` for every run, and the harness builds
a fresh `AgentContext` (with capability state seeded from the previous state) for every run.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from pydantic_ai.capabilities import AbstractCapability

from .capability_state import CapabilityStateStore
from .json_text import JsonValue

if TYPE_CHECKING:
    from .environment.run import EnvironmentView

__all__ = ("AgentContext", "ChildLineage", "InstanceIdentity", "RunBindings")


@dataclass(frozen=True, slots=True)
class InstanceIdentity:
    """Who runs this agent instance; informational, never authority stored in state."""

    issuer: str
    """Who vouches for the subject (`"local"` for an embedded host)."""
    subject: str
    """The identity the run acts for."""
    agent_instance_id: str
    """This agent instance's id."""
    claims: Mapping[str, JsonValue] | None = None
    """Optional identity claims (e.g. `agent_id`); a child run gets a copy with its own `agent_id`."""


@dataclass(frozen=True, slots=True)
class ChildLineage:
    """Which parent run and tool call a child run serves (CHILDREN §4.3): correlation, never authority.

    Checked when a run is constructed (`child_lineage_invalid`), exposed as `AgentContext.lineage`, on the
    `run_started` payload and on the run result; never written into `HarnessState`, and it never changes
    `deferred_tools_supported`.
    """

    parent_thread_id: str
    """The parent's thread; a valid thread ID other than the child run's own."""
    parent_run_id: str
    """The parent run, `run-<32 hex>`."""
    parent_tool_call_id: str
    """The parent's `delegate`/`resume_subagent` call."""
    parent_agent_instance_id: str
    """The parent run's agent instance."""
    subagent_name: str
    """The edge name (`^[a-z][a-z0-9_-]{0,62}$`)."""
    delegation_id: str
    """Inline: the child ID; Host-managed: the child's thread ID (the execution ID the model sees)."""

    def to_jsonable(self) -> dict[str, JsonValue]:
        """The six fields as a JSON object (the `run_started` payload's `lineage`)."""
        return {
            "parent_thread_id": self.parent_thread_id,
            "parent_run_id": self.parent_run_id,
            "parent_tool_call_id": self.parent_tool_call_id,
            "parent_agent_instance_id": self.parent_agent_instance_id,
            "subagent_name": self.subagent_name,
            "delegation_id": self.delegation_id,
        }


@dataclass(frozen=True, slots=True)
class RunBindings:
    """What the host supplies fresh for one run: identity, deferred support, extra capabilities, metadata."""

    instance: InstanceIdentity
    """The run's identity."""
    deferred_tools_supported: bool = True
    """Whether the host can answer deferred tool calls; `False` removes deferring tools (SPEC §2.7.7)."""
    capabilities: Sequence[AbstractCapability[Any]] = ()
    """Native capabilities added to this run only (e.g. the host's client tools)."""
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: MappingProxyType({}))
    """Read-only JSON metadata the run's tools can read."""
    mounts: Sequence[Any] = ()
    """`EnvironmentMount`s for this run only, each fresh (`harness.environment`; ENVIRONMENT §3)."""
    default_mount: str | None = None
    """The mount a shell call without `alias` uses; the only mount when there is one."""
    lineage: ChildLineage | None = None
    """Set when this run is a child run (CHILDREN §4.3); correlation only."""

    @classmethod
    def embedded(cls, **overrides: Any) -> RunBindings:
        """Defaults for an embedded host: issuer `local`, subject `embedded`, a new instance id."""
        bindings = cls(instance=InstanceIdentity("local", "embedded", uuid.uuid4().hex))
        return replace(bindings, **overrides) if overrides else bindings


class RunHooks(Protocol):
    """The hooks a run offers its capabilities and tools, and nothing else of its stream (private)."""

    @property
    def own_input(self) -> str | Sequence[Any] | None:
        """The input this run was started with (an inline child's context may include it)."""
        ...

    def queue_event(self, kind: Literal["state", "tool", "delegation"], payload: dict[str, Any]) -> None:
        """Yield an extension event at the stream's next event boundary (from any thread)."""
        ...

    async def model_request_started(self, ctx: Any) -> None:
        """A model request is about to be sent; it waits for this (`harness.barrier`)."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class AgentContext:
    """The deps of every harness run: tools take `RunContext[AgentContext]` and use `ctx.deps`."""

    run_id: str
    """This run's id."""
    thread_id: str
    """The thread's id."""
    instance: InstanceIdentity
    """Who runs the agent."""
    metadata: Mapping[str, JsonValue]
    """The bindings' read-only metadata."""
    deferred_tools_supported: bool
    """Whether deferring is possible in this run."""
    state: CapabilityStateStore
    """Versioned capability state: `await ctx.deps.state.read(...)` / `write(...)`."""
    lineage: ChildLineage | None = None
    """The bindings' lineage when this run is a child run."""
    _tooling: Any = field(default=None, repr=False)
    """The run's tool bookkeeping (private; `harness._tooling.RunTooling`)."""
    _hooks: RunHooks | None = field(default=None, repr=False)
    """What the run offers the code inside it (private; the run's stream implements it)."""
    _environment: Any = field(default=None, repr=False)
    """The run's mounts and references (private; `harness.environment.run.RunEnvironment`)."""

    @property
    def environment(self) -> EnvironmentView | None:
        """The run's mounts, read-only (names, effective actions, default), or `None` without mounts."""
        return None if self._environment is None else cast("EnvironmentView", self._environment.view)
