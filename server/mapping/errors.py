"""`HarnessError` / `ServerError` -> gRPC status with `google.rpc.ErrorInfo` (and `BadRequest`).

One table (`STATUS_BY_CODE`) maps every core `ErrorCode` and every `ServerReason` to its status code,
per DESIGN "Errors"; the ErrorInfo reason is derived from the key (`code.upper()`, or the
`ServerReason` itself), so nothing is spelt twice. A reason missing from the table is a bug reaching
the wire, so it answers INTERNAL; an enum member missing from the table stops the import.

Every text in a status is bounded, because most of it echoes the request (a `schema_version`, a
thread id, a validation error's location) and gRPC refuses trailers over its metadata limit (8 KiB
soft, 16 KiB hard by default) with a bare RESOURCE_EXHAUSTED that would hide the reason:

- the message (and the BadRequest description, which repeats it) is cut to `MESSAGE_LIMIT` bytes;
- each metadata string, each string inside a JSON metadata value and the field path to `ECHO_LIMIT`;
- a cut text ends with `CUT_MARK`; JSON values nested deeper than `JSON_DEPTH_LIMIT` become `CUT_MARK`;
- all metadata together stays within `METADATA_LIMIT`: a JSON array or object that does not fit
  keeps its first entries, stays valid JSON, and `<key>_omitted` says how many entries were left out.

So the whole status stays around 6 KiB whatever the error holds. This is the only module that imports
`google.rpc` (its stubs are untyped; TOOLCHAIN §1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NoReturn

import grpc
import grpc.aio
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from harness import JsonValue
from harness.errors import ErrorCode, HarnessError
from harness.json_text import canonical_json

from ..errors import ServerError, ServerReason, field_of
from ..metrics import CURRENT, TRANSPORT
from ..tracing import record_error

__all__ = (
    "CUT_MARK",
    "DOMAIN",
    "ECHO_LIMIT",
    "JSON_DEPTH_LIMIT",
    "MESSAGE_LIMIT",
    "METADATA_LIMIT",
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
    _E.ENVIRONMENT_STATE_INVALID: _C.INVALID_ARGUMENT,
    _E.CLIENT_TOOL_INVALID: _C.INVALID_ARGUMENT,
    _E.CAPABILITY_STATE_INVALID: _C.INVALID_ARGUMENT,
    _E.CHILD_LINEAGE_INVALID: _C.INVALID_ARGUMENT,
    _S.AGENT_UNKNOWN: _C.INVALID_ARGUMENT,
    _S.HISTORY_DIGEST_MISMATCH: _C.INVALID_ARGUMENT,
    _S.REQUEST_UNDECODABLE: _C.INVALID_ARGUMENT,
    _E.REQUEST_ID_REUSED: _C.INVALID_ARGUMENT,
    # NOT_FOUND / ALREADY_EXISTS (threads)
    _E.THREAD_NOT_FOUND: _C.NOT_FOUND,
    _E.CHECKPOINT_NOT_FOUND: _C.NOT_FOUND,
    _E.RUN_NOT_FOUND: _C.NOT_FOUND,
    _E.THREAD_EXISTS: _C.ALREADY_EXISTS,
    # FAILED_PRECONDITION: well formed, but not acceptable in this state / by this server.
    _E.SCHEMA_VERSION_UNSUPPORTED: _C.FAILED_PRECONDITION,
    _E.HISTORY_FORMAT_UNSUPPORTED: _C.FAILED_PRECONDITION,
    _E.STATE_STORE_MISSING: _C.FAILED_PRECONDITION,
    _E.DEFERRED_STATE_REQUIRED: _C.FAILED_PRECONDITION,
    _E.DEFERRED_REQUEST_MISSING: _C.FAILED_PRECONDITION,
    _E.DEFERRED_REQUEST_COMPLETED: _C.FAILED_PRECONDITION,
    _E.DEFERRED_REQUEST_MISMATCH: _C.FAILED_PRECONDITION,
    _S.CHILD_EDGE_UNKNOWN: _C.FAILED_PRECONDITION,
    _E.DEFERRED_STATE_INVALID: _C.FAILED_PRECONDITION,
    _E.ENVIRONMENT_STATE_VERSION_UNSUPPORTED: _C.FAILED_PRECONDITION,
    _E.DEFERRED_SURFACE_MISMATCH: _C.FAILED_PRECONDITION,
    _E.CAPABILITY_STATE_VERSION_UNSUPPORTED: _C.FAILED_PRECONDITION,
    _E.CHILD_RESULT_INVALID: _C.FAILED_PRECONDITION,
    _E.THREAD_NOT_SUSPENDED: _C.FAILED_PRECONDITION,
    _E.REQUEST_INTERRUPTED: _C.FAILED_PRECONDITION,
    # ABORTED: a concurrency conflict (AIP-193); read the thread again and decide (threads).
    _E.THREAD_BUSY: _C.ABORTED,
    _E.REVISION_CONFLICT: _C.ABORTED,
    _E.LEASE_LOST: _C.ABORTED,
    # RESOURCE_EXHAUSTED
    _E.DEFERRED_REQUESTS_TOO_LARGE: _C.RESOURCE_EXHAUSTED,
    _S.RUN_LIMIT_REACHED: _C.RESOURCE_EXHAUSTED,
    _S.FOLLOWER_LIMIT_REACHED: _C.RESOURCE_EXHAUSTED,
    _S.RESPONSE_TOO_LARGE: _C.RESOURCE_EXHAUSTED,
    _E.LISTENER_TOO_SLOW: _C.RESOURCE_EXHAUSTED,
    _E.THREAD_QUEUE_FULL: _C.RESOURCE_EXHAUSTED,
    _E.RUN_ATTEMPT_LOST: _C.ABORTED,
    _E.RUN_EVENTS_EXPIRED: _C.FAILED_PRECONDITION,
    # UNAVAILABLE: try again, elsewhere.
    _S.SERVER_SHUTTING_DOWN: _C.UNAVAILABLE,
    _E.STORE_UNAVAILABLE: _C.UNAVAILABLE,
    # UNAUTHENTICATED
    _S.TOKEN_MISSING: _C.UNAUTHENTICATED,
    _S.TOKEN_INVALID: _C.UNAUTHENTICATED,
    # INTERNAL: only reachable through a bug in the server's use of the core. The capability-state and
    # run-machinery codes are listed too, so the table names every `ErrorCode` exactly once.
    _S.INTERNAL_ERROR: _C.INTERNAL,
    _E.RUN_RESULT_MISSING: _C.INTERNAL,
    _E.RUN_CLEANUP_FAILED: _C.INTERNAL,
    _E.RUN_BINDINGS_INVALID: _C.INTERNAL,
    _E.PREVIOUS_STATE_INVALID: _C.INTERNAL,
    _E.RUN_ID_INVALID: _C.INTERNAL,
    _E.RUN_NOT_ACTIVE: _C.INTERNAL,
    _E.RUN_STREAM_REUSED: _C.INTERNAL,
    _E.RUN_STREAM_CONCURRENT_NEXT: _C.INTERNAL,
    _E.RUN_SUSPENDED: _C.INTERNAL,
    _E.RUN_CANCELLED: _C.INTERNAL,
    _E.RUN_STATE_UNAVAILABLE: _C.INTERNAL,
    _E.CAPABILITY_STATE_ID_INVALID: _C.INTERNAL,
    _E.CAPABILITY_STATE_VERSION_INVALID: _C.INTERNAL,
    _E.CHILD_RESULT_MISSING: _C.INTERNAL,
    # Agent-definition errors: a server's factory raises them at start (a configuration error), so
    # one reaching a request is a bug.
    _E.SUBAGENT_NAME_INVALID: _C.INTERNAL,
    _E.SUBAGENT_NAME_DUPLICATE: _C.INTERNAL,
    _E.SUBAGENT_DESCRIPTION_INVALID: _C.INTERNAL,
    _E.SUBAGENT_DEFINITION_INVALID: _C.INTERNAL,
    _E.SUBAGENT_CYCLE: _C.INTERNAL,
    _E.SUBAGENT_CONTEXT_INVALID: _C.INTERNAL,
    _E.SUBAGENT_CONTEXT_UNSUPPORTED: _C.INTERNAL,
    _E.SUBAGENT_IDENTITY_INVALID: _C.INTERNAL,
    _E.SUBAGENT_LIMITS_INVALID: _C.INTERNAL,
    _E.SUBAGENT_MODE_CONFLICT: _C.INTERNAL,
    _E.SUBAGENT_BINDING_INVALID: _C.INTERNAL,
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

MESSAGE_LIMIT = 512
"""Most UTF-8 bytes of a status message (and of the BadRequest description that repeats it)."""
ECHO_LIMIT = 256
"""Most UTF-8 bytes of one metadata string, one string inside a JSON metadata value, or a field path."""
METADATA_LIMIT = 2048
"""Most UTF-8 bytes of all ErrorInfo metadata keys and values together."""
JSON_DEPTH_LIMIT = 8
"""JSON metadata nested deeper than this is replaced by `CUT_MARK` (details are shallow by design)."""
CUT_MARK = "…[cut]"
"""Ends every text the bounds shortened, and stands for a JSON value nested too deep."""

_MARK_BYTES = len(CUT_MARK.encode())


def status_code_for(reason: str) -> grpc.StatusCode:
    """The status code of a reason; INTERNAL for one the table does not list (a bug, never a guess)."""
    return STATUS_BY_REASON.get(reason, _C.INTERNAL)


def reason_of(error: HarnessError | ServerError) -> str:
    """The ErrorInfo reason: a `ServerError`'s own, or the core's code upper-cased."""
    if isinstance(error, ServerError):
        return error.reason
    return reason_text(error.code)


def _clean(text: str) -> str:
    """`text`, a lone surrogate (possible from a decoded JSON escape) replaced by U+FFFD: proto needs UTF-8."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _size(text: str) -> int:
    return len(_clean(text).encode())


