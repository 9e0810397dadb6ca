from collections.abc import AsyncIterator

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests run on asyncio, which the server's grpc.aio uses too."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
async def one_event_loop(anyio_backend: str) -> AsyncIterator[None]:
    """Every async test and fixture of the session on one event loop.

    grpc.aio hands a completion to the loop its call was started on; with a loop per test, a late
    completion of an earlier test's call (its channel closed, its server stopped) reached a closed
    loop and failed whichever test was running then ("Event loop is closed").
    """
    yield


# -- the real server, in-process and as a subprocess -------------------------------------------------
# Everything below is appended for the server's end-to-end tests (tests/test_server_*.py).

import asyncio  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Awaitable, Callable, Iterator, Sequence  # noqa: E402
from concurrent.futures import Future  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
THREADLINE = REPO / ".venv" / "bin" / "threadline"


@dataclass
class RunningServer:
    """A `ThreadlineServer` serving on its own event loop in a background thread.

    grpc.aio binds a server to the loop it was created on; a thread of its own lets one server
    outlive each test's loop and serve the whole session, as the style guide asks.
    """

    address: str
    server: Any
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    def call(self, make: Callable[[], Awaitable[Any]]) -> Any:
        """Run a coroutine on the server's loop and wait for its result (e.g. to read its state)."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(_awaited(make), self.loop)
        return future.result(timeout=30)

    @property
    def active_runs(self) -> int:
        """How many runs the server is executing right now (read on its own loop)."""

        async def count() -> int:
            return len(self.server.runs)

        return int(self.call(count))

    def runs_after_calls(self, within: float = 10.0) -> int:
        """`active_runs` once the calls just answered have unwound (0 soon, unless a run leaked).

        A status can reach the client while the server's handler is still leaving its blocks, so a
        test that checks for leaks waits for the count to settle instead of reading it once.
        """
        import time

        end = time.monotonic() + within
        while (count := self.active_runs) and time.monotonic() < end:
            time.sleep(0.02)
        return count

    def close(self) -> None:
        async def stop() -> None:
            await self.server.stop(0)

        self.call(stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


async def _awaited(make: Callable[[], Awaitable[Any]]) -> Any:
    return await make()


def _start_in_thread(**overrides: Any) -> RunningServer:
    from server.agents import build_registry
    from server.app import ThreadlineServer
    from server.config import ServerConfig

    agents = overrides.pop("agents", None)
    config = ServerConfig(**{"host": "127.0.0.1", "port": 0, "store": "memory", **overrides})
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="threadline-test-server", daemon=True)
    thread.start()

    async def start() -> tuple[Any, str]:
        registry = agents if agents is not None else build_registry()
        server = ThreadlineServer(config, registry)
        return server, await server.start()

    server, address = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    return RunningServer(address=address, server=server, loop=loop, thread=thread)


StartServer = Callable[..., Awaitable[RunningServer]]


@pytest.fixture(scope="session")
def _servers() -> Iterator[list[RunningServer]]:
    started: list[RunningServer] = []
    yield started
    for running in started:
        running.close()


@pytest.fixture(scope="session")
def start_server(_servers: list[RunningServer]) -> StartServer:
    """`server = await start_server(max_concurrent_runs=1, token=...)`: a real server on 127.0.0.1:0.

    Keyword arguments are `ServerConfig` fields, plus `agents=` (an `AgentRegistry`; default: the
    demo registry of `threadline serve`). Servers live until the end of the session.
    """

    async def start(**overrides: Any) -> RunningServer:
        running = await asyncio.to_thread(_start_in_thread, **overrides)
        _servers.append(running)
        return running

    return start


@pytest.fixture(scope="session")
def server(_servers: list[RunningServer]) -> RunningServer:
    """The session's default server: `threadline serve`'s settings on a free loopback port."""
    running = _start_in_thread()
    _servers.append(running)
    return running


@dataclass
class ServeProcess:
    """`threadline serve` as a subprocess; `address` comes from its first stdout line."""

    process: subprocess.Popen[str]
    address: str
    first_line: str
    stderr_lines: list[str] = field(default_factory=list)

    def stop(self, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(timeout=timeout)


def spawn_serve(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30, ignoring: Sequence[str] = ()
) -> ServeProcess:
    """Start `.venv/bin/threadline serve --port 0 ARGS` and wait for `listening on HOST:PORT`.

    `ignoring` names signals (`INT`, `QUIT`) the server starts with ignored, as a shell script's
    `serve &` would start it.

    Raises:
        RuntimeError: The process exited (or printed something else) before listening.
    """
    # Every server of the suite keeps its threads apart (THREADS §6): memory unless a test names a store.
    store = [] if "--store" in args else ["--store", "memory"]
    command = [str(THREADLINE), "serve", "--port", "0", *store, *args]
    if ignoring:  # the shell ignores them, and `exec` keeps what is ignored
        command = ["/bin/sh", "-c", f'trap "" {" ".join(ignoring)}; exec "$@"', "sh", *command]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    if not first.startswith("listening on "):
        process.kill()
        _, err = process.communicate(timeout=timeout)
        raise RuntimeError(f"threadline serve did not start: {first!r}\n{err}")
    return ServeProcess(process=process, address=first.removeprefix("listening on "), first_line=first)


@pytest.fixture
def serve_process() -> Iterator[Callable[..., ServeProcess]]:
    """Start `threadline serve --port 0 ...` subprocesses, killed at the end of the test."""
    started: list[ServeProcess] = []

    def spawn(*args: str, env: dict[str, str] | None = None) -> ServeProcess:
        running = spawn_serve(*args, env=env)
        started.append(running)
        return running

    yield spawn
    for running in started:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(timeout=10)
        for stream in (running.process.stdout, running.process.stderr):
            if stream is not None:
                stream.close()


def python_executable() -> str:
    """The interpreter of the test run (for subprocesses that need the same venv)."""
    return sys.executable


def free_port() -> int:
    """A loopback port free now (for a server's `--http-port`, which has no `listening on` line)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def error_info(error: Any) -> Any:
    """The `google.rpc.ErrorInfo` of a failed call, decoded from its `grpc-status-details-bin` trailer.

    Returns `None` when the status carries none (e.g. grpc's own RESOURCE_EXHAUSTED on size).
    """
    from google.rpc import error_details_pb2, status_pb2

    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            assert status.code == error.code().value[0], "details and status must agree"
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    return None


# -- durable threads (ThreadService) -------------------------------------------------------------------
# Appended for tests/test_thread_*.py: how a refused thread call reads, and fresh IDs.


def refusal(error: Any) -> tuple[Any, str, dict[str, str]]:
    """A failed call as `(grpc.StatusCode, ErrorInfo reason, ErrorInfo metadata)`.

    Asserts the status carries an `ErrorInfo` of domain `threadline`: a bare status is a defect.
    """
    info = error_info(error)
    assert info is not None, f"no ErrorInfo in {error.code()} {error.details()!r}"
    assert info.domain == "threadline", info
    return error.code(), info.reason, dict(info.metadata)


def bad_request_fields(error: Any) -> list[str]:
    """The `google.rpc.BadRequest` field paths of a failed call (none without that detail)."""
    from google.rpc import error_details_pb2, status_pb2

    fields: list[str] = []
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(bad):
                    fields += [v.field for v in bad.field_violations]
    return fields


def fresh_thread_id(prefix: str = "t") -> str:
    """A thread ID no other test uses (the core's `[a-z][a-z0-9]*_[a-z0-9]+` form)."""
    import uuid

    return f"{prefix}_{uuid.uuid4().hex}"


def thread_spec(thread_id: str, **fields: Any) -> Any:
    """A `ThreadRunSpec` for `thread_id` with a fresh `request_id` unless one is given."""
    import uuid

    from threadline.v1 import thread_service_pb2

    fields.setdefault("request_id", f"req-{uuid.uuid4().hex}")
    return thread_service_pb2.ThreadRunSpec(thread_id=thread_id, **fields)


async def create_thread(stub: Any, **fields: Any) -> Any:
    """`CreateThread` with a fresh ID unless one is given; the new `Thread`."""
    from threadline.v1 import thread_service_pb2

    fields.setdefault("thread_id", fresh_thread_id())
    return (await stub.CreateThread(thread_service_pb2.CreateThreadRequest(**fields))).thread


async def get_thread(stub: Any, thread_id: str, *, full: bool = False) -> Any:
    """`GetThread` in the BASIC view, or FULL (with the head's state)."""
    from threadline.v1 import thread_service_pb2 as ts

    view = ts.THREAD_VIEW_FULL if full else ts.THREAD_VIEW_UNSPECIFIED
    return (await stub.GetThread(ts.GetThreadRequest(thread_id=thread_id, view=view))).thread


async def run_thread(stub: Any, thread_id: str, **fields: Any) -> Any:
    """`RunThread` of `thread_spec(thread_id, **fields)`; the `RunThreadResponse`."""
    from threadline.v1 import thread_service_pb2

    return await stub.RunThread(thread_service_pb2.RunThreadRequest(spec=thread_spec(thread_id, **fields)))


def events_of(response: Any) -> list[Any]:
    """The events of one `StreamThreadRunResponse`, packed or not."""
    return [response.event] if response.HasField("event") else list(response.events)


async def stream_thread(stub: Any, thread_id: str, *, max_events: int = 0, **fields: Any) -> list[Any]:
    """`StreamThreadRun` read to its end; every `RunEvent`, in order."""
    from threadline.v1 import thread_service_pb2

    request = thread_service_pb2.StreamThreadRunRequest(
        spec=thread_spec(thread_id, **fields), max_events_per_message=max_events
    )
    return [event async for response in stub.StreamThreadRun(request) for event in events_of(response)]


async def refused(call: Awaitable[object]) -> tuple[Any, str, dict[str, str]]:
    """Await a call that must fail; its `refusal` (code, reason, metadata)."""
    import grpc

    try:
        await call
    except grpc.aio.AioRpcError as error:
        return refusal(error)
    raise AssertionError("the call succeeded; it had to be refused")


async def drained(call: Any) -> None:
    """Read a server stream to its end, so its error status, if any, is raised."""
    async for _ in call:
        pass


async def list_checkpoints(stub: Any, thread_id: str, page_size: int = 0) -> list[Any]:
    """All of a thread's checkpoints, newest first, walking every page."""
    from threadline.v1 import thread_service_pb2

    found: list[Any] = []
    token = ""
    while True:
        page = await stub.ListCheckpoints(
            thread_service_pb2.ListCheckpointsRequest(
                thread_id=thread_id, page_size=page_size, page_token=token
            )
        )
        found += page.checkpoints
        token = page.next_page_token
        if not token:
            return found


async def checkpoint_state(stub: Any, thread_id: str, revision: int) -> Any:
    """The `HarnessState` of one checkpoint (`GetCheckpoint`)."""
    from threadline.v1 import thread_service_pb2

    request = thread_service_pb2.GetCheckpointRequest(thread_id=thread_id, revision=revision)
    return (await stub.GetCheckpoint(request)).checkpoint.state


def completed_output(result: Any) -> str:
    """A COMPLETED `RunResult`'s text output (asserts the status)."""
    import json

    from threadline.v1 import run_pb2

    assert result.status == run_pb2.RUN_STATUS_COMPLETED, result
    value = json.loads(result.output_json)
    assert isinstance(value, str)
    return value


def user_prompts(state: Any) -> list[str]:
    """The user prompts of a `HarnessState`'s history, in order."""
    import json

    return [
        part["content"]
        for message in json.loads(state.message_history.data)
        for part in message["parts"]
        if part["part_kind"] == "user-prompt"
    ]


# -- PostgreSQL (THREADS §7): one throwaway cluster for the session, a fresh database per test ---------

from pgcluster import Cluster  # noqa: E402

from harness.threads import ThreadStore, open_database  # noqa: E402


@dataclass(frozen=True)
class PgStore:
    """A fresh database on the session's cluster: `--store` for it and the env holding its password."""

    cluster: Cluster
    url: str

    @property
    def args(self) -> tuple[str, str]:
        return ("--store", self.url)

    @property
    def env(self) -> dict[str, str]:
        return self.cluster.env


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A started cluster (initdb in a temporary directory, as `postgres` when run as root), removed at the end."""
    cluster = Cluster(fsync=False)
    cluster.start()
    yield cluster
    cluster.remove()


@pytest.fixture
def pg_store(pg_cluster: Cluster) -> PgStore:
    """A new empty database of the session's cluster (started again if a test stopped it)."""
    if not pg_cluster.running():
        pg_cluster.start()
    return PgStore(pg_cluster, pg_cluster.database())


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ThreadStore]:
    """An in-process thread store on a new SQLite file, then on a new PostgreSQL database (a test
    module's own `store` fixture overrides it)."""
    if request.param == "sqlite":
        database = await open_database("sqlite", str(tmp_path / "threads.db"))
    else:
        pg: PgStore = request.getfixturevalue("pg_store")
        monkeypatch.setenv("PGPASSWORD", pg.env["PGPASSWORD"])
        database = await open_database("postgresql", pg.url)
    opened = ThreadStore(database, replica="test")
    yield opened
    opened.close()
    await database.close()
