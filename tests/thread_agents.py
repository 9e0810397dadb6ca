"""The "crash" agent the crash matrix serves (`threadline serve --agent crash=thread_agents:build`).

A test kills the server with SIGKILL at an exact point of a run and then counts side effects, so
this agent makes both observable from outside the process, in one file named by `THREADLINE_TOOL_LOG`
(one JSON object a line, each written, flushed and fsynced before the agent goes on):

- every tool execution: `{"tool", "call_id", "phase": "start" | "end"}`;
- every time a run reaches a gate point: `{"at": point, "tool", "call_id"}`. The run then waits (polling)
  until the file named by `THREADLINE_GATE` exists, so the test knows where the server is when it kills it.
  Without `THREADLINE_GATE`, or once the file exists, a gate lets the run through at once.

The model is scripted and picks its path from the latest user prompt, as `server/demo.py` does:

| prompt word | the model calls |
|---|---|
| `use:plain` | `write_note(text)`, a plain tool |
| `use:retryable` | `read_status(service)`, recovery-retryable |
| `use:batch` | in one response: `dispatch(order)` (external, the host runs it), `transfer(amount=10)` and `transfer(amount=99)` (approval required) |
| anything else | no tool |

and `crash:<point>` picks the one point that blocks (`GATE_POINTS`):

| point | where the run waits |
|---|---|
| `crash:model` | in the model function, answering a request that carries the user's prompt |
| `crash:model:results` | in the model function, answering a request that carries tool results |
| `crash:tool:<name>` | inside tool `<name>`, after its `start` line |
| `crash:before_tool:<name>` | before tool `<name>` executes (`before_tool_execute`): nothing of it ran |
| `crash:after_tool:<name>` | after tool `<name>` returned (`after_tool_execute`), before its result is in the history |

A request whose last parts are tool results gets a text answer quoting them, so every path ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability, Capability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from harness import AgentContext, ExecutableAgent
from harness.testing import scripted_model
from harness.tools import recovery_retryable

__all__ = (
    "AGENT_NAME",
    "GATE_ENV",
    "TOOLSET_ID",
    "TOOL_LOG_ENV",
    "build",
    "executions",
    "markers",
    "read_log",
)

AGENT_NAME = "crash"
TOOL_LOG_ENV = "THREADLINE_TOOL_LOG"
"""The file every tool execution and gate marker is appended to."""
GATE_ENV = "THREADLINE_GATE"
"""The file whose existence opens every gate."""
TOOLSET_ID = "crash.tools"
_GATE_POLL = 0.02


# -- the log -----------------------------------------------------------------------------------------


def _append(entry: dict[str, Any]) -> None:
    path = os.environ.get(TOOL_LOG_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")
        log.flush()
        os.fsync(log.fileno())


def read_log(path: Path) -> list[dict[str, Any]]:
    """Every line the agent wrote to `path` so far (none when it does not exist yet)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    # Only whole lines: the agent's process may be between the writes of one.
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]


def executions(path: Path, tool: str | None = None) -> dict[str, int]:
    """How many times each call ID's tool started executing (only `tool`'s calls, when given)."""
    counts: dict[str, int] = {}
    for entry in read_log(path):
        if entry.get("phase") == "start" and tool in (None, entry["tool"]):
            counts[entry["call_id"]] = counts.get(entry["call_id"], 0) + 1
    return counts


def markers(path: Path) -> list[dict[str, Any]]:
    """The gate markers written to `path` so far, in order."""
    return [entry for entry in read_log(path) if "at" in entry]


# -- gates -------------------------------------------------------------------------------------------


def _latest_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    content = part.content
                    return content if isinstance(content, str) else " ".join(map(str, content))
    return ""


def _gate_point(messages: list[ModelMessage]) -> str | None:
    """The point `crash:<point>` in the latest prompt selects, e.g. `tool:write_note`."""
    match = re.search(r"crash:(\S+)", _latest_prompt(messages))
    return match.group(1) if match else None


