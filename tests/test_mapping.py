"""The protobuf mappings: lossless round trips by property, every rejection path, the status table."""

from __future__ import annotations

import hashlib
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import (
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.toolsets import FunctionToolset
from strategies import deferred_requests, deferred_results, deferred_resumes, harness_states
from threadline.v1 import deferred_pb2, events_pb2, run_pb2, state_pb2

from harness import (
    DeferredToolResume,
    ErrorCode,
    ExecutableAgent,
    HarnessError,
    HarnessEvent,
    HarnessRunResultEvent,
    HarnessState,
    InputError,
    RunBindings,
    RunError,
    StateError,
)
from harness.testing import scripted_model
from server.errors import ServerError, ServerReason, field_of
from server.mapping.deferred import (
    requests_from_pb,
    requests_to_pb,
    results_from_pb,
    results_to_pb,
    resume_from_pb,
    resume_to_pb,
)
from server.mapping.errors import STATUS_BY_REASON, status_code_for, to_status
from server.mapping.events import fill_checkpoint, fill_event, fill_result_event
from server.mapping.run import fill_result, run_call_from_pb
from server.mapping.state import (
    HISTORY_FORMAT,
    state_from_pb,
    state_json_to_pb,
    state_to_json,
    state_to_pb,
)

pytestmark = pytest.mark.anyio

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def sample_state() -> HarnessState:
    return HarnessState.model_validate(
        {
            "schema_version": "1",
            "thread_id": "thr_productthread1",
            "agent_context_state": {"entries": {"acme.counter": {"version": "1", "data": {"value": 1}}}},
            "host_note": {"kept": True},
            "message_history": [
                {
                    "kind": "request",
                    "parts": [
                        {"part_kind": "user-prompt", "content": "hi", "timestamp": "2026-01-01T00:00:00Z"}
                    ],
                },
                {
                    "kind": "response",
                    "parts": [{"part_kind": "text", "content": "hello"}],
                    "timestamp": "2026-01-01T00:00:00Z",
                },
            ],
            "environment_states": {
                "workspace": {"provider_key": "docker", "state_version": "1", "state": {"id": "c1"}}
            },
        }
    )


def envelope(**history: Any) -> state_pb2.HarnessState:
    msg = state_to_pb(sample_state())
    for name, value in history.items():
        setattr(msg.message_history, name, value)
    return msg


def rejects(msg: state_pb2.HarnessState) -> HarnessError | ServerError:
    with pytest.raises((HarnessError, ServerError)) as info:
        state_from_pb(msg)
    error = info.value
    assert isinstance(error, HarnessError | ServerError)
    return error


def reason(error: HarnessError | ServerError) -> str:
    return error.reason if isinstance(error, ServerError) else error.code.value.upper()


# --- state: lossless --------------------------------------------------------------------------------


@PROPERTY
@given(harness_states())
def test_state_roundtrip(state: HarnessState) -> None:
    msg = state_to_pb(state)
    back = state_from_pb(msg)
    assert back == state
    assert back.model_dump_json() == state.model_dump_json()
    wire = msg.SerializeToString(deterministic=True)
    assert state_to_pb(back).SerializeToString(deterministic=True) == wire
    parsed = state_pb2.HarnessState.FromString(wire)
    assert state_from_pb(parsed) == state


@PROPERTY
@given(harness_states())
def test_state_json_to_proto_to_json_is_byte_identical(state: HarnessState) -> None:
    text = state.model_dump_json()
    assert state_to_json(state_from_pb(state_json_to_pb(text))) == text


def test_envelope_fills_every_history_field() -> None:
    state = sample_state()
    history = state_to_pb(state).message_history
    assert history.format == HISTORY_FORMAT
    assert history.format_version == "1"
    assert history.data.encode() == state.message_history_json()
    assert history.message_count == 2
    assert history.sha256 == hashlib.sha256(history.data.encode()).digest()
    assert state_to_pb(HarnessState.new(thread_id="thr_a1")).extra_json == ""
    assert state_to_pb(state).extra_json == '{"host_note":{"kept":true}}'


def test_history_digest_is_optional() -> None:
    assert state_from_pb(envelope(sha256=b"")) == sample_state()


def test_reformatted_history_is_accepted() -> None:
    msg = envelope(sha256=b"")
    msg.message_history.data = " " + msg.message_history.data.replace('","', '", "') + "\n"
    assert state_from_pb(msg) == sample_state()


# --- state: rejections ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["", "0", "2", "1.0", " 1"])
def test_unsupported_schema_version_wins_over_everything(version: str) -> None:
    msg = envelope(format="", format_version="x", data="garbage", message_count=-4, sha256=b"x")
    msg.schema_version = version
    msg.thread_id = "NOT A THREAD"
    msg.extra_json = "{"
    error = rejects(msg)
    assert isinstance(error, StateError) and error.code is ErrorCode.SCHEMA_VERSION_UNSUPPORTED
    assert error.details == {"received": version, "supported": ["1"]}
    assert field_of(error) == "spec.previous_state.schema_version"


@given(st.text().filter(lambda v: v != "1"))
def test_any_other_schema_version_is_unsupported(version: str) -> None:
    msg = envelope()
    msg.schema_version = version
    assert reason(rejects(msg)) == "SCHEMA_VERSION_UNSUPPORTED"


@pytest.mark.parametrize(
    ("fmt", "version", "field"),
    [
        ("", "1", "format"),
        ("application/json", "1", "format"),
        (HISTORY_FORMAT, "", "format_version"),
        (HISTORY_FORMAT, "2", "format_version"),
    ],
)
def test_unsupported_history_format(fmt: str, version: str, field: str) -> None:
    error = rejects(envelope(format=fmt, format_version=version, data="not json"))
    assert isinstance(error, StateError) and error.code is ErrorCode.HISTORY_FORMAT_UNSUPPORTED
    assert error.details["supported"] == ([HISTORY_FORMAT] if field == "format" else ["1"])
    assert error.details["received"] == (fmt if field == "format" else version)
    assert field_of(error) == f"spec.previous_state.message_history.{field}"


def test_unset_history_is_an_unsupported_format() -> None:
    msg = envelope()
    msg.ClearField("message_history")
    assert reason(rejects(msg)) == "HISTORY_FORMAT_UNSUPPORTED"


def test_digest_mismatch() -> None:
    error = rejects(envelope(sha256=hashlib.sha256(b"other").digest()))
    assert isinstance(error, ServerError) and error.reason == ServerReason.HISTORY_DIGEST_MISMATCH
    assert error.field == "spec.previous_state.message_history.sha256"
    assert status_code_for(error.reason) == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("count", [1, 3, -1])
def test_count_mismatch(count: int) -> None:
    error = rejects(envelope(message_count=count))
    assert isinstance(error, ServerError) and error.reason == ServerReason.HISTORY_DIGEST_MISMATCH
    assert error.field == "spec.previous_state.message_history.message_count"


def test_message_count_is_optional() -> None:
    """0 means "not given", like an empty sha256: a host that builds a history need not count it."""
    state = sample_state()
    assert state.message_count() > 0
    assert state_from_pb(envelope(message_count=0)) == state
    assert state_from_pb(envelope(message_count=0, sha256=b"")) == state


@pytest.mark.parametrize(
    "data", ["", "garbage", "{}", "[1, 2]", '[{"kind": "nope"}]', "[", '[],"x":1', "[] []", '"text"']
)
@pytest.mark.parametrize("with_digest", [True, False])
def test_garbage_history_is_state_invalid(data: str, with_digest: bool) -> None:
    digest = hashlib.sha256(data.encode()).digest() if with_digest else b""
    error = rejects(envelope(data=data, sha256=digest, message_count=0))
    assert isinstance(error, StateError) and error.code is ErrorCode.STATE_INVALID
    assert field_of(error) == "spec.previous_state.message_history.data"


def test_history_cannot_smuggle_top_level_keys() -> None:
    msg = envelope(sha256=b"", message_count=0)
    msg.message_history.data = '[],"thread_id":"thr_other1","sneaky":1'
    assert reason(rejects(msg)) == "STATE_INVALID"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda m: setattr(m, "thread_id", "Bad Thread"), "thread_id"),
        (lambda m: setattr(m, "thread_id", ""), "thread_id"),
        (lambda m: setattr(m.capability_states[0], "data_json", "{nope"), "capability_states[0].data_json"),
        (
            lambda m: setattr(m.capability_states[0], "data_json", '{"a":1},"x":{"version":"1","data":2}'),
            "capability_states[0].data_json",
        ),
        (lambda m: setattr(m.capability_states[0], "data_json", ""), "capability_states[0].data_json"),
        (lambda m: setattr(m.capability_states[0], "version", ""), "capability_states[0].version"),
        (
            lambda m: setattr(m.capability_states[0], "capability_id", "  "),
            "capability_states[0].capability_id",
        ),
        (lambda m: m.capability_states.append(m.capability_states[0]), "capability_states[1].capability_id"),
        (
            lambda m: setattr(m.environment_states[0], "provider_key", "Docker"),
            "environment_states[0].provider_key",
        ),
        (lambda m: setattr(m.environment_states[0], "state_json", "[1,"), "environment_states[0].state_json"),
        (lambda m: m.environment_states.append(m.environment_states[0]), "environment_states[1].mount_name"),
        (lambda m: setattr(m, "extra_json", "[1]"), "extra_json"),
        (lambda m: setattr(m, "extra_json", '{"thread_id":"thr_x1"}'), "extra_json"),
        (lambda m: setattr(m, "extra_json", '{"a":1,"a":2}'), "extra_json"),
        (lambda m: setattr(m, "extra_json", '{"a":1}, "b": 2'), "extra_json"),
        (lambda m: m.refs.add(key="k", digest="XYZ", size=1), "refs[0].digest"),
        (lambda m: m.refs.add(key="", digest="ab" * 32, size=1), "refs[0].key"),
        (lambda m: m.refs.add(key="k", digest="ab" * 32, size=-1), "refs[0].size"),
    ],
)
def test_invalid_fields_are_state_invalid(mutate: Any, field: str) -> None:
    msg = envelope()
    mutate(msg)
    error = rejects(msg)
    assert isinstance(error, StateError) and error.code is ErrorCode.STATE_INVALID, error
    assert field_of(error) == f"spec.previous_state.{field}"