def _cut(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-8 bytes (a character boundary), ending with `CUT_MARK` if shortened."""
    text = _clean(text)
    if len(text) * 4 <= limit:  # fast path: cannot be over the limit
        return text
    data = text.encode()
    if len(data) <= limit:
        return text
    if limit < _MARK_BYTES:
        return ""
    return data[: limit - _MARK_BYTES].decode("utf-8", "ignore") + CUT_MARK


def _bounded_json(value: Any, depth: int = 1) -> JsonValue:
    """A copy of `value` with each string cut to `ECHO_LIMIT` and nesting cut at `JSON_DEPTH_LIMIT`.

    Anything that is not finite JSON (a bug in whoever built the details, but the error path must
    not fail) becomes its bounded `repr`.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _cut(value, ECHO_LIMIT)
    if isinstance(value, int):
        # Python refuses to print ints over 4 300 digits; no detail needs one anywhere near that.
        return value if value.bit_length() <= 256 else CUT_MARK
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple, dict)):
        if depth >= JSON_DEPTH_LIMIT:
            return CUT_MARK
        if isinstance(value, dict):
            return {_cut(str(key), ECHO_LIMIT): _bounded_json(item, depth + 1) for key, item in value.items()}
        return [_bounded_json(item, depth + 1) for item in value]
    return _cut(repr(value), ECHO_LIMIT)


