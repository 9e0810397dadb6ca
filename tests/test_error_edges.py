"""The edges of the error path: request bodies that are not protobuf.

Answered over the wire by `threadline serve` (a subprocess, so its log lines can be read) to a
default grpcio client: an undecodable body gets INVALID_ARGUMENT `REQUEST_UNDECODABLE` and a log
line naming the method.
"""

from __future__ import annotations

import grpc
import pytest
from conftest import error_info
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from grpc_health.v1 import health_pb2
from logged_serve import logged_serve
from threadline.v1 import harness_service_pb2

SERVICE = harness_service_pb2.DESCRIPTOR.services_by_name["HarnessService"]
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name


def raw_call(channel: grpc.Channel, method: str, streaming: bool, body: bytes) -> grpc.RpcError:
    """Send `body` as it is to `method` and return the error it must end with."""
    if streaming:
        call = channel.unary_stream(method)
        with pytest.raises(grpc.RpcError) as caught:
            for _ in call(body, timeout=20):
                pass
    else:
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(method)(body, timeout=20)
    assert isinstance(caught.value, grpc.RpcError)
    return caught.value


UNDECODABLE = {
    "one varint tag without its value": b"\x08",
    "a truncated length-delimited field": b"\x0a\x05ab",
    "an invalid wire type": b"\x0f",
}
"""Bodies no message type can read."""
HEALTH_CHECK = health_pb2.HealthCheckRequest.DESCRIPTOR
METHODS = [(f"/{SERVICE.full_name}/{m.name}", m.server_streaming, m.input_type) for m in SERVICE.methods]
METHODS += [(f"/{HEALTH}/Check", False, HEALTH_CHECK), (f"/{HEALTH}/Watch", True, HEALTH_CHECK)]


def bodies(message: Descriptor) -> dict[str, bytes]:
    """`UNDECODABLE`, plus invalid UTF-8 in the message's first string field if it has one."""
    out = dict(UNDECODABLE)
    for item in message.fields:
        if item.type == FieldDescriptor.TYPE_STRING and item.number < 16:
            out["invalid UTF-8 in a string field"] = bytes([item.number << 3 | 2, 2]) + b"\xff\xfe"
            break
    return out


def test_undecodable_bodies_are_invalid_argument_with_a_reason_and_a_log_line() -> None:
    with logged_serve() as running:
        with grpc.insecure_channel(running.address) as channel:
            for method, streaming, message in METHODS:
                for name, body in bodies(message).items():
                    error = raw_call(channel, method, streaming, body)
                    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, name, error.details())
                    info = error_info(error)
                    assert info is not None, (method, name)
                    assert (info.domain, info.reason) == ("threadline", "REQUEST_UNDECODABLE")
                    assert dict(info.metadata) == {"method": method, "type": message.full_name}
                    assert "DecodeError" not in (error.details() or "")
            # The server is still serving after all of that, and decodes good bodies as before.
            ok = channel.unary_unary(f"/{SERVICE.full_name}/GetServerInfo")(b"", timeout=20)
            assert harness_service_pb2.GetServerInfoResponse.FromString(ok).schema_versions == ["1"]
        assert running.stop() == 0
    logged = [r for r in running.records() if r["event"] == "request_undecodable"]
    assert sorted((r["method"], r["bytes"]) for r in logged) == sorted(
        (method, len(body)) for method, _, message in METHODS for body in bodies(message).values()
    )
    assert all(r["level"] == "warning" for r in logged)


def test_the_token_is_checked_before_the_body_is() -> None:
    with logged_serve("--token", "sesame") as running, grpc.insecure_channel(running.address) as channel:
        method = f"/{SERVICE.full_name}/Run"
        error = raw_call(channel, method, False, b"\x08")
        assert (error.code(), error_info(error).reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING")
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(method)(b"\x08", timeout=20, metadata=[("authorization", "Bearer sesame")])
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).reason == "REQUEST_UNDECODABLE"
        stream = channel.unary_stream(f"/{SERVICE.full_name}/StreamRun")
        with pytest.raises(grpc.RpcError) as caught:
            list(stream(b"\x08", timeout=20, metadata=[("authorization", "Bearer sesame")]))
        assert error_info(caught.value).reason == "REQUEST_UNDECODABLE"