def test_state_field_prefix_is_the_callers() -> None:
    msg = envelope()
    msg.thread_id = "X"
    with pytest.raises(StateError) as info:
        state_from_pb(msg, field="state")
    assert field_of(info.value) == "state.thread_id"


# --- deferred ---------------------------------------------------------------------------------------


@PROPERTY
@given(deferred_requests())
def test_requests_roundtrip(requests: Any) -> None:
    msg = requests_to_pb(requests)
    assert requests_from_pb(msg) == requests
    assert requests_to_pb(requests_from_pb(msg)).SerializeToString(
        deterministic=True
    ) == msg.SerializeToString(deterministic=True)


@PROPERTY
@given(deferred_results())
def test_results_roundtrip(results: DeferredToolResults) -> None:
    assert results_from_pb(results_to_pb(results)) == results


@PROPERTY
@given(deferred_resumes)
def test_resume_roundtrip(resume: DeferredToolResume) -> None:
    assert resume_from_pb(resume_to_pb(resume)) == resume


def test_bool_approvals_take_the_wire_spelling() -> None:
    msg = results_to_pb(DeferredToolResults(approvals={"a": True, "b": False, "c": ToolDenied("no")}))
    assert msg.approvals[0].WhichOneof("decision") == "approved"
    assert not msg.approvals[0].approved.HasField("override_args_json")
    assert msg.approvals[1].denied.message == "The tool call was denied."
    back = results_from_pb(msg)
    assert back.approvals == {"a": ToolApproved(), "b": ToolDenied(), "c": ToolDenied("no")}
    empty = results_from_pb(
        deferred_pb2.DeferredToolResults(
            approvals=[deferred_pb2.ApprovalResult(tool_call_id="x", denied=deferred_pb2.ToolDenied())]
        )
    )
    assert empty.approvals["x"] == ToolDenied()


