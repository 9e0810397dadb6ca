"""Errors the harness raises on purpose, each with a stable lower snake_case `code`.

Codes are values, not classes (SPEC §2.9): a host branches on `error.code`, and the gRPC server
reports it as the `google.rpc.ErrorInfo` reason `code.upper()`. The tree::

    Exception
    └── HarnessError                 code, details (finite JSON), retry_hint
        ├── DefinitionError          the agent definition / tool surface does not fit the request
        ├── InputError (ValueError)  the caller's input is wrong
        ├── StateError               a state is unsupported, invalid or unavailable
        ├── RunError                 the run machinery was misused, or a resume does not correlate
        ├── ThreadError              a durable thread refuses the request, or drops its caller (`harness.threads`)
        └── RunCleanupError          a run's teardown failed; its outcome, if any, is only a candidate
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from .json_text import JsonValue

if TYPE_CHECKING:
    from .results import HarnessRunResult

__all__ = (
    "DefinitionError",
    "ErrorCode",
    "ErrorFamily",
    "FailureCode",
    "HarnessError",
    "InputError",
    "RecordedRefusal",
    "Refusal",
    "RetryHint",
    "RunCleanupError",
    "RunError",
    "StateError",
    "ThreadError",
    "error_reason",
)

RetryHint = Literal["none", "new_run", "dependency_change"]
"""What a host may do after a failure: nothing, a new run, or a new run once a dependency changed."""


class ErrorCode(StrEnum):
    """Every code the core raises or records. Values are the wire reasons in lower case; never renamed."""

    @property
    def family(self) -> ErrorFamily:
        """What the error is about (`ErrorFamily`)."""
        return _FAMILY_OF[self]

    # InputError
    INPUT_EMPTY = "input_empty"
    INPUT_INVALID = "input_invalid"
    TOOL_RECOVERY_INVALID = "tool_recovery_invalid"
    CLIENT_TOOL_INVALID = "client_tool_invalid"
    # RunError
    RUN_BINDINGS_INVALID = "run_bindings_invalid"
    PREVIOUS_STATE_INVALID = "previous_state_invalid"
    RUN_RESULT_MISSING = "run_result_missing"
    RUN_NOT_ACTIVE = "run_not_active"
    RUN_STREAM_REUSED = "run_stream_reused"
    RUN_STREAM_CONCURRENT_NEXT = "run_stream_concurrent_next"
    RUN_SUSPENDED = "run_suspended"
    RUN_CANCELLED = "run_cancelled"
    RUN_ID_INVALID = "run_id_invalid"
    DEFERRED_RESUME_INVALID = "deferred_resume_invalid"
    DEFERRED_STATE_REQUIRED = "deferred_state_required"
    DEFERRED_REQUEST_MISSING = "deferred_request_missing"
    DEFERRED_REQUEST_DUPLICATE = "deferred_request_duplicate"
    DEFERRED_REQUEST_CATEGORY_OVERLAP = "deferred_request_category_overlap"
    DEFERRED_REQUESTS_EMPTY = "deferred_requests_empty"
    DEFERRED_REQUESTS_TOO_LARGE = "deferred_requests_too_large"
    DEFERRED_REQUEST_INVALID = "deferred_request_invalid"
    DEFERRED_METADATA_INVALID = "deferred_metadata_invalid"
    DEFERRED_RESULTS_INCOMPLETE = "deferred_results_incomplete"
    DEFERRED_APPROVAL_INVALID = "deferred_approval_invalid"
    DEFERRED_RESULTS_INVALID = "deferred_results_invalid"
    DEFERRED_REQUEST_COMPLETED = "deferred_request_completed"
    DEFERRED_REQUEST_MISMATCH = "deferred_request_mismatch"
    CHILD_LINEAGE_INVALID = "child_lineage_invalid"
    CHILD_RESULT_INVALID = "child_result_invalid"
    CHILD_RESULT_MISSING = "child_result_missing"
    # StateError
    RUN_STATE_UNAVAILABLE = "run_state_unavailable"
    STATE_STORE_MISSING = "state_store_missing"
    SCHEMA_VERSION_UNSUPPORTED = "schema_version_unsupported"
    STATE_INVALID = "state_invalid"
    HISTORY_FORMAT_UNSUPPORTED = "history_format_unsupported"
    FORK_THREAD_ID_CONFLICT = "fork_thread_id_conflict"
    DEFERRED_STATE_INVALID = "deferred_state_invalid"
    CAPABILITY_STATE_ID_INVALID = "capability_state_id_invalid"
    CAPABILITY_STATE_VERSION_INVALID = "capability_state_version_invalid"
    CAPABILITY_STATE_VERSION_UNSUPPORTED = "capability_state_version_unsupported"
    CAPABILITY_STATE_INVALID = "capability_state_invalid"
    ENVIRONMENT_STATE_INVALID = "environment_state_invalid"
    ENVIRONMENT_STATE_VERSION_UNSUPPORTED = "environment_state_version_unsupported"
    # DefinitionError
    DEFERRED_SURFACE_MISMATCH = "deferred_surface_mismatch"
    SUBAGENT_NAME_INVALID = "subagent_name_invalid"
    SUBAGENT_NAME_DUPLICATE = "subagent_name_duplicate"
    SUBAGENT_DESCRIPTION_INVALID = "subagent_description_invalid"
    SUBAGENT_DEFINITION_INVALID = "subagent_definition_invalid"
    SUBAGENT_CYCLE = "subagent_cycle"
    SUBAGENT_CONTEXT_INVALID = "subagent_context_invalid"
    SUBAGENT_CONTEXT_UNSUPPORTED = "subagent_context_unsupported"
    SUBAGENT_IDENTITY_INVALID = "subagent_identity_invalid"
    SUBAGENT_LIMITS_INVALID = "subagent_limits_invalid"
    SUBAGENT_MODE_CONFLICT = "subagent_mode_conflict"
    SUBAGENT_BINDING_INVALID = "subagent_binding_invalid"
    # RunCleanupError
    RUN_CLEANUP_FAILED = "run_cleanup_failed"
    # ThreadError (durable threads, THREADS §3)
    THREAD_NOT_FOUND = "thread_not_found"
    CHECKPOINT_NOT_FOUND = "checkpoint_not_found"
    RUN_NOT_FOUND = "run_not_found"
    THREAD_EXISTS = "thread_exists"
    REQUEST_ID_REUSED = "request_id_reused"
    THREAD_NOT_SUSPENDED = "thread_not_suspended"
    REQUEST_INTERRUPTED = "request_interrupted"
    THREAD_BUSY = "thread_busy"
    REVISION_CONFLICT = "revision_conflict"
    LEASE_LOST = "lease_lost"
    STORE_UNAVAILABLE = "store_unavailable"
    LISTENER_TOO_SLOW = "listener_too_slow"
    RUN_ATTEMPT_LOST = "run_attempt_lost"
    RUN_EVENTS_EXPIRED = "run_events_expired"
    THREAD_QUEUE_FULL = "thread_queue_full"


ErrorFamily = Literal[
    "input", "run", "deferred", "child", "state", "definition", "cleanup", "thread", "failure"
]
"""What an error is about, so a host (or the server) can tell which part of a request it concerns: `deferred`
codes concern a deferred batch or its answers, `child` ones a child run's lineage or result; the others
follow the class that raises them; `failure` is every `FailureCode`, a failed run's."""

