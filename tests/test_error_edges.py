"""The edges of the error path: bodies that are not protobuf, and statuses that echo hostile values.

Both are answered over the wire by `threadline serve` (a subprocess, so its log lines can be read)
to a default grpcio client: an undecodable body gets INVALID_ARGUMENT `REQUEST_UNDECODABLE` and a log
line naming the method; a status that echoes a 4 000-character value or hundreds of validation
errors still fits the client's metadata limit, so the host sees the reason and not RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from conftest import error_info
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import harness_service_pb2, run_pb2, state_pb2

from harness.errors import ErrorCode, StateError
from server.errors import ServerError, ServerReason
from server.mapping.errors import CUT_MARK, ECHO_LIMIT, MESSAGE_LIMIT, METADATA_LIMIT, to_status

SERVICE = harness_service_pb2.DESCRIPTOR.services_by_name["HarnessService"]
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
TRAILER_BUDGET = 7 * 1024
"""What a status may cost in trailers: under grpc's 8 KiB soft limit with room for the other headers."""


@pytest.fixture(scope="module")
def served() -> Iterator[LoggedServe]:
    with logged_serve() as running:
        yield running


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


def trailer_bytes(error: grpc.RpcError) -> int:
    """What the status cost in trailers, as grpc counts metadata (key + value + 32 per entry)."""
    assert isinstance(error, grpc.Call)
    total = 0
    for key, value in error.trailing_metadata() or ():
        size = len(value) if isinstance(value, bytes) else len(str(value).encode())
        total += len(key) + (math.ceil(size / 3) * 4 if key.endswith("-bin") else size) + 32
    message = (error.details() or "").encode()
    return (
        total + len(b"grpc-message") + sum(1 if 0x20 <= b < 0x7F and b != 0x25 else 3 for b in message) + 32
    )


def checked_cut(text: str, limit: int) -> None:
    assert len(text.encode()) <= limit
    assert text.endswith(CUT_MARK)


def a_state(channel: grpc.Channel) -> state_pb2.HarnessState:
    run = channel.unary_unary(
        f"/{SERVICE.full_name}/Run",
        request_serializer=harness_service_pb2.RunRequest.SerializeToString,
        response_deserializer=harness_service_pb2.RunResponse.FromString,
    )
    return run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello")), timeout=20).result.state


def rejected(channel: grpc.Channel, method: str, request: Any) -> grpc.RpcError:
    streaming = method == "StreamRun"
    make = channel.unary_stream if streaming else channel.unary_unary
    call = make(f"/{SERVICE.full_name}/{method}", request_serializer=type(request).SerializeToString)
    with pytest.raises(grpc.RpcError) as caught:
        if streaming:
            list(call(request, timeout=20))
        else:
            call(request, timeout=20)
    return caught.value


@pytest.mark.parametrize("method", ["Run", "StreamRun", "ValidateState"])
def test_a_4000_character_schema_version_keeps_its_reason(served: LoggedServe, method: str) -> None:
    with grpc.insecure_channel(served.address) as channel:  # a default client: 16 KiB hard limit
        state = a_state(channel)
        state.schema_version = "9" * 4000
        request: Any
        if method == "ValidateState":
            request = harness_service_pb2.ValidateStateRequest(state=state)
        else:
            spec = run_pb2.RunSpec(text="again", previous_state=state)
            request = (
                harness_service_pb2.StreamRunRequest(spec=spec)
                if method == "StreamRun"
                else harness_service_pb2.RunRequest(spec=spec)
            )
        error = rejected(channel, method, request)
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error.details()
    info = error_info(error)
    assert info.reason == "SCHEMA_VERSION_UNSUPPORTED"
    assert info.metadata["supported"] == "1"
    checked_cut(info.metadata["received"], ECHO_LIMIT)
    assert info.metadata["received"].startswith("9" * 200)
    checked_cut(error.details() or "", MESSAGE_LIMIT)
    assert trailer_bytes(error) < TRAILER_BUDGET


