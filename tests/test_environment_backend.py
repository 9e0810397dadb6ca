"""The local process backend against real shells (ENVIRONMENT §14 A, at the backend level).

Every test gets a fresh root and its own backend, closes it, and checks that no process is left:
commands append their pids (and their children's) to files under `$PIDS`, and the fixture checks each
one is gone. Timing goes through handshakes (files the test creates, output the test polls for);
timeouts are only safety bounds, and no test asserts a duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from env_server import alive
from pydantic import ValidationError

from harness.environment import (
    CaptureWindow,
    Command,
    EnvironmentToolError,
    LimitsConflict,
    LocalBackendLimits,
    LocalMountConfig,
    LocalMountLimits,
    LocalProcessBackend,
    Scope,
    Status,
    read_pair,
    tail_pair,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.name != "posix", reason="the local provider is POSIX-only"),
]

BOUND = 60.0
"""A safety bound on every wait; never what a test measures."""
WAIT_FOR_GO = 'while [ ! -e "$GO" ]; do sleep 0.02; done'


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll for a condition no event announces (output arriving, a file appearing), within `BOUND`."""
    with anyio.fail_after(BOUND):
        while not condition():
            await anyio.sleep(0.01)
    assert condition(), what


@dataclass
class Shell:
    """A test's root, pid files, handshake file and backends; `start` records what it started."""

    root: Path
    pids: Path
    go: Path
    backend: LocalProcessBackend
    backends: list[LocalProcessBackend] = field(default_factory=list)
    started: list[Command] = field(default_factory=list)

    def config(
        self, *, env: dict[str, str] | None = None, working_directory: str = ".", **limits: Any
    ) -> LocalMountConfig:
        return LocalMountConfig(
            self.root,
            working_directory=working_directory,
            env={"PIDS": str(self.pids), "GO": str(self.go), **(env or {})},
            limits=LocalMountLimits(**limits),
        )

    def new_backend(self, **limits: Any) -> LocalProcessBackend:
        backend = LocalProcessBackend(LocalBackendLimits(**limits))
        self.backends.append(backend)
        return backend

    async def start(
        self,
        command: str,
        *,
        backend: LocalProcessBackend | None = None,
        config: LocalMountConfig | None = None,
        **options: Any,
    ) -> Command:
        started = await (backend or self.backend).start(config or self.config(), command, **options)
        self.started.append(started)
        return started

    def recorded(self, name: str = "all") -> list[int]:
        path = self.pids / name
        if not path.exists():
            return []
        return [int(line) for line in path.read_text().split()]

    def scope(self, backend: LocalProcessBackend | None = None) -> Scope:
        return (backend or self.backend).new_scope(
            thread_id="thread-1", issuer="local", subject="embedded", mount="build", root=self.root
        )


@pytest.fixture
async def shell(tmp_path: Path) -> AsyncIterator[Shell]:
    root = tmp_path / "root"
    pids = tmp_path / "pids"
    root.mkdir()
    pids.mkdir()
    backend = LocalProcessBackend()
    state = Shell(root=root, pids=pids, go=tmp_path / "go", backend=backend, backends=[backend])
    try:
        async with backend:
            yield state
    finally:
        with anyio.fail_after(BOUND):
            for other in state.backends:
                await other.aclose()
        assert all(other.closed for other in state.backends)
        left = [pid for path in pids.iterdir() for pid in map(int, path.read_text().split()) if alive(pid)]
        left += [command.pid for command in state.started if alive(command.pid)]
        for pid in left:  # do not leak them into the next test, then fail
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert left == [], "processes outlived the backend"


async def captured(command: Command) -> Command:
    assert await command.wait_captured(BOUND), "the command was not fully captured in time"
    return command


async def raises(code: str, call: Any) -> EnvironmentToolError:
    with pytest.raises(EnvironmentToolError) as caught:
        await call
    assert caught.value.code == code, caught.value.message
    return caught.value


# -- A1, A2: final results and exit codes ----------------------------------------------------------------


async def test_final_exit_and_offsets(shell: Shell) -> None:
    command = await captured(await shell.start("printf hi"))
    status = command.status
    assert (status.phase, status.exit_code, status.signal, status.terminal) == ("exited", 0, None, True)
    stdout, stderr = read_pair(command.stdout, command.stderr, 0, 0, 16384)
    assert stdout.to_json() == {
        "requested_offset": 0,
        "start_offset": 0,
        "omitted_before_bytes": 0,
        "next_offset": 2,
        "available_start": 0,
        "available_end": 2,
        "more_available": False,
        "observation_closed": True,
        "producer_complete": True,
        "text": "hi",
    }
    assert (stderr.text, stderr.next_offset, stderr.observation_closed, stderr.producer_complete) == (
        "",
        0,
        True,
        True,
    )
    assert command.stdin_open is False
    shown = status.to_json()
    assert shown["phase"] == "exited" and shown["exit_code"] == 0 and shown["signal"] is None
    for moment in (shown["started_at"], shown["ended_at"]):
        assert (
            isinstance(moment, str)
            and moment.endswith("Z")
            and len(moment) == len("2026-03-01T10:00:02.125000Z")
        )
    assert len(command.id) == 32 and int(command.id, 16) >= 0
    assert command.preview == "printf hi"


