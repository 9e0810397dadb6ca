"""Persisting the state envelope: `dump_state` and `load_state`, both directions side by side.

The host owns its threads, so it stores each `HarnessState` the server returns and sends it back
unchanged. Two forms, both lossless for every field the server sets:

- `"binary"`: protobuf bytes. Compact, and re-encoding a decoded envelope gives the same bytes
  (unknown fields from a newer server are kept).
- `"json"`: proto3 JSON with the original field names (`schema_version`, `message_history`, ...),
  UTF-8 encoded. Readable, and parseable in any language; compare it as JSON values, not bytes.

Neither function checks versions: the server decides whether a state loads (`Client.validate_state`
asks it without running anything), so a host never guesses.
"""

from __future__ import annotations

from typing import Literal

from ._gen.threadline.v1 import HarnessState
from ._protojson import message_from_json, message_to_json

__all__ = ("StateFormat", "dump_state", "load_state")

StateFormat = Literal["binary", "json"]
"""How `dump_state` writes an envelope and `load_state` reads it."""


def dump_state(state: HarnessState, *, format: StateFormat = "binary", indent: int | None = None) -> bytes:
    """Encode an envelope for storage.

    Args:
        state: The envelope, e.g. `RunResult.state`.
        format: `"binary"` (protobuf) or `"json"` (proto3 JSON, original field names, UTF-8).
        indent: Pretty-print the JSON with this indent; ignored for `"binary"`.

    Returns:
        The bytes to store.
    """
    if format == "binary":
        return bytes(state)
    if format == "json":
        return message_to_json(state, indent=indent).encode("utf-8")
    raise ValueError(f"unknown state format {format!r}; use 'binary' or 'json'")


def load_state(data: bytes | str, *, format: StateFormat | None = None) -> HarnessState:
    """Decode an envelope that `dump_state` (or any protobuf/proto3 JSON writer) produced.

    Args:
        data: The stored bytes, or JSON text.
        format: `"binary"` or `"json"`. Default: `"json"` for `str` input, `"binary"` for bytes.

    Returns:
        The envelope, ready for `RunSpec.previous_state`.

    Raises:
        ValueError: The data is not an envelope in that format.
    """
    if format is None:
        format = "json" if isinstance(data, str) else "binary"
    if format == "binary":
        if isinstance(data, str):
            raise TypeError("binary state data must be bytes, not str")
        data = bytes(data)
        _check_framing(data)
        try:
            return HarnessState.parse(data)
        except Exception as exc:  # betterproto2 raises assorted errors on malformed wire data
            raise ValueError(f"not a binary HarnessState: {exc}") from exc
    if format == "json":
        return message_from_json(HarnessState, data)
    raise ValueError(f"unknown state format {format!r}; use 'binary' or 'json'")


def _check_framing(data: bytes) -> None:
    """Reject wire data whose top-level fields run past its end (a truncated file).

    betterproto2 silently shortens a length-delimited field cut by the end of the data, so a
    truncated envelope would otherwise load with a clipped last field.
    """
    pos, end = 0, len(data)

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= end or shift > 63:
                raise ValueError("not a binary HarnessState: truncated or malformed varint")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    while pos < end:
        tag = varint()
        wire_type = tag & 7
        if tag >> 3 == 0:
            raise ValueError("not a binary HarnessState: field number 0")
        if wire_type == 0:
            varint()
        elif wire_type == 1:
            pos += 8
        elif wire_type == 2:
            length = varint()  # read first: `pos += varint()` would add to the stale position
            pos += length
        elif wire_type == 5:
            pos += 4
        else:
            raise ValueError(f"not a binary HarnessState: unsupported wire type {wire_type}")
        if pos > end:
            raise ValueError("not a binary HarnessState: the data ends inside a field (truncated?)")
