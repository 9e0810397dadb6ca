"""`threadline serve --config FILE`: every flag of `threadline serve`, kept in a TOML file.

A key is its flag's name without the dashes (`--max-concurrent-runs` → `max_concurrent_runs`; a
repeatable flag's is plural, `mounts = [...]` for `--mount`), so the
file, the flags and `--help` share one list of settings, defaults and help texts (`ServerConfig`'s
fields). Besides those: `agents` (a table `NAME = "module:factory"`), `model`, `default_agent`,
`token_file` (the bearer token read from a file, so it is in neither the file nor the process list), and
the tables no flag can say: `[mounts.NAME]` (a mount with its actions, agents, shell, environment and
limits, instead of the list) and `[local_backend]` (the shell backend's limits), `server.mount_config`.
Relative paths are relative to the file. Flags override the file; a bad value names its line.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .config import ConfigError, Flag, flag_settings, setting_kind
from .mount_config import BACKEND_TABLE, mount_table
from .setting_files import CONFIG_FILE_LIMIT, TOKEN_FILE_LIMIT, read_setting_file

__all__ = ("FileSettings", "file_key", "load_file", "locate")

_EXTRA_KEYS = ("agents", "model", "default_agent", "token_file", BACKEND_TABLE)


def file_key(setting: dataclasses.Field[Any]) -> str:
    """The TOML key of a `ServerConfig` field: its flag's name without the dashes; a repeatable flag's
    key is its field's plural name (`--mount` → `mounts = [...]`)."""
    if setting_kind(setting.name) is tuple:
        return setting.name
    flag: Flag = setting.metadata["flag"]
    return flag.name.removeprefix("--").replace("-", "_")


_FIELDS = {file_key(setting): setting.name for setting in flag_settings()}
"""TOML key → `ServerConfig` field."""


@dataclass(frozen=True, slots=True)
class FileSettings:
    """What a configuration file sets; everything it leaves out keeps its flag's default."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    """`ServerConfig` field → value."""
    agents: dict[str, str] = field(default_factory=dict)
    """Served name → `module:factory`."""
    model: str | None = None
    default_agent: str | None = None
    text: str = ""
    """The file as read, to name a value's line."""

    def line_of(self, config_field: str | None) -> str:
        """`FILE:LINE: ` for the key that set `config_field` (a field, or a table value's TOML path such as
        `mounts.work.shell`), or `FILE: ` when the file did not set it."""
        if config_field is not None and "." in config_field:
            line = locate_path(self.text, config_field)
        else:
            key = next((k for k, name in _FIELDS.items() if name == config_field), None)
            line = locate(self.text, key) if key is not None and config_field in self.config else None
        return f"{self.path}:{line}: " if line is not None else f"{self.path}: "


def locate(text: str, key: str, table: str | None = None) -> int | None:
    """The 1-based line where `key` (in `[table]`, or at the top) is assigned, if it can be found."""
    current: str | None = None
    pattern = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"^\s*\[([^\[\]]+)\]\s*(?:#.*)?$", line)
        if header:
            current = header.group(1).strip()
            if table is None and current == key:  # the table itself, e.g. [agents]
                return number
        elif current == table and pattern.match(line):
            return number
    return None


