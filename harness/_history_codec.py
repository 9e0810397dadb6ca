"""A state's message history as stored: validated once, kept as the native dump, re-dumped only where new.

`HarnessState.message_history` keeps an `EncodedHistory`: the bytes `ModelMessagesTypeAdapter.dump_json`
writes for the validated messages. Loading validates the history once, in pydantic-core, and dumps it
once; every later dump splices the stored bytes, and a run re-dumps only the messages it added
(`HistoryEncoder`). Reads decode new message objects, so no caller ever shares one.

Large histories from outside (`decode_history_json`) are validated and dumped in pieces of about
`CHUNK_BYTES`, with the caller's `pause` between pieces: run in a worker thread, each piece holds the
interpreter only for milliseconds, so the caller's event loop keeps serving, and `pause` can stop the
work (a deadline, a shutdown) by raising.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, GetCoreSchemaHandler, RootModel, ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_core import CoreSchema, PydanticSerializationError, SchemaSerializer, core_schema, from_json
from pydantic_core.core_schema import SerializationInfo

from ._json_fields import forged_json

__all__ = (
    "CHUNK_BYTES",
    "EMPTY_HISTORY",
    "INVALID_HISTORY",
    "EncodedHistory",
    "HistoryEncoder",
    "HistoryField",
    "InvalidHistory",
    "decode_history_json",
    "encode_history",
    "history_json_text",
    "read_history",
)

INVALID_HISTORY = "Invalid Agent message history."
"""The one message every invalid history is reported with (SPEC §2.1.1)."""

CHUNK_BYTES = 256 * 1024
"""How much history JSON `decode_history_json` validates between two `pause` calls."""

_UNKNOWN = -2


class InvalidHistory(ValueError):
    """The history is not one a state can hold (`INVALID_HISTORY`)."""

    def __init__(self) -> None:
        super().__init__(INVALID_HISTORY)


@dataclass(frozen=True, slots=True)
class EncodedHistory:
    """Validated native messages, stored as the bytes `ModelMessagesTypeAdapter.dump_json` writes."""

    json: bytes
    count: int
    last_start: int = -1
    """Where the last message starts in `json`: `_extend` keeps the bytes before it and re-dumps from
    there. -1 for an empty history, `_UNKNOWN` when not computed yet (`HistoryEncoder` does)."""
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


EMPTY_HISTORY = EncodedHistory(b"[]", 0)


# The native adapter's serializer, except that non-finite floats are written as `NaN`/`Infinity` instead
# of `null`: the adapter would otherwise turn them into nulls silently, and a state must not hold them.
# For finite data the bytes are the adapter's own (checked by the tests).
@functools.cache
def _serializer() -> SchemaSerializer:
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
    data = _serializer().to_json(messages, warnings="error")
    # Cheap C-level scans; only a hit pays for the full parse that tells tokens from string content.
    # A one-byte search is a `memchr`, many times faster than a substring search, so the substring is
    # looked for only when its capital letter occurs at all.
    if (b"N" in data and b"NaN" in data) or (b"I" in data and b"Infinity" in data):
        json.loads(data, parse_constant=_reject_constant)
    return data


def encode_history(messages: Sequence[ModelMessage]) -> EncodedHistory:
    """Dump validated messages once; refuse what would not load back (bad objects, non-finite numbers).

    The last message is dumped on its own, so its start is known: a JSON array is `[`, the items joined
    by `,`, and `]`, so the joined bytes are exactly the one-piece dump.

    Raises:
        PydanticSerializationError, ValueError, TypeError: The messages cannot be dumped cleanly.
    """
    messages = list(messages)
    if len(messages) < 2:
        return EncodedHistory(_dump(messages), len(messages), 1 if messages else -1)
    head = _dump(messages[:-1])
    last = _dump(messages[-1:])
    return EncodedHistory(b"".join((head[:-1], b",", last[1:])), len(messages), len(head))


def _extend(base: EncodedHistory, messages: Sequence[ModelMessage]) -> EncodedHistory:
    """Encode `messages`, whose first `base.count - 1` messages are exactly base's own, unchanged.

    Their bytes are reused; the rest (base's last message included: native runs update the tail of
    a history in place) is dumped. The caller proves "exactly" by identity (`HistoryEncoder`).
    """
    keep = base.count - 1
    tail = list(messages[keep:])
    if keep < 1 or base.last_start < 1 or not tail:
        return encode_history(messages)
    prefix = base.json[: base.last_start]  # `[m0,...,m(keep-1),`
    encoded = encode_history(tail)
    return EncodedHistory(
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

    def __init__(self, encoded: EncodedHistory | None, messages: Sequence[ModelMessage]) -> None:
        """Start from `encoded`, the bytes of `messages` (before the run touches any of them)."""
        messages = list(messages)
        if encoded is not None and encoded.last_start == _UNKNOWN and messages:
            # The stored bytes end with the last message's own dump and `]`.
            last = len(_dump(messages[-1:])) - 1
            encoded = EncodedHistory(encoded.json, encoded.count, len(encoded.json) - last)
        self._encoded = encoded
        self._messages = messages

    @property
    def last_start(self) -> int | None:
        """Where the last encoded message starts (tests read it)."""
        return None if self._encoded is None else self._encoded.last_start

    def encode(self, history: Sequence[ModelMessage]) -> EncodedHistory:
        """The encoded form of `history`, as `encode_history` would write it."""
        history = list(history)
        base = self._encoded
        if base is not None and base.count >= 2 and len(self._messages) == base.count:
            keep = base.count - 1
            if len(history) > keep and all(map(operator.is_, history[:keep], self._messages[:keep])):
                encoded = _extend(base, history)
            else:
                encoded = encode_history(history)
        else:
            encoded = encode_history(history)
        self._encoded, self._messages = encoded, history
        return encoded


# --- decoding from outside -------------------------------------------------------------------------

# Where one top-level message may end and the next begin. The first is how the native dump separates
# messages (`"parts"` is every message's first key); the second is any object boundary, for histories a
# host wrote with other key orders. Either may also match inside a message: `_validate_in_pieces`
# proves each piece on its own.
_NATIVE_BOUNDARY = re.compile(rb'\}\s*,\s*\{\s*"parts"\s*:')
_ANY_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def decode_history_json(data: bytes, *, pause: Callable[[], None] | None = None) -> EncodedHistory:
    """Validate a history's native JSON array and keep its encoded form (the run may take its messages).

    Args:
        data: The JSON text of `list[ModelMessage]`, e.g. `MessageHistory.data`.
        pause: Called between pieces of a history larger than `CHUNK_BYTES`; it may raise to stop.

    Raises:
        InvalidHistory: The text is not a valid native history, or holds non-finite numbers.
    """
    if pause is None or len(data) <= CHUNK_BYTES:
        try:
            messages = ModelMessagesTypeAdapter.validate_json(data)
            return EncodedHistory(_dump(messages), len(messages), _UNKNOWN if messages else -1, [messages])
        except (ValidationError, PydanticSerializationError, ValueError, TypeError):
            raise InvalidHistory() from None
    messages = _validate_in_pieces(data, pause)
    try:
        return _dump_in_pieces(messages, pause)
    except (PydanticSerializationError, ValueError, TypeError):
        raise InvalidHistory() from None


def _validate_in_pieces(data: bytes, pause: Callable[[], None]) -> list[ModelMessage]:
    """Validate `data` a few hundred KiB of messages at a time; the same messages as one validation.

    A piece runs from one message's start to a candidate boundary. A boundary that lies inside a
    message leaves the piece with an unclosed object or string, which never parses, so a piece that
    parses is exactly whole messages; one that does not is retried twice as long (n log n at worst).
    """
    view = memoryview(data)
    start, end = _array_bounds(data)
    messages: list[ModelMessage] = []
    while start < end:
        pause()
        span = CHUNK_BYTES
        while True:
            cut, resume = _boundary(data, start + span, end)
            piece = b"".join((b"[", view[start:cut], b"]"))
            try:
                messages.extend(ModelMessagesTypeAdapter.validate_json(piece))
                break
            except ValidationError as error:
                if cut >= end or any(e["type"] != "json_invalid" for e in error.errors()):
                    raise InvalidHistory() from None
            span *= 2
            pause()
        start = resume
    return messages


def _array_bounds(data: bytes) -> tuple[int, int]:
    """The span between a JSON array's outer brackets (whitespace allowed around them)."""
    stripped = data.strip()
    if not (stripped.startswith(b"[") and stripped.endswith(b"]")):
        raise InvalidHistory()
    start = data.index(b"[") + 1
    end = data.rindex(b"]")
    if not data[start:end].strip():
        return end, end  # `[]`
    return start, end