def test_requests_keep_kinds_and_metadata() -> None:
    msg = deferred_pb2.DeferredToolRequests(
        calls=[
            deferred_pb2.DeferredToolCall(
                tool_call_id="c1",
                tool_name="ask",
                args_json='{"q": "why?"}',
                target_identity="tool/native/ask",
                kind=deferred_pb2.DEFERRED_KIND_QUESTION,
                metadata_json='{"threadline.deferred_function_id":"tool/native/ask"}',
            )
        ]
    )
    requests = requests_from_pb(msg)
    assert requests.kind("c1") == "question"
    assert requests.calls[0].model_call.args == {"q": "why?"}
    assert requests.metadata == {"c1": {"threadline.deferred_function_id": "tool/native/ask"}}


@pytest.mark.parametrize(
    ("build", "code", "field"),
    [
        (
            lambda: requests_from_pb(
                deferred_pb2.DeferredToolRequests(
                    calls=[deferred_pb2.DeferredToolCall(tool_call_id="c", args_json="{", kind=2)]
                )
            ),
            ErrorCode.DEFERRED_REQUEST_INVALID,
            "spec.deferred_resume.requests.calls[0].args_json",
        ),
        (
            lambda: requests_from_pb(
                deferred_pb2.DeferredToolRequests(calls=[deferred_pb2.DeferredToolCall(tool_call_id="c")])
            ),
            ErrorCode.DEFERRED_REQUEST_INVALID,
            "spec.deferred_resume.requests.calls[0].kind",
        ),
        (
            lambda: requests_from_pb(
                deferred_pb2.DeferredToolRequests(
                    approvals=[deferred_pb2.DeferredToolCall(tool_call_id="c", kind=2)]
                )
            ),
            ErrorCode.DEFERRED_REQUEST_INVALID,
            "spec.deferred_resume.requests.approvals[0].kind",
        ),
        (
            lambda: requests_from_pb(
                deferred_pb2.DeferredToolRequests(
                    approvals=[deferred_pb2.DeferredToolCall(tool_call_id="c", kind=1, metadata_json="[]")]
                )
            ),
            ErrorCode.DEFERRED_METADATA_INVALID,
            "spec.deferred_resume.requests.approvals[0].metadata_json",
        ),
        (
            lambda: results_from_pb(
                deferred_pb2.DeferredToolResults(
                    calls=[deferred_pb2.CallResult(tool_call_id="c", value_json="nope")]
                )
            ),
            ErrorCode.DEFERRED_RESULTS_INVALID,
            "spec.deferred_resume.results.calls[0].value_json",
        ),
        (
            lambda: results_from_pb(
                deferred_pb2.DeferredToolResults(calls=[deferred_pb2.CallResult(tool_call_id="c")])
            ),
            ErrorCode.DEFERRED_RESULTS_INVALID,
            "spec.deferred_resume.results.calls[0]",
        ),
        (
            lambda: results_from_pb(
                deferred_pb2.DeferredToolResults(
                    calls=[
                        deferred_pb2.CallResult(tool_call_id="c", value_json="1"),
                        deferred_pb2.CallResult(tool_call_id="c", value_json="2"),
                    ]
                )
            ),
            ErrorCode.DEFERRED_RESULTS_INVALID,
            "spec.deferred_resume.results.calls[1].tool_call_id",
        ),
        (
            lambda: results_from_pb(
                deferred_pb2.DeferredToolResults(
                    calls=[
                        deferred_pb2.CallResult(
                            tool_call_id="c", tool_return=deferred_pb2.ToolReturnResult(return_value_json="")
                        )
                    ]
                )
            ),
            ErrorCode.DEFERRED_RESULTS_INVALID,
            "spec.deferred_resume.results.calls[0].tool_return.return_value_json",
        ),
        (
            lambda: results_from_pb(
                deferred_pb2.DeferredToolResults(
                    calls=[deferred_pb2.CallResult(tool_call_id="c", value_json="1", metadata_json="1")]
                )
            ),
            ErrorCode.DEFERRED_METADATA_INVALID,
            "spec.deferred_resume.results.calls[0].metadata_json",
        ),
        (
            lambda: results_from_pb(
                deferred_pb2.DeferredToolResults(approvals=[deferred_pb2.ApprovalResult(tool_call_id="a")])
            ),
            ErrorCode.DEFERRED_APPROVAL_INVALID,
            "spec.deferred_resume.results.approvals[0]",
        ),
        (
            lambda: results_from_pb(
                deferred_pb2.DeferredToolResults(
                    approvals=[
                        deferred_pb2.ApprovalResult(
                            tool_call_id="a", approved=deferred_pb2.ToolApproved(override_args_json="[1]")
                        )
                    ]
                )
            ),
            ErrorCode.DEFERRED_APPROVAL_INVALID,
            "spec.deferred_resume.results.approvals[0].approved.override_args_json",
        ),
    ],
)
def test_deferred_rejections(build: Any, code: ErrorCode, field: str) -> None:
    with pytest.raises(RunError) as info:
        build()
    assert info.value.code is code
    assert field_of(info.value) == field


