"""The embedded default agent: offline, deterministic, and showing every tool category.

`threadline serve` must work with no key and no network, so a first-time user (and every test)
can drive a thread end to end. The model is scripted (`harness.testing.scripted_model`); it picks
its behaviour from the latest user prompt, so one word in a prompt selects a path:

| prompt contains | the model calls | category |
|---|---|---|
| `delete` | `delete_file(path)` | requires approval |
| `lookup` | `lookup(query)` | plain |
| `status` | `fetch_status(service)` | recovery-retryable |
| `count` | `count()` (bumps `demo.counter` capability state) | plain, capability state |
| `sleep` [seconds] | `sleep(seconds)` (default 2, at most 60) | plain, slow |
| `client:<name> [json]` | the client tool `<name>` with the JSON object as arguments | external |
| `shell <command>` | `shell_exec(command)`, then `shell_wait` while it runs (needs `--mount`) | shell |
| `shell-bg <command>` | `shell_exec(command)` only: a command still running keeps running | shell |
| `shell-wait [out [err]]` | `shell_info()`, then `shell_wait` (up to 10 s) on the newest command from those offsets | shell |
| anything else | no tool; echoes the prompt in several words | - |

The shell words are checked first, so a command may contain any other word.

After tool results arrive, the model answers with a short text that quotes them.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel
from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo

from harness import AgentContext, ExecutableAgent
from harness.json_text import JsonTextError, parse_json
from harness.testing import scripted_model
from harness.tools import recovery_retryable

__all__ = ("COUNTER_ID", "DEMO_AGENT_NAME", "demo_agent", "demo_capability", "demo_script")

DEMO_AGENT_NAME = "default"
"""The name the embedded agent is served under."""
COUNTER_ID = "demo.counter"
"""The capability state namespace the `count` tool keeps its counter in."""
_COUNTER_VERSION = "1"
_MAX_SLEEP = 60.0
_FACTS = {
    "threadline": "Threadline serves Pydantic AI harness threads over gRPC.",
    "grpc": "gRPC is a remote procedure call framework over HTTP/2.",
}


class _Counter(BaseModel):
    value: int = 0


def lookup(query: str) -> str:
    """Look up a short fact about a topic."""
    return _FACTS.get(query.lower(), f"No fact is known about {query!r}.")


def delete_file(path: str) -> str:
    """Delete a file (pretend); the host must approve every call."""
    return f"Deleted {path}."


@recovery_retryable
def fetch_status(service: str) -> str:
    """Report a service's status; read-only, so safe to re-run after an interruption."""
    return f"{service} is up."


async def count(ctx: RunContext[AgentContext]) -> int:
    """Add one to this thread's counter, kept in capability state, and return it."""
    current = await ctx.deps.state.read(COUNTER_ID, _Counter, version=_COUNTER_VERSION) or _Counter()
    bumped = _Counter(value=current.value + 1)
    await ctx.deps.state.write(COUNTER_ID, bumped, version=_COUNTER_VERSION)
    return bumped.value


async def sleep(seconds: float = 2.0) -> str:
    """Wait a while (to see streaming, cancellation and the run limit at work)."""
    await asyncio.sleep(min(max(seconds, 0.0), _MAX_SLEEP))
    return f"Slept {seconds:g} s."


def demo_capability() -> Capability[Any]:
    """The demo tools, one per category (client tools come from the host per run)."""
    return Capability(
        tools=[
            Tool(lookup),
            Tool(delete_file, requires_approval=True),
            fetch_status,
            Tool(count),
            Tool(sleep),
        ],
        id="threadline.demo",
    )


def _latest_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            # The last prompt: a request pydantic-ai merged from several holds them in order.
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    content = part.content
                    if isinstance(content, str):
                        return content
                    return " ".join(item for item in content if isinstance(item, str))
    return ""


def _tool_call(prompt: str, turn: int) -> ToolCallPart | None:
    call = _chosen_call(prompt)
    if call is None:
        return None
    # A deterministic ID (unique within a thread, since the history only grows) keeps documented
    # grpcurl walkthroughs reproducible.
    return ToolCallPart(call[0], call[1], tool_call_id=f"call_{turn}_{call[0]}")


_SHELL_WAIT = re.compile(r"\bshell-wait\b(?:\s+(\d+)(?:\s+(\d+))?)?", re.IGNORECASE)
_SHELL = re.compile(r"\bshell(-bg)?\s+(\S.*)", re.IGNORECASE | re.DOTALL)
_SHELL_WAIT_S = 10
"""`shell-wait` waits this long for the command to finish before showing what it has."""
_NO_SHELL = "This server has no shell: start it with --mount NAME=local:ROOT."


