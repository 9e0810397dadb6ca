"""OpenTelemetry traces (issue 16): real server processes export to an OTLP trace receiver in this test.

The receiver is a plain grpcio server of `opentelemetry.proto.collector.trace.v1.TraceService`; the
server under test exports to it with the OTLP/gRPC exporter, batched (`OTEL_BSP_SCHEDULE_DELAY`), and
flushes the rest when SIGTERM stops it, so each test reads the spans after the stop.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from conftest import REPO, THREADLINE, free_port, spawn_serve
from logged_serve import LoggedServe, logged_serve
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanPb
from opentelemetry.proto.trace.v1.trace_pb2 import Status as StatusPb
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}


@dataclass
class Span:
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    status_code: int
    service_name: str


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Collects every span exported to it."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        with self._lock:
            for resource in request.resource_spans:
                resource_attributes = {a.key: _value(a.value) for a in resource.resource.attributes}
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            Span(
                                name=span.name,
                                kind=span.kind,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                status_code=span.status.code,
                                service_name=str(resource_attributes.get("service.name")),
                            )
                        )
        return trace_service_pb2.ExportTraceServiceResponse()

    def named(self, name: str) -> list[Span]:
        return [span for span in self.spans if span.name == name]

    def children(self, parent: Span) -> list[Span]:
        return [span for span in self.spans if span.parent_id == parent.span_id]


@contextmanager
def receiver() -> Iterator[tuple[Receiver, str]]:
    """A running OTLP trace receiver and its `http://127.0.0.1:PORT` endpoint."""
    collected = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collected, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield collected, f"http://127.0.0.1:{port}"
    finally:
        server.stop(None)


def traceparent() -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A fresh host trace id and span id, and the W3C metadata that carries them."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, (("traceparent", f"00-{trace_id}-{span_id}-01"),)


def run(address: str, text: str, metadata: tuple[tuple[str, str], ...] = (), **spec: Any) -> Any:
    with grpc.insecure_channel(address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        request = harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text=text, **spec))
        return stub.Run(request, metadata=metadata, timeout=30).result


def log_records(running: LoggedServe) -> list[dict[str, Any]]:
    """The JSON log lines (the console exporter is not on here, so every line is one)."""
    return running.records()


def test_a_run_is_traced_under_the_hosts_traceparent_without_content() -> None:
    trace_id, span_id, metadata = traceparent()
    thread_trace, thread_span, thread_metadata = traceparent()
    with receiver() as (spans, endpoint):
        env = {**FAST_EXPORT, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "threadline-test"}
        with logged_serve(env=env) as running:
            result = run(running.address, "lookup zanzibar", metadata, request_id="req-traced")
            with grpc.insecure_channel(running.address) as channel:
                threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
                thread = threads.CreateThread(thread_service_pb2.CreateThreadRequest(), timeout=30).thread
                spec = thread_service_pb2.ThreadRunSpec(thread_id=thread.thread_id, text="lookup tuvalu")
                turn = list(
                    threads.StreamThreadRun(
                        thread_service_pb2.StreamThreadRunRequest(spec=spec),
                        metadata=thread_metadata,
                        timeout=30,
                    )
                )
            assert running.stop() == 0
        records = log_records(running)

    assert result.status == run_pb2.RUN_STATUS_COMPLETED
    (rpc,) = [span for span in spans.named("threadline.v1.HarnessService/Run") if span.trace_id == trace_id]
    assert rpc.kind == SpanPb.SPAN_KIND_SERVER
    assert rpc.parent_id == span_id  # continues the host's span
    assert rpc.service_name == "threadline-test"  # OTEL_SERVICE_NAME is the exporter's resource
    assert rpc.attributes["rpc.system"] == "grpc"
    assert rpc.attributes["rpc.service"] == "threadline.v1.HarnessService"
    assert rpc.attributes["rpc.method"] == "Run"
    assert rpc.attributes["rpc.grpc.status_code"] == 0
    assert rpc.attributes["threadline.thread_id"] == result.thread_id
    assert rpc.attributes["threadline.run_id"] == result.run_id
    (run_span,) = spans.children(rpc)
    assert run_span.name == "threadline.run"
    assert run_span.trace_id == trace_id
    assert run_span.attributes == {
        "threadline.service": "harness",
        "threadline.agent": "default",
        "threadline.thread_id": result.thread_id,
        "threadline.run_id": result.run_id,
        "threadline.request_id": "req-traced",
        "threadline.run.status": "completed",
    }
    # pydantic-ai's own spans beneath the run: the agent run, its two model requests and the tool call.
    (agent_span,) = spans.children(run_span)
    assert agent_span.name == "invoke_agent default"
    beneath = sorted(span.name for span in spans.children(agent_span))
    assert beneath == ["chat threadline-demo", "chat threadline-demo", "execute_tool lookup"]
    # No prompt, output or tool argument content by default (the words are in all three).
    everything = repr([span.attributes for span in spans.spans])
    assert "zanzibar" not in everything and "tuvalu" not in everything

    # A ThreadService run: its RPC span continues the other traceparent, the run span is under it.
    assert turn[-1].event.HasField("result")
    (thread_rpc,) = [
        span for span in spans.spans if span.trace_id == thread_trace and span.kind == SpanPb.SPAN_KIND_SERVER
    ]
    assert thread_rpc.name == "threadline.v1.ThreadService/StreamThreadRun"
    assert thread_rpc.parent_id == thread_span
    (thread_run,) = spans.children(thread_rpc)
    assert thread_run.name == "threadline.run"
    assert thread_run.attributes["threadline.service"] == "threads"
    assert thread_run.attributes["threadline.thread_id"] == thread.thread_id
    assert thread_run.attributes["threadline.run.status"] == "completed"
    assert [span.name for span in spans.children(thread_run)] == ["invoke_agent default"]

    # Every log line of the run carries the trace id and the run span's id.
    lines = [record for record in records if record.get("run_id") == result.run_id]
    assert [line["event"] for line in lines] == ["run_started", "run_finished"]
    assert all(line["trace_id"] == trace_id and line["span_id"] == run_span.span_id for line in lines)
    thread_lines = [record for record in records if record.get("thread_id") == thread.thread_id]
    assert thread_lines and all(line["trace_id"] == thread_trace for line in thread_lines)


def test_content_is_recorded_only_when_asked() -> None:
    with (
        receiver() as (spans, endpoint),
        logged_serve("--otlp-endpoint", endpoint, "--trace-content", env=FAST_EXPORT) as running,
    ):
        run(running.address, "lookup zanzibar")
        assert running.stop() == 0
    (tool,) = spans.named("execute_tool lookup")
    assert "zanzibar" in repr(tool.attributes)
    assert spans.named("threadline.v1.HarnessService/Run")[0].service_name == "threadline"


def test_errors_are_recorded_with_their_reason() -> None:
    trace_id, _, metadata = traceparent()
    with receiver() as (spans, endpoint):
        args = ("--otlp-endpoint", endpoint, "--token", "s3cret")
        with logged_serve(*args, env=FAST_EXPORT) as running:
            auth = (("authorization", "Bearer s3cret"), *metadata)
            with pytest.raises(grpc.RpcError) as unknown:
                run(running.address, "hello", auth, agent="nobody")
            assert unknown.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(grpc.RpcError) as missing:
                run(running.address, "hello", metadata)
            assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
            # One model response allowed, two needed: the run fails (FAILED, a result, not a status).
            failed = run(running.address, "lookup x", auth, usage_limits=run_pb2.UsageLimits(request_limit=1))
            assert running.stop() == 0

    assert failed.status == run_pb2.RUN_STATUS_FAILED
    rpcs = [span for span in spans.named("threadline.v1.HarnessService/Run") if span.trace_id == trace_id]
    by_reason = {span.attributes.get("threadline.error.reason"): span for span in rpcs}
    assert set(by_reason) == {"AGENT_UNKNOWN", "TOKEN_MISSING", None}
    assert (
        by_reason["AGENT_UNKNOWN"].attributes["rpc.grpc.status_code"]
        == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    )
    assert (
        by_reason["TOKEN_MISSING"].attributes["rpc.grpc.status_code"]
        == grpc.StatusCode.UNAUTHENTICATED.value[0]
    )
    # The caller's mistakes leave the RPC span's status unset (RPC conventions); a failed run is an error.
    assert {span.status_code for span in rpcs} == {StatusPb.STATUS_CODE_UNSET}
    (failed_run,) = spans.children(by_reason[None])
    assert failed_run.attributes["threadline.run.status"] == "failed"
    assert failed_run.status_code == StatusPb.STATUS_CODE_ERROR


def test_no_traces_and_no_trace_ids_unless_asked() -> None:
    _, _, metadata = traceparent()
    with logged_serve() as running:
        result = run(running.address, "lookup x", metadata)
        assert running.stop() == 0
    records = running.records()
    assert "tracing_on" not in [record["event"] for record in records]
    lines = [record for record in records if record.get("run_id") == result.run_id]
    assert lines and not any("trace_id" in line for line in lines)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--otlp-endpoint", "127.0.0.1:4317"), {}, "--otlp-endpoint must be a URL"),
        ((), {"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER names zipkin"),
        (
            (),
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            "sends OTLP over gRPC",
        ),
    ],
)
def test_trace_settings_this_server_cannot_serve_refuse_to_start(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    with pytest.raises(RuntimeError, match=message):
        spawn_serve(*args, env=env)


def test_malformed_trace_headers_start_a_new_trace() -> None:
    hostile = (
        ("traceparent", "00-" + "z" * 32 + "-" + "0" * 16 + "-01"),
        ("tracestate", ",".join(f"k{i}=v{i}" for i in range(500))),  # W3C allows 32 members
        ("baggage", "a=" + "b" * 7000 + ",%%%=;;"),  # and 8192 bytes; the server takes 16 KiB in all
    )
    zero_trace = (("traceparent", "00-" + "0" * 32 + "-" + "1" * 16 + "-01"),)  # an invalid (all-zero) id
    with (
        receiver() as (spans, endpoint),
        logged_serve("--otlp-endpoint", endpoint, env=FAST_EXPORT) as running,
    ):
        result = run(running.address, "hello", hostile)
        zero = run(running.address, "hello", zero_trace)
        assert running.stop() == 0
    assert result.status == zero.status == run_pb2.RUN_STATUS_COMPLETED
    rpcs = spans.named("threadline.v1.HarnessService/Run")
    assert len(rpcs) == 2
    assert all(span.parent_id == "" for span in rpcs)  # each a root of a trace of its own
    assert len({span.trace_id for span in rpcs}) == 2


def test_config_check_refuses_trace_settings_serve_would_refuse() -> None:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "zipkin"}
    example = str(REPO / "docs" / "threadline.example.toml")
    checked = subprocess.run(
        [str(THREADLINE), "config", "check", example], env=env, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 2
    assert "OTEL_TRACES_EXPORTER names zipkin" in checked.stderr


@pytest.mark.parametrize("transport", ["connect", "grpc-web"])
def test_an_http_transport_rpc_is_traced_with_its_transport(transport: str) -> None:
    """`--http-port`: the same SERVER span and run span as over gRPC, labelled with the transport."""
    import json
    import struct
    import urllib.request

    trace_id, span_id, metadata = traceparent()
    port = free_port()
    request = harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello"))
    if transport == "connect":
        body, kind = b'{"spec":{"text":"hello"}}', "application/json"
    else:
        data = request.SerializeToString()
        body, kind = struct.pack(">BI", 0, len(data)) + data, "application/grpc-web+proto"
    with receiver() as (spans, endpoint):
        env = {**FAST_EXPORT, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
        with logged_serve("--http-port", str(port), env=env) as running:
            sent = urllib.request.Request(
                f"http://127.0.0.1:{port}/threadline.v1.HarnessService/Run",
                data=body,
                headers={"Content-Type": kind, **dict(metadata)},
            )
            with urllib.request.urlopen(sent, timeout=30) as answer:
                assert answer.status == 200
                if transport == "connect":
                    assert json.loads(answer.read())["result"]["status"] == "RUN_STATUS_COMPLETED"
            assert running.stop() == 0

    (rpc,) = [span for span in spans.named("threadline.v1.HarnessService/Run") if span.trace_id == trace_id]
    assert rpc.kind == SpanPb.SPAN_KIND_SERVER and rpc.parent_id == span_id
    assert rpc.attributes["threadline.transport"] == transport
    assert rpc.attributes["rpc.system"] == ("connect_rpc" if transport == "connect" else "grpc")
    assert rpc.attributes["rpc.grpc.status_code"] == 0
    (run_span,) = spans.children(rpc)
    assert run_span.name == "threadline.run"
