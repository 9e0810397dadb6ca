"""Shell environments through real runs (ENVIRONMENT §14 B, and A through the tools): real subprocesses.

A scripted model calls the shell tools step by step; each step may depend on the previous tool
result (a reference, an offset). Commands synchronise with the test through files (handshakes), never
sleeps; every test closes its backend and checks that the pids its commands recorded are gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from harness import INTERRUPTED_TOOL_RESULT, ExecutableAgent, HarnessState, RunBindings
from harness.context import InstanceIdentity
from harness.environment import (
    DynamicEnvironmentCapability,
    LocalMountConfig,
    LocalMountLimits,
    LocalProcessBackend,
)
from harness.environment.surface import EXEC, INSPECT, LIST, READ_OUTPUT, SHELL_ACTIONS, WAIT
from harness.errors import ErrorCode, RunError, StateError
from harness.events import HarnessExtensionEvent
from harness.state import EnvironmentState
from harness.testing import scripted_model

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX only (ENVIRONMENT §14)"),
]

Step = tuple[str, dict[str, Any] | Callable[[dict[str, Any] | None], dict[str, Any]]]


def returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    return [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]


@dataclass
class Shell:
    """A model that calls `steps` in order, one per turn, then says done; it records what it saw."""

    steps: list[Step]
    seen: list[dict[str, Any]] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    prefix: str = field(default_factory=lambda: f"s{uuid.uuid4().hex[:6]}-")

    def script(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools = list(info.function_tools)
        mine = [r for r in returns(messages) if r.tool_call_id.startswith(self.prefix)]
        if mine and len(self.seen) < len(mine):
            content = mine[-1].content
            self.seen.append(content if isinstance(content, dict) else json.loads(str(content)))
        index = len(mine)
        if index >= len(self.steps):
            return ModelResponse(parts=[TextPart("done")])
        name, args = self.steps[index]
        if callable(args):
            args = args(self.seen[-1] if self.seen else None)
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"{self.prefix}{index}")])


@pytest.fixture
async def backend() -> AsyncIterator[LocalProcessBackend]:
    async with LocalProcessBackend() as made:
        yield made


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "root"
    (made / "sub").mkdir(parents=True)
    return made.resolve()


def config(root: Path, **limits: Any) -> LocalMountConfig:
    return LocalMountConfig(root, limits=LocalMountLimits(**limits))


async def run(
    backend: LocalProcessBackend,
    shell: Shell,
    *,
    root: Path,
    state: HarnessState | None = None,
    actions: frozenset[str] = SHELL_ACTIONS,
    name: str = "work",
    bindings: RunBindings | None = None,
    **limits: Any,
) -> tuple[Any, list[HarnessExtensionEvent]]:
    """One run with one mount restored from `state`'s entry; the result and its extension events."""
    state = state or HarnessState.new(thread_id="thr_envtests")
    mount = backend.mount(
        name, config(root, **limits), actions=actions, restore=state.environment_states.get(name)
    )
    agent = ExecutableAgent(scripted_model(shell.script), capabilities=[DynamicEnvironmentCapability()])
    bound = bindings or RunBindings.embedded()

    bound = replace(bound, mounts=[mount])
    events: list[HarnessExtensionEvent] = []
    result = None
    async with agent.stream("go", bindings=bound, previous_state=state) as stream:
        async for item in stream:
            event = getattr(item, "event", None)
            if isinstance(event, HarnessExtensionEvent):
                events.append(event)
            if getattr(item, "result", None) is not None:
                result = item.result
    assert result is not None
    return result, events


