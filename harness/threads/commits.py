"""The fenced commits of a thread run (THREADS §4 step 2), each proving or losing its lease."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from ..deferred import DeferredToolResume
from ..errors import ErrorCode, ThreadError
from .eventlog import AttemptLog
from .intents import IntentCall
from .lease import LeaseKeeper, Lost
from .logstore import LogMoved, LogRow
from .records import Head, ThreadRow
from .request import RunHost
from .store import Finish, NewCheckpoint, lease_lost

__all__ = ("Committer",)


class Committer:
    """The holder's fenced commits: each retried while the store is down until the lease's expiry, and
    read back when its outcome is unknown. Keeps the revision, the delta base and the retained batch."""

    def __init__(
        self,
        host: RunHost,
        thread: ThreadRow,
        head: Head,
        lease: LeaseKeeper,
        log: AttemptLog,
        intents: Callable[[], list[IntentCall]] = list,
    ) -> None:
        self._host = host
        self._intents = intents
        """The side-effecting calls a checkpoint commits issued intents for (LIVE §5.2)."""
        self._thread_id = thread.thread_id
        self._lease = lease
        self._log = log
        self.revision = thread.revision
        self.base = head
        self.accepted = thread.accepted

    async def commit(
        self,
        checkpoint: NewCheckpoint | None,
        *,
        accepted: DeferredToolResume | None,
        finish: Finish | None = None,
        result_sequence: int | None = None,
        park: str = "",
        dispatched: Sequence[IntentCall] = (),
    ) -> None:
        """A fenced commit, retried while the store is down until the lease's own expiry; it writes the
        attempt's buffered events too (and with `finish`, ends its log at `result_sequence`). `park`
        (the request's ID) gives the lease up with it (`ThreadStore.commit`); `dispatched`: calls about
        to start, dispatched with it (LIVE §5.2).

        Raises:
            Lost: the lease is lost (before, or in answer to, the commit).
            ThreadError: the store refused the commit otherwise.
        """
        async with self._log.turn:
            await self._commit(
                checkpoint,
                accepted=accepted,
                finish=finish,
                result_sequence=result_sequence,
                park=park,
                dispatched=dispatched,
            )

    async def _commit(
        self,
        checkpoint: NewCheckpoint | None,
        *,
        accepted: DeferredToolResume | None,
        finish: Finish | None,
        result_sequence: int | None,
        park: str,
        dispatched: Sequence[IntentCall] = (),
    ) -> None:
        store, lease = self._host.store, self._lease
        issued = self._intents() if checkpoint is not None and store.intents else []
        delay = 0.05
        while True:
            if (lost := lease.check()) is not None:
                raise Lost(lost)
            write = self._log.take(end=finish is not None, result_sequence=result_sequence)
            sent = time.monotonic()
            try:
                committed = await store.commit(
                    self._thread_id,
                    fence=lease.fence,
                    revision=self.revision,
                    checkpoint=checkpoint,
                    base=self.base,
                    accepted=accepted,
                    finish=finish,
                    ttl=None if finish is not None or park else self._host.lease_ttl,
                    log=write,
                    park=park,
                    issued=issued,
                    dispatched=dispatched,
                    issued_by=self._log.run_id,
                    hand_off=self._host.lease_ttl
                    if finish is not None and self._host.launcher.has_room(freeing=1)
                    else None,
                )
            except LogMoved as moved:
                settle(self._log, moved.row, self._lease, self._thread_id)
                continue
            except ThreadError as error:
                if error.code == ErrorCode.LEASE_LOST:
                    lease.lose(error)
                    raise Lost(error) from None
                if error.code != ErrorCode.STORE_UNAVAILABLE:
                    raise
                if await self._landed(checkpoint is not None, finish is not None, parked=bool(park)):
                    if write is not None:
                        self._log.wrote(write)
                    return
                if time.monotonic() + delay > lease.expiry:
                    lease.lose(error)
                    raise Lost(error) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if write is not None:
                self._log.wrote(write)
            self.revision = committed.revision
            self.accepted = accepted
            if checkpoint is not None and self._host.on_commit is not None:
                self._host.on_commit()
            if committed.head is not None:
                self.base = committed.head
            if committed.expires is not None:
                lease.extended(sent)
            return

    async def _landed(self, with_checkpoint: bool, with_finish: bool, *, parked: bool = False) -> bool:
        """Whether a commit whose outcome is unknown did commit: read the thread back (a finish released
        the lease, a park ended it)."""
        try:
            thread = await self._host.store.thread(self._thread_id)
        except ThreadError:
            return False
        if thread is None or thread.fence != self._lease.fence:
            return False
        moved = thread.revision == self.revision + (1 if with_checkpoint else 0)
        if not moved or (with_finish and thread.lease is not None):
            return False
        if parked and (thread.live_lease is not None or thread.sweep_after is None):
            return False
        # Landed without a head in hand: the next delta is based on the checkpoint as read back.
        self.revision = thread.revision
        if with_checkpoint:
            self.base = await self._host.store.head(thread)
        return True


def settle(log: AttemptLog, row: LogRow | None, lease: LeaseKeeper, thread_id: str) -> None:
    """A log write's compare-and-set failed and the row reads `row`: carry on from what it holds, or,
    once the log left `open` (a takeover, a follower that found the lease expired), lose the lease.

    Raises:
        Lost: the log is no longer this attempt's to write.
    """
    if row is None or row.status != "open" or row.last_sequence == log.written:  # the last: never expected
        error = lease_lost(thread_id)
        lease.lose(error)
        raise Lost(error)
    if row.last_sequence > log.written:
        log.landed_through(row.last_sequence)  # a write whose answer was lost did land
    else:
        log.rewind(row.last_sequence)  # a database crash took back relaxed appends
