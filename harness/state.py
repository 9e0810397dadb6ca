"""`HarnessState`, the portable continuation value of one Thread (SPEC §2.1), and `load_state` (§2.9).

Storage is not access. Every value a state hands out must be detached (SPEC §2.0), so the models keep
immutable encoded forms and decode a fresh value on each read:

- `message_history` is kept as the native JSON bytes of the validated messages (exactly what
  `ModelMessagesTypeAdapter.dump_json` writes). Validating a state's JSON validates the history once,
  in pydantic-core, and dumps it once; `model_dump_json()` then splices the stored bytes, so a
  round trip costs about what the native adapter's own round trip costs. Reads decode new messages.
- Capability `data` and environment `state` are kept as canonical JSON text (`_json.canonical_json`).
- Unknown top-level keys are kept as checked finite-JSON copies, in input order.

The encoded forms live in the fields' `__dict__` slots; a property installed on the class after pydantic
built it (`_read_through`) turns each read into a fresh value. Validation, `__init__`, `model_copy`
and frozen-assignment errors stay pydantic's own.

`model_dump_json()` with default arguments is hand-assembled (the key order of §2.1.2, the stored bytes
and canonical texts verbatim); any other arguments go through pydantic's serializer, which writes the same
keys in the same order but formats floats inside capability data and environment state the pydantic way
(`1e16` rather than `1e+16`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import operator
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    RootModel,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.main import IncEx
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_core import (
    CoreSchema,
    InitErrorDetails,
    PydanticCustomError,
    PydanticSerializationError,
    SchemaSerializer,
    core_schema,
    from_json,
    to_json,
)
from pydantic_core.core_schema import SerializationInfo

from ._json import NotFiniteJson, canonical_json, check_finite_json, json_depth_and_nodes
from .errors import ErrorCode, JsonValue, StateError

__all__ = (
    "SUPPORTED_SCHEMA_VERSIONS",
    "THREAD_ID_PATTERN",
    "AgentContextStateSnapshot",
    "CapabilityState",
    "EnvironmentState",
    "HarnessState",
    "StoredRef",
    "load_state",
)

SUPPORTED_SCHEMA_VERSIONS: tuple[str, ...] = ("1",)
"""The `schema_version` values this core reads and writes (SPEC §2.9)."""

THREAD_ID_PATTERN = r"^(?:thread-[a-f0-9]{32}|[a-z][a-z0-9]*_[a-z0-9]+)$"
"""Thread IDs, kept exactly as the reference library has them so states stay exchangeable."""

_INVALID_HISTORY = "Invalid Agent message history."
_ENV_STATE_MAX_BYTES = 1024 * 1024
_ENV_STATE_MAX_DEPTH = 32
_ENV_STATE_MAX_NODES = 10_000


# --- encoded forms --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Canonical:
    """A finite JSON value stored as its canonical text (keys sorted, compact, UTF-8)."""

    text: str

    def decode(self) -> JsonValue:
        value: JsonValue = json.loads(self.text)
        return value


@dataclass(frozen=True, slots=True)
class _EncodedHistory:
    """Validated native messages, stored as the bytes `ModelMessagesTypeAdapter.dump_json` writes."""

    json: bytes
    count: int
    last_start: int = -1
    """Where the last message starts in `json`: `_extend_history` keeps the bytes before it and re-dumps
    from there. -1 for an empty history, `_UNKNOWN` when not computed yet (`HistoryEncoder` does)."""
    fresh: list[list[ModelMessage]] = dataclasses.field(default_factory=list, compare=False, repr=False)
    """The message objects validation built, kept for the one run that continues this history
    (`take`), so it does not validate the same JSON a second time. Nobody else ever sees them."""

    def decode(self) -> list[ModelMessage]:
        return ModelMessagesTypeAdapter.validate_json(self.json)

    def take(self) -> list[ModelMessage]:
        """The messages as new objects: validation's own the first time (if kept), decoded after."""
        try:
            return self.fresh.pop()
        except IndexError:
            return self.decode()


_EMPTY_HISTORY = _EncodedHistory(b"[]", 0)
_UNKNOWN = -2


