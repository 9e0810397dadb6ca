"""Answering a suspended run: the answers of the next run, for either service.

A SUSPENDED `RunResult` carries `deferred`, a `DeferredToolRequests` batch: `approvals` (calls the
host approves or denies) and `calls` (external tools, the host's own client tools and questions,
whose result the host supplies). The host answers every item once, with one helper per item
(`approve`, `deny`, `external_result`, `external_failure`, `external_retry`). With
`HarnessService` it sends the batch back unchanged beside its answers:

```python
replies = [approve(c) if ok(c) else deny(c, "not today") for c in result.deferred.approvals]
replies += [external_result(c, run_my_tool(c)) for c in result.deferred.calls]
spec = RunSpec(previous_state=result.state, deferred_resume=resume(result.deferred, replies))
```

A `ThreadService` thread keeps its batch (`Thread.pending`) itself, so the host sends only the
answers, keyed by call ID: `threads.run(thread_id, answers=answers(*replies))`.

The server validates the resume (every item answered once, in its category); these helpers only
build the messages, so a host gets the server's rule and reason (`DEFERRED_RESULTS_INCOMPLETE`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ._gen.threadline.v1 import (
    ApprovalResult,
    CallResult,
    DeferredKind,
    DeferredToolCall,
    DeferredToolRequests,
    DeferredToolResults,
    DeferredToolResume,
    ToolApproved,
    ToolDenied,
    ToolFailedResult,
    ToolRetryResult,
)

__all__ = (
    "NOT_EXECUTED_TOOL_RESULT",
    "UNANSWERED_APPROVAL_MESSAGE",
    "answers",
    "approve",
    "call_args",
    "deny",
    "external_failure",
    "external_result",
    "external_retry",
    "pending",
    "resume",
)


UNANSWERED_APPROVAL_MESSAGE = "Not approved: the thread continued without an answer."
"""The denial a pending approval gets when a prompt without answers continues a SUSPENDED thread and
the call is known never to have started (LIVE §5.3): the model reads it as the call's result. A
fixed text of the server's core, so a host can tell it from a denial a person wrote."""

NOT_EXECUTED_TOOL_RESULT = "The tool call was not executed: its tool is no longer available."
"""The result of a call known not to have started whose tool is gone (LIVE §5.4, SPEC §2.5.8): never
the unknown result (the call may have run), since the server knows this one did not. A fixed text of
the server's core."""


def compact_json(value: Any) -> str:
    """The JSON the wire carries for a value: compact, UTF-8 as is, no NaN or Infinity."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _metadata_json(metadata: Mapping[str, Any] | None) -> str:
    return "" if metadata is None else compact_json(dict(metadata))


def pending(requests: DeferredToolRequests | None) -> list[DeferredToolCall]:
    """Every item of a batch: the approvals first, then the calls."""
    if requests is None:
        return []
    return [*requests.approvals, *requests.calls]


def call_args(call: DeferredToolCall) -> Any:
    """A deferred call's arguments, decoded from `args_json` (`{}` when it is empty)."""
    return json.loads(call.args_json) if call.args_json else {}


def _require_kind(call: DeferredToolCall, kinds: tuple[DeferredKind, ...], helper: str) -> None:
    if call.kind not in kinds:
        names = " or ".join(k.name for k in kinds)
        raise ValueError(f"{helper}() answers {names} items; {call.tool_call_id!r} is {call.kind!s}")


def approve(
    call: DeferredToolCall,
    *,
    override_args: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    answered_by: str = "",
) -> ApprovalResult:
    """Approve an approval item; the tool then runs on the server with its arguments.

    Args:
        call: An item of `DeferredToolRequests.approvals`.
        override_args: Run the tool with these arguments instead (validated again at dispatch).
        metadata: Extra data recorded with the answer (a JSON object).
        answered_by: Who answered, for the host's own audit trail.
    """
    _require_kind(call, (DeferredKind.APPROVAL,), "approve")
    approved = ToolApproved(
        override_args_json=None if override_args is None else compact_json(dict(override_args))
    )
    return ApprovalResult(
        tool_call_id=call.tool_call_id,
        approved=approved,
        metadata_json=_metadata_json(metadata),
        answered_by=answered_by,
    )


