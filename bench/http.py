"""(l) The HTTP port beside the gRPC port: section (a)'s run through Connect and gRPC-Web against gRPC.

One server with `--http-port`; the same `scenario` run as `Run` and as `StreamRun` (packed as the SDKs
ask, `max_events_per_message` 64) from this process over loopback: gRPC with grpc.aio, Connect
(binary, and JSON for `Run`) and gRPC-Web with the Connect project's Python client (its generated
`*_connect` clients, on its own HTTP/1.1 client). Cost is the server process's CPU per run, in rounds that
alternate the variants; ratios are medians of per-round ratios (`bench.measure`). What the HTTP port
adds is the ASGI server and the Connect runtime around the same servicer code: its framing, its codec
(the JSON variant encodes each response as JSON) and an HTTP/1.1 connection instead of HTTP/2.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.protocol import ProtocolType
from threadline.v1 import harness_service_connect, harness_service_pb2, harness_service_pb2_grpc, run_pb2

from .agents import PROMPT
from .measure import Cost, median_ratio, server_cpu_per_call, summary
from .proc import ServerProcess, free_port
from .wire import CHANNEL_OPTIONS, PER_MESSAGE

__all__ = ("http_section",)

VARIANTS = (
    "grpc_run",
    "connect_run",
    "connect_json_run",
    "grpc_stream_run",
    "connect_stream_run",
    "grpc_web_stream_run",
)


async def http_section(*, runs: int, rounds: int) -> dict[str, Any]:
    port = free_port()
    spec = run_pb2.RunSpec(agent="scenario", text=PROMPT)
    run_request = harness_service_pb2.RunRequest(spec=spec)
    stream_request = harness_service_pb2.StreamRunRequest(spec=spec, max_events_per_message=PER_MESSAGE)
    base = f"http://127.0.0.1:{port}"
    binary, json_codec = google_protobuf_binary_codec(), google_protobuf_json_codec()
    # No request compression: gRPC sends none either.
    connect = harness_service_connect.HarnessServiceClient(base, codec=binary, send_compression=None)
    connect_json = harness_service_connect.HarnessServiceClient(base, codec=json_codec, send_compression=None)
    grpc_web = harness_service_connect.HarnessServiceClient(
        base, codec=binary, protocol=ProtocolType.GRPC_WEB, send_compression=None
    )
    with ServerProcess(args=("--http-port", str(port))) as server:
        async with grpc.aio.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)

            async def grpc_run() -> None:
                assert (await stub.Run(run_request)).result.status == run_pb2.RUN_STATUS_COMPLETED

            async def connect_run() -> None:
                assert (await connect.run(run_request)).result.status == run_pb2.RUN_STATUS_COMPLETED

            async def connect_json_run() -> None:
                assert (await connect_json.run(run_request)).result.status == run_pb2.RUN_STATUS_COMPLETED

            async def grpc_stream_run() -> None:
                async for _ in stub.StreamRun(stream_request):
                    pass

            async def connect_stream_run() -> None:
                async for _ in connect.stream_run(stream_request):
                    pass

            async def grpc_web_stream_run() -> None:
                async for _ in grpc_web.stream_run(stream_request):
                    pass

            calls: dict[str, Callable[[], Awaitable[None]]] = {
                "grpc_run": grpc_run,
                "connect_run": connect_run,
                "connect_json_run": connect_json_run,
                "grpc_stream_run": grpc_stream_run,
                "connect_stream_run": connect_stream_run,
                "grpc_web_stream_run": grpc_web_stream_run,
            }
            try:
                for call in calls.values():  # warm-up: imports, connections
                    for _ in range(3):
                        await call()
                measured: list[dict[str, Cost]] = []
                for index in range(rounds):
                    order = VARIANTS[index % len(VARIANTS) :] + VARIANTS[: index % len(VARIANTS)]
                    measured.append(
                        {name: await server_cpu_per_call(server, calls[name], runs) for name in order}
                    )
            finally:
                for client in (connect, connect_json, grpc_web):
                    await client.close()
    return {
        "runs_per_round": runs,
        "rounds": rounds,
        "cost": {name: summary(measured, name) for name in VARIANTS},
        "ratios": {
            "connect_run_over_grpc_run": median_ratio(measured, "connect_run", "grpc_run"),
            "connect_json_run_over_grpc_run": median_ratio(measured, "connect_json_run", "grpc_run"),
            "connect_stream_over_grpc_stream": median_ratio(
                measured, "connect_stream_run", "grpc_stream_run"
            ),
            "grpc_web_stream_over_grpc_stream": median_ratio(
                measured, "grpc_web_stream_run", "grpc_stream_run"
            ),
        },
    }
