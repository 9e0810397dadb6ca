"""The checks of a command start (ENVIRONMENT §10.2-§10.4), before anything is spawned.

Each failure is a tool-level error whose message names the rule, never the path, text or value given.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from ..json_text import JsonValue
from .config import ENV_KEY, LocalMountConfig, LocalMountLimits, is_inside
from .errors import EnvironmentToolError

__all__ = ("check_command", "environment", "execution_timeout", "working_directory")


def _invalid(message: str, hint: str, details: dict[str, JsonValue] | None = None) -> EnvironmentToolError:
    return EnvironmentToolError("environment_request_invalid", message, hint, details)


def check_command(command: str, limits: LocalMountLimits) -> None:
    if not isinstance(command, str) or not command.strip():
        raise _invalid("The command is empty.", "Pass a non-empty shell command.")
    _bounded_text(
        command,
        "The command",
        limits.max_command_bytes,
        too_large=("The command is too long.", "Put a long script in a file and run the file."),
    )


def _bounded_text(text: str, what: str, limit: int, *, too_large: tuple[str, str]) -> None:
    """No NUL, valid UTF-8, at most `limit` bytes (`too_large` is the message and hint past it)."""
    if "\0" in text:
        raise _invalid(f"{what} contains a NUL character.", "Remove NUL characters.")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise _invalid(f"{what} is not valid UTF-8 text.", "Pass it as text.") from None
    if size > limit:
        raise EnvironmentToolError("environment_too_large", *too_large, {"limit": limit, "size": size})


def working_directory(config: LocalMountConfig, cwd: str | None) -> int:
    """§10.2: join, canonicalise (symlinks, `..`), require inside the root, then open that directory.

    Returns a descriptor of the directory the check found, for the child to `fchdir` to (the caller
    closes it): the canonical path is opened one component at a time without following a link, so a
    symlink swapped in after the check fails the call instead of taking the command elsewhere.
    """
    if not os.path.isdir(config.root):
        raise EnvironmentToolError(
            "environment_unavailable",
            "The mount's root directory is gone.",
            "Ask the operator to restore it.",
        )
    if cwd is not None and (not isinstance(cwd, str) or "\0" in cwd):
        raise _invalid("cwd contains a NUL character.", "Pass a plain relative path.")
    try:
        base = config.workdir()
        target = base if cwd is None else os.path.realpath(os.path.join(base, cwd))
    except OSError:  # a link changed while it was being resolved
        raise _not_found() from None
    if not is_inside(config.root, target):
        raise EnvironmentToolError(
            "environment_path_outside_mount",
            "cwd resolves outside the mount.",
            "Pass a path relative to the mount's working directory that stays inside the mount.",
        )
    try:
        return _open_directory(target)
    except OSError:
        raise _not_found() from None


_DIRECTORY_FLAGS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
"""`O_PATH` where there is one (Linux): entering a directory needs search permission only."""


def _open_directory(canonical: str) -> int:
    """A descriptor of the directory at the canonical path, reached with no link followed.

    Raises:
        OSError: A component is missing, not a directory, or a symlink (it changed since it was
            resolved).
    """
    descriptor = os.open("/", _DIRECTORY_FLAGS)
    try:
        for name in canonical.split("/"):
            if name in ("", "."):
                continue
            if name == "..":  # a canonical path has none
                raise NotADirectoryError(canonical)
            parent, descriptor = descriptor, -1
            try:
                descriptor = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
            finally:
                os.close(parent)
    except BaseException:
        if descriptor >= 0:
            os.close(descriptor)
        raise
    return descriptor


def _not_found() -> EnvironmentToolError:
    return EnvironmentToolError(
        "environment_not_found",
        "cwd does not exist or is not a directory.",
        "Create it first, or omit cwd.",
    )


def environment(config: LocalMountConfig, overlay: Mapping[str, str] | None) -> dict[str, str]:
    """§10.3: the inherited names only, then the mount's `env`, then the call's overlay."""
    env = {name: os.environ[name] for name in config.inherit_env if name in os.environ}
    env.update(config.env)
    if not overlay:
        return env
    limits = config.limits
    if len(overlay) > limits.max_env_entries:
        raise EnvironmentToolError(
            "environment_too_large",
            "The environment has too many entries.",
            f"Pass at most {limits.max_env_entries} variables.",
            {"limit": limits.max_env_entries, "size": len(overlay)},
        )
    for key, value in overlay.items():
        if not isinstance(key, str) or not ENV_KEY.fullmatch(key):
            raise _invalid(
                "An environment variable name is invalid.", "Names match ^[A-Za-z_][A-Za-z0-9_]{0,127}$."
            )
        if not isinstance(value, str):
            raise _invalid("An environment value is not text.", "Pass values as strings.")
        _bounded_text(
            value,
            "An environment value",
            limits.max_env_value_bytes,
            too_large=("An environment value is too large.", "Pass large data through a file instead."),
        )
    env.update(overlay)
    return env


def execution_timeout(limits: LocalMountLimits, timeout: float | None) -> float:
    if timeout is None:
        return limits.max_wall_time_seconds
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= limits.max_wall_time_seconds
    ):
        raise _invalid(
            "The execution timeout is out of range.",
            f"Pass 0 < execution_timeout_seconds <= {limits.max_wall_time_seconds:g}.",
            {"maximum": limits.max_wall_time_seconds},
        )
    return float(timeout)
