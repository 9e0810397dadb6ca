"""Child runs over gRPC (CHILDREN §5): scripted `--agent`s with a Host-managed edge, `threadline serve`
subprocesses, and the client-side steps a host takes (run, read the child request, answer it).

The scripted agents read a JSON plan from their latest prompt, `{"prefix": ..., "steps": [[tool, args], ...]}`
(a child reads it from its input's `delegated_task`, CHILDREN §2). They call the steps in order, one per
model turn, and end with the text `{"tools": [...offered...], "results": [{"outcome", "value"}, ...]}`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from conftest import bad_request_fields, error_info
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import deferred_pb2, events_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2

AGENT_MODULE = "child_agents"
LEAD = "lead"
REVIEWER = "reviewer"
SERVED = (f"{LEAD}={AGENT_MODULE}:lead", f"{REVIEWER}={AGENT_MODULE}:reviewer")
HOST_TOOLS = ("delegate", "resume_subagent")
NO_DEFERRED = "Deferred tool interaction is unavailable for this Run."

AGENT_SOURCE = '''
import json

from pydantic_ai import RunContext, Tool, UsageLimits
from pydantic_ai.capabilities import Capability
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelRequest, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

from harness import ExecutableAgent
from harness.children import SubagentDefinition
from harness.testing import scripted_model


def note(text: str) -> str:
    """Echo a note."""
    return text


def gate(ctx: RunContext) -> str:
    """Pass a gate the host must approve (raises ApprovalRequired until approved)."""
    if not ctx.tool_call_approved:
        raise ApprovalRequired()
    return "gate passed"


def _plan(messages):
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    body = json.loads(part.content)
                    if "delegated_task" in body:
                        body = json.loads(body["delegated_task"])
                    return body
    raise AssertionError("no prompt")


def _result(part):
    if isinstance(part, RetryPromptPart):
        return {"outcome": "retry", "value": part.model_response()}
    content = part.content
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            pass
    return {"outcome": part.outcome, "value": content}


def script(messages, info):
    plan = _plan(messages)
    prefix, steps = plan["prefix"], plan["steps"]
    mine = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, (ToolReturnPart, RetryPromptPart)) and (part.tool_call_id or "").startswith(prefix)
    ]
    if len(mine) >= len(steps):
        tools = sorted(tool.name for tool in info.function_tools)
        return ModelResponse(parts=[TextPart(json.dumps({"tools": tools, "results": [_result(p) for p in mine]}))])
    name, args = steps[len(mine)]
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"{prefix}{len(mine)}")])


def _capability():
    return Capability(tools=[Tool(note), Tool(gate, takes_ctx=True)], id="tests.children")


def reviewer():
    return ExecutableAgent(scripted_model(script), capabilities=[_capability()], name="reviewer")


def lead():
    edge = SubagentDefinition(
        "reviewer", "Reviews on a thread of its own.", reviewer(), mode="host",
        usage_limits=UsageLimits(request_limit=1),
    )
    return ExecutableAgent(scripted_model(script), capabilities=[_capability()], name="lead", subagents=[edge])


def bad_edge():
    edge = SubagentDefinition("Bad Name", "An edge whose name the constructor refuses.", reviewer())
    return ExecutableAgent(scripted_model(script), name="bad", subagents=[edge])
'''


def write_agents(directory: Path) -> Path:
    """The scripted agents' module in `directory` (the server's PYTHONPATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{AGENT_MODULE}.py").write_text(AGENT_SOURCE)
    return directory


@contextmanager
def scripted_serve(directory: Path, *args: str) -> Iterator[LoggedServe]:
    """`threadline serve --agent lead=... --agent reviewer=... ARGS` (memory store) for the block."""
    agents = write_agents(directory)
    specs = [flag for spec in SERVED for flag in ("--agent", spec)]
    with logged_serve(*specs, *args, env={"PYTHONPATH": str(agents)}) as running:
        yield running


def plan(*steps: tuple[str, dict[str, Any]]) -> str:
    """The prompt that makes a scripted agent call `steps` in order (a fresh call-id prefix per plan)."""
    return json.dumps({"prefix": f"c{uuid.uuid4().hex[:8]}-", "steps": [list(step) for step in steps]})


