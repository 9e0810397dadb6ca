"""Phase A of a deferred resume (SPEC §2.7.4 steps 1-9): every check before a run starts.

`preflight_resume` is the one entry point a run uses; `check_remaining` answers what a Host publishes
beside a checkpoint (`remaining()`, checked the same way). The first failing check wins and raises
`RunError` with its code. The checks read the stored values through `deferred`'s package-private
accessors: nothing is copied, nothing is changed.

Forged IDs (ours): a `recovery=True` batch is filtered by `remaining` (step 3), which silently drops an
item whose call the history's last response does not hold. A batch superseded by a later response is
dropped that way on purpose, but an item whose ID no response of the history ever made is a forgery, and
is refused as a normal resume refuses it (`deferred_request_missing`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    ToolCallPart,
    ToolReturn,
)
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied

from . import _history
from .children.host import CHILD_METADATA_KEY, HOST_TOOL_IDENTITIES, check_child_answer
from .deferred import (
    DEFERRED_FUNCTION_ID_METADATA_KEY,
    MAX_DEFERRED_ITEMS,
    MAX_DEFERRED_METADATA_BYTES,
    MAX_TARGET_IDENTITY_CHARS,
    NO_PENDING_RESPONSE_MESSAGE,
    DeferredCategory,
    DeferredToolCall,
    DeferredToolRequests,
    DeferredToolResume,
    item_id,
    stored_items,
    stored_kinds,
    stored_metadata,
    stored_resume,
)
from .deferred import (
    fail as _fail,
)
from .errors import ErrorCode
from .json_text import JsonValue, NotFiniteJson, canonical_json, check_finite_json

__all__ = ("check_remaining", "check_requests", "preflight_resume")


def _check_metadata(metadata: object, pending: set[str], *, approval_ids: set[str], what: str) -> None:
    code = ErrorCode.DEFERRED_METADATA_INVALID
    if not isinstance(metadata, dict):
        _fail(code, f"{what} metadata must be a dict keyed by tool call ID.")
    for key, value in metadata.items():
        if not isinstance(key, str) or key not in pending:
            _fail(
                code,
                f"{what} metadata is keyed by a non-pending tool call ID.",
                tool_call_id=_jsonable_key(key),
            )
        if not isinstance(value, dict):
            _fail(code, f"{what} metadata for {key!r} must be a JSON object.", tool_call_id=key)
        try:
            check_finite_json(value, where=f"$.metadata.{key}")
        except NotFiniteJson as error:
            _fail(code, f"{what} metadata for {key!r} is not finite JSON: {error}", tool_call_id=key)
        if what == "Request":
            # Phase B trusts the key, so it must mean what §2.7.3 says: a string, on calls only.
            function_id = value.get(DEFERRED_FUNCTION_ID_METADATA_KEY)
            if DEFERRED_FUNCTION_ID_METADATA_KEY in value and (
                key in approval_ids or not isinstance(function_id, str)
            ):
                _fail(
                    code,
                    f"Request metadata for {key!r} has an invalid deferred function ID.",
                    tool_call_id=key,
                )
    size = len(canonical_json(check_finite_json(metadata)).encode())
    if size > MAX_DEFERRED_METADATA_BYTES:
        _fail(code, f"{what} metadata is too large.", size=size, limit=MAX_DEFERRED_METADATA_BYTES)


def _jsonable_key(key: object) -> JsonValue:
    return key if isinstance(key, str) else repr(key)


def check_requests(requests: DeferredToolRequests) -> None:
    """§2.7.4 step 4, in the listed order."""
    calls, approvals = stored_items(requests)
    groups: tuple[tuple[DeferredCategory, tuple[DeferredToolCall, ...]], ...] = (
        ("calls", calls),
        ("approvals", approvals),
    )
    # Well-formed items.
    for _, group in groups:
        for item in group:
            if (
                not isinstance(item, DeferredToolCall)
                or not isinstance(item.model_call, ToolCallPart)
                or not isinstance(item.target_call, ToolCallPart)
                or not isinstance(item.model_call.tool_call_id, str)
            ):
                _fail(
                    ErrorCode.DEFERRED_REQUEST_INVALID,
                    "A deferred item is not a DeferredToolCall of ToolCallParts.",
                )
    # IDs: unique and non-blank within a category, disjoint across categories.
    seen: dict[DeferredCategory, set[str]] = {"calls": set(), "approvals": set()}
    for category, group in groups:
        for item in group:
            call_id = item_id(item)
            if not call_id.strip() or call_id in seen[category]:
                _fail(
                    ErrorCode.DEFERRED_REQUEST_DUPLICATE,
                    f"Deferred {category} hold a blank or repeated tool call ID.",
                    category=category,
                )
            seen[category].add(call_id)
    for call_id in seen["calls"] & seen["approvals"]:
        _fail(
            ErrorCode.DEFERRED_REQUEST_CATEGORY_OVERLAP,
            f"Tool call {call_id!r} is both a deferred call and an approval.",
            tool_call_id=call_id,
        )
    count = len(calls) + len(approvals)
    if count == 0:
        _fail(ErrorCode.DEFERRED_REQUESTS_EMPTY, "The deferred requests hold no items.")
    if count > MAX_DEFERRED_ITEMS:
        _fail(
            ErrorCode.DEFERRED_REQUESTS_TOO_LARGE,
            f"The deferred requests hold {count} items; at most {MAX_DEFERRED_ITEMS} are allowed.",
            count=count,
            limit=MAX_DEFERRED_ITEMS,
        )
    # Item contents.
    for _, group in groups:
        for item in group:
            call_id = item_id(item)
            identity = item.target_identity
            if not isinstance(identity, str) or not identity or len(identity) > MAX_TARGET_IDENTITY_CHARS:
                _fail(
                    ErrorCode.DEFERRED_REQUEST_INVALID,
                    f"Deferred item {call_id!r} has an invalid target identity.",
                    tool_call_id=call_id,
                )
            for part in (item.model_call, item.target_call):
                name = part.tool_name
                if not isinstance(name, str) or not name.strip():
                    _fail(
                        ErrorCode.DEFERRED_REQUEST_INVALID,
                        f"Deferred item {call_id!r} has an empty tool name.",
                        tool_call_id=call_id,
                    )
                try:
                    _history.parse_arguments(part.args)
                except _history.InvalidArguments as error:
                    _fail(
                        ErrorCode.DEFERRED_REQUEST_INVALID,
                        f"Deferred item {call_id!r} has invalid arguments: {error}",
                        tool_call_id=call_id,
                    )
            if item.model_call != item.target_call:
                _fail(
                    ErrorCode.DEFERRED_REQUEST_INVALID,
                    f"Deferred item {call_id!r} is forwarded; forwarding is not supported.",
                    tool_call_id=call_id,
                )
    for key, value in stored_kinds(requests).items():
        if key not in seen["calls"] or value != "question":
            _fail(
                ErrorCode.DEFERRED_REQUEST_INVALID,
                "Deferred question kinds must name deferred calls with the kind 'question'.",
                tool_call_id=_jsonable_key(key),
            )
    _check_metadata(
        stored_metadata(requests),
        seen["calls"] | seen["approvals"],
        approval_ids=seen["approvals"],
        what="Request",
    )


def _check_finite(value: object, call_id: str, what: str) -> None:
    try:
        check_finite_json(value)
    except NotFiniteJson as error:
        _fail(
            ErrorCode.DEFERRED_RESULTS_INVALID,
            f"{what} for tool call {call_id!r} is not finite JSON: {error}",
            tool_call_id=call_id,
        )


def _check_results(requests: DeferredToolRequests, results: DeferredToolResults) -> None:
    """§2.7.4 steps 5-8."""
    calls, approvals = stored_items(requests)
    call_ids = {item_id(item) for item in calls}
    approval_ids = {item_id(item) for item in approvals}
    # 5. Every item answered exactly once, in its own category.
    for category, expected, got in (
        ("calls", call_ids, results.calls),
        ("approvals", approval_ids, results.approvals),
    ):
        keys = set(got)
        if keys != expected:
            missing: list[JsonValue] = [*sorted(expected - keys)]
            unexpected: list[JsonValue] = [*sorted(str(key) for key in keys - expected)]
            _fail(
                ErrorCode.DEFERRED_RESULTS_INCOMPLETE,
                f"Deferred results for {category} do not answer exactly the pending {category}.",
                category=category,
                missing=missing,
                unexpected=unexpected,
            )
    # 6. Approvals are exactly bool / ToolApproved / ToolDenied. `type(...)`, not isinstance: `1 == True`
    # and an int or bool-like object must not pass for a decision, and a subclass would not round-trip.
    for call_id, approval in results.approvals.items():
        if type(approval) not in (bool, ToolApproved, ToolDenied):
            _fail(
                ErrorCode.DEFERRED_APPROVAL_INVALID,
                f"Approval for tool call {call_id!r} must be a bool, ToolApproved or ToolDenied.",
                tool_call_id=call_id,
            )
    # 7. Finite JSON values.
    for call_id, value in results.calls.items():
        if isinstance(value, ToolFailed | ModelRetry):
            if not isinstance(value.message, str):
                _fail(
                    ErrorCode.DEFERRED_RESULTS_INVALID,
                    f"Failure message for tool call {call_id!r} must be a string.",
                    tool_call_id=call_id,
                )
        elif isinstance(value, ToolReturn):
            _check_finite(value.return_value, call_id, "Return value")
            _check_finite(value.metadata, call_id, "Return metadata")
        elif isinstance(value, RetryPromptPart):
            _check_finite(value.content, call_id, "Retry content")
        else:
            _check_finite(value, call_id, "Result")
    # 7a. Child answers (CHILDREN §4.4): a host-mode call's answer must fit the request it answers.
    request_metadata = stored_metadata(requests)
    for item in calls:
        if item.target_identity in HOST_TOOL_IDENTITIES:
            call_id = item_id(item)
            entry = request_metadata.get(call_id)
            request = entry.get(CHILD_METADATA_KEY) if isinstance(entry, dict) else None
            check_child_answer(call_id, request, results.calls.get(call_id))
    for call_id, approval in results.approvals.items():
        if isinstance(approval, ToolApproved) and approval.override_args is not None:
            if not isinstance(approval.override_args, dict):
                _fail(
                    ErrorCode.DEFERRED_RESULTS_INVALID,
                    f"override_args for tool call {call_id!r} must be a JSON object.",
                    tool_call_id=call_id,
                )
            _check_finite(approval.override_args, call_id, "override_args")
        elif isinstance(approval, ToolDenied) and not isinstance(approval.message, str):
            _fail(
                ErrorCode.DEFERRED_RESULTS_INVALID,
                f"Denial message for tool call {call_id!r} must be a string.",
                tool_call_id=call_id,
            )
    for call_id, who in results.answered_by.items():
        if not isinstance(who, str) or call_id not in call_ids | approval_ids:
            _fail(
                ErrorCode.DEFERRED_RESULTS_INVALID,
                "answered_by must map pending tool call IDs to strings.",
                tool_call_id=_jsonable_key(call_id),
            )
    # 8. Result metadata.
    _check_metadata(results.metadata, call_ids | approval_ids, approval_ids=approval_ids, what="Result")


def _check_correlation(requests: DeferredToolRequests, messages: Sequence[ModelMessage]) -> None:
    """§2.7.4 step 9: the items are the unanswered calls of the last response, unchanged."""
    index = _history.last_response_index(messages)
    if index is None:
        _fail(ErrorCode.DEFERRED_REQUEST_MISSING, NO_PENDING_RESPONSE_MESSAGE)
    response = messages[index]
    assert isinstance(response, ModelResponse)
    calls = _history.response_tool_calls(response)
    for call_id in _history.duplicate_call_ids(calls):
        _fail(
            ErrorCode.DEFERRED_REQUEST_DUPLICATE,
            f"The last response repeats tool call ID {call_id!r}.",
            tool_call_id=call_id,
        )
    by_id = {call.tool_call_id: call for call in calls}
    items = (*stored_items(requests)[0], *stored_items(requests)[1])
    for item in items:
        if item_id(item) not in by_id:
            _fail(
                ErrorCode.DEFERRED_REQUEST_MISSING,
                f"Pending tool call {item_id(item)!r} is not in the last response of the history.",
                tool_call_id=item_id(item),
            )
    answered = _history.answered_call_ids(messages, index)
    for item in items:
        if item_id(item) in answered:
            _fail(
                ErrorCode.DEFERRED_REQUEST_COMPLETED,
                f"Pending tool call {item_id(item)!r} was already answered in the history.",
                tool_call_id=item_id(item),
            )
    parsed: dict[str, dict[str, JsonValue]] = {}
    for item in items:
        call_id = item_id(item)
        try:
            parsed[call_id] = _history.parse_arguments(by_id[call_id].args)
        except _history.InvalidArguments as error:
            _fail(
                ErrorCode.DEFERRED_REQUEST_INVALID,
                f"History arguments of tool call {call_id!r} are invalid: {error}",
                tool_call_id=call_id,
            )
    for item in items:
        call_id = item_id(item)
        recorded = by_id[call_id]
        if recorded.tool_name != item.model_call.tool_name or not _history.arguments_equal(
            parsed[call_id], _history.parse_arguments(item.model_call.args)
        ):
            _fail(
                ErrorCode.DEFERRED_REQUEST_MISMATCH,
                f"Pending tool call {call_id!r} differs from the call in the history.",
                tool_call_id=call_id,
            )


def preflight_resume(resume: object, history: Sequence[ModelMessage] | None) -> DeferredToolResume | None:
    """Phase A of §2.7.4: check a `deferred_resume` before the run starts (the first failing check wins).

    Args:
        resume: What the caller passed as `deferred_resume` (not `None`; the caller skips this then).
        history: `previous_state.message_history`, or `None` when there is no previous state.

    Returns:
        The resume to run with: the same batch, or for `recovery=True` its `remaining(history)`. `None`
        means a recovery batch was fully incorporated: drop it and run a plain continuation with tool
        recovery.

    Raises:
        RunError: With the §2.7.4 code of the first failing check.
    """
    # 1.
    if not isinstance(resume, DeferredToolResume):
        _fail(
            ErrorCode.DEFERRED_RESUME_INVALID,
            "deferred_resume must be a DeferredToolResume.",
            received=type(resume).__name__,
        )
    # 2.
    if history is None:
        _fail(ErrorCode.DEFERRED_STATE_REQUIRED, "A deferred resume needs the previous state it answers.")
    # 3.
    if resume.recovery:
        return check_remaining(resume, history)
    _check_steps_4_to_9(resume, history)
    return resume


def _check_steps_4_to_9(resume: DeferredToolResume, history: Sequence[ModelMessage]) -> None:
    requests, results, _ = stored_resume(resume)
    check_requests(requests)  # 4
    _check_results(requests, results)  # 5-8
    _check_correlation(requests, history)  # 9


def check_pending(requests: DeferredToolRequests, history: Sequence[ModelMessage]) -> None:
    """Check a batch said to be what a state is suspended on (§2.7.4 steps 4 and 9), as a resume would.

    A durable Host importing a suspended state (THREADS §3 `CreateThread`) and an embedding host get the
    same answer here.

    Raises:
        RunError: The code of the first failing check.
    """
    check_requests(requests)
    _check_correlation(requests, history)


def check_remaining(resume: DeferredToolResume, history: Sequence[ModelMessage]) -> DeferredToolResume | None:
    """`resume.remaining(history)`, checked exactly as phase A checks a `recovery=True` resume.

    What a Host publishes beside a checkpoint must be a batch a later resume accepts, so the same
    steps apply: forged IDs, step 3 (`remaining`), then steps 4-9 on what is left.

    Returns:
        The remainder (same `recovery` flag), or `None` when the history incorporated or superseded it.

    Raises:
        RunError: `deferred_request_missing` for a history without a response or a forged ID, or the
            code of the first failing step 4-9.
    """
    _check_made(resume, history)
    remaining = resume.remaining(history)
    if remaining is None:
        return None
    _check_steps_4_to_9(remaining, history)
    return remaining


def _check_made(resume: DeferredToolResume, history: Sequence[ModelMessage]) -> None:
    """Refuse items whose call no response of `history` made (module docstring: forged IDs)."""
    if _history.last_response_index(history) is None:
        _fail(ErrorCode.DEFERRED_REQUEST_MISSING, NO_PENDING_RESPONSE_MESSAGE)
    made = _history.called_ids(history)
    calls, approvals = stored_items(stored_resume(resume)[0])
    for item in (*calls, *approvals):
        call_id = getattr(getattr(item, "model_call", None), "tool_call_id", None)
        if isinstance(call_id, str) and call_id not in made:
            _fail(
                ErrorCode.DEFERRED_REQUEST_MISSING,
                f"Pending tool call {call_id!r} was never made in the history.",
                tool_call_id=call_id,
            )