@pytest.mark.parametrize("code", [0, 1, 3, 255])
async def test_exit_codes(shell: Shell, code: int) -> None:
    command = await captured(await shell.start(f"echo out; echo err >&2; exit {code}"))
    assert (command.status.phase, command.status.exit_code) == ("exited", code)
    assert (command.stdout.read(0, 100).text, command.stderr.read(0, 100).text) == ("out\n", "err\n")


async def test_a_command_killing_itself_is_signaled(shell: Shell) -> None:
    command = await captured(await shell.start("kill -USR1 $$"))
    assert (command.status.phase, command.status.exit_code, command.status.signal) == (
        "signaled",
        None,
        "other",
    )


# -- A3: reads never consume --------------------------------------------------------------------------------


async def test_background_reads_are_non_consuming(shell: Shell) -> None:
    command = await shell.start(f"printf a; printf e >&2; {WAIT_FOR_GO}; printf b")
    await until(
        lambda: command.stdout.available_end == 1 and command.stderr.available_end == 1, "first bytes"
    )
    assert command.status.phase == "running" and not command.fully_captured
    assert await command.wait_captured(0) is False
    first = read_pair(command.stdout, command.stderr, 0, 0, 16384)
    again = read_pair(command.stdout, command.stderr, 0, 0, 16384)
    assert first == again
    assert (first[0].text, first[1].text, first[0].observation_closed) == ("a", "e", False)
    at_end = read_pair(command.stdout, command.stderr, first[0].next_offset, first[1].next_offset, 16384)
    assert [(page.text, page.more_available, page.next_offset) for page in at_end] == [
        ("", False, 1),
        ("", False, 1),
    ]
    error = await raises("environment_offset_invalid", _read_async(command, 2, 0))
    assert error.details == {"stream": "stdout", "offset": 2, "available_end": 1}
    error = await raises("environment_offset_invalid", _read_async(command, 0, 5))
    assert error.details["stream"] == "stderr"
    await raises("environment_request_invalid", _read_async(command, -1, 0))
    shell.go.touch()
    await captured(command)
    assert command.stdout.read(1, 100).text == "b"
    assert read_pair(command.stdout, command.stderr, 0, 0, 16384)[0].text == "ab"


async def _read_async(command: Command, stdout_offset: int, stderr_offset: int) -> None:
    read_pair(command.stdout, command.stderr, stdout_offset, stderr_offset, 16384)


# -- A4, A5: the window and the page budget ---------------------------------------------------------------


async def test_window_keeps_the_newest_bytes(shell: Shell) -> None:
    config = shell.config(retained_bytes_per_stream=4096)
    loop = "i=0; while [ $i -lt 1000 ]; do printf 0123456789; i=$((i+1)); done"
    command = await captured(await shell.start(loop, config=config))
    page = command.stdout.read(0, 16384)
    assert (page.start_offset, page.available_start, page.omitted_before_bytes) == (5904, 5904, 5904)
    assert (page.next_offset, page.available_end, page.more_available) == (10000, 10000, False)
    assert page.text == ("0123456789" * 1000)[5904:]
    assert command.stdout.read(0, 16384) == page  # reading never moves the window


@pytest.mark.parametrize("budget", [16384, 16383, 1001])
async def test_page_budget_is_split_fairly_and_never_cuts_a_character(shell: Shell, budget: int) -> None:
    text = "é" * 51200  # 100 KiB of two-byte characters
    (shell.root / "e.txt").write_text(text, encoding="utf-8")
    command = await captured(
        await shell.start("cat e.txt; cat e.txt >&2", config=shell.config(max_page_bytes=budget))
    )
    out = err = 0
    seen_out, seen_err = [], []
    while out < command.stdout.available_end or err < command.stderr.available_end:
        stdout, stderr = read_pair(command.stdout, command.stderr, out, err, budget)
        used = (stdout.next_offset - out) + (stderr.next_offset - err)
        assert 0 < used <= budget
        if stdout.more_available and stderr.more_available:  # both want more: each gets its half
            assert stdout.next_offset - out >= budget // 2 - 1 and stderr.next_offset - err >= budget // 2 - 1
        assert "\ufffd" not in stdout.text + stderr.text
        seen_out.append(stdout.text)
        seen_err.append(stderr.text)
        out, err = stdout.next_offset, stderr.next_offset
    assert "".join(seen_out) == text and "".join(seen_err) == text


async def test_an_unused_share_goes_to_the_other_stream(shell: Shell) -> None:
    (shell.root / "big.txt").write_text("x" * 40000)
    command = await captured(await shell.start("cat big.txt; printf e >&2"))
    stdout, stderr = read_pair(command.stdout, command.stderr, 0, 0, 16384)
    assert (len(stdout.text), stderr.text) == (16383, "e")
    stdout, stderr = read_pair(command.stdout, command.stderr, 0, 1, 16384)
    assert (len(stdout.text), stderr.text) == (16384, "")


