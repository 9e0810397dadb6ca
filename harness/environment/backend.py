"""`LocalProcessBackend`: the long-lived owner of a server's shell commands (ENVIRONMENT §6, §7, §10, §11).

One backend lives as long as the server (or embedding) process: one incarnation, one random `id`.
It starts each command in a session of its own, drains both pipes for the command's whole life whether
or not a run is looking, enforces the execution timeout, cleans up the process group after the root
exits, and keeps finished commands in their scope until retention lets them go. Runs only look: a run
closing kills nothing (§8); `aclose()` (the Host's shutdown) kills everything still running (§11).

Exit is learnt from the exit itself (`SubprocessProtocol.process_exited`), never from asyncio's
`Process.wait()`, which on Python 3.11 returns only once every pipe is closed: a background child
holding stdout would hide the exit (§6.4). A process group is signalled only until it is seen empty,
since its id may then be reused (§10.5). The backend keeps its reader, lifecycle and janitor tasks
itself, not in a task group, so `aclose()` may be called from any task of its loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import secrets
import signal as signals
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Literal

from ..json_text import JsonValue
from .capture import CaptureWindow
from .config import ENV_KEY, LocalBackendLimits, LocalMountConfig, LocalMountLimits, is_inside
from .errors import EnvironmentToolError

__all__ = ("Command", "LocalProcessBackend", "Phase", "Scope", "SignalName", "Status")

LOGGER = logging.getLogger("threadline.environment")

Phase = Literal["running", "exited", "signaled", "timed_out", "failed", "missing"]
"""`failed`: the backend lost the process, outcome unknown; `missing`: restored evidence only (§9.3)."""
SignalName = Literal["interrupt", "terminate", "kill"]
"""What a caller may send: SIGINT, SIGTERM, SIGKILL."""
StatusSignal = Literal["interrupt", "terminate", "kill", "other"]

_SIGNALS: dict[SignalName, int] = {
    "interrupt": signals.SIGINT,
    "terminate": signals.SIGTERM,
    "kill": signals.SIGKILL,
}
_SIGNAL_NAMES: dict[int, StatusSignal] = {number: name for name, number in _SIGNALS.items()}
_PREVIEW_CHARS = 200
_POLL_SECONDS = 0.05
"""How often a group is probed while waiting for it to empty; no event says so."""
_KILL_BOUND_SECONDS = 5.0
"""After SIGKILL, how long to wait for a group to empty (a process in uninterruptible sleep)."""
_REAP_BOUND_SECONDS = 10.0
"""After SIGKILL, how long to wait for the event loop to report the root's exit."""


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Status:
    """A command's native state; terminal once the root process is gone (capture may still go on)."""

    phase: Phase
    exit_code: int | None = None
    """The root's exit code, when it exited."""
    signal: StatusSignal | None = None
    """The signal that ended the root, when one did."""
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.phase != "running"

    def to_json(self) -> dict[str, JsonValue]:
        """UTC ISO-8601 timestamps with microseconds and `Z`."""
        return {
            "phase": self.phase,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
        }


class Scope:
    """The commands kept for one (thread, mount): what portable state points at (§9.1).

    Its identity (thread, issuer, subject, mount, root) is what an adapter must match to attach (§9.3).
    """

    def __init__(self, *, thread_id: str, issuer: str, subject: str, mount: str, root: Path) -> None:
        self.id = secrets.token_hex(16)
        self.thread_id = thread_id
        self.issuer = issuer
        self.subject = subject
        self.mount = mount
        self.root = root
        self._commands: list[Command] = []
        """Retained commands, oldest start first."""
        self._bound = 0
        self._idle_since: float | None = None
        """Loop time since which no adapter is bound and no command is retained."""

    def __repr__(self) -> str:
        return f"Scope(id={self.id!r}, mount={self.mount!r}, commands={len(self._commands)})"


