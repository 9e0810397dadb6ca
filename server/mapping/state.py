"""`HarnessState` <-> `threadline.v1.HarnessState`, both directions side by side.

The envelope mirrors the core's state one to one (DESIGN "State envelope"). Decoding does not
re-implement a single rule of the core: it assembles the harness state JSON (SPEC §2.1.2) straight from
the envelope's fields and hands it to `harness.load_state`, which reads `schema_version` first and
validates everything else. Only the checks that exist on the wire alone live here, in this order:

1. `schema_version` (the core's rule and error: an unsupported version wins over anything else wrong);
2. `MessageHistory.format` / `format_version` (`history_format_unsupported`);
3. `MessageHistory.sha256` when present (`HISTORY_DIGEST_MISMATCH`), before any parsing;
4. `load_state` on the assembled JSON (`state_invalid`, ...);
5. `MessageHistory.message_count` against the parsed history (`HISTORY_DIGEST_MISMATCH`).

Performance: the history is the only large value, and it is parsed exactly once (by `load_state`, which
also stores the native dump). Encoding reuses those stored bytes (`message_history_json()`), so an
envelope round trip costs about what `ModelMessagesTypeAdapter`'s own validate + dump costs, plus a
SHA-256. The small JSON pieces (capability data, environment state, extra keys) are checked to be one
JSON value each before they are spliced in, so no field can smuggle keys into another.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from pydantic_core import from_json
from threadline.v1 import state_pb2

from harness import HarnessState, StateError, load_state
from harness.errors import ErrorCode, JsonValue
from harness.state import SUPPORTED_SCHEMA_VERSIONS

from ..errors import ServerError, ServerReason, at_field

__all__ = (
    "HISTORY_FORMAT",
    "HISTORY_FORMAT_VERSIONS",
    "SCHEMA_VERSIONS",
    "fill_state",
    "state_from_pb",
    "state_json_from_pb",
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

_KNOWN_KEYS = frozenset(
    {"schema_version", "thread_id", "agent_context_state", "refs", "message_history", "environment_states"}
)


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


# --- proto -> core ----------------------------------------------------------------------------------


def state_from_pb(msg: state_pb2.HarnessState, *, field: str = "spec.previous_state") -> HarnessState:
    """Decode a host's envelope strictly (module docstring), or raise.

    Args:
        msg: The envelope as received.
        field: The envelope's path in the request, prefixed to every `BadRequest` field.

    Returns:
        The validated state; `state_to_pb` of it re-encodes the same envelope.

    Raises:
        StateError: `schema_version_unsupported`, `history_format_unsupported` or `state_invalid`
            (the offending field recorded with `server.errors.at_field`).
        ServerError: `HISTORY_DIGEST_MISMATCH` for a wrong `sha256` or `message_count`.
    """
    document, data = _assemble(msg, field)
    try:
        state = load_state(document)
    except StateError as error:
        raise at_field(error, _field_for(error, field)) from None
    if state.message_history_json() != data:
        # Not the native bytes the server writes (a host re-formatted or built it): prove `data` is one
        # JSON value, so it cannot have carried top-level keys into the document after the history.
        try:
            from_json(data)
        except ValueError:
            raise _invalid(
                "message_history.data is not one JSON array.", f"{field}.message_history.data"
            ) from None
    count = state.message_count()
    if count != msg.message_history.message_count:
        raise ServerError(
            ServerReason.HISTORY_DIGEST_MISMATCH,
            f"message_count is {msg.message_history.message_count}, but the history holds {count} messages.",
            details={"received": msg.message_history.message_count, "computed": count},
            field=f"{field}.message_history.message_count",
        )
    return state


def state_json_from_pb(msg: state_pb2.HarnessState, *, field: str = "spec.previous_state") -> bytes:
    """The harness state JSON (SPEC §2.1.2) an envelope stands for, after the wire-only checks 1-3.

    `load_state` of it is the decode; `state_from_pb` adds the count check. The history is last, so its
    bytes are spliced in untouched and followed only by the closing brace.
    """
    return _assemble(msg, field)[0]


def state_json_to_pb(text: str | bytes) -> state_pb2.HarnessState:
    """Load harness state JSON with the core's rules and encode it as the envelope."""
    return state_to_pb(load_state(text))


def state_to_json(state: HarnessState) -> str:
    """The harness state JSON of a state (`ValidateStateResponse.state_json`)."""
    return state.model_dump_json()


def _assemble(msg: state_pb2.HarnessState, field: str) -> tuple[bytes, bytes]:
    version = msg.schema_version
    if version not in SCHEMA_VERSIONS:
        _reject_version(version, f"{field}.schema_version")
    history = msg.message_history
    history_format = history.format
    if history_format != HISTORY_FORMAT:
        raise _unsupported_history("format", history_format, [HISTORY_FORMAT], field)
    format_version = history.format_version
    if format_version not in HISTORY_FORMAT_VERSIONS:
        raise _unsupported_history("format_version", format_version, list(HISTORY_FORMAT_VERSIONS), field)
    data = history.data.encode()
    digest = history.sha256
    if digest:
        computed = hashlib.sha256(data).digest()
        if computed != digest:
            raise ServerError(
                ServerReason.HISTORY_DIGEST_MISMATCH,
                "message_history.sha256 does not match the SHA-256 of message_history.data.",
                details={"received": digest.hex(), "computed": computed.hex()},
                field=f"{field}.message_history.sha256",
            )
    # Most envelopes have no capability, ref, unknown key or mount: an empty repeated field is only
    # tested, never looped over. The pieces are checked in field order, so the first error is the same.
    capabilities = msg.capability_states
    entries = _capabilities(capabilities, field) if capabilities else ""
    refs = msg.refs
    stored = _refs(refs) if refs else ""
    extra = msg.extra_json
    members = _extra_members(extra, f"{field}.extra_json") if extra else ""
    environments = msg.environment_states
    mounts = _environments(environments, field) if environments else ""
    head = (
        f'{{"schema_version":{_str(version)},"thread_id":{_str(msg.thread_id)},'
        f'"agent_context_state":{{"entries":{{{entries}}}}},"refs":[{stored}]{members},'
        f'"environment_states":{{{mounts}}},"message_history":'
    )
    return b"".join((head.encode(), data, b"}")), data


