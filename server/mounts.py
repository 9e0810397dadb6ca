"""The server's shell environments (`--mount NAME=local:ROOT`): one backend, fresh adapters per run.

The server is the Host of ENVIRONMENT §12: mount definitions (roots, shells, actions) are its
configuration, never a request's; a request only brings the checkpoint's `environment_states`, which
each mount decodes as evidence of the commands this server process keeps (§12.2). The backend lives
as long as the server and stops every command it still runs when the server stops (§11).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from threadline.v1 import harness_service_pb2

from harness import HarnessError, HarnessState
from harness.environment import (
    ACTIONS,
    PROVIDER_KEY,
    READABLE_VERSIONS,
    DynamicEnvironmentCapability,
    EnvironmentMount,
    LocalMountConfig,
    LocalProcessBackend,
)
from harness.environment.capability import published_tools
from harness.environment.surface import is_process_capable
from harness.errors import ErrorCode

from .agents import describe_tool
from .config import ConfigError
from .errors import at_field
from .runlog import log_run

__all__ = ("ServerMounts",)

_VERSION_CODE = ErrorCode.ENVIRONMENT_STATE_VERSION_UNSUPPORTED


class ServerMounts:
    """The configured mounts, their backend (`open` … `close`) and what runs and hosts see of them."""

    def __init__(self, roots: Sequence[tuple[str, Path]]) -> None:
        try:
            self._configs = {name: LocalMountConfig(root) for name, root in roots}
        except ValidationError as error:  # the root went away since `ServerConfig.check()`
            raise ConfigError(f"--mount: {error.errors()[0]['msg']}.") from None
        self.actions = ACTIONS
        """Every mount's actions: all nine the local provider supports (§12.1)."""
        self.tools = tuple(
            describe_tool(tool) for tool in published_tools({name: self.actions for name in self._configs})
        )
        """The shell tools every agent's runs get, as `GetServerInfo` lists them (§12.4)."""
        self._backend: LocalProcessBackend | None = None

    def __bool__(self) -> bool:
        return bool(self._configs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._configs)

    async def open(self) -> None:
        """Start the backend (once the server starts); nothing runs before it."""
        if self._configs and self._backend is None:
            self._backend = LocalProcessBackend()
            log_run(
                "mounts_configured",
                mounts=[{"name": name, "actions": list(self.actions)} for name in self._configs],
            )

    async def close(self) -> None:
        """Stop every command still running (TERM, grace, KILL) and forget every scope (§11)."""
        backend, self._backend = self._backend, None
        if backend is not None:
            stopped = await backend.aclose()
            log_run("mounts_closed", commands_stopped=stopped)

    def bind(self, previous_state: HarnessState | None, *, state_field: str | None) -> list[EnvironmentMount]:
        """A fresh adapter per mount for one run (`RunBindings.mounts`).

        Each mount restores from the previous state's entry of its name, whatever its provider key
        (the adapter keeps a foreign entry untouched). `state_field` is the request field the
        previous state came in, for a decode error's BadRequest path; `None` when it came from the
        server's own thread store.

        Raises:
            StateError: `environment_state_invalid`, `environment_state_version_unsupported`.
        """
        if not self._configs:
            return []
        assert self._backend is not None, "mounts are bound only while the server runs"
        states = previous_state.environment_states if previous_state is not None else {}
        mounts: list[EnvironmentMount] = []
        for name, config in self._configs.items():
            try:
                mounts.append(
                    self._backend.mount(name, config, actions=self.actions, restore=states.get(name))
                )
            except HarnessError as error:
                if state_field is not None:
                    leaf = "state_version" if error.code is _VERSION_CODE else "state_json"
                    at_field(error, f"{state_field}.environment_states[{list(states).index(name)}].{leaf}")
                raise
        return mounts

    @staticmethod
    def capability_for(agent_capabilities: Sequence[object]) -> DynamicEnvironmentCapability | None:
        """The shell capability a run adds: `None` when the agent's definition already has one."""
        if any(isinstance(capability, DynamicEnvironmentCapability) for capability in agent_capabilities):
            return None
        return DynamicEnvironmentCapability()

    def mount_infos(self) -> list[harness_service_pb2.MountInfo]:
        """`AgentInfo.mounts`: every agent gets every mount."""
        return [
            harness_service_pb2.MountInfo(
                name=name,
                provider_key=PROVIDER_KEY,
                actions=list(self.actions),
                process_capable=is_process_capable(self.actions),
            )
            for name in self._configs
        ]

    def provider_infos(self) -> list[harness_service_pb2.EnvironmentProviderInfo]:
        """`GetServerInfoResponse.environment_providers`: the local provider when there are mounts."""
        if not self._configs:
            return []
        return [
            harness_service_pb2.EnvironmentProviderInfo(
                provider_key=PROVIDER_KEY, state_versions=list(READABLE_VERSIONS)
            )
        ]
