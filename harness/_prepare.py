"""History rewrites before a run starts and after it stops (SPEC §2.2.3, §2.4, §2.5.5, §2.5.7).

Before: lift input left behind unresolved calls, close calls under `"never"` recovery, put the
executable's current system prompt in front (a stored prompt is never trusted), and hand pydantic-ai a
history its own clean-up leaves as it is (`for_native`). After a failed or cancelled run: keep only the
safe parts of an interrupted response, give unanswered calls the unknown result, and make sure the
run's own input is in the state exactly once.

All functions take and return lists of native messages and never mutate their input messages. The two
that walk the whole history before a run (`set_system_prompt`, `for_native`) take an optional `pause`,
called every `PAUSE_EVERY` messages: a host preparing a long history in a worker thread stops there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai.messages import (
    _PYDANTIC_AI_METADATA_KEY,  # pyright: ignore[reportPrivateUsage]
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
    _drop_orphaned_tool_results,  # pyright: ignore[reportPrivateUsage]
    _move_parts_from_between_tool_results,  # pyright: ignore[reportPrivateUsage]
    _repair_dangling_tool_calls,  # pyright: ignore[reportPrivateUsage]
    _tool_results_first_sort_key,  # pyright: ignore[reportPrivateUsage]
)

from ._history import last_response_index, pending_calls
from ._tooling import INTERRUPTED_TOOL_RESULT

__all__ = (
    "PAUSE_EVERY",
    "PartTracker",
    "append_input",
    "close_calls",
    "ensure_input",
    "for_native",
    "lift_undelivered_input",
    "normalize",
    "set_system_prompt",
    "unknown_result",
)


PAUSE_EVERY = 4096
"""Messages a whole-history pass handles between two `pause` calls (about 20 ms of work)."""


def _pauses(pause: Callable[[], None] | None) -> Callable[[int], None]:
    """`tick(index)`: calls `pause` when `index` reached the next multiple of `PAUSE_EVERY`."""
    if pause is None:
        return lambda index: None
    due = PAUSE_EVERY

    def tick(index: int) -> None:
        nonlocal due
        if index >= due:
            due = index + PAUSE_EVERY
            pause()

    return tick


def unknown_result(call: ToolCallPart) -> ToolReturnPart:
    """The native return that records a call whose result was never recorded (SPEC §2.5.3)."""
    return ToolReturnPart(
        tool_name=call.tool_name,
        content=INTERRUPTED_TOOL_RESULT,
        tool_call_id=call.tool_call_id,
        metadata=None,
        outcome="failed",
        tool_kind=call.tool_kind,
    )


def close_calls(history: list[ModelMessage], calls: Sequence[ToolCallPart]) -> list[ModelMessage]:
    """Append unknown results for `calls` to the request after the last response, or a new request."""
    if not calls:
        return history
    closings: list[ModelRequestPart] = [unknown_result(call) for call in calls]
    index = last_response_index(history)
    tail = history[-1] if history else None
    if index is not None and index < len(history) - 1 and isinstance(tail, ModelRequest):
        return [*history[:-1], replace(tail, parts=[*tail.parts, *closings])]
    return [*history, ModelRequest(parts=closings)]


def lift_undelivered_input(history: list[ModelMessage]) -> tuple[list[ModelMessage], list[UserContent]]:
    """Take user prompts waiting behind unresolved calls out of the history, to deliver them again.

    Native continuation then sends them after all tool results, as strict providers require.
    """
    index = last_response_index(history)
    if index is None or not pending_calls(history):
        return history, []
    lifted: list[UserContent] = []
    kept: list[ModelMessage] = list(history[: index + 1])
    for message in history[index + 1 :]:
        if not isinstance(message, ModelRequest):
            kept.append(message)
            continue
        parts = [part for part in message.parts if not isinstance(part, UserPromptPart)]
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                lifted.extend([part.content] if isinstance(part.content, str) else part.content)
        if len(parts) != len(message.parts):
            if parts:
                kept.append(replace(message, parts=parts))
        else:
            kept.append(message)
    return kept, lifted


def set_system_prompt(
    history: list[ModelMessage], prompts: Sequence[str], *, pause: Callable[[], None] | None = None
) -> list[ModelMessage]:
    """Replace every stored system prompt with the executable's current ones, at the front of the first request.

    Untouched when the history is empty (the native run adds them) or ends in a provider-suspended
    response (native continuation re-issues that turn as it was).
    """
    if not history or (isinstance(history[-1], ModelResponse) and history[-1].state == "suspended"):
        return history
    fresh: list[ModelRequestPart] = [SystemPromptPart(content) for content in prompts]
    out: list[ModelMessage] = []
    first = True
    tick = _pauses(pause)
    for index, message in enumerate(history):
        tick(index)
        if isinstance(message, ModelRequest):
            parts: list[ModelRequestPart] = [
                part for part in message.parts if not isinstance(part, SystemPromptPart)
            ]
            if first:
                first = False
                parts = [*fresh, *parts]
                out.append(message if parts == message.parts else replace(message, parts=parts))
                continue
            if len(parts) != len(message.parts):
                if parts:
                    out.append(replace(message, parts=parts))
                continue
        out.append(message)
    return out


def _contains_input(messages: Sequence[ModelMessage], content: str | Sequence[UserContent]) -> bool:
    return any(
        isinstance(part, UserPromptPart) and part.content == content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )


def append_input(history: list[ModelMessage], content: str | Sequence[UserContent]) -> list[ModelMessage]:
    """Append the run's input to the tail request (a new request after a tail response)."""
    part = UserPromptPart(content if isinstance(content, str) else list(content))
    if history and isinstance(history[-1], ModelRequest):
        tail = history[-1]
        return [*history[:-1], replace(tail, parts=[*tail.parts, part])]
    return [*history, ModelRequest(parts=[part])]


