"""Heavy work for a request without stalling the server, stopped when nobody waits for it any more.

Two steps of a request grow with its history, and on the event loop each would hold every other RPC
behind it. Decoding: validating a history costs about 100 ns per byte of pydantic-core work, so a request
near `--max-message-bytes` (64 MiB) took seconds (issue 10: `GetServerInfo` waited 22 s behind one
`Run`). Preparing the run: the core's passes over every message (`HarnessRunStream.prepare`), half a
second for 100 000 messages (issue 23). A large request therefore does each in a worker thread; the core
works in pieces and calls `pause` between them (each piece holds the interpreter only for milliseconds,
so the loop keeps answering). `pause` is also where the work stops: the call was cancelled (the client
left, its deadline passed) or the server is draining. Small requests, the common case, work inline: a
thread hop would cost more than the work.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import grpc

from harness import HarnessRunStream

from .runlog import log_run
from .runs import ActiveRuns, shutting_down

__all__ = ("INLINE_BYTES", "INLINE_MESSAGES", "Step", "Stopped", "in_call", "off_loop", "own_loop_if_long")

INLINE_BYTES = 256 * 1024
"""Requests whose histories are at most this large are decoded on the event loop."""
INLINE_MESSAGES = 2048
"""Runs that continue at most this many messages are prepared on the event loop (about 10 ms)."""

Step = Literal["decoding", "preparing"]
"""Which work: it names the log lines, `decoding_off_loop` / `decoding_stopped` and their siblings."""

_INLINE: dict[Step, int] = {"decoding": INLINE_BYTES, "preparing": INLINE_MESSAGES}
_SIZE_FIELD: dict[Step, str] = {"decoding": "history_bytes", "preparing": "messages"}
_WHAT: dict[Step, str] = {"decoding": "decoding the request", "preparing": "preparing the run"}

T = TypeVar("T")


class Stopped(Exception):
    """Raised from `pause` inside the worker thread: nobody needs the work any more (`why`)."""

    def __init__(self, why: Literal["cancelled", "deadline", "draining"]) -> None:
        super().__init__(why)
        self.why = why


async def off_loop(
    work: Callable[[Callable[[], None] | None], T],
    *,
    step: Step,
    size: int,
    runs: ActiveRuns,
    deadline: float | None,
    fields: Mapping[str, Any],
) -> T:
    """`work(pause)`, inline when `size` is small, else in a worker thread that stops when nobody needs it.

    `size` is the history's bytes to decode, or its messages to prepare. Off the loop, the log says
    `<step>_off_loop` and, if the work is stopped, `<step>_stopped` with `why` (`cancelled`, `deadline`,
    `draining`); `fields` identify the request on both lines, with the size (`history_bytes`,
    `messages`). `deadline` is a `time.monotonic()` value, or None.

    Raises:
        ServerError: `SERVER_SHUTTING_DOWN` when a drain stopped the work.
        Stopped: `deadline` passed.
        asyncio.CancelledError: the caller was cancelled (the worker stops at its next `pause`).
        Whatever `work` raises.
    """
    if size <= _INLINE[step]:
        return work(None)
    fields = {**fields, _SIZE_FIELD[step]: size}
    stop = threading.Event()

    def pause() -> None:
        if stop.is_set():
            raise Stopped("cancelled")
        if runs.draining:
            raise Stopped("draining")
        if deadline is not None and time.monotonic() > deadline:
            raise Stopped("deadline")

    log_run(f"{step}_off_loop", **fields)
    try:
        return await asyncio.to_thread(work, pause)
    except Stopped as stopped:
        log_run(f"{step}_stopped", why=stopped.why, **fields)
        if stopped.why == "draining":
            raise shutting_down() from None
        raise
    except asyncio.CancelledError:
        # The caller is gone (the client left, or its deadline passed); the worker stops at its next pause.
        log_run(f"{step}_stopped", why="cancelled", **fields)
        raise
    finally:
        stop.set()


def own_loop_if_long(stream: HarnessRunStream[Any]) -> None:
    """A run that continues more than `INLINE_MESSAGES` messages is driven on a loop of its own thread.

    pydantic-ai walks the whole history again before each of the run's model requests (100 000 messages:
    seconds each time), beyond any hook; on its own loop that work holds its thread, not the server's
    loop (`harness.own_loop`).
    """
    if stream.history_length > INLINE_MESSAGES:
        stream.use_own_loop()


async def in_call(
    work: Callable[[Callable[[], None] | None], T],
    *,
    step: Step,
    size: int,
    context: grpc.aio.ServicerContext[Any, Any],
    runs: ActiveRuns,
    fields: Mapping[str, Any],
) -> T:
    """`off_loop` for the RPC `context` waits on: until its deadline, then DEADLINE_EXCEEDED.

    Raises:
        grpc.aio.AbortError: DEADLINE_EXCEEDED once the call's deadline passed.
        What `off_loop` raises otherwise.
    """
    remaining = context.time_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining
    try:
        return await off_loop(work, step=step, size=size, runs=runs, deadline=deadline, fields=fields)
    except Stopped:
        await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"The deadline passed while {_WHAT[step]}.")
        raise  # pragma: no cover - abort always raises
