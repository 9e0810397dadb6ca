"""Scripted models and small helpers shared by the child-run tests (CHILDREN §9 notation).

A `Script` is a list of model steps (`call(...)`, `text(...)`, or a function of the messages); it records,
per request, the tool names offered and the messages sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import HarnessExtensionEvent, HarnessRunResult, HarnessState
from harness.testing import scripted_model

Step = ModelResponse | Callable[[list[ModelMessage]], ModelResponse]


def call(name: str, args: dict[str, Any], call_id: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id)])


def calls(*parts: tuple[str, dict[str, Any], str]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=cid) for name, args, cid in parts])


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


class Script:
    """One model's turns, in order; records what each request offered and sent."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.offered: list[list[str]] = []
        self.sent: list[list[ModelMessage]] = []
        self.instructions: list[str | None] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append(sorted(tool.name for tool in info.function_tools))
        self.instructions.append(info.instructions)
        self.sent.append(list(messages))
        step = self.steps[len(self.sent) - 1]
        return step if isinstance(step, ModelResponse) else step(messages)

    @property
    def model(self) -> FunctionModel:
        return scripted_model(self)

    @property
    def calls(self) -> int:
        return len(self.sent)


def returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    return [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]


def returned(result: HarnessRunResult[Any] | HarnessState, call_id: str) -> ToolReturnPart:
    messages = result.message_history if isinstance(result, HarnessState) else result.all_messages()
    found = [part for part in returns(messages) if part.tool_call_id == call_id]
    assert len(found) == 1, found
    return found[0]


def user_prompts(messages: Sequence[ModelMessage]) -> list[Any]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def registry(state: HarnessState) -> dict[str, Any]:
    entry = state.agent_context_state.get("a13n.subagents")
    assert entry is not None and entry.version == "2"
    data = entry.data
    assert isinstance(data, dict)
    children = data["children"]
    assert isinstance(children, dict)
    return children


def delegation_events(items: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        item.event.payload
        for item in items
        if isinstance(getattr(item, "event", None), HarnessExtensionEvent) and item.event.kind == "delegation"
    ]
