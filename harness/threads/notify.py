"""Cancel requests between replicas on PostgreSQL, delivered at once with LISTEN/NOTIFY.

`CancelThreadRun` may reach a replica that does not hold the run. It records the request in the
thread's row (`cancel_requested`), which the holder reads at its next lease renewal (a third of the
lease at most), and on PostgreSQL also notifies the channel below in the same transaction, so the
holder hears it as soon as that transaction commits. A notification lost while a listener reconnects
costs only that promptness: the row still says it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable

import psycopg

__all__ = ("CHANNEL", "THREAD_CHANNEL", "CancelListener", "payload")

LOGGER = logging.getLogger("threadline.threads")

THREAD_CHANNEL = "threadline_thread"
"""Events written, a thread changed, work due (LIVE §2.6): heard by followers and watchers."""

CHANNEL = "threadline_cancel"
"""The notification channel; its payload is `payload(thread_id, run_id)`."""

_POLL_S = 1.0
"""How often the listening thread looks up from waiting, to notice `close()`."""

_RECONNECT_S = (0.5, 1.0, 2.0, 5.0)
"""Waits between attempts to listen again after the database went away (the last one repeats)."""


def payload(thread_id: str, run_id: str) -> str:
    return json.dumps([thread_id, run_id])


class CancelListener:
    """A thread of its own, on a connection of its own, handing each request to `deliver` on `loop`."""

    def __init__(
        self,
        conninfo: str,
        loop: asyncio.AbstractEventLoop,
        deliver: Callable[[str, str], None],
        changed: Callable[[str, int | None, str], None] | None = None,
        due: Callable[[], None] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._loop = loop
        self._deliver = deliver
        self._changed = changed
        """Called (from the listening thread) for each attempt or thread a `threadline_thread` note names:
        thread id, its change sequence (`None`: unchanged), run id."""
        self._due = due
        """Called on `loop` for a note that says the server's own work on a thread is due now."""
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="threadline-cancels", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop listening (the thread ends within `_POLL_S`)."""
        self._closed.set()

    def _listen(self) -> None:
        failures = 0
        while not self._closed.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    conn.execute(f"LISTEN {THREAD_CHANNEL}")
                    failures = 0
                    while not self._closed.is_set():
                        for note in conn.notifies(timeout=_POLL_S):
                            if note.channel == THREAD_CHANNEL:
                                self._thread_changed(note.payload)
                            else:
                                self._hand_over(note.payload)
            except psycopg.Error as error:
                if failures == 0:
                    LOGGER.warning("cancel_listener_lost", extra={"fields": {"error": type(error).__name__}})
                self._closed.wait(_RECONNECT_S[min(failures, len(_RECONNECT_S) - 1)])
                failures += 1

    def _thread_changed(self, text: str) -> None:
        """A `threadline_thread` note (LIVE §2.6): `[thread_id, change_seq, run_id, last_sequence]` from a
        commit (with a fifth `true` when work on the thread is due now: the sweeper looks at once), or a
        list of them from a grouped append (`change_seq` null: the thread did not change)."""
        try:
            note = json.loads(text)
        except ValueError:
            return
        if not isinstance(note, list):
            return
        for entry in note if note and isinstance(note[0], list) else [note]:
            if not isinstance(entry, list) or len(entry) not in (4, 5):
                continue
            thread_id, change, run_id, _last, *due = entry
            if due == [True] and self._due is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
                    self._loop.call_soon_threadsafe(self._due)
            if (
                self._changed is not None
                and isinstance(thread_id, str)
                and isinstance(run_id, str)
                and (change is None or isinstance(change, int))
            ):
                self._changed(thread_id, change, run_id)  # thread-safe: it only schedules a wake-up

    def _hand_over(self, text: str) -> None:
        try:
            thread_id, run_id = json.loads(text)
        except (ValueError, TypeError):
            return  # not ours
        if isinstance(thread_id, str) and isinstance(run_id, str):
            try:
                self._loop.call_soon_threadsafe(self._deliver, thread_id, run_id)
            except RuntimeError:  # the loop closed: the server is gone
                self._closed.set()
