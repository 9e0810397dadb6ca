"""Declaring tools whose calls may be replayed after a crash left their result unknown (SPEC §1.8, §2.6).

The declaration is metadata on the tool definition, read from the freshly prepared definitions of a
run, never from saved messages. It never wraps execution.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar, overload

from pydantic_ai import Tool
from pydantic_ai.tools import ToolDefinition

__all__ = ("RECOVERY_RETRY_SAFE_METADATA_KEY", "is_recovery_retryable", "recovery_retryable")

RECOVERY_RETRY_SAFE_METADATA_KEY = "threadline.recovery_retry_safe"
"""Tool-definition metadata key; only the boolean `True` marks a tool recovery-retryable."""

DepsT = TypeVar("DepsT")


@overload
def recovery_retryable(tool: Tool[DepsT], /) -> Tool[DepsT]: ...
@overload
def recovery_retryable(tool: Callable[..., Any], /) -> Tool[Any]: ...
def recovery_retryable(tool: Tool[Any] | Callable[..., Any], /) -> Tool[Any]:
    """Declare that repeating this tool's operation is acceptable even when an earlier result is unknown.

    Use as a decorator on a function, or call it on a bound method or a native `Tool`. A `Tool` is
    shallow-copied with every setting kept and the key merged into its metadata; the original is
    not changed.

    Returns:
        A native `Tool` whose definition carries `RECOVERY_RETRY_SAFE_METADATA_KEY: True`.
    """
    if isinstance(tool, Tool):
        marked = copy.copy(tool)
    elif callable(tool):
        marked = Tool(tool)
    else:
        raise TypeError(f"recovery_retryable() takes a function or a Tool, not {type(tool).__name__}")
    marked.metadata = {**(marked.metadata or {}), RECOVERY_RETRY_SAFE_METADATA_KEY: True}
    return marked


def is_recovery_retryable(tool_def: ToolDefinition) -> bool:
    """Whether a prepared definition is marked (`is True`: `1` or `"yes"` do not count)."""
    metadata = tool_def.metadata or {}
    return metadata.get(RECOVERY_RETRY_SAFE_METADATA_KEY) is True
