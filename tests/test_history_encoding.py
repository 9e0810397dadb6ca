"""How a state's history is encoded: in pieces that join to the one-piece native dump, reused by runs.

`bench/` showed a continued thread paying for its history several times per run; these tests pin the
shortcuts that removed that: a run reuses the bytes of the messages it started from and of its own
earlier checkpoints, and takes the messages `load_state` validated instead of validating them again.
Whatever the shortcut, the bytes are exactly `ModelMessagesTypeAdapter.dump_json` of the history.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from pydantic_ai import Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo
from strategies import messages

from harness import ExecutableAgent, HarnessState, load_state
from harness._history_codec import HistoryEncoder, encode_history
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio


@given(messages())
@settings(max_examples=60, deadline=None)
def test_encoding_in_pieces_is_the_native_dump(history: list[ModelMessage]) -> None:
    encoded = encode_history(history)
    assert encoded.json == ModelMessagesTypeAdapter.dump_json(history)
    assert encoded.count == len(history)
    if history:
        # `last_start` is where the last message begins: what follows is its own dump and `]`.
        assert b"[" + encoded.json[encoded.last_start :] == ModelMessagesTypeAdapter.dump_json(history[-1:])


@given(messages(), messages())
@settings(max_examples=60, deadline=None)
def test_an_encoder_extends_what_it_encoded_to_the_native_dump(
    first: list[ModelMessage], more: list[ModelMessage]
) -> None:
    encoder = HistoryEncoder(None, [])
    assert encoder.encode(first).json == ModelMessagesTypeAdapter.dump_json(first)
    grown = [*first, *more]
    assert encoder.encode(grown).json == ModelMessagesTypeAdapter.dump_json(grown)
    shrunk = grown[: len(first) // 2]
    assert encoder.encode(shrunk).json == ModelMessagesTypeAdapter.dump_json(shrunk)


def lookup(query: str) -> str:
    return f"notes on {query}"


def two_lookups(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Look up alpha, then beta, then answer: 3 model requests, 2 tool calls."""
    tail = messages[-1]
    last = tail.parts[-1] if isinstance(tail, ModelRequest) else None
    if not isinstance(last, ToolReturnPart):
        return ModelResponse(
            parts=[ToolCallPart("lookup", {"query": "alpha"}, tool_call_id=f"c{len(messages)}")]
        )
    if last.content == "notes on alpha":
        return ModelResponse(
            parts=[ToolCallPart("lookup", {"query": "beta"}, tool_call_id=f"c{len(messages)}")]
        )
    return ModelResponse(parts=[TextPart("done")])


async def test_every_state_a_run_exports_is_the_native_dump_of_its_history() -> None:
    agent = ExecutableAgent(
        scripted_model(two_lookups), capabilities=[Capability(id="t.notes", tools=[Tool(lookup)])]
    )
    state = HarnessState.new()
    for turn in range(4):
        # Each turn starts from JSON, as a host's store or the wire gives it.
        async with agent.stream(f"turn {turn}", previous_state=load_state(state.model_dump_json())) as stream:
            async for _ in stream:
                exported = await stream.export_state()
                assert exported.message_history_json() == ModelMessagesTypeAdapter.dump_json(
                    stream._committed()
                )
        assert stream.result is not None and stream.result.state is not None
        state = stream.result.state
        assert state.message_history_json() == ModelMessagesTypeAdapter.dump_json(list(state.message_history))
    assert state.message_count() > 8


def test_a_loaded_state_hands_its_validated_messages_to_one_run_only() -> None:
    state = HarnessState.new(
        message_history=[ModelRequest.user_text_prompt("hi"), ModelResponse(parts=[TextPart("hello")])]
    )
    loaded = load_state(state.model_dump_json())
    first, _ = loaded._history_for_run()
    second, _ = loaded._history_for_run()
    read = loaded.message_history
    assert first == second == list(read)
    # Three sets of objects: the run that took validation's own, a later run, and every plain read.
    assert first[0] is not second[0] and read[0] is not first[0] and read[0] is not second[0]


@given(messages())
@settings(max_examples=40, deadline=None)
def test_a_run_finds_where_the_last_loaded_message_starts(history: list[ModelMessage]) -> None:
    # Loading dumps the history in one piece; the run that continues it finds the last message's start.
    loaded = load_state(HarnessState.new(message_history=history).model_dump_json())
    taken, encoded = loaded._history_for_run()
    encoder = HistoryEncoder(encoded, taken)
    assert encoder._encoded is not None
    assert encoder.last_start == encode_history(history).last_start
