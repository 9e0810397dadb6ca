"""Checkpoint candidates in CHECKPOINT_FORM_DELTA, rebuilt into complete states before a host sees them.

With CHECKPOINT_FORM_FULL every candidate repeats the whole history, so a run's candidates together
grow with the square of its length. The SDK therefore asks for CHECKPOINT_FORM_DELTA whenever a host
turns `RunSpec.checkpoints` on without choosing a form, and undoes the delta here: a candidate's
`message_history.data` is its base's first `keep_bytes` UTF-8 bytes plus `append`, where the base is
the previous candidate's rebuilt data, or for the first one the `previous_state` data the run was
sent (`[]` without a previous state). The rebuilt data must hash to the candidate's `sha256`.

A host thus only ever sees complete states, whatever form travelled. Like the server, the SHA-256 is
computed incrementally over the prefix that successive candidates keep, so a long run costs the
copies of its data, not a re-hash of every candidate's whole history.
"""

from __future__ import annotations

import hashlib
from typing import Final

from ._errors import ProtocolError
from ._gen.threadline.v1 import HarnessState, HistoryDelta, RunSpec

__all__ = ("HistoryRebuilder", "delta_base")

EMPTY_HISTORY: Final = b"[]"
"""The base of a stream's first candidate when the run was sent no previous state."""


def delta_base(spec: RunSpec | None) -> bytes:
    """The base of a stream's first delta candidate: the previous state's data exactly as sent."""
    previous = spec.previous_state if spec is not None else None
    if previous is None:
        return EMPTY_HISTORY
    # An envelope without a history is sent with empty data, and the server takes it as it arrived.
    history = previous.message_history
    return history.data.encode("utf-8") if history is not None else b""


class HistoryRebuilder:
    """Rebuilds the candidates of one stream, in order, each from the one before.

    Args:
        base: What the first candidate's delta applies to (`delta_base`).
    """

    def __init__(self, base: bytes) -> None:
        self._base = base
        self._hash = hashlib.sha256()
        self._hashed = 0
        """`_hash` covers the first `_hashed` bytes of `_base` (a prefix every later candidate kept)."""

    def rebuild(self, sequence: int, state: HarnessState | None, delta: HistoryDelta) -> None:
        """Fill in `state.message_history.data` from `delta`, and make it the next candidate's base.

        Args:
            sequence: The candidate event's `sequence`, for the error.
            state: The candidate's state, whose history data is filled in.
            delta: The candidate's `history_delta`.

        Raises:
            ProtocolError: The state has no history to fill, `keep_bytes` exceeds the base, or the
                rebuilt data does not match `message_history.sha256`; the base stays as it was.
        """

        def broken(why: str) -> ProtocolError:
            return ProtocolError(f"the checkpoint candidate at sequence {sequence} does not rebuild: {why}")

        history = state.message_history if state is not None else None
        if history is None:
            raise broken("its history_delta has no state.message_history to rebuild")
        keep = delta.keep_bytes
        if keep > len(self._base):
            raise broken(f"its history_delta keeps {keep} bytes of a base that has {len(self._base)}")
        appended = delta.append.encode("utf-8")
        if keep < self._hashed:
            self._hash, self._hashed = hashlib.sha256(), 0
        self._hash.update(memoryview(self._base)[self._hashed : keep])
        self._hashed = keep
        whole = self._hash.copy()
        whole.update(appended)
        if whole.digest() != history.sha256:
            raise broken("its rebuilt history does not match message_history.sha256")
        data = self._base[:keep] + appended
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:  # pragma: no cover - a digest the server made over bad UTF-8
            raise broken(f"its rebuilt history is not UTF-8: {exc}") from None
        history.data = text
        self._base = data  # `_hash` still covers its first `keep` bytes, which it shares with the base