def _shell_call(prompt: str) -> tuple[str, dict[str, Any]] | None:
    """The first call of a shell word: `shell_info()` to discover for `shell-wait`, else `shell_exec`."""
    if _SHELL_WAIT.search(prompt):
        return "shell_info", {"limit": 100}
    shell = _SHELL.search(prompt)
    return ("shell_exec", {"command": shell.group(2).strip()}) if shell else None


def _shell_next(prompt: str, returns: list[ToolReturnPart]) -> tuple[str, dict[str, Any]] | None:
    """After a shell tool's result: `shell_wait` on what it found, or nothing (answer in text)."""
    result = returns[-1].content if returns else None
    if not isinstance(result, dict) or not result.get("ok"):
        return None
    wait = _SHELL_WAIT.search(prompt)
    if returns[-1].tool_name == "shell_info" and wait and result.get("processes"):
        return "shell_wait", {
            "process_id": result["processes"][-1]["process_id"],
            "stdout_offset": int(wait.group(1) or 0),
            "stderr_offset": int(wait.group(2) or 0),
            "timeout_seconds": _SHELL_WAIT_S,
        }
    shell = _SHELL.search(prompt)
    if returns[-1].tool_name == "shell_exec" and "process_id" in result and shell and not shell.group(1):
        return "shell_wait", {"process_id": result["process_id"], "timeout_seconds": 30}
    return None


def _chosen_call(prompt: str) -> tuple[str, dict[str, Any]] | None:
    lowered = prompt.lower()
    client = re.search(r"client:([A-Za-z_][A-Za-z0-9_.-]*)\s*(\{.*\})?", prompt, re.DOTALL)
    if client:
        try:
            args = parse_json(client.group(2) or "{}")
        except JsonTextError:  # not JSON (or too deep): call the tool without arguments
            args = {}
        return client.group(1), args if isinstance(args, dict) else {}
    if "delete" in lowered:
        match = re.search(r"delete\s+(\S+)", prompt, re.IGNORECASE)
        return "delete_file", {"path": match.group(1) if match else "notes.txt"}
    if "lookup" in lowered:
        match = re.search(r"lookup\s+(\S+)", prompt, re.IGNORECASE)
        return "lookup", {"query": match.group(1) if match else "threadline"}
    if "status" in lowered:
        return "fetch_status", {"service": "api"}
    if "count" in lowered:
        return "count", {}
    if "sleep" in lowered:
        match = re.search(r"sleep\s+(\d+(?:\.\d+)?)", lowered)
        return "sleep", {"seconds": float(match.group(1)) if match else 2.0}
    return None


def demo_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One turn of the demo model: a tool call chosen from the prompt, or text.

    A turn whose request carries tool results (a finished call, an answered approval or client
    tool, a recovered call) always ends the run with text, so every path terminates.
    """
    last = messages[-1] if messages else None
    prompt = _latest_prompt(messages)
    if isinstance(last, ModelRequest):
        returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
        if (follow := _shell_next(prompt, returns)) is not None:
            return ModelResponse(
                parts=[ToolCallPart(*follow, tool_call_id=f"call_{len(messages)}_{follow[0]}")]
            )
        if returns:
            quoted = "; ".join(f"{part.tool_name}: {part.model_response_str()}" for part in returns)
            return ModelResponse(parts=[TextPart(f"Tool results: {quoted}")])
        if any(not isinstance(part, UserPromptPart) for part in last.parts):
            # Retry prompts and other non-prompt parts: answer in text rather than loop.
            return ModelResponse(parts=[TextPart("I could not finish that tool call.")])
    if (shell := _shell_call(prompt)) is not None:
        if not any(tool.name == shell[0] for tool in info.function_tools):
            return ModelResponse(parts=[TextPart(_NO_SHELL)])
        return ModelResponse(parts=[ToolCallPart(*shell, tool_call_id=f"call_{len(messages)}_{shell[0]}")])
    call = _tool_call(prompt, len(messages))
    if call is not None:
        return ModelResponse(parts=[call])
    return ModelResponse(parts=[TextPart(f"You said: {prompt}" if prompt else "Hello from the demo agent.")])


def demo_agent(model: Model | str | None = None) -> ExecutableAgent[str]:
    """The agent `threadline serve` runs as "default".

    Args:
        model: Run the demo tools on this model instead of the scripted one (`--model`).
    """
    return ExecutableAgent(
        model if model is not None else scripted_model(demo_script, model_name="threadline-demo"),
        capabilities=[demo_capability()],
        instructions="You are Threadline's demo agent. Use the tools when the user asks.",
        name=DEMO_AGENT_NAME,
    )
