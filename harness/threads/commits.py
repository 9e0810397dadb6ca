"""The fenced commits of a thread run (THREADS §4 step 2), each proving or losing its lease."""

from __future__ import annotations

import asyncio
import time

from ..deferred import DeferredToolResume
from ..errors import ErrorCode, ThreadError
from .lease import LeaseKeeper, Lost
from .records import Head, ThreadRow
from .request import RunHost
from .store import Finish, NewCheckpoint

__all__ = ("Committer",)


class Committer:
    """The holder's fenced commits: each retried while the store is down until the lease's expiry, and
    read back when its outcome is unknown. Keeps the revision, the delta base and the retained batch."""

    def __init__(self, host: RunHost, thread: ThreadRow, head: Head, lease: LeaseKeeper) -> None:
        self._host = host
        self._thread_id = thread.thread_id
        self._lease = lease
        self.revision = thread.revision
        self.base = head
        self.accepted = thread.accepted

    async def commit(
        self,
        checkpoint: NewCheckpoint | None,
        *,
        accepted: DeferredToolResume | None,
        finish: Finish | None = None,
    ) -> None:
        """A fenced commit, retried while the store is down until the lease's own expiry.

        Raises:
            Lost: the lease is lost (before, or in answer to, the commit).
            ThreadError: the store refused the commit otherwise.
        """
        store, lease = self._host.store, self._lease
        delay = 0.05
        while True:
            if (lost := lease.check()) is not None:
                raise Lost(lost)
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
                    ttl=None if finish is not None else self._host.lease_ttl,
                )
            except ThreadError as error:
                if error.code == ErrorCode.LEASE_LOST:
                    lease.lose(error)
                    raise Lost(error) from None
                if error.code != ErrorCode.STORE_UNAVAILABLE:
                    raise
                if await self._landed(checkpoint is not None, finish is not None):
                    return
                if time.monotonic() + delay > lease.expiry:
                    lease.lose(error)
                    raise Lost(error) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            self.revision = committed.revision
            self.accepted = accepted
            if checkpoint is not None and self._host.on_commit is not None:
                self._host.on_commit()
            if committed.head is not None:
                self.base = committed.head
            if committed.expires is not None:
                lease.extended(sent)
            return

    async def _landed(self, with_checkpoint: bool, with_finish: bool) -> bool:
        """Whether a commit whose outcome is unknown did commit: read the thread back."""
        try:
            thread = await self._host.store.thread(self._thread_id)
        except ThreadError:
            return False
        if thread is None or thread.fence != self._lease.fence:
            return False
        moved = thread.revision == self.revision + (1 if with_checkpoint else 0)
        if not moved or (with_finish and thread.lease is not None):
            return False
        # Landed without a head in hand: the next delta is based on the checkpoint as read back.
        self.revision = thread.revision
        if with_checkpoint:
            self.base = await self._host.store.head(thread)
        return True
