"""Names and IDs of child runs: the edge-name pattern, derived child thread IDs, lineage checks (CHILDREN §2-§4).

Derived IDs make `fork()` deterministic and give a Host an admission key: the same inputs always name
the same child thread (`thread_` + 32 lowercase hex digits of SHA-256, the form `HarnessState.new()`
generates).
"""

from __future__ import annotations

import hashlib
import re

from ..context import ChildLineage
from ..errors import ErrorCode, RunError
from ..state import THREAD_ID_PATTERN

__all__ = (
    "NAME_PATTERN",
    "check_lineage",
    "host_child_thread_id",
    "inline_child_thread_id",
    "is_edge_name",
)

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
"""An edge (subagent) name."""

_THREAD_ID = re.compile(THREAD_ID_PATTERN)
_RUN_ID = re.compile(r"^run-[0-9a-f]{32}$")


def is_edge_name(value: object) -> bool:
    """Whether `value` is a valid edge name."""
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None


def _derived(*parts: str) -> str:
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"thread_{digest[:32]}"


def inline_child_thread_id(parent_thread_id: str, child_id: str) -> str:
    """The thread of inline child `child_id` of a parent thread (§3.2 step 2; re-derived by `fork`)."""
    return _derived("threadline.inline-child", parent_thread_id, child_id)


def host_child_thread_id(parent_thread_id: str, response_ordinal: int, tool_call_id: str) -> str:
    """The thread a Host-managed `delegate` call names: its admission key (§4.2)."""
    return _derived("threadline.host-child", parent_thread_id, str(response_ordinal), tool_call_id)


def _lineage_invalid(message: str, field: str) -> RunError:
    return RunError(message, code=ErrorCode.CHILD_LINEAGE_INVALID, details={"field": field})


def check_lineage(lineage: object, thread_id: str) -> ChildLineage | None:
    """Check `RunBindings.lineage` for a run on `thread_id` (§4.3).

    Raises:
        RunError: `child_lineage_invalid` (details `field`).
    """
    if lineage is None:
        return None
    if not isinstance(lineage, ChildLineage):
        raise _lineage_invalid("lineage must be a ChildLineage.", "lineage")
    parent = lineage.parent_thread_id
    if not isinstance(parent, str) or len(parent) > 256 or not _THREAD_ID.fullmatch(parent):
        raise _lineage_invalid("The lineage's parent thread ID is not a valid thread ID.", "parent_thread_id")
    if parent == thread_id:
        raise _lineage_invalid("A child run's parent thread must be another thread.", "parent_thread_id")
    if not isinstance(lineage.parent_run_id, str) or not _RUN_ID.fullmatch(lineage.parent_run_id):
        raise _lineage_invalid("The lineage's parent run ID must be run-<32 hex>.", "parent_run_id")
    for field in ("parent_tool_call_id", "parent_agent_instance_id", "delegation_id"):
        value = getattr(lineage, field)
        if not isinstance(value, str) or not value.strip() or len(value) > 256:
            raise _lineage_invalid(f"The lineage's {field} must be non-blank, at most 256 characters.", field)
    if not is_edge_name(lineage.subagent_name):
        raise _lineage_invalid("The lineage's subagent_name is not a valid edge name.", "subagent_name")
    return lineage
