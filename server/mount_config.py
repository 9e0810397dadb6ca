"""A shell environment as the server configures it: `--mount NAME=local:ROOT`, or a `[mounts.NAME]`
table of the configuration file with its actions, agents, shell, environment and limits (ENVIRONMENT
§10.4, §12.1; docs/environment.md "Configuration file").

Definitions are plain values until `local_config()` checks them against the machine (the root exists,
the shell runs, the limits are in range, and possible together and with the backend's), so a file is
read once and checked where every other setting is (`ServerConfig.check()`). That check builds each
mount's `LocalMountConfig` once, into `CheckedMounts`, which the CLI and the server pass on as it is.
An error's `field` is the TOML path of the value at fault (`mounts.work.limits.max_live_commands`), so
a configuration file can name its line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from harness.environment import (
    ACTIONS,
    MOUNT_NAME,
    LimitsConflict,
    LocalBackendLimits,
    LocalMountConfig,
    LocalMountLimits,
)

from .config_error import ConfigError

__all__ = (
    "BACKEND_TABLE",
    "CheckedMount",
    "CheckedMounts",
    "MountDefinition",
    "backend_limits",
    "check_agents",
    "check_unique",
    "mount_flag",
    "mount_table",
)

BACKEND_TABLE = "local_backend"
"""The file's table of the limits the local backend applies across all mounts."""

_DEFAULT_BACKEND = LocalBackendLimits()

_OPTIONS = ("working_directory", "shell", "env", "inherit_env", "limits")
"""`LocalMountConfig`'s settings besides its root, as a table's keys."""
_KEYS = ("root", "actions", "agents", *_OPTIONS)