def test_window_offsets_and_characters() -> None:
    window = CaptureWindow(8)
    window.append("aé€".encode())  # 1 + 2 + 3 bytes
    assert window.read(0, 2).text == "a"  # "é" would be cut: the page stops before it
    assert window.read(0, 2).next_offset == 1
    assert window.read(2, 100).text == "\ufffd€"  # a start inside a character decodes to U+FFFD
    assert window.read(6, 100).text == "" and window.read(6, 100).more_available is False
    with pytest.raises(EnvironmentToolError) as caught:
        window.read(7, 1)
    assert caught.value.code == "environment_offset_invalid"
    window.append(b"\xe2\x82")  # the start of another "€", still open: not shown yet
    assert window.read(6, 100).next_offset == 6
    window.append(b"\xac")
    assert window.read(6, 100).text == "€"
    assert (window.available_start, window.available_end) == (1, 9)
    window.append(b"\xe2")
    window.close(producer_complete=True)
    assert window.read(9, 100).text == "\ufffd"  # closed: the incomplete end is shown, so reads finish
    window.append(b"ignored")
    assert window.available_end == 10


def test_tail_pair_shows_the_end_from_a_character_boundary() -> None:
    stdout, stderr = CaptureWindow(1024), CaptureWindow(1024)
    stdout.append(("é" * 100).encode())
    stderr.append(b"err")
    stdout.close(producer_complete=True)
    stderr.close(producer_complete=True)
    out, err = tail_pair(stdout, stderr, 20)
    assert err.text == "err" and err.omitted_before_bytes == 0
    assert out.text == "é" * 8 and out.next_offset == 200
    assert (out.requested_offset, out.start_offset, out.omitted_before_bytes) == (0, 184, 184)
    out, _ = tail_pair(stdout, stderr, 22)  # 19 bytes for stdout: starts one byte in, skips to a boundary
    assert out.text == "é" * 9 and out.omitted_before_bytes == 182


# -- A6, A7: native exit is not complete capture ------------------------------------------------------------


async def test_exit_before_full_capture(shell: Shell) -> None:
    # The root exits only once the child ignores SIGTERM, which the group cleanup sends it.
    child = (
        f'sh -c \'trap "" TERM; echo $$ >> "$PIDS/all"; {WAIT_FOR_GO}; echo late\' & '
        'while [ ! -s "$PIDS/all" ]; do sleep 0.02; done; echo early'
    )
    command = await shell.start(child, config=shell.config(terminate_grace_seconds=BOUND))
    with anyio.fail_after(BOUND):
        await command.wait_terminal()
    assert (command.status.phase, command.status.exit_code) == ("exited", 0)
    await until(lambda: command.stdout.available_end == len("early\n"), "early output")
    assert not command.stdout.observation_closed and not command.fully_captured
    assert command.stdout.read(0, 100).observation_closed is False
    assert len(shell.recorded()) == 1
    shell.go.touch()
    await captured(command)
    page = command.stdout.read(0, 100)
    assert (page.text, page.observation_closed, page.producer_complete) == ("early\nlate\n", True, True)


async def test_the_group_is_cleaned_up_after_the_root_exits(shell: Shell) -> None:
    config = shell.config(terminate_grace_seconds=0.3)
    command = await shell.start(
        'sleep 120 & echo $! >> "$PIDS/all"; '
        'sh -c \'trap "" TERM; echo $$ >> "$PIDS/all"; while :; do sleep 0.02; done\' & '
        'while [ $(wc -l < "$PIDS/all") -lt 2 ]; do sleep 0.02; done; echo root done',
        config=config,
    )
    await captured(command)  # both children held stdout: SIGTERM ended one, SIGKILL the other
    assert (command.status.phase, command.stdout.read(0, 100).text) == ("exited", "root done\n")
    assert command.stdout.producer_complete
    children = shell.recorded()
    assert len(children) == 2
    await until(lambda: not any(alive(pid) for pid in children), "the children to be gone")


async def test_streams_closed_before_exit_are_not_full_capture(shell: Shell) -> None:
    command = await shell.start(f"echo bye; exec >&- 2>&-; {WAIT_FOR_GO}")
    await until(
        lambda: command.stdout.observation_closed and command.stderr.observation_closed, "closed streams"
    )
    assert command.status.phase == "running" and not command.fully_captured
    assert command.stdout.read(0, 100).text == "bye\n"
    shell.go.touch()
    await captured(command)
    assert command.status.exit_code == 0


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
async def test_detached_pipe_holder_is_cut_off_after_the_drain_grace(shell: Shell) -> None:
    holder = shell.pids / "holder"
    command = await shell.start(
        'setsid sh -c \'echo $$ > "$PIDS/holder.tmp"; mv "$PIDS/holder.tmp" "$PIDS/holder"; exec sleep 120\' & '
        'while [ ! -e "$PIDS/holder" ]; do sleep 0.02; done; echo started',
        config=shell.config(drain_grace_seconds=0.3, terminate_grace_seconds=0.5),
    )
    try:
        await captured(command)
        assert command.status.phase == "exited"
        for window in (command.stdout, command.stderr):
            assert (window.observation_closed, window.producer_complete) == (True, False)
        assert command.stdout.read(0, 100).text == "started\n"
        assert alive(int(holder.read_text()))  # outside the group: the backend never touched it
    finally:
        if holder.exists():
            pid = int(holder.read_text())
            os.kill(pid, signal.SIGKILL)
            await until(lambda: not alive(pid), "the holder to die")