def _capabilities(capabilities: Iterable[state_pb2.CapabilityState], field: str) -> str:
    parts: list[str] = []
    seen: set[str] = set()
    for i, cap in enumerate(capabilities):
        where = f"{field}.capability_states[{i}]"
        if cap.capability_id in seen:
            raise _invalid(f"Capability {cap.capability_id!r} appears twice.", f"{where}.capability_id")
        seen.add(cap.capability_id)
        data = _one_value(cap.data_json, f"{where}.data_json")
        parts.append(f'{_str(cap.capability_id)}:{{"version":{_str(cap.version)},"data":{data}}}')
    return ",".join(parts)


def _refs(refs: Iterable[state_pb2.StoredRef]) -> str:
    return ",".join(
        f'{{"key":{_str(ref.key)},"digest":{_str(ref.digest)},"size":{ref.size}}}' for ref in refs
    )


def _environments(environments: Iterable[state_pb2.EnvironmentState], field: str) -> str:
    parts: list[str] = []
    seen: set[str] = set()
    for i, env in enumerate(environments):
        where = f"{field}.environment_states[{i}]"
        if env.mount_name in seen:
            raise _invalid(f"Mount {env.mount_name!r} appears twice.", f"{where}.mount_name")
        seen.add(env.mount_name)
        state = _one_value(env.state_json, f"{where}.state_json")
        parts.append(
            f'{_str(env.mount_name)}:{{"provider_key":{_str(env.provider_key)},'
            f'"state_version":{_str(env.state_version)},"state":{state}}}'
        )
    return ",".join(parts)


# `json.dumps(value, ensure_ascii=False)`, without building a new encoder on every call.
_str = json.JSONEncoder(ensure_ascii=False).encode


def _reject_version(received: str, field: str) -> None:
    # The core owns the rule and the error (`received`, `supported`); a mapping holding only the
    # version is enough for `load_state` to refuse it.
    try:
        load_state({"schema_version": received})
    except StateError as error:
        raise at_field(error, field) from None
    raise AssertionError("load_state accepted an unsupported schema_version")  # pragma: no cover


def _unsupported_history(which: str, received: str, supported: list[JsonValue], field: str) -> StateError:
    shown = received or "(empty)"
    return at_field(
        StateError(
            f"History {which} {shown!r} is not supported; supported: {', '.join(map(str, supported))}.",
            code=ErrorCode.HISTORY_FORMAT_UNSUPPORTED,
            details={"received": received, "supported": supported},
        ),
        f"{field}.message_history.{which}",
    )


def _invalid(message: str, field: str, *, error_type: str = "value_error") -> StateError:
    loc = field.split(".")[-1]
    return at_field(
        StateError(
            f"State is invalid: {message}",
            code=ErrorCode.STATE_INVALID,
            details={"errors": [{"loc": [loc], "type": error_type, "msg": message}]},
        ),
        field,
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate object key")
    return result


def _parse(text: str, field: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise _invalid(
            f"{field.split('.')[-1]} is not one JSON value ({exc}).", field, error_type="json_invalid"
        ) from None


def _one_value(text: str, field: str) -> str:
    """`text` if it is exactly one JSON value (the core then checks and canonicalises it)."""
    _parse(text, field)
    return text


def _extra_members(text: str, field: str) -> str:
    """`,` and the members of `extra_json` (one JSON object, no known or repeated keys), or nothing."""
    value = _parse(text, field)
    if not isinstance(value, dict):
        raise _invalid("extra_json must be one JSON object.", field)
    clash = sorted(_KNOWN_KEYS.intersection(value))
    if clash:
        raise _invalid(f"extra_json repeats the envelope field {clash[0]!r}.", field)
    # One parsed object: its members are exactly what lies between the outermost braces.
    members = text.strip()[1:-1].strip()
    return f",{members}" if members else ""


_PROTO_FIELD = {
    "schema_version": "schema_version",
    "thread_id": "thread_id",
    "agent_context_state": "capability_states",
    "refs": "refs",
    "message_history": "message_history.data",
    "environment_states": "environment_states",
}


def _field_for(error: StateError, prefix: str) -> str:
    """The envelope field a core validation error points at (the first error's location)."""
    errors = error.details.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        loc = errors[0].get("loc")
        if isinstance(loc, list) and loc and isinstance(loc[0], str):
            name = _PROTO_FIELD.get(loc[0], "extra_json")
            if loc[0] == "refs" and len(loc) > 1 and isinstance(loc[1], int):
                return f"{prefix}.refs[{loc[1]}]"
            return f"{prefix}.{name}"
        if isinstance(loc, list) and not loc:
            # The document itself does not parse: every other spliced piece was checked to be one JSON
            # value, so the history text is what broke it.
            return f"{prefix}.message_history.data"
    return prefix
