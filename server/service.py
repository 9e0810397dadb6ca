"""`HarnessService`: decode the request, call the core, encode the answer, and nothing else.

Every decision (is this state loadable, this resume valid, this client tool acceptable, where a
checkpoint falls) is a core or mapping call; this module only orders them and turns raised errors into
statuses. Errors raised before a run starts, and core errors raised after `RunStarted`, both end the RPC
with a status and ErrorInfo (`server.mapping.errors.abort`); a run's own failures arrive as a FAILED
`RunResult`. Anything unexpected is logged with the request's ids and answered `INTERNAL_ERROR`, never
with its text.

A run reads top to bottom: `_decode` (inline, or off the loop for a large history: `server.offloop`),
`_started` (fresh bindings, the core's construction checks, admission, the run log), `_prepare` (the
history's preparation, off the loop for a long one), `_events` (the core's stream, its errors as
statuses), all in `_items`; then the answer, which must fit `--max-message-bytes` (`StreamRun` sends it
through `server.pump`, as `StreamThreadRun` does).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractContextManager, aclosing
from importlib import metadata
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from threadline.v1 import events_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2

from harness import (
    ErrorCode,
    HarnessCheckpointEvent,
    HarnessError,
    HarnessRunResultEvent,
    HarnessRunStream,
    HarnessState,
    JsonValue,
    RunItem,
    StateError,
    check_remaining,
    load_state,
)

from .agents import AgentRegistry, ToolCategory
from .errors import ServerError, ServerReason, at_field
from .launch import start_stream
from .mapping.checkpoints import CheckpointDeltas
from .mapping.deferred import resume_from_pb, resume_to_pb
from .mapping.errors import abort, reason_of
from .mapping.events import fill_checkpoint, fill_event, fill_result_event
from .mapping.run import RunCall, fill_result, run_call_from_pb
from .mapping.state import (
    HISTORY_FORMAT,
    HISTORY_FORMAT_VERSIONS,
    SCHEMA_VERSIONS,
    state_from_pb,
    state_to_json,
    state_to_pb,
)
from .metrics import CURRENT
from .mounts import ServerMounts
from .offloop import in_call, own_loop_if_long
from .outbox import ENVELOPE_BYTES, Outbox, ResponseTooLarge, encoded
from .pump import Refused, crashed, internal_error, pump
from .runlog import LOGGER, RunLog
from .runs import ActiveRuns

__all__ = ("HarnessService",)

_SUBAGENT_MODES: dict[str, harness_service_pb2.SubagentMode.ValueType] = {
    "inline": harness_service_pb2.SUBAGENT_MODE_INLINE,
    "host": harness_service_pb2.SUBAGENT_MODE_HOST,
}
_CATEGORIES: dict[ToolCategory, harness_service_pb2.ToolCategory.ValueType] = {
    "plain": harness_service_pb2.TOOL_CATEGORY_PLAIN,
    "requires_approval": harness_service_pb2.TOOL_CATEGORY_REQUIRES_APPROVAL,
    "external": harness_service_pb2.TOOL_CATEGORY_EXTERNAL,
    "recovery_retryable": harness_service_pb2.TOOL_CATEGORY_RECOVERY_RETRYABLE,
}

Context = grpc.aio.ServicerContext[Any, Any]
ResponseT = TypeVar("ResponseT", bound=Message)


def _server_version() -> str:
    try:
        return metadata.version("threadline")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


def _history_bytes(*states: Any) -> int:
    return sum(len(state.message_history.data) for state in states)


class HarnessService(harness_service_pb2_grpc.HarnessServiceServicer):
    """The gRPC face of the core for the agents in `registry`."""

    def __init__(
        self,
        registry: AgentRegistry,
        runs: ActiveRuns,
        *,
        max_message_bytes: int,
        pack_window_s: float,
        mounts: ServerMounts,
        thread_store: harness_service_pb2.ThreadStoreInfo | None = None,
    ) -> None:
        self._registry = registry
        self._mounts = mounts
        self._thread_store = thread_store or harness_service_pb2.ThreadStoreInfo(
            kind=harness_service_pb2.THREAD_STORE_KIND_NONE
        )
        self._runs = runs
        self._max_message_bytes = max_message_bytes
        self._pack_window_s = pack_window_s

    # -- runs -----------------------------------------------------------------------------------------
    async def StreamRun(  # type: ignore[override]
        self, request: harness_service_pb2.StreamRunRequest, context: Context
    ) -> AsyncIterator[bytes]:  # encoded responses (`server.outbox`)
        try:
            call = await self._decode(request.spec, context)
        except Refused as refusal:
            await abort(context, refusal.error)
        deltas = (
            CheckpointDeltas(call.delta_base)
            if call.run.checkpoints and call.checkpoint_form == "delta"
            else None
        )
        outbox: Outbox[RunItem[Any]] = Outbox(
            encoded(functools.partial(self._fill, call=call, deltas=deltas)),
            per_message=request.max_events_per_message,
            window_s=self._pack_window_s,
            max_bytes=self._max_message_bytes,
        )
        # The client went away, or the stream ended: the run is closed here and now.
        responses = pump(
            context,
            self._items(call, context),
            outbox,
            service="harness",
            fields=lambda: {"method": "run", "request_id": call.request_id},
        )
        async with aclosing(responses):
            async for response in responses:
                yield response

    async def _items(self, call: RunCall, context: Context) -> AsyncGenerator[RunItem[Any], None]:
        """The items of `call`'s run, for `Run` and `StreamRun` (in its producer task: `server.pump`). An item
        too large to send (`ResponseTooLarge`, thrown in at its `yield`) ends it `RESPONSE_TOO_LARGE` with
        the run's ids, logged `undelivered`."""
        stream, admission, log = await self._started(call, context)
        with admission:
            await self._prepare(call, stream, context)
            with log:
                async with aclosing(self._events(stream, log, context)) as items:
                    async for item in items:
                        try:
                            yield item
                        except ResponseTooLarge as error:
                            log.undelivered(error.size)
                            raise Refused(self._too_large(error.size, stream)) from None

    @staticmethod
    def _fill(
        event: events_pb2.RunEvent,
        item: RunItem[Any],
        sequence: int,
        *,
        call: RunCall,
        deltas: CheckpointDeltas | None,
    ) -> None:
        """Write `item` into the empty `event` as the stream's `sequence`-th event."""
        if isinstance(item, HarnessCheckpointEvent):
            fill = fill_checkpoint if deltas is None else deltas.fill
            fill(
                event,
                item.state,
                thread_id=item.thread_id,
                run_id=item.run_id,
                sequence=sequence,
                occurred_at=item.occurred_at,
            )
            if (metrics := CURRENT.get()) is not None:
                metrics.checkpoint_bytes.labels("harness").inc(event.checkpoint_candidate.ByteSize())
        elif isinstance(item, HarnessRunResultEvent):
            fill_result_event(
                event, item, sequence=sequence, request_id=call.request_id, parent_agent=call.parent_agent
            )
        else:
            fill_event(event, item, sequence=sequence, parent_agent=call.parent_agent)

    async def Run(
        self, request: harness_service_pb2.RunRequest, context: Context
    ) -> harness_service_pb2.RunResponse:
        try:
            return await self._run(request.spec, context)
        except Refused as refusal:
            await abort(context, refusal.error)

    async def _run(self, spec: run_pb2.RunSpec, context: Context) -> harness_service_pb2.RunResponse:
        call = await self._decode(spec, context)
        async with aclosing(self._items(call, context)) as items:
            async for item in items:
                if isinstance(item, HarnessRunResultEvent):
                    response = harness_service_pb2.RunResponse()
                    fill_result(
                        response.result,
                        item.result,
                        request_id=call.request_id,
                        parent_agent=call.parent_agent,
                    )
                    size = response.ByteSize() + ENVELOPE_BYTES
                    if size > self._max_message_bytes:
                        await items.athrow(ResponseTooLarge(size, self._max_message_bytes))  # its `Refused`
                    return response
        raise AssertionError("a run stream always ends with its result or raises")  # pragma: no cover

    async def _decode(self, spec: run_pb2.RunSpec, context: Context) -> RunCall:
        """The run call of `spec`, or a `Refused`; a large history is decoded off the event loop."""
        size = _history_bytes(spec.previous_state) if spec.HasField("previous_state") else 0
        try:
            return await in_call(
                functools.partial(self._run_call, spec),
                step="decoding",
                size=size,
                context=context,
                runs=self._runs,
                fields={"method": "run", "request_id": spec.request_id},
            )
        except (HarnessError, ServerError) as error:
            raise Refused(error) from None
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            raise crashed(error, method="run", request_id=spec.request_id) from None

    @staticmethod
    def _run_call(spec: run_pb2.RunSpec, pause: Callable[[], None] | None) -> RunCall:
        return run_call_from_pb(spec, pause=pause)

    async def _started(
        self, call: RunCall, context: Context
    ) -> tuple[HarnessRunStream[Any], AbstractContextManager[None], RunLog]:
        """The core's stream with fresh bindings, admitted, with its log; or a `Refused`."""
        try:
            stream = self._stream(call)
            admission = self._runs.admit(stream)
        except (HarnessError, ServerError) as error:
            raise Refused(error) from None
        except Exception as error:
            raise crashed(error, method="run", request_id=call.request_id) from None
        log = RunLog(
            agent=call.agent or self._registry.default,
            thread_id=stream.thread_id,
            run_id=stream.run_id,
            request_id=call.request_id,
        )
        return stream, admission, log

    async def _prepare(self, call: RunCall, stream: HarnessRunStream[Any], context: Context) -> None:
        """The stream's history prepared before its run starts (off the loop for a long one), or a `Refused`."""
        try:
            await in_call(
                stream.prepare,
                step="preparing",
                size=stream.history_length,
                context=context,
                runs=self._runs,
                fields={
                    "method": "run",
                    "thread_id": stream.thread_id,
                    "run_id": stream.run_id,
                    "request_id": call.request_id,
                },
            )
            own_loop_if_long(stream)
        except (HarnessError, ServerError) as error:
            raise Refused(error) from None
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            raise crashed(error, method="run", request_id=call.request_id) from None

    async def _events(
        self, stream: HarnessRunStream[Any], log: RunLog, context: Context
    ) -> AsyncGenerator[RunItem[Any], None]:
        """The core's stream items; its errors become `Refused`s with their status."""
        try:
            async with stream:
                async for item in stream:
                    log.first_event()
                    if isinstance(item, HarnessRunResultEvent):
                        log.ended(item.result.status, item.result.usage)
                        self._log_failure(stream, log)
                    yield item
        except HarnessError as error:
            log.refused(reason_of(error))
            raise Refused(error) from None
        except Exception as error:
            if isinstance(error, grpc.aio.AbortError | Refused):
                raise
            log.crashed(error)
            raise Refused(internal_error(**log.fields)) from None

    @staticmethod
    def _log_failure(stream: HarnessRunStream[Any], log: RunLog) -> None:
        """A run that failed on an exception (a tool's, the model side's) logs it with the run's ids."""
        cause = stream.failure_exception
        if cause is not None:
            LOGGER.warning("run_failed", exc_info=cause, extra={"fields": log.fields})

    def _too_large(self, size: int, stream: HarnessRunStream[Any] | None = None) -> ServerError:
        """`RESPONSE_TOO_LARGE` for an answer of `size` bytes; for a run's answer, which run ended how."""
        details: dict[str, JsonValue] = {"size": size, "limit": self._max_message_bytes}
        message = f"The {size}-byte answer exceeds the server's {self._max_message_bytes}-byte message limit."
        if stream is not None:
            result = stream.result
            details.update(
                thread_id=stream.thread_id,
                run_id=stream.run_id,
                run_status=result.status if result is not None else "running",
            )
            message = f"The run ended, but its answer was not sent. {message}"
        return ServerError(ServerReason.RESPONSE_TOO_LARGE, message, details=details)

    def _stream(self, call: RunCall) -> HarnessRunStream[Any]:
        """Fresh bindings for this run only (its client tools), and the core's construction checks."""
        return start_stream(
            self._registry,
            call.agent,
            call.run,
            client_tools=call.client_tools,
            mounts=self._mounts,
            lineage=call.lineage,
            parent_agent=call.parent_agent,
            deferred_tools_supported=call.deferred_tools_supported,
        )

    # -- envelopes ------------------------------------------------------------------------------------
    async def _answer(
        self,
        context: Context,
        method: str,
        build: Callable[[Callable[[], None] | None], ResponseT],
        *,
        history_bytes: int,
    ) -> ResponseT:
        """`build(pause)` (off the loop for a large history), its errors as statuses, the answer checked
        against the message limit."""
        try:
            response = await in_call(
                build,
                step="decoding",
                size=history_bytes,
                context=context,
                runs=self._runs,
                fields={"method": method},
            )
        except (HarnessError, ServerError) as error:
            await abort(context, error)
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            await abort(context, crashed(error, method=method).error)
        size = response.ByteSize() + ENVELOPE_BYTES
        if size > self._max_message_bytes:
            await abort(context, self._too_large(size))
        return response

    async def NewState(
        self, request: harness_service_pb2.NewStateRequest, context: Context
    ) -> harness_service_pb2.NewStateResponse:
        def build(pause: Callable[[], None] | None) -> harness_service_pb2.NewStateResponse:
            # Start from the core's own empty envelope and overlay what the host sent, so the result
            # goes through the core's loading exactly like a state arriving in a run. The overlay's
            # fields are the request's own top-level fields ("thread_id", ...).
            envelope = state_to_pb(HarnessState.new())
            if request.thread_id:
                envelope.thread_id = request.thread_id
            if request.HasField("message_history"):
                envelope.message_history.CopyFrom(request.message_history)
            envelope.capability_states.extend(request.capability_states)
            envelope.environment_states.extend(request.environment_states)
            state = state_from_pb(envelope, field="", pause=pause)
            return harness_service_pb2.NewStateResponse(state=state_to_pb(state))

        return await self._answer(context, "NewState", build, history_bytes=len(request.message_history.data))

    async def ForkState(
        self, request: harness_service_pb2.ForkStateRequest, context: Context
    ) -> harness_service_pb2.ForkStateResponse:
        def build(pause: Callable[[], None] | None) -> harness_service_pb2.ForkStateResponse:
            source = state_from_pb(request.state, field="state", pause=pause)
            try:
                forked = source.fork(thread_id=request.thread_id or None)
            except StateError as error:
                if error.code is ErrorCode.STATE_INVALID:  # the ID is malformed
                    raise at_field(error, "thread_id") from None
                raise
            return harness_service_pb2.ForkStateResponse(state=state_to_pb(forked))

        return await self._answer(context, "ForkState", build, history_bytes=_history_bytes(request.state))

    async def ValidateState(
        self, request: harness_service_pb2.ValidateStateRequest, context: Context
    ) -> harness_service_pb2.ValidateStateResponse:
        def build(pause: Callable[[], None] | None) -> harness_service_pb2.ValidateStateResponse:
            source = request.WhichOneof("source")
            if source == "state":
                state = state_from_pb(request.state, field="state", pause=pause)
            elif source == "state_json":
                try:
                    state = load_state(request.state_json)
                except HarnessError as error:
                    raise at_field(error, "state_json") from None
            else:
                raise at_field(
                    StateError("Set `state` or `state_json`.", code=ErrorCode.STATE_INVALID), "source"
                )
            return harness_service_pb2.ValidateStateResponse(
                state=state_to_pb(state), state_json=state_to_json(state)
            )

        size = _history_bytes(request.state) if request.HasField("state") else len(request.state_json)
        return await self._answer(context, "ValidateState", build, history_bytes=size)

    async def RemainingDeferred(
        self, request: harness_service_pb2.RemainingDeferredRequest, context: Context
    ) -> harness_service_pb2.RemainingDeferredResponse:
        def build(pause: Callable[[], None] | None) -> harness_service_pb2.RemainingDeferredResponse:
            resume = resume_from_pb(request.resume, field="resume")
            state = state_from_pb(request.state, field="state", pause=pause)
            try:
                # Checked as a run checks a recovery resume: what a host publishes must resume later.
                remaining = check_remaining(resume, state.message_history)
            except HarnessError as error:
                raise at_field(error, "resume") from None
            response = harness_service_pb2.RemainingDeferredResponse()
            if remaining is not None:
                response.remaining.CopyFrom(resume_to_pb(remaining))
            return response

        return await self._answer(
            context, "RemainingDeferred", build, history_bytes=_history_bytes(request.state)
        )

    # -- discovery ------------------------------------------------------------------------------------
    def _subagents(self, name: str) -> list[harness_service_pb2.SubagentInfo]:
        """The agent's child edges; a child's `agent` only when this server serves it by that name."""
        agent = self._registry.get(name)
        edges = agent.subagents if agent is not None else ()
        return [
            harness_service_pb2.SubagentInfo(
                name=edge.name,
                description=edge.description,
                mode=_SUBAGENT_MODES[edge.mode],
                agent=edge.agent.name or "" if self._registry.serves_by_name(edge.agent) else "",
                child_definition_id=edge.agent.definition_id or "",
            )
            for edge in edges
        ]

    async def GetServerInfo(
        self, request: harness_service_pb2.GetServerInfoRequest, context: Context
    ) -> harness_service_pb2.GetServerInfoResponse:
        info = harness_service_pb2.GetServerInfoResponse(
            schema_versions=list(SCHEMA_VERSIONS),
            history_formats=[
                harness_service_pb2.HistoryFormat(
                    format=HISTORY_FORMAT, versions=list(HISTORY_FORMAT_VERSIONS)
                )
            ],
            agents=[
                harness_service_pb2.AgentInfo(
                    name=name,
                    tools=[
                        harness_service_pb2.ToolInfo(
                            name=tool.name,
                            category=_CATEGORIES[tool.category],
                            description=tool.description,
                            recovery_retryable=tool.recovery_retryable,
                        )
                        for tool in (*self._registry.tools(name), *self._mounts.tools(name))
                    ],
                    mounts=self._mounts.mount_infos(name),
                    subagents=self._subagents(name),
                )
                for name in self._registry
            ],
            default_agent=self._registry.default,
            limits=harness_service_pb2.ServerLimits(
                max_message_bytes=self._max_message_bytes, max_concurrent_runs=self._runs.limit
            ),
            server_version=_server_version(),
            thread_store=self._thread_store,
            environment_providers=self._mounts.provider_infos(),
        )
        # Many agents and tools under a small --max-message-bytes: a typed refusal, not grpc's bare one.
        size = info.ByteSize() + ENVELOPE_BYTES
        if size > self._max_message_bytes:
            await abort(context, self._too_large(size))
        return info
