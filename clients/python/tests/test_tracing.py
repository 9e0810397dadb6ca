"""The host's trace context reaches the server: every call's server span continues the host's trace.

A server with `OTEL_TRACES_EXPORTER=console` writes each span to its stderr as one JSON line
(`ReadableSpan.to_json`), beside its JSON log lines. With a host span current (a span context with
random IDs and a tracestate, made current through the OpenTelemetry API, as a host continuing an
incoming request has it), each call of both services, unary and streaming, is a server span in the
host's trace whose parent is the host's span, and the run's log lines carry the host's trace ID. With
no span current the SDK sends nothing: each call starts a trace of its own. A host without the
OpenTelemetry API imports and runs the SDK as before.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import anyio
import pytest
import threadline_client as tl
from opentelemetry import baggage, context, trace
from threadline_client._tracing import call_metadata

pytestmark = pytest.mark.anyio

SPAN_EXPORT_WITHIN = 20.0
"""Seconds the server may take to export a span (it exports in batches); a bound, not a measure."""
HOST_STATE = ("host", "threadline-test")
"""The tracestate entry of the host's span."""


class Traced(Protocol):
    """The `Served` of conftest.py: a server whose stderr (log lines and spans) the test reads."""

    addr: str

    def log_lines(self) -> list[dict[str, Any]]: ...

    async def run_logged(self, event: str, request_id: str, *, within: float = ...) -> dict[str, Any]: ...


@pytest.fixture(scope="module")
def traced(serve_with: Callable[..., AbstractContextManager[Traced]]) -> Iterator[Traced]:
    """A server of this module's own with tracing on, its spans on stderr."""
    with serve_with(env={"OTEL_TRACES_EXPORTER": "console"}) as served:
        yield served


def host_span() -> trace.Span:
    """A span of the host's with fresh random IDs, sampled, with a tracestate entry."""
    return trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id=secrets.randbits(128) | 1,  # never the invalid all-zero ID
            span_id=secrets.randbits(64) | 1,
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
            trace_state=trace.TraceState([HOST_STATE]),
        )
    )


async def spans_in(server: Traced, trace_id: str, names: set[str]) -> dict[str, dict[str, Any]]:
    """The server's spans named `names` in the trace `trace_id` (32 hex), once all are exported."""
    found: dict[str, dict[str, Any]] = {}
    with anyio.move_on_after(SPAN_EXPORT_WITHIN):
        while True:
            found = {
                line["name"]: line
                for line in server.log_lines()
                if line.get("name") in names
                and isinstance(line.get("context"), dict)
                and line["context"].get("trace_id") == f"0x{trace_id}"
            }
            if found.keys() == names:
                return found
            await anyio.sleep(0.05)
    pytest.fail(f"within {SPAN_EXPORT_WITHIN} s the server exported only {sorted(found)} of trace {trace_id}")


def request_id(what: str) -> str:
    return f"traced-{what}-{uuid.uuid4().hex}"


async def test_every_call_continues_the_host_span(traced: Traced) -> None:
    span = host_span()
    host = span.get_span_context()
    trace_id, span_id = trace.format_trace_id(host.trace_id), trace.format_span_id(host.span_id)
    run_request, thread_request = request_id("run"), request_id("thread-run")

    async with tl.Client(traced.addr, timeout=60.0) as client:
        with trace.use_span(span):
            await client.get_server_info()
            await client.run(tl.RunSpec(text="hello", request_id=run_request))
            async with client.stream_run(tl.RunSpec(text="hello")) as stream:
                await stream.collect()
            thread = await client.threads.create()
            await client.threads.run(thread.thread_id, text="hello", request_id=thread_request)
            await client.threads.stream(thread.thread_id, text="hello").collect()

    names = {
        "threadline.v1.HarnessService/GetServerInfo",
        "threadline.v1.HarnessService/Run",
        "threadline.v1.HarnessService/StreamRun",
        "threadline.v1.ThreadService/CreateThread",
        "threadline.v1.ThreadService/RunThread",
        "threadline.v1.ThreadService/StreamThreadRun",
    }
    spans = await spans_in(traced, trace_id, names)
    for name, server_span in spans.items():
        continued = (server_span["kind"], server_span["parent_id"], server_span["context"]["trace_state"])
        assert continued == ("SpanKind.SERVER", f"0x{span_id}", repr(host.trace_state)), (name, server_span)
    for request in (run_request, thread_request):
        started = await traced.run_logged("run_started", request)
        assert started["trace_id"] == trace_id, started


async def test_without_a_host_span_each_call_starts_its_own_trace(traced: Traced) -> None:
    assert not trace.get_current_span().get_span_context().is_valid
    run_request, thread_request = request_id("untraced-run"), request_id("untraced-thread-run")

    async with tl.Client(traced.addr, timeout=60.0) as client:
        await client.run(tl.RunSpec(text="hello", request_id=run_request))
        thread = await client.threads.create()
        await client.threads.run(thread.thread_id, text="hello", request_id=thread_request)

    traces = set()
    for request, name in (
        (run_request, "threadline.v1.HarnessService/Run"),
        (thread_request, "threadline.v1.ThreadService/RunThread"),
    ):
        trace_id = (await traced.run_logged("run_started", request))["trace_id"]
        spans = await spans_in(traced, trace_id, {name})
        assert spans[name]["parent_id"] is None, spans[name]
        traces.add(trace_id)
    assert len(traces) == 2


def test_the_metadata_carries_the_token_then_the_trace_context() -> None:
    token = (("authorization", "Bearer t"),)
    assert call_metadata(()) is None
    assert call_metadata(token) == token

    span = host_span()
    host = span.get_span_context()
    with trace.use_span(span):
        attached = context.attach(baggage.set_baggage("tenant", "acme"))
        try:
            metadata = call_metadata(token)
        finally:
            context.detach(attached)

    assert metadata is not None and metadata[0] == token[0]
    assert dict(metadata[1:]) == {
        "traceparent": f"00-{trace.format_trace_id(host.trace_id)}-{trace.format_span_id(host.span_id)}-01",
        "tracestate": "=".join(HOST_STATE),
        "baggage": "tenant=acme",
    }


def test_the_sdk_runs_without_the_opentelemetry_api(host_without: Callable[..., None]) -> None:
    body = """
result = await client.run(tl.v1.RunSpec(text="hello"))
thread = await client.threads.create()
assert result.status is tl.v1.RunStatus.COMPLETED and thread.thread_id, (result, thread)
"""
    host_without("opentelemetry", body, strict=True)
