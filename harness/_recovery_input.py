"""What tool recovery decides on (SPEC §2.5.2): the last response's unresolved calls and retained facts.

A run continuing a checkpoint whose last response still has unanswered calls recovers them (§2.5.4);
a `recovery=True` batch contributes the facts it already holds for some of them (external results and
explicit denials, never positive approvals). The run turns both into native `deferred_tool_results`.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied

from . import _history
from .deferred import DeferredToolResume, stored_resume
from .errors import ErrorCode, StateError

__all__ = (
    "TOOL_RECOVERY_MODES",
    "ToolRecovery",
    "UnresolvedCalls",
    "find_unresolved_calls",
    "retained_facts",
)

ToolRecovery = Literal["declared", "never", "always"]
"""What happens to calls left unanswered in the previous state (SPEC §1.7, §2.5.4)."""

TOOL_RECOVERY_MODES: frozenset[str] = frozenset(get_args(ToolRecovery))


@dataclass(frozen=True, slots=True)
class UnresolvedCalls:
    """What tool recovery decides on (§2.5.2)."""

    calls: tuple[ToolCallPart, ...]
    """The pending calls of the last response, in order (the history's own parts: do not mutate)."""
    facts: DeferredToolResults
    """Retained facts for some of them: external results (incl. `ToolFailed`) in `calls`, denials as
    `ToolDenied` in `approvals`. Positive approvals only for calls known not started (§2.5.8)."""


def retained_facts(resume: DeferredToolResume, not_started: Collection[str] = ()) -> DeferredToolResults:
    """The facts a `recovery=True` batch contributes to tool recovery (§2.5.2 step 1), detached.

    External results (including `ToolFailed`) stay in `calls`; `False` and `ToolDenied` approvals become
    `ToolDenied` in `approvals` (recorded as `outcome="denied"`, §2.7.6); positive approvals are dropped,
    but for calls known not to have started (`not_started`, §2.5.8): an approval never used is kept.
    """
    results = stored_resume(resume)[1]
    denials: dict[str, bool | ToolApproved | ToolDenied] = {}
    for key, value in results.approvals.items():
        if value is False:
            denials[key] = ToolDenied()
        elif isinstance(value, ToolDenied):
            denials[key] = copy.deepcopy(value)
        elif key in not_started:
            denials[key] = ToolApproved() if value is True else copy.deepcopy(value)
    return DeferredToolResults(
        calls=copy.deepcopy(results.calls),
        approvals=denials,
        metadata={
            key: copy.deepcopy(v)
            for key, v in results.metadata.items()
            if key in results.calls or isinstance(denials.get(key), ToolApproved)
        },
    )


def find_unresolved_calls(
    messages: Sequence[ModelMessage], retained: DeferredToolResume | None, not_started: Collection[str] = ()
) -> UnresolvedCalls:
    """The pending calls tool recovery decides on, with the retained facts for them (§2.5.2).

    Args:
        messages: The prepared history (not copied).
        retained: The `recovery=True` batch after `preflight_resume` (its `remaining`), or `None`.
        not_started: Calls the host knows never started, whose retained approvals are kept (§2.5.8).

    Returns:
        Pending calls of the last response (none without a response, or when that response is a provider
        pause and there is no batch) and the facts for them.

    Raises:
        StateError: `deferred_state_invalid` (`{"tool_call_id"}`) for a retained fact whose call is not
            pending.
    """
    facts = retained_facts(retained, not_started) if retained is not None else DeferredToolResults()
    response = _history.last_response(messages)
    if response is None or (response.state == "suspended" and retained is None):
        calls: tuple[ToolCallPart, ...] = ()
    else:
        calls = tuple(_history.pending_calls(messages))
    pending = {call.tool_call_id for call in calls}
    for call_id in (*facts.calls, *facts.approvals):
        if call_id not in pending:
            raise StateError(
                f"A retained deferred fact answers tool call {call_id!r}, which is not pending.",
                code=ErrorCode.DEFERRED_STATE_INVALID,
                details={"tool_call_id": call_id},
            )
    return UnresolvedCalls(calls=calls, facts=facts)