def handshake(root: Path, name: str) -> str:
    """A shell snippet that waits for the file `name` in the root (the test creates it)."""
    return f"while [ ! -e {root / name} ]; do sleep 0.02; done"


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def until(condition: Callable[[], bool], within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


# -- A: the tools on real commands -----------------------------------------------------------------------


async def test_a_short_command_is_final_at_once_and_not_retained(
    backend: LocalProcessBackend, root: Path
) -> None:
    shell = Shell(
        [("shell_exec", {"command": "printf hi"}), ("shell_exec", {"command": "exit 3"}), ("shell_info", {})]
    )
    result, _ = await run(backend, shell, root=root)
    assert result.status == "completed"
    first, second, listed = shell.seen
    assert first["ok"] is True and "process_id" not in first
    assert first["status"]["phase"] == "exited" and first["status"]["exit_code"] == 0
    assert (
        first["stdout"]["text"] == "hi"
        and first["stdout"]["next_offset"] == first["stdout"]["available_end"] == 2
    )
    assert first["stdout"]["observation_closed"] and first["stdout"]["producer_complete"]
    assert second["ok"] is True and second["status"]["exit_code"] == 3
    assert listed["ok"] is True and listed["processes"] == []
    assert result.state.environment_states == {}, "nothing retained: no scope, no state"


async def test_a_background_command_reads_without_consuming(backend: LocalProcessBackend, root: Path) -> None:
    command = f"printf a; {handshake(root, 'go')}; printf b"

    def wait0(prev: dict[str, Any] | None) -> dict[str, Any]:
        assert prev is not None
        return {"process_id": prev["process_id"], "timeout_seconds": 0}

    def at_next(prev: dict[str, Any] | None) -> dict[str, Any]:
        assert prev is not None
        return {
            "process_id": prev["process_id"],
            "stdout_offset": prev["stdout"]["next_offset"],
            "timeout_seconds": 0,
        }

    def past_end(prev: dict[str, Any] | None) -> dict[str, Any]:
        assert prev is not None
        return {"process_id": prev["process_id"], "stdout_offset": 99, "timeout_seconds": 0}

    shell = Shell(
        [
            ("shell_exec", {"command": command, "execution_timeout_seconds": 60}),
            ("shell_wait", wait0),
            ("shell_wait", wait0),
            ("shell_wait", at_next),
            ("shell_wait", past_end),
        ]
    )
    result, _ = await run(backend, shell, root=root, initial_wait_seconds=0.2)
    started, first, again, empty, invalid = shell.seen
    assert started["process_id"].startswith("proc-") and started["status"]["phase"] == "running"
    assert first["stdout"] == again["stdout"], "the same offsets return the same bytes"
    assert first["stdout"]["text"] == "a"
    assert empty["stdout"]["text"] == "" and empty["stdout"]["more_available"] is False
    assert invalid == {
        "ok": False,
        "error": {
            "code": "environment_offset_invalid",
            "message": invalid["error"]["message"],
            "hint": invalid["error"]["hint"],
            "details": invalid["error"]["details"],
        },
    }
    (root / "go").touch()
    [retained] = backend.commands(backend.scope(result.state.environment_states["work"].state["scope"]))
    assert await retained.wait_captured(30)
    assert retained.stdout.read(0, 100).text == "ab"


# -- B: references, close, fork, restore ------------------------------------------------------------------


async def test_a_reference_with_a_trailing_newline_is_malformed(
    backend: LocalProcessBackend, root: Path
) -> None:
    """The reference pattern must match the whole value: `proc-…-1\\n` is no reference of this run."""

    def with_newline(prev: dict[str, Any] | None) -> dict[str, Any]:
        assert prev is not None
        return {"process_id": prev["process_id"] + "\n", "timeout_seconds": 0}

    shell = Shell([("shell_exec", {"command": "sleep 60"}), ("shell_wait", with_newline)])
    await run(backend, shell, root=root, initial_wait_seconds=0.2)
    started, waited = shell.seen
    assert started["process_id"].startswith("proc-")
    assert waited["ok"] is False and waited["error"]["code"] == "environment_reference_unknown"
    assert waited["error"]["details"] == {"reason": "malformed"}


async def test_references_are_run_local_and_discovery_gives_new_ones(
    backend: LocalProcessBackend, root: Path
) -> None:
    command = f"echo $$ > {root / 'pid'}; printf early; {handshake(root, 'go')}; printf late; sleep 60"
    first = Shell([("shell_exec", {"command": command, "execution_timeout_seconds": 120})])
    result1, _ = await run(backend, first, root=root, initial_wait_seconds=0.2)
    r1 = first.seen[0]["process_id"]
    pid = int((root / "pid").read_text())
    assert not pid_gone(pid), "run close kills nothing (§8)"
    (root / "go").touch()

    def wait_new(prev: dict[str, Any] | None) -> dict[str, Any]:
        assert prev is not None
        [item] = prev["processes"]
        return {"process_id": item["process_id"], "timeout_seconds": 0}

    def kill(prev: dict[str, Any] | None) -> dict[str, Any]:
        assert prev is not None
        return {"process_id": prev["process_id"], "signal": "kill"}

    second = Shell(
        [
            ("shell_wait", {"process_id": r1, "timeout_seconds": 0}),
            ("shell_info", {}),
            ("shell_wait", wait_new),
            ("shell_signal", kill),
        ]
    )
    await until(lambda: (root / "go").exists())
    result2, _ = await run(backend, second, root=root, state=result1.state)
    stale, listed, read, killed = second.seen
    assert stale["ok"] is False and stale["error"]["code"] == "environment_reference_unknown"
    assert stale["error"]["details"] == {"reason": "other_run"}
    [item] = listed["processes"]
    assert item["process_id"] != r1 and item["origin"] == "earlier_run"
    assert item["command"] == command[:200]
    await until(
        lambda: (
            "late"
            in backend.commands(backend.scope(result2.state.environment_states["work"].state["scope"]))[0]
            .stdout.read(0, 100)
            .text
        )
    )
    assert killed["ok"] is True and killed["accepted"] is True
    await until(lambda: pid_gone(pid))
    assert read["process_id"] == item["process_id"]


async def test_a_fork_reaches_none_of_its_parents_commands(backend: LocalProcessBackend, root: Path) -> None:
    command = f"echo $$ > {root / 'pid'}; sleep 60"
    parent = Shell([("shell_exec", {"command": command, "execution_timeout_seconds": 120})])
    result, _ = await run(backend, parent, root=root, initial_wait_seconds=0.1)
    assert "work" in result.state.environment_states
    branch_state = result.state.fork()
    assert branch_state.environment_states == {}
    branch = Shell([("shell_info", {})])
    branched, _ = await run(backend, branch, root=root, state=branch_state)
    assert branch.seen[0]["processes"] == []
    assert not pid_gone(int((root / "pid").read_text())), "the parent's command is unaffected"
    assert branched.state.environment_states == {}


async def test_a_state_copied_to_another_thread_is_not_restored(
    backend: LocalProcessBackend, root: Path
) -> None:
    first = Shell([("shell_exec", {"command": "sleep 60", "execution_timeout_seconds": 120})])
    result, _ = await run(backend, first, root=root, initial_wait_seconds=0.1)
    copied = HarnessState.new(thread_id="thr_someoneelse", environment_states=result.state.environment_states)
    second = Shell(
        [("shell_info", {}), ("shell_exec", {"command": "sleep 60", "execution_timeout_seconds": 120})]
    )
    result2, events = await run(backend, second, root=root, state=copied, initial_wait_seconds=0.1)
    assert [e.payload for e in events if e.payload["type"] == "environment_state_not_restored"] == [
        {"type": "environment_state_not_restored", "alias": "work", "reason": "thread_mismatch"}
    ]
    assert second.seen[0]["processes"] == [] and "missing" not in second.seen[0]
    new_scope = result2.state.environment_states["work"].state["scope"]
    assert new_scope != result.state.environment_states["work"].state["scope"], "a fresh scope"


async def test_another_principal_or_root_is_not_restored(
    backend: LocalProcessBackend, root: Path, tmp_path: Path
) -> None:
    first = Shell([("shell_exec", {"command": "sleep 60", "execution_timeout_seconds": 120})])
    result, _ = await run(backend, first, root=root, initial_wait_seconds=0.1)
    other = RunBindings(instance=InstanceIdentity("local", "someone", "x"))
    _, events = await run(backend, Shell([("shell_info", {})]), root=root, state=result.state, bindings=other)
    assert [e.payload["reason"] for e in events if e.payload["type"] == "environment_state_not_restored"] == [
        "owner_mismatch"
    ]
    elsewhere = (tmp_path / "elsewhere").resolve()
    elsewhere.mkdir()
    _, events = await run(backend, Shell([("shell_info", {})]), root=elsewhere, state=result.state)
    assert [e.payload["reason"] for e in events if e.payload["type"] == "environment_state_not_restored"] == [
        "target_mismatch"
    ]


async def test_a_restarted_backend_reports_the_commands_missing(root: Path) -> None:
    async with LocalProcessBackend() as old:
        first = Shell(
            [
                (
                    "shell_exec",
                    {"command": f"echo $$ > {root / 'pid'}; sleep 60", "execution_timeout_seconds": 120},
                )
            ]
        )
        result, _ = await run(old, first, root=root, initial_wait_seconds=0.1)
        pid = int((root / "pid").read_text())
    assert pid_gone(pid), "closing the backend stops its commands (§11)"
    entry = result.state.environment_states["work"]
    async with LocalProcessBackend() as new:
        second = Shell([("shell_info", {})])
        result2, events = await run(new, second, root=root, state=result.state)
    assert [e.payload["reason"] for e in events if e.payload["type"] == "environment_state_not_restored"] == [
        "backend_changed"
    ]
    [missing] = second.seen[0]["missing"]
    assert missing == {"started_at": entry.state["commands"][0]["started_at"], "status": {"phase": "missing"}}
    assert second.seen[0]["processes"] == []
    assert result2.state.environment_states["work"].model_dump_json() == entry.model_dump_json(), (
        "carried as it was"
    )


async def test_restored_entries_that_cannot_be_read_fail_before_the_run(
    backend: LocalProcessBackend, root: Path
) -> None:
    newer = EnvironmentState(provider_key="threadline_local", state_version="2", state={})
    with pytest.raises(StateError) as caught:
        backend.mount("work", config(root), restore=newer)
    assert caught.value.code == ErrorCode.ENVIRONMENT_STATE_VERSION_UNSUPPORTED
    assert caught.value.details == {"mount": "work", "received": "2", "supported": "1"}
    broken = EnvironmentState(provider_key="threadline_local", state_version="1", state={"backend": "x"})
    with pytest.raises(StateError) as caught:
        backend.mount("work", config(root), restore=broken)
    assert caught.value.code == ErrorCode.ENVIRONMENT_STATE_INVALID and caught.value.details == {
        "mount": "work"
    }
    docker = EnvironmentState(provider_key="docker", state_version="3", state={"container": "c1"})
    state = HarnessState.new(thread_id="thr_envtests", environment_states={"work": docker, "other": docker})
    result, _ = await run(backend, Shell([("shell_info", {})]), root=root, state=state)
    assert result.state.environment_states == {"work": docker, "other": docker}, "foreign entries carried"


async def test_export_order_and_nothing_leaks_into_state(backend: LocalProcessBackend, root: Path) -> None:
    marker = "MARKER-7f3a"
    command = f"echo {marker}-output; echo $$ > {root / 'pid'}; sleep 60"
    unbound = EnvironmentState(provider_key="docker", state_version="1", state={"x": 1})
    state = HarnessState.new(thread_id="thr_envtests", environment_states={"kept": unbound})
    shell = Shell(
        [("shell_exec", {"command": command, "execution_timeout_seconds": 120, "environment": {"V": marker}})]
    )
    result, _ = await run(backend, shell, root=root, state=state, initial_wait_seconds=0.1)
    assert list(result.state.environment_states) == ["kept", "work"], "previous entries first, then appended"
    assert result.state.environment_states["kept"] == unbound
    text = result.state.environment_states["work"].model_dump_json()
    pid = (root / "pid").read_text().strip()
    for secret in (str(root), marker, "sleep 60"):
        assert secret not in text
    # The pid as a number of its own: its digits may well occur inside a timestamp or a hex id.
    assert re.search(rf"(?<![0-9A-Za-z]){pid}(?![0-9A-Za-z])", text) is None, text
    assert result.state.agent_context_state == state.agent_context_state, "no capability namespace added"


async def test_binding_checks(backend: LocalProcessBackend, root: Path) -> None:
    agent = ExecutableAgent(scripted_model(Shell([]).script), capabilities=[DynamicEnvironmentCapability()])
    mount = backend.mount("work", config(root))

    def reason(bindings: RunBindings) -> Any:
        with pytest.raises(RunError) as caught:
            agent.stream("go", bindings=bindings)
        assert caught.value.code == ErrorCode.RUN_BINDINGS_INVALID
        return caught.value.details["reason"]

    base = RunBindings.embedded()

    assert reason(replace(base, mounts=["not a mount"])) == "not_a_mount"
    assert reason(replace(base, mounts=[backend.mount("Bad Name", config(root))])) == "name"
    assert reason(replace(base, mounts=[backend.mount("work\n", config(root))])) == "name"
    assert reason(replace(base, mounts=[mount], default_mount="nope")) == "default_unknown"
    stream = agent.stream("go", bindings=replace(base, mounts=[mount]))
    assert reason(replace(base, mounts=[mount])) == "adapter_reused"
    view = stream.context.environment
    assert view is not None and view.default_mount == "work"
    assert [(m.name, m.actions, m.process_capable) for m in view.mounts] == [("work", SHELL_ACTIONS, True)]
    assert agent.stream("go").context.environment is None


async def test_the_tool_surface_follows_the_actions(backend: LocalProcessBackend, root: Path) -> None:
    cases: list[tuple[frozenset[str], list[str]]] = [
        (frozenset(), []),
        (frozenset({EXEC}), ["shell_exec"]),
        (frozenset({EXEC, INSPECT}), ["shell_exec", "shell_info"]),
        (frozenset({EXEC, INSPECT, READ_OUTPUT, WAIT}), ["shell_exec", "shell_info", "shell_wait"]),
        (SHELL_ACTIONS, ["shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal"]),
    ]
    for actions, names in cases:
        shell = Shell([])
        await run(backend, shell, root=root, actions=actions)
        assert [t.name for t in shell.tools] == names, actions
        schemas = {t.name: t.parameters_json_schema for t in shell.tools}
        if "shell_info" in schemas:
            info = schemas["shell_info"]
            if LIST in actions:
                assert "limit" in info["properties"] and "process_id" not in info.get("required", [])
            else:
                assert "limit" not in info["properties"] and info["required"] == ["process_id"]
        if "shell_exec" in schemas:
            assert ("keep_stdin_open" in schemas["shell_exec"]["properties"]) == (
                "environment.process.write_stdin" in actions
            )


async def test_a_foreground_only_mount_runs_to_the_end_and_keeps_nothing(
    backend: LocalProcessBackend, root: Path
) -> None:
    shell = Shell([("shell_exec", {"command": "printf x; printf y >&2"})])
    result, _ = await run(backend, shell, root=root, actions=frozenset({EXEC}))
    [done] = shell.seen
    assert done["ok"] is True and "process_id" not in done
    assert (done["stdout"]["text"], done["stderr"]["text"]) == ("x", "y")
    assert result.state.environment_states == {}


async def test_events_run_started_then_diagnostics_then_shell_status(root: Path) -> None:
    async with LocalProcessBackend() as old:
        first = Shell([("shell_exec", {"command": "sleep 60", "execution_timeout_seconds": 120})])
        result, _ = await run(old, first, root=root, initial_wait_seconds=0.1)
    async with LocalProcessBackend() as new:
        second = Shell([("shell_exec", {"command": "exit 4"})])
        agent = ExecutableAgent(scripted_model(second.script), capabilities=[DynamicEnvironmentCapability()])
        mount = new.mount("work", config(root), restore=result.state.environment_states["work"])

        kinds: list[str] = []
        async with agent.stream(
            "go", bindings=replace(RunBindings.embedded(), mounts=[mount]), previous_state=result.state
        ) as stream:
            async for item in stream:
                event = getattr(item, "event", None)
                if isinstance(event, HarnessExtensionEvent):
                    kinds.append(event.payload["type"])
    assert kinds[0] == "run_started" and kinds[1] == "environment_state_not_restored"
    assert "shell_status" in kinds


# -- cancellation, recovery, export, denial, the shell's own rules --------------------------------------


async def cancelled_while_waiting(
    backend: LocalProcessBackend, root: Path, actions: frozenset[str], command: str
) -> Any:
    """A run whose `shell_exec` is cancelled once the command has started (its pid file exists)."""
    shell = Shell([("shell_exec", {"command": command, "execution_timeout_seconds": 120})])
    agent = ExecutableAgent(scripted_model(shell.script), capabilities=[DynamicEnvironmentCapability()])
    mount = backend.mount("work", config(root, initial_wait_seconds=60), actions=actions)

    stream = agent.stream("go", bindings=replace(RunBindings.embedded(), mounts=[mount]))

    async def cancel_once_started() -> None:
        await until(lambda: (root / "pid").exists() and bool((root / "pid").read_text().strip()))
        stream.cancel()

    task = asyncio.ensure_future(cancel_once_started())
    async with stream:
        async for _item in stream:
            pass
    await task
    assert stream.result is not None and stream.result.status == "cancelled"
    return stream.result


async def test_a_cancelled_foreground_command_is_killed(backend: LocalProcessBackend, root: Path) -> None:
    await cancelled_while_waiting(backend, root, frozenset({EXEC}), f"echo $$ > {root / 'pid'}; sleep 60")
    pid = int((root / "pid").read_text())
    await until(lambda: pid_gone(pid))


async def test_a_command_cancelled_in_its_initial_wait_keeps_running_and_is_found_next_run(
    backend: LocalProcessBackend, root: Path
) -> None:
    result = await cancelled_while_waiting(
        backend, root, SHELL_ACTIONS, f"echo $$ > {root / 'pid'}; sleep 60"
    )
    pid = int((root / "pid").read_text())
    assert not pid_gone(pid)
    assert "work" in result.state.environment_states, "retained: the state names its scope"
    shell = Shell([("shell_info", {})])
    await run(backend, shell, root=root, state=result.state)
    [item] = shell.seen[0]["processes"]
    assert item["status"]["phase"] == "running" and item["origin"] == "earlier_run"


async def test_an_interrupted_shell_exec_gets_the_unknown_result_and_never_runs_twice(
    backend: LocalProcessBackend, root: Path
) -> None:
    """A checkpoint with an unanswered `shell_exec` (a crash): `declared` answers it unknown; the
    replayed `shell_info` (recovery-retryable) runs; an old reference in a replayed wait is `other_run`."""
    counter = root / "count"
    command = f"echo x >> {counter}"
    calls = ModelResponse(
        parts=[
            ToolCallPart("shell_exec", {"command": command}, tool_call_id="c1"),
            ToolCallPart("shell_info", {}, tool_call_id="c2"),
            ToolCallPart(
                "shell_wait", {"process_id": "proc-0000abcd-1", "timeout_seconds": 0}, tool_call_id="c3"
            ),
        ]
    )

    crashed = HarnessState.new(
        thread_id="thr_envtests", message_history=[ModelRequest(parts=[UserPromptPart("go")]), calls]
    )
    shell = Shell([])
    result, _ = await run(backend, shell, root=root, state=crashed)
    assert result.status == "completed"
    answers = {r.tool_call_id: r for r in returns(list(result.state.message_history))}

    assert answers["c1"].content == INTERRUPTED_TOOL_RESULT
    assert not counter.exists(), "the interrupted command is not run again"
    info = answers["c2"].content
    info = info if isinstance(info, dict) else json.loads(str(info))
    assert info["ok"] is True and info["processes"] == []
    wait = answers["c3"].content
    wait = wait if isinstance(wait, dict) else json.loads(str(wait))
    assert wait["error"]["code"] == "environment_reference_unknown" and wait["error"]["details"] == {
        "reason": "other_run"
    }


async def test_export_during_a_live_command_includes_its_entry(
    backend: LocalProcessBackend, root: Path
) -> None:
    shell = Shell(
        [
            (
                "shell_exec",
                {
                    "command": f"echo $$ > {root / 'pid'}; {handshake(root, 'go')}",
                    "execution_timeout_seconds": 120,
                },
            )
        ]
    )
    agent = ExecutableAgent(scripted_model(shell.script), capabilities=[DynamicEnvironmentCapability()])
    mount = backend.mount("work", config(root, initial_wait_seconds=0.1))

    exported: list[HarnessState] = []
    async with agent.stream("go", bindings=replace(RunBindings.embedded(), mounts=[mount])) as stream:
        async for item in stream:
            event = getattr(item, "event", None)
            if getattr(event, "event_kind", None) == "function_tool_result":
                exported.append(await stream.export_state())
        final = stream.result
    assert final is not None and exported
    assert "work" in exported[-1].environment_states
    assert final.state.environment_states == exported[-1].environment_states
    assert await stream.export_state() == final.state
    (root / "go").touch()


async def test_denied_on_the_weaker_mount_and_confined_to_the_root(
    backend: LocalProcessBackend, root: Path, tmp_path: Path
) -> None:
    weak_root = (tmp_path / "weak").resolve()
    weak_root.mkdir()
    (root / "out").symlink_to(tmp_path)
    shell = Shell(
        [
            ("shell_exec", {"command": "sleep 60", "alias": "weak", "keep_stdin_open": True}),
            ("shell_exec", {"command": "pwd", "cwd": "sub"}),
            ("shell_exec", {"command": "pwd", "cwd": ".."}),
            ("shell_exec", {"command": "pwd", "cwd": "out"}),
            ("shell_exec", {"command": "pwd", "cwd": "missing"}),
            ("shell_exec", {"command": "pwd", "alias": "nope"}),
        ]
    )
    agent = ExecutableAgent(scripted_model(shell.script), capabilities=[DynamicEnvironmentCapability()])
    strong = backend.mount("work", config(root))
    weak = backend.mount("weak", config(weak_root), actions=frozenset({EXEC}))

    await agent.run(
        "go", bindings=replace(RunBindings.embedded(), mounts=[strong, weak], default_mount="work")
    )
    denied, inside, up, link, missing, unknown = shell.seen
    assert denied["error"]["code"] == "environment_denied"
    assert denied["error"]["details"] == {"action": "environment.process.write_stdin", "mount": "weak"}
    assert inside["stdout"]["text"].strip() == str(root / "sub")
    assert up["error"]["code"] == link["error"]["code"] == "environment_path_outside_mount"
    assert missing["error"]["code"] == "environment_not_found"
    assert unknown["error"]["code"] == "environment_mount_unknown"
    for result in shell.seen:
        assert str(tmp_path) not in json.dumps(result["error"]) if not result["ok"] else True


async def test_stdin_and_signals_through_the_tools(backend: LocalProcessBackend, root: Path) -> None:
    def ref(prev: dict[str, Any] | None) -> str:
        assert prev is not None
        return str(prev["process_id"])

    first: list[str] = []

    def write(prev: dict[str, Any] | None) -> dict[str, Any]:
        first.append(ref(prev))
        return {"process_id": first[0], "data": "hello\n", "close_stdin": True}

    shell = Shell(
        [
            ("shell_exec", {"command": "cat", "keep_stdin_open": True, "execution_timeout_seconds": 60}),
            ("shell_input", write),
            ("shell_wait", lambda _prev: {"process_id": first[0], "timeout_seconds": 30}),
            ("shell_input", lambda _prev: {"process_id": first[0], "data": "more"}),
            ("shell_exec", {"command": "sleep 60", "execution_timeout_seconds": 120}),
            ("shell_signal", lambda prev: {"process_id": ref(prev), "signal": "interrupt"}),
            (
                "shell_wait",
                lambda _prev: {"process_id": f"proc-{first[0].split('-')[1]}-2", "timeout_seconds": 30},
            ),
        ]
    )
    _, events = await run(backend, shell, root=root, initial_wait_seconds=0.2)
    started, wrote, read, again, sleeping, signalled, ended = shell.seen
    assert sleeping["status"]["phase"] == "running" and sleeping["process_id"].endswith("-2")
    assert started["stdin_open"] is True and wrote["accepted_bytes"] == 6 and wrote["stdin_open"] is False
    assert read["stdout"]["text"] == "hello\n" and read["status"]["exit_code"] == 0
    assert again["error"]["code"] == "environment_conflict"
    assert signalled["accepted"] is True
    assert ended["status"]["phase"] == "signaled" and ended["status"]["signal"] == "interrupt"
    statuses = [e.payload for e in events if e.payload["type"] == "shell_status"]
    assert statuses[0]["phase"] == "running" and statuses[0]["process_id"] == first[0]
    assert any(s["process_id"] == first[0] and s["phase"] == "exited" for s in statuses), statuses


def test_the_documented_shell_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "environment.md").read_text(encoding="utf-8")
    section = page.split("## In your own program", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    exec(compile(code.group(1), "docs/environment.md", "exec"), {"__name__": "readme_shell"})
    assert capsys.readouterr().out.strip() == "hello from the shell"


# -- parallel calls of one model response (issue 23) ----------------------------------------------------


Batch = list[tuple[str, dict[str, Any]]]


@dataclass
class Parallel:
    """A model whose every response makes one batch of calls (run concurrently), then says done;
    `seen[i]` holds batch i's returns in call order."""

    batches: list[Batch]
    seen: list[list[dict[str, Any]]] = field(default_factory=list)
    prefix: str = field(default_factory=lambda: f"p{uuid.uuid4().hex[:6]}-")

    def script(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        index = sum(isinstance(message, ModelResponse) for message in messages)
        if index:
            batch = f"{self.prefix}{index - 1}-"
            mine = [r for r in returns(messages) if r.tool_call_id.startswith(batch)]
            mine.sort(key=lambda r: int(r.tool_call_id.removeprefix(batch)))
            contents = [r.content for r in mine]
            self.seen.append([c if isinstance(c, dict) else json.loads(str(c)) for c in contents])
        if index >= len(self.batches):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f"{self.prefix}{index}-{n}")
                for n, (name, args) in enumerate(self.batches[index])
            ]
        )


