"""Every HarnessService RPC over a real loopback connection to the demo server.

The demo agent's script (server/demo.py) picks its path from the prompt, so each test drives a
thread the way a host would: run, keep the returned state, answer deferred calls, run again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from itertools import pairwise

import grpc
import pytest
from conftest import RunningServer, error_info
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from threadline.v1 import (
    deferred_pb2,
    events_pb2,
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    state_pb2,
)

from harness import HarnessState, load_state
from server.mapping.state import state_to_pb

pytestmark = pytest.mark.anyio

Stub = harness_service_pb2_grpc.HarnessServiceStub


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


async def run(stub: Stub, **spec: object) -> run_pb2.RunResult:
    response = await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(**spec)))  # type: ignore[arg-type]
    return response.result


async def stream(stub: Stub, **spec: object) -> list[events_pb2.RunEvent]:
    request = harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(**spec))  # type: ignore[arg-type]
    return [response.event async for response in stub.StreamRun(request)]


def output(result: run_pb2.RunResult) -> str:
    assert result.status == run_pb2.RUN_STATUS_COMPLETED, result
    value = json.loads(result.output_json)
    assert isinstance(value, str)
    return value


async def test_get_server_info_lists_versions_agents_tools_and_limits(stub: Stub) -> None:
    info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
    assert list(info.schema_versions) == ["1"]
    assert [(f.format, list(f.versions)) for f in info.history_formats] == [
        ("pydantic-ai.model-messages+json", ["1"])
    ]
    assert info.default_agent == "default"
    assert [a.name for a in info.agents] == ["default", "demo-lead", "demo-reviewer"]
    demo = {
        "lookup": harness_service_pb2.TOOL_CATEGORY_PLAIN,
        "delete_file": harness_service_pb2.TOOL_CATEGORY_REQUIRES_APPROVAL,
        "fetch_status": harness_service_pb2.TOOL_CATEGORY_RECOVERY_RETRYABLE,
        "count": harness_service_pb2.TOOL_CATEGORY_PLAIN,
        "sleep": harness_service_pb2.TOOL_CATEGORY_PLAIN,
    }
    plain, external = harness_service_pb2.TOOL_CATEGORY_PLAIN, harness_service_pb2.TOOL_CATEGORY_EXTERNAL
    expected = {
        "default": {**demo, "delegate": plain, "resume_subagent": plain},  # an inline child runs at once
        "demo-lead": {**demo, "delegate": external, "resume_subagent": external},  # suspends the run
        "demo-reviewer": demo,
    }
    for agent in info.agents:
        assert {tool.name: tool.category for tool in agent.tools} == expected[agent.name], agent.name
        assert [t.name for t in agent.tools if t.recovery_retryable] == ["fetch_status"]
    default, lead, reviewer = info.agents
    assert [(e.name, e.mode, e.agent, e.child_definition_id) for e in default.subagents] == [
        ("helper", harness_service_pb2.SUBAGENT_MODE_INLINE, "", "demo-helper")
    ]
    assert [(e.name, e.mode, e.agent, e.child_definition_id) for e in lead.subagents] == [
        ("reviewer", harness_service_pb2.SUBAGENT_MODE_HOST, "demo-reviewer", "demo-reviewer")
    ]
    assert not reviewer.subagents
    assert info.limits.max_message_bytes == 64 * 1024 * 1024
    assert info.limits.max_concurrent_runs == 256
    assert info.server_version


async def test_stream_run_events_in_order_with_one_result_last(stub: Stub) -> None:
    events = await stream(stub, text="hello streaming world, say several words", request_id="req-1")
    assert [e.sequence for e in events] == list(range(len(events)))
    assert events[0].WhichOneof("event") == "run_started"
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds.count("result") == 1 and kinds[-1] == "result"
    assert kinds.count("part_delta") >= 2, "the scripted model streams text in several deltas"
    assert len({(e.thread_id, e.run_id) for e in events}) == 1
    result = events[-1].result
    assert result.request_id == "req-1"
    assert output(result) == "You said: hello streaming world, say several words"
    assert "checkpoint_candidate" not in kinds


async def test_checkpoints_follow_each_model_request_event(stub: Stub) -> None:
    events = await stream(stub, text="lookup grpc", checkpoints=True)
    assert [e.sequence for e in events] == list(range(len(events)))
    for before, after in pairwise(events):
        lifecycle = before.lifecycle.type if before.WhichOneof("event") == "lifecycle" else ""
        if lifecycle in ("model_request_started", "model_request_completed"):
            assert after.WhichOneof("event") == "checkpoint_candidate"
            assert after.checkpoint_candidate.state.thread_id == before.thread_id
    candidates = [e for e in events if e.WhichOneof("event") == "checkpoint_candidate"]
    assert len(candidates) == 4  # two model requests: the tool call, then the answer
    assert events[-1].WhichOneof("event") == "result"


async def test_run_returns_the_same_terminal_result(stub: Stub) -> None:
    result = await run(stub, text="lookup threadline")
    assert output(result).startswith("Tool results: lookup: Threadline serves")
    assert result.thread_id == result.state.thread_id
    assert result.run_id.startswith("run-")
    assert result.usage.requests == 2


async def test_continue_a_thread_twice_keeps_capability_state(stub: Stub) -> None:
    first = await run(stub, text="count")
    assert output(first) == "Tool results: count: 1"
    second = await run(stub, text="count again", previous_state=first.state)
    assert output(second) == "Tool results: count: 2"
    third = await run(stub, text="and count once more", previous_state=second.state)
    assert output(third) == "Tool results: count: 3"
    assert third.thread_id == first.thread_id
    assert [c.capability_id for c in third.state.capability_states] == ["demo.counter"]
    assert third.state.message_history.message_count > second.state.message_history.message_count


async def test_new_state_fork_and_validate(stub: Stub) -> None:
    new = (await stub.NewState(harness_service_pb2.NewStateRequest(thread_id="thread_mine1"))).state
    assert (new.schema_version, new.thread_id, new.message_history.message_count) == ("1", "thread_mine1", 0)
    generated = (await stub.NewState(harness_service_pb2.NewStateRequest())).state
    assert generated.thread_id.startswith("thread_")

    first = await run(stub, text="count", previous_state=new)
    fork = (
        await stub.ForkState(
            harness_service_pb2.ForkStateRequest(state=first.state, thread_id="thread_branch1")
        )
    ).state
    assert fork.thread_id == "thread_branch1"
    assert fork.message_history.data == first.state.message_history.data
    branch = await run(stub, text="count", previous_state=fork)
    trunk = await run(stub, text="count", previous_state=first.state)
    assert (output(branch), output(trunk)) == ("Tool results: count: 2", "Tool results: count: 2")
    assert (branch.thread_id, trunk.thread_id) == ("thread_branch1", "thread_mine1")

    validated = await stub.ValidateState(harness_service_pb2.ValidateStateRequest(state=first.state))
    assert validated.state == first.state
    assert load_state(validated.state_json).thread_id == "thread_mine1"
    again = await stub.ValidateState(
        harness_service_pb2.ValidateStateRequest(state_json=validated.state_json)
    )
    assert again.state == first.state and again.state_json == validated.state_json


async def test_fork_onto_its_own_id_or_a_malformed_id_is_invalid_argument(stub: Stub) -> None:
    state = (await stub.NewState(harness_service_pb2.NewStateRequest(thread_id="thread_src1"))).state
    for thread_id, reason in (
        ("thread_src1", "FORK_THREAD_ID_CONFLICT"),
        ("not a valid id!", "STATE_INVALID"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ForkState(harness_service_pb2.ForkStateRequest(state=state, thread_id=thread_id))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).reason == reason


async def test_approval_suspends_then_approve_runs_the_tool(stub: Stub) -> None:
    first = await run(stub, text="delete a.txt")
    assert first.status == run_pb2.RUN_STATUS_SUSPENDED
    assert first.suspend_reason == run_pb2.SUSPEND_REASON_DEFERRED
    [approval] = first.deferred.approvals
    assert (approval.tool_name, approval.kind) == ("delete_file", deferred_pb2.DEFERRED_KIND_APPROVAL)
    assert json.loads(approval.args_json) == {"path": "a.txt"}
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
    second = await run(stub, previous_state=first.state, deferred_resume=resume)
    assert output(second) == "Tool results: delete_file: Deleted a.txt."


async def test_approval_denied_tells_the_model(stub: Stub) -> None:
    first = await run(stub, text="delete b.txt")
    [approval] = first.deferred.approvals
    resume = deferred_pb2.DeferredToolResume(
        requests=first.deferred,
        results=deferred_pb2.DeferredToolResults(
            approvals=[
                deferred_pb2.ApprovalResult(
                    tool_call_id=approval.tool_call_id, denied=deferred_pb2.ToolDenied(message="Not today.")
                )
            ]
        ),
    )
    second = await run(stub, previous_state=first.state, deferred_resume=resume)
    assert output(second) == "Tool results: delete_file: Not today."


def approve_with(first: run_pb2.RunResult, override_args_json: str) -> deferred_pb2.DeferredToolResume:
    [approval] = first.deferred.approvals
    return deferred_pb2.DeferredToolResume(
        requests=first.deferred,
        results=deferred_pb2.DeferredToolResults(
            approvals=[
                deferred_pb2.ApprovalResult(
                    tool_call_id=approval.tool_call_id,
                    approved=deferred_pb2.ToolApproved(override_args_json=override_args_json),
                )
            ]
        ),
    )


def history_calls(result: run_pb2.RunResult) -> list[tuple[str, dict[str, object]]]:
    """The tool calls in a result's history, with their arguments, from the native JSON."""
    return [
        (part["tool_name"], json.loads(part["args"]) if isinstance(part["args"], str) else part["args"])
        for message in json.loads(result.state.message_history.data)
        for part in message["parts"]
        if part["part_kind"] == "tool-call"
    ]