def _fit_json(value: JsonValue, limit: int) -> tuple[str, int]:
    """Canonical JSON of `value` in at most `limit` bytes, and how many top-level entries were left out.

    An array or object keeps its first entries (an object in key order, as canonical JSON writes it)
    and stays valid JSON; a scalar that does not fit becomes `CUT_MARK` as a JSON string.
    """
    text = canonical_json(value)
    if _size(text) <= limit:
        return text, 0
    if isinstance(value, list):
        kept: list[JsonValue] = []
        used = 2  # "[]"
        for item in value:
            cost = _size(canonical_json(item)) + (1 if kept else 0)
            if used + cost > limit:
                break
            kept.append(item)
            used += cost
        return canonical_json(kept), len(value) - len(kept)
    if isinstance(value, dict):
        kept_items: dict[str, JsonValue] = {}
        used = 2  # "{}"
        for key in sorted(value):
            cost = _size(canonical_json({key: value[key]})) - 2 + (1 if kept_items else 0)
            if used + cost > limit:
                break
            kept_items[key] = value[key]
            used += cost
        return canonical_json(kept_items), len(value) - len(kept_items)
    mark = canonical_json(CUT_MARK)
    return (mark if _size(mark) <= limit else ""), 0


_KEY_LIMIT = 64
"""Most UTF-8 bytes of a metadata key (the core's keys are short identifiers)."""
_MIN_ROOM = 96
"""Metadata room below which no further key is added: a key, its `_omitted` count and a marked value."""


