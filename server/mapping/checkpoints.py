"""Checkpoint candidates in CHECKPOINT_FORM_DELTA: each candidate's history as an edit of the one before.

With full candidates every candidate repeats the whole history, so a run of many model requests sends
the square of its history: `bench/` measured 33 times the final state's bytes for a 32-request run.
A `HistoryDelta` is plain text surgery on `message_history.data` (keep a byte prefix of the base,
append the rest), so any host rebuilds it without parsing JSON, and it is correct whatever changed:
the common case, a history that grew at its end, costs only what the run added.

The server's cost is bounded the same way: finding the kept prefix is one memory comparison (the core's
`common_prefix`, which the thread store's deltas use too), and the rebuilt data's SHA-256 is computed
incrementally over the prefix candidates keep in common.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from threadline.v1 import events_pb2

from harness import HarnessState
from harness.deltas import common_prefix

from .events import fill_timestamp
from .state import fill_state

__all__ = ("CheckpointDeltas",)


class CheckpointDeltas:
    """Encodes the checkpoint candidates of one stream in CHECKPOINT_FORM_DELTA.

    Args:
        base: The `message_history.data` of the previous state the host sent, as sent (`b"[]"` when
            none): what the first candidate's delta applies to.
    """

    def __init__(self, base: bytes) -> None:
        self._base = base
        self._hash = hashlib.sha256()
        self._hashed = 0
        """`_hash` covers the first `_hashed` bytes of `_base` (a prefix every later candidate kept)."""

    def fill(
        self,
        msg: events_pb2.RunEvent,
        state: HarnessState,
        *,
        thread_id: str,
        run_id: str,
        sequence: int,
        occurred_at: datetime | None = None,
    ) -> None:
        """The candidate event for `state`, written into the empty `msg`, its history as a delta on the
        previous candidate's."""
        data = state.message_history_json()
        keep = common_prefix(self._base, data)
        if keep < self._hashed:
            self._hash, self._hashed = hashlib.sha256(), 0
        view = memoryview(data)
        self._hash.update(view[self._hashed : keep])
        self._hashed = keep
        whole = self._hash.copy()
        whole.update(view[keep:])
        msg.thread_id, msg.run_id, msg.sequence = thread_id, run_id, sequence
        fill_timestamp(msg.occurred_at, occurred_at or datetime.now(UTC))
        candidate = msg.checkpoint_candidate
        fill_state(candidate.state, state, history_data=False)
        candidate.state.message_history.sha256 = whole.digest()
        candidate.history_delta.keep_bytes = keep
        candidate.history_delta.append = data[keep:].decode()
        self._base = data