async def test_override_args_are_validated_and_used_at_dispatch(stub: Stub) -> None:
    """SPEC §2.7.4 step 13 over the wire: `ToolApproved.override_args_json` runs the call with them;
    invalid ones are no error but a retry result for the model; history keeps the original call.
    """
    first = await run(stub, text="delete a.txt")
    valid = await run(
        stub, previous_state=first.state, deferred_resume=approve_with(first, '{"path":"b.txt"}')
    )
    assert output(valid) == "Tool results: delete_file: Deleted b.txt."
    assert history_calls(valid) == [("delete_file", {"path": "a.txt"})]
    invalid = await run(stub, previous_state=first.state, deferred_resume=approve_with(first, '{"path":5}'))
    answer = output(invalid)
    assert answer.startswith("Tool results: delete_file: ") and "Deleted" not in answer
    errors = json.loads(answer.removeprefix("Tool results: delete_file: "))["error"]
    assert [(e["loc"], e["type"]) for e in errors] == [(["path"], "string_type")]
    assert history_calls(invalid) == [("delete_file", {"path": "a.txt"})]


async def test_remaining_deferred_before_and_after_incorporation(stub: Stub) -> None:
    first = await run(stub, text="delete c.txt")
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
    pending = await stub.RemainingDeferred(
        harness_service_pb2.RemainingDeferredRequest(resume=resume, state=first.state)
    )
    assert pending.HasField("remaining")
    assert [a.tool_call_id for a in pending.remaining.results.approvals] == [approval.tool_call_id]
    second = await run(stub, previous_state=first.state, deferred_resume=resume)
    done = await stub.RemainingDeferred(
        harness_service_pb2.RemainingDeferredRequest(resume=resume, state=second.state)
    )
    assert not done.HasField("remaining")


