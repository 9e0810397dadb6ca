"""Rejections over the wire: versions, formats, digests and malformed envelopes.

Each gets its gRPC status and a `google.rpc.ErrorInfo` decoded from the `grpc-status-details-bin`
trailer; malformed input is always INVALID_ARGUMENT, never INTERNAL.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable

import grpc
import pytest
from conftest import RunningServer, error_info
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

pytestmark = pytest.mark.anyio

Stub = harness_service_pb2_grpc.HarnessServiceStub


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


async def a_state(stub: Stub) -> state_pb2.HarnessState:
    response = await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello")))
    return response.result.state


async def rejected(
    stub: Stub, state: state_pb2.HarnessState, *, streamed: bool = False
) -> grpc.aio.AioRpcError:
    spec = run_pb2.RunSpec(text="continue", previous_state=state)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if streamed:
            async for _ in stub.StreamRun(harness_service_pb2.StreamRunRequest(spec=spec)):
                pass
        else:
            await stub.Run(harness_service_pb2.RunRequest(spec=spec))
    return caught.value


def with_history_data(data: str, *, digest: bool = True) -> Callable[[state_pb2.HarnessState], None]:
    def change(state: state_pb2.HarnessState) -> None:
        state.message_history.data = data
        if digest:
            state.message_history.sha256 = hashlib.sha256(data.encode()).digest()
        else:
            state.message_history.ClearField("sha256")

    return change


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("version", ["2", "", "0", "1.0"])
async def test_unsupported_schema_version(stub: Stub, version: str, streamed: bool) -> None:
    state = await a_state(stub)
    state.schema_version = version
    error = await rejected(stub, state, streamed=streamed)
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_info(error)
    assert (info.domain, info.reason) == ("threadline", "SCHEMA_VERSION_UNSUPPORTED")
    assert info.metadata["supported"] == "1"
    assert info.metadata["received"] == version or version == ""


async def test_schema_version_is_checked_before_anything_else(stub: Stub) -> None:
    state = await a_state(stub)
    state.schema_version = "9"
    state.message_history.data = "garbage"
    state.thread_id = "?"
    assert error_info(await rejected(stub, state)).reason == "SCHEMA_VERSION_UNSUPPORTED"


@pytest.mark.parametrize(
    ("field", "value"),
    [("format", "openai.messages"), ("format", ""), ("format_version", "2"), ("format_version", "")],
)
async def test_unsupported_history_format(stub: Stub, field: str, value: str) -> None:
    state = await a_state(stub)
    setattr(state.message_history, field, value)
    error = await rejected(stub, state)
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(error).reason == "HISTORY_FORMAT_UNSUPPORTED"


async def test_digest_and_count_mismatch(stub: Stub) -> None:
    state = await a_state(stub)
    state.message_history.sha256 = b"\0" * 32
    error = await rejected(stub, state)
    assert (error.code(), error_info(error).reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "HISTORY_DIGEST_MISMATCH",
    )
    state = await a_state(stub)
    state.message_history.message_count += 1
    error = await rejected(stub, state)
    assert (error.code(), error_info(error).reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "HISTORY_DIGEST_MISMATCH",
    )


MALFORMED: dict[str, Callable[[state_pb2.HarnessState], None]] = {
    "garbage history bytes": with_history_data("\x00\x01 not json {{{"),
    "garbage history, no digest": with_history_data("]]]]", digest=False),
    "history not a list": with_history_data('{"kind": "request"}'),
    "history of wrong types": with_history_data('[{"kind": "request", "parts": 7}]'),
    "history of numbers": with_history_data("[1, 2, 3]"),
    "bad thread id": lambda s: setattr(s, "thread_id", "not a thread id!"),
    "empty thread id": lambda s: setattr(s, "thread_id", ""),
    "capability data not json": lambda s: s.capability_states.add(
        capability_id="x", version="1", data_json="{nope"
    ),
    "capability without id": lambda s: s.capability_states.add(capability_id="", version="1", data_json="{}"),
    "extra_json not an object": lambda s: setattr(s, "extra_json", "[1]"),
    "extra_json garbage": lambda s: setattr(s, "extra_json", "\x7f{"),
    "environment state not json": lambda s: s.environment_states.add(
        mount_name="m", provider_key="p", state_version="1", state_json="{"
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
async def test_malformed_envelopes_are_invalid_argument_never_internal(stub: Stub, name: str) -> None:
    state = await a_state(stub)
    MALFORMED[name](state)
    error = await rejected(stub, state)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, error.details())
    info = error_info(error)
    assert info is not None and info.domain == "threadline"
    validated = None
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        validated = await stub.ValidateState(harness_service_pb2.ValidateStateRequest(state=state))
    assert validated is None
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "state_json", ["", "not json", "[]", '{"schema_version": "1"}', '{"schema_version": 1}']
)
async def test_validate_state_json_rejections(stub: Stub, state_json: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ValidateState(harness_service_pb2.ValidateStateRequest(state_json=state_json))
    assert caught.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)
    assert error_info(caught.value).reason in ("STATE_INVALID", "SCHEMA_VERSION_UNSUPPORTED")


async def test_validate_state_without_a_source(stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ValidateState(harness_service_pb2.ValidateStateRequest())
    assert (caught.value.code(), error_info(caught.value).reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "STATE_INVALID",
    )


async def test_bad_requests(stub: Stub) -> None:
    cases = [
        (run_pb2.RunSpec(text=""), "INPUT_EMPTY"),
        (run_pb2.RunSpec(parts=run_pb2.PromptParts()), "INPUT_EMPTY"),
        (run_pb2.RunSpec(text="x", tool_recovery=99), "TOOL_RECOVERY_INVALID"),  # type: ignore[arg-type]
        (run_pb2.RunSpec(text="x", usage_limits=run_pb2.UsageLimits(request_limit=-1)), "INPUT_INVALID"),
    ]
    for spec, reason in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Run(harness_service_pb2.RunRequest(spec=spec))
        assert (caught.value.code(), error_info(caught.value).reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            reason,
        )


async def test_resume_without_a_state_is_failed_precondition(stub: Stub) -> None:
    first = (await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="delete z")))).result
    from threadline.v1 import deferred_pb2

    [approval] = first.deferred.approvals
    resume = deferred_pb2.DeferredToolResume(
        requests=first.deferred,
        results=deferred_pb2.DeferredToolResults(
            approvals=[
                deferred_pb2.ApprovalResult(
                    tool_call_id=approval.tool_call_id, approved=deferred_pb2.ToolApproved()
                )
            ]
        ),
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(deferred_resume=resume)))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # The contract names DEFERRED_STATE_REQUIRED; the core currently answers DEFERRED_REQUEST_MISSING
    # (a resume against an empty new thread). Both are FAILED_PRECONDITION.
    assert error_info(caught.value).reason in ("DEFERRED_STATE_REQUIRED", "DEFERRED_REQUEST_MISSING")


async def test_incomplete_resume_is_invalid(stub: Stub) -> None:
    first = (await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="delete z")))).result
    from threadline.v1 import deferred_pb2

    resume = deferred_pb2.DeferredToolResume(requests=first.deferred)  # no answers
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Run(
            harness_service_pb2.RunRequest(
                spec=run_pb2.RunSpec(previous_state=first.state, deferred_resume=resume)
            )
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason.startswith("DEFERRED_")


async def test_request_metadata_is_accepted_or_refused_by_size_alone(stub: Stub) -> None:
    """grpc's default accepts metadata above 8 KiB at random (a soft limit); the server's one limit is 16 KiB."""

    async def outcome(size: int) -> set[grpc.StatusCode]:
        metadata = (("baggage", "a=" + "b" * size),)
        codes = set()
        for _ in range(20):  # at the default soft limit, about half of these would be refused
            try:
                await stub.NewState(harness_service_pb2.NewStateRequest(), metadata=metadata)
                codes.add(grpc.StatusCode.OK)
            except grpc.aio.AioRpcError as error:
                codes.add(error.code())
        return codes

    assert await outcome(12 << 10) == {grpc.StatusCode.OK}
    assert await outcome(20 << 10) == {grpc.StatusCode.RESOURCE_EXHAUSTED}