def deny(
    call: DeferredToolCall,
    message: str = "",
    *,
    metadata: Mapping[str, Any] | None = None,
    answered_by: str = "",
) -> ApprovalResult:
    """Deny an approval item; the model sees `message` as the tool's result.

    Args:
        call: An item of `DeferredToolRequests.approvals`.
        message: What the model is told. Empty = pydantic-ai's "The tool call was denied.".
        metadata: Extra data recorded with the answer (a JSON object).
        answered_by: Who answered, for the host's own audit trail.
    """
    _require_kind(call, (DeferredKind.APPROVAL,), "deny")
    return ApprovalResult(
        tool_call_id=call.tool_call_id,
        denied=ToolDenied(message=message),
        metadata_json=_metadata_json(metadata),
        answered_by=answered_by,
    )


_RESULT_KINDS = (DeferredKind.EXTERNAL, DeferredKind.QUESTION)


def external_result(
    call: DeferredToolCall,
    value: Any,
    *,
    metadata: Mapping[str, Any] | None = None,
    answered_by: str = "",
) -> CallResult:
    """Answer an external call (a client tool, an external tool, a question) with its return value.

    Args:
        call: An item of `DeferredToolRequests.calls`.
        value: The tool's return value; anything `json.dumps` accepts.
        metadata: Extra data recorded with the answer (a JSON object).
        answered_by: Who answered, for the host's own audit trail.
    """
    _require_kind(call, _RESULT_KINDS, "external_result")
    return CallResult(
        tool_call_id=call.tool_call_id,
        value_json=compact_json(value),
        metadata_json=_metadata_json(metadata),
        answered_by=answered_by,
    )


def external_failure(call: DeferredToolCall, message: str, *, answered_by: str = "") -> CallResult:
    """Answer an external call with a failure: the tool ran and failed; the model sees `message`."""
    _require_kind(call, _RESULT_KINDS, "external_failure")
    return CallResult(
        tool_call_id=call.tool_call_id, failed=ToolFailedResult(message=message), answered_by=answered_by
    )


def external_retry(call: DeferredToolCall, message: str, *, answered_by: str = "") -> CallResult:
    """Answer an external call by asking the model to call it again, e.g. with better arguments."""
    _require_kind(call, _RESULT_KINDS, "external_retry")
    return CallResult(
        tool_call_id=call.tool_call_id, retry=ToolRetryResult(message=message), answered_by=answered_by
    )


def answers(*answers: ApprovalResult | CallResult) -> DeferredToolResults:
    """The answers to a thread's pending batch, for `Threads.run`/`Threads.stream` (`answers=`).

    Args:
        *answers: One answer per item of `Thread.pending` (or of the suspended result's
            `deferred`), from `approve`, `deny`, `external_result`, ...; any order.

    Raises:
        TypeError: An answer is neither an `ApprovalResult` nor a `CallResult`.
    """
    return _results(answers)


def resume(
    requests: DeferredToolRequests,
    answers: Iterable[ApprovalResult | CallResult],
    *,
    recovery: bool = False,
) -> DeferredToolResume:
    """The `RunSpec.deferred_resume` answering a batch.

    Args:
        requests: The batch exactly as the server sent it (`RunResult.deferred`).
        answers: One answer per item, from `approve`, `deny`, `external_result`, ....
        recovery: Resume a batch whose checkpoint was left by an interrupted run (SPEC's recovery
            resume); false for the ordinary answer to a SUSPENDED result.
    """
    return DeferredToolResume(requests=requests, results=_results(answers), recovery=recovery)


def _results(answers: Iterable[ApprovalResult | CallResult]) -> DeferredToolResults:
    """Sort answers into their two categories, keeping their order within each."""
    approvals: list[ApprovalResult] = []
    calls: list[CallResult] = []
    for answer in answers:
        if isinstance(answer, ApprovalResult):
            approvals.append(answer)
        elif isinstance(answer, CallResult):
            calls.append(answer)
        else:
            raise TypeError(f"an answer is an ApprovalResult or a CallResult, not {type(answer).__name__}")
    return DeferredToolResults(calls=calls, approvals=approvals)
