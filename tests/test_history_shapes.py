"""Every history shape costs the run linear work: `for_native` leaves pydantic-ai nothing to merge.

pydantic-ai merges consecutive requests pairwise (n² for n consecutive prompts, issue 10 item 1). The
run hands it `harness._prepare.for_native(history)` instead, which must be exactly what pydantic-ai's
own clean-up makes of the history, and a fixed point of that clean-up (identical objects back), so the
native merge never runs. Both are checked on random histories of every shape, including the ones that
used to be slow, and a long host-built history runs end to end in-process and over the wire.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from conftest import RunningServer
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    _clean_message_history,  # pyright: ignore[reportPrivateUsage]
)
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2

from harness import HarnessRunResultEvent, HarnessState
from harness._prepare import PAUSE_EVERY, for_native, set_system_prompt
from server.demo import demo_agent
from server.mapping.state import state_to_pb

moments = st.sampled_from([None, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)])
call_ids = st.sampled_from(["c1", "c2", "c3", "c4"])
instructions = st.sampled_from([None, "", "be brief", "be kind"])
metadata = st.sampled_from(
    [
        None,
        {"app": 1},
        {"__pydantic_ai__": {"a": 1}},
        {"__pydantic_ai__": {"b": 2}, "x": 3},
        {"__pydantic_ai__": 5},
    ]
)


def _retry(call_id: str | None) -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated natively, still possible in memory
        return RetryPromptPart("again", tool_name="t" if call_id else None, tool_call_id=call_id or "x")


request_parts = st.one_of(
    st.builds(lambda t: UserPromptPart(t), st.sampled_from(["hi", "more", "again"])),
    st.builds(lambda t: SystemPromptPart(t), st.just("sys")),
    st.builds(lambda cid: ToolReturnPart("t", "ok", cid), call_ids),
    st.builds(_retry, st.none() | call_ids),
)
requests = st.builds(
    lambda parts, ins, ts, meta: ModelRequest(parts=parts, instructions=ins, timestamp=ts, metadata=meta),
    st.lists(request_parts, max_size=4),
    instructions,
    moments,
    metadata,
)
response_parts = st.one_of(
    st.builds(lambda t: TextPart(t), st.sampled_from(["a", "b"])),
    st.builds(lambda cid: ToolCallPart("t", {"x": 1}, cid), call_ids),
)
responses = st.builds(
    lambda parts, model, rid: ModelResponse(parts=parts, model_name=model, provider_response_id=rid),
    st.lists(response_parts, min_size=1, max_size=3),
    st.sampled_from([None, "m"]),
    st.sampled_from([None, "r1"]),
)
histories = st.lists(st.one_of(requests, responses), max_size=12)


def dumped(messages: list[ModelMessage]) -> Any:
    return json.loads(ModelMessagesTypeAdapter.dump_json(messages))


@settings(max_examples=400, deadline=None)
@given(histories)
def test_for_native_is_what_pydantic_ai_makes_of_the_history(history: list[ModelMessage]) -> None:
    assert dumped(for_native(list(history))) == dumped(_clean_message_history(list(history)))


@settings(max_examples=400, deadline=None)
@given(histories)
def test_pydantic_ai_finds_nothing_left_to_do(history: list[ModelMessage]) -> None:
    prepared = for_native(list(history))
    again = _clean_message_history(list(prepared))
    assert len(again) == len(prepared)  # nothing was merged: the pairwise merge never ran
    # Where pydantic-ai's clean-up is idempotent (everywhere but tool-less legacy retry prompts, which its
    # merge sorts among the tool results and its next pass moves out again) it returns the same objects.
    if dumped(again) == dumped(prepared):
        assert all(a is b for a, b in zip(again, prepared, strict=True))


def test_a_long_run_of_consecutive_requests_is_merged_into_one() -> None:
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(f"p{i}")]) for i in range(20_000)]
    [merged] = for_native(history)
    assert isinstance(merged, ModelRequest)
    assert [part.content for part in merged.parts] == [f"p{i}" for i in range(20_000)]  # type: ignore[union-attr]


def alternating(pairs: int) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for i in range(pairs):
        history += [ModelRequest(parts=[UserPromptPart(f"p{i}")]), ModelResponse(parts=[TextPart(f"a{i}")])]
    return history


def test_pausing_a_long_preparation_changes_nothing() -> None:
    history = alternating(2 * PAUSE_EVERY)
    pauses: list[None] = []
    paused = for_native(
        set_system_prompt(history, [], pause=lambda: pauses.append(None)), pause=lambda: pauses.append(None)
    )
    plain = for_native(set_system_prompt(history, []))
    assert all(a is b for a, b in zip(paused, plain, strict=True))  # the very messages, untouched
    assert len(pauses) >= 2 * len(history) // PAUSE_EVERY  # both passes paused along the history


class _Stop(Exception):
    pass


async def test_a_stopped_preparation_leaves_the_stream_to_prepare_again() -> None:
    state = HarnessState.new(thread_id="thr_shapes2", message_history=alternating(2 * PAUSE_EVERY))
    stream = demo_agent().stream("hello", previous_state=state)
    assert stream.history_length == 4 * PAUSE_EVERY
    calls: list[None] = []

    def pause() -> None:
        calls.append(None)
        if len(calls) == 2:
            raise _Stop  # a host that stops the work (its caller left)

    with pytest.raises(_Stop):
        stream.prepare(pause)
    stream.prepare(lambda: None)  # done this time: entering the stream does not prepare again
    async with stream:
        async for item in stream:
            if isinstance(item, HarnessRunResultEvent):
                assert item.result.status == "completed" and item.result.output == "You said: hello"
                assert item.result.state is not None
                assert item.result.state.message_count() == 4 * PAUSE_EVERY + 2


pytestmark = pytest.mark.anyio


def consecutive_prompts(count: int) -> HarnessState:
    return HarnessState.new(
        thread_id="thr_shapes1",
        message_history=[ModelRequest(parts=[UserPromptPart(f"p{i}")]) for i in range(count)],
    )


async def test_a_host_built_history_of_consecutive_prompts_runs_in_process() -> None:
    result = await demo_agent().run("hello", previous_state=consecutive_prompts(10_000))
    assert result.status == "completed" and result.output == "You said: hello"
    history = result.state.message_history if result.state is not None else ()
    # pydantic-ai's rule: the consecutive prompts became one request; the run's own turn follows.
    assert [type(m).__name__ for m in history] == ["ModelRequest", "ModelRequest", "ModelResponse"]
    assert isinstance(history[0], ModelRequest) and len(history[0].parts) == 10_000


async def test_a_host_built_history_of_consecutive_prompts_runs_over_the_wire(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        spec = run_pb2.RunSpec(text="hello", previous_state=state_to_pb(consecutive_prompts(10_000)))
        response = await stub.Run(harness_service_pb2.RunRequest(spec=spec), timeout=120)
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED
    assert json.loads(response.result.output_json) == "You said: hello"