def test_hundreds_of_validation_errors_are_cut_by_entries(served: LoggedServe) -> None:
    # The state JSON form reports every invalid capability entry at once (300 errors, ~33 KB).
    entries = {f"acme.cap{i}": {"version": "", "data": {}} for i in range(300)}
    state_json = {"schema_version": "1", "thread_id": "a_b", "message_history": []}
    state_json["agent_context_state"] = {"entries": entries}
    with grpc.insecure_channel(served.address) as channel:
        error = rejected(
            channel,
            "ValidateState",
            harness_service_pb2.ValidateStateRequest(state_json=json.dumps(state_json)),
        )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    info = error_info(error)
    assert info.reason == "STATE_INVALID"
    errors = json.loads(info.metadata["errors"])  # still valid JSON
    assert isinstance(errors, list) and 1 <= len(errors) < 300
    assert all(isinstance(entry, dict) and "loc" in entry for entry in errors)
    assert "errors_omitted" in info.metadata
    assert len(errors) + int(info.metadata["errors_omitted"]) == 300
    assert trailer_bytes(error) < TRAILER_BUDGET


# --- to_status on its own: whatever an error holds -------------------------------------------------


def wire_cost(status: status_pb2.Status) -> int:
    """Trailer bytes of a status as the server sends it (details base64, message percent-encoded)."""
    wire = rpc_status.to_status(status)
    total = 0
    for key, value in wire.trailing_metadata:
        total += len(key) + math.ceil(len(value) / 3) * 4 + 32
    message = wire.details.encode()
    return total + 44 + sum(1 if 0x20 <= b < 0x7F and b != 0x25 else 3 for b in message)


def unpack(
    status: status_pb2.Status,
) -> tuple[error_details_pb2.ErrorInfo, error_details_pb2.BadRequest | None]:
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    bad = None
    if len(status.details) > 1:
        bad = error_details_pb2.BadRequest()
        assert status.details[1].Unpack(bad)
    return info, bad


hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from('a😀€\x00"%\\'), min_size=200, max_size=3000),
    st.sampled_from(["\ud800", "a\udfffb" * 200, "\U0010ffff" * 1000]),
)
hostile_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | hostile_text,
    lambda inner: st.lists(inner, max_size=60) | st.dictionaries(hostile_text, inner, max_size=20),
    max_leaves=200,
)


@settings(
    max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)
@given(
    message=hostile_text,
    details=st.dictionaries(st.text(min_size=1, max_size=300), hostile_json, max_size=6),
    field=st.none() | hostile_text,
)
def test_any_error_becomes_a_bounded_status(message: str, details: dict[str, Any], field: str | None) -> None:
    error = ServerError(ServerReason.AGENT_UNKNOWN, message, details=details, field=field)
    status = to_status(error)
    assert wire_cost(status) < TRAILER_BUDGET
    assert len(status.message.encode()) <= MESSAGE_LIMIT
    info, bad = unpack(status)
    assert sum(len(k.encode()) + len(v.encode()) for k, v in info.metadata.items()) <= METADATA_LIMIT
    for key, value in info.metadata.items():
        if key in details and not isinstance(details[key], str) and key != "supported":
            json.loads(value)  # JSON-valued metadata stays JSON
    if field is not None:
        assert bad is not None and len(bad.field_violations[0].field.encode()) <= ECHO_LIMIT


def test_small_values_are_echoed_unchanged() -> None:
    error = StateError(
        "State schema_version '2' is not supported; supported: 1.",
        code=ErrorCode.SCHEMA_VERSION_UNSUPPORTED,
        details={"received": "2", "supported": ["1"], "errors": [{"loc": ["a", 0], "msg": "m"}]},
    )
    info, bad = unpack(to_status(error, field="spec.previous_state.schema_version"))
    assert dict(info.metadata) == {"received": "2", "supported": "1", "errors": '[{"loc":["a",0],"msg":"m"}]'}
    assert bad is not None and bad.field_violations[0].description == error.message


def test_deep_huge_and_non_finite_details_do_not_break_the_error_path() -> None:
    deep: Any = "bottom"
    for _ in range(5000):
        deep = [deep]
    error = ServerError(
        ServerReason.AGENT_UNKNOWN,
        "x" * 100_000,
        details={
            "deep": deep,
            "huge": 10**5000,
            "nan": math.nan,
            "wide": {f"k{i}": i for i in range(10_000)},
        },
    )
    status = to_status(error)
    assert wire_cost(status) < TRAILER_BUDGET
    info, _ = unpack(status)
    assert json.loads(info.metadata["deep"])[0][0][0] is not None  # cut at a depth, still JSON
    assert CUT_MARK in info.metadata["deep"]
    assert json.loads(info.metadata["huge"]) == CUT_MARK
    assert json.loads(info.metadata.get("wide", "{}")) is not None
    assert base64.b64encode(status.SerializeToString())  # serialises