async def _gate(point: str, **where: str) -> None:
    """Record that the run is at `point`, then wait until the gate file exists."""
    _append({"at": point, **where})
    gate = os.environ.get(GATE_ENV)
    while gate and not os.path.exists(gate):
        await asyncio.sleep(_GATE_POLL)


async def _maybe_gate(point: str, messages: list[ModelMessage], **where: str) -> None:
    if _gate_point(messages) == point:
        await _gate(point, **where)


class _Gates(AbstractCapability[Any]):
    """The points around a tool's execution: before it runs and after it returned."""

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        await _maybe_gate(f"before_tool:{call.tool_name}", ctx.messages, call_id=call.tool_call_id)
        return args

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        await _maybe_gate(f"after_tool:{call.tool_name}", ctx.messages, call_id=call.tool_call_id)
        return result


# -- tools -------------------------------------------------------------------------------------------


async def _execute(ctx: RunContext[AgentContext], value: str) -> str:
    name, call_id = ctx.tool_name or "", ctx.tool_call_id or ""
    _append({"tool": name, "call_id": call_id, "phase": "start"})
    await _maybe_gate(f"tool:{name}", ctx.messages, call_id=call_id)
    _append({"tool": name, "call_id": call_id, "phase": "end"})
    return value


async def write_note(ctx: RunContext[AgentContext], text: str) -> str:
    """Write a note (a side effect that must not repeat)."""
    return await _execute(ctx, f"noted {text}")


async def read_status(ctx: RunContext[AgentContext], service: str) -> str:
    """Read a service's status; safe to repeat after an interruption."""
    return await _execute(ctx, f"{service} is up")


async def transfer(ctx: RunContext[AgentContext], amount: int) -> str:
    """Transfer money; the host approves every call."""
    return await _execute(ctx, f"transferred {amount}")


_DISPATCH = ToolDefinition(
    name="dispatch",
    description="Dispatch an order; the host does it and returns the result.",
    parameters_json_schema={
        "type": "object",
        "properties": {"order": {"type": "string"}},
        "required": ["order"],
    },
)


# -- the model ---------------------------------------------------------------------------------------


def _calls(prompt: str, turn: int) -> list[ToolCallPart]:
    if "use:plain" in prompt:
        return [ToolCallPart("write_note", {"text": "hello"}, tool_call_id=f"note_{turn}")]
    if "use:retryable" in prompt:
        return [ToolCallPart("read_status", {"service": "api"}, tool_call_id=f"status_{turn}")]
    if "use:batch" in prompt:
        return [
            ToolCallPart("dispatch", {"order": "o-1"}, tool_call_id=f"ship_{turn}"),
            ToolCallPart("transfer", {"amount": 10}, tool_call_id=f"pay_{turn}"),
            ToolCallPart("transfer", {"amount": 99}, tool_call_id=f"deny_{turn}"),
        ]
    return []


def _quoted(part: ToolReturnPart | RetryPromptPart) -> str:
    return part.model_response_str() if isinstance(part, ToolReturnPart) else part.model_response()


async def crash_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One model turn: the calls the prompt asks for, or text once tool results came back."""
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest):
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
        if returns:
            await _maybe_gate("model:results", messages)
            quoted = "; ".join(f"{p.tool_name}: {_quoted(p)}" for p in returns)
            return ModelResponse(parts=[TextPart(f"Results: {quoted}")])
        if any(isinstance(p, UserPromptPart) for p in last.parts):
            await _maybe_gate("model", messages)
    prompt = _latest_prompt(messages)
    calls = _calls(prompt, len(messages))
    return ModelResponse(parts=list(calls) or [TextPart(f"You said: {prompt}")])


def build() -> ExecutableAgent[str]:
    """The crash agent: one tool per category, and the gates."""
    tools = Capability(
        tools=[
            Tool(write_note),
            recovery_retryable(Tool(read_status)),
            Tool(transfer, requires_approval=True),
        ],
        toolsets=[ExternalToolset([_DISPATCH], id="crash.external")],
        id=TOOLSET_ID,
    )
    return ExecutableAgent(
        scripted_model(crash_script, model_name="crash-script"),
        capabilities=[tools, _Gates()],
        name=AGENT_NAME,
    )
