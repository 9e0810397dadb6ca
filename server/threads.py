"""`ThreadService`: decode, call the durable host (`harness.threads`), encode; nothing else.

Thread runs execute in tasks of their own (THREADS §4 "A run outlives its RPC"): a call that ends early
only stops listening, and a stream's responses go out through `server.pump`, as `StreamRun`'s do. Errors
are statuses with ErrorInfo; anything unexpected is logged with the request's ids and answered
`INTERNAL_ERROR`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from threadline.v1 import events_pb2, thread_service_pb2, thread_service_pb2_grpc

from harness import HarnessError, HarnessEvent, HarnessState, InputError
from harness.errors import ErrorCode, Refusal
from harness.threads import (
    DurableHost,
    ThreadCommittedEvent,
    ThreadRow,
    ThreadRun,
    ThreadRunItem,
    ThreadRunOutcome,
    check_storable,
)
from harness.threads.eventlog import EventsOmitted, Numbered
from harness.threads.join import ChangeKind

from .agents import AgentRegistry
from .errors import ServerError, ServerReason, at_field, at_named_field
from .launch import client_tools_for, unknown_agent
from .mapping.deferred import requests_from_pb, resume_from_pb
from .mapping.errors import abort
from .mapping.events import fill_event, fill_timestamp
from .mapping.run import client_tools_from_pb, fill_outcome
from .mapping.state import state_from_pb
from .mapping.threads import (
    RUN_STATUS_PB,
    STATUS_FROM_PB,
    fill_checkpoint_pb,
    fill_committed,
    fill_thread,
    run_request_from_pb,
)
from .metrics import CURRENT
from .mounts import ServerMounts
from .outbox import ENVELOPE_BYTES, Outbox, ResponseTooLarge, encoded
from .pump import Refused, crashed, internal_error, pump
from .runlog import LOGGER

__all__ = ("ThreadService",)

Context = grpc.aio.ServicerContext[Any, Any]
ResponseT = TypeVar("ResponseT", bound=Message)
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100


def _invalid(message: str, field: str) -> InputError:
    return at_field(InputError(message, code=ErrorCode.INPUT_INVALID, details={"field": field}), field)


def _page_size(value: int, field: str = "page_size") -> int:
    if value < 0 or value > MAX_PAGE_SIZE:
        raise _invalid(f"page_size must be between 0 and {MAX_PAGE_SIZE}.", field)
    return value or DEFAULT_PAGE_SIZE


def _required_id(value: str, field: str = "thread_id") -> str:
    if not value:
        raise _invalid(f"{field} is required.", field)
    if len(value) > 256:
        raise _invalid(f"{field} has at most 256 characters.", field)
    return _storable(value, field)


def _storable(value: str, field: str) -> str:
    try:
        return check_storable(value, field=field)
    except InputError as error:
        raise at_named_field(error) from None


def _label_filter(items: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for i, item in enumerate(items):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _invalid("A label filter is `key=value`.", f"labels[{i}]")
        if key in found:  # a thread has one value per key: a second one would never match
            raise _invalid("A label filter names each key once.", f"labels[{i}]")
        _storable(item, f"labels[{i}]")
        found[key] = value
    return found


class ThreadService(thread_service_pb2_grpc.ThreadServiceServicer):
    """The gRPC face of a `DurableHost`."""

    def __init__(
        self,
        host: DurableHost | None,
        registry: AgentRegistry,
        *,
        max_message_bytes: int,
        pack_window_s: float,
        mounts: ServerMounts,
        max_followers: int = 1024,
    ) -> None:
        self.host = host
        self._followers = Followers(max_followers)
        """Set once the store is open (`ThreadlineServer.start`), before the server takes calls."""
        self._registry = registry
        self._mounts = mounts
        self._default_agent = registry.default
        self._max_message_bytes = max_message_bytes
        self._pack_window_s = pack_window_s

    @property
    def _h(self) -> DurableHost:
        assert self.host is not None, "ThreadService serves only once its store is open"
        return self.host

    async def _call(
        self, context: Context, method: str, answer: Callable[[], Awaitable[ResponseT]]
    ) -> ResponseT:
        """`answer()`, its errors as statuses, the answer checked against the message limit."""
        try:
            response = await answer()
        except (HarnessError, ServerError) as error:
            await abort(context, error)
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            LOGGER.error("request_crashed", exc_info=error, extra={"fields": {"method": method}})
            await abort(context, internal_error())
        await self._fits(context, response)
        return response

    async def _fits(self, context: Context, response: Message, *, ran: bool = False) -> None:
        """Refuse an answer larger than `--max-message-bytes` with `RESPONSE_TOO_LARGE`."""
        size = response.ByteSize() + ENVELOPE_BYTES
        if size > self._max_message_bytes:
            said = "The run ended, but its" if ran else "The"
            await abort(
                context,
                ServerError(
                    ServerReason.RESPONSE_TOO_LARGE,
                    f"{said} {size}-byte answer exceeds the server's {self._max_message_bytes}-byte message limit.",
                    details={"size": size, "limit": self._max_message_bytes},
                ),
            )

    async def _thread_pb(self, row: ThreadRow, msg: Any, *, full: bool = False) -> None:
        if full:
            checkpoint, state = await self._h.checkpoint(row.thread_id, row.revision)
            fill_thread(msg, row, checkpoint, state)
        else:
            fill_thread(msg, row, await self._h.head_checkpoint(row))

    # -- threads ------------------------------------------------------------------------------------

    async def CreateThread(
        self, request: thread_service_pb2.CreateThreadRequest, context: Context
    ) -> thread_service_pb2.CreateThreadResponse:
        async def answer() -> thread_service_pb2.CreateThreadResponse:
            state: HarnessState | None = None
            if request.HasField("state"):
                state = await asyncio.to_thread(
                    functools.partial(state_from_pb, request.state, field="state")
                )
            pending = (
                requests_from_pb(request.pending, field="pending") if request.HasField("pending") else None
            )
            accepted = (
                resume_from_pb(request.accepted, field="accepted") if request.HasField("accepted") else None
            )
            agent = request.agent or self._default_agent
            if self._registry.get(agent) is None:
                raise unknown_agent(self._registry, agent, field="agent")
            if request.thread_id and state is None:
                _required_id(request.thread_id)
            # Refused now, rather than by every run of the stored thread.
            if state is not None:
                self._mounts.check_entries(agent, state, state_field="state")
            client_tools = client_tools_from_pb(request.client_tools)
            client_tools_for(self._registry, self._mounts, agent, client_tools, field="client_tools")
            try:
                row = await self._h.create(
                    thread_id=request.thread_id or None,
                    agent=agent,
                    labels=dict(request.labels),
                    state=state,
                    pending=pending,
                    accepted=accepted,
                    client_tools=client_tools,
                )
            except HarnessError as error:
                if error.code == ErrorCode.INPUT_INVALID:
                    raise at_named_field(error) from None
                field: str | None = None
                if error.code == ErrorCode.STATE_INVALID:
                    field = "thread_id"
                elif error.code.family == "deferred":
                    field = "pending" if pending is not None else "accepted"
                raise (at_field(error, field) if field else error) from None
            response = thread_service_pb2.CreateThreadResponse()
            await self._thread_pb(row, response.thread)
            return response

        return await self._call(context, "CreateThread", answer)

    async def GetThread(
        self, request: thread_service_pb2.GetThreadRequest, context: Context
    ) -> thread_service_pb2.GetThreadResponse:
        async def answer() -> thread_service_pb2.GetThreadResponse:
            row = await self._h.thread(_required_id(request.thread_id))
            if request.view not in (0, 1, 2):
                raise _invalid(f"view {request.view} is not known to this server.", "view")
            response = thread_service_pb2.GetThreadResponse()
            await self._thread_pb(
                row, response.thread, full=request.view == thread_service_pb2.THREAD_VIEW_FULL
            )
            return response

        return await self._call(context, "GetThread", answer)

    async def ListThreads(
        self, request: thread_service_pb2.ListThreadsRequest, context: Context
    ) -> thread_service_pb2.ListThreadsResponse:
        async def answer() -> thread_service_pb2.ListThreadsResponse:
            limit = _page_size(request.page_size)
            labels = _label_filter(list(request.labels))
            if request.status not in STATUS_FROM_PB:
                raise _invalid(f"status {request.status} is not known to this server.", "status")
            try:
                rows, token = await self._h.threads(
                    limit=limit,
                    labels=labels,
                    status=STATUS_FROM_PB[request.status],
                    page_token=request.page_token,
                )
            except InputError as error:
                raise at_named_field(error) from None
            response = thread_service_pb2.ListThreadsResponse(next_page_token=token)
            for row, head in rows:
                fill_thread(response.threads.add(), row, head)
            return response

        return await self._call(context, "ListThreads", answer)

    async def DeleteThread(
        self, request: thread_service_pb2.DeleteThreadRequest, context: Context
    ) -> thread_service_pb2.DeleteThreadResponse:
        async def answer() -> thread_service_pb2.DeleteThreadResponse:
            await self._h.delete(_required_id(request.thread_id), expected_revision=request.expected_revision)
            return thread_service_pb2.DeleteThreadResponse()

        return await self._call(context, "DeleteThread", answer)

    async def ListCheckpoints(
        self, request: thread_service_pb2.ListCheckpointsRequest, context: Context
    ) -> thread_service_pb2.ListCheckpointsResponse:
        async def answer() -> thread_service_pb2.ListCheckpointsResponse:
            thread_id = _required_id(request.thread_id)
            limit = _page_size(request.page_size)
            try:
                rows, token = await self._h.checkpoints(thread_id, limit=limit, page_token=request.page_token)
            except InputError as error:
                raise at_named_field(error) from None
            response = thread_service_pb2.ListCheckpointsResponse(next_page_token=token)
            for row in rows:
                fill_checkpoint_pb(response.checkpoints.add(), row, None)
            return response

        return await self._call(context, "ListCheckpoints", answer)

    async def GetCheckpoint(
        self, request: thread_service_pb2.GetCheckpointRequest, context: Context
    ) -> thread_service_pb2.GetCheckpointResponse:
        async def answer() -> thread_service_pb2.GetCheckpointResponse:
            thread_id = _required_id(request.thread_id)
            if request.revision <= 0:
                raise _invalid("revision must be positive.", "revision")
            row, state = await self._h.checkpoint(thread_id, request.revision)
            response = thread_service_pb2.GetCheckpointResponse()
            fill_checkpoint_pb(response.checkpoint, row, state)
            return response

        return await self._call(context, "GetCheckpoint", answer)

    async def ForkThread(
        self, request: thread_service_pb2.ForkThreadRequest, context: Context
    ) -> thread_service_pb2.ForkThreadResponse:
        async def answer() -> thread_service_pb2.ForkThreadResponse:
            thread_id = _required_id(request.thread_id)
            if request.revision < 0:
                raise _invalid("revision must not be negative.", "revision")
            try:
                row = await self._h.fork(
                    thread_id,
                    revision=request.revision,
                    new_thread_id=request.new_thread_id or None,
                    labels=dict(request.labels),
                )
            except HarnessError as error:
                if error.code in (ErrorCode.STATE_INVALID, ErrorCode.FORK_THREAD_ID_CONFLICT):
                    raise at_field(error, "new_thread_id") from None
                raise
            response = thread_service_pb2.ForkThreadResponse()
            await self._thread_pb(row, response.thread)
            return response

        return await self._call(context, "ForkThread", answer)

    async def RollbackThread(
        self, request: thread_service_pb2.RollbackThreadRequest, context: Context
    ) -> thread_service_pb2.RollbackThreadResponse:
        async def answer() -> thread_service_pb2.RollbackThreadResponse:
            thread_id = _required_id(request.thread_id)
            if request.revision <= 0:
                raise _invalid("revision must be positive.", "revision")
            row = await self._h.rollback(
                thread_id, revision=request.revision, expected_revision=request.expected_revision
            )
            response = thread_service_pb2.RollbackThreadResponse()
            await self._thread_pb(row, response.thread)
            return response

        return await self._call(context, "RollbackThread", answer)

    async def CancelThreadRun(
        self, request: thread_service_pb2.CancelThreadRunRequest, context: Context
    ) -> thread_service_pb2.CancelThreadRunResponse:
        async def answer() -> thread_service_pb2.CancelThreadRunResponse:
            thread_id = _required_id(request.thread_id)
            if not request.run_id and not request.request_id:
                raise _invalid("run_id or request_id is required.", "run_id")
            request_id = _required_id(request.request_id, "request_id") if request.request_id else ""
            run_id = _required_id(request.run_id, "run_id") if request.run_id else ""
            status = await self._h.cancel(thread_id, run_id, request_id=request_id)
            return thread_service_pb2.CancelThreadRunResponse(status=RUN_STATUS_PB[status])

        return await self._call(context, "CancelThreadRun", answer)

    # -- runs ---------------------------------------------------------------------------------------

    @property
    def followers(self) -> int:
        """Follower slots taken now."""
        return self._followers.active

    def follower_slot(self) -> contextlib.AbstractContextManager[None]:
        """One of `--max-followers` (a join, an attached retry, a watch), held while it follows."""
        return self._followers.slot()

    async def JoinThreadRun(  # type: ignore[override]
        self, request: thread_service_pb2.JoinThreadRunRequest, context: Context
    ) -> AsyncIterator[bytes]:  # encoded responses (`server.outbox`)
        if not self._h.log_settings.enabled:
            await context.abort(
                grpc.StatusCode.UNIMPLEMENTED, "This server keeps no run event log (--event-log off)."
            )
        try:
            thread_id = _required_id(request.thread_id)
            run_id = _required_id(request.run_id, "run_id") if request.run_id else ""
            request_id = _required_id(request.request_id, "request_id") if request.request_id else ""
            # Past any sequence a log can hold (and within a database's signed 64-bit integers).
            after = min(request.after_sequence, 2**62) if request.HasField("after_sequence") else -1
        except (HarnessError, ServerError) as error:
            await abort(context, error)
        ids = {"thread_id": thread_id, "run_id": run_id, "request_id": request_id}
        try:
            with self.follower_slot():  # taken before anything is read
                run_id, request_id, events = await self._h.join(
                    thread_id, run_id=run_id, request_id=request_id, after=after
                )
                ids.update(run_id=run_id, request_id=request_id)
                if (metrics := CURRENT.get()) is not None:
                    metrics.thread_joins.inc()
                responses = pump(
                    context,
                    events,
                    self._outbox(request.max_events_per_message),
                    service="threads",
                    fields=lambda: {"method": "JoinThreadRun", **ids},
                )
                async with aclosing(responses):
                    async for response in responses:
                        yield response
        except InputError as error:
            await abort(context, at_named_field(error))
        except (HarnessError, ServerError) as error:
            await abort(context, error)

    async def WatchThread(
        self, request: thread_service_pb2.WatchThreadRequest, context: Context
    ) -> AsyncIterator[thread_service_pb2.WatchThreadResponse]:
        try:
            thread_id = _required_id(request.thread_id)
            with self.follower_slot():
                async with aclosing(self._h.watch(thread_id)) as changes:
                    async for row, kinds in changes:
                        response = thread_service_pb2.WatchThreadResponse(
                            change_sequence=row.change_seq, changes=[_CHANGE_PB[kind] for kind in kinds]
                        )
                        fill_thread(response.thread, row, await self._h.head_checkpoint(row))
                        yield response
        except (HarnessError, ServerError) as error:
            await abort(context, error)
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            LOGGER.error("request_crashed", exc_info=error, extra={"fields": {"method": "WatchThread"}})
            await abort(context, internal_error(thread_id=request.thread_id[:256]))

    def _outbox(self, per_message: int) -> Outbox[Numbered]:
        """The outbox of a stream of an attempt's events, each sent as the attempt encoded it."""
        return Outbox(
            _sent_as_is,
            per_message=per_message,
            window_s=self._pack_window_s,
            max_bytes=self._max_message_bytes,
        )

    def _start(self, spec: thread_service_pb2.ThreadRunSpec, *, outcome_only: bool = False) -> ThreadRun:
        return self._h.run(run_request_from_pb(spec), outcome_only=outcome_only)

    async def RunThread(
        self, request: thread_service_pb2.RunThreadRequest, context: Context
    ) -> thread_service_pb2.RunThreadResponse:
        try:
            run = self._start(request.spec, outcome_only=True)  # it answers with the outcome alone
        except (HarnessError, ServerError) as error:
            await abort(context, error)
        response = thread_service_pb2.RunThreadResponse()
        try:
            async with aclosing(_listened(run)) as items:
                async for numbered in items:
                    if isinstance(item := numbered.item, ThreadRunOutcome):
                        fill_outcome(response.result, item)
                        response.revision = item.revision
                        response.replayed = item.replayed
        except Refused as refused:
            await abort(context, refused.error)
        except (HarnessError, ServerError) as error:
            await abort(context, error)
        except Exception as error:
            await abort(context, crashed(error, method="RunThread", **_ids(run)).error)
        await self._fits(context, response, ran=True)
        return response

    async def StartThreadRun(
        self, request: thread_service_pb2.StartThreadRunRequest, context: Context
    ) -> thread_service_pb2.StartThreadRunResponse:
        async def answer() -> thread_service_pb2.StartThreadRunResponse:
            run_request = run_request_from_pb(request.spec)
            started = await self._h.start(run_request)
            response = thread_service_pb2.StartThreadRunResponse(
                run_id=started.run_id, request_id=run_request.request_id, revision=started.revision
            )
            outcome = started.replayed
            if started.queue_position:
                response.status = RUN_STATUS_PB["queued"]
                response.queue_position = started.queue_position
            elif outcome is None:
                response.status = RUN_STATUS_PB["running"]
            else:
                fill_outcome(response.result, outcome)
                response.status = RUN_STATUS_PB[outcome.status]
                response.replayed = True
            return response

        return await self._call(context, "StartThreadRun", answer)

    async def StreamThreadRun(  # type: ignore[override]
        self, request: thread_service_pb2.StreamThreadRunRequest, context: Context
    ) -> AsyncIterator[bytes]:  # encoded responses (`server.outbox`)
        try:
            run = self._start(request.spec)
        except (HarnessError, ServerError) as error:
            await abort(context, error)
        responses = pump(
            context,
            _listened(run),
            self._outbox(request.max_events_per_message),
            service="threads",
            fields=lambda: {"method": "StreamThreadRun", **_ids(run)},
        )
        async with aclosing(responses):
            async for response in responses:
                yield response


