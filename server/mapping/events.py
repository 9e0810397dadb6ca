"""Core stream items -> `threadline.v1.RunEvent`.

The server numbers `sequence` itself over everything it sends (checkpoint candidates included), so
every function takes it as an argument instead of reading the core's numbering.

Speed matters on the hot path: a streamed text answer is mostly `PartDeltaEvent(TextPartDelta)`, which
is turned into protobuf fields directly (no pydantic round trip, no JSON). Only events without a typed
case pay for pydantic's `AgentStreamEvent` JSON encoding (`Native`).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import ConfigDict, TypeAdapter
from pydantic_ai.messages import (
    AgentStreamEvent,
    FinalResultEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnContent,
)
from threadline.v1 import deferred_pb2, events_pb2

from harness import HarnessEvent, HarnessExtensionEvent, HarnessRunResultEvent, HarnessState
from harness.json_text import args_json, dump_json

from .children import fill_delegation
from .run import fill_result
from .state import fill_state

__all__ = (
    "fill_checkpoint",
    "fill_event",
    "fill_result_event",
    "fill_timestamp",
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_OUTCOME = {
    "success": events_pb2.TOOL_OUTCOME_SUCCESS,
    "failed": events_pb2.TOOL_OUTCOME_FAILED,
    "denied": events_pb2.TOOL_OUTCOME_DENIED,
    "interrupted": events_pb2.TOOL_OUTCOME_INTERRUPTED,
    "retried": events_pb2.TOOL_OUTCOME_RETRIED,
}


@functools.cache
def _native_adapter() -> TypeAdapter[Any]:
    # Built on first use: the schema of every native event is large.
    return TypeAdapter(AgentStreamEvent, config=ConfigDict(ser_json_bytes="base64"))


@functools.cache
def _content_adapter() -> TypeAdapter[Any]:
    # The history's own encoding of a tool return's content (bytes as base64, like the state).
    return TypeAdapter(ToolReturnContent, config=ConfigDict(ser_json_bytes="base64"))


def fill_timestamp(target: Timestamp, moment: datetime) -> None:
    """A UTC `datetime` written into a `Timestamp` field, exactly (microseconds), without float arithmetic."""
    delta = moment - _EPOCH
    target.seconds = delta.days * 86400 + delta.seconds
    target.nanos = delta.microseconds * 1000


def _native(event: Any) -> events_pb2.Native:
    return events_pb2.Native(
        event_kind=str(getattr(event, "event_kind", "")), json=_native_adapter().dump_json(event).decode()
    )


def fill_event(
    msg: events_pb2.RunEvent, item: HarnessEvent, *, sequence: int, parent_agent: str = ""
) -> None:
    """Encode one streamed item (every case of `RunEvent.event` except `result` and checkpoints) into the
    empty `msg` (e.g. `StreamRunResponse().event`): no message copies. A child run's `run_started`
    lineage gets the request's `parent_agent`, which the core does not keep."""
    msg.thread_id = item.thread_id
    msg.run_id = item.run_id
    msg.sequence = sequence
    fill_timestamp(msg.occurred_at, item.occurred_at)
    event = item.event
    kind = type(event)
    if kind is PartDeltaEvent:
        _part_delta(msg, event)  # type: ignore[arg-type]  # exact type checked above (faster than isinstance)
    elif kind is PartStartEvent or kind is PartEndEvent:
        _part_boundary(msg, event)  # type: ignore[arg-type]  # narrowed by the exact type check
    elif isinstance(event, HarnessExtensionEvent):
        if event.kind == "lifecycle" and event.type == "run_started":
            msg.run_started.SetInParent()
            lineage = event.payload.get("lineage")
            if isinstance(lineage, dict):
                msg.run_started.lineage.CopyFrom(
                    deferred_pb2.ChildLineage(**lineage, parent_agent=parent_agent)
                )
        elif event.kind == "delegation" and event.type == "inline_delegation":
            fill_delegation(msg.inline_delegation, event.payload)
        else:
            out = msg.lifecycle
            out.kind = event.kind
            out.type = event.type or ""
            out.schema_version = event.schema_version
            out.payload_json = dump_json(event.payload)
    elif isinstance(event, FunctionToolCallEvent):
        part = event.part
        call = msg.tool_call
        call.tool_call_id = part.tool_call_id
        call.tool_name = part.tool_name
        call.args_json = args_json(part.args)
    elif isinstance(event, FunctionToolResultEvent):
        result = event.part
        out_result = msg.tool_result
        out_result.tool_call_id = result.tool_call_id
        out_result.tool_name = result.tool_name
        out_result.outcome = _OUTCOME.get(result.outcome, events_pb2.TOOL_OUTCOME_UNSPECIFIED)
        out_result.content_json = _content_adapter().dump_json(result.content).decode()
    elif isinstance(event, FinalResultEvent):
        final = msg.final_result
        final.tool_name = event.tool_name or ""
        final.tool_call_id = event.tool_call_id or ""
        final.SetInParent()
    else:
        msg.native.CopyFrom(_native(event))


