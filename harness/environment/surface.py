"""Actions and the tool surface they give (ENVIRONMENT §3.4, §4.1).

One function computes which shell tools a set of mounts offers, so the capability (per run) and the
server's published tool list (`GetServerInfo`) can never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = (
    "ACTIONS",
    "EXEC",
    "INSPECT",
    "KILL",
    "LIST",
    "READ_OUTPUT",
    "RECOVERY_RETRYABLE_TOOLS",
    "SHELL_ACTIONS",
    "SHELL_TOOLS",
    "SIGNAL",
    "STDIN_CLOSE",
    "STDIN_WRITE",
    "TOOLSET_ID",
    "WAIT",
    "is_process_capable",
    "offered_tools",
)

EXEC = "environment.shell.exec"
LIST = "environment.process.list"
INSPECT = "environment.process.inspect"
READ_OUTPUT = "environment.process.read_output"
WAIT = "environment.process.wait"
STDIN_WRITE = "environment.process.write_stdin"
STDIN_CLOSE = "environment.process.close_stdin"
SIGNAL = "environment.process.signal"
KILL = "environment.process.kill"

ACTIONS = (EXEC, LIST, INSPECT, READ_OUTPUT, WAIT, STDIN_WRITE, STDIN_CLOSE, SIGNAL, KILL)
"""Every action, in the order they are published."""

SHELL_ACTIONS = frozenset(ACTIONS)
"""The local provider supports all nine on POSIX."""

SHELL_TOOLS = ("shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal")
"""Every tool a mount can offer, in the order they are offered."""

RECOVERY_RETRYABLE_TOOLS = frozenset({"shell_info", "shell_wait"})
"""No side effects: replayed after a crash (a stale reference then asks the model to rediscover)."""

TOOLSET_ID = "threadline.environment.shell"
"""Deferred-call identities read `tool/threadline.environment.shell/<tool>`."""

_PROCESS = frozenset({EXEC, INSPECT, READ_OUTPUT, WAIT})


def is_process_capable(actions: Iterable[str]) -> bool:
    """Whether commands on a mount can be left running and observed later (else: foreground-only)."""
    return frozenset(actions) >= _PROCESS


def _offers(tool: str, actions: frozenset[str]) -> bool:
    if tool == "shell_exec":
        return EXEC in actions
    if tool == "shell_info":
        return bool({LIST, INSPECT} & actions)
    if tool == "shell_wait":
        return {WAIT, READ_OUTPUT} <= actions
    if tool == "shell_input":
        return bool({STDIN_WRITE, STDIN_CLOSE} & actions)
    return bool({SIGNAL, KILL} & actions)


def offered_tools(
    mounts: Mapping[str, Iterable[str]], *, narrowed: Iterable[str] | None = None
) -> tuple[str, ...]:
    """The shell tools some mount's effective actions allow (`narrowed` can only remove tools)."""
    keep = set(SHELL_TOOLS if narrowed is None else narrowed)
    sets = [frozenset(actions) for actions in mounts.values()]
    return tuple(
        tool for tool in SHELL_TOOLS if tool in keep and any(_offers(tool, actions) for actions in sets)
    )
