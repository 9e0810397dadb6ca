"""Run-local shell environments (ENVIRONMENT): mounts, the local process backend, captured output.

The backend (`LocalProcessBackend`) owns native processes for the life of the server or embedding
program; a run sees them only through the mounts bound to it (`backend.mount(...)` into
`RunBindings.mounts`), the tools `DynamicEnvironmentCapability` offers, and references of its own.
The local provider isolates nothing: commands run as the process's user (§10.1).
"""

from .adapter import EnvironmentMount
from .backend import Command, LocalProcessBackend, Phase, Scope, SignalName, Status
from .capability import DynamicEnvironmentCapability
from .capture import CaptureWindow, Page, read_pair, tail_pair
from .config import MOUNT_NAME, LimitsConflict, LocalBackendLimits, LocalMountConfig, LocalMountLimits
from .errors import EnvironmentToolError
from .run import EnvironmentView, MountView
from .state import PROVIDER_KEY, READABLE_VERSIONS
from .surface import ACTIONS, SHELL_ACTIONS, SHELL_TOOLS, offered_tools

__all__ = (
    "ACTIONS",
    "MOUNT_NAME",
    "PROVIDER_KEY",
    "READABLE_VERSIONS",
    "SHELL_ACTIONS",
    "SHELL_TOOLS",
    "CaptureWindow",
    "Command",
    "DynamicEnvironmentCapability",
    "EnvironmentMount",
    "EnvironmentToolError",
    "EnvironmentView",
    "LimitsConflict",
    "LocalBackendLimits",
    "LocalMountConfig",
    "LocalMountLimits",
    "LocalProcessBackend",
    "MountView",
    "Page",
    "Phase",
    "Scope",
    "SignalName",
    "Status",
    "offered_tools",
    "read_pair",
    "tail_pair",
)