class _Protocol(asyncio.SubprocessProtocol):
    """Feeds one command's record from the event loop's callbacks."""

    def __init__(self, command: Command) -> None:
        self._command = command

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self._command._transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if isinstance(data, bytes):
            self._command._received(fd, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._command._pipe_closed(fd)

    def process_exited(self) -> None:
        self._command._exited_now()


class Command:
    """One shell invocation and its process group, as the backend records it (§7.2).

    Only `id`, `started_at` and `preview` ever leave the backend towards a model; `pid` is for tests.
    """

    def __init__(
        self,
        backend: LocalProcessBackend,
        limits: LocalMountLimits,
        text: str,
        scope: Scope | None,
        timeout_seconds: float,
        keep_stdin_open: bool,
        sequence: int,
    ) -> None:
        self.id = secrets.token_hex(16)
        self.scope = scope
        """The scope it counts against and, once retained, lives in."""
        self.preview = text[:_PREVIEW_CHARS]
        self.started_at = datetime.now(UTC)
        self.pid = 0
        """The root's pid, which is also the process group id (new session). For tests only."""
        self.stdout = CaptureWindow(limits.retained_bytes_per_stream)
        self.stderr = CaptureWindow(limits.retained_bytes_per_stream)
        self._backend = backend
        self._limits = limits
        self._timeout = timeout_seconds
        self._sequence = sequence
        self._transport: asyncio.SubprocessTransport | None = None
        self._phase: Phase = "running"
        self._exit_code: int | None = None
        self._signal: StatusSignal | None = None
        self._ended_at: datetime | None = None
        self._timed_out = False
        self._stop_requested = False
        self._stdin_open = keep_stdin_open
        self._stdin_total = 0
        self._group_empty = False
        self._group_done = False
        """Group cleanup finished: the group id is never signalled again."""
        self._wake = asyncio.Event()
        self._terminal = asyncio.Event()
        self._closed_streams = asyncio.Event()
        self._captured = asyncio.Event()
        self._captured_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Command(id={self.id!r}, phase={self._phase!r})"

    # -- what callers read ------------------------------------------------------------------------------

    @property
    def status(self) -> Status:
        return Status(self._phase, self._exit_code, self._signal, self.started_at, self._ended_at)

    @property
    def stdin_open(self) -> bool:
        return self._stdin_open and self._phase == "running"

    @property
    def fully_captured(self) -> bool:
        """Terminal, and both streams `observation_closed` (§6.4)."""
        return self._captured.is_set()

    async def wait_captured(self, timeout: float | None) -> bool:
        """Wait up to `timeout` seconds (`None`: no bound) for full capture; return whether it happened.

        Cancelling the wait leaves the command alone.
        """
        if self.fully_captured or (timeout is not None and timeout <= 0):
            return self.fully_captured
        try:
            async with asyncio.timeout(timeout):
                await self._captured.wait()
        except TimeoutError:
            pass
        return self.fully_captured

    async def wait_terminal(self) -> None:
        """Return once the root process is gone (native completion; capture may still go on)."""
        await self._terminal.wait()

    async def write_stdin(self, data: bytes, *, close: bool) -> int:
        """Write `data` to stdin (buffered, never waiting for the command to read), then close it if asked.

        Returns the number of bytes accepted.

        Raises:
            EnvironmentToolError: `environment_conflict` (stdin closed, or the command ended),
                `environment_request_invalid` (nothing to do), `environment_too_large` (§10.4 bounds).
        """
        if self._phase != "running":
            raise EnvironmentToolError(
                "environment_conflict",
                "The command is no longer running.",
                "Check its status with shell_info.",
            )
        pipe = self._transport.get_pipe_transport(0) if self._transport is not None else None
        if not self._stdin_open or pipe is None or pipe.is_closing():
            self._stdin_open = False
            raise EnvironmentToolError(
                "environment_conflict",
                "The command's stdin is closed.",
                "Start the command with keep_stdin_open=true to write to it.",
            )
        if not data and not close:
            raise EnvironmentToolError(
                "environment_request_invalid", "Nothing to write and nothing to close.", "Pass data or close."
            )
        limit = self._limits.max_stdin_write_bytes
        if len(data) > limit:
            raise EnvironmentToolError(
                "environment_too_large",
                "The stdin data is too large for one write.",
                f"Write at most {limit} bytes at a time.",
                {"limit": limit, "size": len(data)},
            )
        total = self._limits.max_stdin_total_bytes
        if self._stdin_total + len(data) > total:
            raise EnvironmentToolError(
                "environment_too_large",
                "The command's stdin total would exceed its bound.",
                "Pass large input through a file instead.",
                {"limit": total, "written": self._stdin_total},
            )
        assert isinstance(pipe, asyncio.WriteTransport)
        if data:
            pipe.write(data)
            self._stdin_total += len(data)
        if close:
            self._stdin_open = False
            pipe.close()
        return len(data)

    def signal(self, name: SignalName) -> bool:
        """Send SIGINT, SIGTERM or SIGKILL to the command's process group; whether it was sent.

        `False` once the command ended: after the root's exit the backend owns the group's cleanup.
        """
        if self._phase != "running":
            return False
        return self._signal_group(_SIGNALS[name])

    # -- event-loop callbacks ---------------------------------------------------------------------------

    def _received(self, fd: int, data: bytes) -> None:
        window = self.stdout if fd == 1 else self.stderr if fd == 2 else None
        if window is not None:
            window.append(data)

    def _pipe_closed(self, fd: int) -> None:
        if fd == 0:
            self._stdin_open = False
            return
        window = self.stdout if fd == 1 else self.stderr if fd == 2 else None
        if window is not None:
            window.close(producer_complete=True)
            self._check_capture()

    def _exited_now(self) -> None:
        if self._terminal.is_set():
            return
        code = self._transport.get_returncode() if self._transport is not None else None
        self._ended_at = datetime.now(UTC)
        if code is None:
            self._phase = "failed"
        elif code >= 0:
            self._exit_code = code
            self._phase = "exited"
        else:
            self._signal = _SIGNAL_NAMES.get(-code, "other")
            self._phase = "signaled"
        if self._timed_out:
            self._phase = "timed_out"
        LOGGER.info("command %s %s (exit code %s)", self.id, self._phase, self._exit_code)
        self._terminal.set()
        self._wake.set()
        self._check_capture()

    def _check_capture(self) -> None:
        if self.stdout.observation_closed and self.stderr.observation_closed:
            self._closed_streams.set()
        if self._terminal.is_set() and self._closed_streams.is_set() and not self._captured.is_set():
            self._captured_at = asyncio.get_running_loop().time()
            self._captured.set()
            self._backend._changed()

    # -- the process group ------------------------------------------------------------------------------

    def _signal_group(self, number: int) -> bool:
        """Signal the group unless it was seen empty or cleaned up; whether a signal was sent."""
        if self._group_empty or self._group_done or self.pid <= 0:
            return False
        try:
            os.killpg(self.pid, number)
        except ProcessLookupError:
            self._group_empty = True
            return False
        except PermissionError:
            return False
        return True

    def _group_alive(self, *, zombies_are_gone: bool) -> bool:
        if not self._signal_group(0):
            return not self._group_empty
        if zombies_are_gone and _only_zombies(self.pid):
            self._group_empty = True
            return False
        return True

    async def _group_empties(self, within: float, *, zombies_are_gone: bool) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self._group_alive(zombies_are_gone=zombies_are_gone):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL_SECONDS)
        return True

    async def _stop_group(self) -> None:
        """SIGTERM, the grace, SIGKILL (§7.3, §7.4); afterwards the group id is left alone for good."""
        if self._group_done:
            return
        try:
            if not self._signal_group(signals.SIGTERM):
                return
            if await self._group_empties(self._limits.terminate_grace_seconds, zombies_are_gone=False):
                return
            if not self._signal_group(signals.SIGKILL):
                return
            if not await self._group_empties(_KILL_BOUND_SECONDS, zombies_are_gone=True):
                LOGGER.warning("command %s: its process group did not empty after SIGKILL", self.id)
        finally:
            self._group_done = True

    def _kill_now(self) -> None:
        self._signal_group(signals.SIGKILL)

    def _request_stop(self) -> None:
        self._stop_requested = True
        self._wake.set()

    # -- the lifecycle ----------------------------------------------------------------------------------

    async def _lifecycle(self) -> None:
        """From start to release: timeout, group cleanup, stdin, drain (§7.3, §7.4)."""
        try:
            await self._await_exit_or_deadline()
            if not self._terminal.is_set():
                await self._stop_group()
                await self._reap()
            await self._stop_group()
            self._close_stdin()
            try:
                async with asyncio.timeout(self._limits.drain_grace_seconds):
                    await self._closed_streams.wait()
            except TimeoutError:
                self._cut_off()
        except Exception:
            LOGGER.exception("command %s: the backend lost track of it", self.id)
            if not self._terminal.is_set():
                self._phase = "failed"
                self._terminal.set()
            self._cut_off()
        finally:
            self._release()

    async def _await_exit_or_deadline(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while not self._terminal.is_set() and not self._stop_requested:
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._timed_out = True
                LOGGER.info("command %s reached its execution timeout", self.id)
                return
            try:
                async with asyncio.timeout(remaining):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def _reap(self) -> None:
        """Wait for the loop to report the root's exit, killing the root itself if it left its group."""
        try:
            async with asyncio.timeout(_REAP_BOUND_SECONDS / 2):
                await self._terminal.wait()
                return
        except TimeoutError:
            pass
        if self._transport is not None and self._transport.get_returncode() is None:
            with contextlib.suppress(ProcessLookupError):
                self._transport.kill()  # the root pid is not reaped yet, so it cannot name another process
        try:
            async with asyncio.timeout(_REAP_BOUND_SECONDS / 2):
                await self._terminal.wait()
        except TimeoutError:
            LOGGER.warning("command %s: no exit reported after SIGKILL", self.id)

    def _close_stdin(self) -> None:
        pipe = self._transport.get_pipe_transport(0) if self._transport is not None else None
        if pipe is not None and not pipe.is_closing():
            pipe.close()
        self._stdin_open = False

    def _cut_off(self) -> None:
        """Stop reading pipes held open outside the group: closed, producer not complete (§7.3)."""
        for fd, window in ((1, self.stdout), (2, self.stderr)):
            if not window.observation_closed:
                window.close(producer_complete=False)
                pipe = self._transport.get_pipe_transport(fd) if self._transport is not None else None
                if pipe is not None:
                    pipe.close()
        self._check_capture()

    def _release(self) -> None:
        if self._transport is not None and self._terminal.is_set():
            self._transport.close()
        self._backend._released(self)


def _only_zombies(pgid: int) -> bool:
    """Whether every member of a group has exited and waits to be reaped (a zombie holds no pipe)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return False
    return True


def _held(command: Command) -> int:
    """Bytes a command holds; one not fully captured counts at its full windows, which it may reach."""
    if not command.fully_captured:
        return 2 * command._limits.retained_bytes_per_stream
    return sum(window.available_end - window.available_start for window in (command.stdout, command.stderr))


def _invalid(message: str, hint: str, details: dict[str, JsonValue] | None = None) -> EnvironmentToolError:
    return EnvironmentToolError("environment_request_invalid", message, hint, details)


def _check_command(command: str, limits: LocalMountLimits) -> None:
    if not isinstance(command, str) or not command.strip():
        raise _invalid("The command is empty.", "Pass a non-empty shell command.")
    if "\0" in command:
        raise _invalid("The command contains a NUL character.", "Remove NUL characters from the command.")
    try:
        size = len(command.encode("utf-8"))
    except UnicodeEncodeError:
        raise _invalid("The command is not valid UTF-8 text.", "Pass the command as text.") from None
    if size > limits.max_command_bytes:
        raise EnvironmentToolError(
            "environment_too_large",
            "The command is too long.",
            "Put a long script in a file and run the file.",
            {"limit": limits.max_command_bytes, "size": size},
        )


def _working_directory(config: LocalMountConfig, cwd: str | None) -> str:
    """§10.2: join, canonicalise (symlinks, `..`), then require inside the root and a directory."""
    if not os.path.isdir(config.root):
        raise EnvironmentToolError(
            "environment_unavailable",
            "The mount's root directory is gone.",
            "Ask the operator to restore it.",
        )
    if cwd is not None and (not isinstance(cwd, str) or "\0" in cwd):
        raise _invalid("cwd contains a NUL character.", "Pass a plain relative path.")
    base = config.workdir()
    target = base if cwd is None else os.path.realpath(os.path.join(base, cwd))
    if not is_inside(config.root, target):
        raise EnvironmentToolError(
            "environment_path_outside_mount",
            "cwd resolves outside the mount.",
            "Pass a path relative to the mount's working directory that stays inside the mount.",
        )
    if not os.path.isdir(target):
        raise EnvironmentToolError(
            "environment_not_found",
            "cwd does not exist or is not a directory.",
            "Create it first, or omit cwd.",
        )
    return target


def _environment(config: LocalMountConfig, overlay: Mapping[str, str] | None) -> dict[str, str]:
    """§10.3: the inherited names only, then the mount's `env`, then the call's overlay."""
    env = {name: os.environ[name] for name in config.inherit_env if name in os.environ}
    env.update(config.env)
    if not overlay:
        return env
    limits = config.limits
    if len(overlay) > limits.max_env_entries:
        raise EnvironmentToolError(
            "environment_too_large",
            "The environment has too many entries.",
            f"Pass at most {limits.max_env_entries} variables.",
            {"limit": limits.max_env_entries, "size": len(overlay)},
        )
    for key, value in overlay.items():
        if not isinstance(key, str) or not ENV_KEY.fullmatch(key):
            raise _invalid(
                "An environment variable name is invalid.", "Names match ^[A-Za-z_][A-Za-z0-9_]{0,127}$."
            )
        if not isinstance(value, str) or "\0" in value:
            raise _invalid("An environment value contains a NUL character.", "Remove NUL characters.")
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise _invalid("An environment value is not valid UTF-8 text.", "Pass values as text.") from None
        if size > limits.max_env_value_bytes:
            raise EnvironmentToolError(
                "environment_too_large",
                "An environment value is too large.",
                "Pass large data through a file instead.",
                {"limit": limits.max_env_value_bytes, "size": size},
            )
    env.update(overlay)
    return env


def _execution_timeout(limits: LocalMountLimits, timeout: float | None) -> float:
    if timeout is None:
        return limits.max_wall_time_seconds
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= limits.max_wall_time_seconds
    ):
        raise _invalid(
            "The execution timeout is out of range.",
            f"Pass 0 < execution_timeout_seconds <= {limits.max_wall_time_seconds:g}.",
            {"maximum": limits.max_wall_time_seconds},
        )
    return float(timeout)


def _limit(message: str, hint: str, limit: int) -> EnvironmentToolError:
    return EnvironmentToolError("environment_limit_exceeded", message, hint, {"limit": limit})


class LocalProcessBackend:
    """Owns the native processes of `threadline_local` mounts for one incarnation.

    Create one per server or embedding process, on the event loop that runs the runs; close it with
    `aclose()` (or `async with`) when the Host shuts down: every live command group is stopped then.
    """

    def __init__(self, limits: LocalBackendLimits | None = None) -> None:
        self.id = secrets.token_hex(16)
        """The incarnation: states naming another one report `backend_changed` (§9.3)."""
        self.limits = limits if limits is not None else LocalBackendLimits()
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
    ) -> Command:
        """Validate and start `<shell> -c <command>` in a new session (§7.1).

        The command counts against `scope`'s live cap but enters the scope only through `retain`. The
        spawn is shielded: if the caller is cancelled meanwhile, the command is still recorded, retained
        in `scope` when one was given and killed otherwise (nothing could observe it).

        Raises:
            EnvironmentToolError: `environment_request_invalid`, `environment_too_large`,
                `environment_path_outside_mount`, `environment_not_found`, `environment_limit_exceeded`,
                `environment_unavailable` (closed backend, gone root or scope, or a failed spawn).
        """
        self._check_open()
        limits = config.limits
        _check_command(command, limits)
        workdir = _working_directory(config, cwd)
        env = _environment(config, environment)
        timeout = _execution_timeout(limits, timeout_seconds)
        if scope is not None and self._scopes.get(scope.id) is not scope:
            raise EnvironmentToolError("environment_unavailable", "The mount's scope is gone.", "Try again.")
        self._check_live(scope, limits)
        self._reserve(2 * limits.retained_bytes_per_stream)
        self._sequence += 1
        record = Command(self, limits, command, scope, timeout, keep_stdin_open, self._sequence)
        self._active.add(record)
        spawn = asyncio.ensure_future(
            self._spawn(record, config.shell, command, workdir, env, keep_stdin_open)
        )
        self._spawning.add(spawn)
        spawn.add_done_callback(self._spawning.discard)
        try:
            await asyncio.shield(spawn)
        except asyncio.CancelledError:
            spawn.add_done_callback(lambda done: self._adopt(record, done))
            raise
        except (OSError, subprocess.SubprocessError):
            raise EnvironmentToolError(
                "environment_unavailable",
                "The shell could not be started.",
                "Check that the mount's shell and directory exist.",
            ) from None
        return record

    async def _spawn(
        self,
        record: Command,
        shell: str,
        command: str,
        workdir: str,
        env: dict[str, str],
        keep_stdin_open: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: _Protocol(record),
                shell,
                "-c",
                command,
                stdin=subprocess.PIPE if keep_stdin_open else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            self._active.discard(record)
            raise
        record._transport = transport
        record.pid = transport.get_pid()
        self._commands[record.id] = record
        record._task = loop.create_task(record._lifecycle())
        LOGGER.info("command %s started", record.id)

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

    def _check_live(self, scope: Scope | None, limits: LocalMountLimits) -> None:
        live = [command for command in self._active if command._phase == "running"]
        if len(live) >= self.limits.max_live_commands:
            raise _limit(
                "The server runs as many commands as it allows.",
                "Wait for a command to finish, or stop one with shell_signal.",
                self.limits.max_live_commands,
            )
        if scope is not None and sum(command.scope is scope for command in live) >= limits.max_live_commands:
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

    def _released(self, command: Command) -> None:
        self._active.discard(command)

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
