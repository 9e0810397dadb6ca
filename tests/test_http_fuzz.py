"""A bounded fuzz of the HTTP port (`--http-port`) of a live `threadline serve` (`--store memory`).

What a browser, a proxy or a broken client can send: random bodies under every content type the port
speaks (and some it does not), valid requests with bytes flipped or cut, bodies over
`--max-message-bytes`, and hostile `connect-timeout-ms` / `grpc-timeout` headers. Every answer must be
an HTTP answer within the call's deadline, never a server error: no 5xx (but Connect's own 504 for
`deadline_exceeded`), no Connect `internal` or `unknown`, no gRPC-Web status 2 or 13; a body that reached a method and does not decode is our
`REQUEST_UNDECODABLE`. Afterwards the server is still serving, and every line it wrote is JSON without
an error.

Bounded for the suite (`THREADLINE_FUZZ_EXAMPLES`, 100 by default) and deterministic, as tests/test_fuzz.py.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import struct
from collections.abc import Iterator

import pytest
from conftest import free_port
from google.rpc import error_details_pb2
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import harness_service_pb2, run_pb2, thread_service_pb2

EXAMPLES = int(os.environ.get("THREADLINE_FUZZ_EXAMPLES", 100))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)
MAX_MESSAGE_BYTES = 64 * 1024
DEADLINE_S = 20.0

PATHS = (
    "/threadline.v1.HarnessService/Run",
    "/threadline.v1.HarnessService/StreamRun",
    "/threadline.v1.HarnessService/GetServerInfo",
    "/threadline.v1.HarnessService/ValidateState",
    "/threadline.v1.ThreadService/CreateThread",
    "/threadline.v1.ThreadService/RunThread",
    "/threadline.v1.ThreadService/StreamThreadRun",
    "/threadline.v1.ThreadService/ListThreads",
)
CONTENT_TYPES = (
    "application/json",
    "application/proto",
    "application/connect+json",
    "application/connect+proto",
    "application/grpc-web",
    "application/grpc-web+proto",
    "application/grpc-web+json",
    "application/grpc",
    "text/plain",
    "application/json; charset=utf-16",
    "",
)
SEEDS = {
    "/threadline.v1.HarnessService/Run": harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello")),
    "/threadline.v1.HarnessService/StreamRun": harness_service_pb2.StreamRunRequest(
        spec=run_pb2.RunSpec(text="hello")
    ),
    "/threadline.v1.ThreadService/ListThreads": thread_service_pb2.ListThreadsRequest(page_size=3),
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[LoggedServe, int]]:
    port = free_port()
    with logged_serve(
        "--store", "memory", "--http-port", str(port), "--max-message-bytes", str(MAX_MESSAGE_BYTES)
    ) as running:
        yield running, port
        assert running.stop() == 0
        for record in running.records():
            assert record["level"] != "error", record


def _envelope(body: bytes, flags: int = 0) -> bytes:
    return struct.pack(">BI", flags, len(body)) + body


def _post(
    port: int, path: str, content_type: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE_S)
    try:
        sent = {"Content-Type": content_type, **headers} if content_type else dict(headers)
        connection.request("POST", path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _check(status: int, headers: dict[str, str], body: bytes, *, reached: bool = False) -> None:
    """No server error on any protocol; `reached`: the body reached a method's decoding (a Connect unary
    call's), so an `invalid_argument` carries our ErrorInfo."""
    if headers.get("content-type", "").startswith("application/json") and status >= 400:
        error = json.loads(body)
        # Connect maps deadline_exceeded to 504 and unavailable to 503: answers, not server errors.
        assert error["code"] not in ("internal", "unknown"), error
        assert status < 500 or error["code"] in ("deadline_exceeded", "unavailable"), (status, error)
        if reached and error["code"] == "invalid_argument":
            value = error["details"][0]["value"]
            info = error_details_pb2.ErrorInfo.FromString(base64.b64decode(value + "=" * (-len(value) % 4)))
            assert info.domain == "threadline" and info.reason, info  # REQUEST_UNDECODABLE, or a decoded
            # body's own refusal (an empty body is a valid empty message)
    else:
        assert status < 500, (status, body[:300])
    grpc_status = headers.get("grpc-status") or _trailer_status(body)
    assert grpc_status not in ("2", "13"), (grpc_status, headers, body[:300])