# --- errors -----------------------------------------------------------------------------------------

DESIGN_TABLE = {
    grpc.StatusCode.INVALID_ARGUMENT: "INPUT_EMPTY INPUT_INVALID TOOL_RECOVERY_INVALID STATE_INVALID "
    "DEFERRED_RESUME_INVALID DEFERRED_REQUEST_INVALID DEFERRED_REQUEST_DUPLICATE "
    "DEFERRED_REQUEST_CATEGORY_OVERLAP DEFERRED_REQUESTS_EMPTY DEFERRED_METADATA_INVALID "
    "DEFERRED_RESULTS_INCOMPLETE DEFERRED_APPROVAL_INVALID DEFERRED_RESULTS_INVALID FORK_THREAD_ID_CONFLICT "
    "CLIENT_TOOL_INVALID AGENT_UNKNOWN HISTORY_DIGEST_MISMATCH REQUEST_UNDECODABLE REQUEST_ID_REUSED "
    "ENVIRONMENT_STATE_INVALID CAPABILITY_STATE_INVALID CHILD_LINEAGE_INVALID",
    grpc.StatusCode.NOT_FOUND: "THREAD_NOT_FOUND CHECKPOINT_NOT_FOUND RUN_NOT_FOUND",
    grpc.StatusCode.ALREADY_EXISTS: "THREAD_EXISTS",
    grpc.StatusCode.ABORTED: "THREAD_BUSY REVISION_CONFLICT LEASE_LOST RUN_ATTEMPT_LOST",
    grpc.StatusCode.FAILED_PRECONDITION: "SCHEMA_VERSION_UNSUPPORTED HISTORY_FORMAT_UNSUPPORTED STATE_STORE_MISSING "
    "DEFERRED_STATE_REQUIRED DEFERRED_REQUEST_MISSING DEFERRED_REQUEST_COMPLETED DEFERRED_REQUEST_MISMATCH "
    "DEFERRED_STATE_INVALID DEFERRED_SURFACE_MISMATCH THREAD_NOT_SUSPENDED REQUEST_INTERRUPTED "
    "ENVIRONMENT_STATE_VERSION_UNSUPPORTED CAPABILITY_STATE_VERSION_UNSUPPORTED CHILD_RESULT_INVALID "
    "CHILD_EDGE_UNKNOWN RUN_EVENTS_EXPIRED",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "DEFERRED_REQUESTS_TOO_LARGE RUN_LIMIT_REACHED RESPONSE_TOO_LARGE "
    "LISTENER_TOO_SLOW FOLLOWER_LIMIT_REACHED THREAD_QUEUE_FULL",
    grpc.StatusCode.UNAVAILABLE: "SERVER_SHUTTING_DOWN STORE_UNAVAILABLE",
    grpc.StatusCode.UNAUTHENTICATED: "TOKEN_MISSING TOKEN_INVALID",
    grpc.StatusCode.INTERNAL: "INTERNAL_ERROR",
}
LISTED = {reason: code for code, reasons in DESIGN_TABLE.items() for reason in reasons.split()}


