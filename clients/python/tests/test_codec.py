"""The SDK's own logic, offline: proto3 JSON, state persistence, resume helpers, errors, exports,
and how `RunStream` unpacks `StreamRun` responses."""

from __future__ import annotations

import datetime
import json
import pickle
import subprocess
import sys
from collections.abc import AsyncIterator

import anyio
import grpclib.const
import grpclib.exceptions
import pytest
import threadline_client as tl
from google.rpc import error_details_pb2
from threadline_client import v1
from threadline_client._client import Client, _parse_target
from threadline_client._errors import translate
from threadline_client._protojson import json_name


def full_state() -> tl.HarnessState:
    return tl.HarnessState(
        schema_version="1",
        thread_id="thread_0123",
        message_history=v1.MessageHistory(
            format="pydantic-ai.model-messages+json",
            format_version="1",
            data='[{"kind":"request","parts":[]}]',
            message_count=1,
            sha256=bytes(range(32)),
        ),
        capability_states=[
            v1.CapabilityState(capability_id="demo.counter", version="1", data_json='{"value":2}')
        ],
        environment_states=[
            v1.EnvironmentState(mount_name="m", provider_key="p", state_version="1", state_json="{}")
        ],
        refs=[v1.StoredRef(key="k", digest="sha256:00", size=2**40)],
        extra_json='{"later":"field"}',
    )


def test_public_names_are_exactly_all() -> None:
    public = {name for name in vars(tl) if not name.startswith("_")} | {"__version__"}
    modules = {name for name, value in vars(tl).items() if type(value) is type(sys)} - {"v1"}
    assert set(tl.__all__) == public - modules


