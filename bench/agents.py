"""The benchmarked agents, served by `threadline serve --agent NAME=bench.agents:FACTORY`.

Every agent is offline and scripted (`harness.testing.scripted_model`), and every script looks only
at the tail of the history, so its own cost never grows with the thread:

- `scenario`: the run of sections (a), (d), (e), (f): 3 model requests, 2 calls to a plain local
  tool, then a text answer of about 150 characters streamed in 8-character deltas. `native_agent`
  is the same model and tool on plain pydantic-ai, the baseline of every ratio.
- `stream`: one model request streaming N text deltas of 8 characters, N from the prompt (b);
  `stream_model` is the same model for plain pydantic-ai, one part of (b)'s limit.
- `idle`: waits the prompt's number of seconds inside the model request, then answers (e).
- `rounds`: calls the tool N times in N model requests, N from the prompt, then answers (f).
- `paced`: one model request streaming N text deltas of 8 characters, sleeping M ms before each one
  (`bench.wire.paced_prompt(N, M)`): a provider's pace, so a turn spans many event-log windows (i).
- `fanout`: one response calling the plain `lookup` N times at once (N from the prompt), then a text
  answer; a prompt `approve` instead calls `confirm`, which needs an approval (k).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from pydantic_ai import Agent, Tool
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
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import ExecutableAgent
from harness.testing import scripted_model

from .wire import DELTA, PROMPT, paced_pace

__all__ = (
    "ANSWER",
    "DELTA",
    "PROMPT",
    "fanout",
    "idle",
    "idle_model",
    "lookup",
    "native_agent",
    "paced",
    "paced_model",
    "rounds",
    "scenario",
    "scenario_model",
    "stream",
    "stream_model",
)

ANSWER = (
    "Ship beta: it carries the alpha fixes plus the streaming change, and its notes list no open "
    "regressions. Keep alpha as the fallback for one more week."
)
"""The `scenario` run's final text."""

_NOTES = {
    "alpha": "alpha 1.4: fixes the retry loop, the cache key and two crashes on empty input; "
    "known issue: slow cold start on large repositories.",
    "beta": "beta 1.5: everything in alpha 1.4, plus streaming responses and a smaller wheel; "
    "no known regressions after two weeks of canary traffic.",
}


def lookup(query: str) -> str:
    """Look up the release notes of `query` (a plain, synchronous local tool)."""
    return _NOTES.get(query, f"no notes for {query}")


def _tail_part(messages: list[ModelMessage]) -> object:
    tail = messages[-1]
    return tail.parts[-1] if isinstance(tail, ModelRequest) and tail.parts else None


def _prompt(messages: list[ModelMessage]) -> str:
    part = _tail_part(messages)
    return part.content if isinstance(part, UserPromptPart) and isinstance(part.content, str) else ""


def _scenario_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = _tail_part(messages)
    call_id = f"call-{len(messages)}"  # unique in the thread: the history only grows
    if not isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[ToolCallPart("lookup", {"query": "alpha"}, tool_call_id=call_id)])
    if str(last.content).startswith("alpha"):
        return ModelResponse(parts=[ToolCallPart("lookup", {"query": "beta"}, tool_call_id=call_id)])
    return ModelResponse(parts=[TextPart(ANSWER)])


def scenario_model() -> FunctionModel:
    """The `scenario` script as a streaming `FunctionModel` (8-character deltas)."""
    return scripted_model(_scenario_script, model_name="bench")


def _notes_capability() -> Capability[object]:
    return Capability(id="bench.notes", tools=[Tool(lookup)])


def scenario() -> ExecutableAgent[str]:
    """3 model requests, 2 `lookup` calls, a streamed answer."""
    return ExecutableAgent(scenario_model(), capabilities=[_notes_capability()], name="scenario")


def native_agent() -> Agent[None, str]:
    """Plain pydantic-ai with the same scripted model and tool: the baseline of every ratio."""
    return Agent(scenario_model(), tools=[Tool(lookup)])