def _trailer_status(body: bytes) -> str | None:
    """The `grpc-status` of a gRPC-Web trailer frame (flag 0x80) in `body`, if any."""
    at = 0
    while at + 5 <= len(body):
        flags, size = struct.unpack(">BI", body[at : at + 5])
        frame = body[at + 5 : at + 5 + size]
        if flags & 0x80:
            for line in frame.decode("latin-1").split("\r\n"):
                key, _, value = line.partition(":")
                if key.strip().lower() == "grpc-status":
                    return value.strip()
        at += 5 + size
    return None


@pytest.mark.parametrize("path", PATHS)
def test_random_bodies_under_every_content_type(served: tuple[LoggedServe, int], path: str) -> None:
    _running, port = served

    @FUZZ
    @given(body=st.binary(max_size=300), content_type=st.sampled_from(CONTENT_TYPES), enveloped=st.booleans())
    def check(body: bytes, content_type: str, enveloped: bool) -> None:
        sent = _envelope(body) if enveloped else body
        unary = "/Stream" not in path and content_type in ("application/json", "application/proto")
        _check(*_post(port, path, content_type, sent, {}), reached=unary and not enveloped)

    check()


@pytest.mark.parametrize("path", sorted(SEEDS))
def test_real_requests_with_bytes_flipped_or_cut(served: tuple[LoggedServe, int], path: str) -> None:
    _running, port = served
    seed = SEEDS[path].SerializeToString()

    @FUZZ
    @given(
        data=st.data(),
        content_type=st.sampled_from(
            ("application/proto", "application/connect+proto", "application/grpc-web+proto")
        ),
    )
    def check(data: st.DataObject, content_type: str) -> None:
        body = bytearray(seed)
        for _ in range(data.draw(st.integers(1, 3))):
            at = data.draw(st.integers(0, len(body) - 1))
            body[at] ^= 1 << data.draw(st.integers(0, 7))
        cut = data.draw(st.integers(0, len(body)))
        sent = bytes(body[:cut])
        if content_type != "application/proto":
            sent = _envelope(sent)
        _check(*_post(port, path, content_type, sent, {}), reached=content_type == "application/proto")

    check()


def test_hostile_timeout_headers(served: tuple[LoggedServe, int]) -> None:
    _running, port = served
    seed = SEEDS["/threadline.v1.HarnessService/Run"]

    @FUZZ
    @given(
        value=st.one_of(st.text(max_size=20), st.integers(-(10**12), 10**12).map(str)),
        header=st.sampled_from(("connect-timeout-ms", "grpc-timeout")),
    )
    def check(value: str, header: str) -> None:
        if any(ord(c) < 32 or ord(c) > 126 for c in value):
            value = value.encode("utf-8", "replace").decode("latin-1", "replace")
            value = "".join(c for c in value if 32 <= ord(c) <= 126)
        grpc_web = header == "grpc-timeout"
        body = _envelope(seed.SerializeToString()) if grpc_web else seed.SerializeToString()
        content_type = "application/grpc-web+proto" if grpc_web else "application/proto"
        _check(*_post(port, "/threadline.v1.HarnessService/Run", content_type, body, {header: value}))

    check()


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/proto", "application/grpc-web+proto"]
)
def test_a_body_over_the_message_limit_is_refused(served: tuple[LoggedServe, int], content_type: str) -> None:
    _running, port = served
    spec = run_pb2.RunSpec(text="x" * (MAX_MESSAGE_BYTES + 1))
    body = harness_service_pb2.RunRequest(spec=spec).SerializeToString()
    if content_type == "application/json":
        body = json.dumps({"spec": {"text": "x" * (MAX_MESSAGE_BYTES + 1)}}).encode()
    elif content_type.startswith("application/grpc-web"):
        body = _envelope(body)
    status, headers, answer = _post(port, "/threadline.v1.HarnessService/Run", content_type, body, {})
    _check(status, headers, answer)
    if content_type.startswith("application/grpc-web"):
        assert (headers.get("grpc-status") or _trailer_status(answer)) == "8", (headers, answer[:200])
    else:
        assert json.loads(answer)["code"] == "resource_exhausted", answer[:300]


def test_the_port_still_serves_after_the_fuzz(served: tuple[LoggedServe, int]) -> None:
    _running, port = served
    status, _headers, body = _post(
        port, "/threadline.v1.HarnessService/Run", "application/json", b'{"spec":{"text":"hello"}}', {}
    )
    assert status == 200 and json.loads(body)["result"]["status"] == "RUN_STATUS_COMPLETED"
