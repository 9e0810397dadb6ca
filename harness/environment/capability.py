"""`DynamicEnvironmentCapability`: the shell tools a run's mounts allow (ENVIRONMENT §4).

Per run, `for_run` reads the run's mounts (bound through `RunBindings.mounts`) and offers the tools
some mount's actions allow, with schemas that say only what the mounts can do; each call is checked
again against the one mount it touches. Every tool returns a JSON object, `{"ok": true, ...}` or
`{"ok": false, "error": {...}}`: a tool-level failure is the model's to handle, never the run's.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability, Capability
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from ..context import AgentContext
from ..own_loop import at_home
from ..tools import recovery_retryable
from .adapter import EnvironmentMount
from .capture import Page, read_pair, tail_pair
from .errors import EnvironmentToolError
from .run import RunEnvironment
from .surface import (
    EXEC,
    INSPECT,
    KILL,
    LIST,
    READ_OUTPUT,
    SIGNAL,
    STDIN_CLOSE,
    STDIN_WRITE,
    TOOLSET_ID,
    WAIT,
    offered_tools,
)

__all__ = ("DynamicEnvironmentCapability", "instructions", "published_tools")

Result = dict[str, Any]
_MAX_WAIT_S = 300.0


class DynamicEnvironmentCapability(AbstractCapability[AgentContext]):
    """Offers `shell_exec`, `shell_info`, `shell_wait`, `shell_input`, `shell_signal` per the run's mounts.

    Holds nothing itself: the run's references and watchers belong to the run (`RunEnvironment`),
    which closes them in its own teardown. `shell_tools` can narrow the set, never widen it.
    """

    def __init__(self, *, shell_tools: frozenset[str] | None = None) -> None:
        self.shell_tools = shell_tools

    async def for_run(self, ctx: RunContext[AgentContext]) -> AbstractCapability[AgentContext]:
        environment = _environment_of(ctx.deps)
        if environment is None:
            return Capability()
        tools = offered_tools({m.name: m.actions for m in environment.mounts}, narrowed=self.shell_tools)
        if not tools:
            return Capability()
        return Capability(
            toolsets=[FunctionToolset(_tools(environment, tools), id=TOOLSET_ID)],
            instructions=instructions(environment, tools),
        )


def published_tools(mounts: Mapping[str, Iterable[str]]) -> tuple[ToolDefinition, ...]:
    """The shell tools runs with `mounts` (name → actions) are offered, as declared (for a server's
    published tool list, §12.4): the same function picks them as in `for_run`."""
    unbound = RunEnvironment((), None, lambda _kind, _payload: None)
    return tuple(tool.tool_def for tool in _tools(unbound, offered_tools(mounts)))


def _environment_of(deps: Any) -> RunEnvironment | None:
    environment = getattr(deps, "_environment", None)
    return environment if isinstance(environment, RunEnvironment) else None


def instructions(environment: RunEnvironment, tools: tuple[str, ...]) -> str:
    """The one instruction block (§4.9): mounts by name only, never a host path (it enters history)."""
    lines = ["Shell environments (commands run on the server's machine as its user):"]
    for mount in environment.mounts:
        mine = [tool for tool in tools if tool in offered_tools({mount.name: mount.actions})]
        kind = "commands can run in the background" if mount.process_capable else "foreground commands only"
        default = ", the default" if mount.name == environment.default_mount else ""
        lines.append(f"- mount {mount.name!r}{default}: {kind}; tools: {', '.join(mine) or 'none'}.")
    lines += [
        "Rules: process references (proc-...) belong to this run only; call shell_info() to find commands "
        "started in earlier runs. Reads never consume output: pass back the last next_offset values. An "
        "exit status does not mean all output was captured: keep waiting until both streams are "
        "observation_closed. Do not re-run a command whose outcome is unknown without checking first. Use "
        "cwd rather than cd. stdin is closed unless keep_stdin_open is true. Redirect very large output to "
        "files."
    ]
    return "\n".join(lines)


# -- results --------------------------------------------------------------------------------------------


def _failure(error: EnvironmentToolError) -> Result:
    return {
        "ok": False,
        "error": {"code": error.code, "message": error.message, "hint": error.hint, "details": error.details},
    }


async def _guarded(call: Callable[[], Awaitable[Result]]) -> Result:
    """A tool's answer: its result, or its tool-level failure as an ordinary return (§4.2).

    The call runs on the host's loop, where the mounts' processes live, also for a run on its own loop."""
    try:
        return await at_home(call)
    except EnvironmentToolError as error:
        return _failure(error)


def _require(mount: EnvironmentMount, *actions: str) -> None:
    missing = [action for action in actions if action not in mount.actions]
    if missing:
        raise EnvironmentToolError(
            "environment_denied",
            f"Mount {mount.name!r} does not allow {missing[0]}.",
            "A tool being offered does not grant its actions on every mount.",
            {"action": missing[0], "mount": mount.name},
        )


def _pages(stdout: Page, stderr: Page) -> Result:
    return {"stdout": stdout.to_json(), "stderr": stderr.to_json()}


def _view(mount: EnvironmentMount, reference: str | None, command: Any) -> Result:
    result: Result = {"ok": True}
    if reference is not None:
        result["process_id"] = reference
    result.update(alias=mount.name, status=command.status.to_json(), stdin_open=command.stdin_open)
    return result


# -- the tools ------------------------------------------------------------------------------------------


def _tools(environment: RunEnvironment, offered: tuple[str, ...]) -> list[Tool[AgentContext]]:
    can_write = any(STDIN_WRITE in m.actions for m in environment.mounts)
    can_list = any(LIST in m.actions for m in environment.mounts)
    run = environment
    built: list[Tool[AgentContext]] = []

    async def exec_call(
        command: str,
        cwd: str | None,
        env: dict[str, str] | None,
        timeout: float | None,
        alias: str | None,
        keep_stdin_open: bool,
    ) -> Result:
        run.check_open()
        mount = run.mount(alias)
        _require(mount, EXEC)
        if keep_stdin_open:
            _require(mount, STDIN_WRITE)
        limits = mount.config.limits
        backend = mount.backend
        if not mount.process_capable:
            started = await backend.start(
                mount.config,
                command,
                cwd=cwd,
                environment=env,
                timeout_seconds=timeout if timeout is not None else limits.foreground_timeout_seconds,
                keep_stdin_open=False,
                scope=None,
                owner=mount,  # the mount's live cap holds without a scope too
            )
            try:
                await started.wait_captured(None)
            except asyncio.CancelledError:
                backend.kill(started)  # nothing could observe it later (§4.3)
                backend.drop(started)
                raise
            stdout, stderr = tail_pair(started.stdout, started.stderr, limits.max_page_bytes)
            backend.drop(started)
            run.started(mount, None, started)
            return {**_view(mount, None, started), **_pages(stdout, stderr)}
        starting = asyncio.ensure_future(
            backend.start(
                mount.config,
                command,
                cwd=cwd,
                environment=env,
                timeout_seconds=timeout,
                keep_stdin_open=keep_stdin_open,
                scope=mount.scope,
                owner=mount,  # counted before the first retained command makes the scope
            )
        )
        try:
            started = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Cancelled while spawning: the command may already run. A spawn takes milliseconds, so
            # finish it and keep the command, as a cancel in the initial wait does (§4.3 step 5).
            with contextlib.suppress(Exception):
                _retain(mount, await starting)
            raise
        try:
            captured = await started.wait_captured(limits.initial_wait_seconds)
        except asyncio.CancelledError:
            _retain(mount, started)  # it goes on; a later shell_info() finds it (§4.3 step 5)
            raise
        stdout, stderr = read_pair(started.stdout, started.stderr, 0, 0, limits.max_page_bytes)
        if captured and not stdout.more_available and not stderr.more_available:
            backend.drop(started)  # final at once: never retained, never discoverable
            run.started(mount, None, started)
            return {**_view(mount, None, started), **_pages(stdout, stderr)}
        _retain(mount, started)
        reference = run.reference(mount, started)
        run.started(mount, reference, started)
        return {**_view(mount, reference, started), **_pages(stdout, stderr)}

    if "shell_exec" in offered:

        async def shell_exec(
            ctx: RunContext[AgentContext],
            command: str,
            cwd: str | None = None,
            environment: dict[str, str] | None = None,
            execution_timeout_seconds: float | None = None,
            alias: str | None = None,
            keep_stdin_open: bool = False,
        ) -> Result:
            """Run a shell command (`sh -c`) on a mount; a command still running gets a process_id.

            Args:
                command: The command line.
                cwd: Working directory, relative to the mount's (or absolute inside it).
                environment: Extra environment variables for this command.
                execution_timeout_seconds: Hard deadline; the command is stopped after it.
                alias: The mount; omit for the default mount.
                keep_stdin_open: Keep stdin open for shell_input (else it is at end of file).
            """
            return await _guarded(
                lambda: exec_call(
                    command, cwd, environment, execution_timeout_seconds, alias, keep_stdin_open
                )
            )

        # `keep_stdin_open` is offered only where some mount lets the model write to stdin (§4.1).
        built.append(Tool(shell_exec, prepare=None if can_write else _schema_without("keep_stdin_open")))

    async def info_call(process_id: str | None, alias: str | None, limit: int) -> Result:
        run.check_open()
        if process_id is not None:
            mount, command = run.resolve(process_id)
            if alias is not None and alias != mount.name:
                raise EnvironmentToolError(
                    "environment_request_invalid",
                    "alias names another mount than the process reference.",
                    "Omit alias when passing process_id.",
                    {"alias": alias[:80], "mount": mount.name},
                )
            _require(mount, INSPECT)
            run.observed(mount, process_id, command)
            return {
                **_view(mount, process_id, command),
                "stdout": _ends(command.stdout),
                "stderr": _ends(command.stderr),
            }
        mount = run.mount(alias)
        _require(mount, LIST)
        if not 1 <= limit <= 100:
            raise EnvironmentToolError(
                "environment_request_invalid",
                "limit must be between 1 and 100.",
                "Use limit=50.",
                {"limit": limit},
            )
        commands = mount.commands()
        items = []
        for command in commands[:limit]:
            reference = run.reference(mount, command)
            run.observed(mount, reference, command)
            items.append(
                {
                    "process_id": reference,
                    "origin": "this_run" if command.id in run.started_here else "earlier_run",
                    "status": command.status.to_json(),
                    "stdin_open": command.stdin_open,
                    "command": command.preview,
                }
            )
        result: Result = {
            "ok": True,
            "alias": mount.name,
            "processes": items,
            "has_more": len(commands) > limit,
        }
        if mount.missing:
            result["missing"] = [
                {"started_at": evidence.started_at, "status": {"phase": "missing"}}
                for evidence in mount.missing
            ]
        return result

    if "shell_info" in offered:

        async def shell_info(
            ctx: RunContext[AgentContext],
            process_id: str | None = None,
            alias: str | None = None,
            limit: int = 50,
        ) -> Result:
            """Inspect one command (process_id), or list the mount's commands, earlier runs' included.

            Args:
                process_id: A reference returned in this run; omit to list.
                alias: The mount to list; omit for the default mount.
                limit: At most this many commands (1-100).
            """
            return await _guarded(lambda: info_call(process_id, alias, limit))

        # Without `list` on any mount, only inspection is possible: `process_id` is required (§4.1).
        inspect_only = None if can_list else _schema_without("limit", require="process_id")
        built.append(recovery_retryable(Tool[AgentContext](shell_info, prepare=inspect_only)))

    if "shell_wait" in offered:

        async def shell_wait(
            ctx: RunContext[AgentContext],
            process_id: str,
            stdout_offset: int = 0,
            stderr_offset: int = 0,
            timeout_seconds: float = 30,
        ) -> Result:
            """Wait until a command is fully captured (or the timeout), then read a page of each stream.

            Args:
                process_id: A reference returned in this run.
                stdout_offset: Read stdout from this byte offset (the last next_offset).
                stderr_offset: Read stderr from this byte offset (the last next_offset).
                timeout_seconds: Wait at most this long (0 = just look); a timeout is not an error.
            """

            async def call() -> Result:
                run.check_open()
                mount, command = run.resolve(process_id)
                _require(mount, WAIT, READ_OUTPUT)
                if not 0 <= timeout_seconds <= _MAX_WAIT_S:
                    raise EnvironmentToolError(
                        "environment_request_invalid",
                        "timeout_seconds must be between 0 and 300.",
                        "Wait again with a shorter timeout.",
                        {"timeout_seconds": timeout_seconds},
                    )
                remaining = ctx.remaining_time()  # the run's native deadline, if it has one
                wait = timeout_seconds if remaining is None else min(timeout_seconds, max(0.0, remaining))
                await command.wait_captured(wait)
                stdout, stderr = read_pair(
                    command.stdout,
                    command.stderr,
                    stdout_offset,
                    stderr_offset,
                    mount.config.limits.max_page_bytes,
                )
                run.observed(mount, process_id, command)
                return {**_view(mount, process_id, command), **_pages(stdout, stderr)}

            return await _guarded(call)

        built.append(recovery_retryable(Tool(shell_wait)))

    if "shell_input" in offered:

        async def shell_input(
            ctx: RunContext[AgentContext], process_id: str, data: str = "", close_stdin: bool = False
        ) -> Result:
            """Write to a command's stdin (kept open with keep_stdin_open), and optionally close it.

            Args:
                process_id: A reference returned in this run.
                data: Text to write.
                close_stdin: Close stdin after writing.
            """

            async def call() -> Result:
                run.check_open()
                mount, command = run.resolve(process_id)
                if data:
                    _require(mount, STDIN_WRITE)
                if close_stdin:
                    _require(mount, STDIN_CLOSE)
                if not data and not close_stdin:
                    raise EnvironmentToolError(
                        "environment_request_invalid",
                        "Nothing to do: data is empty and close_stdin is false.",
                        "Pass data, close_stdin=true, or both.",
                    )
                accepted = await command.write_stdin(data.encode(), close=close_stdin)
                run.observed(mount, process_id, command)
                return _control(process_id, command, accepted_bytes=accepted)

            return await _guarded(call)

        built.append(Tool(shell_input))

    if "shell_signal" in offered:

        async def shell_signal(
            ctx: RunContext[AgentContext], process_id: str, signal: Literal["interrupt", "terminate", "kill"]
        ) -> Result:
            """Send interrupt (SIGINT), terminate (SIGTERM) or kill (SIGKILL) to a command's process group.

            Args:
                process_id: A reference returned in this run.
                signal: Which signal.
            """

            async def call() -> Result:
                run.check_open()
                mount, command = run.resolve(process_id)
                _require(mount, KILL if signal == "kill" else SIGNAL)
                accepted = command.signal(signal)
                run.observed(mount, process_id, command)
                return _control(process_id, command, accepted=accepted)

            return await _guarded(call)

        built.append(Tool(shell_signal))
    return built


def _retain(mount: EnvironmentMount, command: Any) -> None:
    """Keep a command in the mount's scope (made now if this is its first); refused → killed, error."""
    try:
        mount.backend.retain(mount.own_scope(), command)
    except EnvironmentToolError:
        mount.backend.kill(command)
        mount.backend.drop(command)
        raise


def _schema_without(
    name: str, *, require: str | None = None
) -> Callable[[RunContext[AgentContext], ToolDefinition], Awaitable[ToolDefinition]]:
    """A `prepare` that takes parameter `name` out of a tool's schema (and makes `require` required)."""

    async def prepare(_ctx: RunContext[AgentContext], tool_def: ToolDefinition) -> ToolDefinition:
        schema = copy.deepcopy(tool_def.parameters_json_schema)
        schema.get("properties", {}).pop(name, None)
        if require is not None:
            described = schema["properties"][require].get("description")
            schema["properties"][require] = {
                "type": "string",
                **({"description": described} if described else {}),
            }
            schema["required"] = sorted({*schema.get("required", []), require})
        return dataclasses.replace(tool_def, parameters_json_schema=schema)

    return prepare


def _control(process_id: str, command: Any, **outcome: Any) -> Result:
    """What `shell_input` and `shell_signal` return: the outcome and the status, never output."""
    return {
        "ok": True,
        "process_id": process_id,
        **outcome,
        "stdin_open": command.stdin_open,
        "status": command.status.to_json(),
    }


def _ends(window: Any) -> Result:
    return {"available_end": window.available_end, "observation_closed": window.observation_closed}