def _stream_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(DELTA * int(_prompt(messages) or "1"))])


def stream_model() -> FunctionModel:
    """The `stream` script as a streaming `FunctionModel`: `int(prompt)` deltas of `DELTA`."""
    return scripted_model(_stream_script, model_name="bench-stream")


def stream() -> ExecutableAgent[str]:
    """One model request streaming `int(prompt)` deltas of `DELTA`."""
    return ExecutableAgent(stream_model(), name="stream")


async def _idle_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    await asyncio.sleep(float(_prompt(messages) or "0"))
    return ModelResponse(parts=[TextPart("done")])


def idle_model() -> FunctionModel:
    """The `idle` script as a streaming `FunctionModel`: waits `float(prompt)` seconds, then answers."""
    return scripted_model(_idle_script, model_name="bench-idle")


def idle() -> ExecutableAgent[str]:
    """Holds its stream open and idle for `float(prompt)` seconds inside the model request."""
    return ExecutableAgent(idle_model(), name="idle")


def _rounds_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = _tail_part(messages)
    if isinstance(last, ToolReturnPart):
        done, total = (int(n) for n in last.tool_call_id.split("-")[1:3])
    else:
        done, total = 0, int(_prompt(messages) or "1")
    if done >= total:
        return ModelResponse(parts=[TextPart(ANSWER)])
    call_id = f"round-{done + 1}-{total}-{len(messages)}"
    query = "alpha" if done % 2 == 0 else "beta"
    return ModelResponse(parts=[ToolCallPart("lookup", {"query": query}, tool_call_id=call_id)])


def rounds() -> ExecutableAgent[str]:
    """Calls `lookup` `int(prompt)` times, one call per model request, then answers."""
    return ExecutableAgent(
        scripted_model(_rounds_script, model_name="bench-rounds"),
        capabilities=[_notes_capability()],
        name="rounds",
    )


def _paced_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    deltas, _delay_s = paced_pace(_prompt(messages))
    return ModelResponse(parts=[TextPart(DELTA * deltas)])


async def _paced_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    deltas, delay_s = paced_pace(_prompt(messages))
    for _ in range(deltas):
        await asyncio.sleep(delay_s)
        yield DELTA


def paced_model() -> FunctionModel:
    """The `paced` script as a streaming `FunctionModel`: `DELTA` N times, M ms apart (from the prompt)."""
    return FunctionModel(_paced_script, stream_function=_paced_stream, model_name="bench-paced")


def paced() -> ExecutableAgent[str]:
    """One model request streaming its deltas at a provider's pace (`bench.wire.paced_prompt`)."""
    return ExecutableAgent(paced_model(), name="paced")


def confirm(order: str) -> str:
    """Confirm an order (needs the host's approval: a resume turn runs it)."""
    return f"confirmed {order}"


def _fanout_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if isinstance(_tail_part(messages), ToolReturnPart):
        return ModelResponse(parts=[TextPart("done")])
    prompt, turn = _prompt(messages), len(messages)
    if prompt == "approve":
        return ModelResponse(
            parts=[ToolCallPart("confirm", {"order": "o-1"}, tool_call_id=f"confirm-{turn}")]
        )
    return ModelResponse(
        parts=[
            ToolCallPart("lookup", {"query": "alpha"}, tool_call_id=f"fan-{turn}-{index}")
            for index in range(int(prompt or "1"))
        ]
    )


def fanout() -> ExecutableAgent[str]:
    """N parallel `lookup` calls in one response, N from the prompt; or (`approve`) one approval."""
    return ExecutableAgent(
        scripted_model(_fanout_script, model_name="bench-fanout"),
        capabilities=[
            Capability(id="bench.fanout", tools=[Tool(lookup), Tool(confirm, requires_approval=True)])
        ],
        name="fanout",
    )