# The native adapter's serializer, except that non-finite floats are written as `NaN`/`Infinity` instead
# of `null`: the adapter would otherwise turn them into nulls silently, and a state must not hold them.
# For finite data the bytes are the adapter's own (checked by the tests).
@functools.cache
def _history_serializer() -> SchemaSerializer:
    # Built on first use: the native adapter defers its own schema build to keep imports fast.
    ModelMessagesTypeAdapter.rebuild()
    return SchemaSerializer(
        ModelMessagesTypeAdapter.core_schema,
        core_schema.CoreConfig(ser_json_bytes="base64", ser_json_inf_nan="constants"),
    )


class _HistoryRoot(RootModel[list[ModelMessage]]):
    """Carries the adapter's own config, so the envelope's config never leaks into message dataclasses."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")


def _reject_constant(token: str) -> Any:
    raise ValueError(f"non-finite number {token}")


def _dump(messages: list[ModelMessage]) -> bytes:
    data = _history_serializer().to_json(messages, warnings="error")
    # Cheap C-level scans; only a hit pays for the full parse that tells tokens from string content.
    # A one-byte search is a `memchr`, many times faster than a substring search, so the substring is
    # looked for only when its capital letter occurs at all.
    if (b"N" in data and b"NaN" in data) or (b"I" in data and b"Infinity" in data):
        json.loads(data, parse_constant=_reject_constant)
    return data


def _encode_history(messages: Sequence[ModelMessage]) -> _EncodedHistory:
    """Dump validated messages once; refuse what would not load back (bad objects, non-finite numbers).

    The last message is dumped on its own, so its start is known: a JSON array is `[`, the items joined
    by `,`, and `]`, so the joined bytes are exactly the one-piece dump.
    """
    messages = list(messages)
    if len(messages) < 2:
        return _EncodedHistory(_dump(messages), len(messages), 1 if messages else -1)
    head = _dump(messages[:-1])
    last = _dump(messages[-1:])
    return _EncodedHistory(b"".join((head[:-1], b",", last[1:])), len(messages), len(head))


def _extend_history(base: _EncodedHistory, messages: Sequence[ModelMessage]) -> _EncodedHistory:
    """Encode `messages`, whose first `base.count - 1` messages are exactly base's own, unchanged.

    Their bytes are reused; the rest (base's last message included: native runs update the tail of
    a history in place) is dumped. The caller proves "exactly" by identity (`HistoryEncoder`).
    """
    keep = base.count - 1
    tail = list(messages[keep:])
    if keep < 1 or base.last_start < 1 or not tail:
        return _encode_history(messages)
    prefix = base.json[: base.last_start]  # `[m0,...,m(keep-1),`
    encoded = _encode_history(tail)
    return _EncodedHistory(
        prefix + encoded.json[1:], keep + encoded.count, len(prefix) - 1 + encoded.last_start
    )


class HistoryEncoder:
    """Encodes the successive histories of one run, dumping only what is new since the last one.

    A run's history grows at its end: the messages it started from, then each request and response.
    Native runs only ever update the last message of a history in place, so every message before the
    last one encoded is reused by identity, with its bytes; a history that differs earlier (a rewritten
    system prompt, a normalised interrupted turn) is simply dumped whole.
    """

    __slots__ = ("_encoded", "_messages")

    def __init__(self, encoded: _EncodedHistory | None, messages: Sequence[ModelMessage]) -> None:
        """Start from `encoded`, the bytes of `messages` (before the run touches any of them)."""
        messages = list(messages)
        if encoded is not None and encoded.last_start == _UNKNOWN and messages:
            # The stored bytes end with the last message's own dump and `]`.
            last = len(_dump(messages[-1:])) - 1
            encoded = _EncodedHistory(encoded.json, encoded.count, len(encoded.json) - last)
        self._encoded = encoded
        self._messages = messages

    def encode(self, history: Sequence[ModelMessage]) -> _EncodedHistory:
        """The encoded form of `history`, as `_encode_history` would write it."""
        history = list(history)
        base = self._encoded
        if base is not None and base.count >= 2 and len(self._messages) == base.count:
            keep = base.count - 1
            if len(history) > keep and all(map(operator.is_, history[:keep], self._messages[:keep])):
                encoded = _extend_history(base, history)
            else:
                encoded = _encode_history(history)
        else:
            encoded = _encode_history(history)
        self._encoded, self._messages = encoded, history
        return encoded


def _encode_root(root: _HistoryRoot) -> _EncodedHistory:
    # JSON input: the messages are new objects nobody else holds, so the next run may take them. One
    # dump: most loaded states are never extended, and a run that extends one finds its last message.
    messages = root.root
    return _EncodedHistory(_dump(messages), len(messages), _UNKNOWN if messages else -1, [messages])


def _encode_root_checked(root: _HistoryRoot) -> _EncodedHistory:
    # Python input may hold message objects built by hand, which the native schema accepts as they are
    # and the serializer writes without complaint even when they are wrong (`ModelRequest(parts=[42])`).
    # Loading the bytes back proves the stored history is one `model_validate_json` accepts.
    encoded = _encode_history(root.root)
    ModelMessagesTypeAdapter.validate_json(encoded.json)
    return encoded


def _serialize_history(value: Any, info: SerializationInfo) -> Any:
    if info.mode_is_json():
        return from_json(_history_json_text(value))
    return tuple(_history_serializer().to_python(list(_read_history(value))))


class _HistoryField:
    """Schema marker: validate with the native adapter's schema, store `_EncodedHistory`.

    The native schema validates straight from the JSON input (no detour through Python objects), and
    `custom_error_schema` turns any failure, from it or from encoding, into the single documented error.
    """

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        native = handler.generate_schema(_HistoryRoot)
        validate_and_encode = core_schema.no_info_after_validator_function(_encode_root, native)
        validate_and_check = core_schema.no_info_after_validator_function(_encode_root_checked, native)
        return core_schema.custom_error_schema(
            core_schema.json_or_python_schema(
                json_schema=validate_and_encode,
                python_schema=core_schema.union_schema(
                    # Already validated: another state's history, or `_from_parts`.
                    [core_schema.is_instance_schema(_EncodedHistory), validate_and_check],
                    mode="left_to_right",
                ),
            ),
            # Exactly what a `ValueError(_INVALID_HISTORY)` raised in a validator reports (type `value_error`,
            # msg "Value error, Invalid Agent message history."), without the detour through Python objects
            # that a wrap validator would force on JSON input.
            custom_error_type="value_error",
            custom_error_context={"error": _INVALID_HISTORY},
            serialization=core_schema.plain_serializer_function_ser_schema(_serialize_history, info_arg=True),
        )


def _read_history(raw: Any) -> tuple[ModelMessage, ...]:
    if type(raw) is _EncodedHistory:
        return tuple(raw.decode())
    return tuple(copy.deepcopy(raw))  # a value forged with `model_copy(update=...)`; never validated


def _canonical(value: Any, *, bounded: bool) -> _Canonical:
    if type(value) is _Canonical:
        return value
    try:
        checked = check_finite_json(value)
    except NotFiniteJson as exc:
        raise PydanticCustomError(
            "value_error", "Value is not finite JSON: {reason}", {"reason": str(exc)}
        ) from None
    text = canonical_json(checked)
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise PydanticCustomError("value_error", "Value is not encodable as UTF-8 JSON.") from None
    if bounded:
        depth, nodes = json_depth_and_nodes(checked)
        if size > _ENV_STATE_MAX_BYTES:
            raise PydanticCustomError(
                "value_error",
                "Canonical JSON is {size} bytes; at most {limit} allowed.",
                {"size": size, "limit": _ENV_STATE_MAX_BYTES},
            )
        if depth > _ENV_STATE_MAX_DEPTH:
            raise PydanticCustomError(
                "value_error",
                "JSON depth is {depth}; at most {limit} allowed.",
                {"depth": depth, "limit": _ENV_STATE_MAX_DEPTH},
            )
        if nodes > _ENV_STATE_MAX_NODES:
            raise PydanticCustomError(
                "value_error",
                "JSON has {nodes} nodes; at most {limit} allowed.",
                {"nodes": nodes, "limit": _ENV_STATE_MAX_NODES},
            )
    return _Canonical(text)


def _read_canonical(raw: Any) -> JsonValue:
    if type(raw) is _Canonical:
        return raw.decode()
    return copy.deepcopy(raw)  # type: ignore[no-any-return]  # forged via model_copy(update=...)


def _canonical_text(raw: Any) -> str:
    if type(raw) is _Canonical:
        return raw.text
    return _forged_json(raw)


@dataclass(frozen=True, slots=True)
class _CanonicalJsonField:
    """Schema marker: finite JSON stored canonically; `bounded` adds the environment-state limits."""

    bounded: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        bounded = self.bounded
        return core_schema.no_info_plain_validator_function(
            lambda value: _canonical(value, bounded=bounded),
            json_schema_input_schema=core_schema.any_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(_read_canonical),
        )


def _finite_extra(value: Any) -> JsonValue:
    try:
        return check_finite_json(value)
    except NotFiniteJson as exc:
        raise PydanticCustomError(
            "value_error", "Value is not finite JSON: {reason}", {"reason": str(exc)}
        ) from None


class _FiniteJsonField:
    """Schema marker: any finite JSON, kept as a checked copy (unknown top-level keys)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _finite_extra, json_schema_input_schema=core_schema.any_schema()
        )


