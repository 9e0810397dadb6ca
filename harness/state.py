"""`HarnessState`, the portable continuation value of one Thread (SPEC §2.1), and how a state is loaded (§2.9).

Storage is not access: every value a state hands out is detached (SPEC §2.0). The models keep immutable
encoded forms (`_state_model` says how): the history as its native dump (`_history_codec`), capability
data and environment state as canonical JSON text (`_json_fields`), unknown top-level keys as checked
finite-JSON copies in input order.

A state from outside (a host's store, the wire) goes through `load_state` or `load_state_parts`
(`harness._loading`), which read `schema_version` first and report errors as `StateError`s.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_ai.messages import ModelMessage
from pydantic_core import InitErrorDetails, PydanticCustomError, PydanticSerializationError

from ._history_codec import (
    INVALID_HISTORY,
    EncodedHistory,
    HistoryEncoder,
    HistoryField,
    encode_history,
    history_json_text,
    read_history,
)
from ._json_fields import (
    CanonicalJsonField,
    FiniteJsonField,
    canonical_text,
    forged_json,
    json_str,
    json_value,
    read_canonical,
)
from ._state_model import StateModel, read_through
from .errors import ErrorCode, StateError
from .json_text import JsonValue

__all__ = (
    "SUPPORTED_SCHEMA_VERSIONS",
    "THREAD_ID_PATTERN",
    "AgentContextStateSnapshot",
    "CapabilityState",
    "EnvironmentState",
    "HarnessState",
    "StoredRef",
    "ThreadId",
    "register_fork_hook",
)

SUPPORTED_SCHEMA_VERSIONS: tuple[str, ...] = ("1",)
"""The `schema_version` values this core reads and writes (SPEC §2.9)."""

THREAD_ID_PATTERN = r"^(?:thread-[a-f0-9]{32}|[a-z][a-z0-9]*_[a-z0-9]+)$"
"""Thread IDs, kept exactly as the reference library has them so states stay exchangeable."""


_ExtraValue = Annotated[JsonValue, FiniteJsonField]
ThreadId = Annotated[str, StringConstraints(max_length=256, pattern=THREAD_ID_PATTERN)]
"""A thread ID: `thread-<32 hex>` or `<lowercase word>_<lowercase alnum>`, at most 256 characters."""


# --- the component models --------------------------------------------------------------------------


class CapabilityState(StateModel):
    """One capability namespace: an exact version and the capability's finite-JSON payload.

    `data` is stored canonically (keys sorted), so `{"b":1,"a":[1.0,"é"]}` is kept and dumped as
    `{"a":[1.0,"é"],"b":1}`; each read of `data` returns a fresh copy.
    """

    version: Annotated[str, StringConstraints(min_length=1)]
    """The payload's version, compared exactly by the owning capability (no migration)."""

    data: Annotated[JsonValue, CanonicalJsonField()]
    """The payload; only the owning capability interprets it."""

    def data_json(self) -> str:
        """The canonical JSON text of `data`, as stored and dumped."""
        return canonical_text(self.__dict__["data"])

    def _json(self) -> str:
        return f'{{"version":{json_value(self.__dict__["version"])},"data":{self.data_json()}}}'


class AgentContextStateSnapshot(StateModel):
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
            return f'{{"entries":{forged_json(entries)}}}'
        body = ",".join(f"{json_str(key)}:{_entry_json(entry)}" for key, entry in entries.items())
        return f'{{"entries":{{{body}}}}}'


def _entry_json(entry: Any) -> str:
    return entry._json() if isinstance(entry, CapabilityState) else forged_json(entry)


class StoredRef(StateModel):
    """A value kept in a Host state store (none exist in this milestone; SPEC §2.1.5)."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    """The store key."""

    digest: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    """SHA-256 of the stored value, 64 lowercase hex digits."""

    size: Annotated[int, Field(ge=0, strict=True)]
    """The stored value's size in bytes."""

    def _json(self) -> str:
        d = self.__dict__
        return f'{{"key":{json_value(d["key"])},"digest":{json_value(d["digest"])},"size":{json_value(d["size"])}}}'


