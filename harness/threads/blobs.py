"""History data stored as byte deltas on the previous checkpoint's (THREADS §2 "History storage").

A blob is either whole, or "keep `keep` bytes of the base blob, then append `data`", `keep` being the
core's `common_prefix` of the two (`harness.deltas`, which checkpoint candidates' deltas use too). A
chain is cut (the data stored whole) once reading it would cost more than twice the blob's size, so any
blob is rebuilt from at most 2 x its bytes in one ordered query.

Each blob's SHA-256 is computed as its delta is: a blob written here keeps the hash state of its data up
to its last byte (a history's closing bracket), and the next blob that keeps at least that much of it
hashes only what it adds. A long thread's commit so hashes its turn, not its history.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..deltas import common_prefix

__all__ = ("BlobRef", "Delta", "plan_delta", "rebuild")


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A stored blob and its rebuilt bytes, kept by whoever writes the next delta on it."""

    id: int
    data: bytes
    chain_bytes: int
    hashed: Any = None
    """The SHA-256 state of `data` but its last byte, when this process wrote it (None when read)."""


@dataclass(frozen=True, slots=True)
class Delta:
    """What to write for new data: `keep` bytes of `base_id`'s data, then `tail` (whole when no base)."""

    base_id: int | None
    keep: int
    tail: bytes
    chain_bytes: int
    sha256: str
    hashed: Any
    """The hash state of `data` but its last byte (`BlobRef.hashed` of the blob written)."""


def plan_delta(data: bytes, base: BlobRef | None) -> Delta:
    """The delta of `data` on `base`, or `data` whole when a chain would read more than 2 x its size."""
    keep = 0 if base is None else common_prefix(base.data, data)
    hashed = _hashed(data, base, keep)
    final = hashed.copy()
    final.update(memoryview(data)[len(data) - 1 :])
    digest = final.hexdigest()
    if base is not None:
        tail = data[keep:]
        chain = base.chain_bytes + len(tail)
        if chain <= 2 * len(data) and keep > 0:
            return Delta(base.id, keep, tail, chain, digest, hashed)
    return Delta(None, 0, data, len(data), digest, hashed)


def _hashed(data: bytes, base: BlobRef | None, keep: int) -> Any:
    """The SHA-256 state of `data` but its last byte, from `base`'s own where `data` keeps all of it."""
    view, end = memoryview(data), max(len(data) - 1, 0)
    if base is not None and base.hashed is not None and 0 < len(base.data) <= min(keep, end) + 1:
        state = base.hashed.copy()
        state.update(view[len(base.data) - 1 : end])
        return state
    return hashlib.sha256(view[:end])


def rebuild(links: Sequence[tuple[int, bytes]]) -> bytes:
    """The data of a chain given root first, each link as `(keep, data)` (the root's `keep` is 0)."""
    result = bytearray()
    for keep, data in links:
        del result[keep:]
        result += data
    return bytes(result)
