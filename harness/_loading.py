"""Loading a state from outside: the one check every host and the server use (SPEC §2.9).

A state arrives in one of two shapes, each with its entry point:

- `load_state`: the harness state JSON (SPEC §2.1.2), or its mapping, validated as `HarnessState`.
- `load_state_parts`: a state held as separate pieces (the gRPC envelope's fields). Each piece is checked
  by its own rule and the first one that fails is reported by name; nothing is assembled as text, so no
  piece can spill into another. The result is the state `load_state` gives for the same content.

Both read `schema_version` first: anything but a supported version wins over whatever else is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from ._history_codec import INVALID_HISTORY, InvalidHistory, decode_history_json
from ._state_model import StateModel
from .errors import ErrorCode, StateError
from .json_text import JsonTextError, JsonValue, NotFiniteJson, check_finite_json, parse_json
from .state import (
    SUPPORTED_SCHEMA_VERSIONS,
    AgentContextStateSnapshot,
    CapabilityState,
    EnvironmentState,
    HarnessState,
    StoredRef,
    ThreadId,
)

__all__ = (
    "CapabilityStatePart",
    "EnvironmentStatePart",
    "StoredRefPart",
    "check_schema_version",
    "load_state",
    "load_state_parts",
)


# --- the state JSON --------------------------------------------------------------------------------------


def check_schema_version(received: object) -> None:
    """Refuse a `schema_version` this core does not read: the first check of every load (SPEC §2.9).

    Raises:
        StateError: `schema_version_unsupported`, details `received` (the value, or its repr when it is
            not JSON) and `supported`.
    """
    if received in SUPPORTED_SCHEMA_VERSIONS:
        return
    try:
        shown = check_finite_json(received)
    except NotFiniteJson:
        shown = repr(received)
    raise StateError(
        f"State schema_version {shown!r} is not supported; supported: {', '.join(SUPPORTED_SCHEMA_VERSIONS)}.",
        code=ErrorCode.SCHEMA_VERSION_UNSUPPORTED,
        details={"received": shown, "supported": list(SUPPORTED_SCHEMA_VERSIONS)},
    )


def _invalid(exc: ValidationError) -> StateError:
    errors: list[JsonValue] = [
        {"loc": list(error["loc"]), "type": error["type"], "msg": error["msg"]}
        for error in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
    return StateError(
        f"State is invalid: {exc.error_count()} validation error(s).",
        code=ErrorCode.STATE_INVALID,
        details={"errors": errors},
    )


def load_state(data: bytes | bytearray | memoryview | str | Mapping[str, Any]) -> HarnessState:
    """Load a state from outside (a host's store, the wire): the check every host and the server use.

    `schema_version` is read first: anything but a supported version (missing included) is refused as
    unsupported, whatever else is wrong. Otherwise the state is validated as `HarnessState`.

    Args:
        data: The state's JSON text (bytes or str), or its Python/JSON-mode mapping.

    Returns:
        The validated state.

    Raises:
        StateError: `schema_version_unsupported` (details `received`, `supported`), or `state_invalid`
            (details `errors`: `loc`, `type`, `msg` of each validation error; also for data that is
            not a JSON object).
    """
    if type(data) is not bytes and type(data) is not str:  # JSON text, the wire's case, skips all this
        if isinstance(data, Mapping):
            check_schema_version(data.get("schema_version"))
            try:
                return HarnessState.model_validate(dict(data))
            except ValidationError as exc:
                raise _invalid(exc) from None
        if isinstance(data, bytearray | memoryview):
            data = bytes(data)
        elif not isinstance(data, bytes | str):
            raise StateError(
                f"State data must be JSON text or a mapping, not {type(data).__name__}.",
                code=ErrorCode.STATE_INVALID,
                details={
                    "errors": [
                        {"loc": [], "type": "model_type", "msg": "Input should be JSON text or a mapping"}
                    ]
                },
            )
    try:
        # The common case first: a valid state has a supported version, so it needs no separate look.
        # The validator itself: `model_validate_json` only forwards to it, at ~1 µs a call.
        state: HarnessState = HarnessState.__pydantic_validator__.validate_json(data)
        return state
    except ValidationError as exc:
        failure = exc
    try:
        parsed = from_json(data, allow_inf_nan=True)
    except ValueError:
        raise _invalid(failure) from None
    if isinstance(parsed, dict):
        check_schema_version(parsed.get("schema_version"))
    raise _invalid(failure) from None


# --- load_state_parts --------------------------------------------------------------------------------


class CapabilityStatePart(NamedTuple):
    """One capability namespace as separate pieces (the envelope's `CapabilityState`)."""

    capability_id: str
    version: str
    data_json: str
    """The payload as JSON text; stored canonically."""


class EnvironmentStatePart(NamedTuple):
    """One mount's portable provider state as separate pieces (the envelope's `EnvironmentState`)."""

    mount_name: str
    provider_key: str
    state_version: str
    state_json: str
    """The provider state as JSON text; stored canonically."""


class StoredRefPart(NamedTuple):
    """One host store reference as separate pieces (the envelope's `StoredRef`)."""

    key: str
    digest: str
    size: int


_KNOWN_KEYS = frozenset(HarnessState.model_fields)
_PART_NAMES = {"data": "data_json", "state": "state_json"}
_THREAD_ID: TypeAdapter[str] = TypeAdapter(ThreadId)


def _part_error(loc: list[JsonValue], error_type: str, msg: str) -> StateError:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    return StateError(
        f"State is invalid at {path}: {msg}",
        code=ErrorCode.STATE_INVALID,
        details={"errors": [{"loc": loc, "type": error_type, "msg": msg}]},
    )


def _part_invalid(where: list[JsonValue], exc: ValidationError) -> StateError:
    errors: list[JsonValue] = [
        {
            "loc": [*where, *(_PART_NAMES.get(p, p) if isinstance(p, str) else p for p in error["loc"])],
            "type": error["type"],
            "msg": error["msg"],
        }
        for error in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
    first = errors[0]
    assert isinstance(first, dict) and isinstance(first["loc"], list) and isinstance(first["msg"], str)
    failure = _part_error(first["loc"], str(first["type"]), first["msg"])
    failure.details["errors"] = errors
    return failure


def _parsed(text: str, loc: list[JsonValue]) -> JsonValue:
    try:
        return parse_json(text)
    except JsonTextError as error:
        raise _part_error(loc, "json_invalid", f"{loc[-1]} is {error}") from None


def _built(model: type[StateModel], where: list[JsonValue], **values: Any) -> Any:
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise _part_invalid(where, exc) from None


def _extra(text: str) -> dict[str, JsonValue]:
    if not text:
        return {}
    value = _parsed(text, ["extra_json"])
    if not isinstance(value, dict):
        raise _part_error(["extra_json"], "value_error", "extra_json must be one JSON object.")
    clash = sorted(_KNOWN_KEYS.intersection(value))
    if clash:
        raise _part_error(["extra_json"], "value_error", f"extra_json repeats the state field {clash[0]!r}.")
    return value


def load_state_parts(
    *,
    schema_version: str,
    thread_id: str,
    message_history_json: bytes,
    capability_states: Sequence[CapabilityStatePart] = (),
    environment_states: Sequence[EnvironmentStatePart] = (),
    refs: Sequence[StoredRefPart] = (),
    extra_json: str = "",
    pause: Callable[[], None] | None = None,
) -> HarnessState:
    """Load a state held as separate pieces (the gRPC envelope's fields), each checked by its own rule.

    The result is the state `load_state` gives for the same content. `schema_version` is read first and
    wins over anything else wrong; then the thread ID, the capability namespaces, refs, unknown keys and
    environment states, in that order; the history, the only large piece, last. The first piece that
    fails is reported; nothing is assembled as text, so no piece can spill into another.

    Args:
        schema_version: The state's `schema_version`.
        thread_id: The thread's ID.
        message_history_json: The history as native JSON (`ModelMessagesTypeAdapter` form).
        capability_states: The namespaces, in order; IDs unique.
        environment_states: The mounts' provider states, in order; mount names unique.
        refs: Host store references, in order.
        extra_json: One JSON object of unknown top-level keys, in order (`""` = none).
        pause: Called between pieces of a large history (`harness._history_codec.CHUNK_BYTES`); run the
            load in a worker thread and raise from `pause` to stop it.

    Raises:
        StateError: `schema_version_unsupported` (details `received`, `supported`), or `state_invalid` with
            details `errors` whose `loc` names the failing piece by these parameters' names
            (`["capability_states", 0, "data_json"]`, `["message_history_json"]`, `["extra_json"]`, ...).
    """
    check_schema_version(schema_version)
    try:
        _THREAD_ID.validate_python(thread_id)
    except ValidationError as exc:
        raise _part_invalid(["thread_id"], exc) from None
    entries: dict[str, CapabilityState] = {}
    for i, cap in enumerate(capability_states):
        where: list[JsonValue] = ["capability_states", i]
        if not cap.capability_id.strip():
            raise _part_error([*where, "capability_id"], "value_error", "Capability IDs must not be blank.")
        if cap.capability_id in entries:
            raise _part_error(
                [*where, "capability_id"], "value_error", f"Capability {cap.capability_id!r} appears twice."
            )
        entries[cap.capability_id] = _built(
            CapabilityState, where, version=cap.version, data=_parsed(cap.data_json, [*where, "data_json"])
        )
    stored = tuple(
        _built(StoredRef, ["refs", i], key=ref.key, digest=ref.digest, size=ref.size)
        for i, ref in enumerate(refs)
    )
    extra = _extra(extra_json)
    environments: dict[str, EnvironmentState] = {}
    for i, env in enumerate(environment_states):
        where = ["environment_states", i]
        if env.mount_name in environments:
            raise _part_error(
                [*where, "mount_name"], "value_error", f"Mount {env.mount_name!r} appears twice."
            )
        environments[env.mount_name] = _built(
            EnvironmentState,
            where,
            provider_key=env.provider_key,
            state_version=env.state_version,
            state=_parsed(env.state_json, [*where, "state_json"]),
        )
    try:
        history = decode_history_json(message_history_json, pause=pause)
    except InvalidHistory:
        raise _part_error(["message_history_json"], "value_error", INVALID_HISTORY) from None
    pieces: dict[str, Any] = {
        "schema_version": schema_version,
        "thread_id": thread_id,
        "agent_context_state": AgentContextStateSnapshot(entries=entries),
        "refs": stored,
        **extra,
        "message_history": history,
        "environment_states": environments,
    }
    loaded: HarnessState = HarnessState.__pydantic_validator__.validate_python(pieces)
    return loaded
