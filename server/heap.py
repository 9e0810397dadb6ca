"""The cyclic garbage collector's pauses, kept short and counted.

CPython's collector stops the thread that triggers it, here mostly the event loop, and a full
collection walks every tracked object. A started server holds ~190 000 objects that live as long as
it does (pydantic-ai, the schemas, the protobuf descriptors, the agents): walking them took 100-180 ms
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
import threading
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
    """Totals since the process started, written by the collector's callback in whichever thread ran it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.collections = [0] * _GENERATIONS
        self.seconds = [0.0] * _GENERATIONS
        self.longest = 0.0
        self._started: dict[int, float] = {}  # by thread: a collection runs in the thread that triggered it

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        now, thread = time.perf_counter(), threading.get_ident()
        if phase == "start":
            self._started[thread] = now
            return
        started = self._started.pop(thread, None)
        if started is None:  # the hook was installed during this collection
            return
        generation, pause = int(info["generation"]), now - started
        with self.lock:
            self.collections[generation] += 1
            self.seconds[generation] += pause
            self.longest = max(self.longest, pause)


_PAUSES = _Pauses()
_INSTALL = threading.Lock()


def _install() -> None:
    with _INSTALL:
        if _PAUSES not in gc.callbacks:
            gc.callbacks.append(_PAUSES)


def settle() -> int:
    """Once the server is up: collect, freeze what survives out of every later collection, and make young
    collections rarer. Returns how many objects it froze."""
    _install()
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    with _PAUSES.lock:
        _PAUSES.longest = 0.0  # that collection ran before the server served anyone
    return gc.get_freeze_count()


class GcPauses(Collector):
    """The collector's pauses for a registry (`threadline_gc_*`)."""

    def __init__(self) -> None:
        _install()

    def collect(self) -> Iterator[Metric]:
        with _PAUSES.lock:
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
            "The longest collection since the process started.",
            longest,
        )
        yield GaugeMetricFamily(
            "threadline_gc_frozen_objects",
            "Objects frozen out of every collection when the server was up (`server.heap.settle`), less those "
            "freed since.",
            gc.get_freeze_count(),
        )
