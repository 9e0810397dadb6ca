"""Every committed golden vector decodes, re-encodes byte for byte, and its states load (tests/vectors/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format, symbol_database
from google.protobuf.message import Message
from threadline.v1 import deferred_pb2, events_pb2, harness_service_pb2, run_pb2, state_pb2

from harness.children import child_requests
from harness.environment.state import decode
from server.mapping.deferred import resume_from_pb
from server.mapping.state import state_from_pb, state_to_pb

VECTORS = Path(__file__).parent / "vectors"
MANIFEST: dict[str, str] = json.loads((VECTORS / "manifest.json").read_text(encoding="utf-8"))
NAMES = sorted(path.stem for path in VECTORS.glob("*.binpb"))

# Imported for their registration in the default pool (the manifest names message types).
_MODULES = (deferred_pb2, events_pb2, harness_service_pb2, run_pb2, state_pb2)


def message_class(name: str) -> type[Message]:
    cls: type[Message] = symbol_database.Default().GetSymbol(MANIFEST[name])
    return cls


def load(name: str) -> tuple[bytes, Message]:
    data = (VECTORS / f"{name}.binpb").read_bytes()
    return data, message_class(name).FromString(data)


def states_in(msg: Message) -> list[state_pb2.HarnessState]:
    if isinstance(msg, state_pb2.HarnessState):
        return [msg]
    if isinstance(msg, events_pb2.RunEvent):
        if msg.HasField("checkpoint_candidate"):
            candidate = msg.checkpoint_candidate
            if not candidate.HasField("history_delta"):
                return [candidate.state]
            # CHECKPOINT_FORM_DELTA: the vector is a stream's first candidate continuing `state_full`.
            base = load("state_full")[1].message_history.data.encode()  # type: ignore[attr-defined]
            delta = candidate.history_delta
            state = state_pb2.HarnessState()
            state.CopyFrom(candidate.state)
            state.message_history.data = (base[: delta.keep_bytes] + delta.append.encode()).decode()
            return [state]
        if msg.HasField("result") and msg.result.HasField("state"):
            return [msg.result.state]
    if isinstance(msg, run_pb2.RunResult) and msg.HasField("state"):
        return [msg.state]
    return []


def test_the_folder_is_complete() -> None:
    assert {"fresh_state", "state_full", "deferred_batch", "event_stream_000"} <= set(NAMES)
    assert set(NAMES) <= set(MANIFEST), "every vector needs a manifest entry"
    assert all((VECTORS / f"{name}.json").exists() for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_binary_reencodes_identically(name: str) -> None:
    data, msg = load(name)
    assert msg.SerializeToString(deterministic=True) == data


@pytest.mark.parametrize("name", NAMES)
def test_json_parses_to_the_same_message(name: str) -> None:
    _, msg = load(name)
    text = (VECTORS / f"{name}.json").read_text(encoding="utf-8")
    parsed = json_format.Parse(text, message_class(name)())
    assert parsed == msg
    again = json_format.MessageToJson(parsed, preserving_proto_field_name=True)
    assert json.loads(again) == json.loads(text)


@pytest.mark.parametrize("name", NAMES)
def test_states_inside_decode(name: str) -> None:
    _, msg = load(name)
    for envelope in states_in(msg):
        state = state_from_pb(envelope)  # a rebuilt delta passes the digest and count checks too
        assert state_to_pb(state) == envelope


def test_event_stream_is_one_gap_free_run() -> None:
    events = [load(name)[1] for name in NAMES if name.startswith("event_stream_")]
    assert all(isinstance(event, events_pb2.RunEvent) for event in events)
    assert [event.sequence for event in events] == list(range(len(events)))  # type: ignore[attr-defined]
    assert events[0].WhichOneof("event") == "run_started"
    assert events[-1].WhichOneof("event") == "result"


def test_deferred_batch_decodes() -> None:
    _, msg = load("deferred_batch")
    assert isinstance(msg, deferred_pb2.DeferredToolResume)
    resume = resume_from_pb(msg)
    assert resume.requests.kind("call_q") == "question"
    assert [item.tool_call_id for item in resume.requests.approvals] == ["call_del", "call_mail"]


def test_environment_vector_holds_the_local_providers_state() -> None:
    """`state_environment`: the own-key entry decodes as version 1 and a foreign one is only carried."""
    state = state_from_pb(load("state_environment")[1])  # type: ignore[arg-type]
    local = decode("work", state.environment_states["work"])
    assert local is not None and local.backend == "0" * 31 + "b" and local.scope == "0" * 31 + "5"
    assert [command.id for command in local.commands] == ["0" * 31 + "1", "0" * 31 + "2"]
    assert decode("box", state.environment_states["box"]) is None  # another provider's: not ours to read
    assert list(state.environment_states) == ["work", "box"]


def test_child_vectors_hold_the_typed_copies() -> None:
    """`deferred_child`'s typed child request is its metadata's; the events carry lineage and delegation."""
    _, msg = load("deferred_child")
    assert isinstance(msg, deferred_pb2.DeferredToolResume)
    [call] = msg.requests.calls
    request = json.loads(call.metadata_json)["threadline.child"]
    child = call.child
    assert (child.action, child.agent, child.subagent_name) == (
        deferred_pb2.CHILD_ACTION_START,
        "demo-reviewer",
        "reviewer",
    )
    assert (child.thread_id, child.input) == (request["thread_id"], request["input"])
    assert (child.parent.parent_agent, child.parent.delegation_id) == ("demo-lead", request["thread_id"])
    answer = json.loads(msg.results.calls[0].value_json)
    assert answer["execution_id"] == child.thread_id and answer["status"] == "completed"
    resume = resume_from_pb(msg)
    assert child_requests(resume.requests)[call.tool_call_id].thread_id == child.thread_id

    _, started = load("event_child_run_started")
    assert started.run_started.lineage.subagent_name == "reviewer"  # type: ignore[attr-defined]
    _, delegation = load("event_inline_delegation_completed")
    assert delegation.WhichOneof("event") == "inline_delegation"  # type: ignore[attr-defined]
    assert delegation.inline_delegation.action == "completed"  # type: ignore[attr-defined]
