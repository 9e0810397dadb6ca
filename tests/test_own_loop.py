"""A run driven on a loop of its own thread (`HarnessRunStream.use_own_loop`, `harness.own_loop`), in process.

A server drives a run with a long history this way so that pydantic-ai's passes over it before each
model request hold that thread, not the server's loop (issue 23, item 14). The run must yield exactly
what it yields on one loop; the barrier and the shell tools must run on the host's loop (where the
store and the processes live); and a cancellation, from outside or asked with `cancel()`, must end it as
on one loop: the caller sees the cancellation only once the run has unwound.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo
from test_environment_runs import Shell, handshake, returns

from harness import (
    DeferredToolResume,
    ExecutableAgent,
    HarnessCheckpointEvent,
    HarnessEvent,
    HarnessRunResultEvent,
    HarnessState,
    RunBindings,
)
from harness.environment import (
    DynamicEnvironmentCapability,
    LocalMountConfig,
    LocalMountLimits,
    LocalProcessBackend,
)
from harness.environment.surface import SHELL_ACTIONS
from harness.events import HarnessExtensionEvent
from harness.testing import scripted_model

pytestmark = pytest.mark.anyio


class Threads:
    """A model, a tool and a barrier that record which thread each ran in."""

    def __init__(self) -> None:
        self.seen: dict[str, set[int]] = {"model": set(), "tool": set(), "barrier": set(), "gate": set()}
        self.tool_entered = threading.Event()
        self.tool_unwound = threading.Event()
        self.block = False

    def model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen["model"].add(threading.get_ident())
        if not returns(messages):
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": "a"}, tool_call_id="L1")])
        return ModelResponse(parts=[TextPart("done")])

    async def lookup(self, key: str) -> str:
        self.seen["tool"].add(threading.get_ident())
        if self.block:
            self.tool_entered.set()
            try:
                await asyncio.Event().wait()  # until cancelled
            finally:
                self.tool_unwound.set()
        return f"value of {key}"

    async def before_model_request(
        self, state: HarnessState, pending_input: DeferredToolResume | None
    ) -> None:
        self.seen["barrier"].add(threading.get_ident())
        await asyncio.sleep(0)  # a real await on the host's loop

    async def before_tool_call(
        self, call_id: str, tool_name: str, args: dict[str, Any], *, tool_kind: str, retryable: bool
    ) -> None:
        self.seen["gate"].add(threading.get_ident())
        await asyncio.sleep(0)  # on the host's loop too


def agent_for(threads: Threads) -> ExecutableAgent[Any]:
    agent = ExecutableAgent(scripted_model(threads.model))
    agent.native.tool_plain(threads.lookup)
    return agent


def shape(item: Any) -> tuple[Any, ...]:
    """What an item says, without its ids and times (which differ between two runs)."""
    if isinstance(item, HarnessEvent):
        event = item.event
        if isinstance(event, HarnessExtensionEvent):
            return ("event", item.sequence, event.kind, event.payload.get("type"))
        return ("event", item.sequence, type(event).__name__)
    if isinstance(item, HarnessCheckpointEvent):
        return ("checkpoint", item.sequence, len(item.state.message_history))
    assert isinstance(item, HarnessRunResultEvent)
    return ("result", item.sequence, item.result.status, item.result.output)


async def items_of(threads: Threads, *, own_loop: bool) -> list[tuple[Any, ...]]:
    stream = agent_for(threads).stream("go", checkpoints=True, barrier=threads)
    if own_loop:
        stream.use_own_loop()
    async with stream:
        return [shape(item) async for item in stream]


async def test_a_run_on_its_own_loop_yields_what_it_yields_on_one_loop() -> None:
    here = threading.get_ident()
    one, own = Threads(), Threads()
    expected = await items_of(one, own_loop=False)
    assert await items_of(own, own_loop=True) == expected
    assert expected[-1] == ("result", len(expected) - 1, "completed", "done")
    assert one.seen == {"model": {here}, "tool": {here}, "barrier": {here}, "gate": {here}}
    [runner] = own.seen["model"]
    assert runner != here and own.seen["tool"] == {runner}, "the run, its model and tools: on their thread"
    assert own.seen["barrier"] == {here} and own.seen["gate"] == {here}, (
        "the barrier and gate: on the host's loop"
    )


async def test_a_cancellation_from_outside_ends_only_after_the_run_unwound() -> None:
    threads = Threads()
    threads.block = True
    stream = agent_for(threads).stream("go")
    stream.use_own_loop()

    async def consume() -> None:
        async with stream:
            async for _ in stream:
                pass

    task = asyncio.ensure_future(consume())
    assert await asyncio.to_thread(threads.tool_entered.wait, 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert threads.tool_unwound.is_set(), "the run's own finally ran before the caller went on"
    state = await stream.export_state()  # normalized, as on one loop
    assert [type(m).__name__ for m in state.message_history][-1] == "ModelRequest"


async def test_cancel_ends_a_run_on_its_own_loop_with_a_cancelled_result() -> None:
    threads = Threads()
    threads.block = True
    stream = agent_for(threads).stream("go")
    stream.use_own_loop()

    async def cancel_in_the_tool() -> None:
        assert await asyncio.to_thread(threads.tool_entered.wait, 60)
        stream.cancel()  # while the consumer waits on the stream: the token reaches the run's loop

    async with stream:
        canceller = asyncio.ensure_future(cancel_in_the_tool())
        async for _ in stream:
            pass
        await canceller
    assert stream.result is not None and stream.result.status == "cancelled"
    assert threads.tool_unwound.is_set()


async def test_the_loop_is_chosen_before_the_run_starts() -> None:
    stream = agent_for(Threads()).stream("go")
    async with stream:
        with pytest.raises(Exception, match="before `async with`"):
            stream.use_own_loop()


async def shell_run(backend: LocalProcessBackend, root: Path, name: str, *, own_loop: bool) -> Any:
    """A run that starts a command waiting for file `name` and reads it once; its result and event kinds."""
    command = f"printf a; {handshake(root, name)}; printf b"

    def wait0(prev: dict[str, Any] | None) -> dict[str, Any]:
        assert prev is not None
        return {"process_id": prev["process_id"], "timeout_seconds": 0}

    shell = Shell(
        [("shell_exec", {"command": command, "execution_timeout_seconds": 60}), ("shell_wait", wait0)]
    )
    agent = ExecutableAgent(scripted_model(shell.script), capabilities=[DynamicEnvironmentCapability()])
    limits = LocalMountLimits(initial_wait_seconds=0.2)
    mount = backend.mount(name, LocalMountConfig(root, limits=limits), actions=SHELL_ACTIONS)
    bindings = replace(RunBindings.embedded(), mounts=[mount])
    stream = agent.stream("go", bindings=bindings, previous_state=HarnessState.new(thread_id=f"thr_{name}"))
    if own_loop:
        stream.use_own_loop()
    async with stream:
        kinds = [
            (item.event.kind, item.event.payload.get("type")) async for item in stream if _extension(item)
        ]
    assert stream.result is not None and stream.result.status == "completed"
    started, waited = shell.seen
    assert started["status"]["phase"] == "running" and waited["stdout"]["text"] == "a"
    return stream.result, kinds


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX only (ENVIRONMENT §14)")
async def test_shell_commands_live_on_the_host_loop_after_a_run_on_its_own(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    async with LocalProcessBackend() as backend:
        _, expected = await shell_run(backend, root, "one", own_loop=False)
        result, kinds = await shell_run(backend, root, "own", own_loop=True)
        assert kinds == expected, "the tools' events, emitted on the host's loop, in the run's order"
        # The run's loop is gone; the command it started goes on, on this loop (its own, `_records`).
        [retained] = backend.commands(backend.scope(result.state.environment_states["own"].state["scope"]))
        (root / "own").touch()
        (root / "one").touch()
        assert await retained.wait_captured(60)
        assert retained.stdout.read(0, 100).text == "ab"


def _extension(item: Any) -> bool:
    return isinstance(item, HarnessEvent) and isinstance(item.event, HarnessExtensionEvent)
