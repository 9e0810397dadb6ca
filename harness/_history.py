"""Small read-only helpers over native message lists (pydantic-ai 2.68).

Deferred-resume validation (SPEC §2.7.4 step 9, §2.7.5), tool recovery (§2.5.2) and interrupted-history
normalization (§2.4) all ask the same questions of a history: which is the last `ModelResponse`, which
tool calls does it hold, and which of them were answered by a later `ModelRequest`. These helpers answer
them without copying the history: they walk the list backwards to the last response and only look at the
messages after it, so the cost is proportional to the tail, not to the whole thread.

"Answered" follows §2.5.2 step 3: a `ToolReturnPart` with that `tool_call_id` (any `outcome`, including an
earlier unknown result and `"retried"`) or a legacy in-memory `RetryPromptPart` with that `tool_call_id`,
in any request after the response.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# `RetryPromptPart` is deprecated natively: loading a stored history turns it into a `ToolReturnPart`, but a
# part built in memory (by a host or an older integration) can still sit in a request and still answers
# its call. Importing the class does not warn; only constructing it does.
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    ToolCallPart,
    ToolReturnPart,
)

from .json_text import JsonTextError, JsonValue, NotFiniteJson, check_finite_json, parse_json

__all__ = (
    "InvalidArguments",
    "answered_call_ids",
    "arguments_equal",
    "called_ids",
    "duplicate_call_ids",
    "last_response",
    "last_response_index",
    "parse_arguments",
    "pending_calls",
    "response_tool_calls",
)


def last_response_index(messages: Sequence[ModelMessage]) -> int | None:
    """The index of the last `ModelResponse` in `messages`, or `None` when there is none.

    Args:
        messages: A native message history (not copied).

    Returns:
        The index, or `None` for a history with no response.
    """
    # Backwards: the last response is almost always near the end.
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], ModelResponse):
            return index
    return None


def last_response(messages: Sequence[ModelMessage]) -> ModelResponse | None:
    """The last `ModelResponse` of `messages` (the object itself, not a copy), or `None`."""
    index = last_response_index(messages)
    if index is None:
        return None
    response = messages[index]
    assert isinstance(response, ModelResponse)
    return response


def response_tool_calls(response: ModelResponse) -> list[ToolCallPart]:
    """The `ToolCallPart`s of `response`, in order (the parts themselves, not copies).

    Native built-in tool calls (`NativeToolCallPart`) are not `ToolCallPart`s: the provider answers them
    inside the same response, so they are never pending.
    """
    return [part for part in response.parts if isinstance(part, ToolCallPart)]


def answered_call_ids(messages: Sequence[ModelMessage], after: int) -> set[str]:
    """The tool call IDs answered in a `ModelRequest` at an index greater than `after`.

    Args:
        messages: A native message history (not copied).
        after: Only requests after this index count (typically the last response's index).

    Returns:
        IDs answered by a `ToolReturnPart` (any outcome) or a `RetryPromptPart`.
    """
    answered: set[str] = set()
    for index in range(after + 1, len(messages)):
        message = messages[index]
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                answered.add(part.tool_call_id)
    return answered


def called_ids(messages: Sequence[ModelMessage]) -> set[str]:
    """The IDs of every `ToolCallPart` any `ModelResponse` of `messages` holds."""
    return {
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }


def pending_calls(messages: Sequence[ModelMessage]) -> list[ToolCallPart]:
    """The unanswered `ToolCallPart`s of the last `ModelResponse`, in response order.

    Earlier responses are never examined (§2.5.2 step 2). A history without a response has none.
    Repeated IDs in the response are returned as they appear; callers that must refuse them check
    with `duplicate_call_ids`.
    """
    index = last_response_index(messages)
    if index is None:
        return []
    response = messages[index]
    assert isinstance(response, ModelResponse)
    calls = response_tool_calls(response)
    if not calls:
        return []
    answered = answered_call_ids(messages, index)
    return [call for call in calls if call.tool_call_id not in answered]


def duplicate_call_ids(calls: Sequence[ToolCallPart]) -> list[str]:
    """The IDs that occur more than once among `calls`, each once, in first-repeat order."""
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for call in calls:
        if call.tool_call_id in seen:
            repeated[call.tool_call_id] = None
        seen.add(call.tool_call_id)
    return list(repeated)


class InvalidArguments(ValueError):
    """A tool call's arguments are not a finite-JSON object."""


def parse_arguments(args: object) -> dict[str, JsonValue]:
    """Tool call arguments as a finite-JSON object, parsed the way native `args_as_dict` reads them.

    `None`, `""` and `{}` are the empty object (as natively); a string must hold a JSON object; a dict
    must be finite JSON. Nothing is shared with the input.

    Raises:
        InvalidArguments: The arguments do not parse or are not a finite-JSON object.
    """
    if args is None or args == "":
        return {}
    value: object
    if isinstance(args, str):
        try:
            value = parse_json(args)  # strict and bounded: no NaN, no repeated keys, no deep nesting
        except JsonTextError as error:
            raise InvalidArguments(f"arguments are {error}") from None
    else:
        value = args
    if not isinstance(value, dict):
        raise InvalidArguments(f"arguments are a {type(value).__name__}, not a JSON object")
    try:
        checked = check_finite_json(value, where="$.args")
    except NotFiniteJson as error:
        raise InvalidArguments(str(error)) from None
    assert isinstance(checked, dict)
    return checked


def arguments_equal(left: JsonValue, right: JsonValue) -> bool:
    """Whether two parsed argument values are the same JSON.

    Stricter than `==` where Python is loose: `true` is not `1` (in Python `True == 1`). Numbers compare by
    value, so `1` and `1.0` (the same JSON number written two ways) are equal.
    """
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right and not (isinstance(left, float) and math.isnan(left))
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            arguments_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(arguments_equal(left[key], right[key]) for key in left)
    if left is None or right is None:
        return left is right
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    return False
