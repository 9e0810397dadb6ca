"""`HarnessError` / `ServerError` -> gRPC status with `google.rpc.ErrorInfo` (and `BadRequest`).

One table (`STATUS_BY_CODE`) maps every core `ErrorCode` and every `ServerReason` to its status code,
per DESIGN "Errors"; the ErrorInfo reason is derived from the key (`code.upper()`, or the
`ServerReason` itself), so nothing is spelt twice. A reason missing from the table is a bug reaching
the wire, so it answers INTERNAL; an enum member missing from the table stops the import. This is the
only module that imports `google.rpc` (its stubs are untyped; TOOLCHAIN §1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NoReturn

import grpc
import grpc.aio
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from harness.errors import ErrorCode, HarnessError, JsonValue

from ..errors import ServerError, ServerReason, field_of

__all__ = (
    "DOMAIN",
    "STATUS_BY_CODE",
    "STATUS_BY_REASON",
    "abort",
    "internal_status",
    "reason_of",
    "reason_text",
    "status_code_for",
    "to_status",
)

DOMAIN = "threadline"
"""`ErrorInfo.domain` of every status the server sends."""

_C = grpc.StatusCode
_E = ErrorCode
_S = ServerReason

STATUS_BY_CODE: Mapping[ErrorCode | ServerReason, grpc.StatusCode] = {
    # INVALID_ARGUMENT: the request itself is wrong.
    _E.INPUT_EMPTY: _C.INVALID_ARGUMENT,
    _E.INPUT_INVALID: _C.INVALID_ARGUMENT,
    _E.TOOL_RECOVERY_INVALID: _C.INVALID_ARGUMENT,
    _E.STATE_INVALID: _C.INVALID_ARGUMENT,
    _E.DEFERRED_RESUME_INVALID: _C.INVALID_ARGUMENT,
    _E.DEFERRED_REQUEST_INVALID: _C.INVALID_ARGUMENT,
    _E.DEFERRED_REQUEST_DUPLICATE: _C.INVALID_ARGUMENT,
    _E.DEFERRED_REQUEST_CATEGORY_OVERLAP: _C.INVALID_ARGUMENT,
    _E.DEFERRED_REQUESTS_EMPTY: _C.INVALID_ARGUMENT,
    _E.DEFERRED_METADATA_INVALID: _C.INVALID_ARGUMENT,
    _E.DEFERRED_RESULTS_INCOMPLETE: _C.INVALID_ARGUMENT,
    _E.DEFERRED_APPROVAL_INVALID: _C.INVALID_ARGUMENT,
    _E.DEFERRED_RESULTS_INVALID: _C.INVALID_ARGUMENT,
    _E.FORK_THREAD_ID_CONFLICT: _C.INVALID_ARGUMENT,
    _E.CLIENT_TOOL_INVALID: _C.INVALID_ARGUMENT,
    _S.AGENT_UNKNOWN: _C.INVALID_ARGUMENT,
    _S.HISTORY_DIGEST_MISMATCH: _C.INVALID_ARGUMENT,
    _S.REQUEST_UNDECODABLE: _C.INVALID_ARGUMENT,
    # FAILED_PRECONDITION: well formed, but not acceptable in this state / by this server.
    _E.SCHEMA_VERSION_UNSUPPORTED: _C.FAILED_PRECONDITION,
    _E.HISTORY_FORMAT_UNSUPPORTED: _C.FAILED_PRECONDITION,
    _E.STATE_STORE_MISSING: _C.FAILED_PRECONDITION,
    _E.DEFERRED_STATE_REQUIRED: _C.FAILED_PRECONDITION,
    _E.DEFERRED_REQUEST_MISSING: _C.FAILED_PRECONDITION,
    _E.DEFERRED_REQUEST_COMPLETED: _C.FAILED_PRECONDITION,
    _E.DEFERRED_REQUEST_MISMATCH: _C.FAILED_PRECONDITION,
    _E.DEFERRED_STATE_INVALID: _C.FAILED_PRECONDITION,
    _E.DEFERRED_SURFACE_MISMATCH: _C.FAILED_PRECONDITION,
    # RESOURCE_EXHAUSTED
    _E.DEFERRED_REQUESTS_TOO_LARGE: _C.RESOURCE_EXHAUSTED,
    _S.RUN_LIMIT_REACHED: _C.RESOURCE_EXHAUSTED,
    # UNAUTHENTICATED
    _S.TOKEN_MISSING: _C.UNAUTHENTICATED,
    _S.TOKEN_INVALID: _C.UNAUTHENTICATED,
    # INTERNAL: only reachable through a bug in the server's use of the core. The capability-state and
    # run-machinery codes are listed too, so the table names every `ErrorCode` exactly once.
    _E.RUN_RESULT_MISSING: _C.INTERNAL,
    _E.RUN_CLEANUP_FAILED: _C.INTERNAL,
    _E.RUN_BINDINGS_INVALID: _C.INTERNAL,
    _E.PREVIOUS_STATE_INVALID: _C.INTERNAL,
    _E.RUN_NOT_ACTIVE: _C.INTERNAL,
    _E.RUN_STREAM_REUSED: _C.INTERNAL,
    _E.RUN_STREAM_CONCURRENT_NEXT: _C.INTERNAL,
    _E.RUN_SUSPENDED: _C.INTERNAL,
    _E.RUN_CANCELLED: _C.INTERNAL,
    _E.RUN_STATE_UNAVAILABLE: _C.INTERNAL,
    _E.CAPABILITY_STATE_ID_INVALID: _C.INTERNAL,
    _E.CAPABILITY_STATE_VERSION_INVALID: _C.INTERNAL,
    _E.CAPABILITY_STATE_VERSION_UNSUPPORTED: _C.INTERNAL,
    _E.CAPABILITY_STATE_INVALID: _C.INTERNAL,
}
"""Every core code and server reason -> its gRPC status code (DESIGN "Errors")."""


def reason_text(key: StrEnum) -> str:
    """The ErrorInfo reason of a code: the core's code upper-cased, or the server reason itself."""
    return key.value.upper()


