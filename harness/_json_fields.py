"""Pydantic field markers for the JSON values a state stores, and the JSON spellings its dump uses.

- `CanonicalJsonField`: a finite JSON value stored as its canonical text (`_json.canonical_json`), so
  capability data and environment state compare and dump byte for byte; `bounded` adds the environment
  state limits of SPEC §2.1.1 (1 MiB, depth 32, 10 000 nodes). Reads decode a fresh value.
- `FiniteJsonField`: any finite JSON, kept as a checked copy (the unknown top-level keys).
- `json_value` / `json_str`: compact JSON in the value's own key order, for the hand-assembled dump;
  `forged_json` writes what bypassed validation (`model_copy(update=...)`), so re-validation can judge it.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, PydanticCustomError, core_schema, to_json

from .json_text import (
    JsonValue,
    NotFiniteJson,
    canonical_json,
    check_finite_json,
    compact_json,
    json_depth_and_nodes,
)

__all__ = (
    "ENV_STATE_MAX_BYTES",
    "ENV_STATE_MAX_DEPTH",
    "ENV_STATE_MAX_NODES",
    "CanonicalJsonField",
    "FiniteJsonField",
    "canonical_text",
    "forged_json",
    "json_str",
    "json_value",
    "read_canonical",
)

ENV_STATE_MAX_BYTES = 1024 * 1024
ENV_STATE_MAX_DEPTH = 32
ENV_STATE_MAX_NODES = 10_000


@dataclass(frozen=True, slots=True)
class _Canonical:
    """A finite JSON value stored as its canonical text (keys sorted, compact, UTF-8)."""

    text: str

    def decode(self) -> JsonValue:
        value: JsonValue = json.loads(self.text)
        return value


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
    if bounded:
        size = len(text.encode())
        depth, nodes = json_depth_and_nodes(checked)
        if size > ENV_STATE_MAX_BYTES:
            raise PydanticCustomError(
                "value_error",
                "Canonical JSON is {size} bytes; at most {limit} allowed.",
                {"size": size, "limit": ENV_STATE_MAX_BYTES},
            )
        if depth > ENV_STATE_MAX_DEPTH:
            raise PydanticCustomError(
                "value_error",
                "JSON depth is {depth}; at most {limit} allowed.",
                {"depth": depth, "limit": ENV_STATE_MAX_DEPTH},
            )
        if nodes > ENV_STATE_MAX_NODES:
            raise PydanticCustomError(
                "value_error",
                "JSON has {nodes} nodes; at most {limit} allowed.",
                {"nodes": nodes, "limit": ENV_STATE_MAX_NODES},
            )
    return _Canonical(text)


def read_canonical(raw: Any) -> JsonValue:
    """A fresh value of a stored canonical field."""
    if type(raw) is _Canonical:
        return raw.decode()
    return copy.deepcopy(raw)  # type: ignore[no-any-return]  # forged via model_copy(update=...)


def canonical_text(raw: Any) -> str:
    """The canonical JSON text of a stored canonical field."""
    if type(raw) is _Canonical:
        return raw.text
    return forged_json(raw)


@dataclass(frozen=True, slots=True)
class CanonicalJsonField:
    """Schema marker: finite JSON stored canonically; `bounded` adds the environment-state limits."""

    bounded: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        bounded = self.bounded
        return core_schema.no_info_plain_validator_function(
            lambda value: _canonical(value, bounded=bounded),
            json_schema_input_schema=core_schema.any_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(read_canonical),
        )


def _finite_extra(value: Any) -> JsonValue:
    try:
        return check_finite_json(value)
    except NotFiniteJson as exc:
        raise PydanticCustomError(
            "value_error", "Value is not finite JSON: {reason}", {"reason": str(exc)}
        ) from None


class FiniteJsonField:
    """Schema marker: any finite JSON, kept as a checked copy (unknown top-level keys)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _finite_extra, json_schema_input_schema=core_schema.any_schema()
        )


def forged_json(value: Any) -> str:
    """JSON for a value that bypassed validation (`model_copy(update=...)`); re-validation judges it."""
    return to_json(value, serialize_unknown=True, inf_nan_mode="constants").decode()


# `json.dumps(value, ensure_ascii=False)`, without building a new encoder on every call.
json_str = json.JSONEncoder(ensure_ascii=False).encode


def json_value(value: Any) -> str:
    """`compact_json` of a stored value (unknown keys verbatim, never re-sorted), or `forged_json` of
    one that bypassed validation."""
    try:
        return compact_json(value)
    except (TypeError, ValueError):
        return forged_json(value)
