"""An OTLP trace receiver that counts and drops spans: where (a)'s observed server exports its traces.

A helper process of its own (`bench.proc.Helper`), so receiving spans costs neither the benchmark's
in-process variants nor the server under test. Prints `{"port": N}` when ready, `{"spans": N}` when its
stdin closes, and exits.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class _Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0
        self._lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        count = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        with self._lock:
            self.spans += count
        return trace_service_pb2.ExportTraceServiceResponse()


def main() -> None:
    sink = _Sink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"port": port}), flush=True)
    for _ in sys.stdin:  # until the benchmark closes our stdin
        pass
    server.stop(None)
    print(json.dumps({"spans": sink.spans}), flush=True)


if __name__ == "__main__":
    main()
