"""`--http-port`: the same RPCs over gRPC, Connect (JSON and binary) and gRPC-Web give the same answers.

Each transport is driven by a real client of its own: grpc.aio for gRPC, the Connect project's Python
client (its generated `*_connect` clients) for Connect-JSON, Connect-binary and gRPC-Web, and plain
HTTP requests (what `curl` sends) for the JSON a person types by hand and for CORS.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from conftest import RunningServer, StartServer, events_of, fresh_thread_id, thread_spec
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from google.rpc import error_details_pb2
from threadline.v1 import (
    harness_service_connect,
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_connect,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

pytestmark = pytest.mark.anyio

TRANSPORTS = ("grpc", "connect-json", "connect-proto", "grpc-web")
TOKEN = "s3cret-http"


@dataclass
class Refusal(Exception):
    """A failed call, whatever the transport: its code's name, ErrorInfo and BadRequest fields."""

    code: str
    reason: str
    metadata: dict[str, str]
    fields: tuple[str, ...]


def _from_details(code: str, details: list[tuple[str, bytes]]) -> Refusal:
    reason, metadata, fields = "", dict[str, str](), tuple[str, ...]()
    for type_name, data in details:
        if type_name == "google.rpc.ErrorInfo":
            info = error_details_pb2.ErrorInfo.FromString(data)
            assert info.domain == "threadline"
            reason, metadata = info.reason, dict(info.metadata)
        elif type_name == "google.rpc.BadRequest":
            bad = error_details_pb2.BadRequest.FromString(data)
            fields = tuple(v.field for v in bad.field_violations)
    return Refusal(code, reason, metadata, fields)


class Caller:
    """One RPC at a time over one transport, as `call(service, Method, request)`."""

    def __init__(self, transport: str, running: RunningServer, token: str | None = None) -> None:
        self.transport = transport
        self._headers = {"authorization": f"Bearer {token}"} if token else {}
        self._grpc = self._connect = None
        if transport == "grpc":
            self._channel = grpc.aio.insecure_channel(running.address)
            self._grpc = {
                "harness": harness_service_pb2_grpc.HarnessServiceStub(self._channel),
                "threads": thread_service_pb2_grpc.ThreadServiceStub(self._channel),
            }
        else:
            base = f"http://127.0.0.1:{running.server.http_port}"
            options: dict[str, Any] = {
                "protocol": ProtocolType.GRPC_WEB if transport == "grpc-web" else ProtocolType.CONNECT,
                "codec": google_protobuf_json_codec()
                if transport == "connect-json"
                else google_protobuf_binary_codec(),
            }
            self._connect = {
                "harness": harness_service_connect.HarnessServiceClient(base, **options),
                "threads": thread_service_connect.ThreadServiceClient(base, **options),
            }

    async def close(self) -> None:
        if self._grpc is not None:
            await self._channel.close()
        if self._connect is not None:
            for client in self._connect.values():
                await client.close()

    async def call(self, service: str, method: str, request: Any, *, timeout: float | None = None) -> Any:
        """The response (a list of responses for a stream), or raises `Refusal`."""
        streaming = method.startswith("Stream")
        if self._grpc is not None:
            stub = getattr(self._grpc[service], method)
            metadata = tuple(self._headers.items())
            try:
                if streaming:
                    return [r async for r in stub(request, timeout=timeout, metadata=metadata)]
                return await stub(request, timeout=timeout, metadata=metadata)
            except grpc.aio.AioRpcError as error:
                raise _grpc_refusal(error) from None
        assert self._connect is not None
        snake = "".join("_" + c.lower() if c.isupper() else c for c in method).lstrip("_")
        function = getattr(self._connect[service], snake)
        timeout_ms = None if timeout is None else int(timeout * 1000)
        try:
            if streaming:
                return [r async for r in function(request, headers=self._headers, timeout_ms=timeout_ms)]
            return await function(request, headers=self._headers, timeout_ms=timeout_ms)
        except ConnectError as error:
            details = [(d.type_name, d.message_bytes) for d in error.details]
            raise _from_details(error.code.name, details) from None


def _grpc_refusal(error: grpc.aio.AioRpcError) -> Exception:
    from google.rpc import status_pb2

    details: list[tuple[str, bytes]] = []
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            details = [
                (d.type_url.removeprefix("type.googleapis.com/"), d.value)
                for d in status_pb2.Status.FromString(value).details
            ]
    name = "CANCELED" if error.code() == grpc.StatusCode.CANCELLED else error.code().name
    return _from_details(name, details)


@pytest.fixture(scope="module")
async def http_server(start_server: StartServer) -> RunningServer:
    return await start_server(http_port=0, store="memory")


@pytest.fixture(scope="module")
async def token_server(start_server: StartServer) -> RunningServer:
    return await start_server(http_port=0, store="none", token=TOKEN)


