"""Per-run bookkeeping of the delegation tools, kept on the run's `RunTooling` (one per parent run).

Nothing here outlives the run: which inline children are running in it, and which Host-managed child
requests its host-mode tools recorded (the suspension export reads them, §4.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.tools import RunContext

__all__ = ("HostRequestEntry", "RunChildren", "run_children")


@dataclass(frozen=True, slots=True)
class HostRequestEntry:
    """One recorded child request: the response it belongs to and its `threadline.child` object."""

    response_ordinal: int
    request: dict[str, Any]
    size: int
    """UTF-8 bytes of the request's canonical JSON (the 48 KiB per-response budget counts these)."""


@dataclass(eq=False)
class RunChildren:
    """What the delegation tools of one run share."""

    active: set[str] = field(default_factory=set)
    """Inline child IDs running now (reserved, not yet retained)."""
    host_requests: dict[str, HostRequestEntry] = field(default_factory=dict)
    """Child requests by tool call ID (the latest response's call wins when a model repeats an ID)."""


def run_children(ctx: RunContext[Any]) -> RunChildren:
    """The run's bookkeeping, created on first use (no `await` between the test and the set)."""
    tooling = getattr(ctx.deps, "_tooling", None)
    if tooling is None:
        raise RuntimeError("delegation tools run only inside a harness run")
    if tooling.children is None:
        tooling.children = RunChildren()
    children: RunChildren = tooling.children
    return children