# -- A8, A9: timeouts and signals ---------------------------------------------------------------------------


async def test_execution_timeout_stops_the_group(shell: Shell) -> None:
    command = await shell.start(
        'echo $$ >> "$PIDS/all"; sleep 120 & echo $! >> "$PIDS/all"; wait',
        timeout_seconds=2.0,
        config=shell.config(terminate_grace_seconds=0.5),
    )
    await captured(command)
    assert command.status.phase == "timed_out"
    assert command.status.ended_at is not None
    recorded = shell.recorded()
    assert len(recorded) == 2, "the command had not even started within its timeout"
    await until(lambda: not any(alive(pid) for pid in recorded), "the child to be gone")


async def test_a_command_ignoring_term_survives_terminate_until_killed(shell: Shell) -> None:
    after = shell.root / "after"
    command = await shell.start(
        f"trap '' TERM; echo ready; while [ ! -e {after} ]; do sleep 0.02; done; echo alive; while :; do sleep 0.02; done"
    )
    await until(lambda: b"ready" in _bytes(command), "ready")
    assert command.signal("terminate") is True
    after.touch()
    await until(lambda: b"alive" in _bytes(command), "the command to live on after SIGTERM")
    assert command.status.phase == "running"
    assert command.signal("kill") is True
    await captured(command)
    assert (command.status.phase, command.status.signal, command.status.exit_code) == (
        "signaled",
        "kill",
        None,
    )
    assert command.signal("kill") is False  # ended: nothing is sent any more


async def test_interrupt_on_sleep(shell: Shell) -> None:
    command = await shell.start("echo ready; exec sleep 120")
    await until(lambda: b"ready" in _bytes(command), "ready")
    assert command.signal("interrupt") is True
    await captured(command)
    assert (command.status.phase, command.status.signal) == ("signaled", "interrupt")


IGNORING_HOST = """
import asyncio, json, os, signal, sys
from harness.environment import LocalMountConfig, LocalProcessBackend

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})  # a host's mask, too

async def ended_by(backend, config, send):
    command = await backend.start(config, "ulimit -c 0; echo ready; exec sleep 120", timeout_seconds=300)
    while b"ready" not in command.stdout.read(0, 100).text.encode():
        await asyncio.sleep(0.01)
    send(command)
    return await command.wait_captured(30) and [command.status.phase, command.status.signal]

async def main(root):
    async with LocalProcessBackend() as backend:
        config = LocalMountConfig(root)
        status = await backend.start(config, "cat /proc/self/status 2>/dev/null || true")
        await status.wait_captured(60)
        masks = [line for line in status.stdout.read(0, 1 << 16).text.splitlines() if line[:6] in ("SigIgn", "SigBlk")]
        print(json.dumps({
            "masks": masks,
            "interrupt": await ended_by(backend, config, lambda command: command.signal("interrupt")),
            "terminate": await ended_by(backend, config, lambda command: command.signal("terminate")),
            "quit": await ended_by(backend, config, lambda command: os.killpg(command.pid, signal.SIGQUIT)),
        }))

asyncio.run(main(sys.argv[1]))
"""


def test_commands_of_a_host_ignoring_signals_get_the_defaults(tmp_path: Path) -> None:
    """A host started with SIGINT and SIGQUIT ignored (as `cmd &` in a script leaves them) and SIGTERM
    blocked: its commands still end on interrupt, terminate and quit (issue 23)."""
    launch = ["/bin/sh", "-c", 'trap "" INT QUIT; exec "$@"', "sh", sys.executable, "-c", IGNORING_HOST]
    done = subprocess.run([*launch, str(tmp_path)], capture_output=True, text=True, timeout=BOUND * 3)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    if seen["masks"]:  # Linux: the command's own view of its dispositions and mask
        assert seen["masks"] == ["SigBlk:\t0000000000000000", "SigIgn:\t0000000000000000"], seen["masks"]
    assert seen["interrupt"] == ["signaled", "interrupt"]
    assert seen["terminate"] == ["signaled", "terminate"]
    assert seen["quit"] == ["signaled", "other"]


async def test_backend_kill_and_drop_of_a_live_command(shell: Shell) -> None:
    killed = await shell.start("exec sleep 120")
    shell.backend.kill(killed)
    await captured(killed)
    assert (killed.status.phase, killed.status.signal) == ("signaled", "kill")
    dropped = await shell.start("echo ready; exec sleep 120")
    await until(lambda: b"ready" in _bytes(dropped), "ready")
    shell.backend.drop(dropped)
    await captured(dropped)
    assert (dropped.status.phase, dropped.status.signal) == ("signaled", "kill")