async def test_remaining_deferred_checks_the_batch_as_a_resume_does(stub: Stub) -> None:
    """Typed errors, never UNKNOWN (issue 10, item 5): no response, bad metadata, a forged call ID."""
    first = await run(stub, text="delete c.txt")
    [approval] = first.deferred.approvals
    answer = deferred_pb2.ApprovalResult(
        tool_call_id=approval.tool_call_id, approved=deferred_pb2.ToolApproved()
    )
    resume = deferred_pb2.DeferredToolResume(
        requests=first.deferred, results=deferred_pb2.DeferredToolResults(approvals=[answer])
    )
    fresh = await stub.NewState(harness_service_pb2.NewStateRequest())
    bad_metadata = deferred_pb2.DeferredToolResume()
    bad_metadata.CopyFrom(resume)
    bad_metadata.requests.approvals[0].metadata_json = '{"a":NaN}'
    forged = deferred_pb2.DeferredToolResume()
    forged.CopyFrom(resume)
    forged.requests.approvals[0].tool_call_id = forged.results.approvals[0].tool_call_id = "never-made"
    unanswered = deferred_pb2.DeferredToolResume(requests=first.deferred)
    cases = [
        (resume, fresh.state, grpc.StatusCode.FAILED_PRECONDITION, "DEFERRED_REQUEST_MISSING"),
        (bad_metadata, first.state, grpc.StatusCode.INVALID_ARGUMENT, "DEFERRED_METADATA_INVALID"),
        (forged, first.state, grpc.StatusCode.FAILED_PRECONDITION, "DEFERRED_REQUEST_MISSING"),
        (unanswered, first.state, grpc.StatusCode.INVALID_ARGUMENT, "DEFERRED_RESULTS_INCOMPLETE"),
    ]
    for batch, state, code, reason in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.RemainingDeferred(
                harness_service_pb2.RemainingDeferredRequest(resume=batch, state=state)
            )
        assert (caught.value.code(), error_info(caught.value).reason) == (code, reason), (
            caught.value.details()
        )


WEATHER = run_pb2.ClientTool(
    name="get_weather",
    description="The weather in a city.",
    parameters_json_schema='{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}',
)


