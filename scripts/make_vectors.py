"""Write the golden vectors in `tests/vectors/` (run: `.venv/bin/python scripts/make_vectors.py`).

Every vector is built by the server's own mapping from core values, then pinned (IDs, timestamps), so
running the script again writes identical files. Each vector is written twice: `<name>.binpb`
(deterministic binary protobuf) and `<name>.json` (proto3 JSON, original field names). `manifest.json`
names each vector's message type, so any language can decode the folder with plain generated code.

Vectors grow by addition: a new contract feature gets a new vector name; old files are never rewritten
by hand, and the tests keep decoding them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.toolsets import FunctionToolset
from threadline.v1 import events_pb2

from harness import (
    DeferredToolResume,
    ExecutableAgent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessState,
    RunBindings,
    load_state,
)
from harness.children import ChildLineage, child_requests
from harness.environment.state import LocalState, RetainedCommand, encode
from harness.testing import scripted_model
from server.demo import demo_children
from server.mapping.checkpoints import CheckpointDeltas
from server.mapping.deferred import resume_to_pb
from server.mapping.events import fill_event, fill_result_event, fill_timestamp
from server.mapping.state import state_to_pb

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "vectors"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
PINNED_TIME = "2026-01-01T00:00:00Z"
RUN_ID = "run-" + "0" * 31 + "1"


def full_state() -> HarnessState:
    """History with a tool round trip, capability data, unknown extra keys and environment states."""
    return load_state(
        {
            "schema_version": "1",
            "thread_id": "thr_vectorfull1",
            "agent_context_state": {
                "entries": {
                    "acme.counter": {"version": "1", "data": {"value": 3, "history": [1, 2.5, "three"]}},
                    "acme.notes": {
                        "version": "2024-06",
                        "data": {"é": "ünïcode", "nested": {"b": None, "a": True}},
                    },
                }
            },
            "refs": [],
            "host_note": {"kept": True, "order": ["z", "a"]},
            "future_field": [1, {"b": 2, "a": 1}],
            "message_history": [
                {
                    "kind": "request",
                    "parts": [
                        {"part_kind": "system-prompt", "content": "Be brief.", "timestamp": PINNED_TIME},
                        {"part_kind": "user-prompt", "content": "How many files?", "timestamp": PINNED_TIME},
                    ],
                },
                {
                    "kind": "response",
                    "parts": [
                        {"part_kind": "text", "content": "Let me count."},
                        {
                            "part_kind": "tool-call",
                            "tool_name": "count_files",
                            "args": {"dir": "/work", "recursive": True},
                            "tool_call_id": "call_1",
                        },
                    ],
                    "model_name": "scripted",
                    "timestamp": PINNED_TIME,
                },
                {
                    "kind": "request",
                    "parts": [
                        {
                            "part_kind": "tool-return",
                            "tool_name": "count_files",
                            "content": {"count": 42},
                            "tool_call_id": "call_1",
                            "timestamp": PINNED_TIME,
                        }
                    ],
                },
                {
                    "kind": "response",
                    "parts": [{"part_kind": "text", "content": "42 files."}],
                    "model_name": "scripted",
                    "timestamp": PINNED_TIME,
                },
            ],
            "environment_states": {
                "workspace": {
                    "provider_key": "docker",
                    "state_version": "1.0",
                    "state": {"container": "c-1"},
                },
                "cache": {
                    "provider_key": "local_fs",
                    "state_version": "v2",
                    "state": {"paths": ["/a", "/b"]},
                },
            },
        }
    )


def environment_state() -> HarnessState:
    """A thread whose `work` mount retained two commands (`threadline_local`), beside a foreign entry."""
    local = encode(
        LocalState(
            backend="0" * 31 + "b",
            scope="0" * 31 + "5",
            commands=[
                RetainedCommand(id="0" * 31 + "1", started_at="2026-01-01T00:00:00.000000Z"),
                RetainedCommand(id="0" * 31 + "2", started_at="2026-01-01T00:00:01.500000Z"),
            ],
        )
    )
    foreign = {"provider_key": "docker", "state_version": "1.0", "state": {"container": "c-1"}}
    return HarnessState.new(thread_id="thr_vectorenv1", environment_states={"work": local, "box": foreign})


def deferred_batch() -> DeferredToolResume:
    """A suspended batch (approvals, an external call, a question) with matching answers."""
    requests = {
        "calls": [
            {
                "model_call": {"tool_name": "weather", "args": {"city": "Oslo"}, "tool_call_id": "call_ext"},
                "target_call": {"tool_name": "weather", "args": {"city": "Oslo"}, "tool_call_id": "call_ext"},
                "target_identity": "tool/threadline.client/weather",
            },
            {
                "model_call": {
                    "tool_name": "ask_user",
                    "args": {"q": "Which branch?"},
                    "tool_call_id": "call_q",
                },
                "target_call": {
                    "tool_name": "ask_user",
                    "args": {"q": "Which branch?"},
                    "tool_call_id": "call_q",
                },
                "target_identity": "tool/demo/ask_user",
            },
        ],
        "approvals": [
            {
                "model_call": {
                    "tool_name": "delete_file",
                    "args": {"path": "a.txt"},
                    "tool_call_id": "call_del",
                },
                "target_call": {
                    "tool_name": "delete_file",
                    "args": {"path": "a.txt"},
                    "tool_call_id": "call_del",
                },
                "target_identity": "tool/demo/delete_file",
            },
            {
                "model_call": {
                    "tool_name": "send_mail",
                    "args": {"to": "x@y.z"},
                    "tool_call_id": "call_mail",
                },
                "target_call": {
                    "tool_name": "send_mail",
                    "args": {"to": "x@y.z"},
                    "tool_call_id": "call_mail",
                },
                "target_identity": "tool/demo/send_mail",
            },
        ],
        "metadata": {
            "call_q": {"threadline.deferred_function_id": "tool/demo/ask_user", "queue": "q1"},
            "call_del": {"reason": "destructive"},
        },
        "kinds": {"call_q": "question"},
    }
    from harness import DeferredToolRequests

    batch = DeferredToolRequests.from_json(json.dumps(requests))
    results = DeferredToolResults(
        calls={"call_ext": {"temp_c": -3.5}, "call_q": "main"},
        approvals={
            "call_del": ToolApproved(override_args={"path": "b.txt"}),
            "call_mail": ToolDenied("Not now."),
        },
        metadata={"call_del": {"ticket": 7}},
        answered_by={"call_del": "user-42", "call_mail": "policy:mail"},
    )
    return DeferredToolResume(batch, results)


PARENT_INSTANCE = "0" * 31 + "a"
CHILD_RUN_ID = "run-" + "0" * 31 + "2"


async def child_batch() -> DeferredToolResume:
    """A Host-managed child request from the demo's `demo-lead` (a real suspension, run ID pinned) and
    the child's completed answer: `DeferredToolCall.child` is filled from its `threadline.child` metadata."""
    from harness import DeferredToolRequests, InstanceIdentity

    lead = demo_children()["demo-lead"]
    result = await lead.run(
        "ask-child check the plan",
        bindings=RunBindings(instance=InstanceIdentity("local", "embedded", PARENT_INSTANCE)),
        previous_state=HarnessState.new(thread_id="thr_vectorlead1"),
    )
    assert result.deferred is not None
    batch = DeferredToolRequests.from_json(result.deferred.to_json().replace(result.run_id, RUN_ID))
    [(call_id, request)] = child_requests(batch).items()
    answer = {"execution_id": request.thread_id, "subagent": request.subagent_name, "status": "completed"}
    return DeferredToolResume(
        batch, DeferredToolResults(calls={call_id: {**answer, "output": "Looks right."}})
    )