async def test_cancelling_a_wait_leaves_the_command_alone(shell: Shell) -> None:
    command = await shell.start(f"{WAIT_FOR_GO}; echo done")
    async with anyio.create_task_group() as group:
        group.start_soon(command.wait_captured, None)
        await anyio.sleep(0)
        group.cancel_scope.cancel()
    assert command.status.phase == "running"
    shell.go.touch()
    await captured(command)
    assert (command.status.exit_code, command.stdout.read(0, 100).text) == (0, "done\n")


async def test_a_start_cancelled_while_spawning_is_still_recorded(shell: Shell) -> None:
    scope = shell.scope()
    kept = asyncio.ensure_future(
        shell.backend.start(shell.config(), f"{WAIT_FOR_GO}; echo kept", scope=scope)
    )
    lost = asyncio.ensure_future(
        shell.backend.start(shell.config(), f'echo $$ >> "$PIDS/all"; {WAIT_FOR_GO}')
    )
    await asyncio.sleep(0)  # both are now inside the shielded spawn
    kept.cancel()
    lost.cancel()
    for task in (kept, lost):
        with pytest.raises(asyncio.CancelledError):
            await task
    await until(lambda: len(shell.backend.commands(scope)) == 1, "the cancelled start to be retained")
    [command] = shell.backend.commands(scope)
    shell.started.append(command)
    assert command.status.phase == "running"
    shell.go.touch()
    await captured(command)
    assert command.stdout.read(0, 100).text == "kept\n"


def _bytes(command: Command) -> bytes:
    return command.stdout.read(command.stdout.available_start, 1 << 20).text.encode()


# -- A10: stdin -----------------------------------------------------------------------------------------------


async def test_stdin_kept_open_then_closed(shell: Shell) -> None:
    command = await shell.start("cat", keep_stdin_open=True)
    assert command.stdin_open
    assert await command.write_stdin(b"hello\n", close=False) == 6
    await until(lambda: command.stdout.available_end == 6, "the echo")
    assert command.stdout.read(0, 100).text == "hello\n"
    await raises("environment_request_invalid", command.write_stdin(b"", close=False))
    assert await command.write_stdin(b"", close=True) == 0
    assert not command.stdin_open
    await captured(command)
    assert (command.status.phase, command.status.exit_code) == ("exited", 0)
    await raises("environment_conflict", command.write_stdin(b"more", close=False))


async def test_stdin_closed_by_default(shell: Shell) -> None:
    command = await captured(await shell.start("cat"))
    assert (command.status.exit_code, command.stdout.available_end, command.stdin_open) == (0, 0, False)
    await raises("environment_conflict", command.write_stdin(b"x", close=False))


async def test_stdin_write_after_closing_is_a_conflict_while_running(shell: Shell) -> None:
    command = await shell.start(WAIT_FOR_GO, keep_stdin_open=True)
    await command.write_stdin(b"", close=True)
    await raises("environment_conflict", command.write_stdin(b"x", close=False))
    assert command.status.phase == "running"
    shell.go.touch()
    await captured(command)


# -- A11: the working directory -------------------------------------------------------------------------------


async def test_cwd_confinement(shell: Shell, tmp_path: Path) -> None:
    (shell.root / "sub" / "deeper").mkdir(parents=True)
    (shell.root / "file").write_text("")
    outside = tmp_path / "outside"
    outside.mkdir()
    (shell.root / "link").symlink_to(outside)
    (shell.root / "inside-link").symlink_to(shell.root / "sub")

    async def pwd(cwd: str | None, config: LocalMountConfig | None = None) -> str:
        command = await captured(await shell.start("pwd", cwd=cwd, config=config))
        return command.stdout.read(0, 4096).text.rstrip("\n")

    sub = os.path.realpath(shell.root / "sub")
    assert await pwd("sub") == sub
    assert await pwd("inside-link") == sub
    assert await pwd(str(shell.root / "sub")) == sub  # absolute, inside the root
    assert await pwd(None) == os.path.realpath(shell.root)
    in_sub = shell.config(working_directory="sub")
    assert await pwd(None, in_sub) == sub
    assert await pwd("deeper", in_sub) == os.path.join(sub, "deeper")
    assert await pwd("..", in_sub) == os.path.realpath(shell.root)
    for escape in ("..", "../..", "sub/../..", "link", "link/.", str(outside), "/"):
        await raises("environment_path_outside_mount", shell.start("pwd", cwd=escape))
    await raises("environment_path_outside_mount", shell.start("pwd", cwd="../..", config=in_sub))
    for missing in ("nope", "sub/nope", "file"):
        await raises("environment_not_found", shell.start("pwd", cwd=missing))
    await raises("environment_request_invalid", shell.start("pwd", cwd="su\0b"))


# -- A12: the environment -------------------------------------------------------------------------------------