_ExtraValue = Annotated[JsonValue, _FiniteJsonField]


def _forged_json(value: Any) -> str:
    """JSON for a value that bypassed validation (`model_copy(update=...)`); re-validation judges it."""
    return to_json(value, serialize_unknown=True, inf_nan_mode="constants").decode()


def _json_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _json_value(value: Any) -> str:
    """Compact JSON in the value's own key order (unknown keys are kept verbatim, never re-sorted)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return _forged_json(value)


# --- model plumbing --------------------------------------------------------------------------------


def _read_through(model: type[BaseModel], name: str, read: Callable[[Any], Any]) -> None:
    """Make reads of field `name` return `read(stored)`, a fresh value, after pydantic built `model`.

    Pydantic removes field defaults from the class namespace, so a property set afterwards is the only
    class attribute with that name; as a data descriptor it wins over the instance `__dict__` slot where
    pydantic keeps the stored (encoded) value. Validation and frozen assignment are untouched.
    """
    doc = model.model_fields[name].description

    def get(self: BaseModel) -> Any:
        return read(self.__dict__[name])

    setattr(model, name, property(get, doc=doc))


class _StateModel(BaseModel):
    """Shared behaviour: frozen, reads through `_read_through`, and a hand-written default JSON dump."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    def _json(self) -> str:
        raise NotImplementedError

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, field in type(self).model_fields.items():
            if field.repr:
                yield name, getattr(self, name)
        if self.__pydantic_extra__:
            yield from self.__pydantic_extra__.items()

    def model_dump_json(
        self,
        *,
        indent: int | None = None,
        ensure_ascii: bool = False,
        include: IncEx | None = None,
        exclude: IncEx | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        exclude_unset: bool = False,
        exclude_defaults: bool = False,
        exclude_none: bool = False,
        exclude_computed_fields: bool = False,
        round_trip: bool = False,
        warnings: bool | Literal["none", "warn", "error"] = True,
        fallback: Callable[[Any], Any] | None = None,
        serialize_as_any: bool = False,
        polymorphic_serialization: bool | None = None,
    ) -> str:
        """The JSON form. With default arguments it is the exact form of SPEC §2.1.2 (stored bytes verbatim).

        Any other argument goes through pydantic's serializer: same keys and order, but floats inside
        canonical JSON values are formatted by pydantic.
        """
        if (
            indent is None
            and not ensure_ascii
            and include is None
            and exclude is None
            and context is None
            and not (
                exclude_unset or exclude_defaults or exclude_none or exclude_computed_fields or round_trip
            )
        ):
            return self._json()
        return super().model_dump_json(
            indent=indent,
            ensure_ascii=ensure_ascii,
            include=include,
            exclude=exclude,
            context=context,
            by_alias=by_alias,
            exclude_unset=exclude_unset,
            exclude_defaults=exclude_defaults,
            exclude_none=exclude_none,
            exclude_computed_fields=exclude_computed_fields,
            round_trip=round_trip,
            warnings=warnings,
            fallback=fallback,
            serialize_as_any=serialize_as_any,
            polymorphic_serialization=polymorphic_serialization,
        )


