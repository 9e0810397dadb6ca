"""Starting a core stream for a request: fresh bindings with its client tools, the construction checks.

`HarnessService` and `ThreadService` both start runs this way; the durable host reaches it through the
`harness.threads.Launcher` protocol (`ThreadLauncher`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability

from harness import (
    ClientTool,
    HarnessError,
    HarnessRunStream,
    RunBindings,
    RunRequest,
    client_tools_capability,
)
from harness.children import ChildLineage, SubagentDefinition, child_identity, child_usage_limits
from harness.children.names import check_lineage
from harness.errors import ErrorCode, RecordedRefusal

from .agents import AgentRegistry
from .errors import ServerError, ServerReason, at_field, at_named_field
from .mounts import ServerMounts
from .offloop import off_loop, own_loop_if_long
from .runlog import RunScope
from .runs import ActiveRuns
from .tracing import CURRENT as TRACING

__all__ = ("ThreadLauncher", "client_tools_for", "start_stream", "unknown_agent")


def unknown_agent(registry: AgentRegistry, name: str, *, field: str) -> ServerError:
    """`AGENT_UNKNOWN` for a name `registry` does not serve, with the names it does."""
    return ServerError(
        ServerReason.AGENT_UNKNOWN,
        f"No agent is called {name!r}.",
        details={"agent": name, "served": list(registry)},
        field=field,
    )


def client_tools_for(
    registry: AgentRegistry,
    mounts: ServerMounts,
    agent_name: str,
    client_tools: Sequence[ClientTool],
    *,
    field: str,
) -> AbstractCapability[Any] | None:
    """The core's check of client tools for a run of `agent_name` (beside its own and its mounts'
    tools) and the capability serving them; CreateThread checks the tools it records the same way.

    Raises:
        InputError: `client_tool_invalid` at `field`.
    """
    served = agent_name or registry.default
    reserved = [tool.name for tool in (*registry.tools(agent_name), *mounts.tools(served))]
    try:
        return client_tools_capability(client_tools, reserved_names=reserved)
    except HarnessError as error:
        raise at_field(error, field) from None


def start_stream(
    registry: AgentRegistry,
    agent_name: str,
    run: RunRequest,
    *,
    client_tools: Sequence[ClientTool],
    mounts: ServerMounts,
    state_field: str | None = "spec.previous_state",
    resume_field: str | None = None,
    lineage: ChildLineage | None = None,
    parent_agent: str = "",
    deferred_tools_supported: bool = True,
) -> HarnessRunStream[Any]:
    """The core's stream for `run` with bindings of its own (its client tools, its mounts), checked
    at once.

    `state_field` names the request field `previous_state` came in (`None`: from the thread store),
    `resume_field` the one a failing deferred check is reported at, if any. A child run (`lineage`)
    whose request names its `parent_agent` gets that edge's limits and identity (CHILDREN §2, §5.1).
    """
    agent = registry.get(agent_name)
    if agent is None:
        raise unknown_agent(registry, agent_name, field="spec.agent")
    previous_state, usage_limits = run.previous_state, run.usage_limits
    served = agent_name or registry.default
    capability = client_tools_for(registry, mounts, agent_name, client_tools, field="spec.client_tools")
    if parent_agent:  # the lineage's shape first: a malformed edge name is not an unknown edge
        try:
            check_lineage(lineage, previous_state.thread_id if previous_state is not None else "")
        except HarnessError as error:
            raise at_named_field(error, prefix="spec.lineage.") from None
    edge = host_edge(registry, parent_agent, lineage, child=served) if parent_agent else None
    capabilities: list[AbstractCapability[Any]] = [capability] if capability is not None else []
    if (tracing := TRACING.get()) is not None:
        capabilities.append(tracing.instrumentation)  # pydantic-ai's model and tool spans, this run only
    bound = mounts.bind(served, previous_state, state_field=state_field)
    if bound and (shell := mounts.capability_for(agent.capabilities)) is not None:
        capabilities.append(shell)  # per run: the agent's definition is never changed (§12.2)
    bindings = RunBindings.embedded(
        capabilities=capabilities,
        mounts=bound,
        lineage=lineage,
        deferred_tools_supported=deferred_tools_supported,
    )
    if edge is not None:
        usage_limits = child_usage_limits(agent.usage_limits, edge.usage_limits, usage_limits)
        bindings = replace(
            bindings, instance=child_identity(bindings.instance, edge, agent_instance_id=uuid.uuid4().hex)
        )
    try:
        return agent.stream(  # the agent's own `stream`: a served agent may be a subclass that wraps it
            run.input,
            bindings=bindings,
            previous_state=run.previous_state,
            tool_recovery=run.tool_recovery,
            deferred_resume=run.deferred_resume,
            usage=run.usage,
            usage_limits=usage_limits,
            checkpoints=run.checkpoints,
            barrier=run.barrier,
            **_newer(run),
        )
    except HarnessError as error:
        if resume_field is not None and error.code.family == "deferred":
            raise at_field(error, resume_field) from None
        if error.code is ErrorCode.CHILD_LINEAGE_INVALID:
            raise at_named_field(error, prefix="spec.lineage.") from None
        raise


def host_edge(
    registry: AgentRegistry, parent_agent: str, lineage: ChildLineage | None, *, child: str
) -> SubagentDefinition:
    """The host-mode edge `lineage.subagent_name` of the served `parent_agent` that runs `child`.

    Raises:
        ServerError: `CHILD_EDGE_UNKNOWN` when there is none.
    """
    parent = registry.get(parent_agent)  # non-empty: never the default agent
    name = lineage.subagent_name if lineage is not None else ""
    for edge in parent.subagents if parent is not None else ():
        if edge.name == name and edge.mode == "host" and edge.agent.name == child:
            return edge
    raise ServerError(
        ServerReason.CHILD_EDGE_UNKNOWN,
        f"Agent {parent_agent!r} declares no host-mode child {name!r} that runs agent {child!r}.",
        details={"parent_agent": parent_agent, "subagent": name, "agent": child},
        field="spec.lineage.parent_agent",
    )


class ThreadLauncher:
    """`harness.threads.Launcher` for the server's agents and its run limit."""

    def __init__(self, registry: AgentRegistry, runs: ActiveRuns, mounts: ServerMounts) -> None:
        self._registry = registry
        self._runs = runs
        self._mounts = mounts

    def stream(
        self, agent: str, run: RunRequest, *, client_tools: Sequence[ClientTool]
    ) -> HarnessRunStream[Any]:
        return start_stream(
            self._registry,
            agent,
            replace(run, checkpoints=True),
            client_tools=client_tools,
            mounts=self._mounts,
            state_field=None,
            resume_field="spec.answers",
        )

    def has_room(self, *, freeing: int = 0) -> bool:
        return not self._runs.draining and len(self._runs) - freeing < self._runs.limit

    def refused_again(self, refusal: RecordedRefusal) -> ServerError:
        return ServerError(refusal.reason, refusal.message, details=refusal.details)

    async def prepare(self, stream: HarnessRunStream[Any], *, request_id: str) -> None:
        """A long history is prepared off the event loop (a drain stops that; the run outlives its RPC, so
        neither the caller leaving nor its deadline does), and its run is driven on a loop of its own."""
        fields = {"service": "threads", "thread_id": stream.thread_id, "run_id": stream.run_id}
        await off_loop(
            stream.prepare,
            step="preparing",
            size=stream.history_length,
            runs=self._runs,
            deadline=None,
            fields={**fields, "request_id": request_id},
        )
        own_loop_if_long(stream)

    @contextmanager
    def admit(
        self, stream: HarnessRunStream[Any], *, cancel: Callable[[], None], request_id: str, agent: str
    ) -> Iterator[Callable[[], None]]:
        fields = {"thread_id": stream.thread_id, "run_id": stream.run_id, "request_id": request_id}
        scope = RunScope("threads", agent, fields)
        begun = False

        def begin() -> None:
            nonlocal begun
            begun = True
            scope.start()

        # A refused admission is no run (as in HarnessService), nor is a request whose Begin was refused.
        with self._runs.admit(stream, cancel=cancel):
            try:
                yield begin
            finally:
                result = stream.result
                if begun and result is None:
                    scope.end("interrupted")
                elif begun and result is not None:
                    scope.end(result.status, result.usage)


def _newer(run: RunRequest) -> dict[str, Any]:
    """The run's arguments newer than `stream`'s first ones, only when set: a served agent's own
    `stream` wrapper may predate them."""
    extra: dict[str, Any] = {}
    if run.run_id is not None:
        extra["run_id"] = run.run_id
    if run.calls_not_started:
        extra["calls_not_started"] = run.calls_not_started
    return extra