def ensure_input(
    history: list[ModelMessage], content: str | Sequence[UserContent] | None, *, since: int
) -> list[ModelMessage]:
    """Make sure a run's new input appears in its terminal state (undelivered input is never lost)."""
    if content is None or _contains_input(history[since:], content):
        return history
    return append_input(history, content)


class PartTracker:
    """Follows the public part events of the response being streamed, to rebuild its safe parts.

    A streamed answer is mostly plain text deltas, and applying each one builds a new `TextPart` (a
    dataclass `replace` and a copy of the text so far). So plain text deltas are only collected, and
    folded into their part in one step when something else happens to that part or the safe parts are
    asked for: the result is exactly what applying them one by one gives.
    """

    __slots__ = ("_text", "ended", "parts")

    _FOLD_EVERY = 256
    """Fold collected text after this many deltas, so a long answer keeps one string, not thousands."""

    def __init__(self) -> None:
        self.parts: dict[int, ModelResponsePart] = {}
        """Each part's latest state, except for plain text deltas not folded in yet (`_text`)."""
        self.ended: set[int] = set()
        self._text: dict[int, list[str]] = {}

    def reset(self) -> None:
        """A new model request starts."""
        self.parts.clear()
        self.ended.clear()
        self._text.clear()

    def observe(self, event: object) -> None:
        """Record a part start, delta or end."""
        if type(event) is PartDeltaEvent:
            index = event.index
            delta = event.delta
            if (
                type(delta) is TextPartDelta
                and delta.provider_name is None
                and delta.provider_details is None
                and delta.citations_delta is None
                and type(self.parts.get(index)) is TextPart
            ):
                chunks = self._text.setdefault(index, [])
                chunks.append(delta.content_delta)
                if len(chunks) >= self._FOLD_EVERY:
                    self._fold(index)
                return
        if isinstance(event, PartStartEvent):
            self._text.pop(event.index, None)
            self.parts[event.index] = event.part
        elif isinstance(event, PartDeltaEvent):
            self._fold(event.index)
            part = self.parts.get(event.index)
            if part is not None:
                # A delta that does not fit the part is not safe to keep.
                with contextlib.suppress(ValueError, TypeError):
                    self.parts[event.index] = event.delta.apply(part)
        elif isinstance(event, PartEndEvent):
            self._text.pop(event.index, None)
            self.parts[event.index] = event.part
            self.ended.add(event.index)

    def _fold(self, index: int) -> None:
        """Apply the collected plain text deltas of part `index` (what `TextPartDelta.apply` does for each)."""
        chunks = self._text.pop(index, None)
        if not chunks:
            return
        part = self.parts[index]
        assert isinstance(part, TextPart)
        self.parts[index] = replace(
            part,
            content=part.content + "".join(chunks),
            provider_details={**(part.provider_details or {})} or None,
        )

    def safe_parts(self) -> list[ModelResponsePart]:
        """Complete visible text, finished thinking, finished calls; nothing half-written."""
        for index in list(self._text):
            self._fold(index)
        safe: list[ModelResponsePart] = []
        for index in sorted(self.parts):
            part = self.parts[index]
            if isinstance(part, TextPart):
                if part.content:
                    safe.append(part)
            elif isinstance(part, ThinkingPart):
                if index in self.ended and (part.content or part.signature):
                    safe.append(part)
            elif index in self.ended:
                safe.append(part)
        return _balanced_native_tools(safe)


def _balanced_native_tools(parts: list[ModelResponsePart]) -> list[ModelResponsePart]:
    calls = {p.tool_call_id for p in parts if isinstance(p, NativeToolCallPart)}
    returns = {p.tool_call_id for p in parts if isinstance(p, NativeToolReturnPart)}
    paired = calls & returns
    return [
        p
        for p in parts
        if not isinstance(p, NativeToolCallPart | NativeToolReturnPart) or p.tool_call_id in paired
    ]