# --- the component models --------------------------------------------------------------------------


class CapabilityState(_StateModel):
    """One capability namespace: an exact version and the capability's finite-JSON payload.

    `data` is stored canonically (keys sorted), so `{"b":1,"a":[1.0,"é"]}` is kept and dumped as
    `{"a":[1.0,"é"],"b":1}`; each read of `data` returns a fresh copy.
    """

    version: Annotated[str, StringConstraints(min_length=1)]
    """The payload's version, compared exactly by the owning capability (no migration)."""

    data: Annotated[JsonValue, _CanonicalJsonField()]
    """The payload; only the owning capability interprets it."""

    def data_json(self) -> str:
        """The canonical JSON text of `data`, as stored and dumped."""
        return _canonical_text(self.__dict__["data"])

    def _json(self) -> str:
        return f'{{"version":{_json_value(self.__dict__["version"])},"data":{self.data_json()}}}'


class AgentContextStateSnapshot(_StateModel):
    """Every capability namespace of a thread, in namespace order (SPEC §2.1.4)."""

    entries: dict[str, CapabilityState] = Field(default_factory=dict)
    """Capability ID → entry, in insertion order. Reads return a new dict (the entries are immutable)."""

    @field_validator("entries")
    @classmethod
    def _check_ids(cls, entries: dict[str, CapabilityState]) -> dict[str, CapabilityState]:
        for capability_id in entries:
            if not capability_id.strip():
                raise ValueError("Capability IDs must not be blank.")
        return entries

    def get(self, capability_id: str) -> CapabilityState | None:
        """One namespace's entry, or `None` when the namespace is absent."""
        entries: dict[str, CapabilityState] = self.__dict__["entries"]
        return entries.get(capability_id)

    def _json(self) -> str:
        entries = self.__dict__["entries"]
        if not isinstance(entries, dict):
            return f'{{"entries":{_forged_json(entries)}}}'
        body = ",".join(f"{_json_str(key)}:{_entry_json(entry)}" for key, entry in entries.items())
        return f'{{"entries":{{{body}}}}}'