def test_every_error_code_has_its_design_status() -> None:
    for code in ErrorCode:
        wire = code.value.upper()
        assert wire in STATUS_BY_REASON, code
        assert status_code_for(wire) == LISTED.get(wire, grpc.StatusCode.INTERNAL), code


def test_server_reasons_and_unknown_reasons() -> None:
    for server_reason in ServerReason:
        assert status_code_for(server_reason) == LISTED[server_reason.value]
    assert set(STATUS_BY_REASON) == {c.value.upper() for c in ErrorCode} | {r.value for r in ServerReason}
    assert status_code_for("SOMETHING_NEW") == grpc.StatusCode.INTERNAL


def unpack(status: Any) -> tuple[error_details_pb2.ErrorInfo, error_details_pb2.BadRequest | None]:
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    if len(status.details) < 2:
        return info, None
    bad = error_details_pb2.BadRequest()
    assert status.details[1].Unpack(bad)
    return info, bad


def test_status_carries_error_info_and_bad_request() -> None:
    msg = envelope()
    msg.schema_version = "9"
    with pytest.raises(StateError) as caught:
        state_from_pb(msg)
    status = to_status(caught.value)
    assert status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    info, bad = unpack(status)
    assert info.reason == "SCHEMA_VERSION_UNSUPPORTED" and info.domain == "threadline"
    assert dict(info.metadata) == {"received": "9", "supported": "1"}
    assert bad is not None and bad.field_violations[0].field == "spec.previous_state.schema_version"
    wire = rpc_status.to_status(status)
    assert wire.code == grpc.StatusCode.FAILED_PRECONDITION


