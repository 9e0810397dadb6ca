"""Threadline's harness core: portable thread state, runs and streams, deferred tools, recovery.

Pure Python on pydantic-ai; no gRPC. SPEC.md (shared) is the behaviour this package implements.
"""

from ._loading import (
    CapabilityStatePart,
    EnvironmentStatePart,
    StoredRefPart,
    check_schema_version,
    load_state,
    load_state_parts,
)
from ._recovery_input import ToolRecovery
from ._resume_checks import check_pending, check_remaining
from ._run import HarnessRunStream
from ._tooling import INTERRUPTED_TOOL_RESULT, NOT_EXECUTED_TOOL_RESULT
from .agent import ExecutableAgent
from .barrier import RunBarrier
from .children import (
    ChildLineage,
    ChildRequest,
    SubagentContext,
    SubagentDefinition,
    SubagentIdentity,
    child_requests,
)
from .client_tools import CLIENT_TOOLSET_ID, ClientTool, client_tools_capability
from .context import AgentContext, InstanceIdentity, RunBindings
from .deferred import UNANSWERED_APPROVAL_MESSAGE, DeferredToolCall, DeferredToolRequests, DeferredToolResume
from .errors import (
    DefinitionError,
    ErrorCode,
    FailureCode,
    HarnessError,
    InputError,
    RunCleanupError,
    RunError,
    StateError,
    ThreadError,
)
from .events import (
    HarnessCheckpointEvent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    RunItem,
)
from .json_text import JsonValue
from .results import HarnessRunResult, RunStatus, SafeFailure
from .run_request import RunRequest
from .state import AgentContextStateSnapshot, CapabilityState, EnvironmentState, HarnessState, StoredRef

__all__ = [
    "CLIENT_TOOLSET_ID",
    "INTERRUPTED_TOOL_RESULT",
    "NOT_EXECUTED_TOOL_RESULT",
    "UNANSWERED_APPROVAL_MESSAGE",
    "AgentContext",
    "AgentContextStateSnapshot",
    "CapabilityState",
    "CapabilityStatePart",
    "ChildLineage",
    "ChildRequest",
    "ClientTool",
    "DeferredToolCall",
    "DeferredToolRequests",
    "DeferredToolResume",
    "DefinitionError",
    "EnvironmentState",
    "EnvironmentStatePart",
    "ErrorCode",
    "ExecutableAgent",
    "FailureCode",
    "HarnessCheckpointEvent",
    "HarnessError",
    "HarnessEvent",
    "HarnessExtensionEvent",
    "HarnessRunResult",
    "HarnessRunResultEvent",
    "HarnessRunStream",
    "HarnessState",
    "InputError",
    "InstanceIdentity",
    "JsonValue",
    "RunBarrier",
    "RunBindings",
    "RunCleanupError",
    "RunError",
    "RunItem",
    "RunRequest",
    "RunStatus",
    "SafeFailure",
    "StateError",
    "StoredRef",
    "StoredRefPart",
    "SubagentContext",
    "SubagentDefinition",
    "SubagentIdentity",
    "ThreadError",
    "ToolRecovery",
    "check_pending",
    "check_remaining",
    "check_schema_version",
    "child_requests",
    "client_tools_capability",
    "load_state",
    "load_state_parts",
]
