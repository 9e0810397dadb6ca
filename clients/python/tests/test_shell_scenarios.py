"""Shell environments driven through `threadline_client` against a real `threadline serve --mount`.

The module starts its own server with `--mount work=local:<fresh temp dir>` (and
`--allow-root-shell` when it runs as root, as CI does). The demo agent's shell words
(`server/demo.py`): `shell <command>` runs it to the end, `shell-bg <command>` starts it and leaves
it running after the 5 s initial wait, `shell-wait [out [err]]` discovers the thread's newest
command, waits up to 10 s for it to finish and reads it from those offsets. The answer quotes the
last tool result: `Tool results: <tool>: <result JSON>`. One more server of a test's own takes its
mounts from a configuration file's `[mounts.NAME]` tables instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import threadline_client as tl
from threadline_client import v1

pytestmark = pytest.mark.anyio

ALL_ACTIONS = [
    "environment.shell.exec",
    "environment.process.list",
    "environment.process.inspect",
    "environment.process.read_output",
    "environment.process.wait",
    "environment.process.write_stdin",
    "environment.process.close_stdin",
    "environment.process.signal",
    "environment.process.kill",
]
SHELL_TOOLS = ["shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal"]
RETRYABLE = {"shell_info", "shell_wait"}
REFERENCE = re.compile(r"^proc-[0-9a-f]{8}-[1-9][0-9]{0,5}$")
WAITS_FOR_GO = "sh -c 'echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished'"
Serve = Callable[..., contextlib.AbstractContextManager[Any]]  # the `serve_with` fixture of conftest.py
POLL_BOUND = 30.0
"""Seconds a test polls for a command's end (a bound for a broken server, not a measure)."""


@dataclass(frozen=True)
class Mounted:
    """A server with one local mount `work`."""

    addr: str
    root: Path


def root_shell_args() -> list[str]:
    """`--allow-root-shell` when the tests run as root: a mount needs the explicit opt-in; CI runs as root."""
    return ["--allow-root-shell"] if os.geteuid() == 0 else []


def mount_args(root: Path) -> list[str]:
    """The flags that give the server the mount `work` at `root`."""
    return ["--mount", f"work=local:{root}", *root_shell_args()]


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory, serve_with: Serve) -> Iterator[Mounted]:
    root = tmp_path_factory.mktemp("mount").resolve()
    with serve_with(*mount_args(root)) as served:
        yield Mounted(served.addr, root)


@pytest.fixture
async def shell(mounted: Mounted) -> AsyncIterator[tl.Client]:
    async with tl.Client(mounted.addr, timeout=60.0) as client:
        yield client


def tool_result(result: tl.RunResult, tool: str) -> dict[str, Any]:
    """The JSON result of `tool` that the demo's answer quotes."""
    assert result.status == tl.RunStatus.COMPLETED, result.failure
    text = tl.output(result)
    prefix = f"Tool results: {tool}: "
    assert text.startswith(prefix), text
    quoted: dict[str, Any] = json.loads(text[len(prefix) :])
    assert quoted["ok"] is True, quoted
    return quoted


def work_entry(state: tl.HarnessState | None) -> dict[str, Any]:
    """The `work` mount's environment state, checked for shape, with `state_json` decoded."""
    assert state is not None
    (entry,) = [e for e in state.environment_states if e.mount_name == "work"]
    assert (entry.provider_key, entry.state_version) == ("threadline_local", "1")
    value: dict[str, Any] = json.loads(entry.state_json)
    assert sorted(value) == ["backend", "commands", "scope"]
    assert re.fullmatch(r"[0-9a-f]{32}", value["backend"]) and re.fullmatch(r"[0-9a-f]{32}", value["scope"])
    return value


async def test_server_info_lists_the_mount_its_provider_and_the_shell_tools(shell: tl.Client) -> None:
    info = await shell.get_server_info()

    (agent,) = [a for a in info.agents if a.name == "default"]
    (mount,) = agent.mounts
    assert (mount.name, mount.provider_key, mount.process_capable) == ("work", "threadline_local", True)
    assert list(mount.actions) == ALL_ACTIONS
    assert [(p.provider_key, list(p.state_versions)) for p in info.environment_providers] == [
        ("threadline_local", ["1"])
    ]
    tools = {tool.name: tool for tool in agent.tools}
    assert set(SHELL_TOOLS) <= set(tools)
    for name in SHELL_TOOLS:
        retryable = name in RETRYABLE
        category = v1.ToolCategory.RECOVERY_RETRYABLE if retryable else v1.ToolCategory.PLAIN
        assert (tools[name].category, tools[name].recovery_retryable) == (category, retryable), name