async def _listened(run: ThreadRun) -> AsyncGenerator[Numbered, None]:
    """`run.items()` for one call, which stops listening once the call ends: the run goes on by itself.

    In a stream (`server.pump`), an item too large to send ends the call `RESPONSE_TOO_LARGE`, logged
    `listener_detached`. A crash of the run itself was logged by the core (`run_crashed`): it is answered
    `INTERNAL_ERROR`.
    """
    try:
        async for item in run.items():
            try:
                yield item
            except ResponseTooLarge as error:
                raise Refused(_undelivered(run, item, error)) from None
    except (HarnessError, Refusal, Refused):
        raise
    except Exception:
        raise Refused(internal_error(thread_id=run.request.thread_id, run_id=run.run_id)) from None
    finally:
        run.detach()


def _undelivered(run: ThreadRun, event: Numbered, error: ResponseTooLarge) -> ServerError:
    """`RESPONSE_TOO_LARGE` for an event of `run` its stream could not send, logged with the run's ids."""
    item = event.item
    status = item.status if isinstance(item, ThreadRunOutcome) else "running"
    ids = _ids(run)
    LOGGER.warning(
        "listener_detached",
        extra={
            "fields": {
                "reason": ServerReason.RESPONSE_TOO_LARGE.value,
                "size": error.size,
                "limit": error.limit,
                "run_status": status,
                **ids,
            }
        },
    )
    said = "The run ended" if status != "running" else "The run goes on"
    return ServerError(
        ServerReason.RESPONSE_TOO_LARGE,
        f"{said}, but this stream stopped: its {error.size}-byte event exceeds the server's "
        f"{error.limit}-byte message limit.",
        details={"size": error.size, "limit": error.limit, "run_status": status, **ids},
    )


