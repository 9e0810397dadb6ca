"""The server's shell environments (`--mount`, `[mounts.NAME]`): one backend, fresh adapters per run.

The server is the Host of ENVIRONMENT §12: mount definitions (roots, shells, actions, which agents
get them) are its configuration, never a request's; a request only brings the checkpoint's
`environment_states`, which each mount decodes as evidence of the commands this server process keeps
(§12.2). The backend lives
as long as the server and stops every command it still runs when the server stops (§11).
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.v1 import harness_service_pb2

from harness import HarnessError, HarnessState
from harness.environment import (
    PROVIDER_KEY,
    READABLE_VERSIONS,
    DynamicEnvironmentCapability,
    EnvironmentMount,
    LocalProcessBackend,
)
from harness.environment.capability import published_tools
from harness.environment.state import decode
from harness.environment.surface import is_process_capable
from harness.errors import ErrorCode

from .agents import ToolDescription, describe_tool
from .errors import at_field
from .mount_config import CheckedMounts, check_agents
from .runlog import log_run

__all__ = ("ServerMounts",)

_VERSION_CODE = ErrorCode.ENVIRONMENT_STATE_VERSION_UNSUPPORTED


class ServerMounts:
    """The configured mounts, their backend (`open` … `close`) and what each agent's runs and hosts see
    of them."""

    def __init__(self, checked: CheckedMounts, *, agents: Sequence[str]) -> None:
        """`checked` as `ServerConfig.check()` returned it (served as checked); `agents` the served names.

        Raises:
            ConfigError: A mount names an agent not served.
        """
        check_agents(checked.definitions, agents)
        self._backend_limits = checked.backend
        self._mounts = {mount.definition.name: (mount.definition, mount.config) for mount in checked.mounts}
        self._of_agent = {
            agent: {name: mount for name, mount in self._mounts.items() if mount[0].serves(agent)}
            for agent in agents
        }
        """Served agent → the mounts its runs get: name → (definition, checked config)."""
        self._tools = {
            agent: tuple(
                describe_tool(tool)
                for tool in published_tools({name: d.actions for name, (d, _) in mine.items()})
            )
            for agent, mine in self._of_agent.items()
        }
        self._backend: LocalProcessBackend | None = None

    def __bool__(self) -> bool:
        return bool(self._mounts)

    def tools(self, agent: str) -> tuple[ToolDescription, ...]:
        """The shell tools `agent`'s runs get, as `GetServerInfo` lists them (§12.4)."""
        return self._tools.get(agent, ())

    async def open(self) -> None:
        """Start the backend (once the server starts); nothing runs before it."""
        if self._mounts and self._backend is None:
            self._backend = LocalProcessBackend(self._backend_limits)
            log_run(
                "mounts_configured",
                mounts=[
                    {
                        "name": name,
                        "actions": list(d.actions),
                        "agents": [agent for agent, mine in self._of_agent.items() if name in mine],
                    }
                    for name, (d, _) in self._mounts.items()
                ],
            )

    async def close(self) -> None:
        """Stop every command still running (TERM, grace, KILL) and forget every scope (§11)."""
        backend, self._backend = self._backend, None
        if backend is not None:
            stopped = await backend.aclose()
            log_run("mounts_closed", commands_stopped=stopped)

    def bind(
        self, agent: str, previous_state: HarnessState | None, *, state_field: str | None
    ) -> list[EnvironmentMount]:
        """A fresh adapter per mount of `agent` for one run (`RunBindings.mounts`).

        Each mount restores from the previous state's entry of its name, whatever its provider key
        (the adapter keeps a foreign entry untouched). `state_field` is the request field the
        previous state came in, for a decode error's BadRequest path; `None` when it came from the
        server's own thread store.

        Raises:
            StateError: `environment_state_invalid`, `environment_state_version_unsupported`.
        """
        if not self._mounts:
            return []
        assert self._backend is not None, "mounts are bound only while the server runs"
        states = previous_state.environment_states if previous_state is not None else {}
        mounts: list[EnvironmentMount] = []
        for name, (definition, config) in self._of_agent.get(agent, {}).items():
            try:  # another mount's entry, if any, is carried unchanged (§9.2)
                mounts.append(
                    self._backend.mount(name, config, actions=definition.actions, restore=states.get(name))
                )
            except HarnessError as error:
                raise _at_entry(error, state_field, list(states).index(name)) from None
        return mounts

    def check_entries(self, agent: str, state: HarnessState, *, state_field: str) -> None:
        """Decode the entries `agent`'s mounts would restore from `state`, as `bind` does (fail-closed).

        Raises:
            StateError: `environment_state_invalid`, `environment_state_version_unsupported`, at the
                entry's field under `state_field`.
        """
        states = state.environment_states
        for name in self._of_agent.get(agent, {}):
            try:
                decode(name, states.get(name))
            except HarnessError as error:
                raise _at_entry(error, state_field, list(states).index(name)) from None

    @staticmethod
    def capability_for(agent_capabilities: Sequence[object]) -> DynamicEnvironmentCapability | None:
        """The shell capability a run adds: `None` when the agent's definition already has one."""
        if any(isinstance(capability, DynamicEnvironmentCapability) for capability in agent_capabilities):
            return None
        return DynamicEnvironmentCapability()

    def mount_infos(self, agent: str) -> list[harness_service_pb2.MountInfo]:
        """`AgentInfo.mounts`: the mounts `agent`'s runs get, with their actions."""
        return [
            harness_service_pb2.MountInfo(
                name=name,
                provider_key=PROVIDER_KEY,
                actions=list(definition.actions),
                process_capable=is_process_capable(definition.actions),
            )
            for name, (definition, _) in self._of_agent.get(agent, {}).items()
        ]

    def provider_infos(self) -> list[harness_service_pb2.EnvironmentProviderInfo]:
        """`GetServerInfoResponse.environment_providers`: the local provider when there are mounts."""
        if not self._mounts:
            return []
        return [
            harness_service_pb2.EnvironmentProviderInfo(
                provider_key=PROVIDER_KEY, state_versions=list(READABLE_VERSIONS)
            )
        ]


def _at_entry(error: HarnessError, state_field: str | None, index: int) -> HarnessError:
    """A decode error at `STATE_FIELD.environment_states[INDEX]`'s value (no field: the store's state)."""
    if state_field is None:
        return error
    leaf = "state_version" if error.code is _VERSION_CODE else "state_json"
    return at_field(error, f"{state_field}.environment_states[{index}].{leaf}")
