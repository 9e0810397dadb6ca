"""`LocalProcessBackend`: the long-lived owner of a server's shell commands (ENVIRONMENT §6, §7, §10, §11).

One backend lives as long as the server (or embedding) process: one incarnation, one random `id`.
It starts each command in a session of its own, drains both pipes for the command's whole life whether
or not a run is looking, enforces the execution timeout, cleans up the process group after the root
exits, and keeps finished commands in their scope until retention lets them go. Runs only look: a run
closing kills nothing (§8); `aclose()` (the Host's shutdown) kills everything still running (§11).

A command starts with every signal at its default disposition and none blocked, whatever the Host's
process ignores or blocks (a program started in the background of a script ignores SIGINT and SIGQUIT,
and both survive `fork` and `exec`), and in the very directory the `cwd` check opened (§10.2), never
in a path resolved again. Neither can be done between `fork` and `exec` in this process: `subprocess`'s
`restore_signals` resets three signals only, and a `preexec_fn` (Python in a forked child of a process
with gRPC threads) crashes the child now and then. So the child first runs `_ENTER` in a fresh
interpreter (about 10 ms), which resets both, enters the directory by its descriptor and `exec`s the
shell in place: the command keeps its pid and its session.

The backend keeps its reader, lifecycle and janitor tasks itself, not in a task group, so `aclose()`
may be called from any task of its loop. Each command's own life is in `_records.Command`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from . import _checks
from ._records import Command, Phase, Scope, SignalName, Status
from .adapter import EnvironmentMount
from .config import LocalBackendLimits, LocalMountConfig, LocalMountLimits
from .errors import EnvironmentToolError
from .surface import SHELL_ACTIONS

if TYPE_CHECKING:
    from ..state import EnvironmentState

__all__ = ("Command", "LocalProcessBackend", "Phase", "Scope", "SignalName", "Status")

LOGGER = logging.getLogger("threadline.environment")

_DEFAULT_LIMITS = LocalBackendLimits()


def _held(command: Command) -> int:
    """Bytes a command holds; one not fully captured counts at its full windows, which it may reach."""
    if not command.fully_captured:
        return 2 * command._limits.retained_bytes_per_stream
    return sum(window.available_end - window.available_start for window in (command.stdout, command.stderr))


def _limit(message: str, hint: str, limit: int) -> EnvironmentToolError:
    return EnvironmentToolError("environment_limit_exceeded", message, hint, {"limit": limit})


def _not_started() -> EnvironmentToolError:
    return EnvironmentToolError(
        "environment_unavailable",
        "The shell could not be started.",
        "Check that the mount's shell and directory exist.",
    )


_ENTER = """\
import os, sys, _signal as s
directory, ctype, shell, command = sys.argv[1:]
try:
    for number in s.valid_signals() - {s.SIGKILL, s.SIGSTOP}:
        try:
            s.signal(number, s.SIG_DFL)
        except (OSError, ValueError):
            pass
    s.pthread_sigmask(s.SIG_SETMASK, ())
    os.fchdir(int(directory))
    os.close(int(directory))
    if ctype:
        os.environ["LC_CTYPE"] = ctype[1:]
    else:
        os.environ.pop("LC_CTYPE", None)
    os.execve(shell, [shell, "-c", command], os.environ)
except OSError as error:
    os.write(2, f"threadline: the shell could not be started: {error.strerror}\\n".encode())
    os._exit(127)