def final(result: run_pb2.RunResult) -> dict[str, Any]:
    """A scripted agent's COMPLETED answer: `{"tools": [...], "results": [...]}`."""
    assert result.status == run_pb2.RUN_STATUS_COMPLETED, result.failure
    value = json.loads(json.loads(result.output_json))
    assert isinstance(value, dict)
    return value


# -- the client side ------------------------------------------------------------------------------------

Stub = harness_service_pb2_grpc.HarnessServiceStub


async def stream_run(stub: Stub, **spec: Any) -> tuple[list[events_pb2.RunEvent], run_pb2.RunResult]:
    """One `StreamRun` read to its end: every event, and the terminal result."""
    request = harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(**spec))
    events = [response.event async for response in stub.StreamRun(request)]
    assert events and events[-1].WhichOneof("event") == "result", events[-1:]
    assert events[0].WhichOneof("event") == "run_started", events[:1]
    return events, events[-1].result


async def run(stub: Stub, **spec: Any) -> run_pb2.RunResult:
    return (await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(**spec)))).result


def demo_output(result: run_pb2.RunResult) -> str:
    """A demo agent's COMPLETED text."""
    assert result.status == run_pb2.RUN_STATUS_COMPLETED, result.failure
    value = json.loads(result.output_json)
    assert isinstance(value, str)
    return value


def quoted(text: str, tool: str) -> Any:
    """The JSON result the demo quotes for `tool` in `Tool results: <tool>: <JSON>` (one tool)."""
    prefix = f"Tool results: {tool}: "
    assert text.startswith(prefix), text
    return json.loads(text.removeprefix(prefix))


def derived_thread_id(*parts: str) -> str:
    """`thread_` + 32 hex of SHA-256 over the NUL-joined parts (CHILDREN §3.2 step 2, §4.2)."""
    return "thread_" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def capability(state: Any, capability_id: str) -> Any:
    """A state's capability namespace (`CapabilityState`), or `None`."""
    found = [entry for entry in state.capability_states if entry.capability_id == capability_id]
    return found[0] if found else None


def registry(state: Any) -> dict[str, Any]:
    """The inline children of a parent state (`a13n.subagents` "2")."""
    entry = capability(state, "a13n.subagents")
    assert entry is not None and entry.version == "2", state.capability_states
    children = json.loads(entry.data_json)["children"]
    assert isinstance(children, dict)
    return children


def delegations(events: list[events_pb2.RunEvent]) -> list[events_pb2.InlineDelegation]:
    return [e.inline_delegation for e in events if e.WhichOneof("event") == "inline_delegation"]


def lifecycle_types(events: list[events_pb2.RunEvent]) -> list[str]:
    return [e.lifecycle.type for e in events if e.WhichOneof("event") == "lifecycle"]


def answer(call: deferred_pb2.DeferredToolCall, output: Any) -> deferred_pb2.CallResult:
    """The §4.4 success value for a completed child."""
    value = {
        "execution_id": call.child.thread_id,
        "subagent": call.child.subagent_name,
        "status": "completed",
        "output": output,
    }
    return deferred_pb2.CallResult(tool_call_id=call.tool_call_id, value_json=json.dumps(value))


def resume_calls(
    suspended: run_pb2.RunResult, *calls: deferred_pb2.CallResult, recovery: bool = False
) -> deferred_pb2.DeferredToolResume:
    return deferred_pb2.DeferredToolResume(
        requests=suspended.deferred,
        results=deferred_pb2.DeferredToolResults(calls=list(calls)),
        recovery=recovery,
    )


def approve_all(suspended: run_pb2.RunResult) -> deferred_pb2.DeferredToolResume:
    approvals = [
        deferred_pb2.ApprovalResult(tool_call_id=a.tool_call_id, approved=deferred_pb2.ToolApproved())
        for a in suspended.deferred.approvals
    ]
    return deferred_pb2.DeferredToolResume(
        requests=suspended.deferred, results=deferred_pb2.DeferredToolResults(approvals=approvals)
    )


def refused(error: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str, dict[str, str], list[str]]:
    """A refused call: (status, ErrorInfo reason, its metadata, the BadRequest field paths)."""
    info = error_info(error)
    assert info is not None and info.domain == "threadline", (error.code(), error.details())
    return error.code(), info.reason, dict(info.metadata), bad_request_fields(error)