_FAMILIES: dict[ErrorFamily, tuple[ErrorCode, ...]] = {
    "input": (
        ErrorCode.INPUT_EMPTY,
        ErrorCode.INPUT_INVALID,
        ErrorCode.TOOL_RECOVERY_INVALID,
        ErrorCode.CLIENT_TOOL_INVALID,
    ),
    "run": (
        ErrorCode.RUN_BINDINGS_INVALID,
        ErrorCode.PREVIOUS_STATE_INVALID,
        ErrorCode.RUN_RESULT_MISSING,
        ErrorCode.RUN_NOT_ACTIVE,
        ErrorCode.RUN_STREAM_REUSED,
        ErrorCode.RUN_STREAM_CONCURRENT_NEXT,
        ErrorCode.RUN_SUSPENDED,
        ErrorCode.RUN_CANCELLED,
        ErrorCode.RUN_ID_INVALID,
    ),
    "deferred": (
        ErrorCode.DEFERRED_RESUME_INVALID,
        ErrorCode.DEFERRED_STATE_REQUIRED,
        ErrorCode.DEFERRED_REQUEST_MISSING,
        ErrorCode.DEFERRED_REQUEST_DUPLICATE,
        ErrorCode.DEFERRED_REQUEST_CATEGORY_OVERLAP,
        ErrorCode.DEFERRED_REQUESTS_EMPTY,
        ErrorCode.DEFERRED_REQUESTS_TOO_LARGE,
        ErrorCode.DEFERRED_REQUEST_INVALID,
        ErrorCode.DEFERRED_METADATA_INVALID,
        ErrorCode.DEFERRED_RESULTS_INCOMPLETE,
        ErrorCode.DEFERRED_APPROVAL_INVALID,
        ErrorCode.DEFERRED_RESULTS_INVALID,
        ErrorCode.DEFERRED_REQUEST_COMPLETED,
        ErrorCode.DEFERRED_REQUEST_MISMATCH,
        ErrorCode.DEFERRED_STATE_INVALID,
        ErrorCode.DEFERRED_SURFACE_MISMATCH,
    ),
    "child": (
        ErrorCode.CHILD_LINEAGE_INVALID,
        ErrorCode.CHILD_RESULT_INVALID,
        ErrorCode.CHILD_RESULT_MISSING,
    ),
    "state": (
        ErrorCode.RUN_STATE_UNAVAILABLE,
        ErrorCode.STATE_STORE_MISSING,
        ErrorCode.SCHEMA_VERSION_UNSUPPORTED,
        ErrorCode.STATE_INVALID,
        ErrorCode.HISTORY_FORMAT_UNSUPPORTED,
        ErrorCode.FORK_THREAD_ID_CONFLICT,
        ErrorCode.CAPABILITY_STATE_ID_INVALID,
        ErrorCode.CAPABILITY_STATE_VERSION_INVALID,
        ErrorCode.CAPABILITY_STATE_VERSION_UNSUPPORTED,
        ErrorCode.CAPABILITY_STATE_INVALID,
        ErrorCode.ENVIRONMENT_STATE_INVALID,
        ErrorCode.ENVIRONMENT_STATE_VERSION_UNSUPPORTED,
    ),
    "definition": (
        ErrorCode.SUBAGENT_NAME_INVALID,
        ErrorCode.SUBAGENT_NAME_DUPLICATE,
        ErrorCode.SUBAGENT_DESCRIPTION_INVALID,
        ErrorCode.SUBAGENT_DEFINITION_INVALID,
        ErrorCode.SUBAGENT_CYCLE,
        ErrorCode.SUBAGENT_CONTEXT_INVALID,
        ErrorCode.SUBAGENT_CONTEXT_UNSUPPORTED,
        ErrorCode.SUBAGENT_IDENTITY_INVALID,
        ErrorCode.SUBAGENT_LIMITS_INVALID,
        ErrorCode.SUBAGENT_MODE_CONFLICT,
        ErrorCode.SUBAGENT_BINDING_INVALID,
    ),
    "cleanup": (ErrorCode.RUN_CLEANUP_FAILED,),
    "thread": (
        ErrorCode.THREAD_NOT_FOUND,
        ErrorCode.CHECKPOINT_NOT_FOUND,
        ErrorCode.RUN_NOT_FOUND,
        ErrorCode.THREAD_EXISTS,
        ErrorCode.REQUEST_ID_REUSED,
        ErrorCode.THREAD_NOT_SUSPENDED,
        ErrorCode.REQUEST_INTERRUPTED,
        ErrorCode.THREAD_BUSY,
        ErrorCode.REVISION_CONFLICT,
        ErrorCode.LEASE_LOST,
        ErrorCode.STORE_UNAVAILABLE,
        ErrorCode.LISTENER_TOO_SLOW,
        ErrorCode.RUN_ATTEMPT_LOST,
        ErrorCode.RUN_EVENTS_EXPIRED,
        ErrorCode.THREAD_QUEUE_FULL,
    ),
}
_FAMILY_OF: dict[ErrorCode, ErrorFamily] = {
    code: family for family, codes in _FAMILIES.items() for code in codes
}


