"""Following a run attempt's log and a thread's changes, from any replica (LIVE §2.4–§2.7).

A follower keeps one position and reads on from it: it never holds a queue, so a slow one never grows
memory or slows the run. It is woken by `Hub`: at once after each write in this process, on PostgreSQL by
the `threadline_thread` notification, and by a poll (one transaction for everything this replica follows)
where other processes may write: every 250 ms on a shared SQLite file, every second on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("Hub", "Signal")

Positions = Callable[
    [list[tuple[str, str]], list[str]],
    Awaitable[tuple[dict[tuple[str, str], tuple[str, int]], dict[str, int]]],
]


class Signal:
    """Fired whenever what it stands for may have changed; a waiter passes the `version` it saw last."""

    __slots__ = ("_event", "users", "version")

    def __init__(self) -> None:
        self.version = 0
        self.users = 0
        self._event = asyncio.Event()

    def fire(self) -> None:
        self.version += 1
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, seen: int, timeout: float) -> bool:
        """Until fired after `seen` (True), or `timeout` seconds (False)."""
        if self.version != seen:
            return True
        event = self._event
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return self.version != seen
        return True


@dataclass
class _Seen:
    logs: dict[tuple[str, str], tuple[str, int]]
    changes: dict[str, int]


class Hub:
    """The wake-ups of one replica's followers and watchers."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, *, poll_s: float | None, positions: Positions
    ) -> None:
        self._loop = loop
        self._poll_s = poll_s
        self._positions = positions
        self._attempts: dict[tuple[str, str], Signal] = {}
        self._threads: dict[str, Signal] = {}
        self._followed: dict[str, int] = {}
        """Per thread, its attempts followed here: a note for a thread nobody follows is dropped where
        it arrives, without waking the loop."""
        self._poller: asyncio.Task[None] | None = None
        self._seen = _Seen({}, {})

    @property
    def followers(self) -> int:
        """Followers and watchers registered now."""
        return sum(s.users for s in self._attempts.values()) + sum(s.users for s in self._threads.values())

    @contextlib.contextmanager
    def attempt(self, thread_id: str, run_id: str) -> Iterator[Signal]:
        """The signal of one attempt's log, registered (for the poll) while the block runs."""
        self._followed[thread_id] = self._followed.get(thread_id, 0) + 1
        try:
            with self._use(self._attempts, (thread_id, run_id)) as signal:
                yield signal
        finally:
            left = self._followed[thread_id] - 1
            if left:
                self._followed[thread_id] = left
            else:
                del self._followed[thread_id]

    @contextlib.contextmanager
    def thread(self, thread_id: str) -> Iterator[Signal]:
        """The signal of one thread's changes, registered while the block runs."""
        with self._use(self._threads, thread_id) as signal:
            yield signal

    @contextlib.contextmanager
    def _use(self, signals: dict[Any, Signal], key: Any) -> Iterator[Signal]:
        signal = signals.get(key)
        if signal is None:
            signal = signals[key] = Signal()
        signal.users += 1
        if self._poll_s is not None and self._poller is None:
            self._poller = asyncio.ensure_future(self._poll())
        try:
            yield signal
        finally:
            signal.users -= 1
            if signal.users == 0 and signals.get(key) is signal:
                del signals[key]

    def fire(self, thread_id: str, run_id: str = "", changed: bool = True) -> None:
        """On the loop: the thread (`changed`: what `Thread` shows) and its attempt `run_id`'s log were
        written (the store calls it once the write committed, `StoreWorker.on_loop`)."""
        self._fire(thread_id, run_id, changed)

    def fire_logs(self, written: Sequence[tuple[str, str, int]]) -> None:
        """On the loop: the logs of these attempts (thread ID, run ID, last sequence) were written, no
        thread changed."""
        for thread_id, run_id, _last in written:
            self._fire(thread_id, run_id, False)

    def noted(self, thread_id: str, change_seq: int | None, run_id: str) -> None:
        """A `threadline_thread` notification from another replica (callable from any thread): the thread
        changed when its change sequence is not the one last seen (`None`: it did not), and `run_id`'s log
        was written."""
        if thread_id not in self._followed and thread_id not in self._threads:
            return  # nobody here follows it (the poll catches up a follower that arrives meanwhile)
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._noted, thread_id, change_seq, run_id)

    def _noted(self, thread_id: str, change_seq: int | None, run_id: str) -> None:
        changed = change_seq is not None and self._seen.changes.get(thread_id) != change_seq
        if changed and change_seq is not None and thread_id in self._threads:
            self._seen.changes[thread_id] = change_seq
        self._fire(thread_id, run_id, changed)

    def _fire(self, thread_id: str, run_id: str, changed: bool) -> None:
        signal = self._threads.get(thread_id)
        if signal is not None and changed:
            signal.fire()
        if run_id:
            attempt = self._attempts.get((thread_id, run_id))
            if attempt is not None:
                attempt.fire()
        else:
            for (thread, _run), attempt in self._attempts.items():
                if thread == thread_id:
                    attempt.fire()

    async def _poll(self) -> None:
        """While anything is followed, read every followed position in one transaction and fire what
        moved (writes of other processes, and a notification lost while its listener reconnected)."""
        assert self._poll_s is not None
        try:
            while self._attempts or self._threads:
                await asyncio.sleep(self._poll_s)
                attempts, threads = list(self._attempts), list(self._threads)
                try:
                    logs, changes = await self._positions(attempts, threads)
                except Exception:  # the store is down: its followers find out by themselves
                    continue
                for key, position in logs.items():
                    if self._seen.logs.get(key) != position:
                        self._seen.logs[key] = position
                        signal = self._attempts.get(key)
                        if signal is not None:
                            signal.fire()
                for thread_id, change in changes.items():
                    if self._seen.changes.get(thread_id) != change:
                        self._seen.changes[thread_id] = change
                        watcher = self._threads.get(thread_id)
                        if watcher is not None:
                            watcher.fire()
                self._seen = _Seen(
                    {k: v for k, v in self._seen.logs.items() if k in self._attempts},
                    {k: v for k, v in self._seen.changes.items() if k in self._threads},
                )
        finally:
            self._poller = None

    def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
