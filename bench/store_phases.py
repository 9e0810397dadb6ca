"""Where (h)'s store turn spends its time, against the bare transactions: `python -m bench.store_phases`.

    .venv/bin/python -m bench.store_phases                       # SQLite, 100 turns
    .venv/bin/python -m bench.store_phases --store postgresql    # a throwaway cluster (tests.pgcluster)

(h)'s `store_over_bare` is one number; this runs the same replay (`bench.bare_store`) with its phases
timed, so a miss of the target can be read: the driver's transaction control (`BEGIN`, `COMMIT` and its
fsync), the driver's statements (with the store's few lines around each), the hops between the event loop
and the store's threads, and the Python around them on each side. Every replayed turn after the
recording counts, the warm-up included. The timers add about a microsecond per call, and this process's
timing is not (h)'s figure: run (h) for that.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import inspect
import json
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from harness.threads import StoreKind, ThreadStore, open_database, worker
from harness.threads.statements import Statement

from . import bare_store

__all__ = ("store_phases",)


class _Clock:
    """Seconds and counts per phase."""

    def __init__(self) -> None:
        self.side = ""
        """`store` while a replayed turn runs, `bare` while its bare transactions do: only their phases
        count (not the recording, the reads checking what was written, the store's idle file checks)."""
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.counts: Counter[str] = Counter()

    def add(self, phase: str, seconds: float) -> None:
        if phase.startswith(self.side + ":"):
            self.seconds[phase] += seconds
            self.counts[phase] += 1

    @contextlib.contextmanager
    def turn(self, side: str) -> Iterator[None]:
        """One side's turn, timed as `<side>: turn`; its phases count meanwhile."""
        self.side, start = side, time.perf_counter()
        try:
            yield
        finally:
            self.add(f"{side}: turn", time.perf_counter() - start)
            self.side = ""


def _timed(clock: _Clock, phase: str, call: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            clock.add(phase, time.perf_counter() - start)

    return timed


@contextlib.contextmanager
def _patched(clock: _Clock, replayed: list[str]) -> Iterator[None]:
    """The replay's store, its worker and the bare side, timed (restored after); the replayed thread's
    ID is added to `replayed`."""
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    execute = Statement._execute

    def statement(self: Statement, conn: Any, sql: str, bound: Any, call: Any) -> Any:
        start = time.perf_counter()
        try:
            return execute(self, conn, sql, bound, call)
        finally:
            clock.add("store: BEGIN" if self.control else "store: statements", time.perf_counter() - start)

    patch(Statement, "_execute", statement)
    patch(worker, "_commit", _timed(clock, "store: COMMIT", worker._commit))
    run = worker.StoreWorker.run

    def offloaded(self: worker.StoreWorker, work: Callable[[], Any], **kwargs: Any) -> Any:
        if not isinstance(work, functools.partial):  # the worker's own (its file checks), not a store call
            return run(self, work, **kwargs)
        submitted = time.perf_counter()
        ran: list[float] = []

        def timed_work() -> Any:
            ran.append(time.perf_counter())
            try:
                return work()
            finally:
                ran.append(time.perf_counter())

        def answered(_future: Any) -> None:
            if len(ran) == 2:
                clock.add("store: hop to a store thread", ran[0] - submitted)
                clock.add("store: in a store thread", ran[1] - ran[0])
                clock.add("store: hop back to the loop", time.perf_counter() - ran[1])

        future = run(self, timed_work, **kwargs)
        future.add_done_callback(answered)
        return future

    patch(worker.StoreWorker, "run", offloaded)
    replay, bare_turn = bare_store._replay, bare_store._bare_turn

    async def replaying(store: Any, calls: Any, thread_id: str, head: Any) -> Any:
        replayed[:] = [thread_id]
        with clock.turn("store"):
            return await replay(store, calls, thread_id, head)

    def baring(*args: Any) -> None:
        with clock.turn("bare"):
            bare_turn(*args)

    patch(bare_store, "_replay", replaying)
    patch(bare_store, "_bare_turn", baring)
    bare_execute = bare_store._Bare.execute

    def bare_statement(self: Any, sql: str, params: tuple[Any, ...]) -> Any:
        start = time.perf_counter()
        try:
            return bare_execute(self, sql, params)
        finally:
            control = sql.startswith(bare_store._TRANSACTION)
            clock.add("bare: BEGIN, COMMIT" if control else "bare: statements", time.perf_counter() - start)

    patch(bare_store._Bare, "execute", bare_statement)
    transaction = bare_store._Bare.transaction

    def bare_transaction(self: Any, work: Callable[[Any], None]) -> None:
        start, inside = time.perf_counter(), [0.0]

        def timed_work(execute: Any) -> None:
            began = time.perf_counter()
            try:
                work(execute)
            finally:
                inside[0] = time.perf_counter() - began

        try:
            transaction(self, timed_work)
        finally:
            if self._pg is not None:  # psycopg's own BEGIN and COMMIT, around the work
                clock.add("bare: BEGIN, COMMIT", time.perf_counter() - start - inside[0])

    patch(bare_store._Bare, "transaction", bare_transaction)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


def _table(clock: _Clock) -> dict[str, dict[str, float]]:
    """Milliseconds and calls per turn for each phase, and what is left of each side's turn."""
    turns = clock.counts["store: turn"]
    per_turn = {phase: seconds * 1e3 / turns for phase, seconds in clock.seconds.items()}
    store_parts = ("store: hop to a store thread", "store: in a store thread", "store: hop back to the loop")
    driver = ("store: BEGIN", "store: statements", "store: COMMIT")
    per_turn["store: Python in a store thread"] = per_turn["store: in a store thread"] - sum(
        per_turn.get(phase, 0.0) for phase in driver
    )
    per_turn["store: Python on the loop"] = per_turn["store: turn"] - sum(
        per_turn[phase] for phase in store_parts
    )
    per_turn["bare: Python"] = (
        per_turn["bare: turn"] - per_turn["bare: statements"] - per_turn["bare: BEGIN, COMMIT"]
    )
    return {
        phase: {"ms": round(ms, 3), "calls": round(clock.counts.get(phase, turns) / turns, 2)}
        for phase, ms in sorted(per_turn.items())
    }


async def _median_us(
    variants: tuple[str, ...], calls: int, once: Callable[[str], Awaitable[float]]
) -> dict[str, float]:
    """The median microseconds of `once(variant)`'s seconds, `calls` times each variant; a variant
    named `..._after_2ms_idle` idles 2 ms after each (as each of a turn's calls finds the store's threads
    and the loop)."""
    medians: dict[str, float] = {}
    for variant in variants:
        spent: list[float] = []
        for _ in range(calls):
            spent.append(await once(variant))
            if variant.endswith("after_2ms_idle"):
                await asyncio.sleep(0.002)
        medians[variant] = round(statistics.median(spent) * 1e6, 1)
    return medians


async def _call_cpu(kind: StoreKind, location: str, thread_id: str, *, calls: int) -> dict[str, Any]:
    """`read_cpu_us`: the CPU of one store read, the run's read before its Begin, in the thread running
    it: in place, in this thread; handed to a store thread back to back; and after 2 ms idle.
    `hop_cpu_us`: this process's CPU (every thread) of a store call that does nothing: the hand-off to a
    store thread and the answer back to the loop, with the waking of both."""
    database = await open_database(kind, location)
    store = ThreadStore(database, replica="phases-" + uuid.uuid4().hex[:8])
    read_itself = inspect.unwrap(ThreadStore.thread_and_record)  # not its hand-off to a store thread
    read_once = functools.partial(read_itself, store, thread_id, "no-request")

    def read() -> float:
        start = time.thread_time()
        read_once()
        return time.thread_time() - start

    async def read_cpu(variant: str) -> float:
        return read() if variant == "in_place" else await store.worker.run(read, read=True)

    async def hop_cpu(_variant: str) -> float:
        start = time.process_time()
        await store.worker.run(lambda: None, read=False)
        return time.process_time() - start

    try:
        reads = ("in_place", "handed_over", "handed_over_after_2ms_idle")
        return {
            "read_cpu_us": await _median_us(reads, calls, read_cpu),
            "hop_cpu_us": await _median_us(("back_to_back", "after_2ms_idle"), calls, hop_cpu),
        }
    finally:
        store.close()
        await database.close()


async def store_phases(kind: StoreKind, location: str, *, turns: int) -> dict[str, Any]:
    clock = _Clock()
    replayed: list[str] = []
    with _patched(clock, replayed):
        section = await bare_store.store_cost_section(kind, location, turns=turns)
    kept = ("store_calls_per_turn", "write_transactions_per_turn", "store_over_bare")
    return {
        "store": kind,
        "turns": turns + 1,
        "per_turn": _table(clock),
        **{key: section[key] for key in kept},
        **await _call_cpu(kind, location, replayed[0], calls=max(3 * turns, 3)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    if args.store == "sqlite":
        with tempfile.TemporaryDirectory() as scratch:
            result = asyncio.run(
                store_phases("sqlite", str(Path(scratch) / "phases.sqlite3"), turns=args.turns)
            )
    else:
        from tests.pgcluster import cluster  # the repo root's test helper, as `python -m bench` uses

        with cluster() as pg:
            os.environ.update(pg.env)
            result = asyncio.run(store_phases("postgresql", pg.database(), turns=args.turns))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
