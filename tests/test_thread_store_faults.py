"""A store the server cannot use stops it at start (THREADS §6, §7 "Store faults").

A SQLite file or directory it cannot write, a default data directory it cannot create, and a
database whose schema is newer than the server's: each makes `threadline serve` exit non-zero
before it listens, with a message that names `--store`, and never fall back to memory. With no
`--store` at all, the server keeps threads in `threads.sqlite3` under the user's data directory and
says where on stderr.

Root ignores file modes, and CI runs as root: where a test needs a file mode to hold, the server
runs with CAP_DAC_OVERRIDE dropped (`setpriv`), so uid 0 obeys modes like any user. A path whose
parent is a regular file cannot be created by anyone, root included, and needs no such help.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import grpc
import pytest
from conftest import THREADLINE, create_thread, fresh_thread_id, get_thread, run_thread, user_prompts
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, thread_service_pb2_grpc

pytestmark = pytest.mark.anyio

START_TIMEOUT_S = 30.0
"""A server that refuses its store exits at once; one still running after this serves, wrongly."""
UNKNOWN_REVISION = "ffffffffffff"


def command(*args: str, prefix: Sequence[str] = ()) -> list[str]:
    return [*prefix, str(THREADLINE), "serve", "--port", "0", *args]


def refuses_to_start(*args: str, env: dict[str, str] | None = None, prefix: Sequence[str] = ()) -> str:
    """Run `threadline serve ARGS`, which must exit non-zero without listening; its stderr."""
    process = subprocess.Popen(
        command(*args, prefix=prefix),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    # The first stdout line (or end of file) comes at once either way; a server that listens is
    # stopped right there rather than waited out.
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout=START_TIMEOUT_S)
    first = process.stdout.readline() if ready else ""
    if not ready or first.startswith("listening on"):
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"the server started instead of refusing its store: {first!r}\n{err}")
    out, err = process.communicate(timeout=START_TIMEOUT_S)
    out = first + out
    assert "listening on" not in out, f"it served (a fallback?): {out!r}\n{err}"
    assert process.returncode != 0, err
    assert "--store" in err, f"the message must name --store:\n{err}"
    return err


@contextmanager
def serving(*args: str, env: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """`threadline serve ARGS` with exactly `env`; (address, stderr lines read after it stopped)."""
    process = subprocess.Popen(
        command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []
    try:
        first = process.stdout.readline().strip()
        if not first.startswith("listening on "):
            process.kill()
            raise AssertionError(f"did not start: {first!r}\n{process.stderr.read()}")
        yield first.removeprefix("listening on "), lines
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        lines += process.stderr.read().splitlines()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()


@asynccontextmanager
async def channel_to(address: str) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(address) as channel:
        yield channel


def make_store(path: Path) -> None:
    """A real store file: a server started on it once (migrated) and stopped cleanly."""
    with serving("--store", f"sqlite:{path}", env=dict(os.environ)):
        pass
    assert path.is_file()


@pytest.fixture
def unprivileged(tmp_path: Path) -> list[str]:
    """The command prefix under which file modes bind this process's children, even as root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and no setpriv to drop CAP_DAC_OVERRIDE: file modes cannot hold")
    prefix = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    probe = tmp_path / "probe"
    probe.write_text("")
    probe.chmod(0o444)
    tried = subprocess.run([*prefix, "sh", "-c", f"echo x >> {probe}"], capture_output=True, check=False)
    if tried.returncode == 0:
        pytest.skip("this root can write a 0444 file even without CAP_DAC_OVERRIDE")
    return prefix


# --- a store it cannot write ------------------------------------------------------------------------