def child_events() -> list[Message]:
    """A child run's `run_started` with its lineage, and its parent's inline delegation events, as the
    server's mapping writes them from the core's extension events (IDs pinned)."""
    lineage = ChildLineage(
        parent_thread_id="thr_vectorlead1",
        parent_run_id=RUN_ID,
        parent_tool_call_id="call_1_delegate",
        parent_agent_instance_id=PARENT_INSTANCE,
        subagent_name="reviewer",
        delegation_id="thread_" + "0" * 31 + "c",
    )
    delegation = {
        "type": "inline_delegation",
        "invocation_id": "delegation-vector1",
        "child_instance_id": "helper-0001",
        "subagent": "helper",
        "parent_run_id": RUN_ID,
        "parent_agent_instance_id": PARENT_INSTANCE,
        "parent_tool_call_id": "call_1_delegate",
        "child_run_id": "run-" + "0" * 31 + "3",
    }
    extensions = [
        (
            "thread_" + "0" * 31 + "c",
            HarnessExtensionEvent(
                kind="lifecycle",
                payload={"type": "run_started", "lineage": lineage.to_jsonable()},
            ),
        ),
        (
            "thr_vectorlead1",
            HarnessExtensionEvent(
                kind="delegation",
                payload={**delegation, "action": "started", "status": "running"},
            ),
        ),
        (
            "thr_vectorlead1",
            HarnessExtensionEvent(
                kind="delegation",
                payload={**delegation, "action": "completed", "status": "completed"},
            ),
        ),
    ]
    events: list[Message] = []
    for sequence, (thread_id, extension) in enumerate(extensions):
        run_id = CHILD_RUN_ID if thread_id != "thr_vectorlead1" else RUN_ID
        msg = events_pb2.RunEvent()
        fill_event(msg, HarnessEvent(thread_id, run_id, sequence, EPOCH, extension), sequence=sequence)
        events.append(msg)
    return events