def test_status_metadata_encodes_non_strings_as_canonical_json() -> None:
    error = ServerError(
        ServerReason.RUN_LIMIT_REACHED,
        "Too many runs.",
        details={"limit": 4, "b": {"y": 1, "x": [True, None]}},
    )
    info, bad = unpack(to_status(error))
    assert dict(info.metadata) == {"limit": "4", "b": '{"x":[true,null],"y":1}'}
    assert bad is None
    _, bad = unpack(to_status(error, field="spec.agent"))
    assert bad is not None and bad.field_violations[0].field == "spec.agent"


# --- run --------------------------------------------------------------------------------------------


def test_run_call_from_pb() -> None:
    spec = run_pb2.RunSpec(
        agent="demo",
        parts=run_pb2.PromptParts(
            parts=[
                run_pb2.PromptPart(text="look"),
                run_pb2.PromptPart(binary=run_pb2.BinaryContent(media_type="image/png", data=b"\x89PNG")),
                run_pb2.PromptPart(
                    url=run_pb2.UrlContent(kind=run_pb2.URL_KIND_IMAGE, url="https://x.test/a.png")
                ),
                run_pb2.PromptPart(
                    url=run_pb2.UrlContent(
                        kind=run_pb2.URL_KIND_DOCUMENT, url="https://x.test/a", media_type="application/pdf"
                    )
                ),
            ]
        ),
        previous_state=state_to_pb(sample_state()),
        tool_recovery=run_pb2.TOOL_RECOVERY_NEVER,
        client_tools=[run_pb2.ClientTool(name="weather", parameters_json_schema='{"type":"object"}')],
        usage_limits=run_pb2.UsageLimits(request_limit=3, total_tokens_limit=0),
        checkpoints=True,
        request_id="req-1",
    )
    call = run_call_from_pb(spec)
    assert call.agent == "demo" and call.request_id == "req-1" and call.run.checkpoints
    assert call.run.input == [
        "look",
        BinaryContent(data=b"\x89PNG", media_type="image/png"),
        ImageUrl(url="https://x.test/a.png"),
        DocumentUrl(url="https://x.test/a", media_type="application/pdf"),
    ]
    assert call.run.previous_state == sample_state()
    assert call.run.tool_recovery == "never"
    assert call.client_tools[0].name == "weather"
    assert call.run.usage_limits is not None
    assert call.run.usage_limits.request_limit == 3 and call.run.usage_limits.total_tokens_limit == 0
    assert call.run.usage_limits.tool_calls_limit is None