def test_a_store_path_under_a_regular_file(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    refuses_to_start("--store", f"sqlite:{not_a_directory / 'threads.db'}")
    assert not_a_directory.read_text() == ""


def test_a_read_only_store_file_and_directory(tmp_path: Path, unprivileged: list[str]) -> None:
    store = tmp_path / "threads.db"
    make_store(store)
    for path in tmp_path.glob("threads.db*"):
        path.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        refuses_to_start("--store", f"sqlite:{store}", prefix=unprivileged)
    finally:
        tmp_path.chmod(0o755)


def test_a_read_only_store_file_in_a_writable_directory(tmp_path: Path, unprivileged: list[str]) -> None:
    store = tmp_path / "threads.db"
    make_store(store)
    store.chmod(0o444)
    refuses_to_start("--store", f"sqlite:{store}", prefix=unprivileged)


def test_a_new_store_in_a_read_only_directory(tmp_path: Path, unprivileged: list[str]) -> None:
    directory = tmp_path / "locked"
    directory.mkdir(mode=0o555)
    try:
        refuses_to_start("--store", f"sqlite:{directory / 'threads.db'}", prefix=unprivileged)
        assert list(directory.iterdir()) == []
    finally:
        directory.chmod(0o755)


def test_a_writable_store_in_a_read_only_directory(tmp_path: Path, unprivileged: list[str]) -> None:
    """SQLite's WAL needs files beside the database: a file it may write is not enough."""
    directory = tmp_path / "locked"
    directory.mkdir()
    store = directory / "threads.db"
    make_store(store)
    for path in directory.glob("threads.db-*"):
        path.unlink()
    directory.chmod(0o555)
    try:
        refuses_to_start("--store", f"sqlite:{store}", prefix=unprivileged)
    finally:
        directory.chmod(0o755)


# --- a schema newer than the server's ---------------------------------------------------------------


def test_a_database_with_a_newer_schema_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "threads.db"
    make_store(store)
    db = sqlite3.connect(store)
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "alembic_version" in tables, tables
        with db:
            db.execute("UPDATE alembic_version SET version_num = ?", (UNKNOWN_REVISION,))
    finally:
        db.close()
    err = refuses_to_start("--store", f"sqlite:{store}")
    assert UNKNOWN_REVISION in err or "newer" in err.lower(), f"say what is wrong with the schema:\n{err}"
    db = sqlite3.connect(store)
    try:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(UNKNOWN_REVISION,)]
    finally:
        db.close()


# --- the default store: the user's data directory --------------------------------------------------


def test_a_data_directory_that_is_a_regular_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("")
    refuses_to_start(env={"XDG_DATA_HOME": str(data)})


def test_a_data_directory_whose_threadline_entry_is_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "threadline").write_text("")
    refuses_to_start(env={"XDG_DATA_HOME": str(tmp_path)})


def test_a_read_only_data_directory(tmp_path: Path, unprivileged: list[str]) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o555)
    try:
        refuses_to_start(env={"XDG_DATA_HOME": str(data)}, prefix=unprivileged)
        assert list(data.iterdir()) == []
    finally:
        data.chmod(0o755)


def default_env(**changes: str | None) -> dict[str, str]:
    env = {**os.environ}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.mark.parametrize("where", ["XDG_DATA_HOME", "HOME"])
async def test_no_store_flag_serves_threads_from_the_user_data_directory(tmp_path: Path, where: str) -> None:
    if where == "XDG_DATA_HOME":
        env = default_env(XDG_DATA_HOME=str(tmp_path / "data"))
        expected = tmp_path / "data" / "threadline" / "threads.sqlite3"
    else:
        env = default_env(XDG_DATA_HOME=None, HOME=str(tmp_path))
        expected = tmp_path / ".local" / "share" / "threadline" / "threads.sqlite3"
    thread_id = fresh_thread_id()
    with serving(env=env) as (address, lines):
        assert expected.is_file()
        async with channel_to(address) as channel:
            info = await harness_service_pb2_grpc.HarnessServiceStub(channel).GetServerInfo(
                harness_service_pb2.GetServerInfoRequest()
            )
            assert info.thread_store.kind == harness_service_pb2.THREAD_STORE_KIND_SQLITE
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            await create_thread(stub, thread_id=thread_id)
            done = await run_thread(stub, thread_id, text="hello")
    assert any(str(expected) in line for line in lines), "the path is logged on stderr:\n" + "\n".join(lines)
    with serving(env=env) as (address, _):
        async with channel_to(address) as channel:
            kept = await get_thread(thread_service_pb2_grpc.ThreadServiceStub(channel), thread_id, full=True)
    assert kept.revision == done.revision and user_prompts(kept.head.state) == ["hello"]