_IMPORT_EVERY_MODULE = """
import json, pkgutil, sys
import threadline_client
for module in pkgutil.walk_packages(threadline_client.__path__, "threadline_client."):
    __import__(module.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_the_sdk_does_not_pull_in_pydantic_ai_or_the_server() -> None:
    # A fresh interpreter: in this one, other tests (or plugins) may have imported anything.
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EVERY_MODULE], capture_output=True, text=True, timeout=60, check=True
    )
    imported = set(json.loads(done.stdout))
    assert "threadline_client._client" in imported and "threadline_client.v1" in imported
    tops = {name.partition(".")[0] for name in imported}
    assert sorted(tops & {"pydantic_ai", "threadline", "harness", "server"}) == []


@pytest.mark.parametrize(
    ("proto", "expected"),
    [("thread_id", "threadId"), ("cache_write_1h_tokens", "cacheWrite1hTokens"), ("sha256", "sha256")],
)
def test_json_names_follow_protoc(proto: str, expected: str) -> None:
    assert json_name(proto) == expected


@pytest.mark.parametrize("form", ["binary", "json"])
def test_state_round_trips(form: tl.StateFormat) -> None:
    state = full_state()
    assert tl.load_state(tl.dump_state(state, format=form), format=form) == state


def test_state_json_uses_proto_names_and_proto3_values() -> None:
    data = json.loads(tl.dump_state(full_state(), format="json"))
    assert data["thread_id"] == "thread_0123"
    assert data["message_history"]["message_count"] == "1"  # int64 as a string
    assert data["message_history"]["sha256"] == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    assert data["refs"] == [{"key": "k", "digest": "sha256:00", "size": str(2**40)}]


def test_json_input_accepts_json_names_and_rejects_unknown_fields() -> None:
    state = tl.load_state('{"schemaVersion":"1","threadId":"thread_x","messageHistory":{"messageCount":3}}')
    assert state.thread_id == "thread_x" and state.message_history is not None
    assert state.message_history.message_count == 3
    with pytest.raises(ValueError, match="unknown field"):
        tl.load_state('{"schema_version":"1","surprise":true}')
    lenient = tl.message_from_json(
        tl.HarnessState, '{"thread_id":"t","surprise":1}', ignore_unknown_fields=True
    )
    assert lenient.thread_id == "t"


def test_json_rejects_two_cases_of_a_oneof_and_wrong_types() -> None:
    with pytest.raises(ValueError, match="oneof"):
        tl.message_from_json(v1.CallResult, '{"value_json":"1","failed":{"message":"x"}}')
    with pytest.raises(ValueError):
        tl.message_from_json(v1.RunUsage, '{"requests":"many"}')
    with pytest.raises(ValueError):
        tl.message_from_json(v1.RunSpec, '{"checkpoints":"yes"}')


def test_json_keeps_presence_of_oneof_cases_and_optional_fields() -> None:
    empty_value = v1.CallResult(tool_call_id="c", value_json="")
    assert tl.message_to_dict(empty_value) == {"tool_call_id": "c", "value_json": ""}
    limits = v1.UsageLimits(request_limit=0)
    assert tl.message_to_dict(limits) == {"request_limit": "0"}
    assert tl.message_from_dict(v1.UsageLimits, {"request_limit": "0"}) == limits
    approved = v1.ApprovalResult(tool_call_id="c", approved=v1.ToolApproved())
    assert tl.message_to_dict(approved) == {"tool_call_id": "c", "approved": {}}


def test_json_enums_timestamps_and_unknown_enum_numbers() -> None:
    event = tl.RunEvent(
        sequence=7,
        occurred_at=datetime.datetime(2026, 1, 1, 0, 0, 0, 7000, tzinfo=datetime.UTC),
        result=tl.RunResult(status=tl.RunStatus.SUSPENDED, suspend_reason=v1.SuspendReason.DEFERRED),
    )
    data = tl.message_to_dict(event)
    assert data["occurred_at"] == "2026-01-01T00:00:00.007Z"
    assert data["result"]["status"] == "RUN_STATUS_SUSPENDED"
    assert tl.message_from_dict(tl.RunEvent, data) == event
    offset = tl.message_from_dict(tl.RunEvent, {"occurred_at": "2026-01-01T02:00:00+02:00"})
    assert offset.occurred_at == datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    future = tl.message_from_dict(tl.RunResult, {"status": 42})
    assert tl.message_to_dict(future) == {"status": 42}


def test_binary_keeps_unknown_fields() -> None:
    newer = bytes(full_state()) + b"\xa2\x06\x03abc"  # field 100, length-delimited: from a newer server
    assert bytes(tl.load_state(newer)) == newer


def test_load_state_reports_garbage() -> None:
    with pytest.raises(ValueError):
        tl.load_state(b"\x0a\x05ab")  # thread_id... of 5 bytes, cut after 2
    with pytest.raises(ValueError):
        tl.load_state("not json")


def _requests() -> tl.DeferredToolRequests:
    return tl.DeferredToolRequests(
        calls=[
            tl.DeferredToolCall(
                tool_call_id="c1", tool_name="t", args_json='{"a":1}', kind=tl.DeferredKind.EXTERNAL
            )
        ],
        approvals=[tl.DeferredToolCall(tool_call_id="a1", tool_name="d", kind=tl.DeferredKind.APPROVAL)],
    )


def test_resume_helpers_build_the_answers() -> None:
    requests = _requests()
    call, approval = requests.calls[0], requests.approvals[0]
    assert tl.pending(requests) == [approval, call]
    assert tl.call_args(call) == {"a": 1} and tl.call_args(approval) == {}

    resume = tl.resume(requests, [tl.external_result(call, {"ok": True}), tl.deny(approval, "no")])
    assert resume.requests == requests and not resume.recovery
    assert resume.results is not None
    assert resume.results.calls == [v1.CallResult(tool_call_id="c1", value_json='{"ok":true}')]
    assert resume.results.approvals == [
        v1.ApprovalResult(tool_call_id="a1", denied=v1.ToolDenied(message="no"))
    ]

    approved = tl.approve(approval, override_args={"path": "b"}, metadata={"by": "me"}, answered_by="alice")
    assert approved.approved == v1.ToolApproved(override_args_json='{"path":"b"}')
    assert approved.metadata_json == '{"by":"me"}' and approved.answered_by == "alice"
    assert tl.external_failure(call, "boom").failed == v1.ToolFailedResult(message="boom")
    assert tl.external_retry(call, "again").retry == v1.ToolRetryResult(message="again")


def test_resume_helpers_refuse_the_wrong_category() -> None:
    requests = _requests()
    with pytest.raises(ValueError, match="APPROVAL"):
        tl.approve(requests.calls[0])
    with pytest.raises(ValueError, match="EXTERNAL"):
        tl.external_result(requests.approvals[0], 1)


def test_output_and_client_tool() -> None:
    assert tl.output(tl.RunResult(status=tl.RunStatus.COMPLETED, output_json='"hi"')) == "hi"
    with pytest.raises(ValueError):
        tl.output(tl.RunResult(status=tl.RunStatus.FAILED))
    tool = tl.client_tool("f", {"type": "object"}, description="d")
    assert tool == tl.ClientTool(name="f", description="d", parameters_json_schema='{"type":"object"}')


def test_grpc_errors_become_threadline_errors() -> None:
    info = error_details_pb2.ErrorInfo(
        reason="SCHEMA_VERSION_UNSUPPORTED", domain="threadline", metadata={"received": "9", "supported": "1"}
    )
    bad = error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field="state.schema_version", description="x")
        ]
    )
    raised = grpclib.exceptions.GRPCError(grpclib.const.Status.FAILED_PRECONDITION, "nope", [info, bad])

    error = translate(raised)

    assert isinstance(error, tl.ThreadlineError)
    assert error.status == tl.StatusCode.FAILED_PRECONDITION
    assert error.reason == "SCHEMA_VERSION_UNSUPPORTED" and error.domain == "threadline"
    assert dict(error.metadata) == {"received": "9", "supported": "1"}
    assert error.field_violations == (("state.schema_version", "x"),)
    assert str(error) == "FAILED_PRECONDITION SCHEMA_VERSION_UNSUPPORTED: nope"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status, copy.reason, dict(copy.metadata)) == (
        error.status,
        error.reason,
        dict(error.metadata),
    )


def test_transport_failures_become_threadline_errors() -> None:
    refused = translate(ConnectionRefusedError("refused"))
    assert refused is not None and refused.status == tl.StatusCode.UNAVAILABLE and refused.reason == ""
    expired = translate(TimeoutError())
    assert expired is not None and expired.status == tl.StatusCode.DEADLINE_EXCEEDED
    assert translate(KeyError("x")) is None


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("127.0.0.1:50051", ("127.0.0.1", 50051, False)),
        ("localhost", ("localhost", 50051, False)),
        ("[::1]:7000", ("::1", 7000, False)),
        ("http://example.test:80/", ("example.test", 80, False)),
        ("https://example.test", ("example.test", 50051, True)),
    ],
)
def test_targets(target: str, expected: tuple[str, int, bool]) -> None:
    assert _parse_target(target) == expected


def test_bad_targets() -> None:
    with pytest.raises(ValueError):
        _parse_target("host:port")
    with pytest.raises(ValueError):
        _parse_target(":50051")
    with pytest.raises(ValueError):
        _parse_target("ftp://host:1")


@pytest.mark.parametrize("value", [0, 1, 64, 256, 2**32 - 1])
def test_max_events_per_message_accepts_uint32_values(value: int) -> None:
    Client("127.0.0.1:1", max_events_per_message=value)


@pytest.mark.parametrize("value", [-1, 2**32, 1.5, "64", True, None])
def test_max_events_per_message_rejects_anything_else(value: object) -> None:
    with pytest.raises(ValueError, match="max_events_per_message"):
        Client("127.0.0.1:1", max_events_per_message=value)  # type: ignore[arg-type]  # on purpose


# --- RunStream over responses in either form -----------------------------------------------------


def _event(sequence: int, *, last: bool = False) -> tl.RunEvent:
    if last:
        return tl.RunEvent(sequence=sequence, result=tl.RunResult(status=tl.RunStatus.COMPLETED))
    return tl.RunEvent(sequence=sequence, part_delta=v1.PartDelta(content_delta=f"d{sequence}"))


async def _responses(*responses: v1.StreamRunResponse) -> AsyncIterator[v1.StreamRunResponse]:
    for response in responses:
        yield response


@pytest.mark.anyio
async def test_run_stream_yields_single_and_packed_events_one_at_a_time_in_order() -> None:
    stream = tl.RunStream(
        _responses(
            v1.StreamRunResponse(event=_event(0)),
            v1.StreamRunResponse(events=[_event(1), _event(2), _event(3)]),
            v1.StreamRunResponse(events=[_event(4)]),
            v1.StreamRunResponse(event=_event(5)),
            v1.StreamRunResponse(events=[_event(6), _event(7, last=True)]),
        )
    )
    seen: list[int] = []
    async for event in stream:
        seen.append(event.sequence)
        # The result is set when the host reads the result event, not when its response arrives.
        assert (stream.result is not None) == (event.sequence == 7)
    assert seen == list(range(8))
    assert stream.result == tl.RunResult(status=tl.RunStatus.COMPLETED)
    assert await stream.collect() is stream.result  # finished: nothing more to read


@pytest.mark.anyio
async def test_run_stream_rejects_a_response_without_events() -> None:
    stream = tl.RunStream(_responses(v1.StreamRunResponse(events=[_event(0)]), v1.StreamRunResponse()))
    assert (await anext(stream)).sequence == 0
    with pytest.raises(tl.ProtocolError) as caught:
        await anext(stream)
    assert caught.value.status == tl.StatusCode.INTERNAL and caught.value.reason == ""
    assert caught.value.message == "the server's response has no StreamRunResponse.event or .events"
    with pytest.raises(StopAsyncIteration):  # the stream is over (and its call closed)
        await anext(stream)


@pytest.mark.anyio
async def test_run_stream_aclose_drops_the_unread_rest_of_a_packed_response() -> None:
    stream = tl.RunStream(_responses(v1.StreamRunResponse(events=[_event(0), _event(1), _event(2)])))
    assert (await anext(stream)).sequence == 0
    await stream.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


@pytest.mark.anyio
async def test_run_stream_refuses_a_second_reader_while_one_waits() -> None:
    arrived = anyio.Event()

    async def responses() -> AsyncIterator[v1.StreamRunResponse]:
        await arrived.wait()
        yield v1.StreamRunResponse(events=[_event(0), _event(1, last=True)])

    stream = tl.RunStream(responses())
    first: list[tl.RunEvent] = []

    async def read_one() -> None:
        first.append(await anext(stream))

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_one)
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="already being read"):
            await anext(stream)
        arrived.set()
    # The guard is released once the first read returns; the buffered event is next.
    assert [e.sequence for e in first] == [0]
    assert [e.sequence async for e in stream] == [1]
    assert stream.result is not None