def _stream_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                TextPart("Checking the weather, then deleting."),
                ToolCallPart("lookup", {"topic": "files"}, tool_call_id="call_lookup"),
            ]
        )
    return ModelResponse(
        parts=[
            TextPart("Need approval and a client tool."),
            ToolCallPart("delete_file", {"path": "a.txt"}, tool_call_id="call_del"),
            ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="call_ext"),
        ]
    )


def _pin(value: Any, run_id: str) -> Any:
    """Replace what a live run makes up (times, its run ID) with fixed values."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "timestamp" and isinstance(item, str):
                out[key] = PINNED_TIME
            elif key == "run_id" and isinstance(item, str):
                out[key] = RUN_ID
            else:
                out[key] = _pin(item, run_id)
        return out
    if isinstance(value, list):
        return [_pin(item, run_id) for item in value]
    if isinstance(value, str) and run_id in value:
        return value.replace(run_id, RUN_ID)
    return value


def _pin_state(msg: Message, run_id: str) -> None:
    """Pin the history inside an envelope, re-encoded through the core so digests stay right."""
    state = load_state(_pin(json.loads(load_state_json(msg)), run_id))
    msg.CopyFrom(state_to_pb(state))  # type: ignore[arg-type]


def load_state_json(msg: Message) -> str:
    from server.mapping.state import state_from_pb

    return state_from_pb(msg).model_dump_json()  # type: ignore[arg-type]


async def event_stream() -> list[Message]:
    """A recorded `StreamRun`: text, a plain tool call and its result, then a suspension."""
    toolset: FunctionToolset[Any] = FunctionToolset(id="demo")

    @toolset.tool_plain
    def lookup(topic: str) -> dict[str, Any]:
        return {"topic": topic, "hits": 2}

    @toolset.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    from harness import ClientTool, client_tools_capability

    client = client_tools_capability(
        [
            ClientTool(
                "weather", "Current weather", '{"type":"object","properties":{"city":{"type":"string"}}}'
            )
        ]
    )
    assert client is not None
    agent = ExecutableAgent(scripted_model(_stream_script), capabilities=[Capability(toolsets=[toolset])])
    events: list[Message] = []
    run_id = ""
    async with agent.stream(
        "Tidy up",
        bindings=RunBindings.embedded(capabilities=[client]),
        previous_state=HarnessState.new(thread_id="thr_vectorstream1"),
    ) as stream:
        async for item in stream:
            sequence = len(events)
            msg = events_pb2.RunEvent()
            if isinstance(item, HarnessRunResultEvent):
                fill_result_event(msg, item, sequence=sequence, request_id="req-vector-1")
            else:
                assert isinstance(item, HarnessEvent)
                fill_event(msg, item, sequence=sequence)
            run_id = item.run_id
            events.append(msg)
    for msg in events:
        msg.run_id = RUN_ID  # type: ignore[attr-defined]
        fill_timestamp(msg.occurred_at, EPOCH + timedelta(milliseconds=msg.sequence))  # type: ignore[attr-defined]
        case = msg.WhichOneof("event")
        if case == "result":
            msg.result.run_id = RUN_ID  # type: ignore[attr-defined]
            _pin_state(msg.result.state, run_id)  # type: ignore[attr-defined]
        elif case == "lifecycle":
            payload = _pin(json.loads(msg.lifecycle.payload_json), run_id)  # type: ignore[attr-defined]
            msg.lifecycle.payload_json = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))  # type: ignore[attr-defined]
        elif case == "native":
            native = _pin(json.loads(msg.native.json), run_id)  # type: ignore[attr-defined]
            msg.native.json = json.dumps(native, ensure_ascii=False, separators=(",", ":"))  # type: ignore[attr-defined]
    return events


def checkpoint_delta() -> Message:
    """The first CHECKPOINT_FORM_DELTA candidate of a stream continuing `state_full`.

    The run has added a request and a response (with non-ASCII text) to `state_full`'s history, so
    the delta keeps `state_full`'s data up to its closing bracket and appends the two new messages.
    """
    base = full_state()
    document = json.loads(base.model_dump_json())
    document["message_history"] += [
        {
            "kind": "request",
            "parts": [{"part_kind": "user-prompt", "content": "And in /tmp?", "timestamp": PINNED_TIME}],
        },
        {
            "kind": "response",
            "parts": [{"part_kind": "text", "content": "Déjà 7 files — all logs."}],
            "model_name": "scripted",
            "timestamp": PINNED_TIME,
        },
    ]
    msg = events_pb2.RunEvent()
    CheckpointDeltas(base.message_history_json()).fill(
        msg, load_state(document), thread_id=base.thread_id, run_id=RUN_ID, sequence=3, occurred_at=EPOCH
    )
    return msg


def write(name: str, msg: Message, manifest: dict[str, str]) -> None:
    (OUT / f"{name}.binpb").write_bytes(msg.SerializeToString(deterministic=True))
    text = json_format.MessageToJson(msg, preserving_proto_field_name=True, indent=2)
    (OUT / f"{name}.json").write_text(text + "\n", encoding="utf-8")
    manifest[name] = msg.DESCRIPTOR.full_name


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest: dict[str, str] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    write("fresh_state", state_to_pb(HarnessState.new(thread_id="thr_vectorfresh1")), manifest)
    write("state_full", state_to_pb(full_state()), manifest)
    write("state_environment", state_to_pb(environment_state()), manifest)
    write("deferred_batch", resume_to_pb(deferred_batch()), manifest)
    write("deferred_child", resume_to_pb(asyncio.run(child_batch())), manifest)
    started, *delegations = child_events()
    write("event_child_run_started", started, manifest)
    for name, msg in zip(("started", "completed"), delegations, strict=True):
        write(f"event_inline_delegation_{name}", msg, manifest)
    write("checkpoint_delta", checkpoint_delta(), manifest)
    for msg in asyncio.run(event_stream()):
        write(f"event_stream_{msg.sequence:03d}", msg, manifest)  # type: ignore[attr-defined]
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(manifest)} vectors to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
