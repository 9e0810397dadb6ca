"""Tools a host declares for one run and executes itself (DESIGN "Run request"; SPEC §2.11).

They become one native `ExternalToolset(id="threadline.client")`, so each call surfaces as an
external deferred call with identity `tool/threadline.client/<name>`. The check lives here, in the
core, so an embedding host and the gRPC server give the same answer (`client_tool_invalid`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.capabilities import AbstractCapability, Capability
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from .errors import ErrorCode, InputError
from .json_text import JsonTextError, parse_json

__all__ = ("CLIENT_TOOLSET_ID", "ClientTool", "client_tools_capability")

CLIENT_TOOLSET_ID = "threadline.client"
"""The toolset id of every client tool (their identity is `tool/threadline.client/<name>`)."""

_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class ClientTool:
    """A tool the host executes itself: its name, description and JSON-schema parameters."""

    name: str
    """Unique among the run's tools; letters, digits, `_`, `.`, `-`; at most 64 characters."""
    description: str = ""
    """What the model is told the tool does."""
    parameters_json_schema: str | dict[str, Any] = '{"type":"object","properties":{}}'
    """A JSON Schema object (text or dict) for the arguments."""


def _invalid(message: str, name: str, field: str) -> InputError:
    return InputError(
        message, code=ErrorCode.CLIENT_TOOL_INVALID, details={"tool_name": name, "field": field}
    )


def client_tools_capability(
    tools: Sequence[ClientTool], *, reserved_names: Sequence[str] = ()
) -> AbstractCapability[Any] | None:
    """Check a run's client tools and build the capability that serves them (`None` when there are none).

    Args:
        tools: The host's declarations for this run.
        reserved_names: Tool names the agent already uses.

    Raises:
        InputError: `client_tool_invalid` for a bad name, a duplicate, a clash with `reserved_names`,
            or parameters that are not a JSON Schema object.
    """
    if not tools:
        return None
    seen: set[str] = set()
    reserved = set(reserved_names)
    definitions: list[ToolDefinition] = []
    for tool in tools:
        if not _NAME.fullmatch(tool.name):
            raise _invalid(f"Client tool name {tool.name!r} is not a valid tool name.", tool.name, "name")
        if tool.name in seen:
            raise _invalid(f"Client tool {tool.name!r} is declared twice.", tool.name, "name")
        if tool.name in reserved:
            raise _invalid(f"Client tool {tool.name!r} clashes with a tool of the agent.", tool.name, "name")
        seen.add(tool.name)
        schema: Any = tool.parameters_json_schema
        if isinstance(schema, str):
            try:
                schema = parse_json(schema) if schema.strip() else {"type": "object", "properties": {}}
            except JsonTextError as error:
                raise _invalid(
                    f"Client tool {tool.name!r} parameters are {error}.", tool.name, "parameters_json_schema"
                ) from None
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise _invalid(
                f"Client tool {tool.name!r} parameters must be a JSON Schema object.",
                tool.name,
                "parameters_json_schema",
            )
        definitions.append(
            ToolDefinition(
                name=tool.name, description=tool.description or None, parameters_json_schema=schema
            )
        )
    return Capability(toolsets=[ExternalToolset(definitions, id=CLIENT_TOOLSET_ID)])