async def test_environment_layers_and_no_secret(shell: Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-" + os.urandom(8).hex()
    monkeypatch.setenv("THREADLINE_TEST_SECRET", secret)
    monkeypatch.setenv("LANG", "C.UTF-8")
    config = shell.config(env={"MOUNT_VAR": "mount", "SHADOWED": "mount"})
    command = await captured(
        await shell.start("env", config=config, environment={"CALL_VAR": "call", "SHADOWED": "call"})
    )
    text = command.stdout.read(0, 1 << 20).text
    assert secret not in text
    pairs = dict(line.split("=", 1) for line in text.splitlines())
    inherited = {name for name in config.inherit_env if name in os.environ}
    allowed = inherited | set(config.env) | {"CALL_VAR", "SHADOWED", "PWD", "OLDPWD", "SHLVL", "_"}
    assert set(pairs) <= allowed, set(pairs) - allowed
    assert inherited <= set(pairs)
    assert (pairs["MOUNT_VAR"], pairs["CALL_VAR"], pairs["SHADOWED"], pairs["LANG"]) == (
        "mount",
        "call",
        "call",
        "C.UTF-8",
    )


async def test_a_c_locale_adds_no_variable(shell: Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands start through a fresh interpreter, which sets LC_CTYPE in a C locale (PEP 538): the
    command still sees exactly the environment built for it."""
    for name in ("LANG", "LC_ALL", "LC_CTYPE"):
        monkeypatch.delenv(name, raising=False)

    async def variables(config: LocalMountConfig) -> dict[str, str]:
        text = (await captured(await shell.start("env", config=config))).stdout.read(0, 1 << 20).text
        return dict(line.split("=", 1) for line in text.splitlines())

    assert "LC_CTYPE" not in await variables(shell.config())
    assert (await variables(shell.config(env={"LC_CTYPE": "C"})))["LC_CTYPE"] == "C"


async def test_environment_overlay_is_checked(shell: Shell) -> None:
    config = shell.config(max_env_entries=2, max_env_value_bytes=8)
    await raises("environment_request_invalid", shell.start("true", environment={"A": "x\0y"}, config=config))
    for key in ("1A", "A-B", "A=B", "", "A\n", "x" * 129):
        await raises(
            "environment_request_invalid", shell.start("true", environment={key: "v"}, config=config)
        )
    await raises(
        "environment_too_large",
        shell.start("true", environment={"A": "v", "B": "v", "C": "v"}, config=config),
    )
    await raises("environment_too_large", shell.start("true", environment={"A": "é" * 5}, config=config))
    ok = await captured(await shell.start('printf %s "$A"', environment={"A": "é" * 4}, config=config))
    assert ok.stdout.read(0, 100).text == "é" * 4


# -- A13: limits ------------------------------------------------------------------------------------------------


async def test_live_caps_per_scope_and_per_backend(shell: Shell) -> None:
    config = shell.config(max_live_commands=2)
    scope = shell.scope()
    first = [await shell.start(WAIT_FOR_GO, config=config, scope=scope) for _ in range(2)]
    await raises("environment_limit_exceeded", shell.start(WAIT_FOR_GO, config=config, scope=scope))
    outside_scope = await shell.start(WAIT_FOR_GO, config=config)  # the per-scope cap does not count it
    small = shell.new_backend(max_live_commands=2)
    on_small = [await shell.start(WAIT_FOR_GO, backend=small) for _ in range(2)]
    error = await raises("environment_limit_exceeded", shell.start(WAIT_FOR_GO, backend=small))
    assert error.details == {"limit": 2}
    shell.go.touch()
    for command in [*first, outside_scope, *on_small]:
        await captured(command)
    assert (await captured(await shell.start("true", backend=small))).status.exit_code == 0


async def test_retained_eviction_takes_the_oldest_fully_captured(shell: Shell) -> None:
    config = shell.config(max_retained_commands=2, max_live_commands=2)
    scope = shell.scope()
    live = await shell.start(WAIT_FOR_GO, config=config, scope=scope)
    old, new = [await captured(await shell.start("true", config=config, scope=scope)) for _ in range(2)]
    shell.backend.retain(scope, live)
    shell.backend.retain(scope, old)
    shell.backend.retain(scope, old)  # already there: nothing changes
    assert shell.backend.commands(scope) == [live, old]
    shell.backend.retain(scope, new)
    assert shell.backend.commands(scope) == [live, new]  # the live one is older but never evicted
    full = shell.scope()
    blockers = [await shell.start(WAIT_FOR_GO, config=config, scope=full) for _ in range(2)]
    for command in blockers:
        shell.backend.retain(full, command)
    extra = await shell.start(WAIT_FOR_GO, config=config)
    await raises("environment_limit_exceeded", _async(lambda: shell.backend.retain(full, extra)))
    with pytest.raises(ValueError):
        shell.backend.retain(full, live)  # it belongs to the other scope
    shell.go.touch()
    for command in [live, *blockers, extra]:
        await captured(command)


async def _async(call: Callable[[], object]) -> None:
    call()


async def test_retained_bytes_bound_evicts_then_refuses(shell: Shell) -> None:
    backend = shell.new_backend(max_retained_bytes=4096)
    config = shell.config(retained_bytes_per_stream=1024)
    scope = shell.scope(backend)
    (shell.root / "k.txt").write_text("k" * 1024)
    full = await captured(await shell.start("cat k.txt", backend=backend, config=config, scope=scope))
    backend.retain(scope, full)
    running = await shell.start(WAIT_FOR_GO, backend=backend, config=config)  # 1024 + 2048 held
    second = await shell.start(WAIT_FOR_GO, backend=backend, config=config)  # needs the finished one's room
    assert backend.commands(scope) == []
    await raises("environment_limit_exceeded", shell.start(WAIT_FOR_GO, backend=backend, config=config))
    shell.go.touch()
    for command in (running, second):
        await captured(command)


async def test_oversized_inputs_are_too_large(shell: Shell) -> None:
    config = shell.config(max_command_bytes=16, max_stdin_write_bytes=8, max_stdin_total_bytes=12)
    error = await raises("environment_too_large", shell.start("echo " + "x" * 12, config=config))
    assert error.details == {"limit": 16, "size": 17}
    assert "x" * 12 not in error.message
    await raises("environment_too_large", shell.start("echo é" + "x" * 10, config=config))
    await raises("environment_request_invalid", shell.start("", config=config))
    await raises("environment_request_invalid", shell.start("echo \0", config=config))
    command = await shell.start("cat", config=config, keep_stdin_open=True)
    await raises("environment_too_large", command.write_stdin(b"123456789", close=False))
    assert await command.write_stdin(b"12345678", close=False) == 8
    await raises("environment_too_large", command.write_stdin(b"12345", close=False))
    assert await command.write_stdin(b"1234", close=True) == 4
    await captured(command)
    assert command.stdout.read(0, 100).text == "123456781234"


async def test_execution_timeout_bounds(shell: Shell) -> None:
    config = shell.config(max_wall_time_seconds=10, foreground_timeout_seconds=10)
    for bad in (0, -1, 10.5, float("inf"), float("nan")):
        await raises("environment_request_invalid", shell.start("true", config=config, timeout_seconds=bad))
    await captured(await shell.start("true", config=config, timeout_seconds=10))


async def test_time_based_retention_and_idle_scopes(shell: Shell) -> None:
    backend = shell.new_backend(scope_idle_seconds=0.2)
    config = shell.config(retain_exited_seconds=0.2)
    scope = shell.scope(backend)
    backend.bind(scope)
    done = await captured(await shell.start("true", backend=backend, config=config, scope=scope))
    running = await shell.start(WAIT_FOR_GO, backend=backend, config=config, scope=scope)
    backend.retain(scope, done)
    backend.retain(scope, running)
    await until(lambda: backend.commands(scope) == [running], "the finished command to leave its scope")
    clock = shell.scope(backend)  # unbound and empty: its idle time runs from now
    await until(lambda: backend.scope(clock.id) is None, "the idle scope to go")
    assert backend.scope(scope.id) is scope  # bound, and it has a live command
    backend.unbind(scope)
    shell.go.touch()
    await captured(running)
    await until(lambda: backend.scope(scope.id) is None, "the emptied, unbound scope to go")


# -- A14 and §11: shutdown ---------------------------------------------------------------------------------------


async def test_aclose_kills_every_live_group(shell: Shell) -> None:
    backend = shell.new_backend()
    config = shell.config(terminate_grace_seconds=0.3)
    scope = shell.scope(backend)
    commands = [
        await shell.start(
            'echo $$ >> "$PIDS/all"; sleep 120 & echo $! >> "$PIDS/all"; wait', backend=backend, config=config
        ),
        await shell.start(
            'echo $$ >> "$PIDS/all"; sleep 120 & echo $! >> "$PIDS/all"; wait',
            backend=backend,
            config=config,
            scope=scope,
        ),
        await shell.start(
            "trap '' TERM; echo $$ >> \"$PIDS/all\"; while :; do sleep 0.02; done",
            backend=backend,
            config=config,
        ),
        await shell.start("cat", backend=backend, config=config, keep_stdin_open=True),
    ]
    backend.retain(scope, commands[1])
    finished = await captured(await shell.start("true", backend=backend, config=config))
    await until(lambda: len(shell.recorded()) == 5, "every pid recorded")
    with anyio.fail_after(BOUND):
        assert await backend.aclose() == 4
    assert backend.closed and await backend.aclose() == 4
    assert all(command.status.terminal for command in commands)
    assert [command.status.signal for command in commands] == ["terminate", "terminate", "kill", "terminate"]
    assert finished.status.phase == "exited"
    assert not any(alive(pid) for pid in shell.recorded())
    assert backend.scope(scope.id) is None and backend.commands(scope) == []
    await raises("environment_unavailable", shell.start("true", backend=backend))
    with pytest.raises(EnvironmentToolError):
        shell.scope(backend)


async def test_start_failures_are_unavailable(shell: Shell, tmp_path: Path) -> None:
    own_shell = tmp_path / "own-sh"
    shutil.copy("/bin/sh", own_shell)
    config = LocalMountConfig(shell.root, shell=str(own_shell))
    own_shell.unlink()
    await raises("environment_unavailable", shell.start("true", config=config))
    gone = tmp_path / "gone"
    gone.mkdir()
    vanished = LocalMountConfig(gone)
    gone.rmdir()
    await raises("environment_unavailable", shell.start("true", config=vanished))
    other = shell.scope()
    stale = shell.new_backend().new_scope(thread_id="t", issuer="i", subject="s", mount="m", root=shell.root)
    assert shell.backend.scope(stale.id) is None and shell.backend.scope(other.id) is other
    await raises("environment_unavailable", shell.start("true", scope=stale))


async def test_logs_hold_ids_and_phases_only(shell: Shell, caplog: pytest.LogCaptureFixture) -> None:
    marker = "marker-" + os.urandom(6).hex()
    caplog.set_level(logging.DEBUG, logger="threadline.environment")
    command = await captured(
        await shell.start(f"echo {marker}-out; echo {marker}-err >&2; exit 4", environment={"V": marker})
    )
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert command.id in text and "exited" in text
    assert marker not in text and str(shell.root) not in text


# -- configuration ------------------------------------------------------------------------------------------------


def test_mount_config_is_validated(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(root)
    (tmp_path / "out").mkdir()
    (root / "escape").symlink_to(tmp_path / "out")
    config = LocalMountConfig(tmp_path / "alias", working_directory="sub", env={"A": "1"})
    assert config.root == Path(os.path.realpath(root))
    assert (config.shell, dict(config.env), config.inherit_env) == (
        "/bin/sh",
        {"A": "1"},
        ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE"),
    )
    assert config.limits == LocalMountLimits()
    assert LocalMountConfig.model_validate_json(config.model_dump_json()) == config
    with pytest.raises(TypeError):
        config.env["B"] = "2"  # type: ignore[index]  # read-only: the assignment is what is tested
    assert LocalMountLimits().max_page_bytes == 16384 and LocalBackendLimits().max_retained_bytes == 268435456
    bad: list[dict[str, Any]] = [
        {"root": "relative"},
        {"root": tmp_path / "missing"},
        {"root": tmp_path / "r" / "sub" / ".." / "nope"},
        {"working_directory": ".."},
        {"working_directory": "escape"},
        {"working_directory": "missing"},
        {"working_directory": str(root)},
        {"shell": "sh"},
        {"shell": str(tmp_path / "none")},
        {"shell": str(root)},
        {"env": {"1A": "x"}},
        {"env": {"A": "x\0"}},
        {"inherit_env": ("BAD-NAME",)},
    ]
    for case in bad:
        options = dict(case)
        with pytest.raises(ValidationError):
            LocalMountConfig(options.pop("root", root), **options)
    with pytest.raises(ValidationError):
        LocalMountConfig.model_validate({"root": str(root), "unknown": 1})
    with pytest.raises(ValidationError):
        LocalMountLimits(max_page_bytes=4)
    with pytest.raises(ValidationError):
        LocalMountLimits(terminate_grace_seconds=float("inf"))
    with pytest.raises(ValidationError):
        LocalBackendLimits(max_live_commands=0)
    with pytest.raises(ValidationError):
        config.shell = "/bin/bash"  # type: ignore[misc]  # frozen: the assignment is what is tested


async def test_limits_that_rule_each_other_out_are_refused(shell: Shell) -> None:
    """Each in range, together impossible (issue 23): refused where the limits are built, and where a
    host mounts a configuration on a backend, never as a refusal of every command."""
    pairs = {
        "foreground_timeout_seconds": {"max_wall_time_seconds": 10},
        "max_retained_commands": {"max_live_commands": 9, "max_retained_commands": 8},
        "max_stdin_total_bytes": {"max_stdin_write_bytes": 9, "max_stdin_total_bytes": 8},
    }
    for later, values in pairs.items():
        with pytest.raises(ValidationError) as caught:
            LocalMountLimits(**values)
        [error] = caught.value.errors()
        assert error["loc"] == (later,), error
    at_the_bounds = LocalMountLimits(
        max_wall_time_seconds=10,
        foreground_timeout_seconds=10,
        max_live_commands=9,
        max_retained_commands=9,
        max_stdin_write_bytes=8,
        max_stdin_total_bytes=8,
    )
    assert at_the_bounds.foreground_timeout_seconds == 10
    wide = shell.config(retained_bytes_per_stream=209715200)  # 2 x 200 MiB > the 256 MiB bound
    with pytest.raises(LimitsConflict) as conflict:
        shell.backend.mount("build", wide)
    assert (conflict.value.mount_limit, conflict.value.backend_limit) == (
        "retained_bytes_per_stream",
        "max_retained_bytes",
    )
    LocalBackendLimits().check_mount(LocalMountLimits(retained_bytes_per_stream=134217728))  # exactly fits
    with pytest.raises(LimitsConflict):
        LocalBackendLimits(max_retained_bytes=1000).check_mount(LocalMountLimits())


def test_status_json() -> None:
    assert Status("running").to_json() == {
        "phase": "running",
        "exit_code": None,
        "signal": None,
        "started_at": None,
        "ended_at": None,
    }
    assert not Status("running").terminal and Status("missing").terminal
