"""The batch a run suspends with (SPEC §2.7.3): native deferred requests become the harness's own.

Each call and approval carries the identity of the tool it called, captured from the run's latest
tool surface; a call a *function* tool deferred also records that tool's identity, which phase B of a
later resume checks. The batch passes the request checks of §2.7.4 step 4 before anyone sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolRequests as NativeDeferredToolRequests

from ._resume_checks import check_requests
from ._tooling import RunTooling
from .children.host import CHILD_METADATA_KEY, HOST_TOOL_IDENTITIES
from .deferred import DEFERRED_FUNCTION_ID_METADATA_KEY, DeferredToolCall, DeferredToolRequests
from .deferred import fail as _fail
from .errors import ErrorCode

__all__ = ("export_requests", "suspended_batch")

_HARNESS_KEYS = frozenset({DEFERRED_FUNCTION_ID_METADATA_KEY, CHILD_METADATA_KEY})
"""Request metadata keys only the harness writes; a tool's own values under them are dropped."""


async def suspended_batch(native: NativeDeferredToolRequests, tooling: RunTooling) -> DeferredToolRequests:
    """The harness batch for what a native run ended with, identities from `tooling`'s latest surface.

    Raises:
        RunError: `deferred_request_missing` for a call whose tool left the surface, or a step-4 code.
    """
    identities: dict[str, str] = {}
    function_ids: dict[str, str] = {}
    for call in (*native.calls, *native.approvals):
        identity = await tooling.identity(call.tool_name)
        if identity is None:
            _fail(
                ErrorCode.DEFERRED_REQUEST_MISSING,
                f"The deferred call {call.tool_call_id!r} has no tool identity.",
                tool_call_id=call.tool_call_id,
            )
        identities[call.tool_call_id] = identity
    child_requests: dict[str, dict[str, Any]] = {}
    host_requests = tooling.children.host_requests if tooling.children is not None else {}
    for call in native.calls:
        if tooling.tool_kind(call.tool_name) in ("function", "unapproved"):
            function_ids[call.tool_call_id] = identities[call.tool_call_id]
        entry = host_requests.get(call.tool_call_id)
        if entry is not None and identities[call.tool_call_id] in HOST_TOOL_IDENTITIES:
            child_requests[call.tool_call_id] = entry.request
    return export_requests(
        native, identities=identities, function_ids=function_ids, child_requests=child_requests
    )


def export_requests(
    native_requests: NativeDeferredToolRequests,
    identities: Mapping[str, str],
    function_ids: Mapping[str, str],
    child_requests: Mapping[str, Mapping[str, Any]] | None = None,
) -> DeferredToolRequests:
    """The batch a run suspends with (§2.7.3), checked like a resume's requests (§2.7.4 step 4).

    Args:
        native_requests: What the native run ended with.
        identities: `target_identity` of the called tool, by call ID (every item needs one).
        function_ids: For calls deferred by a *function* tool (`CallDeferred` raised in its body), that
            tool's identity, by call ID. Recorded as `DEFERRED_FUNCTION_ID_METADATA_KEY` on calls only;
            entries for approvals are ignored.
        child_requests: The `threadline.child` object of each child request a host-mode tool recorded,
            by call ID (CHILDREN §4.2). The key is the harness's own: what a tool passed under it is
            dropped, like `DEFERRED_FUNCTION_ID_METADATA_KEY`.

    Returns:
        A detached, checked batch in native order.

    Raises:
        RunError: `deferred_request_missing` (`{"tool_call_id"}`) for an item without an identity, or
            any step-4 code.
    """
    approval_ids = {part.tool_call_id for part in native_requests.approvals}

    def wrap(part: ToolCallPart) -> DeferredToolCall:
        identity = identities.get(part.tool_call_id)
        if identity is None:
            _fail(
                ErrorCode.DEFERRED_REQUEST_MISSING,
                f"No tool identity was captured for deferred call {part.tool_call_id!r}.",
                tool_call_id=part.tool_call_id,
            )
        return DeferredToolCall.of(part, identity)

    calls = [wrap(part) for part in native_requests.calls]
    approvals = [wrap(part) for part in native_requests.approvals]
    metadata: dict[str, dict[str, Any]] = {}
    for item in (*calls, *approvals):
        call_id = item.tool_call_id
        # The key is the harness's: a value a tool put there itself would fake a function identity.
        merged = {
            key: value
            for key, value in (native_requests.metadata.get(call_id) or {}).items()
            if key not in _HARNESS_KEYS
        }
        if call_id not in approval_ids and call_id in function_ids:
            merged[DEFERRED_FUNCTION_ID_METADATA_KEY] = function_ids[call_id]
        if call_id not in approval_ids and child_requests and call_id in child_requests:
            merged[CHILD_METADATA_KEY] = dict(child_requests[call_id])
        if merged:
            metadata[call_id] = merged
    kinds: dict[str, Literal["question"]] = {
        key: "question"
        for key, value in native_requests._kinds.items()  # the only native access to question kinds
        if value == "question"
    }
    requests = DeferredToolRequests(calls=calls, approvals=approvals, metadata=metadata, kinds=kinds)
    check_requests(requests)
    return requests