def _entry_json(entry: Any) -> str:
    return entry._json() if isinstance(entry, CapabilityState) else _forged_json(entry)


class StoredRef(_StateModel):
    """A value kept in a Host state store (none exist in this milestone; SPEC §2.1.5)."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    """The store key."""

    digest: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    """SHA-256 of the stored value, 64 lowercase hex digits."""

    size: Annotated[int, Field(ge=0, strict=True)]
    """The stored value's size in bytes."""

    def _json(self) -> str:
        d = self.__dict__
        return f'{{"key":{_json_value(d["key"])},"digest":{_json_value(d["digest"])},"size":{_json_value(d["size"])}}}'


class EnvironmentState(_StateModel):
    """Portable, provider-specific data of one Environment mount; never interpreted by the harness."""

    provider_key: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    """Which provider integration owns `state`."""

    state_version: Annotated[
        str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    ]
    """The provider's version of `state`."""

    state: Annotated[JsonValue, _CanonicalJsonField(bounded=True)]
    """Finite JSON, stored canonically: at most 1 MiB encoded, depth 32 and 10,000 nodes. Reads copy."""

    def state_json(self) -> str:
        """The canonical JSON text of `state`, as stored and dumped."""
        return _canonical_text(self.__dict__["state"])

    def _json(self) -> str:
        d = self.__dict__
        return (
            f'{{"provider_key":{_json_value(d["provider_key"])},'
            f'"state_version":{_json_value(d["state_version"])},"state":{self.state_json()}}}'
        )


_read_through(CapabilityState, "data", _read_canonical)
_read_through(EnvironmentState, "state", _read_canonical)
_read_through(AgentContextStateSnapshot, "entries", lambda raw: dict(raw))


# --- HarnessState -----------------------------------------------------------------------------------


def _new_thread_id() -> str:
    return f"thread_{uuid.uuid4().hex}"


def _env_json(raw: Any) -> str:
    if not isinstance(raw, dict):
        return _forged_json(raw)
    body = ",".join(
        f"{_json_str(name)}:{env._json() if isinstance(env, EnvironmentState) else _forged_json(env)}"
        for name, env in raw.items()
    )
    return f"{{{body}}}"


def _history_json_text(raw: Any) -> str:
    if type(raw) is _EncodedHistory:
        return raw.json.decode()
    try:
        return _encode_history(list(raw)).json.decode()
    except (PydanticSerializationError, ValueError, TypeError):
        return _forged_json(raw)


def _refs_json(raw: Any) -> str:
    if isinstance(raw, tuple) and all(isinstance(ref, StoredRef) for ref in raw):
        return "[" + ",".join(ref._json() for ref in raw) + "]"
    return _forged_json(raw)


