"""Child runs on the wire (CHILDREN §5): lineage both ways, the typed child request, inline delegations.

The typed forms are conveniences derived from what the core already carries: a child request stays
in the call's `metadata_json` (the server never reads `DeferredToolCall.child` back), and an inline
delegation is the core's `inline_delegation` extension event in a case of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadline.v1 import deferred_pb2, events_pb2

from harness.children import ChildLineage, ChildRequest
from harness.children.definitions import limits_to_jsonable
from harness.json_text import canonical_json

__all__ = (
    "child_request_to_pb",
    "fill_delegation",
    "lineage_from_pb",
    "lineage_to_pb",
)

_ACTIONS = {"start": deferred_pb2.CHILD_ACTION_START, "continue": deferred_pb2.CHILD_ACTION_CONTINUE}
_LINEAGE_FIELDS = (
    "parent_thread_id",
    "parent_run_id",
    "parent_tool_call_id",
    "parent_agent_instance_id",
    "subagent_name",
    "delegation_id",
)


def lineage_from_pb(msg: deferred_pb2.ChildLineage) -> ChildLineage:
    """`RunSpec.lineage` as the core's lineage (checked when the run is built: `child_lineage_invalid`)."""
    return ChildLineage(**{name: getattr(msg, name) for name in _LINEAGE_FIELDS})


def lineage_to_pb(lineage: ChildLineage, *, parent_agent: str = "") -> deferred_pb2.ChildLineage:
    """The core's lineage, with the wire-only `parent_agent` the request named."""
    return deferred_pb2.ChildLineage(
        **{name: getattr(lineage, name) for name in _LINEAGE_FIELDS}, parent_agent=parent_agent
    )


def child_request_to_pb(request: ChildRequest) -> deferred_pb2.ChildRequest:
    """`DeferredToolCall.child`: the request, with `parent` ready to copy into the child's `RunSpec.lineage`."""
    parent = request.lineage()
    return deferred_pb2.ChildRequest(
        action=_ACTIONS[request.action],
        subagent_name=request.subagent_name,
        agent=request.agent,
        child_definition_id=request.child_definition_id,
        thread_id=request.thread_id,
        input=request.input,
        parent=lineage_to_pb(parent, parent_agent=request.parent.get("agent", "")),
        usage_limits_json=canonical_json(limits_to_jsonable(request.usage_limits))
        if request.usage_limits is not None
        else "",
    )


def fill_delegation(msg: events_pb2.InlineDelegation, payload: Mapping[str, Any]) -> None:
    """An `inline_delegation` payload into its typed case (unknown keys are the core's to add later)."""
    for name in (
        "invocation_id",
        "action",
        "child_instance_id",
        "subagent",
        "status",
        "parent_run_id",
        "parent_agent_instance_id",
        "parent_tool_call_id",
        "child_run_id",
    ):
        value = payload.get(name)
        if isinstance(value, str):
            setattr(msg, name, value)
