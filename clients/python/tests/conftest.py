"""One real server for the whole test run, reached over loopback.

Unless `THREADLINE_ADDR` names a running server (`host:port`), the session starts
`<repo root>/.venv/bin/threadline serve --port 0 --store memory` (threads in memory, so parallel
servers never share the default thread store file), reads `listening on <host>:<port>` from its
first stdout line, and stops it (SIGTERM, then SIGKILL) when the session ends. Its logs go to a
temporary file whose tail is shown if it fails to start; `logged_server` is a server of the session's
own whose log lines (JSON, one per run start and end) tests can read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
import threadline_client as tl

REPO_ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
async def one_event_loop(anyio_backend: str) -> AsyncIterator[None]:
    """Every async test and fixture of the session on one event loop.

    grpc.aio hands a completion to the loop its call was started on; with a loop per test, a late
    completion of an earlier test's call could reach a closed loop and fail whichever test ran then.
    """
    yield


SERVE_ARGS = ("serve", "--port", "0", "--store", "memory")
"""Every server the suite starts keeps its threads in memory, its own."""


def _server_command() -> list[str]:
    binary = REPO_ROOT / ".venv" / "bin" / "threadline"
    if binary.exists():
        return [str(binary), *SERVE_ARGS]
    found = shutil.which("threadline")
    if found is None:
        message = f"no threadline server: {binary} is missing and `threadline` is not on PATH"
        if os.environ.get("THREADLINE_ADDR"):
            pytest.skip(message)  # only the tests that need a server of their own
        pytest.fail(message)
    return [found, *SERVE_ARGS]


@dataclass(frozen=True)
class Served:
    """A `threadline serve` this session started."""

    addr: str
    """Its `host:port`."""
    log: IO[str]
    """The file its stderr goes to."""
    process: subprocess.Popen[str]
    """The server process."""

    def stop(self) -> int:
        """Stop it now (SIGTERM, then SIGKILL after 20 s) and return its exit code."""
        _stop(self.process)
        return self.process.returncode

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON line the server has finished logging so far."""
        # pread leaves the file offset alone, which the server's writes share with this handle.
        fd = self.log.fileno()
        text = os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")
        # Only whole lines: a long line (a span with its attributes) reaches the file in several writes.
        complete = text[: text.rfind("\n") + 1]
        return [json.loads(line) for line in complete.splitlines() if line.startswith("{")]

    async def run_logged(self, event: str, request_id: str, *, within: float = 30.0) -> dict[str, Any]:
        """The `event` line (`run_started`, `run_finished`) of the run with `request_id`, once logged.

        Fails when it does not appear `within` seconds (a bound for a broken server, not a measure).
        """
        with anyio.move_on_after(within):
            while True:
                for line in self.log_lines():
                    if line.get("event") == event and line.get("request_id") == request_id:
                        return line
                await anyio.sleep(0.02)
        pytest.fail(f"the server logged no {event} of {request_id!r} within {within} s")


@contextlib.contextmanager
def serve(*extra: str, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    """Run `threadline serve --port 0 --store memory EXTRA...` and yield it; stop it on exit.

    `env` adds to (or overrides) the environment the server inherits.
    """
    # The server reads a default token from THREADLINE_TOKEN; the suite's servers set theirs explicitly.
    environment = {k: v for k, v in os.environ.items() if k != "THREADLINE_TOKEN"} | dict(env or {})
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as log:
        process = subprocess.Popen(
            [*_server_command(), *extra],
            cwd=REPO_ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            yield Served(_read_address(process, log), log, process)
        finally:
            _stop(process)
            assert process.stdout is not None
            process.stdout.close()


@pytest.fixture(scope="session")
def server_addr() -> Iterator[str]:
    """`host:port` of the server every scenario talks to."""
    given = os.environ.get("THREADLINE_ADDR")
    if given:
        yield given
        return
    with serve() as served:
        yield served.addr


@pytest.fixture(scope="session")
def logged_server() -> Iterator[Served]:
    """A server of the session's own (also with `THREADLINE_ADDR`), whose log tests read."""
    with serve() as served:
        yield served


@pytest.fixture(scope="session")
def server_token() -> str | None:
    """The bearer token of `server_addr`: THREADLINE_TOKEN for a server named by THREADLINE_ADDR."""
    return os.environ.get("THREADLINE_TOKEN") if os.environ.get("THREADLINE_ADDR") else None


StartServer = Callable[..., str]


@pytest.fixture(scope="session")
def serve_with() -> Callable[..., contextlib.AbstractContextManager[Served]]:
    """`serve` itself, for a test that starts (and may stop) a server of its own."""
    return serve


@pytest.fixture(scope="session")
def start_server() -> Iterator[StartServer]:
    """Start an extra `threadline serve --port 0 --store memory ARGS...` for this session; returns its
    `host:port`."""
    with contextlib.ExitStack() as stack:

        def start(*args: str) -> str:
            return stack.enter_context(serve(*args)).addr

        yield start


def _read_address(process: subprocess.Popen[str], log: IO[str]) -> str:
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        # Keeps reading so the server never blocks on a full stdout pipe.
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    # Once the server exits, the pump sees EOF and ends; the fixture then closes the pipe.
    threading.Thread(target=pump, name="threadline-serve-stdout", daemon=True).start()
    try:
        first = lines.get(timeout=START_TIMEOUT)
    except queue.Empty:
        first = ""
    prefix = "listening on "
    if not first.startswith(prefix):
        _stop(process)
        log.seek(0)
        tail = log.read()[-4000:]
        pytest.fail(f"threadline serve did not start (first stdout line {first!r}); stderr:\n{tail}")
    return first[len(prefix) :].strip()


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture
async def client(server_addr: str, server_token: str | None) -> AsyncIterator[tl.Client]:
    async with tl.Client(server_addr, token=server_token, timeout=60.0) as client:
        yield client


_HOST_WITHOUT = """
import asyncio, importlib.abc, os, sys

PACKAGE = os.environ["WITHOUT"]

def _blocked(name):
    return name == PACKAGE or name.startswith(PACKAGE + ".")

class Without(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if _blocked(name):
            raise ImportError(f"{PACKAGE} is not installed for this host ({name})")
        return None

sys.meta_path.insert(0, Without())
import threadline_client as tl

async def main():
    async with tl.Client(os.environ["ADDR"], token=os.environ.get("TOKEN") or None) as client:
{body}
    loaded = sorted(name for name in sys.modules if _blocked(name))
    assert not loaded, loaded
    print("ok")

asyncio.run(main())
"""


@pytest.fixture(scope="session")
def host_without(server_addr: str, server_token: str | None) -> Callable[..., None]:
    """`host_without(package, body)`: run `body` (statements using `client` and `tl`) in a host process
    where `package` cannot be imported, against the suite's server, and check that it succeeds without
    loading any of it (`strict=True`: with warnings as errors)."""
    return functools.partial(_run_host_without, addr=server_addr, token=server_token)


def _run_host_without(package: str, body: str, *, addr: str, token: str | None, strict: bool = False) -> None:
    script = _HOST_WITHOUT.replace(
        "{body}", "\n".join(f"        {line}" for line in body.strip().splitlines())
    )
    env = {**os.environ, "ADDR": addr, "TOKEN": token or "", "WITHOUT": package}
    done = subprocess.run(
        [sys.executable, *(["-W", "error"] if strict else []), "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