def _boundary(data: bytes, at: int, end: int) -> tuple[int, int]:
    """Where a piece reaching at least `at` may end, and where the next begins (`end` for the rest)."""
    if at >= end:
        return end, end
    for pattern in (_NATIVE_BOUNDARY, _ANY_BOUNDARY):
        found = pattern.search(data, at, end)
        if found is not None:
            brace = found.start() + 1
            return brace, data.index(b"{", brace)
    return end, end


def _dump_in_pieces(messages: list[ModelMessage], pause: Callable[[], None]) -> EncodedHistory:
    """The native dump of `messages` written piece by piece (`pause` between); the same bytes as one dump."""
    if len(messages) < 2:
        return encode_history(messages)
    per_piece = max(1, len(messages) * CHUNK_BYTES // max(1, _estimate_bytes(messages)))
    dumped: list[bytes] = []
    for index in range(0, len(messages) - 1, per_piece):
        pause()
        dumped.append(_dump(messages[index : min(index + per_piece, len(messages) - 1)])[1:-1])
    head = b"[" + b",".join(dumped) + b","
    last = _dump(messages[-1:])
    return EncodedHistory(head + last[1:], len(messages), len(head), [messages])


def _estimate_bytes(messages: list[ModelMessage]) -> int:
    sample = messages[: min(len(messages), 64)]
    return len(_dump(sample)) * len(messages) // len(sample)


# --- the state's field ------------------------------------------------------------------------------


def _encode_root(root: _HistoryRoot) -> EncodedHistory:
    # JSON input: the messages are new objects nobody else holds, so the next run may take them. One
    # dump: most loaded states are never extended, and a run that extends one finds its last message.
    messages = root.root
    return EncodedHistory(_dump(messages), len(messages), _UNKNOWN if messages else -1, [messages])


def _encode_root_checked(root: _HistoryRoot) -> EncodedHistory:
    # Python input may hold message objects built by hand, which the native schema accepts as they are
    # and the serializer writes without complaint even when they are wrong (`ModelRequest(parts=[42])`).
    # Loading the bytes back proves the stored history is one `model_validate_json` accepts.
    encoded = encode_history(root.root)
    ModelMessagesTypeAdapter.validate_json(encoded.json)
    return encoded


def read_history(raw: Any) -> tuple[ModelMessage, ...]:
    """The messages of a stored history, as new objects."""
    if type(raw) is EncodedHistory:
        return tuple(raw.decode())
    return tuple(copy.deepcopy(raw))  # a value forged with `model_copy(update=...)`; never validated


def history_json_text(raw: Any) -> str:
    """The JSON text of a stored history (or of a value forged past validation, for re-validation)."""
    if type(raw) is EncodedHistory:
        return raw.json.decode()
    try:
        return encode_history(list(raw)).json.decode()
    except (PydanticSerializationError, ValueError, TypeError):
        return forged_json(raw)


def _serialize(value: Any, info: SerializationInfo) -> Any:
    if info.mode_is_json():
        return from_json(history_json_text(value))
    return tuple(_serializer().to_python(list(read_history(value))))


class HistoryField:
    """Schema marker: validate with the native adapter's schema, store `EncodedHistory`.

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
                    # Already validated: another state's history, `decode_history_json`, or a run's.
                    [core_schema.is_instance_schema(EncodedHistory), validate_and_check],
                    mode="left_to_right",
                ),
            ),
            # Exactly what a `ValueError(INVALID_HISTORY)` raised in a validator reports (type `value_error`,
            # msg "Value error, Invalid Agent message history."), without the detour through Python objects
            # that a wrap validator would force on JSON input.
            custom_error_type="value_error",
            custom_error_context={"error": INVALID_HISTORY},
            serialization=core_schema.plain_serializer_function_ser_schema(_serialize, info_arg=True),
        )