class FailureCode(StrEnum):
    """Codes that appear only as `SafeFailure.code` in a failed result, never raised."""

    @property
    def family(self) -> ErrorFamily:
        """Always `failure` (`ErrorFamily`)."""
        return "failure"

    AGENT_RUN_FAILED = "agent_run_failed"
    USAGE_LIMIT_EXCEEDED = "usage_limit_exceeded"
    DEFERRED_TOOLS_UNSUPPORTED = "deferred_tools_unsupported"
    TOOL_EXECUTION_FAILED = "tool_execution_failed"


def _detached_details(details: Mapping[str, JsonValue] | None) -> dict[str, JsonValue]:
    return copy.deepcopy(dict(details)) if details else {}


class Refusal(Exception):
    """A host's refusal of a request before it runs (admission, a drain, an unknown agent): expected.

    A host's own error types derive from it so that the core can tell them from its bugs: a thread run
    refused by its `Launcher` is answered with the refusal and never logged as a crash.
    """


class RecordedRefusal(Refusal):
    """A host's refusal kept in a run record: a server-driven start failed the host's checks (LIVE §3.2),
    and every retry of the request is refused so again (the host rebuilds its own error type from it)."""

    def __init__(self, reason: str, message: str, details: Mapping[str, JsonValue] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.details = dict(details or {})

    @classmethod
    def of(cls, refusal: Refusal) -> RecordedRefusal:
        """`refusal` as a record keeps it: its reason, message and details where it has them."""
        return cls(
            str(getattr(refusal, "reason", type(refusal).__name__)),
            str(getattr(refusal, "message", refusal)),
            getattr(refusal, "details", None),
        )


class HarnessError(Exception):
    """Base of every error the core raises on purpose; `code` is what hosts branch on."""

    code: ErrorCode | FailureCode
    """The stable code (SPEC §2.9); a `FailureCode` only on `raise_for_status()` of a failed result."""
    details: dict[str, JsonValue]
    """Finite-JSON facts about the failure (e.g. `received`, `supported`, `tool_call_id`)."""
    retry_hint: RetryHint
    """Whether a new run may help."""

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | FailureCode | str,
        details: Mapping[str, JsonValue] | None = None,
        retry_hint: RetryHint = "none",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = ErrorCode(code) if code in ErrorCode._value2member_map_ else FailureCode(code)
        self.details = _detached_details(details)
        self.retry_hint = retry_hint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code.value!r}, details={self.details!r})"