class EnvironmentState(StateModel):
    """Portable, provider-specific data of one Environment mount; never interpreted by the harness."""

    provider_key: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    """Which provider integration owns `state`."""

    state_version: Annotated[
        str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    ]
    """The provider's version of `state`."""

    state: Annotated[JsonValue, CanonicalJsonField(bounded=True)]
    """Finite JSON, stored canonically: at most 1 MiB encoded, depth 32 and 10,000 nodes. Reads copy."""

    def state_json(self) -> str:
        """The canonical JSON text of `state`, as stored and dumped."""
        return canonical_text(self.__dict__["state"])

    def _json(self) -> str:
        d = self.__dict__
        return (
            f'{{"provider_key":{json_value(d["provider_key"])},'
            f'"state_version":{json_value(d["state_version"])},"state":{self.state_json()}}}'
        )


read_through(CapabilityState, "data", read_canonical)
read_through(EnvironmentState, "state", read_canonical)
read_through(AgentContextStateSnapshot, "entries", lambda raw: dict(raw))


# --- fork hooks -------------------------------------------------------------------------------------

ForkHook = Callable[[CapabilityState, str], CapabilityState]
"""Rewrites one namespace for a branch: `(entry, branch thread ID) -> entry`; raises `StateError` to refuse."""

_FORK_HOOKS: dict[str, ForkHook] = {}


def register_fork_hook(capability_id: str, hook: ForkHook) -> None:
    """Make `fork()` pass namespace `capability_id` through `hook` (fork has no agent, so the table is global).

    The only entry is the inline-children registry (`harness.children.registry`), registered when
    `harness` is imported; every other namespace is copied unchanged.
    """
    _FORK_HOOKS[capability_id] = hook


def _forked_snapshot(snapshot: AgentContextStateSnapshot, thread_id: str) -> AgentContextStateSnapshot:
    entries = snapshot.__dict__["entries"]
    if not any(key in _FORK_HOOKS for key in entries):
        return snapshot
    return AgentContextStateSnapshot(
        entries={
            key: _FORK_HOOKS[key](entry, thread_id) if key in _FORK_HOOKS else entry
            for key, entry in entries.items()
        }
    )


# --- HarnessState -----------------------------------------------------------------------------------


def _new_thread_id() -> str:
    return f"thread_{uuid.uuid4().hex}"


def _env_json(raw: Any) -> str:
    if not isinstance(raw, dict):
        return forged_json(raw)
    body = ",".join(
        f"{json_str(name)}:{env._json() if isinstance(env, EnvironmentState) else forged_json(env)}"
        for name, env in raw.items()
    )
    return f"{{{body}}}"


def _refs_json(raw: Any) -> str:
    if isinstance(raw, tuple) and all(isinstance(ref, StoredRef) for ref in raw):
        return "[" + ",".join(ref._json() for ref in raw) + "]"
    return forged_json(raw)


_FIELD_ORDER_HEAD = ("schema_version", "thread_id", "agent_context_state", "refs")
_FIELD_ORDER_TAIL = ("message_history", "environment_states")


