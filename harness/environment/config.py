"""What a Host configures for a `threadline_local` mount, and the backend's own bounds (ENVIRONMENT §3.2, §10.4).

Everything is checked when a model is built, so a running backend never meets a root that is not an
absolute directory or a shell it cannot execute. The root is stored canonical (realpath): the `cwd`
confinement of §10.2 compares canonical paths only. Limits are checked against each other too, where
one would make another impossible: within a mount when `LocalMountLimits` is built, and a mount's
against the backend's with `LocalBackendLimits.check_mount` (which `LocalProcessBackend.mount` calls).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

__all__ = (
    "DEFAULT_INHERIT_ENV",
    "ENV_KEY",
    "MOUNT_NAME",
    "LimitsConflict",
    "LocalBackendLimits",
    "LocalMountConfig",
    "LocalMountLimits",
    "is_inside",
)

MOUNT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
"""A mount's name (§3.3): the model's `alias` and the state entry's key, so short and plain."""

ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
"""An environment variable name a mount or a call may set (§10.3)."""

DEFAULT_INHERIT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE")
"""The server variables a command sees by default, as in pydantic-ai's local backend."""

_NO_ENV: Mapping[str, str] = MappingProxyType({})

_Count = Annotated[int, Field(gt=0)]
_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_PAIRED = Field(validate_default=True)
"""A limit checked against an earlier one, so even at its default."""


class LocalMountLimits(BaseModel):
    """Per-mount bounds (§10.4); every one is configurable, the defaults are the spec's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_command_bytes: _Count = 65536
    """The command text, UTF-8."""
    max_env_entries: _Count = 64
    """Variables in one call's `environment` overlay."""
    max_env_value_bytes: _Count = 32768
    """One overlay value, UTF-8."""
    initial_wait_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 5.0
    """How long `shell_exec` waits for a final result before handing out a reference."""
    max_wall_time_seconds: _Seconds = 3600.0
    """The cap on a command's execution timeout, and its default."""
    foreground_timeout_seconds: Annotated[_Seconds, _PAIRED] = 300.0
    """The default execution timeout on a foreground-only mount."""
    terminate_grace_seconds: _Seconds = 2.0
    """Between SIGTERM and SIGKILL to a command's group."""
    drain_grace_seconds: _Seconds = 2.0
    """How long a pipe may stay open after the group is gone before capture is cut off."""
    max_page_bytes: Annotated[int, Field(ge=8)] = 16384
    """Output bytes per call across both streams; at least 8, so each half holds a whole character."""
    retained_bytes_per_stream: _Count = 1048576
    """The newest bytes kept of each stream."""
    max_live_commands: _Count = 8
    """Running commands per scope."""
    max_retained_commands: Annotated[_Count, _PAIRED] = 32
    """Commands kept per scope, live or finished."""
    retain_exited_seconds: _Seconds = 900.0
    """How long a fully captured command stays in its scope."""
    max_stdin_write_bytes: _Count = 65536
    """One stdin write."""
    max_stdin_total_bytes: Annotated[_Count, _PAIRED] = 1048576
    """All stdin writes over a command's life."""

    # Each pair is checked on its later field, so the error names a limit of the pair (and both are
    # in the message); an earlier field that failed its own check is not in `info.data`.
    @field_validator("foreground_timeout_seconds")
    @classmethod
    def _within_the_cap(cls, value: float, info: ValidationInfo) -> float:
        cap = info.data.get("max_wall_time_seconds")
        if cap is not None and value > cap:
            raise ValueError(
                f"must be at most max_wall_time_seconds ({cap:g}), the cap on every timeout: "
                "otherwise every foreground command without a timeout is refused"
            )
        return value

    @field_validator("max_retained_commands")
    @classmethod
    def _room_for_the_live(cls, value: int, info: ValidationInfo) -> int:
        live = info.data.get("max_live_commands")
        if live is not None and value < live:
            raise ValueError(
                f"must be at least max_live_commands ({live}): a running command past the retained "
                "ones would be started and then killed"
            )
        return value

    @field_validator("max_stdin_total_bytes")
    @classmethod
    def _room_for_a_write(cls, value: int, info: ValidationInfo) -> int:
        write = info.data.get("max_stdin_write_bytes")
        if write is not None and value < write:
            raise ValueError(f"must be at least max_stdin_write_bytes ({write}), one write's bound")
        return value


_DEFAULT_LIMITS = LocalMountLimits()


class LimitsConflict(ValueError):
    """A mount's limits that the backend's make impossible (`LocalBackendLimits.check_mount`)."""

    def __init__(self, message: str, *, mount_limit: str, backend_limit: str) -> None:
        super().__init__(message)
        self.mount_limit = mount_limit
        """The `LocalMountLimits` field of the pair."""
        self.backend_limit = backend_limit
        """The `LocalBackendLimits` field of the pair."""


