"""`HarnessState` <-> `threadline.v1.HarnessState`, both directions side by side.

The envelope mirrors the core's state one to one (DESIGN "State envelope"). Decoding re-implements no
rule of the core: it checks what exists on the wire alone, then hands the envelope's fields, each as
the piece it is, to `harness.load_state_parts`, which validates each with its own rule and names the
piece that failed; the mapping turns that name into the proto path. In order:

1. `schema_version` (the core's rule and error: an unsupported version wins over anything else wrong);
2. `MessageHistory.format` / `format_version` (`history_format_unsupported`);
3. `MessageHistory.sha256` when present (`HISTORY_DIGEST_MISMATCH`), before any parsing;
4. `load_state_parts` (`state_invalid`, ...), the history last;
5. `MessageHistory.message_count` when present (not 0) against the parsed history
   (`HISTORY_DIGEST_MISMATCH`).

Performance: the history is the only large value; it is parsed once (by the core, which also stores its
native dump) and never copied into another text. Encoding reuses those stored bytes
(`message_history_json()`), so an envelope round trip costs about what `ModelMessagesTypeAdapter`'s own
validate + dump costs, plus a SHA-256. A large history is validated in pieces with `pause` between them,
so a caller in a worker thread can stop it (`server.offloop`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from threadline.v1 import state_pb2

from harness import (
    CapabilityStatePart,
    EnvironmentStatePart,
    HarnessState,
    JsonValue,
    StateError,
    StoredRefPart,
    check_schema_version,
    load_state,
    load_state_parts,
)
from harness.errors import ErrorCode
from harness.state import SUPPORTED_SCHEMA_VERSIONS

from ..errors import ServerError, ServerReason, at_field

__all__ = (
    "HISTORY_FORMAT",
    "HISTORY_FORMAT_VERSIONS",
    "SCHEMA_VERSIONS",
    "fill_state",
    "state_from_pb",
    "state_json_to_pb",
    "state_to_json",
    "state_to_pb",
)

HISTORY_FORMAT = "pydantic-ai.model-messages+json"
"""`MessageHistory.format` of the native pydantic-ai message JSON, the only format this server reads."""

HISTORY_FORMAT_VERSIONS: tuple[str, ...] = ("1",)
"""Threadline's versions of `HISTORY_FORMAT`: "1" = `ModelMessagesTypeAdapter` JSON of pydantic-ai 2.x."""

SCHEMA_VERSIONS: tuple[str, ...] = SUPPORTED_SCHEMA_VERSIONS
"""The envelope `schema_version`s this server accepts: exactly the core's (`GetServerInfo` lists them)."""


# --- core -> proto ----------------------------------------------------------------------------------


def state_to_pb(state: HarnessState) -> state_pb2.HarnessState:
    """Encode a state as the envelope; the history bytes are the state's stored native JSON, verbatim."""
    msg = state_pb2.HarnessState()
    fill_state(msg, state)
    return msg


def fill_state(msg: state_pb2.HarnessState, state: HarnessState, *, history_data: bool = True) -> None:
    """`state_to_pb`, written into an empty `msg`; without `history_data`, `data` and `sha256` stay empty.

    Fields are set in place: passing messages to a constructor copies each into its parent. The
    repeated fields are read only when the state has entries: an empty one still costs a copy and a loop.
    """
    msg.schema_version = state.schema_version
    msg.thread_id = state.thread_id
    history = msg.message_history
    history.format = HISTORY_FORMAT
    history.format_version = HISTORY_FORMAT_VERSIONS[-1]
    history.message_count = state.message_count()
    if history_data:
        data = state.message_history_json()
        # Bytes, not str: upb checks the UTF-8 and copies it once, with no str in between.
        history.data = data  # type: ignore[assignment]  # the stub only lists str; upb accepts UTF-8 bytes
        history.sha256 = hashlib.sha256(data).digest()
    entries = state.agent_context_state.entries
    if entries:
        add_capability = msg.capability_states.add
        for capability_id, entry in entries.items():
            add_capability(capability_id=capability_id, version=entry.version, data_json=entry.data_json())
    environments = state.environment_states
    if environments:
        add_environment = msg.environment_states.add
        for mount_name, env in environments.items():
            add_environment(
                mount_name=mount_name,
                provider_key=env.provider_key,
                state_version=env.state_version,
                state_json=env.state_json(),
            )
    refs = state.refs
    if refs:
        add_ref = msg.refs.add
        for ref in refs:
            add_ref(key=ref.key, digest=ref.digest, size=ref.size)
    # The contract never writes `{}`: no unknown keys is the empty string.
    extra = state.extra_fields_json()
    if extra != "{}":
        msg.extra_json = extra


