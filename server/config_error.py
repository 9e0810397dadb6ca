"""The one error of the server's settings, shared by the flags, the file and the mounts' checks."""

from __future__ import annotations

__all__ = ("ConfigError",)


class ConfigError(Exception):
    """The settings cannot be served as given; the message tells the user what to change."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        """The `ServerConfig` field at fault, or the TOML path of a table's value (`mounts.work.shell`),
        when one is: a configuration file then names its line."""
