"""A streamed run on its way to the wire, for `StreamRun` and `StreamThreadRun` alike.

The run's items are produced in a task of their own into an `Outbox` (`server.outbox` says why) while
the RPC's task sends the responses, so every way such a stream ends is decided here, once:

- the items end: the stream ends after every response queued;
- an item does not fit `--max-message-bytes`: `ResponseTooLarge` is thrown back into the items at the
  `yield` that gave it, so the service answers it in its own context (with the run's ids, logged) by
  raising a `Refused`; one it leaves unanswered is a bare `RESPONSE_TOO_LARGE` (`size`, `limit`);
- the items raise a `Refused`, a core error or a server refusal: that status, after the responses
  queued before it;
- anything else is a bug: logged `request_crashed` with the request's ids, answered `INTERNAL_ERROR`;
- the caller went away: the producer is cancelled and the items are closed at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from typing import Any, TypeVar

import grpc

from harness import HarnessError

from .errors import ServerError, ServerReason
from .mapping.errors import abort
from .metrics import CURRENT, Service
from .outbox import Outbox, ResponseTooLarge, wait_out
from .runlog import LOGGER

__all__ = ("Refused", "crashed", "internal_error", "pump")

ItemT = TypeVar("ItemT")
Context = grpc.aio.ServicerContext[Any, Any]


class Refused(Exception):
    """The status a run's RPC ends with, decided where it happened and answered by the RPC's own task.

    A stream's producer runs in a task of its own: an abort from there would end the RPC while responses
    are still queued in its outbox, so it raises this instead and the stream answers it once they are out.
    """

    def __init__(self, error: HarnessError | ServerError) -> None:
        super().__init__(error.message)
        self.error = error


def internal_error(**ids: str) -> ServerError:
    """`INTERNAL_ERROR` with the request's non-empty ids: the host gets no internals, the log has them."""
    return ServerError(
        ServerReason.INTERNAL_ERROR,
        "The server failed unexpectedly; its log has the details.",
        details={key: value for key, value in ids.items() if value},
    )


def crashed(error: BaseException, **fields: str) -> Refused:
    """Log an unexpected exception (`request_crashed`, with the request's ids); the refusal to answer."""
    LOGGER.error("request_crashed", exc_info=error, extra={"fields": fields})
    return Refused(internal_error(**fields))


async def pump(
    context: Context,
    items: AsyncGenerator[ItemT, None],
    outbox: Outbox[ItemT],
    *,
    service: Service,
    fields: Callable[[], Mapping[str, str]],
) -> AsyncGenerator[bytes, None]:
    """Send `items` through `outbox` as the RPC's responses (encoded: `server.handlers` passes bytes
    through), then end the RPC as the module says; `fields()` names the request in a `request_crashed`
    line."""
    producer = asyncio.create_task(_produce(items, outbox))
    metrics = CURRENT.get()
    try:
        while (taken := await outbox.take()) is not None:
            response, count = taken
            yield response
            outbox.sent()
            if metrics is not None:
                metrics.streamed(service, count)
    except Refused as refused:
        await abort(context, refused.error)
    except (HarnessError, ServerError) as error:
        await abort(context, error)
    except ResponseTooLarge as error:
        await abort(context, _too_large(error))
    except grpc.aio.AbortError:
        raise
    except Exception as error:
        await abort(context, crashed(error, **fields()).error)
    finally:
        if not producer.done():
            producer.cancel()
        await wait_out(producer)


async def _produce(items: AsyncGenerator[ItemT, None], outbox: Outbox[ItemT]) -> None:
    """Add every item to `outbox`, then end it (with the error that stopped them, if any)."""
    try:
        # `aclosing`: when the stream is cancelled, the items are closed here and now, not whenever the
        # garbage collector finalises a suspended generator.
        async with aclosing(items):
            async for item in items:
                try:
                    await outbox.add(item)
                except ResponseTooLarge as error:
                    await items.athrow(error)  # the service's answer: normally a `Refused`
                    raise
    except BaseException as error:
        outbox.end(error)
        raise
    outbox.end()


def _too_large(error: ResponseTooLarge) -> ServerError:
    return ServerError(
        ServerReason.RESPONSE_TOO_LARGE,
        f"The {error.size}-byte event exceeds the server's {error.limit}-byte message limit.",
        details={"size": error.size, "limit": error.limit},
    )
