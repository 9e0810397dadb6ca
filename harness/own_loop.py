"""A run driven on an event loop of its own thread, for a history whose every model request is slow to prepare.

Before each model request pydantic-ai walks the whole history several times (its clean-up, the
instructions, the model's own message preparation): with 100 000 messages that is seconds of Python
work, which no hook lets a host move, and on the host's loop every other caller waits meanwhile
(issue 23, item 14). `HarnessRunStream.use_own_loop()` therefore drives the native run on a loop of
its own thread, one step per `__anext__`, so the host's loop keeps answering while a step computes (the
interpreter switches threads every few milliseconds).

What belongs to the host stays on the host's loop: a barrier's commit and the shell tools, whose
processes live on the loop that started them, cross back with `at_home`. Steps cross one at a time,
so nothing queues between the loops; a cancellation crosses too and is awaited, so the caller sees it
only once the run has unwound, as it would on one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

__all__ = ("OwnLoop", "at_home", "on_loop")

T = TypeVar("T")

_HOME: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "threadline_home_loop", default=None
)
"""The host's loop, seen by code running on a run's own loop (None elsewhere)."""


async def on_loop(
    loop: asyncio.AbstractEventLoop,
    make: Callable[[], Awaitable[T]],
    *,
    context: contextvars.Context | None = None,
) -> T:
    """Await `make()` on `loop`, another thread's; its result or exception comes back here.

    A cancellation of the caller cancels the work there and waits for it to end before it propagates,
    so nothing the work does runs after the caller moved on.
    """
    here = asyncio.get_running_loop()
    if loop is here:
        return await make()
    done: asyncio.Future[T] = here.create_future()
    started: list[asyncio.Task[T]] = []

    def settle(task: asyncio.Task[T]) -> None:
        here.call_soon_threadsafe(_copy, task, done)

    def start() -> None:
        task = loop.create_task(_awaited(make), context=context)
        started.append(task)
        task.add_done_callback(settle)

    loop.call_soon_threadsafe(start)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        if done.done() and not done.cancelled():
            raise
        loop.call_soon_threadsafe(lambda: started[0].cancel())  # after `start`: the loop keeps their order
        while not done.done():
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                continue
            except BaseException:
                break
        raise


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def _copy(task: asyncio.Task[T], done: asyncio.Future[T]) -> None:
    if done.done():
        return
    if task.cancelled():
        done.cancel()
    elif (error := task.exception()) is not None:
        done.set_exception(error)
    else:
        done.set_result(task.result())


async def at_home(make: Callable[[], Awaitable[T]]) -> T:
    """Await `make()` on the host's loop: here, unless this runs on a run's own loop."""
    home = _HOME.get()
    if home is None:
        return await make()
    return await on_loop(home, make)


class OwnLoop(Generic[T]):
    """An async iterator stepped on an event loop in a thread of its own, from the host's loop.

    One task there drives the iterator from first step to close, as the consumer's task does on one
    loop (pydantic-ai's task groups must be entered and left in one task); each `__anext__` hands it
    one step and awaits that step's item.
    """

    def __init__(self, iterator: AsyncIterator[T]) -> None:
        self._iterator = iterator
        self._home = asyncio.get_running_loop()
        context = contextvars.copy_context()  # the host's (trace spans, log fields), as on one loop
        context.run(_HOME.set, self._home)
        self._loop = asyncio.new_event_loop()
        self._steps: asyncio.Queue[tuple[bool, asyncio.Future[Any]]] | None = None
        self._driver: asyncio.Task[None] | None = None
        self._working: asyncio.Future[Any] | None = None
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(context, ready), name="threadline-run-loop", daemon=True
        )
        self._thread.start()
        ready.wait()

    @property
    def thread_id(self) -> int | None:
        """The identity of the thread the steps run in."""
        return self._thread.ident

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Schedule `callback(*args)` on the run's loop, from any thread; nothing once the loop is gone."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
            self._loop.call_soon_threadsafe(callback, *args)

    def __aiter__(self) -> OwnLoop[T]:
        return self

    async def __anext__(self) -> T:
        return cast(T, await self._step(close=False))

    async def aclose(self) -> None:
        """Close the iterator on its loop, then end the loop and its thread."""
        try:
            await self._step(close=True)
        finally:
            self.call_soon(self._loop.stop)

    async def _step(self, *, close: bool) -> Any:
        done: asyncio.Future[Any] = self._home.create_future()
        assert self._steps is not None
        self.call_soon(self._steps.put_nowait, (close, done))
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            if done.done() and not done.cancelled():
                raise
            self.call_soon(self._interrupt, done)
            while not done.done():  # the step unwinds there first, as it would on one loop
                with contextlib.suppress(BaseException):
                    await asyncio.shield(done)
            raise

    def _interrupt(self, step: asyncio.Future[Any]) -> None:
        """On the run's loop: cancel the driver if it still works on `step` (it may have just finished)."""
        if self._working is step and self._driver is not None:
            self._driver.cancel()

    async def _drive(self) -> None:
        assert self._steps is not None
        while True:
            close, done = await self._steps.get()
            self._working = done
            try:
                if close:
                    aclose = getattr(self._iterator, "aclose", None)
                    if aclose is not None:
                        await aclose()
                    result: Any = None
                else:
                    result = await self._iterator.__anext__()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()  # that step was cancelled, not the driver: close may follow
                self._settle(done, None, cancelled=True)
            except BaseException as error:
                self._settle(done, error)
            else:
                self._settle(done, None, result=result)
            finally:
                self._working = None
            if close:
                return

    def _settle(
        self,
        done: asyncio.Future[Any],
        error: BaseException | None,
        *,
        result: Any = None,
        cancelled: bool = False,
    ) -> None:
        def copy() -> None:
            if done.done():
                return
            if cancelled:
                done.cancel()
            elif error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)

        self._home.call_soon_threadsafe(copy)

    def _serve(self, context: contextvars.Context, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._steps = asyncio.Queue()
            self._driver = self._loop.create_task(self._drive(), context=context)
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
        finally:
            ready.set()
            self._loop.close()
