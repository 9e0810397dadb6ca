"""Deferred batches: `DeferredToolRequests` / native `DeferredToolResults` / `DeferredToolResume` <-> proto.

Both directions of each message sit side by side. The wire form is repeated, never `map`, so order and
bytes survive every language; the core keeps dicts keyed by tool call ID, so decoding refuses an ID a
host answered twice (a dict would silently keep one answer). Everything else about a batch (IDs,
categories, sizes, correlation with the history) is the core's `preflight_resume`, not ours: decoding
only turns JSON text into values, naming the field whose JSON is unusable.

Normalisations (the wire has one spelling for each): an approval of `True` is sent as `ToolApproved()`
and decodes as such, `False` as `ToolDenied()`; an empty denial message is the native default; a call's
`args_json` that holds a JSON object decodes to a dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import ToolCallPart, ToolReturn, UserContent
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied
from threadline.v1 import deferred_pb2

from harness import DeferredToolCall, DeferredToolRequests, DeferredToolResume, RunError, child_requests
from harness.errors import ErrorCode
from harness.json_text import JsonTextError, args_json, canonical_json, dump_json, parse_json

from ..errors import at_field
from .children import child_request_to_pb

__all__ = (
    "requests_from_pb",
    "requests_to_pb",
    "results_from_pb",
    "results_to_pb",
    "resume_from_pb",
    "resume_to_pb",
)

_KIND_TO_PB: dict[str, deferred_pb2.DeferredKind.ValueType] = {
    "approval": deferred_pb2.DEFERRED_KIND_APPROVAL,
    "external": deferred_pb2.DEFERRED_KIND_EXTERNAL,
    "question": deferred_pb2.DEFERRED_KIND_QUESTION,
}

_CONTENT_ADAPTER: TypeAdapter[str | list[UserContent]] = TypeAdapter(str | list[UserContent])


def _fail(code: ErrorCode, message: str, field: str, **details: Any) -> RunError:
    return at_field(RunError(message, code=code, details=details), field)


def _loads(text: str, code: ErrorCode, what: str, field: str, **details: Any) -> Any:
    try:
        return parse_json(text)
    except JsonTextError as error:
        raise _fail(code, f"{what} is {error}.", field, **details) from None


def _object(text: str, code: ErrorCode, what: str, field: str, **details: Any) -> dict[str, Any]:
    value = _loads(text, code, what, field, **details)
    if not isinstance(value, dict):
        raise _fail(code, f"{what} must be a JSON object.", field, **details)
    return value


# --- requests ---------------------------------------------------------------------------------------


def requests_to_pb(requests: DeferredToolRequests) -> deferred_pb2.DeferredToolRequests:
    """Encode a pending batch: one `DeferredToolCall` per item, in native order, with its metadata (and a
    child request's typed copy)."""
    metadata = requests.metadata
    children = child_requests(requests)

    def item(
        call: DeferredToolCall, kind: deferred_pb2.DeferredKind.ValueType
    ) -> deferred_pb2.DeferredToolCall:
        part = call.model_call
        entry = metadata.get(part.tool_call_id)
        child = children.get(part.tool_call_id)
        return deferred_pb2.DeferredToolCall(
            tool_call_id=part.tool_call_id,
            tool_name=part.tool_name,
            args_json=args_json(part.args),
            target_identity=call.target_identity,
            kind=kind,
            metadata_json=canonical_json(entry) if entry is not None else "",
            child=child_request_to_pb(child) if child is not None else None,
        )

    return deferred_pb2.DeferredToolRequests(
        calls=[item(call, _KIND_TO_PB[requests.kind(call.tool_call_id)]) for call in requests.calls],
        approvals=[item(call, deferred_pb2.DEFERRED_KIND_APPROVAL) for call in requests.approvals],
    )


def requests_from_pb(
    msg: deferred_pb2.DeferredToolRequests, *, field: str = "spec.deferred_resume.requests"
) -> DeferredToolRequests:
    """Decode a batch a host sent back. Its rules (IDs, sizes, identities) are checked by the core on resume.

    Raises:
        RunError: `deferred_request_invalid` for unusable `args_json` or a `kind` that does not fit the
            item's category; `deferred_metadata_invalid` for `metadata_json` that is not a JSON object.
    """
    code = ErrorCode.DEFERRED_REQUEST_INVALID
    metadata: dict[str, dict[str, Any]] = {}
    kinds: dict[str, Any] = {}

    def item(pb: deferred_pb2.DeferredToolCall, where: str) -> DeferredToolCall:
        call_id = pb.tool_call_id
        args: str | dict[str, Any] | None = None
        if pb.args_json:
            value = _loads(pb.args_json, code, "args_json", f"{where}.args_json", tool_call_id=call_id)
            # An object becomes the dict the core compares; anything else stays text for the core to refuse.
            args = value if isinstance(value, dict) else pb.args_json
        if pb.metadata_json:
            metadata[call_id] = _object(
                pb.metadata_json,
                ErrorCode.DEFERRED_METADATA_INVALID,
                "metadata_json",
                f"{where}.metadata_json",
                tool_call_id=call_id,
            )
        part = ToolCallPart(tool_name=pb.tool_name, args=args, tool_call_id=call_id)
        return DeferredToolCall.of(part, pb.target_identity)

    calls = []
    for i, pb in enumerate(msg.calls):
        where = f"{field}.calls[{i}]"
        if pb.kind == deferred_pb2.DEFERRED_KIND_QUESTION:
            kinds[pb.tool_call_id] = "question"
        elif pb.kind != deferred_pb2.DEFERRED_KIND_EXTERNAL:
            raise _fail(
                code,
                "A deferred call must have kind EXTERNAL or QUESTION.",
                f"{where}.kind",
                tool_call_id=pb.tool_call_id,
            )
        calls.append(item(pb, where))
    approvals = []
    for i, pb in enumerate(msg.approvals):
        where = f"{field}.approvals[{i}]"
        if pb.kind != deferred_pb2.DEFERRED_KIND_APPROVAL:
            raise _fail(
                code,
                "A deferred approval must have kind APPROVAL.",
                f"{where}.kind",
                tool_call_id=pb.tool_call_id,
            )
        approvals.append(item(pb, where))
    return DeferredToolRequests(calls=calls, approvals=approvals, metadata=metadata, kinds=kinds)


# --- results ----------------------------------------------------------------------------------------


def _call_result_to_pb(call_id: str, value: Any) -> deferred_pb2.CallResult:
    if isinstance(value, ToolReturn):
        return deferred_pb2.CallResult(
            tool_call_id=call_id,
            tool_return=deferred_pb2.ToolReturnResult(
                return_value_json=dump_json(value.return_value),
                content_json=""
                if value.content is None
                else _CONTENT_ADAPTER.dump_json(
                    value.content if isinstance(value.content, str) else list(value.content)
                ).decode(),
                metadata_json="" if value.metadata is None else dump_json(value.metadata),
            ),
        )
    if isinstance(value, ToolFailed):
        return deferred_pb2.CallResult(
            tool_call_id=call_id, failed=deferred_pb2.ToolFailedResult(message=value.message)
        )
    if isinstance(value, ModelRetry):
        return deferred_pb2.CallResult(
            tool_call_id=call_id, retry=deferred_pb2.ToolRetryResult(message=value.message)
        )
    if getattr(value, "part_kind", None) == "retry-prompt":
        # The deprecated native `RetryPromptPart` answer means the same as `ModelRetry`.
        content = value.content
        message = content if isinstance(content, str) else dump_json(content)
        return deferred_pb2.CallResult(
            tool_call_id=call_id, retry=deferred_pb2.ToolRetryResult(message=message)
        )
    return deferred_pb2.CallResult(tool_call_id=call_id, value_json=dump_json(value))


def _approval_to_pb(call_id: str, value: Any) -> deferred_pb2.ApprovalResult:
    if value is True:
        value = ToolApproved()
    elif value is False:
        value = ToolDenied()
    if isinstance(value, ToolApproved):
        approved = deferred_pb2.ToolApproved()
        if value.override_args is not None:
            approved.override_args_json = dump_json(value.override_args)
        return deferred_pb2.ApprovalResult(tool_call_id=call_id, approved=approved)
    if isinstance(value, ToolDenied):
        return deferred_pb2.ApprovalResult(
            tool_call_id=call_id, denied=deferred_pb2.ToolDenied(message=value.message)
        )
    raise TypeError(f"Approval for {call_id!r} is a {type(value).__name__}, not bool/ToolApproved/ToolDenied")


def results_to_pb(results: DeferredToolResults) -> deferred_pb2.DeferredToolResults:
    """Encode native results in their dict order; per-call metadata and `answered_by` ride on each answer.

    Metadata or `answered_by` keyed by an ID with no answer has no place on the wire and is dropped.
    """
    metadata: Mapping[str, Any] = results.metadata
    answered_by: Mapping[str, str] = results.answered_by
    calls = []
    for call_id, value in results.calls.items():
        pb = _call_result_to_pb(call_id, value)
        _annotate(pb, metadata.get(call_id), answered_by.get(call_id))
        calls.append(pb)
    approvals = []
    for call_id, value in results.approvals.items():
        approval = _approval_to_pb(call_id, value)
        _annotate(approval, metadata.get(call_id), answered_by.get(call_id))
        approvals.append(approval)
    return deferred_pb2.DeferredToolResults(calls=calls, approvals=approvals)


def _annotate(
    pb: deferred_pb2.CallResult | deferred_pb2.ApprovalResult, metadata: Any, answered_by: str | None
) -> None:
    if metadata is not None:
        pb.metadata_json = canonical_json(metadata)
    if answered_by:
        pb.answered_by = answered_by


def results_from_pb(
    msg: deferred_pb2.DeferredToolResults, *, field: str = "spec.deferred_resume.results"
) -> DeferredToolResults:
    """Decode a host's answers into native results (the core checks them against the batch).

    Raises:
        RunError: `deferred_results_invalid` for an unset result, an ID answered twice, or unusable JSON;
            `deferred_approval_invalid` for an unset decision or override arguments that are not a JSON
            object; `deferred_metadata_invalid` for `metadata_json` that is not a JSON object.
    """
    invalid = ErrorCode.DEFERRED_RESULTS_INVALID
    results = DeferredToolResults()
    for i, pb in enumerate(msg.calls):
        where = f"{field}.calls[{i}]"
        call_id = pb.tool_call_id
        if call_id in results.calls:
            raise _fail(
                invalid,
                f"Tool call {call_id!r} is answered twice.",
                f"{where}.tool_call_id",
                tool_call_id=call_id,
            )
        which = pb.WhichOneof("result")
        value: Any
        if which == "value_json":
            value = _loads(pb.value_json, invalid, "value_json", f"{where}.value_json", tool_call_id=call_id)
        elif which == "tool_return":
            value = _tool_return_from_pb(pb.tool_return, f"{where}.tool_return", call_id)
        elif which == "failed":
            value = ToolFailed(pb.failed.message)
        elif which == "retry":
            value = ModelRetry(pb.retry.message)
        else:
            raise _fail(
                invalid, f"The result for tool call {call_id!r} is not set.", where, tool_call_id=call_id
            )
        results.calls[call_id] = value
        _read_annotations(results, pb, where)
    for i, ab in enumerate(msg.approvals):
        where = f"{field}.approvals[{i}]"
        call_id = ab.tool_call_id
        if call_id in results.approvals:
            raise _fail(
                invalid,
                f"Tool call {call_id!r} is answered twice.",
                f"{where}.tool_call_id",
                tool_call_id=call_id,
            )
        decision = ab.WhichOneof("decision")
        if decision == "approved":
            override = None
            if ab.approved.HasField("override_args_json"):
                override = _object(
                    ab.approved.override_args_json,
                    ErrorCode.DEFERRED_APPROVAL_INVALID,
                    "override_args_json",
                    f"{where}.approved.override_args_json",
                    tool_call_id=call_id,
                )
            results.approvals[call_id] = ToolApproved(override_args=override)
        elif decision == "denied":
            message = ab.denied.message
            results.approvals[call_id] = ToolDenied(message) if message else ToolDenied()
        else:
            raise _fail(
                ErrorCode.DEFERRED_APPROVAL_INVALID,
                f"The decision for tool call {call_id!r} is not set.",
                where,
                tool_call_id=call_id,
            )
        _read_annotations(results, ab, where)
    return results


def _tool_return_from_pb(pb: deferred_pb2.ToolReturnResult, where: str, call_id: str) -> ToolReturn[Any]:
    invalid = ErrorCode.DEFERRED_RESULTS_INVALID
    value = _loads(
        pb.return_value_json, invalid, "return_value_json", f"{where}.return_value_json", tool_call_id=call_id
    )
    content: str | list[UserContent] | None = None
    if pb.content_json:
        try:
            content = _CONTENT_ADAPTER.validate_json(pb.content_json)
        except ValidationError:
            raise _fail(
                invalid,
                "content_json is not a string or a list of user content.",
                f"{where}.content_json",
                tool_call_id=call_id,
            ) from None
    metadata = None
    if pb.metadata_json:
        metadata = _loads(
            pb.metadata_json, invalid, "metadata_json", f"{where}.metadata_json", tool_call_id=call_id
        )
    return ToolReturn(value, content=content, metadata=metadata)


def _read_annotations(
    results: DeferredToolResults, pb: deferred_pb2.CallResult | deferred_pb2.ApprovalResult, where: str
) -> None:
    call_id = pb.tool_call_id
    if pb.metadata_json:
        results.metadata[call_id] = _object(
            pb.metadata_json,
            ErrorCode.DEFERRED_METADATA_INVALID,
            "metadata_json",
            f"{where}.metadata_json",
            tool_call_id=call_id,
        )
    if pb.answered_by:
        results.answered_by[call_id] = pb.answered_by


# --- resume -----------------------------------------------------------------------------------------


def resume_to_pb(resume: DeferredToolResume) -> deferred_pb2.DeferredToolResume:
    """Encode a resume: the batch, the answers and the recovery flag."""
    return deferred_pb2.DeferredToolResume(
        requests=requests_to_pb(resume.requests),
        results=results_to_pb(resume.results),
        recovery=resume.recovery,
    )


def resume_from_pb(
    msg: deferred_pb2.DeferredToolResume, *, field: str = "spec.deferred_resume"
) -> DeferredToolResume:
    """Decode a host's resume; `preflight_resume` (run construction) then checks it against the state."""
    return DeferredToolResume(
        requests_from_pb(msg.requests, field=f"{field}.requests"),
        results_from_pb(msg.results, field=f"{field}.results"),
        msg.recovery,
    )