async def test_client_tool_is_an_external_call_the_host_answers(stub: Stub) -> None:
    first = await run(stub, text='client:get_weather {"city": "Paris"}', client_tools=[WEATHER])
    assert first.status == run_pb2.RUN_STATUS_SUSPENDED
    [call] = first.deferred.calls
    assert call.kind == deferred_pb2.DEFERRED_KIND_EXTERNAL
    assert call.target_identity == "tool/threadline.client/get_weather"
    assert json.loads(call.args_json) == {"city": "Paris"}
    resume = deferred_pb2.DeferredToolResume(
        requests=first.deferred,
        results=deferred_pb2.DeferredToolResults(
            calls=[deferred_pb2.CallResult(tool_call_id=call.tool_call_id, value_json='"sunny, 21 C"')]
        ),
    )
    second = await run(stub, previous_state=first.state, deferred_resume=resume, client_tools=[WEATHER])
    assert output(second) == "Tool results: get_weather: sunny, 21 C"


async def test_client_tools_belong_to_one_run_only(stub: Stub) -> None:
    """Without the declaration, the next run of the same server does not know the tool."""
    first = await run(stub, text="client:get_weather", client_tools=[WEATHER])
    assert first.status == run_pb2.RUN_STATUS_SUSPENDED
    plain = await run(stub, text="hello")
    assert output(plain) == "You said: hello"


@pytest.mark.parametrize(
    "tools",
    [
        [
            run_pb2.ClientTool(name="lookup", parameters_json_schema='{"type":"object"}')
        ],  # clashes with the agent
        [WEATHER, WEATHER],  # duplicate
        [run_pb2.ClientTool(name="bad", parameters_json_schema='{"type":"string"}')],  # not an object schema
        [run_pb2.ClientTool(name="bad", parameters_json_schema="{not json")],
        [run_pb2.ClientTool(name="no spaces allowed", parameters_json_schema='{"type":"object"}')],
        [run_pb2.ClientTool(name="ct\n", parameters_json_schema='{"type":"object"}')],  # a trailing newline
    ],
)
async def test_invalid_client_tools_fail_before_the_run(stub: Stub, tools: list[run_pb2.ClientTool]) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream(stub, text="hi", client_tools=tools)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "CLIENT_TOOL_INVALID"
    assert error_info(caught.value).domain == "threadline"


async def test_unknown_agent(stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await run(stub, agent="nobody", text="hi")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "AGENT_UNKNOWN"


def interrupted_checkpoint(*calls: tuple[str, dict[str, object]]) -> state_pb2.HarnessState:
    """A state whose last model response has tool calls without results, as after a crash."""
    state = HarnessState.new(
        message_history=[
            ModelRequest(parts=[UserPromptPart("do the things")]),
            ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c_{name}") for name, args in calls]),
        ]
    )
    return state_to_pb(state)


@pytest.mark.parametrize(
    ("mode", "status_rerun", "lookup_rerun"),
    [
        (run_pb2.TOOL_RECOVERY_UNSPECIFIED, True, False),  # server default = DECLARED
        (run_pb2.TOOL_RECOVERY_DECLARED, True, False),
        (run_pb2.TOOL_RECOVERY_NEVER, False, False),
        (run_pb2.TOOL_RECOVERY_ALWAYS, True, True),
    ],
)
async def test_tool_recovery_modes(stub: Stub, mode: int, status_rerun: bool, lookup_rerun: bool) -> None:
    checkpoint = interrupted_checkpoint(("fetch_status", {"service": "db"}), ("lookup", {"query": "grpc"}))
    text = output(await run(stub, previous_state=checkpoint, tool_recovery=mode))
    assert ("fetch_status: db is up." in text) is status_rerun
    assert ("lookup: gRPC is a remote" in text) is lookup_rerun


async def test_recovery_always_never_replays_an_approval(stub: Stub) -> None:
    checkpoint = interrupted_checkpoint(("delete_file", {"path": "x"}))
    result = await run(stub, previous_state=checkpoint, tool_recovery=run_pb2.TOOL_RECOVERY_ALWAYS)
    assert result.status == run_pb2.RUN_STATUS_SUSPENDED
    assert [a.tool_name for a in result.deferred.approvals] == ["delete_file"]


async def test_usage_limits_end_the_run_failed(stub: Stub) -> None:
    result = await run(stub, text="lookup grpc", usage_limits=run_pb2.UsageLimits(request_limit=1))
    assert result.status == run_pb2.RUN_STATUS_FAILED
    assert result.failure.code == "usage_limit_exceeded"
    assert result.HasField("state")