STATUS_BY_REASON: Mapping[str, grpc.StatusCode] = {
    reason_text(key): code for key, code in STATUS_BY_CODE.items()
}
"""`STATUS_BY_CODE` keyed by the reason as it travels (`"SCHEMA_VERSION_UNSUPPORTED"`)."""


def _check_table() -> None:
    """Refuse to import with a code or reason that has no status (a real check: `-O` keeps it)."""
    missing = [key for key in (*ErrorCode, *ServerReason) if key not in STATUS_BY_CODE]
    if missing:
        raise RuntimeError(f"server.mapping.errors: no gRPC status for {missing}")


_check_table()

# The grpc enum value is (int code, name); google.rpc.Status wants the int.
_INT_CODE: dict[grpc.StatusCode, int] = {code: code.value[0] for code in grpc.StatusCode}


def status_code_for(reason: str) -> grpc.StatusCode:
    """The status code of a reason; INTERNAL for one the table does not list (a bug, never a guess)."""
    return STATUS_BY_REASON.get(reason, _C.INTERNAL)


def reason_of(error: HarnessError | ServerError) -> str:
    """The ErrorInfo reason: a `ServerError`'s own, or the core's code upper-cased."""
    if isinstance(error, ServerError):
        return error.reason
    return reason_text(error.code)


def _metadata_value(key: str, value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    if key == "supported" and isinstance(value, list):
        return ",".join(item if isinstance(item, str) else _canonical(item) for item in value)
    return _canonical(value)


def _canonical(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)


def to_status(error: HarnessError | ServerError, *, field: str | None = None) -> status_pb2.Status:
    """The rich status for an error: code from the table, ErrorInfo, and BadRequest when a field is at fault.

    Args:
        error: A core error or a server error.
        field: The request field at fault (proto field path); default: what the error carries
            (`ServerError.field`, or a field recorded with `server.errors.at_field`).

    Returns:
        A `google.rpc.Status` ready for `grpc_status.rpc_status.to_status`.
    """
    reason = reason_of(error)
    code = status_code_for(reason)
    info = error_details_pb2.ErrorInfo(
        reason=reason,
        domain=DOMAIN,
        metadata={key: _metadata_value(key, value) for key, value in error.details.items()},
    )
    status = status_pb2.Status(code=_INT_CODE[code], message=error.message)
    status.details.add().Pack(info)
    field = field if field is not None else field_of(error)
    if field is not None:
        bad_request = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=field, description=error.message, reason=reason
                )
            ]
        )
        status.details.add().Pack(bad_request)
    return status


def internal_status(message: str = "Internal server error.") -> status_pb2.Status:
    """An INTERNAL status without details, for an unexpected exception (its text never reaches hosts)."""
    return status_pb2.Status(code=code_pb2.INTERNAL, message=message)


async def abort(
    context: grpc.aio.ServicerContext[Any, Any],
    error: HarnessError | ServerError,
    *,
    field: str | None = None,
) -> NoReturn:
    """End the RPC with the error's rich status (trailing `grpc-status-details-bin`)."""
    status = rpc_status.to_status(to_status(error, field=field))
    await context.abort(status.code, status.details, status.trailing_metadata)
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises
