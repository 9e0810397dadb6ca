"""Scripted models for tests and offline hosts: script each model turn as a whole `ModelResponse`.

`scripted_model(script)` wraps a function of `(messages, info) -> ModelResponse` in a native
`FunctionModel` that serves the same response both non-streamed and streamed (text in small
deltas, tool calls as argument deltas), so the harness's streamed runs see real part events.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)

__all__ = ("Script", "scripted_model")

Script = Callable[[list[ModelMessage], AgentInfo], ModelResponse | Awaitable[ModelResponse]]
"""One model turn: the messages sent and the tools offered in, the whole response out."""


def scripted_model(script: Script, *, model_name: str = "scripted", chunk: int = 8) -> FunctionModel:
    """A `FunctionModel` answering with `script`'s responses, streamed in `chunk`-character deltas.

    Args:
        script: Returns the model's response for the messages it is sent.
        model_name: The name the model reports.
        chunk: How many characters of text or arguments each streamed delta carries.
    """

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        response = script(messages, info)
        if inspect.isawaitable(response):
            response = await response
        return response

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls | DeltaThinkingCalls]:
        response = await respond(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for start in range(0, max(len(part.content), 1), chunk):
                    yield part.content[start : start + chunk]
            elif isinstance(part, ThinkingPart):
                yield {index: DeltaThinkingPart(content=part.content, signature=part.signature)}
            elif isinstance(part, ToolCallPart):
                args = part.args if isinstance(part.args, str) else json.dumps(part.args or {})
                yield {index: DeltaToolCall(name=part.tool_name, tool_call_id=part.tool_call_id)}
                for start in range(0, len(args), chunk):
                    yield {index: DeltaToolCall(json_args=args[start : start + chunk])}

    return FunctionModel(respond, stream_function=stream, model_name=model_name)
