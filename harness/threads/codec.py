"""The JSON forms the store keeps besides the core's own: a state's parts, prompts, client tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import UserContent

from ..client_tools import ClientTool
from ..state import HarnessState
from .records import StateParts

__all__ = ("client_tools_from_json", "client_tools_json", "prompt_from_json", "prompt_json", "state_parts")

_PROMPT: TypeAdapter[str | list[UserContent]] = TypeAdapter(str | list[UserContent])


def state_parts(state: HarnessState) -> StateParts:
    """`state`'s JSON form as the store keeps it: the history data apart from the rest."""
    before, after = state._json_around_history()
    head = before.encode()
    return StateParts(state.message_history_json(), head + after.encode(), len(head))


def prompt_json(prompt: str | Sequence[UserContent] | None) -> str | None:
    if prompt is None:
        return None
    value: str | list[UserContent] = prompt if isinstance(prompt, str) else list(prompt)
    return _PROMPT.dump_json(value).decode()


def prompt_from_json(data: str | None) -> str | list[UserContent] | None:
    return None if data is None else _PROMPT.validate_json(data)


def client_tools_json(tools: Sequence[ClientTool]) -> str:
    return json.dumps(
        [
            {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters_json_schema}
            for t in tools
        ]
    )


def client_tools_from_json(data: str) -> list[ClientTool]:
    items: list[dict[str, Any]] = json.loads(data)
    return [ClientTool(**item) for item in items]
