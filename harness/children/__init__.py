"""Child runs (subagents): inline children the harness runs, Host-managed children a Host runs (CHILDREN.md).

- Declaring: `SubagentDefinition` edges on `ExecutableAgent(..., subagents=[...], definition_id=...)`;
  `child_usage_limits`, `child_identity`, `child_input` derive what a child run gets from its edge.
- Inline (`mode="inline"`): `delegate` / `resume_subagent` run the child inside the parent's tool call
  and retain its state in the parent's `a13n.subagents` registry (`registry`).
- Host-managed (`mode="host"`): the same tool names defer; `child_requests(batch)` gives
  the typed `ChildRequest`s a Host runs and answers (`ChildRequest.answer`).
"""

from ..context import ChildLineage
from .definitions import (
    SubagentContext,
    SubagentDefinition,
    SubagentIdentity,
    SubagentMode,
    child_identity,
    child_input,
    child_usage_limits,
)
from .host import (
    CHILD_METADATA_KEY,
    HOST_TOOLSET_ID,
    ChildRequest,
    HostDelegationCapability,
    child_requests,
)
from .inline import INLINE_TOOLSET_ID, InlineDelegationCapability, Messages
from .names import host_child_thread_id, inline_child_thread_id
from .registry import REGISTRY_ID, REGISTRY_VERSION

__all__ = [
    "CHILD_METADATA_KEY",
    "HOST_TOOLSET_ID",
    "INLINE_TOOLSET_ID",
    "REGISTRY_ID",
    "REGISTRY_VERSION",
    "ChildLineage",
    "ChildRequest",
    "HostDelegationCapability",
    "InlineDelegationCapability",
    "Messages",
    "SubagentContext",
    "SubagentDefinition",
    "SubagentIdentity",
    "SubagentMode",
    "child_identity",
    "child_input",
    "child_requests",
    "child_usage_limits",
    "host_child_thread_id",
    "inline_child_thread_id",
]
