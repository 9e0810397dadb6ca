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
| `... then sleep <seconds>` | after the first tool's result (unless it was denied), `sleep(seconds)` | plain, slow |
| `client:<name> [json]` | the client tool `<name>` with the JSON object as arguments | external |
| `shell <command>` | `shell_exec(command)`, then `shell_wait` while it runs (needs `--mount`) | shell |
| `shell-bg <command>` | `shell_exec(command)` only: a command still running keeps running | shell |
| `delegate <task>` / `ask-child <task>` | `delegate(subagent_name, prompt)` on the agent's child: `default` runs `helper` inline; `demo-lead` asks the host to run `reviewer` (agent `demo-reviewer`) | inline child / Host-managed child |
| `resume-child <execution id> <task>` | `resume_subagent(execution_id, prompt)` | continues a child |
| `shell-wait [out [err]]` | `shell_info()`, then `shell_wait` (up to 10 s) on the newest command from those offsets | shell |
| anything else | no tool; echoes the prompt in several words | - |

The shell words are checked first, so a command may contain any other word. A child's prompt is the
JSON object of CHILDREN §2; the demo reads its `delegated_task` as the prompt.

After tool results arrive, the model answers with a short text that quotes them.
"""

from __future__ import annotations

import asyncio
import functools
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
from harness.children import SubagentDefinition
from harness.json_text import JsonTextError, parse_json
from harness.testing import scripted_model
from harness.tools import recovery_retryable

__all__ = (
    "COUNTER_ID",
    "DEMO_AGENT_NAME",
    "LEAD_AGENT_NAME",
    "REVIEWER_AGENT_NAME",
    "demo_agent",
    "demo_capability",
    "demo_children",
    "demo_script",
)

DEMO_AGENT_NAME = "default"
"""The name the embedded agent is served under."""
HELPER_AGENT_NAME = "demo-helper"
"""The default agent's inline child (not served: inline children need not be)."""
LEAD_AGENT_NAME = "demo-lead"
"""The demo agent with a Host-managed child."""
REVIEWER_AGENT_NAME = "demo-reviewer"
"""`demo-lead`'s child, served so a host can run it."""
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
                        return _delegated_task(content)
                    return " ".join(item for item in content if isinstance(item, str))
    return ""


def _delegated_task(prompt: str) -> str:
    """A child run's prompt is a JSON object (CHILDREN §2): its task is `delegated_task`."""
    if not prompt.startswith("{"):
        return prompt
    try:
        body = parse_json(prompt)
    except JsonTextError:
        return prompt
    task = body.get("delegated_task") if isinstance(body, dict) else None
    return task if isinstance(task, str) else prompt


_CHILD = re.compile(r"\b(?:delegate|ask-child)\s+(\S.*)", re.IGNORECASE | re.DOTALL)
_RESUME_CHILD = re.compile(r"\bresume-child\s+(\S+)\s+(\S.*)", re.IGNORECASE | re.DOTALL)


Child = tuple[str, str]
"""An agent's one child edge: the `delegate` argument that names it (`subagent` inline, `subagent_name`
host-mode, CHILDREN §3.1, §4.1) and the edge's name."""


def _child_call(prompt: str, child: Child | None) -> tuple[str, dict[str, Any]] | None:
    """`delegate` to the agent's one child, or `resume_subagent` with the execution ID given."""
    if child is None:
        return None
    if resume := _RESUME_CHILD.search(prompt):
        return "resume_subagent", {"execution_id": resume.group(1), "prompt": resume.group(2).strip()}
    if delegate := _CHILD.search(prompt):
        return "delegate", {child[0]: child[1], "prompt": delegate.group(1).strip()}
    return None


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


_THEN_SLEEP = re.compile(r"\bthen sleep\s+(\d+(?:\.\d+)?)", re.IGNORECASE)


def _then_sleep(prompt: str, returns: list[ToolReturnPart]) -> float | None:
    """`... then sleep N`: the seconds to sleep after the first tool's result, unless the host denied
    that call (a turn that goes on, slowly, after an approval: something to interrupt or roll back)."""
    then = _THEN_SLEEP.search(prompt)
    if then is None or not returns or any(r.tool_name == "sleep" or r.outcome == "denied" for r in returns):
        return None
    return float(then.group(1))


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


def demo_script(
    messages: list[ModelMessage], info: AgentInfo, *, child: Child | None = None
) -> ModelResponse:
    """One turn of the demo model: a tool call chosen from the prompt, or text; `child` is the name of
    the agent's one child edge, if it has one.

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
        if (then := _then_sleep(prompt, returns)) is not None:
            return ModelResponse(
                parts=[ToolCallPart("sleep", {"seconds": then}, tool_call_id=f"call_{len(messages)}_sleep")]
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
    if (delegation := _child_call(prompt, child)) is not None:
        return ModelResponse(
            parts=[ToolCallPart(*delegation, tool_call_id=f"call_{len(messages)}_{delegation[0]}")]
        )
    call = _tool_call(prompt, len(messages))
    if call is not None:
        return ModelResponse(parts=[call])
    return ModelResponse(parts=[TextPart(f"You said: {prompt}" if prompt else "Hello from the demo agent.")])


def helper_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The inline child `helper`: it answers each task with how many it has had, so a continued child
    visibly remembers its earlier turns."""
    turns = sum(
        isinstance(part, UserPromptPart) for m in messages if isinstance(m, ModelRequest) for part in m.parts
    )
    return ModelResponse(parts=[TextPart(f"helper, task {turns}: {_latest_prompt(messages)}")])


def demo_agent(model: Model | str | None = None) -> ExecutableAgent[str]:
    """The agent `threadline serve` runs as "default", with an inline child `helper`.

    Args:
        model: Run the demo tools on this model instead of the scripted one (`--model`).
    """
    helper = ExecutableAgent(
        model if model is not None else scripted_model(helper_script, model_name="threadline-demo-helper"),
        instructions="You are the demo agent's helper. Do the delegated task briefly.",
        name=HELPER_AGENT_NAME,
    )
    edge = SubagentDefinition("helper", "Does a small task and remembers earlier ones.", helper)
    return _demo(model, DEMO_AGENT_NAME, child=("subagent", "helper"), subagents=[edge])


def demo_children(model: Model | str | None = None) -> dict[str, ExecutableAgent[str]]:
    """`demo-lead`, whose child `reviewer` the host runs as agent `demo-reviewer` (CHILDREN §4): both
    are served, since a child request names its agent by the name it is served under."""
    reviewer = _demo(model, REVIEWER_AGENT_NAME)
    edge = SubagentDefinition(
        "reviewer", "Reviews a task on a thread of its own; may ask you to approve.", reviewer, mode="host"
    )
    return {
        LEAD_AGENT_NAME: _demo(model, LEAD_AGENT_NAME, child=("subagent_name", "reviewer"), subagents=[edge]),
        REVIEWER_AGENT_NAME: reviewer,
    }


def _demo(
    model: Model | str | None,
    name: str,
    *,
    child: Child | None = None,
    subagents: list[SubagentDefinition] | None = None,
) -> ExecutableAgent[str]:
    script = functools.partial(demo_script, child=child)
    return ExecutableAgent(
        model if model is not None else scripted_model(script, model_name="threadline-demo"),
        capabilities=[demo_capability()],
        instructions="You are Threadline's demo agent. Use the tools when the user asks.",
        name=name,
        subagents=subagents or (),
    )
