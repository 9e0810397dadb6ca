"""Decoding a large request without stalling the server, and stopping it when nobody waits for it.

Validating a history costs about 100 ns per byte of pydantic-core work, so a request near
`--max-message-bytes` (64 MiB) would hold the event loop for seconds, and every other RPC with it
(issue 10: `GetServerInfo` waited 22 s behind one `Run`). A request whose histories exceed
`INLINE_BYTES` is therefore decoded in a worker thread; the core validates such a history in pieces
(`harness._history_codec.CHUNK_BYTES`) and calls `pause` between them, and each piece holds the
interpreter only for milliseconds, so the loop keeps answering. `pause` is also where the work stops:
the call was cancelled (the client left, its deadline passed) or the server is draining. Small
requests, the common case, decode inline: a thread hop would cost more than the decoding.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from .runlog import log_run
from .runs import ActiveRuns, shutting_down

__all__ = ("INLINE_BYTES", "DecodeStopped", "decoded")

INLINE_BYTES = 256 * 1024
"""Requests whose histories are at most this large are decoded on the event loop."""

T = TypeVar("T")


class DecodeStopped(Exception):
    """Raised from `pause` inside the worker thread: nobody needs the decoded request any more."""


async def decoded(
    decode: Callable[[Callable[[], None] | None], T],
    *,
    history_bytes: int,
    context: grpc.aio.ServicerContext[Any, Any],
    runs: ActiveRuns,
    fields: dict[str, str],
) -> T:
    """`decode(pause)`, inline when small, else in a worker thread that stops when the call is over.

    Off the loop, the log says `decoding_off_loop` and, if the work is stopped, `decoding_stopped` with
    `why` (`cancelled`, `deadline`, `draining`); `fields` identify the request on both lines.

    Raises:
        ServerError: `SERVER_SHUTTING_DOWN` when a drain stopped the work.
        grpc.aio.AbortError: DEADLINE_EXCEEDED once the call's deadline passed.
        asyncio.CancelledError: the call was cancelled (the worker stops at its next `pause`).
        Whatever `decode` raises.
    """
    if history_bytes <= INLINE_BYTES:
        return decode(None)
    stop = threading.Event()
    remaining = context.time_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining

    def pause() -> None:
        if stop.is_set():
            raise DecodeStopped("cancelled")
        if runs.draining:
            raise DecodeStopped("draining")
        if deadline is not None and time.monotonic() > deadline:
            raise DecodeStopped("deadline")

    log_run("decoding_off_loop", history_bytes=history_bytes, **fields)
    try:
        return await asyncio.to_thread(decode, pause)
    except DecodeStopped as stopped:
        log_run("decoding_stopped", why=str(stopped), history_bytes=history_bytes, **fields)
        if str(stopped) == "draining":
            raise shutting_down() from None
        await context.abort(
            grpc.StatusCode.DEADLINE_EXCEEDED, "The deadline passed while decoding the request."
        )
        raise  # pragma: no cover - abort always raises
    except asyncio.CancelledError:
        # The call is over (the client left, or its deadline passed); the worker stops at its next pause.
        log_run("decoding_stopped", why="cancelled", history_bytes=history_bytes, **fields)
        raise
    finally:
        stop.set()
