"""The backend's records: `Scope`, `Command` and its `Status` (ENVIRONMENT §7.2).

A `Command` follows one shell invocation from spawn to release. Exit is learnt from the exit itself
(`SubprocessProtocol.process_exited`), never from asyncio's `Process.wait()`, which on Python 3.11
returns only once every pipe is closed: a background child holding stdout would hide the exit (§6.4).
After the root exits the group is cleaned up (SIGTERM, grace, SIGKILL) and the pipes get a drain grace
(§7.3). A process group is signalled only until it is seen empty, since its id may then be reused (§10.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal as signals
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from ..json_text import JsonValue
from .capture import CaptureWindow
from .config import LocalMountLimits
from .errors import EnvironmentToolError

__all__ = ("Command", "Phase", "Scope", "SignalName", "Status", "StatusSignal")

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
_FIRST_POLL_SECONDS = 0.01
_LAST_POLL_SECONDS = 0.25
"""A group is probed while waiting for it to empty (no event says so): soon at first, then less often."""
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
        limits: LocalMountLimits,
        text: str,
        scope: Scope | None,
        timeout_seconds: float,
        keep_stdin_open: bool,
        sequence: int,
        *,
        owner: object | None = None,
        on_capture: Callable[[], None],
        on_release: Callable[[Command], None],
    ) -> None:
        self.id = secrets.token_hex(16)
        self.scope = scope
        """The scope it counts against and, once retained, lives in."""
        self.owner = owner
        """Whom it also counts against: the run's mount adapter, whose scope may not exist yet."""
        self.preview = text[:_PREVIEW_CHARS]
        self.started_at = datetime.now(UTC)
        self.pid = 0
        """The root's pid, which is also the process group id (new session). For tests only."""
        self.stdout = CaptureWindow(limits.retained_bytes_per_stream)
        self.stderr = CaptureWindow(limits.retained_bytes_per_stream)
        self._on_capture = on_capture
        self._on_release = on_release
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

    def _protocol(self) -> asyncio.SubprocessProtocol:
        return _Protocol(self)

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
            self._on_capture()

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

    def _group_alive(self) -> bool:
        """Whether a member of the group still runs; a zombie has exited and holds no pipe."""
        if not self._signal_group(0):
            return not self._group_empty
        if _only_zombies(self.pid):  # orphans the init process has not reaped yet
            self._group_empty = True
            return False
        return True

    async def _group_empties(self, within: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        pause = _FIRST_POLL_SECONDS
        while self._group_alive():
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(2 * pause, _LAST_POLL_SECONDS)
        return True

    async def _stop_group(self) -> None:
        """SIGTERM, the grace, SIGKILL (§7.3, §7.4); afterwards the group id is left alone for good."""
        if self._group_done:
            return
        try:
            if not self._signal_group(signals.SIGTERM):
                return
            if await self._group_empties(self._limits.terminate_grace_seconds):
                return
            if not self._signal_group(signals.SIGKILL):
                return
            if not await self._group_empties(_KILL_BOUND_SECONDS):
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
        self._on_release(self)


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