def locate_path(text: str, path: str) -> int | None:
    """The line of the value at the TOML `path` (`mounts.work.limits.max_live_commands`): its key in its
    table, else the nearest enclosing key or table header that can be found."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        table, key = ".".join(parts[:cut]), parts[cut]
        line = locate(text, key, table) or locate(text, f"{table}.{key}")
        if line is not None:
            return line
    return locate(text, parts[0])


def load_file(path: Path) -> FileSettings:
    """Read and type-check a configuration file (ranges and combinations are `ServerConfig.check()`'s).

    Raises:
        ConfigError: `FILE:LINE: ...` for unreadable TOML, an unknown key or a value of the wrong type.
    """
    try:
        text = read_setting_file(path, CONFIG_FILE_LIMIT).decode("utf-8")
    except OSError as error:
        raise ConfigError(f"--config {path}: cannot read it ({error}).") from None
    except ValueError as error:  # not a regular file, too large, not UTF-8
        raise ConfigError(f"--config {path}: cannot read it: {error}.") from None
    data = _parsed(text, path)
    base = path.resolve().parent

    def fail(key: str, message: str, table: str | None = None) -> ConfigError:
        line = locate(text, key, table)
        return ConfigError(f"{path}:{line}: {message}" if line else f"{path}: {message}")

    config: dict[str, Any] = {}
    for key, value in data.items():
        if key == "mounts" and isinstance(value, dict):  # `[mounts.NAME]` tables instead of the list
            config["mount_tables"] = _mount_tables(value, base, text, path)
        elif key == BACKEND_TABLE:
            if not isinstance(value, dict):
                raise fail(key, f"{key} must be a table (max_live_commands, max_retained_bytes, ...).")
            config["local_backend"] = MappingProxyType(value)
        elif key in _FIELDS:
            name = _FIELDS[key]
            config[name] = _typed(key, value, setting_kind(name), base, fail)
        elif key not in _EXTRA_KEYS:
            known = ", ".join(sorted((*_FIELDS, *_EXTRA_KEYS)))
            raise fail(key, f"unknown setting {key[:80]!r} (known: {known}).")
    agents = data.get("agents", {})
    if not isinstance(agents, dict) or not all(isinstance(v, str) for v in agents.values()):
        raise fail("agents", 'agents must be a table of NAME = "module:factory".')
    for key in ("model", "default_agent"):
        if key in data and not isinstance(data[key], str):
            raise fail(key, f"{key} must be a string.")
    if "token_file" in data:
        config["token"] = _token(data["token_file"], base, fail)
    return FileSettings(
        path=path,
        config=config,
        agents=dict(agents),
        model=data.get("model"),
        default_agent=data.get("default_agent"),
        text=text,
    )


def _parsed(text: str, path: Path) -> dict[str, Any]:
    """The TOML document; a value nested deeper than the parser's recursion allows is refused at its line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}.") from None
    except RecursionError:
        line = _too_deep_line(text)
        raise ConfigError(
            f"{path}:{line}: a value is nested too deeply (arrays or tables in each other)."
        ) from None


def _too_deep_line(text: str) -> int:
    """The line of the value tomllib cannot parse without exhausting the stack: the first line whose
    prefix of the file does so (parsing runs front to back, so whether a prefix does is monotonic)."""
    lines = text.splitlines(keepends=True)
    low, high = 1, max(len(lines), 1)
    while low < high:
        middle = (low + high) // 2
        try:
            tomllib.loads("".join(lines[:middle]))
        except RecursionError:
            high = middle
            continue
        except tomllib.TOMLDecodeError:
            pass  # cut inside a value: the deep one is further on
        low = middle + 1
    return high


def _mount_tables(tables: dict[str, Any], base: Path, text: str, path: Path) -> tuple[Any, ...]:
    try:
        return tuple(mount_table(name, table, base) for name, table in tables.items())
    except ConfigError as error:
        line = locate_path(text, error.field or "mounts")
        raise ConfigError(
            f"{path}:{line}: {error}" if line else f"{path}: {error}", field=error.field
        ) from None


def _typed(key: str, value: object, kind: type, base: Path, fail: Callable[..., ConfigError]) -> Any:
    """`value` as the field's type, or a `ConfigError` naming the key's line."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise fail(key, f"{key} must be true or false, not {_shown(value)}.")
    if kind is tuple:  # repeatable flags: a list of strings
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return tuple(value)
        raise fail(key, f"{key} must be a list of strings.")
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is str and isinstance(value, str):
        return value
    if kind is Path and isinstance(value, str):
        return base / Path(value).expanduser()
    article = {int: "an integer", float: "a number", str: "a string", Path: "a path (a string)"}[kind]
    raise fail(key, f"{key} must be {article}, not {_shown(value)}.")


def _shown(value: object) -> str:
    """`value` as a message echoes it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}..."


def _token(value: object, base: Path, fail: Callable[..., ConfigError]) -> str:
    if not isinstance(value, str):
        raise fail("token_file", "token_file must be a path (a string).")
    path = base / Path(value).expanduser()
    try:
        token = read_setting_file(path, TOKEN_FILE_LIMIT).decode("utf-8").strip()
    except OSError as error:
        raise fail(
            "token_file", f"cannot read the token file {value[:200]!r} ({type(error).__name__})."
        ) from None
    except ValueError as error:  # not a regular file, too large, not UTF-8
        raise fail("token_file", f"cannot read the token file {value[:200]!r}: {error}.") from None
    if not token:
        raise fail("token_file", f"the token file {value[:200]!r} is empty.")
    return token
