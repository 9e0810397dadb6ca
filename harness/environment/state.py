"""The portable `EnvironmentState` of the `threadline_local` provider, version "1" (ENVIRONMENT §9).

Random ids only: which backend incarnation and which scope hold a thread's commands, and which
commands existed. No path, pid, command text, output, reference or permission: the state restores
data, never authority (§9.3 decides whether the ids are honoured).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from ..errors import ErrorCode, StateError
from ..state import EnvironmentState

__all__ = (
    "PROVIDER_KEY",
    "READABLE_VERSIONS",
    "STATE_VERSION",
    "LocalState",
    "RetainedCommand",
    "decode",
    "encode",
    "timestamp",
)

PROVIDER_KEY = "threadline_local"
STATE_VERSION = "1"
"""The one version this provider writes."""
READABLE_VERSIONS = ("1",)
"""Every version it ever wrote; `GetServerInfo` publishes them."""

_ID = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
_MAX_COMMANDS = 32


def timestamp(moment: datetime) -> str:
    """UTC, microseconds, `Z`: one spelling, so equal states are equal bytes."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class RetainedCommand(BaseModel):
    """One command the scope retained: its backend id and when it started."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: _ID
    started_at: Annotated[str, StringConstraints(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")]


class LocalState(BaseModel):
    """Version 1: the backend incarnation, the scope, the retained commands (oldest first)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: _ID
    commands: list[RetainedCommand] = Field(max_length=_MAX_COMMANDS)
    scope: _ID

    @field_validator("commands")
    @classmethod
    def _unique(cls, commands: list[RetainedCommand]) -> list[RetainedCommand]:
        if len({command.id for command in commands}) != len(commands):
            raise ValueError("command ids must be unique")
        return commands


def encode(state: LocalState) -> EnvironmentState:
    return EnvironmentState(
        provider_key=PROVIDER_KEY, state_version=STATE_VERSION, state=state.model_dump(mode="json")
    )


def decode(mount: str, entry: EnvironmentState | None) -> LocalState | None:
    """The evidence in a restored entry, or `None` when there is none or it is another provider's.

    Raises:
        StateError: `environment_state_version_unsupported`, `environment_state_invalid` (fail closed:
            the run does not start).
    """
    if entry is None or entry.provider_key != PROVIDER_KEY:
        return None
    if entry.state_version not in READABLE_VERSIONS:
        raise StateError(
            f"The environment state of mount {mount!r} has version {entry.state_version!r}; this server "
            f"reads {', '.join(READABLE_VERSIONS)}.",
            code=ErrorCode.ENVIRONMENT_STATE_VERSION_UNSUPPORTED,
            details={
                "mount": mount,
                "received": entry.state_version[:64],
                "supported": ",".join(READABLE_VERSIONS),
            },
        )
    try:
        return LocalState.model_validate(entry.state)
    except ValidationError:
        raise StateError(
            f"The environment state of mount {mount!r} is not a valid {PROVIDER_KEY} state.",
            code=ErrorCode.ENVIRONMENT_STATE_INVALID,
            details={"mount": mount},
        ) from None