def test_run_call_defaults() -> None:
    call = run_call_from_pb(run_pb2.RunSpec())
    assert call.run.input is None and call.run.previous_state is None and call.run.deferred_resume is None
    assert call.run.tool_recovery == "declared" and call.run.usage_limits is None and call.client_tools == []
    assert run_call_from_pb(run_pb2.RunSpec(text="")).run.input == ""
    assert run_call_from_pb(run_pb2.RunSpec(parts=run_pb2.PromptParts())).run.input == []


@pytest.mark.parametrize(
    ("spec", "code", "field"),
    [
        (
            run_pb2.RunSpec(usage_limits=run_pb2.UsageLimits(request_limit=-1)),
            ErrorCode.INPUT_INVALID,
            "spec.usage_limits.request_limit",
        ),
        (
            run_pb2.RunSpec(parts=run_pb2.PromptParts(parts=[run_pb2.PromptPart()])),
            ErrorCode.INPUT_INVALID,
            "spec.parts.parts[0]",
        ),
        (
            run_pb2.RunSpec(
                parts=run_pb2.PromptParts(parts=[run_pb2.PromptPart(url=run_pb2.UrlContent(url="x"))])
            ),
            ErrorCode.INPUT_INVALID,
            "spec.parts.parts[0].url.kind",
        ),
        (
            run_pb2.RunSpec(
                parts=run_pb2.PromptParts(parts=[run_pb2.PromptPart(binary=run_pb2.BinaryContent())])
            ),
            ErrorCode.INPUT_INVALID,
            "spec.parts.parts[0].binary.media_type",
        ),
        (run_pb2.RunSpec(tool_recovery=99), ErrorCode.TOOL_RECOVERY_INVALID, "spec.tool_recovery"),  # type: ignore[arg-type]
    ],
)
def test_run_call_rejections(spec: run_pb2.RunSpec, code: ErrorCode, field: str) -> None:
    with pytest.raises(InputError) as info:
        run_call_from_pb(spec)
    assert info.value.code is code
    assert field_of(info.value) == field


def approval_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                TextPart("Deleting."),
                ToolCallPart("delete_file", {"path": "a.txt"}, tool_call_id="call_1"),
            ]
        )
    return ModelResponse(parts=[TextPart("deleted")])


def file_tools() -> Capability[Any]:
    toolset: FunctionToolset[Any] = FunctionToolset(id="acme.files")

    @toolset.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    return Capability(toolsets=[toolset])