def _metadata(details: Mapping[str, JsonValue]) -> dict[str, str]:
    """ErrorInfo metadata for `details`: strings as they are, `supported` comma-separated, else JSON; bounded."""
    metadata: dict[str, str] = {}
    budget = METADATA_LIMIT
    for raw_key, value in details.items():
        key = _cut(str(raw_key), _KEY_LIMIT)
        room = budget - _size(key)
        if room < _MIN_ROOM:
            break
        if isinstance(value, str):
            metadata[key] = _cut(value, min(room, ECHO_LIMIT))
        elif key == "supported" and isinstance(value, list):
            joined = ",".join(
                item if isinstance(item, str) else canonical_json(_bounded_json(item)) for item in value
            )
            metadata[key] = _cut(joined, min(room, ECHO_LIMIT))
        else:
            bounded = _bounded_json(value)
            text, omitted = _fit_json(bounded, room)
            if omitted:  # make room for the count too
                count_key = f"{key}_omitted"
                entries = len(bounded) if isinstance(bounded, (list, dict)) else 0
                text, omitted = _fit_json(bounded, room - _size(count_key) - len(str(entries)))
                metadata[count_key] = str(omitted)
                budget -= _size(count_key) + len(str(omitted))
            metadata[key] = text
        budget = budget - _size(key) - _size(metadata[key])
    return metadata


def to_status(error: HarnessError | ServerError, *, field: str | None = None) -> status_pb2.Status:
    """The rich status for an error: code from the table, ErrorInfo, and BadRequest when a field is at fault.

    Every echoed text is bounded (see the module docstring), so the status fits any gRPC client's
    metadata limit.

    Args:
        error: A core error or a server error.
        field: The request field at fault (proto field path); default: what the error carries
            (`ServerError.field`, or a field recorded with `server.errors.at_field`).

    Returns:
        A `google.rpc.Status` ready for `grpc_status.rpc_status.to_status`.
    """
    reason = reason_of(error)
    code = status_code_for(reason)
    message = _cut(error.message, MESSAGE_LIMIT)
    info = error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=_metadata(error.details))
    status = status_pb2.Status(code=_INT_CODE[code], message=message)
    status.details.add().Pack(info)
    field = field if field is not None else field_of(error)
    if field is not None:
        bad_request = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=_cut(field, ECHO_LIMIT), description=message, reason=reason
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
    reason = reason_of(error)
    if (metrics := CURRENT.get()) is not None:
        metrics.rpc_errors.labels(reason, TRANSPORT.get()).inc()
    status = rpc_status.to_status(to_status(error, field=field))
    record_error(status.code, reason, error.message)
    await context.abort(status.code, status.details, status.trailing_metadata)
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises
