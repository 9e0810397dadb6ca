"""The barrier a durable host puts before each model request (LIVE §5.1, SPEC §2.3.5 as amended).

A host that persists checkpoints must have a tool's result durable before the model is asked about it:
otherwise a crash while the model answers loses a result whose side effect already happened. The core
therefore awaits the host's barrier inside the run's `before_model_request` hook, with the state that
ends with the request about to be sent, and sends nothing until it returns.

While a barrier runs, a cancellation of the run (`stream.cancel()`, or the consumer task's own) is held
and takes effect as soon as it returns, before the request is sent: the host's commit and its record
of that commit are never cut apart (`held_cancellation`). A host that must stop the run from inside its
barrier calls `stream.cancel()` and returns.

The same barrier gates each side-effecting tool call (`before_tool_call`): a host that records a
dispatch intent there can later tell a call that never started from one whose result is unknown, and
pass the first kind back as `calls_not_started` (SPEC §2.5.8).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Protocol

from .deferred import DeferredToolResume
from .state import HarnessState

__all__ = ("RunBarrier", "held_cancellation")


class RunBarrier(Protocol):
    """What `ExecutableAgent.stream(..., barrier=...)` awaits before each model request."""

    async def before_model_request(
        self, state: HarnessState, pending_input: DeferredToolResume | None
    ) -> None:
        """Persist `state` (and `pending_input`, the accepted batch it has not incorporated yet) before
        the request is sent; the request waits for this to return."""
        ...

    async def before_tool_call(
        self, call_id: str, tool_name: str, args: dict[str, Any], *, tool_kind: str, retryable: bool
    ) -> None:
        """Record that call `call_id` of a `function` or `unapproved` tool (`tool_kind`) is about to
        start, durably, before it does: the tool waits for this to return, and does not start when it
        raises (LIVE §5.2). Awaited after every capability's `before_tool_execute`/`wrap_tool_execute`
        and before the inner toolsets; output functions and external tools are not gated. `retryable`:
        the tool is marked recovery-retryable. A host with nothing to record returns at once; a barrier
        without this method (written before it) leaves its run's tools ungated."""
        ...


async def held_cancellation(work: Awaitable[None]) -> None:
    """Await `work` to its end even when the awaiting task is cancelled meanwhile; then re-raise.

    `work` runs in a task of its own, so a cancellation of the caller never reaches it halfway (pydantic-ai
    cancels the task running a model request's hooks when the run is cancelled).
    """
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise  # the work itself was cancelled: nothing is held
            cancelled = True  # ours: held until the work is done
    if cancelled:
        raise asyncio.CancelledError
    task.result()