class LocalBackendLimits(BaseModel):
    """Bounds of the whole backend, across every mount and scope."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_live_commands: _Count = 64
    """Running commands in the backend."""
    max_retained_bytes: _Count = 268435456
    """Captured bytes held, a running command counted at its full window (so the bound always holds)."""
    scope_idle_seconds: _Seconds = 3600.0
    """How long a scope with no commands and no adapter bound is kept."""

    def check_mount(self, limits: LocalMountLimits) -> None:
        """Refuse a mount's limits under which this backend could start no command.

        A command reserves both of its windows when it starts (§10.4), so they must fit in the
        backend's bound. (A mount's live cap above the backend's is not refused: the backend's holds.)

        Raises:
            LimitsConflict: Twice `retained_bytes_per_stream` exceeds `max_retained_bytes`.
        """
        windows = 2 * limits.retained_bytes_per_stream
        if windows > self.max_retained_bytes:
            raise LimitsConflict(
                f"twice retained_bytes_per_stream ({windows}, the two windows a command reserves) "
                f"exceeds the backend's max_retained_bytes ({self.max_retained_bytes}): every command "
                "would be refused",
                mount_limit="retained_bytes_per_stream",
                backend_limit="max_retained_bytes",
            )


class LocalMountConfig(BaseModel):
    """One mount of the local provider: where commands run, with which shell and environment.

    The root confines only the `cwd` argument; commands run as the server's user (§10.1).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: Path
    """Canonical (realpath) absolute directory."""
    working_directory: str = "."
    """The default `cwd`, relative to the root and inside it."""
    shell: str = "/bin/sh"
    """Absolute path of an executable run as `<shell> -c <command>`."""
    env: Mapping[str, str] = Field(default_factory=dict)
    """Variables every command of the mount gets, over the inherited ones."""
    inherit_env: tuple[str, ...] = DEFAULT_INHERIT_ENV
    """The only server variables passed on."""
    limits: LocalMountLimits = _DEFAULT_LIMITS

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        working_directory: str = ".",
        shell: str = "/bin/sh",
        env: Mapping[str, str] = _NO_ENV,
        inherit_env: Sequence[str] = DEFAULT_INHERIT_ENV,
        limits: LocalMountLimits = _DEFAULT_LIMITS,
        **unknown: object,
    ) -> None:
        # `root` may be positional; `model_validate` comes through here too, so unknown keys are passed
        # on for `extra="forbid"` to refuse as a ValidationError.
        super().__init__(
            root=root,
            working_directory=working_directory,
            shell=shell,
            env=env,
            inherit_env=inherit_env,
            limits=limits,
            **unknown,
        )

    @field_validator("root", mode="before")
    @classmethod
    def _canonical_root(cls, value: Any) -> Path:
        if not isinstance(value, str | os.PathLike):
            raise ValueError("root must be a path")
        path = os.fspath(value)
        if not isinstance(path, str) or "\0" in path:
            raise ValueError("root must be a text path without NUL")
        if not os.path.isabs(path):
            raise ValueError("root must be absolute")
        canonical = os.path.realpath(path)
        if not os.path.isdir(canonical):
            raise ValueError("root must be an existing directory")
        return Path(canonical)

    @field_validator("shell")
    @classmethod
    def _executable_shell(cls, value: str) -> str:
        if "\0" in value or not os.path.isabs(value):
            raise ValueError("shell must be an absolute path")
        if not os.path.isfile(value) or not os.access(value, os.X_OK):
            raise ValueError("shell must be an executable file")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: Mapping[str, str]) -> Mapping[str, str]:
        for key, text in value.items():
            if not ENV_KEY.fullmatch(key):
                raise ValueError("env keys must match ^[A-Za-z_][A-Za-z0-9_]{0,127}$")
            if "\0" in text:
                raise ValueError("env values must not contain NUL")
        return MappingProxyType(dict(value))

    @field_serializer("env")
    def _dump_env(self, value: Mapping[str, str]) -> dict[str, str]:
        return dict(value)

    @field_validator("inherit_env")
    @classmethod
    def _inherit(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not all(ENV_KEY.fullmatch(key) for key in value):
            raise ValueError("inherit_env names must match ^[A-Za-z_][A-Za-z0-9_]{0,127}$")
        return value

    @model_validator(mode="after")
    def _working_directory_inside(self) -> LocalMountConfig:
        if "\0" in self.working_directory or os.path.isabs(self.working_directory):
            raise ValueError("working_directory must be relative to root")
        resolved = os.path.realpath(self.root / self.working_directory)
        if not is_inside(self.root, resolved):
            raise ValueError("working_directory must resolve inside root")
        if not os.path.isdir(resolved):
            raise ValueError("working_directory must be an existing directory")
        return self

    def workdir(self) -> str:
        """The default `cwd`, canonical, resolved now (a symlink may have moved since the check)."""
        return os.path.realpath(self.root / self.working_directory)


def is_inside(root: Path, path: str) -> bool:
    """Whether a canonical `path` is `root` or lies under it."""
    top = str(root)
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)
