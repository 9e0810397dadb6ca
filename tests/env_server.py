"""Shell environments over gRPC: a scripted `--agent` that drives the shell tools from its prompt, and
`threadline serve --mount` subprocesses whose commands' pids the tests check after the server stops.

The agent reads a JSON plan from the latest prompt: `{"prefix": ..., "steps": [[tool, args], ...]}`.
It calls the steps in order, one per model turn; a string argument `"$N:a.b.0"` is replaced by that
path of this run's N-th tool return, so a step can use a reference or an offset an earlier step got.
Its final text is `{"tools": [...offered...], "results": [...every tool return of this run...]}`.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from conftest import spawn_serve
from google.rpc import error_details_pb2, status_pb2
from logged_serve import LoggedServe
from threadline.v1 import events_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

AGENT_MODULE = "shell_agent"
AGENT_SPEC = f"shell={AGENT_MODULE}:build"

AGENT_SOURCE = '''
import json

from pydantic_ai import Tool
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import (
    ModelRequest, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart,
)

from harness import ExecutableAgent
from harness.testing import scripted_model


def note(text: str) -> str:
    """Echo a note: the agent's own tool, beside the shell tools the server adds."""
    return text


def _prompt(messages):
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    raise AssertionError("no prompt")


def _resolve(value, results):
    if isinstance(value, dict):
        return {key: _resolve(item, results) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolve(item, results) for item in value]
    if isinstance(value, str) and value.startswith("$"):
        index, _, path = value[1:].partition(":")
        found = results[int(index)]
        for key in path.split(".") if path else ():
            found = found[int(key)] if isinstance(found, list) else found[key]
        return found
    return value


def _result(part):
    if isinstance(part, RetryPromptPart):
        return {"retry": str(part.content)}
    content = part.content
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def script(messages, info):
    plan = json.loads(_prompt(messages))
    prefix, steps = plan["prefix"], plan["steps"]
    mine = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, (ToolReturnPart, RetryPromptPart)) and (part.tool_call_id or "").startswith(prefix)
    ]
    results = [_result(part) for part in mine]
    if len(results) >= len(steps):
        final = {"tools": [tool.name for tool in info.function_tools], "results": results}
        return ModelResponse(parts=[TextPart(json.dumps(final))])
    name, args = steps[len(results)]
    call = ToolCallPart(name, _resolve(args, results), tool_call_id=f"{prefix}{len(results)}")
    return ModelResponse(parts=[call])


def build():
    return ExecutableAgent(
        scripted_model(script), capabilities=[Capability(tools=[Tool(note)], id="tests.shell")], name="shell"
    )