def _ids(run: ThreadRun) -> dict[str, str]:
    """The ids a thread run's request is logged and answered with."""
    return {"thread_id": run.request.thread_id, "run_id": run.run_id, "request_id": run.request.request_id}


def _sent_as_is(event: Numbered, _sequence: int) -> bytes:
    """A thread run's event as its attempt encoded and numbered it (`encode_event`)."""
    assert event.data is not None  # the server's host encodes every event
    return event.data


def _fill(event: events_pb2.RunEvent, item: ThreadRunItem | EventsOmitted, sequence: int) -> None:
    """Write `item` into the empty `event` as the attempt's `sequence`-th event."""
    if isinstance(item, EventsOmitted):
        event.thread_id, event.run_id, event.sequence = item.thread_id, item.run_id, sequence
        fill_timestamp(event.occurred_at, item.occurred_at)
        event.events_omitted.first_sequence = item.first_sequence
        event.events_omitted.reason = _OMISSION_PB[item.reason]
    elif isinstance(item, HarnessEvent):
        fill_event(event, item, sequence=sequence)
    elif isinstance(item, ThreadCommittedEvent):
        fill_committed(event, item, sequence=sequence)
    elif isinstance(item, ThreadRunOutcome):
        event.thread_id, event.run_id, event.sequence = item.thread_id, item.run_id, sequence
        fill_timestamp(event.occurred_at, item.ended_at)
        fill_outcome(event.result, item)
    else:  # a replay's `run_started`
        event.thread_id, event.run_id, event.sequence = item.thread_id, item.run_id, sequence
        fill_timestamp(event.occurred_at, item.occurred_at)
        event.run_started.SetInParent()