class HarnessState(StateModel):
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

    thread_id: ThreadId
    """The Thread's stable ID: `thread-<32 hex>` or `<lowercase word>_<lowercase alnum>`, ≤ 256 chars."""

    agent_context_state: AgentContextStateSnapshot = Field(default_factory=AgentContextStateSnapshot)
    """Every capability namespace, known to this run or not."""

    refs: tuple[StoredRef, ...] = ()
    """Values kept in a Host state store."""

    message_history: Annotated[tuple[ModelMessage, ...], HistoryField()] = Field(
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
            StateError: `state_invalid` when a value breaks a rule of SPEC §2.1.1 (`details["errors"]`:
                pydantic's, each with `loc`, `type`, `msg`).
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
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise _invalid(error, "The new state is invalid.") from None

    def fork(self, *, thread_id: str | None = None) -> HarnessState:
        """Branch a thread from a checkpoint the host chose (SPEC §1.5, §2.1.3).

        History, capability namespaces, refs and unknown keys are copied; portable Environment state is
        cleared by design, because a provider session cannot belong to two threads. A namespace with a
        fork hook (`register_fork_hook`: the inline-children registry, whose child thread IDs are
        re-derived from the branch's ID) is rewritten by it.

        Args:
            thread_id: The branch's ID; omitted → a generated `thread_<32 hex>`.

        Returns:
            The new state.

        Raises:
            StateError: `fork_thread_id_conflict` when `thread_id` is this state's own ID, or a
                fork hook's refusal (`capability_state_invalid`, `capability_state_version_unsupported`).
            StateError: `state_invalid` when `thread_id` is malformed (`details["errors"]`, as `new`).
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
        try:
            return type(self)._from_parts(
                thread_id=thread_id,
                history=self.__dict__["message_history"],
                snapshot=_forked_snapshot(self.__dict__["agent_context_state"], thread_id),
                environment_states={},
                extra=self.extra_fields,
                refs=self.__dict__["refs"],
            )
        except ValidationError as error:
            raise _invalid(error, "The new thread_id is invalid.") from None

    @classmethod
    def _from_parts(
        cls,
        *,
        thread_id: str,
        history: Sequence[ModelMessage] | EncodedHistory,
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
        if type(history) is not EncodedHistory:
            try:
                messages: Sequence[ModelMessage] = history  # type: ignore[assignment]  # narrowed: not EncodedHistory
                history = encoder.encode(messages) if encoder is not None else encode_history(messages)
            except (PydanticSerializationError, ValueError, TypeError):
                raise ValidationError.from_exception_data(
                    cls.__name__,
                    [
                        InitErrorDetails(
                            type="value_error",
                            loc=("message_history",),
                            input=None,
                            ctx={"error": INVALID_HISTORY},
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
        if type(raw) is EncodedHistory:
            return raw.json
        return history_json_text(raw).encode()

    def _history_for_run(self) -> tuple[list[ModelMessage], EncodedHistory | None]:
        """Internal: new message objects for the run that continues this state, and their encoded form.

        The objects are validation's own when this state was just loaded from JSON (nobody else holds
        them), else freshly decoded; the encoded form lets the run reuse their bytes (`HistoryEncoder`).
        """
        raw = self.__dict__["message_history"]
        if type(raw) is EncodedHistory:
            return raw.take(), raw
        return list(read_history(raw)), None

    def message_count(self) -> int:
        """The number of messages in the history, without decoding it."""
        raw = self.__dict__["message_history"]
        return raw.count if type(raw) is EncodedHistory else len(raw)

    def extra_fields_json(self) -> str:
        """One JSON object of the unknown top-level keys, in order, values as `model_dump_json()` writes them."""
        extra = self.__pydantic_extra__
        if not extra:
            return "{}"
        return "{" + ",".join(f"{json_str(key)}:{json_value(value)}" for key, value in extra.items()) + "}"

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
        before, after = self._json_around_history()
        return before + history_json_text(self.__dict__["message_history"]) + after

    def _json_around_history(self) -> tuple[str, str]:
        """Internal: the JSON form without its history array, so a store keeps the two apart.

        `before + <the history data> + after` is exactly `model_dump_json()`.
        """
        d = self.__dict__
        snapshot = d["agent_context_state"]
        parts = [
            '{"schema_version":',
            json_value(d["schema_version"]),
            ',"thread_id":',
            json_value(d["thread_id"]),
            ',"agent_context_state":',
            snapshot._json() if isinstance(snapshot, AgentContextStateSnapshot) else forged_json(snapshot),
            ',"refs":',
            _refs_json(d["refs"]),
        ]
        for key, value in (self.__pydantic_extra__ or {}).items():
            parts += [",", json_str(key), ":", json_value(value)]
        parts.append(',"message_history":')
        return "".join(parts), ',"environment_states":' + _env_json(d["environment_states"]) + "}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HarnessState):
            return NotImplemented
        return self._json() == other._json()

    def __hash__(self) -> int:
        return hash(self._json())


def _read_environment_states(raw: Any) -> dict[str, EnvironmentState]:
    return dict(raw) if isinstance(raw, dict) else copy.deepcopy(raw)


read_through(HarnessState, "message_history", read_history)
read_through(HarnessState, "environment_states", _read_environment_states)


_THREAD_ID_RULE = (
    "thread_id is not a valid thread ID: a lowercase letter, then lowercase letters or digits, one "
    "underscore and lowercase letters or digits (`thread_4f2a`), or `thread-` and 32 lowercase hex "
    "digits; at most 256 characters."
)


def _invalid(error: ValidationError, message: str) -> StateError:
    """A construction's pydantic error as the core's own, so no host repairs it (issue 24, item 9).
    A bad `thread_id` alone says the rule it broke, since a host passes that ID itself."""
    errors: list[Any] = [{"loc": list(e["loc"]), "type": e["type"], "msg": e["msg"]} for e in error.errors()]
    if errors and all(e["loc"] == ["thread_id"] for e in errors):
        message = _THREAD_ID_RULE
    return StateError(message, code=ErrorCode.STATE_INVALID, details={"errors": errors})
