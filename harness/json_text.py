"""JSON in the core: one strict parser for text from outside, one writer for each spelling.

Every module that reads or writes JSON text takes it from here, so a value is parsed by one set of
rules and spelt one way wherever it appears (a tool call's `args_json` in an event and in a deferred
batch are the same text).

- *Finite JSON* (`JsonValue`): objects with string keys, arrays, strings, booleans, null and finite
  numbers, at most `MAX_JSON_DEPTH` levels deep; strings are valid Unicode (no lone surrogates, which
  could not be written back as UTF-8). `check_finite_json` proves it of a Python value.
- `parse_json` reads text from outside: RFC 8259 only (no `NaN`/`Infinity`, no lone surrogate
  escapes, no repeated object keys, no trailing text), bounded in depth *before* anything recursive
  sees the value, so hostile nesting is a clear error instead of a `RecursionError`.
- `canonical_json`: compact, keys sorted, UTF-8 — stored values (capability data, environment state,
  metadata), where equal values must give equal bytes.
- `dump_json`: compact, the value's own key order — values echoed as they are (results, details);
  Python values that are not JSON (a model, bytes) go through pydantic, as pydantic-ai writes them.
- `args_json`: a tool call's arguments as the wire carries them (text verbatim, else `dump_json`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic_core import from_json, to_json

__all__ = (
    "MAX_JSON_DEPTH",
    "JsonTextError",
    "JsonValue",
    "NotFiniteJson",
    "args_json",
    "canonical_json",
    "check_finite_json",
    "compact_json",
    "dump_json",
    "json_depth_and_nodes",
    "parse_json",
)

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
"""Finite JSON, as Python values."""

MAX_JSON_DEPTH = 100
"""The deepest JSON value the core accepts (a scalar is depth 1), as protobuf's JSON parser bounds it."""


class NotFiniteJson(ValueError):
    """The value is not finite JSON; the message says where."""


class JsonTextError(ValueError):
    """The text is not one strict JSON value; the message says why (never echoing the text itself)."""


# --- Python values ----------------------------------------------------------------------------------


def check_finite_json(value: Any, *, where: str = "$") -> JsonValue:
    """Return a detached copy of `value` if it is finite JSON, else raise `NotFiniteJson`.

    Lists come back as lists (tuples are refused: JSON has one array type and a tuple would not
    round-trip as itself). Booleans stay booleans; ints stay ints.
    """
    return _check(value, where, set(), 1)


def _check(value: Any, where: str, seen: set[int], depth: int) -> JsonValue:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _unicode(value, where)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotFiniteJson(f"{where}: non-finite number {value!r}")
        return value
    if isinstance(value, list | dict):
        if depth >= MAX_JSON_DEPTH:
            raise NotFiniteJson(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
        marker = id(value)
        if marker in seen:
            raise NotFiniteJson(f"{where}: cycle")
        seen.add(marker)
        try:
            if isinstance(value, list):
                return [_check(item, f"{where}[{i}]", seen, depth + 1) for i, item in enumerate(value)]
            out: dict[str, JsonValue] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise NotFiniteJson(f"{where}: object key {key!r} is not a string")
                out[_unicode(key, where)] = _check(item, f"{where}.{key}", seen, depth + 1)
            return out
        finally:
            seen.discard(marker)
    raise NotFiniteJson(f"{where}: {type(value).__name__} is not JSON")


def _unicode(text: str, where: str) -> str:
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise NotFiniteJson(f"{where}: a string is not valid Unicode (lone surrogate)") from None
    return text


def json_depth_and_nodes(value: JsonValue) -> tuple[int, int]:
    """The nesting depth (a scalar is 1) and the node count of a finite JSON value."""
    depth, nodes = 0, 0
    stack: list[tuple[JsonValue, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
        elif isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
    return depth, nodes


# --- text -> value ----------------------------------------------------------------------------------


def parse_json(text: str | bytes) -> JsonValue:
    """Parse one strict JSON value from outside (module docstring), or raise `JsonTextError`.

    pydantic-core's parser reads the text first: it refuses `NaN`/`Infinity`, lone surrogate escapes
    and trailing text, and stops at 200 levels without recursing in Python. The value's depth and
    numbers are then checked without recursion; only a value holding objects is read a second time,
    by the standard library, to refuse a repeated key (the first parser keeps the last one silently).
    """
    try:
        value = from_json(text, allow_inf_nan=False)
    except ValueError as error:
        raise JsonTextError(f"not valid JSON ({_reason(error)})") from None
    has_objects = False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            has_objects = True
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            if isinstance(item, float) and not math.isfinite(item):
                raise JsonTextError("not valid JSON (a number is too large for a double)")
            continue
        if level >= MAX_JSON_DEPTH:
            raise JsonTextError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((child, level + 1) for child in children)
    if has_objects:
        try:
            json.loads(text, object_pairs_hook=_unique_keys)
        except _RepeatedKey as repeated:
            raise JsonTextError(f"object key {repeated.key!r} appears twice") from None
    return value  # type: ignore[no-any-return]  # checked above: finite JSON


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key[:64]


def _unique_keys(pairs: list[tuple[str, Any]]) -> None:
    keys = {key for key, _ in pairs}
    if len(keys) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)


def _reason(error: ValueError) -> str:
    text = str(error)
    if "hex escape" in text or "surrogate" in text:
        return f"{text}; a \\u escape must not be a lone surrogate"
    return text


# --- value -> text ----------------------------------------------------------------------------------

# `json.dumps` with arguments builds a new encoder on every call; these are built once.
_canonical = json.JSONEncoder(
    separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
).encode
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def canonical_json(value: JsonValue) -> str:
    """Compact, key-sorted, `ensure_ascii=False` JSON text; refuses non-finite numbers."""
    return _canonical(value)


def compact_json(value: Any) -> str:
    """Compact JSON in the value's own key order; `TypeError`/`ValueError` for what is not finite JSON."""
    return _compact(value)


def dump_json(value: Any) -> str:
    """`compact_json`, and a value that is not finite JSON (a pydantic model, bytes, a non-finite float)
    written by pydantic as pydantic-ai writes it (bytes as base64, non-finite numbers as `null`)."""
    try:
        return _compact(value)
    except (TypeError, ValueError):
        return to_json(value, bytes_mode="base64").decode()


def args_json(args: object) -> str:
    """A tool call's arguments as text: `""` for none, text verbatim, anything else `dump_json`."""
    if args is None:
        return ""
    if isinstance(args, str):
        return args
    return dump_json(args)