"""
"""Run as `python -I -S -c _ENTER DIRECTORY CTYPE SHELL COMMAND`: every signal to its default, an empty
mask, `fchdir(DIRECTORY)`, then `exec`. `_signal` (the module under `signal`) spares importing `enum`.
CTYPE is `=` and the command's `LC_CTYPE`, or empty when it has none: the interpreter sets one in a C
locale (PEP 538), and the command must see its own environment."""


class LocalProcessBackend:
    """Owns the native processes of `threadline_local` mounts for one incarnation.

    Create one per server or embedding process, on the event loop that runs the runs; close it with
    `aclose()` (or `async with`) when the Host shuts down: every live command group is stopped then.
    """

    def __init__(self, limits: LocalBackendLimits = _DEFAULT_LIMITS) -> None:
        self.id = secrets.token_hex(16)
        """The incarnation: states naming another one report `backend_changed` (§9.3)."""
        self.limits = limits
        self._closed = False
        self._stopped = 0
        self._scopes: dict[str, Scope] = {}
        self._commands: dict[str, Command] = {}
        """Every command not yet dropped or evicted, retained or not."""
        self._active: set[Command] = set()
        """Commands whose lifecycle has not ended (spawning, running, cleaning up, draining)."""
        self._spawning: set[asyncio.Task[None]] = set()
        self._sequence = 0
        self._janitor: asyncio.Task[None] | None = None
        self._janitor_wake = asyncio.Event()

    async def __aenter__(self) -> LocalProcessBackend:
        self._ensure_janitor()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    def mount(
        self,
        name: str,
        config: LocalMountConfig,
        *,
        actions: Iterable[str] | None = None,
        restore: EnvironmentState | None = None,
    ) -> EnvironmentMount:
        """A single-use adapter for one run on this backend (§3.2); `restore` is decoded now, fail-closed.

        `actions` defaults to every action the provider supports.

        Raises:
            LimitsConflict: The mount's limits and this backend's allow no command (`check_mount`).
            StateError: `environment_state_version_unsupported`, `environment_state_invalid`.
        """
        self.limits.check_mount(config.limits)

        return EnvironmentMount(
            self, name, config, actions=SHELL_ACTIONS if actions is None else actions, restore=restore
        )

    # -- scopes -----------------------------------------------------------------------------------------

    def new_scope(self, *, thread_id: str, issuer: str, subject: str, mount: str, root: Path) -> Scope:
        """A fresh scope for one (thread, mount), with an unguessable id."""
        self._check_open()
        scope = Scope(thread_id=thread_id, issuer=issuer, subject=subject, mount=mount, root=root)
        self._scopes[scope.id] = scope
        self._changed()
        return scope

    def scope(self, scope_id: str) -> Scope | None:
        return self._scopes.get(scope_id)

    def bind(self, scope: Scope) -> None:
        """An adapter attached: the scope's idle clock stops."""
        scope._bound += 1
        scope._idle_since = None

    def unbind(self, scope: Scope) -> None:
        """An adapter detached: with none bound and no commands, the idle clock starts (§7.5)."""
        scope._bound = max(0, scope._bound - 1)
        self._changed()

    def commands(self, scope: Scope) -> list[Command]:
        """The scope's retained commands, oldest first."""
        return list(scope._commands) if self._scopes.get(scope.id) is scope else []

    # -- commands ---------------------------------------------------------------------------------------

    async def start(
        self,
        config: LocalMountConfig,
        command: str,
        *,
        cwd: str | None = None,
        environment: Mapping[str, str] | None = None,
        timeout_seconds: float | None = None,
        keep_stdin_open: bool = False,
        scope: Scope | None = None,
        owner: object | None = None,
    ) -> Command:
        """Validate and start `<shell> -c <command>` in a new session (§7.1).

        The command counts against `scope`'s live cap but enters the scope only through `retain`;
        `owner` (the run's mount adapter) counts it against the same cap while the adapter has no
        scope yet, or never will (a foreground-only mount): parallel calls of one model response
        cannot start more than the cap. The slot is taken before anything is awaited and given back
        if the spawn fails. The spawn is shielded: if the caller is cancelled meanwhile, the command
        is still recorded, retained in `scope` when one was given and killed otherwise (nothing could
        observe it).

        Raises:
            EnvironmentToolError: `environment_request_invalid`, `environment_too_large`,
                `environment_path_outside_mount`, `environment_not_found`, `environment_limit_exceeded`,
                `environment_unavailable` (closed backend, gone root or scope, or a failed spawn).
        """
        self._check_open()
        limits = config.limits
        _checks.check_command(command, limits)
        if not os.access(config.shell, os.X_OK):
            raise _not_started()
        directory = _checks.working_directory(config, cwd)  # a descriptor, closed once spawned
        try:
            env = _checks.environment(config, environment)
            timeout = _checks.execution_timeout(limits, timeout_seconds)
            if scope is not None and self._scopes.get(scope.id) is not scope:
                raise EnvironmentToolError(
                    "environment_unavailable", "The mount's scope is gone.", "Try again."
                )
            self._check_live(scope, owner, limits)
            self._reserve(2 * limits.retained_bytes_per_stream)
        except BaseException:
            os.close(directory)
            raise
        self._sequence += 1
        record = Command(
            limits,
            command,
            scope,
            timeout,
            keep_stdin_open,
            self._sequence,
            owner=owner,
            on_capture=self._changed,
            on_release=self._active.discard,
        )
        self._active.add(record)  # the live slot is taken from here on
        spawn = asyncio.ensure_future(
            self._spawn(record, config.shell, command, directory, env, keep_stdin_open)
        )
        self._spawning.add(spawn)
        spawn.add_done_callback(self._spawning.discard)
        spawn.add_done_callback(lambda done: self._spawned(record, directory, done))
        try:
            await asyncio.shield(spawn)
        except asyncio.CancelledError:
            spawn.add_done_callback(lambda done: self._adopt(record, done))
            raise
        except (OSError, subprocess.SubprocessError):
            raise _not_started() from None
        return record

    async def _spawn(
        self,
        record: Command,
        shell: str,
        command: str,
        directory: int,
        env: dict[str, str],
        keep_stdin_open: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        ctype = f"={env['LC_CTYPE']}" if "LC_CTYPE" in env else ""
        transport, _ = await loop.subprocess_exec(
            record._protocol,
            sys.executable,
            "-I",
            "-S",
            "-c",
            _ENTER,
            str(directory),
            ctype,
            shell,
            command,
            stdin=subprocess.PIPE if keep_stdin_open else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            pass_fds=(directory,),
            start_new_session=True,
        )
        record._transport = transport
        record.pid = transport.get_pid()
        self._commands[record.id] = record
        record._task = loop.create_task(record._lifecycle())
        LOGGER.info("command %s started", record.id)

    def _spawned(self, record: Command, directory: int, spawn: asyncio.Future[None]) -> None:
        """However the spawn ended: the directory is closed, and a failed one gives its slot back."""
        os.close(directory)
        if spawn.cancelled() or spawn.exception() is not None:
            self._active.discard(record)

    def _adopt(self, record: Command, spawn: asyncio.Future[None]) -> None:
        """A start whose caller was cancelled: keep the command where the caller would have, or kill it."""
        if spawn.cancelled() or spawn.exception() is not None:
            return
        if record.scope is not None and not self._closed:
            try:
                self.retain(record.scope, record)
                return
            except EnvironmentToolError:
                pass
        self.drop(record)

    def retain(self, scope: Scope, command: Command) -> None:
        """Keep `command` in `scope`; when the scope is full, evict its oldest fully captured command.

        Raises:
            EnvironmentToolError: `environment_limit_exceeded` when every retained command is live;
                `environment_unavailable` when the scope or the command is no longer held.
            ValueError: the command counts against another scope.
        """
        if command.scope is not None and command.scope is not scope:
            raise ValueError("the command belongs to another scope")
        if (
            self._closed
            or self._scopes.get(scope.id) is not scope
            or self._commands.get(command.id) is not command
        ):
            raise EnvironmentToolError(
                "environment_unavailable", "The command or its scope is no longer held.", "Start it again."
            )
        if command in scope._commands:
            return
        cap = command._limits.max_retained_commands
        if len(scope._commands) >= cap:
            victim = next((kept for kept in scope._commands if kept.fully_captured), None)
            if victim is None:
                raise _limit(
                    "Every retained command of this mount is still running.",
                    "Wait for one to finish, or stop one with shell_signal.",
                    cap,
                )
            self._evict(victim, "the scope is full")
        command.scope = scope
        scope._commands.append(command)
        scope._commands.sort(key=lambda kept: kept._sequence)
        scope._idle_since = None
        self._changed()

    def drop(self, command: Command) -> None:
        """Forget a command (final results, foreground calls); one still running is killed."""
        scope = command.scope
        if scope is not None and command in scope._commands:
            scope._commands.remove(command)
        self._commands.pop(command.id, None)
        if command._phase == "running":
            command._kill_now()
        self._changed()

    def kill(self, command: Command) -> None:
        """Kill the command's process group at once (foreground cancellation)."""
        command._kill_now()

    # -- limits and retention ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentToolError(
                "environment_unavailable", "The shell backend is shutting down.", "Try again after a restart."
            )

    def _check_live(self, scope: Scope | None, owner: object | None, limits: LocalMountLimits) -> None:
        live = [command for command in self._active if command._phase == "running"]
        if len(live) >= self.limits.max_live_commands:
            raise _limit(
                "The server runs as many commands as it allows.",
                "Wait for a command to finish, or stop one with shell_signal.",
                self.limits.max_live_commands,
            )
        mine = sum(
            (scope is not None and command.scope is scope) or (owner is not None and command.owner is owner)
            for command in live
        )
        if (scope is not None or owner is not None) and mine >= limits.max_live_commands:
            raise _limit(
                "This mount runs as many commands as it allows.",
                "Wait for a command to finish, or stop one with shell_signal.",
                limits.max_live_commands,
            )

    def _held_bytes(self) -> int:
        return sum(_held(command) for command in {*self._commands.values(), *self._active})

    def _reserve(self, needed: int) -> None:
        """Make room for a new command's windows: evict the oldest fully captured, else refuse."""
        excess = self._held_bytes() + needed - self.limits.max_retained_bytes
        if excess <= 0:
            return
        victims = sorted(
            (
                command
                for scope in self._scopes.values()
                for command in scope._commands
                if command.fully_captured
            ),
            key=lambda command: command._sequence,
        )
        if sum(_held(command) for command in victims) < excess:  # evicting would not help: evict nothing
            raise _limit(
                "The server holds as much captured output as it allows.",
                "Wait for running commands to finish.",
                self.limits.max_retained_bytes,
            )
        for command in victims:
            if excess <= 0:
                break
            excess -= _held(command)
            self._evict(command, "the output bound was reached")

    def _evict(self, command: Command, why: str) -> None:
        scope = command.scope
        if scope is not None and command in scope._commands:
            scope._commands.remove(command)
        self._commands.pop(command.id, None)
        LOGGER.info("command %s released: %s", command.id, why)
        self._changed()

    def _changed(self) -> None:
        self._janitor_wake.set()
        self._ensure_janitor()

    def _ensure_janitor(self) -> None:
        if self._janitor is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._janitor = loop.create_task(self._janitor_loop())

    async def _janitor_loop(self) -> None:
        """Time-based retention (§7.5), woken by changes and otherwise sleeping until the next due time."""
        loop = asyncio.get_running_loop()
        while True:
            self._janitor_wake.clear()
            due = self._sweep(loop.time())
            try:
                async with asyncio.timeout(None if due is None else max(0.0, due - loop.time())):
                    await self._janitor_wake.wait()
            except TimeoutError:
                pass

    def _sweep(self, now: float) -> float | None:
        """Release what is due; return when the next thing falls due."""
        next_due: float | None = None
        for scope in list(self._scopes.values()):
            for command in list(scope._commands):
                if command._captured_at is None:
                    continue
                due = command._captured_at + command._limits.retain_exited_seconds
                if due <= now:
                    self._evict(command, "retention expired")
                else:
                    next_due = due if next_due is None else min(next_due, due)
            if scope._bound or scope._commands:
                scope._idle_since = None
                continue
            if scope._idle_since is None:
                scope._idle_since = now
            due = scope._idle_since + self.limits.scope_idle_seconds
            if due <= now:
                del self._scopes[scope.id]
                LOGGER.info("scope %s released: idle", scope.id)
            else:
                next_due = due if next_due is None else min(next_due, due)
        return next_due

    # -- shutdown ---------------------------------------------------------------------------------------

    async def aclose(self) -> int:
        """End the incarnation (§11): stop every live command group (SIGTERM, grace, SIGKILL), reap the
        roots, drop every scope. Returns the number of running commands stopped; idempotent.

        The stopping is shielded, so cancelling `aclose()` leaves it to finish in the background.
        """
        if self._closed:
            return self._stopped
        self._closed = True
        janitor, self._janitor = self._janitor, None
        if janitor is not None:
            janitor.cancel()
            await asyncio.gather(janitor, return_exceptions=True)
        if self._spawning:
            await asyncio.shield(asyncio.gather(*self._spawning, return_exceptions=True))
        active = list(self._active)
        self._stopped = sum(command._phase == "running" for command in active)
        for command in active:
            command._request_stop()
        tasks = [command._task for command in active if command._task is not None]
        if tasks:
            await asyncio.shield(asyncio.gather(*tasks, return_exceptions=True))
        self._scopes.clear()
        self._commands.clear()
        LOGGER.info("environment backend %s closed; %d running commands stopped", self.id, self._stopped)
        return self._stopped