'''

ROOT_FLAGS: tuple[str, ...] = ("--allow-root-shell",) if os.name == "posix" and os.geteuid() == 0 else ()
"""CI runs as root: every server with a mount needs `--allow-root-shell` there (ENVIRONMENT §14 C)."""

BOUND = 60.0
"""A safety bound on every wait; never what a test measures."""

SHELL_TOOLS = ("shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal")


def plan(*steps: tuple[str, dict[str, Any]]) -> str:
    """The prompt that makes the scripted agent call `steps` in order (fresh call-id prefix per run)."""
    return json.dumps({"prefix": f"c{uuid.uuid4().hex[:8]}-", "steps": [list(step) for step in steps]})


def wait_for(root: Path, name: str) -> str:
    """A shell snippet that waits for the file `name` in the root (the test creates it): a handshake."""
    return f"while [ ! -e {root / name} ]; do sleep 0.02; done"


def alive(pid: int) -> bool:
    """Whether `pid` names a process that has not exited (a zombie has exited)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def until(condition: Any, what: str, within: float = BOUND) -> None:
    """Poll a condition no event announces (a pid gone, a file written), within a safety bound."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@dataclass
class ShellServer:
    """A running `threadline serve` (stderr collected), its mount root and its commands' pid files."""

    logged: LoggedServe
    root: Path

    @property
    def address(self) -> str:
        return self.logged.address

    @property
    def pids(self) -> Path:
        """Commands write `$$` (and children's `$!`) into files here: `echo $$ > PIDS/main`."""
        return self.root / "pids"

    def recorded(self) -> dict[str, int]:
        return {
            path.name: int(path.read_text())
            for path in sorted(self.pids.iterdir())
            if path.read_text().strip()
        }

    def pid(self, name: str) -> int:
        until(
            lambda: (self.pids / name).exists() and (self.pids / name).read_text().endswith("\n"),
            f"pid {name}",
        )
        return int((self.pids / name).read_text())

    def finish(self) -> dict[str, int]:
        """SIGTERM, wait for the exit (code 0), then wait until every recorded pid is gone; the pids."""
        assert self.logged.stop(timeout=BOUND) == 0, self.logged.lines[-5:]
        pids = self.recorded()
        until(lambda: not any(alive(pid) for pid in pids.values()), f"commands outlived the server: {pids}")
        return pids

    def records(self, event: str) -> list[dict[str, Any]]:
        return [record for record in self.logged.records() if record.get("event") == event]

    def kill_leftovers(self) -> None:
        """The fixture's fallback after a failed test: nothing a command started outlives the suite."""
        if not self.pids.exists():
            return
        for pid in self.recorded().values():
            if alive(pid):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@contextmanager
def shell_server(
    tmp_path: Path, *args: str, mount: bool = True, name: str = "build", ignoring: Sequence[str] = ()
) -> Iterator[ShellServer]:
    """`threadline serve --agent shell=... [--mount NAME=local:ROOT]` for the block (started with the
    signals `ignoring` names ignored).

    Several servers of one test share `tmp_path`'s root and agent module. The block's end is only
    the fallback (SIGKILL, then the recorded pids): tests stop their servers with `finish()`.
    """
    root = (tmp_path / "root").resolve()
    (root / "pids").mkdir(parents=True, exist_ok=True)
    agents = tmp_path / "agents"
    agents.mkdir(exist_ok=True)
    (agents / f"{AGENT_MODULE}.py").write_text(AGENT_SOURCE)
    mounts = ("--mount", f"{name}=local:{root}", *ROOT_FLAGS) if mount else ()
    serve = spawn_serve(
        "--agent", AGENT_SPEC, *mounts, *args, env={"PYTHONPATH": str(agents)}, ignoring=ignoring
    )
    logged = LoggedServe(serve)
    logged._reader = threading.Thread(target=logged._drain, name="serve-stderr", daemon=True)
    logged._reader.start()
    running = ShellServer(logged, root)
    try:
        yield running
    finally:
        process = serve.process
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        logged._reader.join(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        running.kill_leftovers()


# -- the client side ------------------------------------------------------------------------------------


def harness_stub(channel: grpc.aio.Channel) -> harness_service_pb2_grpc.HarnessServiceStub:
    return harness_service_pb2_grpc.HarnessServiceStub(channel)


def spec(text: str, *, state: state_pb2.HarnessState | None = None, **fields: Any) -> run_pb2.RunSpec:
    made = run_pb2.RunSpec(text=text, **{"agent": "shell", **fields})
    if state is not None:
        made.previous_state.CopyFrom(state)
    return made


async def stream_run(
    stub: harness_service_pb2_grpc.HarnessServiceStub, text: str, **fields: Any
) -> tuple[list[events_pb2.RunEvent], run_pb2.RunResult]:
    """One `StreamRun` read to its end: every event, and the terminal result."""
    request = harness_service_pb2.StreamRunRequest(spec=spec(text, **fields))
    events = [response.event async for response in stub.StreamRun(request)]
    assert events and events[-1].WhichOneof("event") == "result", events[-1:]
    return events, events[-1].result


def outcome(result: run_pb2.RunResult) -> dict[str, Any]:
    """A COMPLETED result's final text: `{"tools": [...], "results": [...]}`."""
    assert result.status == run_pb2.RUN_STATUS_COMPLETED, result.failure
    text = json.loads(result.output_json)
    assert isinstance(text, str)
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def results(result: run_pb2.RunResult) -> list[dict[str, Any]]:
    """Every tool return of a COMPLETED run, in call order."""
    returns = outcome(result)["results"]
    assert isinstance(returns, list)
    return returns


def lifecycle(events: Sequence[events_pb2.RunEvent], type_: str) -> list[tuple[int, str, dict[str, Any]]]:
    """The `Lifecycle` events of one type: (index in the stream, kind, payload)."""
    return [
        (index, event.lifecycle.kind, json.loads(event.lifecycle.payload_json))
        for index, event in enumerate(events)
        if event.WhichOneof("event") == "lifecycle" and event.lifecycle.type == type_
    ]


def entries(state: state_pb2.HarnessState) -> list[tuple[str, str, str, str]]:
    """A state's environment entries, as (mount, provider, version, state_json), in order."""
    return [(e.mount_name, e.provider_key, e.state_version, e.state_json) for e in state.environment_states]


def bad_request_fields(error: grpc.aio.AioRpcError) -> list[str] | None:
    """The BadRequest field paths of a failed call; `None` when it carries no BadRequest."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                found = error_details_pb2.BadRequest()
                if detail.Unpack(found):
                    return [violation.field for violation in found.field_violations]
    return None