encode_event = encoded(_fill)
"""The wire form of a thread run's events (`DurableHost.encode`): made once, in the run's task."""

_OMISSION_PB = {
    "deltas_coalesced": events_pb2.OMISSION_REASON_DELTAS_COALESCED,
    "log_full": events_pb2.OMISSION_REASON_LOG_FULL,
    "event_too_large": events_pb2.OMISSION_REASON_EVENT_TOO_LARGE,
    "store_unavailable": events_pb2.OMISSION_REASON_STORE_UNAVAILABLE,
}

_CHANGE_PB: dict[ChangeKind, thread_service_pb2.ThreadChange.ValueType] = {
    "snapshot": thread_service_pb2.THREAD_CHANGE_SNAPSHOT,
    "committed": thread_service_pb2.THREAD_CHANGE_COMMITTED,
    "run_started": thread_service_pb2.THREAD_CHANGE_RUN_STARTED,
    "run_ended": thread_service_pb2.THREAD_CHANGE_RUN_ENDED,
    "rolled_back": thread_service_pb2.THREAD_CHANGE_ROLLED_BACK,
    "queue": thread_service_pb2.THREAD_CHANGE_QUEUE,
    "lease_expired": thread_service_pb2.THREAD_CHANGE_LEASE_EXPIRED,
}


class Followers:
    """The `--max-followers` slots of one replica (LIVE §2.4): taken before anything is written."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the block.

        Raises:
            ServerError: `FOLLOWER_LIMIT_REACHED` when every slot is taken.
        """
        if self.active >= self.limit:
            raise ServerError(
                ServerReason.FOLLOWER_LIMIT_REACHED,
                f"This server already has {self.limit} joins, attached retries and watches open; retry "
                "later or on another replica.",
                details={"limit": self.limit},
            )
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
