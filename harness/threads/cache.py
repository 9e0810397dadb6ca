"""Decoded heads by `(thread_id, incarnation, revision)`, bounded in bytes (THREADS §6).

Checkpoints are never rewritten, so an entry is never stale: a Begin's compare-and-set proves it is still
the head. A continued turn on the same replica then neither reloads nor re-validates its history.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..state import HarnessState
from .records import Head

__all__ = ("CachedHead", "HeadCache")

Key = tuple[str, str, int]


@dataclass(frozen=True, slots=True)
class CachedHead:
    head: Head
    state: HarnessState


class HeadCache:
    """Least recently used heads, at most `max_bytes` of their JSON in total."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Key, CachedHead] = OrderedDict()
        self._by_thread: dict[str, Key] = {}
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Key) -> CachedHead | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: Key, entry: CachedHead) -> None:
        size = _size(entry)
        if size > self.max_bytes:
            return
        # A thread's older heads are never asked for again by a run: keep one head per thread.
        stale = self._by_thread.pop(key[0], None)
        if stale is not None:
            self._bytes -= _size(self._entries.pop(stale))
        self._entries[key] = entry
        self._by_thread[key[0]] = key
        self._bytes += size
        while self._bytes > self.max_bytes:
            evicted_key, evicted = self._entries.popitem(last=False)
            del self._by_thread[evicted_key[0]]
            self._bytes -= _size(evicted)


def _size(entry: CachedHead) -> int:
    return len(entry.head.parts.history) + len(entry.head.parts.rest)
