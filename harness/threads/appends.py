"""The appends of one replica's holders (LIVE §2.2 b), grouped: one transaction for every attempt here.

Each attempt's log is appended once its oldest unwritten event is a window old or it holds 64 KiB. When
one is due, the append takes every attempt's buffer whose write turn is free, so a replica running many
attempts writes them all in one transaction a window instead of one each: per-transaction work (the
store's thread hop, `BEGIN`, the commit, a PostgreSQL notification) is paid once. An attempt still has
one write in flight (its `turn`), its compare-and-set and its cancel read are its own, and a lone
attempt appends exactly as often as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..errors import ErrorCode, ThreadError
from .commits import settle
from .eventlog import AttemptLog, LogWrite
from .lease import LeaseKeeper, Lost
from .logstore import LogMoved, LogStore

__all__ = ("Appends",)

LOGGER = logging.getLogger("threadline.threads")

_RETRY_S = (0.05, 1.0)
"""The first and the longest wait before an append the store refused (down) is tried again."""
_BUSY_S = 0.05
"""How long to wait when every attempt with events is being written by its own commit."""


@dataclass(frozen=True, slots=True)
class _Attempt:
    log: AttemptLog
    lease: LeaseKeeper
    thread_id: str
    stop: Callable[[], None]
    """Stops the run: a cancel was asked of it (read by an append, as a renewal reads it)."""


class Appends:
    """The grouped appends of the attempts this replica holds, while any is registered."""

    def __init__(self, logs: LogStore) -> None:
        self._logs = logs
        self._attempts: dict[int, _Attempt] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.on_append: Callable[[int], None] | None = None
        """Told of each append transaction: how many attempts' logs it wrote (a server counts them)."""

    @contextlib.contextmanager
    def attempt(
        self, log: AttemptLog, lease: LeaseKeeper, thread_id: str, stop: Callable[[], None]
    ) -> Iterator[None]:
        """Append `log` while the block runs (nothing for an attempt without a log)."""
        if not log.recorded:
            yield
            return
        key = id(log)
        self._attempts[key] = _Attempt(log, lease, thread_id, stop)
        log.on_pending = self._wake.set
        if self._task is None:
            self._task = asyncio.ensure_future(self._append())
        self._wake.set()
        try:
            yield
        finally:
            log.on_pending = None
            self._attempts.pop(key, None)
            self._wake.set()

    async def _append(self) -> None:
        delay = _RETRY_S[0]
        try:
            while self._attempts:
                self._wake.clear()
                waiting = [a for a in self._attempts.values() if a.log.pending and a.lease.lost is None]
                if not waiting:
                    await self._wake.wait()
                    continue
                ready = [a for a in waiting if not a.log.turn.locked()]  # the others' commits write them
                due = min((a.log.due_in() for a in ready), default=_BUSY_S)
                if due > 0:
                    await self._wait(due)  # a new buffer may be due sooner
                    continue
                if await self._write(ready):
                    delay = _RETRY_S[0]
                else:
                    await asyncio.sleep(delay)  # unknown outcome: the next write's compare-and-set settles it
                    delay = min(delay * 2, _RETRY_S[1])
        finally:
            self._task = None

    async def _wait(self, seconds: float) -> None:
        """Until woken, or `seconds` passed: a timer sets the event (`wait_for` would make a task and a
        waiter each time, and this waits a few times per turn of every attempt)."""
        timer = asyncio.get_running_loop().call_later(seconds, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()

    async def _write(self, ready: list[_Attempt]) -> bool:
        """One grouped append of every attempt in `ready` with events still unwritten; False: the store
        is down (or the append failed)."""
        taken: list[tuple[_Attempt, LogWrite]] = []
        try:
            for attempt in ready:
                await attempt.log.turn.acquire()  # free (`ready`, and no await since): taken at once
                write = attempt.log.take() if attempt.log.pending else None
                if write is None:
                    attempt.log.turn.release()
                else:
                    taken.append((attempt, write))
            if not taken:
                return True
            try:
                outcomes = await self._logs.append([(a.thread_id, write) for a, write in taken])
            except ThreadError as error:
                if error.code != ErrorCode.STORE_UNAVAILABLE:
                    self._crashed(taken, error)
                return False
            except Exception as error:  # a bug: logged with each run's ids; the runs go on, unlogged
                self._crashed(taken, error)
                return False
            if self.on_append is not None:
                self.on_append(sum(not isinstance(outcome, LogMoved) for outcome in outcomes))
            for (attempt, write), outcome in zip(taken, outcomes, strict=True):
                if isinstance(outcome, LogMoved):
                    with contextlib.suppress(Lost):
                        settle(attempt.log, outcome.row, attempt.lease, attempt.thread_id)
                    continue
                attempt.log.wrote(write)
                if outcome:
                    attempt.stop()
            return True
        finally:
            for attempt, _write in taken:
                attempt.log.turn.release()

    def _crashed(self, taken: list[tuple[_Attempt, LogWrite]], error: BaseException) -> None:
        """An append failed for a reason of its own (not the store down): log it with each run's ids and
        stop appending those attempts (their commits still write their events)."""
        for attempt, write in taken:
            self._attempts.pop(id(attempt.log), None)
            LOGGER.error(
                "log_append_failed",
                exc_info=error,
                extra={"fields": {"thread_id": attempt.thread_id, "run_id": write.run_id}},
            )
