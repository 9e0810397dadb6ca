"""OpenTelemetry traces: a server span per RPC, a run span under it, pydantic-ai's spans under that.

Off unless asked for (`--otlp-endpoint`, the standard `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`, or
`OTEL_TRACES_EXPORTER=console`): then there is no tracer, no interceptor and no instrumentation, and
nothing is recorded. On, each HarnessService and ThreadService RPC gets a SERVER span continuing the W3C
`traceparent` its metadata carries (health and reflection, which load balancers and tools call all the
time, are not traced); each run a `threadline.run` span with its ids, agent and outcome; and pydantic-ai's
own instrumentation records the model requests and tool calls beneath it, without prompt, output or
argument content unless `--trace-content` says so.

The RPC spans are ours rather than opentelemetry-instrumentation-grpc's: its aio interceptor iterates a
streaming behaviour as an async generator, and our streaming behaviours write with `context.write`
(`server/handlers.py`). Spans follow the RPC semantic conventions: `rpc.system`, `rpc.service`,
`rpc.method`, `rpc.grpc.status_code`, and an ERROR status only for the codes that mean the server failed.
Each server has a tracer provider of its own (not the process-global one), flushed when it stops.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from importlib import metadata
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ("CURRENT", "RunSpan", "Tracing", "exporter_names", "record_error", "tracing_from")

CURRENT: ContextVar[Tracing | None] = ContextVar("threadline_tracing", default=None)
"""The serving server's tracing: set when it starts, so its RPC tasks (which inherit it) can trace."""

_RPC_SPAN: ContextVar[trace.Span | None] = ContextVar("threadline_rpc_span", default=None)

# The status codes that mean the server failed (RPC semantic conventions, server side); the others are
# the caller's mistake or choice and leave the span's status unset.
_SERVER_FAULTS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_FAILED_RUNS = frozenset({"failed", "error", "internal_error", "undelivered"})
_EXPORTERS = ("otlp", "console", "none")


def _one_line(span: ReadableSpan) -> str:
    return f"{span.to_json(indent=None)}\n"


def exporter_names(otlp_endpoint: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """Where the flag and the standard variables ask spans to go: `otlp`, `console`, both, or none (off).

    Raises:
        ValueError: an exporter or OTLP protocol this server does not have (`ServerConfig.check`).
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    names = [name.strip() for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if name.strip()]
    if unknown := [name for name in names if name not in _EXPORTERS]:
        raise ValueError(
            f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}: this server exports traces with "
            f"{', '.join(_EXPORTERS)}."
        )
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    otlp = otlp_endpoint is not None or ("otlp" in names and bool(endpoint))
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if otlp and protocol not in (None, "", "grpc"):
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL is {protocol!r}: this server sends OTLP over gRPC; set it to grpc "
            "(or unset it) and point the endpoint at the collector's gRPC port (4317)."
        )
    return (*(("otlp",) if otlp else ()), *(("console",) if "console" in names else ()))


def _exporter(name: str, otlp_endpoint: str | None) -> SpanExporter:
    # Imported only when asked for: a server without traces does not load the SDK.
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        # The exporter reads the rest itself: headers, certificates, compression, timeout, `insecure`.
        return OTLPSpanExporter(endpoint=otlp_endpoint)
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    # stderr, one object per line like the logs: stdout carries only `listening on ...`.
    return ConsoleSpanExporter(out=sys.stderr, formatter=_one_line)


def tracing_from(
    otlp_endpoint: str | None, *, include_content: bool, environ: Mapping[str, str] = os.environ
) -> Tracing | None:
    """The server's tracing, or `None` when neither `--otlp-endpoint` nor the environment asks for traces."""
    names = exporter_names(otlp_endpoint, environ)
    if not names:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, str] = {"service.version": metadata.version("threadline")}
    if "OTEL_SERVICE_NAME" not in environ and "service.name=" not in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    ):
        attributes["service.name"] = "threadline"
    # The provider reads OTEL_TRACES_SAMPLER[_ARG] and the OTEL_BSP_* batch settings itself.
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, otlp_endpoint)))
    return Tracing(provider, include_content=include_content, exporters=names)


class Tracing:
    """One server's tracer provider, its RPC interceptor and the instrumentation its runs get."""

    def __init__(
        self, provider: TracerProvider, *, include_content: bool, exporters: tuple[str, ...]
    ) -> None:
        self.provider = provider
        self.exporters = exporters
        """Where spans go (`otlp`, `console`), as the `tracing_on` log line says."""
        self.tracer = provider.get_tracer("threadline.server", metadata.version("threadline"))
        self.instrumentation = Instrumentation(
            settings=InstrumentationSettings(
                tracer_provider=provider,
                include_content=include_content,
                include_binary_content=include_content,
            )
        )
        """pydantic-ai's spans for a run's model requests and tool calls, added to each run's bindings."""

    def interceptor(self, services: Sequence[str]) -> grpc.aio.ServerInterceptor:
        """The interceptor giving each RPC of `services` (full names) its SERVER span."""
        return _TracingInterceptor(self.tracer, tuple(f"/{name}/" for name in services))

    async def close(self) -> None:
        """Export what is still buffered and stop (in a worker thread: the exporter blocks)."""
        await asyncio.to_thread(self.provider.shutdown)


