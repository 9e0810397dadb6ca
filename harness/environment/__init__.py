"""Run-local shell environments (ENVIRONMENT): mounts, the local process backend, captured output.

The backend (`LocalProcessBackend`) owns native processes for the life of the server; runs only look
at them through their own references. The local provider isolates nothing: commands run as the
server's user (§10.1).
"""

from .backend import Command, LocalProcessBackend, Phase, Scope, SignalName, Status
from .capture import CaptureWindow, Page, read_pair, tail_pair
from .config import LocalBackendLimits, LocalMountConfig, LocalMountLimits
from .errors import EnvironmentToolError

__all__ = (
    "CaptureWindow",
    "Command",
    "EnvironmentToolError",
    "LocalBackendLimits",
    "LocalMountConfig",
    "LocalMountLimits",
    "LocalProcessBackend",
    "Page",
    "Phase",
    "Scope",
    "SignalName",
    "Status",
    "read_pair",
    "tail_pair",
)