def state_to_json(state: HarnessState) -> str:
    """The harness state JSON of a state (`ValidateStateResponse.state_json`)."""
    return state.model_dump_json()


# --- proto -> core ----------------------------------------------------------------------------------


def state_from_pb(
    msg: state_pb2.HarnessState,
    *,
    field: str = "spec.previous_state",
    pause: Callable[[], None] | None = None,
) -> HarnessState:
    """Decode a host's envelope strictly (module docstring), or raise.

    Args:
        msg: The envelope as received.
        field: The envelope's path in the request, prefixed to every `BadRequest` field.
        pause: Called between pieces of a large history (`harness.load_state_parts`).

    Returns:
        The validated state; `state_to_pb` of it re-encodes the same envelope.

    Raises:
        StateError: `schema_version_unsupported`, `history_format_unsupported` or `state_invalid`
            (the offending field recorded with `server.errors.at_field`).
        ServerError: `HISTORY_DIGEST_MISMATCH` for a wrong `sha256` or `message_count`.
    """
    version = msg.schema_version
    try:
        check_schema_version(version)  # the core's rule, first: it wins over anything else wrong
    except StateError as error:
        raise at_field(error, _join(field, "schema_version")) from None
    history = msg.message_history
    if history.format != HISTORY_FORMAT:
        raise _unsupported_history("format", history.format, [HISTORY_FORMAT], field)
    if history.format_version not in HISTORY_FORMAT_VERSIONS:
        raise _unsupported_history(
            "format_version", history.format_version, list(HISTORY_FORMAT_VERSIONS), field
        )
    data = history.data.encode()
    digest = history.sha256
    if digest:
        computed = hashlib.sha256(data).digest()
        if computed != digest:
            raise ServerError(
                ServerReason.HISTORY_DIGEST_MISMATCH,
                "message_history.sha256 does not match the SHA-256 of message_history.data.",
                details={"received": digest.hex(), "computed": computed.hex()},
                field=_join(field, "message_history.sha256"),
            )
    state = _loaded(
        lambda: load_state_parts(
            schema_version=version,
            thread_id=msg.thread_id,
            message_history_json=data,
            capability_states=[
                CapabilityStatePart(cap.capability_id, cap.version, cap.data_json)
                for cap in msg.capability_states
            ],
            environment_states=[
                EnvironmentStatePart(env.mount_name, env.provider_key, env.state_version, env.state_json)
                for env in msg.environment_states
            ],
            refs=[StoredRefPart(ref.key, ref.digest, ref.size) for ref in msg.refs],
            extra_json=msg.extra_json,
            pause=pause,
        ),
        field,
    )
    expected = history.message_count
    if expected and expected != state.message_count():
        raise ServerError(
            ServerReason.HISTORY_DIGEST_MISMATCH,
            f"message_count is {expected}, but the history holds {state.message_count()} messages.",
            details={"received": expected, "computed": state.message_count()},
            field=_join(field, "message_history.message_count"),
        )
    return state


def state_json_to_pb(text: str | bytes) -> state_pb2.HarnessState:
    """Load harness state JSON with the core's rules and encode it as the envelope."""
    return state_to_pb(load_state(text))


def _loaded(load: Callable[[], HarnessState], field: str) -> HarnessState:
    try:
        return load()
    except StateError as error:
        raise at_field(error, _proto_path(error, field)) from None


# The core names a failing piece by `load_state_parts`'s parameters; the envelope's names differ in two.
_PIECE_FIELD = {"message_history_json": "message_history.data", "extra_json": "extra_json"}


def _proto_path(error: StateError, prefix: str) -> str:
    """The envelope field a core error names (its first `loc`), as a proto path under `prefix`."""
    errors = error.details.get("errors")
    loc: JsonValue = (
        errors[0].get("loc") if isinstance(errors, list) and errors and isinstance(errors[0], dict) else None
    )
    if not isinstance(loc, list) or not loc or not isinstance(loc[0], str):
        return prefix
    head = loc[0]
    if head in _PIECE_FIELD:
        return _join(prefix, _PIECE_FIELD[head])
    path = head + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:3])
    return _join(prefix, path)


def _join(prefix: str, path: str) -> str:
    """`path` under the envelope's own path in the request (`""` for a request's top-level fields)."""
    return f"{prefix}.{path}" if prefix else path


def _unsupported_history(which: str, received: str, supported: list[JsonValue], field: str) -> StateError:
    shown = received or "(empty)"
    return at_field(
        StateError(
            f"History {which} {shown!r} is not supported; supported: {', '.join(map(str, supported))}.",
            code=ErrorCode.HISTORY_FORMAT_UNSUPPORTED,
            details={"received": received, "supported": supported},
        ),
        _join(field, f"message_history.{which}"),
    )
