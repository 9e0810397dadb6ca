"""Hypothesis strategies for realistic harness values, shared by the mapping and vector tests.

States hold what real threads hold: user prompts, text answers, tool calls with their returns,
capability namespaces, unknown top-level keys a newer harness added, environment states and refs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied

from harness import DeferredToolCall, DeferredToolRequests, DeferredToolResume, HarnessState

__all__ = (
    "deferred_requests",
    "deferred_results",
    "deferred_resumes",
    "harness_states",
    "json_values",
    "messages",
)

KNOWN_KEYS = frozenset(
    {"schema_version", "thread_id", "agent_context_state", "refs", "message_history", "environment_states"}
)

timestamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
texts = st.text(max_size=40)
names = st.from_regex(r"\A[a-z][a-z0-9_]{0,15}\Z")
call_ids = st.from_regex(r"\Acall_[a-z0-9]{1,8}\Z")

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(texts, json_values, max_size=4)


@st.composite
def messages(draw: st.DrawFn) -> list[ModelMessage]:
    """A plausible conversation: prompts, text answers, tool calls each followed by its return."""
    out: list[ModelMessage] = []
    for _ in range(draw(st.integers(0, 4))):
        out.append(ModelRequest(parts=[UserPromptPart(draw(texts), timestamp=draw(timestamps))]))
        calls = draw(st.lists(st.tuples(names, json_objects), max_size=2))
        parts: list[Any] = [TextPart(draw(texts))] if draw(st.booleans()) or not calls else []
        ids = [f"call_{len(out)}_{i}" for i in range(len(calls))]
        parts += [
            ToolCallPart(name, args, tool_call_id=cid) for (name, args), cid in zip(calls, ids, strict=True)
        ]
        out.append(ModelResponse(parts=parts, timestamp=draw(timestamps), model_name=draw(st.none() | names)))
        if calls:
            out.append(
                ModelRequest(
                    parts=[
                        ToolReturnPart(name, draw(json_values), tool_call_id=cid, timestamp=draw(timestamps))
                        for (name, _), cid in zip(calls, ids, strict=True)
                    ]
                )
            )
    return out


@st.composite
def harness_states(draw: st.DrawFn) -> HarnessState:
    """A valid state with every kind of content the envelope carries."""
    data: dict[str, Any] = {
        "schema_version": "1",
        "thread_id": draw(
            st.from_regex(r"\A[a-z][a-z0-9]{0,8}_[a-z0-9]{1,12}\Z") | st.just("thr_productthread1")
        ),
        "agent_context_state": {
            "entries": draw(
                st.dictionaries(
                    st.text(min_size=1, max_size=20).filter(str.strip),
                    st.fixed_dictionaries({"version": st.text(min_size=1, max_size=8), "data": json_values}),
                    max_size=3,
                )
            )
        },
        "refs": draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "key": st.text(min_size=1, max_size=20),
                        "digest": st.from_regex(r"\A[0-9a-f]{64}\Z"),
                        "size": st.integers(0, 2**40),
                    }
                ),
                max_size=2,
            )
        ),
    }
    for key, value in draw(
        st.dictionaries(texts.filter(lambda k: k not in KNOWN_KEYS), json_values, max_size=3)
    ).items():
        data[key] = value
    data["message_history"] = draw(messages())
    data["environment_states"] = draw(
        st.dictionaries(
            st.text(min_size=1, max_size=12),
            st.fixed_dictionaries(
                {
                    "provider_key": st.from_regex(r"\A[a-z][a-z0-9_]{0,10}\Z"),
                    "state_version": st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,8}\Z"),
                    "state": json_values,
                }
            ),
            max_size=2,
        )
    )
    return HarnessState.model_validate(data)


@st.composite
def deferred_requests(draw: st.DrawFn) -> DeferredToolRequests:
    """A batch with external calls, questions and approvals, with tool and harness metadata."""
    ids = draw(st.lists(call_ids, min_size=1, max_size=5, unique=True))
    split = draw(st.integers(0, len(ids)))
    calls, approvals, metadata, kinds = [], [], {}, {}
    for position, call_id in enumerate(ids):
        part = ToolCallPart(draw(names), draw(st.none() | json_objects), tool_call_id=call_id)
        item = DeferredToolCall.of(part, f"tool/{draw(names)}/{part.tool_name}")
        if position < split:
            calls.append(item)
            if draw(st.booleans()):
                kinds[call_id] = "question"
        else:
            approvals.append(item)
        if draw(st.booleans()):
            metadata[call_id] = draw(json_objects)
    return DeferredToolRequests(calls=calls, approvals=approvals, metadata=metadata, kinds=kinds)


call_answers = st.one_of(
    json_values,
    st.builds(
        lambda v, c, m: ToolReturn(v, content=c, metadata=m),
        json_values,
        st.none() | texts,
        st.none() | json_values,
    ),
    st.builds(ToolFailed, texts),
    st.builds(ModelRetry, texts),
)
approval_answers = st.one_of(
    st.builds(ToolApproved, override_args=st.none() | json_objects),
    st.builds(ToolDenied, st.text(min_size=1, max_size=30)),
)


@st.composite
def deferred_results(draw: st.DrawFn) -> DeferredToolResults:
    """Native answers in the canonical spellings the wire keeps (no bare `True`/`False`)."""
    results = DeferredToolResults()
    for call_id in draw(st.lists(call_ids, max_size=4, unique=True)):
        if draw(st.booleans()):
            results.calls[call_id] = draw(
                call_answers.filter(lambda v: not isinstance(v, dict) or "kind" not in v)
            )
        else:
            results.approvals[call_id] = draw(approval_answers)
        if draw(st.booleans()):
            results.metadata[call_id] = draw(json_objects)
        if draw(st.booleans()):
            results.answered_by[call_id] = draw(st.text(min_size=1, max_size=10))
    return results


deferred_resumes = st.builds(DeferredToolResume, deferred_requests(), deferred_results(), st.booleans())