@pytest.fixture(params=TRANSPORTS)
async def caller(request: pytest.FixtureRequest, http_server: RunningServer) -> AsyncIterator[Caller]:
    made = Caller(request.param, http_server)
    yield made
    await made.close()


async def refused(call: Any) -> Refusal:
    with pytest.raises(Exception) as caught:
        await call
    assert isinstance(caught.value, Refusal), caught.value
    return caught.value


def _events(responses: list[harness_service_pb2.StreamRunResponse]) -> list[Any]:
    return [event for response in responses for event in events_of(response)]


# -- the same answers -----------------------------------------------------------------------------------


async def test_get_server_info_is_the_same_on_every_transport(http_server: RunningServer) -> None:
    answers = []
    for transport in TRANSPORTS:
        caller = Caller(transport, http_server)
        try:
            answers.append(
                await caller.call("harness", "GetServerInfo", harness_service_pb2.GetServerInfoRequest())
            )
        finally:
            await caller.close()
    assert answers[0].agents, answers[0]
    assert all(answer == answers[0] for answer in answers[1:])


async def test_run_completes_with_the_prompt_in_its_history(caller: Caller) -> None:
    spec = run_pb2.RunSpec(text=f"hello over {caller.transport}")
    response = await caller.call("harness", "Run", harness_service_pb2.RunRequest(spec=spec))
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert f"hello over {caller.transport}" in response.result.state.message_history.data


async def test_stream_run_streams_every_event_then_the_result(caller: Caller) -> None:
    spec = run_pb2.RunSpec(text="hello")
    responses = await caller.call("harness", "StreamRun", harness_service_pb2.StreamRunRequest(spec=spec))
    events = _events(responses)
    kinds = [event.WhichOneof("event") for event in events]
    assert kinds[0] == "run_started" and kinds[-1] == "result", kinds
    assert kinds.count("result") == 1 and "part_delta" in kinds and "lifecycle" in kinds, kinds
    sequences = [event.sequence for event in events]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)


async def test_a_refusal_carries_the_same_code_and_details(caller: Caller) -> None:
    spec = run_pb2.RunSpec(agent="no-such-agent", text="hello")
    refusal = await refused(caller.call("harness", "Run", harness_service_pb2.RunRequest(spec=spec)))
    assert refusal.code == "INVALID_ARGUMENT"
    assert refusal.reason == "AGENT_UNKNOWN"
    assert refusal.metadata["agent"] == "no-such-agent"
    assert refusal.fields == ("spec.agent",)


async def test_a_thread_turn_and_its_typed_conflict(caller: Caller) -> None:
    thread_id = fresh_thread_id("http")
    created = await caller.call(
        "threads", "CreateThread", thread_service_pb2.CreateThreadRequest(thread_id=thread_id)
    )
    ran = await caller.call(
        "threads", "RunThread", thread_service_pb2.RunThreadRequest(spec=thread_spec(thread_id, text="hello"))
    )
    assert ran.result.status == run_pb2.RUN_STATUS_COMPLETED
    got = await caller.call("threads", "GetThread", thread_service_pb2.GetThreadRequest(thread_id=thread_id))
    assert got.thread.revision > created.thread.revision
    stale = thread_service_pb2.DeleteThreadRequest(
        thread_id=thread_id, expected_revision=created.thread.revision
    )
    refusal = await refused(caller.call("threads", "DeleteThread", stale))
    assert (refusal.code, refusal.reason) == ("ABORTED", "REVISION_CONFLICT")
    assert refusal.metadata == {"current_revision": str(got.thread.revision)}


async def test_the_deadline_ends_a_slow_run_as_deadline_exceeded(
    caller: Caller, http_server: RunningServer
) -> None:
    spec = run_pb2.RunSpec(text="sleep 30")
    refusal = await refused(
        caller.call("harness", "Run", harness_service_pb2.RunRequest(spec=spec), timeout=0.5)
    )
    assert refusal.code == "DEADLINE_EXCEEDED"
    assert await asyncio.to_thread(http_server.runs_after_calls) == 0  # the run was cancelled with it


# -- the token ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_token_is_required_on_every_transport(transport: str, token_server: RunningServer) -> None:
    request = harness_service_pb2.GetServerInfoRequest()
    for token, reason in ((None, "TOKEN_MISSING"), ("wrong", "TOKEN_INVALID")):
        caller = Caller(transport, token_server, token)
        try:
            refusal = await refused(caller.call("harness", "GetServerInfo", request))
        finally:
            await caller.close()
        assert (refusal.code, refusal.reason) == ("UNAUTHENTICATED", reason)
    caller = Caller(transport, token_server, TOKEN)
    try:
        assert (await caller.call("harness", "GetServerInfo", request)).agents
    finally:
        await caller.close()


# -- by hand: curl's JSON, bad bodies, CORS -------------------------------------------------------------