async def run_parallel(
    backend: LocalProcessBackend, model: Parallel, mount_config: LocalMountConfig, actions: frozenset[str]
) -> Any:
    agent = ExecutableAgent(scripted_model(model.script), capabilities=[DynamicEnvironmentCapability()])
    mount = backend.mount("work", mount_config, actions=actions)
    return await agent.run("go", bindings=replace(RunBindings.embedded(), mounts=[mount]))


@pytest.mark.parametrize("actions", [SHELL_ACTIONS, frozenset({EXEC})], ids=["background", "foreground"])
async def test_parallel_calls_past_the_live_cap_are_refused(
    backend: LocalProcessBackend, root: Path, actions: frozenset[str]
) -> None:
    """One response with limit + 1 `shell_exec` calls: `limit` run, the other is refused, before the
    run's first retained command made its scope (issue 23); then the scope counts them."""
    limit = 3
    pids = root / "pids"
    command = f"echo $$ >> {pids}; {handshake(root, 'go')}"
    background = actions == SHELL_ACTIONS
    batches: list[Batch] = [[("shell_exec", {"command": command})] * (limit + 1)]
    if background:  # the first batch's commands still run, in the scope they made
        batches.append([("shell_exec", {"command": command})])
    model = Parallel(batches)

    async def release() -> None:  # a foreground call returns only once its command ends
        await until(lambda: pids.exists() and len(pids.read_text().split()) >= limit)
        (root / "go").touch()

    releasing = None if background else asyncio.ensure_future(release())
    try:
        result = await run_parallel(
            backend, model, config(root, max_live_commands=limit, initial_wait_seconds=0.2), actions
        )
    finally:
        (root / "go").touch()
        if releasing is not None:
            await releasing
    assert result.status == "completed", result.failure
    refused = [answer for batch in model.seen for answer in batch if not answer["ok"]]
    assert len(refused) == len(batches), model.seen
    for answer in refused:
        assert answer["error"]["code"] == "environment_limit_exceeded"
        assert answer["error"]["details"] == {"limit": limit}
    ran = [answer for answer in model.seen[0] if answer["ok"]]
    assert [answer["status"]["phase"] for answer in ran] == ["running" if background else "exited"] * limit
    assert len(pids.read_text().split()) == limit, "no refused command started"