async def test_results_map_and_resume_through_the_wire() -> None:
    agent = ExecutableAgent(scripted_model(approval_script), capabilities=[file_tools()])
    first = await agent.run("delete a.txt", bindings=RunBindings.embedded())
    assert first.status == "suspended"
    msg = run_pb2.RunResult()
    fill_result(msg, first, request_id="req-1")
    assert msg.status == run_pb2.RUN_STATUS_SUSPENDED
    assert msg.suspend_reason == run_pb2.SUSPEND_REASON_DEFERRED
    assert msg.request_id == "req-1" and msg.thread_id == first.thread_id and msg.run_id == first.run_id
    assert msg.deferred.approvals[0].target_identity == "tool/acme.files/delete_file"
    assert msg.deferred.approvals[0].kind == deferred_pb2.DEFERRED_KIND_APPROVAL
    assert not msg.HasField("failure") and msg.output_json == ""
    wire = run_pb2.RunResult.FromString(msg.SerializeToString())
    spec = run_pb2.RunSpec(
        previous_state=wire.state,
        deferred_resume=deferred_pb2.DeferredToolResume(
            requests=wire.deferred,
            results=deferred_pb2.DeferredToolResults(
                approvals=[
                    deferred_pb2.ApprovalResult(tool_call_id="call_1", approved=deferred_pb2.ToolApproved())
                ]
            ),
        ),
    )
    call = run_call_from_pb(spec)
    second = await agent.run(
        call.run.input,
        bindings=RunBindings.embedded(),
        previous_state=call.run.previous_state,
        deferred_resume=call.run.deferred_resume,
        tool_recovery=call.run.tool_recovery,
    )
    done = run_pb2.RunResult()
    fill_result(done, second, request_id="")
    assert done.status == run_pb2.RUN_STATUS_COMPLETED
    assert done.output_json == '"deleted"'
    assert done.usage.requests == 1
    assert not done.HasField("deferred") and done.HasField("state")
    assert state_from_pb(done.state) == second.state


async def test_stream_events_map_to_typed_cases() -> None:
    agent = ExecutableAgent(scripted_model(approval_script), capabilities=[file_tools()])
    events: list[events_pb2.RunEvent] = []
    async with agent.stream("delete a.txt", bindings=RunBindings.embedded()) as stream:
        async for item in stream:
            sequence = len(events)
            event = events_pb2.RunEvent()
            events.append(event)
            if isinstance(item, HarnessRunResultEvent):
                fill_result_event(event, item, sequence=sequence, request_id="r")
            else:
                assert isinstance(item, HarnessEvent)
                fill_event(event, item, sequence=sequence)
                if item.sequence == 0:
                    state = HarnessState.new(thread_id=item.thread_id)
                    checkpoint = events_pb2.RunEvent()
                    fill_checkpoint(
                        checkpoint, state, thread_id=item.thread_id, run_id=item.run_id, sequence=sequence + 1
                    )
                    events.append(checkpoint)
    cases = [event.WhichOneof("event") for event in events]
    assert cases[0] == "run_started" and cases[1] == "checkpoint_candidate" and cases[-1] == "result"
    assert [event.sequence for event in events] == list(range(len(events)))
    assert {"lifecycle", "part_start", "part_delta", "part_end", "tool_call"} <= set(cases)
    assert None not in cases
    text = "".join(
        e.part_start.content if e.HasField("part_start") else e.part_delta.content_delta
        for e in events
        if (e.HasField("part_start") and e.part_start.kind == events_pb2.PART_KIND_TEXT)
        or (e.HasField("part_delta") and e.part_delta.kind == events_pb2.PART_KIND_TEXT)
    )
    assert text == "Deleting."
    tool_end = next(
        e.part_end
        for e in events
        if e.HasField("part_end") and e.part_end.kind == events_pb2.PART_KIND_TOOL_CALL
    )
    assert (tool_end.tool_name, tool_end.tool_call_id) == ("delete_file", "call_1")
    lifecycle = next(e.lifecycle for e in events if e.HasField("lifecycle"))
    assert lifecycle.kind == "lifecycle" and lifecycle.type == "model_request_started"
    assert lifecycle.payload_json.startswith('{"type":"model_request_started"')
    assert events[-1].result.status == run_pb2.RUN_STATUS_SUSPENDED
    assert all(e.thread_id == events[0].thread_id and e.occurred_at.seconds > 0 for e in events)