@dataclass(frozen=True, slots=True)
class MountDefinition:
    """One configured mount: its name, root, what it allows and for whom; checked by `local_config()`."""

    name: str
    root: Path
    """Absolute (the file's relative roots are resolved against the file)."""
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # TOML values
    """The table's `LocalMountConfig` keywords besides the root, as the file wrote them (checked by
    `local_config()`, once): `working_directory`, `shell`, `env`, `inherit_env`, `limits` (a table of
    `LocalMountLimits`)."""
    actions: tuple[str, ...] = ACTIONS
    """What commands on it may do (all nine by default; without the process ones, foreground only)."""
    agents: tuple[str, ...] | None = None
    """The served agents whose runs get it; `None`: every agent."""
    flag: bool = False
    """Given as `--mount` (its messages name the flag), else a table of the file (or of a program)."""

    def serves(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents

    def local_config(self, backend: LocalBackendLimits = _DEFAULT_BACKEND) -> LocalMountConfig:
        """The provider's configuration, checked against this machine and the `backend` it runs on.

        Raises:
            ConfigError: The root is not an existing directory, an option is out of range, or the
                limits rule each other out (`field`: the TOML path of the value; of the backend's
                limit when the mount's table does not set its own).
        """
        if not self.root.is_dir():
            raise ConfigError(
                f"{self._named()}: the root {str(self.root)[:200]!r} is not an existing directory.",
                field=self._field("root"),
            )
        options = dict(self.options)
        if isinstance(limits := options.get("limits"), Mapping):
            try:  # strict: `true` is no count, `2.5` no byte size
                options["limits"] = LocalMountLimits.model_validate(dict(limits), strict=True)
            except ValidationError as error:
                raise self._refusal(error, "limits") from None
        try:
            config = LocalMountConfig(self.root, **options)
        except ValidationError as error:
            raise self._refusal(error) from None
        try:
            backend.check_mount(config.limits)
        except LimitsConflict as error:
            raise self._conflict(error, limits) from None
        return config

    def _conflict(self, error: LimitsConflict, limits: object) -> ConfigError:
        """The mount's limit when its table sets it, else the backend table's."""
        if isinstance(limits, Mapping) and error.mount_limit in limits:
            where = f"limits.{error.mount_limit}"
            return ConfigError(f"{self._named()}: {where}: {error}.", field=self._field(where))
        return ConfigError(
            f"{BACKEND_TABLE}: {error.backend_limit}: {error} (mount {self.name}).",
            field=f"{BACKEND_TABLE}.{error.backend_limit}",
        )

    def _refusal(self, error: ValidationError, within: str = "") -> ConfigError:
        where, message = _first(error, within)
        return ConfigError(
            f"{self._named()}: {where}: {message}." if where else f"{self._named()}: {message}.",
            field=self._field(where),
        )

    @property
    def table(self) -> str:
        """Its TOML path in a configuration file."""
        return f"mounts.{self.name}"

    def _named(self) -> str:
        return f"--mount {self.name}" if self.flag else self.table

    def _field(self, key: str) -> str:
        if self.flag:
            return "mounts"
        return f"{self.table}.{key}" if key else self.table


@dataclass(frozen=True, slots=True)
class CheckedMount:
    """A definition with its provider configuration, checked (`MountDefinition.local_config()`)."""

    definition: MountDefinition
    config: LocalMountConfig


@dataclass(frozen=True, slots=True)
class CheckedMounts:
    """Every configured mount, checked once against this machine and the backend, and the backend's
    limits: what `ServerConfig.check()` returns and `ServerMounts` serves, without checking again."""

    mounts: tuple[CheckedMount, ...] = ()
    backend: LocalBackendLimits = _DEFAULT_BACKEND

    @property
    def definitions(self) -> tuple[MountDefinition, ...]:
        return tuple(mount.definition for mount in self.mounts)


def mount_flag(spec: str) -> MountDefinition:
    """`NAME=local:ROOT` as given to `--mount` (every action, every agent, the §10.4 defaults).

    Raises:
        ConfigError: Not that form, a bad name, or a relative root.
    """
    name, sep, target = spec.partition("=")
    provider, colon, root_text = target.partition(":")
    if not sep or not colon or provider != "local" or not root_text:
        raise ConfigError(
            f"--mount {spec[:200]!r}: expected NAME=local:ROOT, e.g. work=local:/srv/work.", field="mounts"
        )
    _check_name(name, f"--mount {spec[:200]!r}", "mounts")
    root = Path(root_text).expanduser()
    if not root.is_absolute():
        raise ConfigError(
            f"--mount {name}: the root {root_text[:200]!r} is not an absolute path.", field="mounts"
        )
    return MountDefinition(name, root, flag=True)


def mount_table(name: str, table: object, base: Path) -> MountDefinition:
    """A `[mounts.NAME]` table: `root` (relative to `base`, the file's directory), optional `actions`,
    `agents` and the `LocalMountConfig` options; their values are checked by `local_config()`.

    Raises:
        ConfigError: A key or a value of the wrong kind (`field`: its TOML path).
    """
    path = f"mounts.{name}"
    _check_name(name, f"[{path}]", path)
    if not isinstance(table, dict):
        raise ConfigError(f"{path} must be a table (root, actions, agents, ...).", field=path)
    for key in table:
        if key not in _KEYS:
            raise ConfigError(
                f"{path}: unknown key {key[:80]!r} (known: {', '.join(_KEYS)}).", field=f"{path}.{key}"
            )
    root = table.get("root")
    if not isinstance(root, str) or not root:
        raise ConfigError(f"{path}: root must be the mount's directory (a string).", field=f"{path}.root")
    actions = _names(table, "actions", path)
    if actions is not None:
        unknown = [action for action in actions if action not in ACTIONS]
        if unknown or len(set(actions)) != len(actions):
            raise ConfigError(
                f"{path}: actions must name each at most once, from: {', '.join(ACTIONS)}"
                + (f" (not {unknown[0][:80]!r})." if unknown else "."),
                field=f"{path}.actions",
            )
    return MountDefinition(
        name,
        base / Path(root).expanduser(),
        options=MappingProxyType({key: table[key] for key in _OPTIONS if key in table}),
        actions=ACTIONS if actions is None else actions,
        agents=_names(table, "agents", path),
    )


def backend_limits(values: Mapping[str, Any]) -> LocalBackendLimits:
    """The `[local_backend]` table as the backend's limits.

    Raises:
        ConfigError: An unknown key or a value out of range (`field`: its TOML path).
    """
    try:
        return LocalBackendLimits.model_validate(dict(values), strict=True)
    except ValidationError as error:
        where, message = _first(error)
        raise ConfigError(f"{BACKEND_TABLE}: {where}: {message}.", field=f"{BACKEND_TABLE}.{where}") from None


def _first(error: ValidationError, within: str = "") -> tuple[str, str]:
    """The first problem pydantic found: the dotted path of its value under `within` (empty: the whole)
    and its words."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in (within, *first["loc"]) if part != "")
    return where, first["msg"].removeprefix("Value error, ")


def _check_name(name: str, named: str, path: str) -> None:
    if not MOUNT_NAME.fullmatch(name):
        raise ConfigError(
            f"{named}: the name must match {MOUNT_NAME.pattern} (lower case, digits, '-').", field=path
        )


def _names(table: Mapping[str, object], key: str, path: str) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: {key} must be a non-empty list of strings.", field=f"{path}.{key}")
    return tuple(value)


def check_agents(definitions: Sequence[MountDefinition], served: Sequence[str]) -> None:
    """Raises `ConfigError` when a mount names an agent the server does not serve."""
    for definition in definitions:
        unknown = [agent for agent in definition.agents or () if agent not in served]
        if unknown:
            raise ConfigError(
                f"{definition.table}: agents: {unknown[0][:80]!r} is not a served agent "
                f"(served: {', '.join(served)[:400]}).",
                field=f"{definition.table}.agents",
            )


def check_unique(definitions: Sequence[MountDefinition]) -> None:
    """Raises `ConfigError` when two mounts share a name (a flag's and a table's alike)."""
    seen: set[str] = set()
    for definition in definitions:
        if definition.name in seen:
            raise ConfigError(f"--mount: the name {definition.name!r} is given twice.", field="mounts")
        seen.add(definition.name)
