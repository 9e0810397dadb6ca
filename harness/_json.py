"""Finite and canonical JSON: the two rules every stored or exported JSON value follows.

"Finite JSON" is objects with string keys, arrays, strings, booleans, null and finite numbers (no
NaN, ±Infinity, cycles, tuples-as-anything-else). "Canonical JSON" is its compact, key-sorted,
UTF-8 (`ensure_ascii=False`) encoding: two equal values always give the same bytes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import JsonValue

__all__ = ("NotFiniteJson", "canonical_json", "check_finite_json", "json_depth_and_nodes")


class NotFiniteJson(ValueError):
    """The value is not finite JSON; the message says where."""


def check_finite_json(value: Any, *, where: str = "$") -> JsonValue:
    """Return a detached copy of `value` if it is finite JSON, else raise `NotFiniteJson`.

    Lists come back as lists (tuples are refused: JSON has one array type and a tuple would not
    round-trip as itself). Booleans stay booleans; ints stay ints.
    """
    return _check(value, where, set())


def _check(value: Any, where: str, seen: set[int]) -> JsonValue:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotFiniteJson(f"{where}: non-finite number {value!r}")
        return value
    if isinstance(value, list | dict):
        marker = id(value)
        if marker in seen:
            raise NotFiniteJson(f"{where}: cycle")
        seen.add(marker)
        try:
            if isinstance(value, list):
                return [_check(item, f"{where}[{i}]", seen) for i, item in enumerate(value)]
            out: dict[str, JsonValue] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise NotFiniteJson(f"{where}: object key {key!r} is not a string")
                out[key] = _check(item, f"{where}.{key}", seen)
            return out
        finally:
            seen.discard(marker)
    raise NotFiniteJson(f"{where}: {type(value).__name__} is not JSON")


def canonical_json(value: JsonValue) -> str:
    """Compact, key-sorted, `ensure_ascii=False` JSON text; refuses non-finite numbers."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)


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