async def test_a_short_command_completes_in_its_call(shell: tl.Client) -> None:
    result = await shell.run(tl.RunSpec(text="shell printf hello"))

    done = tool_result(result, "shell_exec")
    assert "process_id" not in done  # finished within the initial wait: no reference
    assert done["status"]["phase"] == "exited" and done["status"]["exit_code"] == 0
    assert done["stdout"]["text"] == "hello"
    assert (done["stdout"]["next_offset"], done["stdout"]["observation_closed"]) == (5, True)
    # A final-at-once result retains nothing, so the mount has no scope to export (ENVIRONMENT §9.2).
    assert result.state is not None and list(result.state.environment_states) == []


async def start_in_background(client: tl.Client, command: str) -> tuple[tl.RunResult, dict[str, Any]]:
    """Run 1 of a thread: `shell-bg command`, still running when the run ends."""
    result = await client.run(tl.RunSpec(text=f"shell-bg {command}"))
    started = tool_result(result, "shell_exec")
    assert REFERENCE.match(started["process_id"]), started
    assert started["status"]["phase"] == "running"
    return result, started


async def shell_wait(client: tl.Client, state: tl.HarnessState | None, *offsets: int) -> tl.RunResult:
    words = " ".join(["shell-wait", *map(str, offsets)])
    return await client.run(tl.RunSpec(text=words, previous_state=state))


async def test_a_background_command_is_found_by_a_later_run_and_not_by_a_fork(
    shell: tl.Client, mounted: Mounted
) -> None:
    first, started = await start_in_background(shell, WAITS_FOR_GO)
    assert started["stdout"]["text"] == "started\n"
    entry = work_entry(first.state)
    assert len(entry["commands"]) == 1

    # Run 2 discovers the command under a reference of its own and reads it from offset 0 (after
    # the demo's 10 s wait: the command waits for `go`).
    second = await shell_wait(shell, first.state)
    seen = tool_result(second, "shell_wait")
    assert REFERENCE.match(seen["process_id"]) and seen["process_id"] != started["process_id"]
    assert seen["process_id"].split("-")[1] != started["process_id"].split("-")[1]  # another run's tag
    assert seen["status"]["phase"] == "running"
    assert (seen["stdout"]["text"], seen["stdout"]["start_offset"], seen["stdout"]["next_offset"]) == (
        "started\n",
        0,
        8,
    )
    assert work_entry(second.state) == entry  # the same backend, scope and command

    (mounted.root / "go").touch()
    state, finished = second.state, None
    deadline = time.monotonic() + POLL_BOUND
    while finished is None:
        later = await shell_wait(shell, state, seen["stdout"]["next_offset"])
        page = tool_result(later, "shell_wait")
        state = later.state
        assert page["stdout"]["start_offset"] == 8
        if page["status"]["phase"] != "running" and page["stdout"]["observation_closed"]:
            finished = page
        else:
            assert page["stdout"]["text"] in ("", "finished\n")
            assert time.monotonic() < deadline, f"the command did not finish within {POLL_BOUND} s"
            await anyio.sleep(0.1)
    assert finished["status"]["phase"] == "exited" and finished["status"]["exit_code"] == 0
    assert (finished["stdout"]["text"], finished["stdout"]["next_offset"]) == ("finished\n", 17)
    assert work_entry(state)["scope"] == entry["scope"]

    # Reads never consume: the same offsets give the same bytes again.
    again = tool_result(await shell_wait(shell, state, 8), "shell_wait")
    assert (again["stdout"]["text"], again["stdout"]["next_offset"]) == ("finished\n", 17)
    whole = tool_result(await shell_wait(shell, state), "shell_wait")
    assert (whole["stdout"]["text"], whole["stdout"]["next_offset"]) == ("started\nfinished\n", 17)

    # A fork starts with no environment state, so it reaches none of its parent's commands.
    assert state is not None
    forked = await shell.fork_state(state)
    assert forked.thread_id != first.thread_id and list(forked.environment_states) == []
    on_fork = await shell_wait(shell, forked)
    found = tool_result(on_fork, "shell_info")
    assert (found["processes"], found["has_more"]) == ([], False)
    assert "missing" not in found
    assert on_fork.state is not None and list(on_fork.state.environment_states) == []