def _post(
    port: int, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=body,
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        text = error.read()
        return error.code, dict(error.headers), json.loads(text) if text.startswith(b"{") else text


def _options(port: int, origin: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/threadline.v1.HarnessService/Run",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,connect-protocol-version,authorization",
        },
        method="OPTIONS",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}


async def test_curl_json_runs_and_answers_errors_as_connect_json(http_server: RunningServer) -> None:
    port = http_server.server.http_port
    status, _headers, body = await asyncio.to_thread(
        _post, port, "/threadline.v1.HarnessService/Run", b'{"spec":{"text":"hello"}}'
    )
    assert status == 200 and body["result"]["status"] == "RUN_STATUS_COMPLETED", body
    status, _headers, body = await asyncio.to_thread(
        _post, port, "/threadline.v1.HarnessService/Run", b'{"spec":{"agent":"nope"}}'
    )
    assert status == 400 and body["code"] == "invalid_argument", body
    assert [d["type"] for d in body["details"]] == ["google.rpc.ErrorInfo", "google.rpc.BadRequest"]
    for bad in (b'{"spec":', b'{"spec":{"no_such_field":1}}', b"[1,2]", b"\xff\xfe"):
        status, _headers, body = await asyncio.to_thread(
            _post, port, "/threadline.v1.HarnessService/Run", bad
        )
        assert status == 400 and body["code"] == "invalid_argument", (bad, body)
        info = error_details_pb2.ErrorInfo.FromString(_b64(body["details"][0]["value"]))
        assert info.reason == "REQUEST_UNDECODABLE", (bad, info)
    status, _headers, _body = await asyncio.to_thread(_post, port, "/nowhere", b"{}")
    assert status == 404


def _b64(value: str) -> bytes:
    import base64

    return base64.b64decode(value + "=" * (-len(value) % 4))


async def test_cors_answers_only_the_origins_named(
    start_server: StartServer, http_server: RunningServer
) -> None:
    allowed = "https://app.example.com"
    cors = await start_server(http_port=0, store="none", http_cors_origins=(allowed,))
    status, headers = await asyncio.to_thread(_options, cors.server.http_port, allowed)
    assert status == 200 and headers["access-control-allow-origin"] == allowed, headers
    assert "connect-protocol-version" in headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in headers
    status, headers = await asyncio.to_thread(_options, cors.server.http_port, "https://evil.example.com")
    assert "access-control-allow-origin" not in headers, headers
    # Without --http-cors-origin nothing is allowed: no browser page may call the port.
    status, headers = await asyncio.to_thread(_options, http_server.server.http_port, allowed)
    assert "access-control-allow-origin" not in headers, headers


@pytest.mark.parametrize("origin", ["*", "https://app.example.com/path", "app.example.com", "ftp://x"])
def test_a_cors_origin_must_be_an_origin(origin: str) -> None:
    from server.config import ConfigError, ServerConfig

    with pytest.raises(ConfigError, match="--http-cors-origin"):
        ServerConfig(http_port=0, http_cors_origins=(origin,)).check()


@pytest.mark.parametrize("transport", ["connect-json", "connect-proto", "grpc-web"])
async def test_a_client_that_goes_away_cancels_its_run(transport: str, http_server: RunningServer) -> None:
    caller = Caller(transport, http_server)
    client = caller._connect["harness"]  # type: ignore[index]
    request = harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(text="sleep 30"))
    try:
        stream = client.stream_run(request)
        first = await anext(aiter(stream))
        assert first.event.HasField("run_started")
        assert http_server.active_runs == 1
        await stream.aclose()
    finally:
        await caller.close()
    assert await asyncio.to_thread(http_server.runs_after_calls) == 0


async def test_metrics_count_each_transport_apart(start_server: StartServer) -> None:
    counted = await start_server(http_port=0, store="none", metrics_port=0)
    spec = run_pb2.RunSpec(agent="no-such-agent", text="hello")
    for transport in TRANSPORTS:
        caller = Caller(transport, counted)
        try:
            await refused(caller.call("harness", "Run", harness_service_pb2.RunRequest(spec=spec)))
            streamed = await caller.call(
                "harness", "StreamRun", harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(text="hi"))
            )
        finally:
            await caller.close()
        label = {"grpc": "grpc", "grpc-web": "grpc-web"}.get(transport, "connect")
        registry = counted.server.metrics.registry
        errors = registry.get_sample_value(
            "threadline_rpc_errors_total", {"reason": "AGENT_UNKNOWN", "transport": label}
        )
        assert errors == (2 if label == "connect" and transport == "connect-proto" else 1), (
            transport,
            errors,
        )
        messages = registry.get_sample_value(
            "threadline_stream_messages_total", {"service": "harness", "transport": label}
        )
        assert messages and messages >= len(streamed), (transport, messages)