SWAPPER = (
    "import os, time\n"
    "while True:\n"
    "    os.rename('flip', 'hold'); os.symlink('/', 'flip'); time.sleep(0.001)\n"
    "    os.unlink('flip'); os.rename('hold', 'flip'); time.sleep(0.001)\n"
)


async def test_a_cwd_swapped_for_a_symlink_never_escapes_the_mount(
    backend: LocalProcessBackend, root: Path
) -> None:
    """A command in the mount swaps `flip` between a directory and a symlink to `/` while `shell_exec`
    calls run `pwd -P` in it: each runs inside the mount or is refused, never in `/` (issue 23)."""
    (root / "flip").mkdir()
    mount_config = config(root, max_live_commands=16)
    swapper = await backend.start(
        mount_config, f"exec {sys.executable} -c {shlex.quote(SWAPPER)}", timeout_seconds=300
    )
    turns, width = 20, 15
    model = Parallel([[("shell_exec", {"command": "pwd -P", "cwd": "flip"})] * width] * turns)
    try:
        result = await run_parallel(backend, model, mount_config, SHELL_ACTIONS)
    finally:
        backend.kill(swapper)
    assert result.status == "completed", result.failure
    answers = [answer for batch in model.seen for answer in batch]
    assert len(answers) == turns * width
    ran = [a["stdout"]["text"].strip() for a in answers if a["ok"] and a["status"]["exit_code"] == 0]
    outside = [where for where in ran if not (where == str(root) or where.startswith(f"{root}/"))]
    assert outside == [], f"{len(outside)} of {len(ran)} commands ran outside the mount: {outside[:3]}"
    codes = {answer["error"]["code"] for answer in answers if not answer["ok"]}
    assert codes <= {"environment_path_outside_mount", "environment_not_found"}, codes
    assert ran, "some calls ran"