def process_gone(pid: int) -> bool:
    """True once `pid` is no longer a live process (gone, or a zombie nobody has reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    if not Path("/proc/self").exists():
        return False  # no /proc to tell a zombie apart: it still exists
    try:
        # "<pid> (<comm>) <state> ...": a zombie has exited; only its reaping is left.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True  # gone between the two looks


async def test_stopping_the_server_kills_what_it_still_ran(serve_with: Serve, tmp_path: Path) -> None:
    root = tmp_path.resolve()
    with serve_with(*mount_args(root)) as served:
        async with tl.Client(served.addr, timeout=60.0) as client:
            await start_in_background(client, "echo $$ > pid; sleep 300")
        pid = int((root / "pid").read_text())
        assert not process_gone(pid)
        # SIGTERM: a graceful stop. Waited for off the event loop, so the closed client's socket
        # really closes; a connection left open holds a graceful stop for its whole drain grace.
        assert await anyio.to_thread.run_sync(served.stop) == 0

        deadline = time.monotonic() + POLL_BOUND
        while not process_gone(pid):
            assert time.monotonic() < deadline, (
                f"pid {pid} still runs {POLL_BOUND} s after the server stopped"
            )
            await anyio.sleep(0.05)


@pytest.mark.parametrize(
    ("field", "value", "status", "reason"),
    [
        ("state_json", '{"backend": "nope"}', tl.StatusCode.INVALID_ARGUMENT, "ENVIRONMENT_STATE_INVALID"),
        ("state_version", "9", tl.StatusCode.FAILED_PRECONDITION, "ENVIRONMENT_STATE_VERSION_UNSUPPORTED"),
    ],
)
async def test_a_broken_local_entry_is_refused_before_the_run(
    shell: tl.Client, field: str, value: str, status: tl.StatusCode, reason: str
) -> None:
    state = await shell.new_state()
    entry = v1.EnvironmentState(
        mount_name="work", provider_key="threadline_local", state_version="1", state_json="{}"
    )
    setattr(entry, field, value)
    state.environment_states = [entry]

    with pytest.raises(tl.ThreadlineError) as caught:
        await shell.run(tl.RunSpec(text="shell printf hello", previous_state=state))

    assert (caught.value.status, caught.value.reason) == (status, reason)
    assert caught.value.metadata["mount"] == "work"
    if reason == "ENVIRONMENT_STATE_VERSION_UNSUPPORTED":
        assert (caught.value.metadata["received"], caught.value.metadata["supported"]) == ("9", "1")


MOUNTS_TOML = """
[mounts.work]
root = "work"                    # relative to the file
agents = ["default"]
env = { GREETING = "hello from the file" }

[mounts.quick]
root = "quick"
agents = ["demo-lead"]
actions = ["environment.shell.exec"]   # foreground commands only
"""
"""Two mounts, each for one agent of the demo's three; `demo-reviewer` gets none."""


async def test_mounts_from_a_configuration_file_reach_only_their_agents(
    serve_with: Serve, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "quick").mkdir()
    config = tmp_path / "threadline.toml"
    config.write_text(MOUNTS_TOML, encoding="utf-8")

    with serve_with("--config", str(config), *root_shell_args()) as served:
        async with tl.Client(served.addr, timeout=60.0) as client:
            info = await client.get_server_info()
            agents = {agent.name: agent for agent in info.agents}
            mounts = {
                name: [(m.name, m.provider_key, list(m.actions), m.process_capable) for m in agent.mounts]
                for name, agent in agents.items()
            }
            assert mounts == {
                "default": [("work", "threadline_local", ALL_ACTIONS, True)],
                "demo-lead": [("quick", "threadline_local", ["environment.shell.exec"], False)],
                "demo-reviewer": [],
            }
            # Only the shell tools a mount's actions offer: a foreground-only mount gets `shell_exec`.
            shell_tools = {
                name: {tool.name for tool in agent.tools} & set(SHELL_TOOLS) for name, agent in agents.items()
            }
            assert shell_tools == {
                "default": set(SHELL_TOOLS),
                "demo-lead": {"shell_exec"},
                "demo-reviewer": set(),
            }

            # The mount's `env` reaches the command.
            greeted = tool_result(
                await client.run(tl.RunSpec(agent="default", text='shell printf "$GREETING"')), "shell_exec"
            )
            assert greeted["status"]["phase"] == "exited" and greeted["status"]["exit_code"] == 0
            assert greeted["stdout"]["text"] == "hello from the file"
            # demo-lead's command runs in its own mount, `quick`, whose root is relative to the file.
            where = tool_result(
                await client.run(tl.RunSpec(agent="demo-lead", text="shell pwd")), "shell_exec"
            )
            assert "process_id" not in where and where["status"]["phase"] == "exited"
            assert where["stdout"]["text"] == f"{tmp_path.resolve() / 'quick'}\n"

            # An agent without a mount has no shell tool to call.
            unmounted = await client.run(tl.RunSpec(agent="demo-reviewer", text="shell printf x"))
            assert unmounted.status == tl.RunStatus.COMPLETED, unmounted.failure
            assert tl.output(unmounted) == "This server has no shell: start it with --mount NAME=local:ROOT."