def normalize(
    history: list[ModelMessage],
    *,
    tracker: PartTracker | None,
    own_from: int,
    deferred_pending: bool,
    force_close: bool = False,
) -> list[ModelMessage]:
    """Make an interrupted history a safe candidate (SPEC §2.4 steps 2–3).

    Args:
        history: The committed history.
        tracker: The part events of this run's last response, if one was streaming.
        own_from: Index of the first message this run added; older messages are never rewritten.
        deferred_pending: Accepted deferred input is still pending: leave calls open for a
            `recovery=True` resume to deliver the real results.
        force_close: Close the last response's unanswered calls even when nothing is marked
            interrupted (a tool raised: it may have partly acted).
    """
    history = list(history)
    tail = history[-1] if history else None
    if isinstance(tail, ModelResponse) and tail.state == "interrupted" and len(history) - 1 >= own_from:
        safe = tracker.safe_parts() if tracker is not None else []
        if safe:
            history[-1] = replace(tail, parts=safe)
        else:
            history.pop()
    tail = history[-1] if history else None
    interrupted = (isinstance(tail, ModelResponse) and tail.state == "interrupted") or (
        isinstance(tail, ModelRequest) and tail.state == "interrupted"
    )
    if (interrupted or force_close) and not deferred_pending:
        history = close_calls(history, pending_calls(history))
    return history


# --- the history pydantic-ai receives ---------------------------------------------------------------


def for_native(history: list[ModelMessage], *, pause: Callable[[], None] | None = None) -> list[ModelMessage]:
    """The history pydantic-ai 2.68's own clean-up (`_clean_message_history`) would make of `history`.

    pydantic-ai cleans every history it is given: drop orphaned tool results, repair dangling calls
    (the last response's excepted), and merge consecutive requests (and consecutive synthetic
    responses) into one. Its merge is pairwise, rebuilding the merged parts list at every step, so a
    host-built history of n consecutive requests costs n² (issue 10: 16 000 prompts, 21 s). This gives
    the same messages in O(n): the first two passes are pydantic-ai's own, the merge folds each run of
    consecutive messages once. pydantic-ai's clean-up then finds nothing left to do, and the messages
    keep their identity (the run's history encoder reuses their bytes). `tests/test_history_shapes.py`
    checks the equality on random histories, so an upgrade that changes the native rules fails there.
    `pause` also runs between pydantic-ai's two passes, which cannot be cut.
    """
    tick = _pauses(pause)
    history = _drop_orphaned_tool_results(history)
    if pause is not None:
        pause()
    history = _repair_dangling_tool_calls(history)
    if pause is not None:
        pause()
    out: list[ModelMessage] = []
    index, count = 0, len(history)
    while index < count:
        tick(index)
        message = history[index]
        end = index + 1
        if isinstance(message, ModelRequest):
            instructions = message.instructions
            while end < count and isinstance(nxt := history[end], ModelRequest) and _joins(instructions, nxt):
                instructions = instructions or nxt.instructions
                end += 1
            out.append(_merged_requests(history[index:end]))
        elif isinstance(message, ModelResponse) and _synthetic(message):
            while end < count and isinstance(nxt := history[end], ModelResponse) and _synthetic(nxt):
                end += 1
            if end - index == 1:
                out.append(message)
            else:
                parts: list[ModelResponsePart] = []
                for response in history[index:end]:
                    assert isinstance(response, ModelResponse)
                    parts.extend(response.parts)
                out.append(replace(message, parts=parts))
        else:
            out.append(message)
        index = end
    return out


def _joins(instructions: str | None, message: ModelRequest) -> bool:
    """Whether pydantic-ai merges `message` into a request whose instructions are `instructions`."""
    return not instructions or not message.instructions or instructions == message.instructions


def _synthetic(response: ModelResponse) -> bool:
    """A response that did not come from an API (pydantic-ai merges consecutive ones)."""
    return (
        response.provider_response_id is None
        and response.provider_name is None
        and response.model_name is None
    )


def _merged_requests(run: Sequence[ModelMessage]) -> ModelMessage:
    """One request for a run of requests, as pydantic-ai's pairwise merge builds it.

    A single request only has the parts between its tool results moved after them. For a run, the
    parts are the first request's (so moved) followed by the others', stable-sorted tool results first:
    sorting each pairwise concatenation again gives exactly this, because the key has two values.
    """
    first = run[0]
    assert isinstance(first, ModelRequest)
    head = _move_parts_from_between_tool_results(first)
    if len(run) == 1:
        return head
    parts: list[ModelRequestPart] = list(head.parts)
    namespace: dict[str, Any] | None = None
    instructions = None
    timestamp = None
    for message in run:
        assert isinstance(message, ModelRequest)
        if message is not first:
            parts.extend(message.parts)
        own = (message.metadata or {}).get(_PYDANTIC_AI_METADATA_KEY)
        if isinstance(own, dict):
            namespace = {**(namespace or {}), **own}
        instructions = instructions or message.instructions
        timestamp = message.timestamp or timestamp
    parts.sort(key=_tool_results_first_sort_key)
    return ModelRequest(
        parts=parts,
        instructions=instructions,
        timestamp=timestamp,
        metadata=None if namespace is None else {_PYDANTIC_AI_METADATA_KEY: namespace},
    )
