"""`HarnessService`: decode the request, call the core, encode the answer, and nothing else.

Every decision (is this state loadable, this resume valid, this client tool acceptable) is a core
or mapping call; this module only orders them and turns raised errors into statuses. Errors raised
before a run starts, and core errors raised after `RunStarted`, both end the RPC with a status and
ErrorInfo (`server.mapping.errors.abort`); a run's own failures arrive as a FAILED `RunResult`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import grpc
from pydantic import ValidationError
from threadline.v1 import events_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2

from harness import (
    ErrorCode,
    HarnessError,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessRunStream,
    HarnessState,
    RunBindings,
    StateError,
    check_remaining,
    client_tools_capability,
    load_state,
)
from harness.errors import JsonValue

from .agents import AgentRegistry, ToolCategory
from .errors import ServerError, ServerReason, at_field, field_of
from .mapping.checkpoints import CheckpointDeltas
from .mapping.deferred import resume_from_pb, resume_to_pb
from .mapping.errors import abort
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
from .outbox import Outbox
from .runlog import LOGGER, log_run
from .runs import ActiveRuns

__all__ = ("HarnessService",)

_CHECKPOINT_AFTER = frozenset({"model_request_started", "model_request_completed"})
_CATEGORIES: dict[ToolCategory, harness_service_pb2.ToolCategory.ValueType] = {
    "plain": harness_service_pb2.TOOL_CATEGORY_PLAIN,
    "requires_approval": harness_service_pb2.TOOL_CATEGORY_REQUIRES_APPROVAL,
    "external": harness_service_pb2.TOOL_CATEGORY_EXTERNAL,
    "recovery_retryable": harness_service_pb2.TOOL_CATEGORY_RECOVERY_RETRYABLE,
}

RunItem = HarnessEvent | HarnessRunResultEvent[Any]


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    """A candidate state to send after the event before it (`RunSpec.checkpoints`)."""

    state: HarnessState
    run_id: str


def _server_version() -> str:
    try:
        return metadata.version("threadline")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


def _malformed_thread_id(error: ValidationError) -> StateError:
    """`HarnessState.fork` reports a malformed new ID as a pydantic error; hosts get STATE_INVALID."""
    errors: list[JsonValue] = [
        {"loc": list(e["loc"]), "type": e["type"], "msg": e["msg"]} for e in error.errors()
    ]
    return StateError(
        "The new thread_id is invalid.", code=ErrorCode.STATE_INVALID, details={"errors": errors}
    )


class HarnessService(harness_service_pb2_grpc.HarnessServiceServicer):
    """The gRPC face of the core for the agents in `registry`."""

    def __init__(
        self,
        registry: AgentRegistry,
        runs: ActiveRuns,
        *,
        max_message_bytes: int,
        pack_window_s: float,
    ) -> None:
        self._registry = registry
        self._runs = runs
        self._max_message_bytes = max_message_bytes
        self._pack_window_s = pack_window_s

    # -- runs -----------------------------------------------------------------------------------------
    async def StreamRun(
        self, request: harness_service_pb2.StreamRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[harness_service_pb2.StreamRunResponse]:
        call = await self._decode(request.spec, context)
        deltas: CheckpointDeltas | None = None
        if call.checkpoints and call.checkpoint_form == "delta":
            spec = request.spec
            base = spec.previous_state.message_history.data if spec.HasField("previous_state") else "[]"
            deltas = CheckpointDeltas(base.encode())
        fill = functools.partial(self._fill, call=call, deltas=deltas)
        outbox: Outbox[RunItem | _Checkpoint] = Outbox(
            fill, per_message=request.max_events_per_message, window_s=self._pack_window_s
        )
        producer = asyncio.create_task(self._produce(call, context, outbox))
        try:
            while (response := await outbox.take()) is not None:
                yield response
                outbox.sent()
        finally:
            # The client went away, or the stream ended: the run is closed here and now.
            if not producer.done():
                producer.cancel()
            with contextlib.suppress(BaseException):
                await producer

    async def _produce(
        self,
        call: RunCall,
        context: grpc.aio.ServicerContext[Any, Any],
        outbox: Outbox[RunItem | _Checkpoint],
    ) -> None:
        """Run `call` into `outbox` (in a task of its own: `server.outbox` says why), then end it."""
        try:
            # `aclosing`: when the stream is cancelled, the run is closed here and now, not whenever
            # the garbage collector finalises a suspended generator.
            async with aclosing(self._execute(call, context, checkpoints=call.checkpoints)) as items:
                async for item in items:
                    await outbox.add(item)
        except BaseException as error:
            # Aborts (their status is already on `context`) and crashes end the stream in its own task.
            outbox.end(error)
            raise
        outbox.end()

    @staticmethod
    def _fill(
        event: events_pb2.RunEvent,
        item: RunItem | _Checkpoint,
        sequence: int,
        *,
        call: RunCall,
        deltas: CheckpointDeltas | None,
    ) -> None:
        """Write `item` into the empty `event` as the stream's `sequence`-th event."""
        if isinstance(item, _Checkpoint):
            state, thread_id, run_id = item.state, item.state.thread_id, item.run_id
            if deltas is not None:
                deltas.fill(event, state, thread_id=thread_id, run_id=run_id, sequence=sequence)
            else:
                fill_checkpoint(event, state, thread_id=thread_id, run_id=run_id, sequence=sequence)
        elif isinstance(item, HarnessRunResultEvent):
            fill_result_event(event, item, sequence=sequence, request_id=call.request_id)
        else:
            fill_event(event, item, sequence=sequence)

    async def Run(
        self, request: harness_service_pb2.RunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> harness_service_pb2.RunResponse:
        call = await self._decode(request.spec, context)
        async with aclosing(self._execute(call, context, checkpoints=False)) as items:
            async for item in items:
                if isinstance(item, HarnessRunResultEvent):
                    response = harness_service_pb2.RunResponse()
                    fill_result(response.result, item.result, request_id=call.request_id)
                    return response
        raise AssertionError("a run stream always ends with its result or raises")  # pragma: no cover

    async def _decode(self, spec: run_pb2.RunSpec, context: grpc.aio.ServicerContext[Any, Any]) -> RunCall:
        try:
            return run_call_from_pb(spec)
        except (HarnessError, ServerError) as error:
            await abort(context, error)
            raise  # pragma: no cover - abort always raises

    async def _execute(
        self, call: RunCall, context: grpc.aio.ServicerContext[Any, Any], *, checkpoints: bool
    ) -> AsyncGenerator[RunItem | _Checkpoint, None]:
        """Run `call` on the core, yielding its items (and checkpoint candidates when asked)."""
        try:
            stream = self._start(call)
        except (HarnessError, ServerError) as error:
            await abort(context, error)
            raise  # pragma: no cover - abort always raises
        if not self._runs.admit(stream):
            if self._runs.draining:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "The server is shutting down.")
            await abort(
                context,
                ServerError(
                    ServerReason.RUN_LIMIT_REACHED,
                    f"The server already runs its limit of {self._runs.limit} runs; retry later.",
                    details={"limit": self._runs.limit},
                ),
            )
        started = time.monotonic()
        fields = {"thread_id": stream.thread_id, "run_id": stream.run_id, "request_id": call.request_id}
        status = "error"
        log_run("run_started", agent=call.agent or self._registry.default, **fields)
        try:
            async with stream:
                async for item in stream:
                    if isinstance(item, HarnessRunResultEvent):
                        status = item.result.status
                    yield item
                    if checkpoints and self._is_checkpoint_point(item):
                        yield _Checkpoint(await stream.export_state(), stream.run_id)
        except HarnessError as error:
            status = f"error:{error.code}"
            await abort(context, error)
        except BaseException as error:
            # A `Run` call closes this generator once it has the result: that is no cancellation.
            if status not in ("completed", "suspended", "failed", "cancelled"):
                status = (
                    "client_cancelled"
                    if isinstance(error, GeneratorExit | asyncio.CancelledError)
                    else "error"
                )
            if isinstance(error, Exception) and not isinstance(error, grpc.aio.AbortError):
                status = "internal_error"
                LOGGER.exception("run_crashed", extra={"fields": fields})
                await context.abort(grpc.StatusCode.INTERNAL, "The server failed unexpectedly; see its logs.")
            raise
        finally:
            self._runs.release(stream)
            duration_ms = round((time.monotonic() - started) * 1000, 3)
            log_run("run_finished", status=status, duration_ms=duration_ms, **fields)

    @staticmethod
    def _is_checkpoint_point(item: RunItem) -> bool:
        return (
            isinstance(item, HarnessEvent)
            and isinstance(item.event, HarnessExtensionEvent)
            and item.event.type in _CHECKPOINT_AFTER
        )

    def _start(self, call: RunCall) -> HarnessRunStream[Any]:
        """Fresh bindings for this run only (its client tools), and the core's construction checks."""
        agent = self._registry.get(call.agent)
        if agent is None:
            raise ServerError(
                ServerReason.AGENT_UNKNOWN,
                f"No agent is called {call.agent!r}.",
                details={"agent": call.agent, "served": list(self._registry)},
                field="spec.agent",
            )
        reserved = [tool.name for tool in self._registry.tools(call.agent)]
        try:
            capability = client_tools_capability(call.client_tools, reserved_names=reserved)
        except HarnessError as error:
            raise at_field(error, "spec.client_tools") from None
        bindings = RunBindings.embedded(capabilities=[capability] if capability is not None else [])
        return agent.stream(
            call.input,
            bindings=bindings,
            previous_state=call.previous_state,
            tool_recovery=call.tool_recovery,
            deferred_resume=call.deferred_resume,
            usage_limits=call.usage_limits,
        )

    @staticmethod
    def _fork(source: HarnessState, thread_id: str) -> HarnessState:
        try:
            return source.fork(thread_id=thread_id or None)
        except ValidationError as error:
            raise at_field(_malformed_thread_id(error), "thread_id") from None

    # -- envelopes ------------------------------------------------------------------------------------
    async def NewState(
        self, request: harness_service_pb2.NewStateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> harness_service_pb2.NewStateResponse:
        # Start from the core's own empty envelope and overlay what the host sent, so the result
        # goes through `load_state` exactly like a state arriving in a run.
        envelope = state_to_pb(HarnessState.new())
        if request.thread_id:
            envelope.thread_id = request.thread_id
        if request.HasField("message_history"):
            envelope.message_history.CopyFrom(request.message_history)
        envelope.capability_states.extend(request.capability_states)
        envelope.environment_states.extend(request.environment_states)
        try:
            state = state_from_pb(envelope, field="")
        except (HarnessError, ServerError) as error:
            # The overlay's fields are the request's own top-level fields ("thread_id", ...).
            await abort(context, error, field=(field_of(error) or "").lstrip(".") or None)
            raise  # pragma: no cover
        return harness_service_pb2.NewStateResponse(state=state_to_pb(state))

    async def ForkState(
        self, request: harness_service_pb2.ForkStateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> harness_service_pb2.ForkStateResponse:
        try:
            source = state_from_pb(request.state, field="state")
            forked = self._fork(source, request.thread_id)
        except (HarnessError, ServerError) as error:
            await abort(context, error)
            raise  # pragma: no cover
        return harness_service_pb2.ForkStateResponse(state=state_to_pb(forked))

    async def ValidateState(
        self, request: harness_service_pb2.ValidateStateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> harness_service_pb2.ValidateStateResponse:
        source = request.WhichOneof("source")
        try:
            if source == "state":
                state = state_from_pb(request.state, field="state")
            elif source == "state_json":
                state = load_state(request.state_json)
            else:
                raise StateError("Set `state` or `state_json`.", code=ErrorCode.STATE_INVALID)
        except (HarnessError, ServerError) as error:
            await abort(context, error, field=field_of(error) or source)
            raise  # pragma: no cover
        return harness_service_pb2.ValidateStateResponse(
            state=state_to_pb(state), state_json=state_to_json(state)
        )

    async def RemainingDeferred(
        self,
        request: harness_service_pb2.RemainingDeferredRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> harness_service_pb2.RemainingDeferredResponse:
        try:
            resume = resume_from_pb(request.resume, field="resume")
            state = state_from_pb(request.state, field="state")
            # Checked as a run checks a recovery resume: what a host publishes must resume later.
            remaining = check_remaining(resume, state.message_history)
        except (HarnessError, ServerError) as error:
            await abort(context, error, field=field_of(error) or "resume")
            raise  # pragma: no cover
        response = harness_service_pb2.RemainingDeferredResponse()
        if remaining is not None:
            response.remaining.CopyFrom(resume_to_pb(remaining))
        return response

    # -- discovery ------------------------------------------------------------------------------------
    async def GetServerInfo(
        self, request: harness_service_pb2.GetServerInfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> harness_service_pb2.GetServerInfoResponse:
        return harness_service_pb2.GetServerInfoResponse(
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
                        for tool in self._registry.tools(name)
                    ],
                )
                for name in self._registry
            ],
            default_agent=self._registry.default,
            limits=harness_service_pb2.ServerLimits(
                max_message_bytes=self._max_message_bytes, max_concurrent_runs=self._runs.limit
            ),
            server_version=_server_version(),
        )