_FIELD_ORDER_HEAD = ("schema_version", "thread_id", "agent_context_state", "refs")
_FIELD_ORDER_TAIL = ("message_history", "environment_states")


class HarnessState(_StateModel):
    """The portable continuation value of one Thread (SPEC §1.1, §2.1).

    A frozen pydantic model with `extra="allow"`: unknown top-level keys are kept verbatim, in order,
    through validation, dumps and `fork()`. Two states are equal exactly when their JSON forms are.

    Usage:
        state = HarnessState.new(thread_id="thr_productthread1")
        payload = state.model_dump_json()
        restored = HarnessState.model_validate_json(payload)  # == state, and re-dumps byte for byte
        branch = state.fork(thread_id="thr_productbranch1")
    """

    model_config = ConfigDict(
        frozen=True,
        extra="allow",
        use_attribute_docstrings=True,
        ser_json_bytes="base64",
        val_json_bytes="base64",
    )

    schema_version: Literal["1"]
    """The envelope version; only `"1"` exists."""

    thread_id: Annotated[str, StringConstraints(max_length=256, pattern=THREAD_ID_PATTERN)]
    """The Thread's stable ID: `thread-<32 hex>` or `<lowercase word>_<lowercase alnum>`, ≤ 256 chars."""

    agent_context_state: AgentContextStateSnapshot = Field(default_factory=AgentContextStateSnapshot)
    """Every capability namespace, known to this run or not."""

    refs: tuple[StoredRef, ...] = ()
    """Values kept in a Host state store."""

    message_history: Annotated[tuple[ModelMessage, ...], _HistoryField()] = Field(
        default=(), validate_default=True
    )
    """The native pydantic-ai history. Each read returns a new tuple of new message objects."""

    environment_states: dict[str, EnvironmentState] = Field(default_factory=dict)
    """Mount name → portable provider state, in insertion order. Each read returns a new dict."""

    __pydantic_extra__: dict[str, _ExtraValue] = Field(init=False)  # pyright: ignore[reportIncompatibleVariableOverride]

    _seal: tuple[Any, ...] | None = None
    _SEAL_FIELDS: ClassVar[tuple[str, ...]] = (*_FIELD_ORDER_HEAD, *_FIELD_ORDER_TAIL)

    @model_validator(mode="after")
    def _seal_validated(self) -> HarnessState:
        # References to exactly the validated values: `model_copy(update=...)` replaces some of them,
        # which `_is_intact()` notices without a dump (SPEC §2.2.2 re-validates forged copies).
        self._seal = self._seal_of()
        return self

    def _seal_of(self) -> tuple[Any, ...]:
        extra = self.__pydantic_extra__
        return (*map(self.__dict__.get, self._SEAL_FIELDS), tuple(extra.items()) if extra else ())

    @model_serializer(mode="wrap")
    def _ordered(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped = handler(self)
        ordered = {key: dumped[key] for key in _FIELD_ORDER_HEAD if key in dumped}
        ordered.update((key, value) for key, value in dumped.items() if key not in self._SEAL_FIELDS)
        ordered.update((key, dumped[key]) for key in _FIELD_ORDER_TAIL if key in dumped)
        return ordered

    # -- construction --------------------------------------------------------------------------------

    @classmethod
    def new(
        cls,
        *,
        thread_id: str | None = None,
        message_history: Sequence[ModelMessage | Mapping[str, Any]] = (),
        agent_context_state: AgentContextStateSnapshot | Mapping[str, Any] | None = None,
        environment_states: Mapping[str, EnvironmentState | Mapping[str, Any]] | None = None,
    ) -> HarnessState:
        """Build a state with `schema_version="1"` (SPEC §2.1.3).

        Args:
            thread_id: The Thread's ID; omitted → `thread_` + `uuid4().hex`.
            message_history: Native messages, or their JSON-mode dicts.
            agent_context_state: A snapshot or its dict form; omitted → no namespaces.
            environment_states: Mount name → `EnvironmentState` (or its dict form).

        Returns:
            The validated state.

        Raises:
            ValidationError: A value breaks a rule of SPEC §2.1.1.
        """
        data: dict[str, Any] = {
            "schema_version": "1",
            "thread_id": _new_thread_id() if thread_id is None else thread_id,
            "message_history": message_history,
        }
        if agent_context_state is not None:
            data["agent_context_state"] = agent_context_state
        if environment_states is not None:
            data["environment_states"] = environment_states
        return cls.model_validate(data)

    def fork(self, *, thread_id: str | None = None) -> HarnessState:
        """Branch a thread from a checkpoint the host chose (SPEC §1.5, §2.1.3).

        History, every capability namespace, refs and unknown keys are copied; portable Environment
        state is cleared by design, because a provider session cannot belong to two threads.

        Args:
            thread_id: The branch's ID; omitted → a generated `thread_<32 hex>`.

        Returns:
            The new state.

        Raises:
            StateError: `fork_thread_id_conflict` when `thread_id` is this state's own ID.
            ValidationError: `thread_id` is malformed.
        """
        if thread_id is None:
            thread_id = _new_thread_id()
            while thread_id == self.thread_id:  # pragma: no cover - a uuid4 collision
                thread_id = _new_thread_id()
        elif thread_id == self.thread_id:
            raise StateError(
                "fork thread_id must differ from the source Thread",
                code=ErrorCode.FORK_THREAD_ID_CONFLICT,
                details={"thread_id": thread_id},
            )
        return type(self)._from_parts(
            thread_id=thread_id,
            history=self.__dict__["message_history"],
            snapshot=self.__dict__["agent_context_state"],
            environment_states={},
            extra=self.extra_fields,
            refs=self.__dict__["refs"],
        )

    @classmethod
    def _from_parts(
        cls,
        *,
        thread_id: str,
        history: Sequence[ModelMessage] | _EncodedHistory,
        snapshot: AgentContextStateSnapshot,
        environment_states: Mapping[str, EnvironmentState],
        extra: Mapping[str, Any],
        refs: Sequence[StoredRef] = (),
        encoder: HistoryEncoder | None = None,
    ) -> HarnessState:
        """Internal fast constructor for the run machinery (and `fork`).

        Every field is validated as usual except the history, which is trusted to be native messages
        pydantic-ai produced (or another state's stored history): it is dumped once, not validated. It is
        still refused if it does not serialize cleanly or holds non-finite numbers (a `ValidationError`
        at `message_history`, as for any invalid history). `extra` holds the unknown top-level keys, in
        order (e.g. `previous_state.extra_fields`). A run passes its `encoder`, which reuses the bytes of
        the messages it has already encoded.
        """
        if type(history) is not _EncodedHistory:
            try:
                messages: Sequence[ModelMessage] = history  # type: ignore[assignment]  # narrowed: not _EncodedHistory
                history = encoder.encode(messages) if encoder is not None else _encode_history(messages)
            except (PydanticSerializationError, ValueError, TypeError):
                raise ValidationError.from_exception_data(
                    cls.__name__,
                    [
                        InitErrorDetails(
                            type="value_error",
                            loc=("message_history",),
                            input=None,
                            ctx={"error": _INVALID_HISTORY},
                        )
                    ],
                ) from None
        data: dict[str, Any] = {
            "schema_version": "1",
            "thread_id": thread_id,
            "agent_context_state": snapshot,
            "refs": tuple(refs),
        }
        data.update(extra)
        data["message_history"] = history
        data["environment_states"] = dict(environment_states)
        return cls.model_validate(data)

    # -- reading -------------------------------------------------------------------------------------

    @property
    def extra_fields(self) -> dict[str, JsonValue]:
        """The unknown top-level keys, in input order; a detached copy."""
        return copy.deepcopy(dict(self.__pydantic_extra__ or {}))

    @property
    def model_extra(self) -> dict[str, Any] | None:
        """Like `extra_fields` (detached), as pydantic's `model_extra` spells it."""
        return self.extra_fields

    if not TYPE_CHECKING:

        def __getattr__(self, item: str) -> Any:
            extra = object.__getattribute__(self, "__pydantic_extra__")
            if extra and item in extra:
                return copy.deepcopy(extra[item])
            return super().__getattr__(item)

    def message_history_json(self) -> bytes:
        """The history as native JSON bytes, exactly as `ModelMessagesTypeAdapter.dump_json` writes them.

        The gRPC envelope carries these bytes verbatim (DESIGN "State envelope").
        """
        raw = self.__dict__["message_history"]
        if type(raw) is _EncodedHistory:
            return raw.json
        return _history_json_text(raw).encode()

    def _history_for_run(self) -> tuple[list[ModelMessage], _EncodedHistory | None]:
        """Internal: new message objects for the run that continues this state, and their encoded form.

        The objects are validation's own when this state was just loaded from JSON (nobody else holds
        them), else freshly decoded; the encoded form lets the run reuse their bytes (`HistoryEncoder`).
        """
        raw = self.__dict__["message_history"]
        if type(raw) is _EncodedHistory:
            return raw.take(), raw
        return list(_read_history(raw)), None

    def message_count(self) -> int:
        """The number of messages in the history, without decoding it."""
        raw = self.__dict__["message_history"]
        return raw.count if type(raw) is _EncodedHistory else len(raw)

    def extra_fields_json(self) -> str:
        """One JSON object of the unknown top-level keys, in order, values as `model_dump_json()` writes them."""
        extra = self.__pydantic_extra__
        if not extra:
            return "{}"
        return "{" + ",".join(f"{_json_str(key)}:{_json_value(value)}" for key, value in extra.items()) + "}"

    # -- integrity -----------------------------------------------------------------------------------

    def _is_intact(self) -> bool:
        """Whether every field still holds the value validation produced (no `model_copy(update=...)`).

        Internal: the run machinery may skip re-validating an intact `previous_state` (SPEC §2.2.2 asks
        that forged copies fail like invalid states); a deep copy of an intact state is intact too.
        """
        seal = self._seal
        if seal is None:
            return False
        current = self._seal_of()
        if len(seal) != len(current):
            return False
        *fields, extra = seal
        *now_fields, now_extra = current
        if any(a is not b for a, b in zip(fields, now_fields, strict=True)):
            return False
        return len(extra) == len(now_extra) and all(
            k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(extra, now_extra, strict=True)
        )

    def _revalidated(self) -> HarnessState:
        """This state, proven valid: itself when intact, else re-validated from its JSON form.

        Internal: how the run machinery accepts `previous_state`. A forged copy fails like any invalid
        state, with a `ValidationError`.
        """
        if self._is_intact():
            return self
        try:
            payload = self._json()
        except (PydanticSerializationError, ValueError, TypeError) as exc:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError(
                            "value_error", "State is not serializable: {reason}", {"reason": str(exc)}
                        ),
                        loc=(),
                        input=None,
                    )
                ],
            ) from None
        return type(self).model_validate_json(payload)

    # -- JSON form and equality ----------------------------------------------------------------------

    def _json(self) -> str:
        d = self.__dict__
        snapshot = d["agent_context_state"]
        parts = [
            '{"schema_version":',
            _json_value(d["schema_version"]),
            ',"thread_id":',
            _json_value(d["thread_id"]),
            ',"agent_context_state":',
            snapshot._json() if isinstance(snapshot, AgentContextStateSnapshot) else _forged_json(snapshot),
            ',"refs":',
            _refs_json(d["refs"]),
        ]
        for key, value in (self.__pydantic_extra__ or {}).items():
            parts += [",", _json_str(key), ":", _json_value(value)]
        parts += [
            ',"message_history":',
            _history_json_text(d["message_history"]),
            ',"environment_states":',
            _env_json(d["environment_states"]),
            "}",
        ]
        return "".join(parts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HarnessState):
            return NotImplemented
        return self._json() == other._json()

    def __hash__(self) -> int:
        return hash(self._json())


def _read_environment_states(raw: Any) -> dict[str, EnvironmentState]:
    return dict(raw) if isinstance(raw, dict) else copy.deepcopy(raw)


_read_through(HarnessState, "message_history", _read_history)
_read_through(HarnessState, "environment_states", _read_environment_states)


# --- load_state --------------------------------------------------------------------------------------


def _unsupported(received: Any) -> StateError:
    try:
        shown = check_finite_json(received)
    except NotFiniteJson:
        shown = repr(received)
    return StateError(
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
            if data.get("schema_version") not in SUPPORTED_SCHEMA_VERSIONS:
                raise _unsupported(data.get("schema_version"))
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
    if isinstance(parsed, dict) and parsed.get("schema_version") not in SUPPORTED_SCHEMA_VERSIONS:
        raise _unsupported(parsed.get("schema_version"))
    raise _invalid(failure) from None
