"""History data stored as byte deltas on the previous checkpoint's (THREADS §2 "History storage").

A blob is either whole, or "keep `keep` bytes of the base blob, then append `data`", `keep` being the
core's `common_prefix` of the two (`harness.deltas`, which checkpoint candidates' deltas use too). A
chain is cut (the data stored whole) once reading it would cost more than twice the blob's size, so any
blob is rebuilt from at most 2 x its bytes in one ordered query.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..deltas import common_prefix

__all__ = ("BlobRef", "Delta", "plan_delta", "rebuild")


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A stored blob and its rebuilt bytes, kept by whoever writes the next delta on it."""

    id: int
    data: bytes
    chain_bytes: int


@dataclass(frozen=True, slots=True)
class Delta:
    """What to write for new data: `keep` bytes of `base_id`'s data, then `tail` (whole when no base)."""

    base_id: int | None
    keep: int
    tail: bytes
    chain_bytes: int
    sha256: str


def plan_delta(data: bytes, base: BlobRef | None) -> Delta:
    """The delta of `data` on `base`, or `data` whole when a chain would read more than 2 x its size."""
    digest = hashlib.sha256(data).hexdigest()
    if base is not None:
        keep = common_prefix(base.data, data)
        tail = data[keep:]
        chain = base.chain_bytes + len(tail)
        if chain <= 2 * len(data) and keep > 0:
            return Delta(base.id, keep, tail, chain, digest)
    return Delta(None, 0, data, len(data), digest)


def rebuild(links: Sequence[tuple[int, bytes]]) -> bytes:
    """The data of a chain given root first, each link as `(keep, data)` (the root's `keep` is 0)."""
    result = bytearray()
    for keep, data in links:
        del result[keep:]
        result += data
    return bytes(result)