def _part_delta(msg: events_pb2.RunEvent, event: PartDeltaEvent) -> None:
    delta = event.delta
    if type(delta) is TextPartDelta:
        out = msg.part_delta
        out.part_index = event.index
        out.kind = events_pb2.PART_KIND_TEXT
        out.content_delta = delta.content_delta
        return
    if isinstance(delta, ThinkingPartDelta) and delta.content_delta is not None:
        out = msg.part_delta
        out.part_index = event.index
        out.kind = events_pb2.PART_KIND_THINKING
        out.content_delta = delta.content_delta
        return
    if isinstance(delta, ToolCallPartDelta) and not isinstance(delta.args_delta, dict):
        out = msg.part_delta
        out.part_index = event.index
        out.kind = events_pb2.PART_KIND_TOOL_CALL
        out.tool_name_delta = delta.tool_name_delta or ""
        out.tool_call_id = delta.tool_call_id or ""
        out.args_delta = delta.args_delta or ""
        return
    # A signature-only thinking delta, or arguments streamed as objects: not expressible as appended text.
    msg.native.CopyFrom(_native(event))


def _part_boundary(msg: events_pb2.RunEvent, event: PartStartEvent | PartEndEvent) -> None:
    part = event.part
    target = msg.part_start if isinstance(event, PartStartEvent) else msg.part_end
    # `part_kind`, not isinstance: built-in tool calls subclass the tool call part but are not ours.
    if part.part_kind == "text" and isinstance(part, TextPart):
        target.kind = events_pb2.PART_KIND_TEXT
        target.content = part.content
    elif part.part_kind == "thinking" and isinstance(part, ThinkingPart):
        target.kind = events_pb2.PART_KIND_THINKING
        target.content = part.content
    elif part.part_kind == "tool-call" and isinstance(part, ToolCallPart):
        target.kind = events_pb2.PART_KIND_TOOL_CALL
        target.tool_name = part.tool_name
        target.tool_call_id = part.tool_call_id
        target.args_json = args_json(part.args)
    else:
        msg.native.CopyFrom(_native(event))
        return
    target.part_index = event.index


def fill_checkpoint(
    msg: events_pb2.RunEvent,
    state: HarnessState,
    *,
    thread_id: str,
    run_id: str,
    sequence: int,
    occurred_at: datetime | None = None,
) -> None:
    """A `CheckpointCandidate` event for a state the run offered mid-stream, written into the empty `msg`
    (the state in place: a history is never copied)."""
    msg.thread_id, msg.run_id, msg.sequence = thread_id, run_id, sequence
    fill_timestamp(msg.occurred_at, occurred_at or datetime.now(UTC))
    fill_state(msg.checkpoint_candidate.state, state)


def fill_result_event(
    msg: events_pb2.RunEvent,
    item: HarnessRunResultEvent[Any],
    *,
    sequence: int,
    request_id: str,
    parent_agent: str = "",
) -> None:
    """The terminal `result` event, written into the empty `msg` (the result's state in place)."""
    msg.thread_id, msg.run_id, msg.sequence = item.thread_id, item.run_id, sequence
    fill_timestamp(msg.occurred_at, item.occurred_at)
    fill_result(msg.result, item.result, request_id=request_id, parent_agent=parent_agent)
