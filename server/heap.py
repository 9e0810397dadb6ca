"""The cyclic garbage collector's pauses, kept short and counted.

CPython's collector stops the thread that triggers it, here mostly the event loop, and a full
collection walks every tracked object. A started server holds ~183 000 objects that live as long as
it does (pydantic-ai, the schemas, the protobuf descriptors, the agents): walking them took 150-220 ms
a full collection on the benchmark's machine, every hundred or so thread turns, a stall of every
caller. `settle` freezes them out of all collections once the server is up, and collects the young
generation every 10 000 net allocations instead of 700: 30 x fewer young collections, which promote
fewer short-lived objects and so make the full ones rarer (`docs/performance.md`, "Garbage
collection").

`GcPauses` puts the pauses on `/metrics`: per generation, collections and their seconds, and the
longest since the server was up (one `gc.callbacks` hook per process, shared by its servers'
registries).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ("YOUNG_THRESHOLD", "GcPauses", "settle")

YOUNG_THRESHOLD = 10_000
"""Net allocations of tracked objects between two young collections (CPython's default: 700)."""

_GENERATIONS = 3


class _Pauses:
    """Totals since the hook was installed. No lock: CPython runs one collection at a time, its two
    callbacks in the thread that triggered it, and a lock taken here could be the one that thread holds
    (a collection starts at any allocation)."""

    def __init__(self) -> None:
        self.collections = [0] * _GENERATIONS
        self.seconds = [0.0] * _GENERATIONS
        self.longest = 0.0
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started = now
            return
        started, self._started = self._started, None
        if started is None:  # the hook was installed during this collection
            return
        generation, pause = int(info["generation"]), now - started
        self.collections[generation] += 1
        self.seconds[generation] += pause
        self.longest = max(self.longest, pause)


_PAUSES = _Pauses()


def _install() -> None:
    if _PAUSES not in gc.callbacks:
        gc.callbacks.append(_PAUSES)


def settle() -> int:
    """Once the server is up: collect, freeze what survives out of every later collection, and make young
    collections rarer. Returns how many objects it froze."""
    _install()
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    _PAUSES.longest = 0.0  # that collection ran before the server served anyone
    return gc.get_freeze_count()


class GcPauses(Collector):
    """The collector's pauses for a registry (`threadline_gc_*`)."""

    def __init__(self) -> None:
        _install()

    def collect(self) -> Iterator[Metric]:
        collections, seconds, longest = list(_PAUSES.collections), list(_PAUSES.seconds), _PAUSES.longest
        count = CounterMetricFamily(
            "threadline_gc_collections",
            "Collections of the cyclic garbage collector in this process, by generation (2: full).",
            labels=["generation"],
        )
        paused = CounterMetricFamily(
            "threadline_gc_pause_seconds",
            "Seconds the collections stopped the thread that triggered them (mostly the event loop).",
            labels=["generation"],
        )
        for generation in range(_GENERATIONS):
            count.add_metric([str(generation)], collections[generation])
            paused.add_metric([str(generation)], seconds[generation])
        yield count
        yield paused
        yield GaugeMetricFamily(
            "threadline_gc_longest_pause_seconds",
            "The longest collection since the server was up (not the one it ran before it served).",
            longest,
        )
        yield GaugeMetricFamily(
            "threadline_gc_frozen_objects",
            "Objects frozen out of every collection when the server was up (`server.heap.settle`), less those "
            "freed since.",
            gc.get_freeze_count(),
        )