def record_error(code: grpc.StatusCode, reason: str, message: str) -> None:
    """The RPC being served ends with `code` and the `ErrorInfo` `reason` (its span records both)."""
    span = _RPC_SPAN.get()
    if span is None or not span.is_recording():
        return
    span.set_attributes({"rpc.grpc.status_code": code.value[0], "threadline.error.reason": reason})
    if code in _SERVER_FAULTS:
        span.set_status(Status(StatusCode.ERROR, f"{reason}: {message}"[:200]))


class RunSpan:
    """The `threadline.run` span of one run, current from `start()` to `end()` (no-op without tracing).

    The RPC's span gets the run's ids too, so a search by `threadline.thread_id` finds the calls as well.
    Call both from the same task: the span is attached to and detached from its context.
    """

    def __init__(self, service: str, agent: str, fields: Mapping[str, str]) -> None:
        self._tracing = CURRENT.get()
        self._attributes = {"threadline.service": service, "threadline.agent": agent} | {
            f"threadline.{key}": value for key, value in fields.items() if value
        }
        self._span: trace.Span | None = None
        self._token: Token[otel_context.Context] | None = None

    def start(self) -> None:
        if self._tracing is None:
            return
        rpc = _RPC_SPAN.get()
        if rpc is not None and rpc.is_recording():
            rpc.set_attributes(self._attributes)
        self._span = self._tracing.tracer.start_span("threadline.run", attributes=self._attributes)
        self._token = otel_context.attach(trace.set_span_in_context(self._span))

    def end(self, status: str, reason: str | None = None) -> None:
        """The run ended `status` (`RunLog`'s statuses), refused with `reason` if it was."""
        span, self._span = self._span, None
        if span is None:
            return
        span.set_attribute("threadline.run.status", status)
        if reason:
            span.set_attribute("threadline.error.reason", reason)
        if status in _FAILED_RUNS:
            span.set_status(Status(StatusCode.ERROR, reason or status))
        if self._token is not None:
            otel_context.detach(self._token)
        span.end()


class _TracingInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, tracer: trace.Tracer, prefixes: tuple[str, ...]) -> None:
        self._tracer = tracer
        self._prefixes = prefixes

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or handler.request_streaming or not method.startswith(self._prefixes):
            return handler
        carrier = {
            key: value
            for key, value in handler_call_details.invocation_metadata or ()
            if isinstance(value, str)
        }
        behaviour = handler.unary_stream if handler.response_streaming else handler.unary_unary
        assert behaviour is not None
        traced = self._traced(behaviour, method.lstrip("/"), carrier)
        make = (
            grpc.unary_stream_rpc_method_handler
            if handler.response_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        return make(traced, handler.request_deserializer, handler.response_serializer)

    def _traced(
        self, behaviour: Callable[..., Any], name: str, carrier: dict[str, str]
    ) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behaviour):

            async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
                with self._span(name, carrier):
                    async for response in behaviour(request, context):
                        yield response

            return stream

        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            with self._span(name, carrier):
                return await behaviour(request, context)

        return call

    def _span(self, name: str, carrier: dict[str, str]) -> AbstractContextManager[None]:
        return rpc_span(self._tracer, name, carrier, transport="grpc")


@contextmanager
def rpc_span(
    tracer: trace.Tracer, name: str, carrier: Mapping[str, str], *, transport: str
) -> Iterator[None]:
    """The SERVER span of the RPC `name` (`service/Method`) served over `transport` (`grpc`, `connect`,
    `grpc-web`), continuing the `traceparent` in `carrier` (its metadata or headers)."""
    service, _, method = name.partition("/")
    system = "grpc" if transport in ("grpc", "grpc-web") else "connect_rpc"
    with tracer.start_as_current_span(
        name,
        context=propagate.extract(dict(carrier)),
        kind=SpanKind.SERVER,
        attributes={
            "rpc.system": system,
            "rpc.service": service,
            "rpc.method": method,
            "threadline.transport": transport,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        token = _RPC_SPAN.set(span)
        try:
            yield
            span.set_attribute("rpc.grpc.status_code", grpc.StatusCode.OK.value[0])
        except grpc.aio.AbortError:
            raise  # `record_error` has recorded the status
        except asyncio.CancelledError:
            span.set_attribute("rpc.grpc.status_code", grpc.StatusCode.CANCELLED.value[0])
            raise
        except Exception as error:  # escaped every handler: grpc answers UNKNOWN
            span.record_exception(error)
            span.set_attributes({"rpc.grpc.status_code": grpc.StatusCode.UNKNOWN.value[0]})
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            raise
        finally:
            _RPC_SPAN.reset(token)
