"""The lease a thread run holds (THREADS §4): kept by renewals, lost by our own clock.

The holder of a run (`harness.threads.run`) keeps its lease with a `LeaseKeeper` and commits with a
`Committer` (`harness.threads.commits`), which extends the lease with every commit that proves it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..errors import ErrorCode, ThreadError
from .records import ThreadRow
from .request import RunHost
from .store import lease_lost

__all__ = ("LeaseKeeper", "Lost")

LOGGER = logging.getLogger("threadline.threads")


class Lost(Exception):
    """The holder stopped: it lost its lease, or the store stayed down until the lease's expiry."""

    def __init__(self, error: ThreadError) -> None:
        super().__init__(error.message)
        self.error = error


class LeaseKeeper:
    """The lease this process holds on a thread: its expiry by our own clock, its renewals, its loss.

    Every store answer that proves the lease (a renewal, a commit) extends it from the moment its request
    was sent; past the expiry with no such answer the lease is lost, and `stop` is called once (the run is
    cancelled, nothing more is written). A renewal that finds a cancel requested (from another replica)
    calls `stop` too.
    """

    def __init__(
        self, host: RunHost, thread: ThreadRow, sent: float, stop: Callable[[], None], ids: dict[str, str]
    ) -> None:
        self._host = host
        self._thread_id = thread.thread_id
        self.fence = thread.fence
        self.expiry = sent + host.lease_ttl
        self.lost: ThreadError | None = None
        self.server_driven = False
        """Learnt at a renewal: the server is to finish this run (it parks on a drain, LIVE §3.3)."""
        self._stop = stop
        self._ids = ids

    def check(self, cause: ThreadError | None = None) -> ThreadError | None:
        """Once our own clock is past the lease, it is lost (for `cause`, the store's error, when that is
        why); returns the loss, or None while the lease holds."""
        if time.monotonic() <= self.expiry:
            return None
        if self.lost is None:
            self.lose(cause or lease_lost(self._thread_id))
        return self.lost

    def lose(self, error: ThreadError) -> None:
        self.lost = error
        self._stop()

    def extended(self, sent: float) -> None:
        """The store renewed the lease in answer to a request sent at `sent` (`time.monotonic()`)."""
        self.expiry = sent + self._host.lease_ttl

    async def keep(self) -> None:
        """Renew the lease a third into its life until it is lost (or this task is cancelled)."""
        ttl = self._host.lease_ttl
        failed: ThreadError | None = None  # the store's error, while renewals fail
        while self.lost is None:
            due = self.expiry - ttl * 2 / 3
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            late = time.monotonic() - due
            if late > ttl / 3:
                LOGGER.warning(
                    "lease_renewal_late", extra={"fields": {**self._ids, "late_s": round(late, 3)}}
                )
            if self.check(failed) is not None:  # a stall, or the store down: write nothing more
                return
            sent = time.monotonic()
            try:
                _expires, cancel, driven = await self._host.store.renew(
                    self._thread_id, fence=self.fence, ttl=ttl
                )
            except ThreadError as error:
                if error.code == ErrorCode.LEASE_LOST or time.monotonic() > self.expiry:
                    self.lose(error)
                    return
                failed = error
                await asyncio.sleep(min(0.5, ttl / 10))
                continue
            failed = None
            self.extended(sent)
            self.server_driven = self.server_driven or driven
            if cancel:
                self._stop()