def error_reason(error: BaseException) -> str:
    """A log line's `reason`: a core error's code, upper-cased as on the wire, or a host refusal's own."""
    if isinstance(error, HarnessError):
        return error.code.value.upper()
    if isinstance(error, Refusal):
        return RecordedRefusal.of(error).reason
    return type(error).__name__


class DefinitionError(HarnessError):
    """The agent definition or this run's tool surface does not fit the request."""


class InputError(HarnessError, ValueError):
    """The caller's input is wrong (also a `ValueError`, as the reference library raised)."""


class StateError(HarnessError):
    """A state is unsupported, invalid, or not available at this point of the run."""


class RunError(HarnessError):
    """The run machinery was misused, or a deferred resume does not correlate with the state."""


class ThreadError(HarnessError):
    """A durable thread refuses the request: unknown, busy, changed meanwhile, or its store is down; or
    its caller fell too far behind the run, which goes on without it (`listener_too_slow`)."""


class RunCleanupError(HarnessError):
    """A run ended but could not deliver its result cleanly; `outcome` is only a candidate."""

    outcome: HarnessRunResult[object] | None
    """The last validated candidate result, if any. Delivery never happened: treat it as uncertain."""
    causes: tuple[BaseException, ...]
    """What went wrong, in order (not chained)."""

    def __init__(
        self,
        message: str,
        *,
        outcome: HarnessRunResult[object] | None,
        causes: tuple[BaseException, ...],
    ) -> None:
        super().__init__(
            message,
            code=ErrorCode.RUN_CLEANUP_FAILED,
            details={"cause_count": len(causes)},
            retry_hint="new_run",
        )
        self.outcome = outcome
        self.causes = causes
        for cause in causes:
            self.add_note(f"Cleanup cause: {type(cause).__name__}")
