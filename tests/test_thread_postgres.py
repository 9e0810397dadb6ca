"""The thread store on PostgreSQL (THREADS §3, §6, §7 "Store faults"): start, refusals, secrets, server facts.

Every server is `threadline serve --store postgresql://…` on a fresh database of the session's cluster,
its password in `PGPASSWORD` unless a test puts it in the URL on purpose. A store the server cannot use
stops it before it listens, with a message that names `--store` and never holds a password: it lands in
logs, terminals and CI output.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import grpc
import pgcluster
import pytest
from conftest import (
    THREADLINE,
    PgStore,
    bad_request_fields,
    completed_output,
    create_thread,
    get_thread,
    refusal,
    refused,
    run_thread,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

from harness.threads.schema import SCHEMA_REVISION, metadata

pytestmark = pytest.mark.anyio

START_TIMEOUT_S = 30.0
UNKNOWN_REVISION = "ffffffffffff"
SECRET = "s3cret-in-the-url"
"""A password a test writes into a `--store` URL: it must not come back in any output."""


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without libpq's settings (no password but the one a test gives)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PG")}, **extra}


def dbname(url: str) -> str:
    return url.rsplit("/", 1)[1]


def with_password(url: str, password: str) -> str:
    return url.replace(f"{pgcluster.USER}@", f"{pgcluster.USER}:{password}@", 1)


class Served:
    """`threadline serve ARGS` with exactly `env`, started at once; `listening()` waits for its address.

    Its stderr is drained from the start; `lines` holds every output line once `stop()` returned.
    """

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(THREADLINE), "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        self.lines.extend(self.process.stderr)

    def listening(self) -> str:
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        if not first.startswith("listening on "):
            self.close()
            raise AssertionError(f"did not start: {first!r}\n{''.join(self.lines)}")
        self.lines.append(first)
        return first.strip().removeprefix("listening on ")

    def stop(self) -> None:
        """SIGTERM; it must exit 0. Then every line it wrote is in `lines`."""
        assert self.process.stdout is not None
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=START_TIMEOUT_S) == 0
        self.lines.extend(self.process.stdout.read().splitlines())
        self._reader.join(timeout=10)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._reader.join(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def serving(*args: str, env: dict[str, str]) -> Iterator[Served]:
    served = Served(*args, env=env)
    try:
        yield served
    finally:
        served.close()


def refuses_to_start(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """Run `threadline serve ARGS`, which must exit non-zero without listening; (exit code, all output)."""
    process = subprocess.Popen(
        [str(THREADLINE), "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout=START_TIMEOUT_S)
    first = process.stdout.readline() if ready else ""
    if not ready or first.startswith("listening on"):
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"the server started instead of refusing its store: {first!r}\n{err}")
    out, err = process.communicate(timeout=START_TIMEOUT_S)
    assert "listening on" not in first + out, f"it served: {first + out!r}\n{err}"
    assert process.returncode != 0, err
    assert "--store" in err, f"the message must name --store:\n{err}"
    return process.returncode, first + out + err


def records(lines: list[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines if line.startswith("{")]


# -- 7. replicas starting together ---------------------------------------------------------------------


async def test_two_replicas_starting_together_migrate_the_database_once(pg_store: PgStore) -> None:
    env = clean_env(**pg_store.env)
    # Both processes start before either is waited for: each imports for a second or more before it
    # touches the database, so they reach the empty database together and race for the migration.
    with serving(*pg_store.args, env=env) as one_server, serving(*pg_store.args, env=env) as two_server:
        first, second = one_server.listening(), two_server.listening()
        async with grpc.aio.insecure_channel(first) as one, grpc.aio.insecure_channel(second) as two:
            made = await create_thread(thread_service_pb2_grpc.ThreadServiceStub(one), agent="default")
            done = await run_thread(thread_service_pb2_grpc.ThreadServiceStub(two), made.thread_id, text="hi")
            assert completed_output(done.result) == "You said: hi"
            seen = await get_thread(thread_service_pb2_grpc.ThreadServiceStub(one), made.thread_id)
            assert seen.revision == done.revision
    with pg_store.cluster.connect(dbname(pg_store.url)) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(SCHEMA_REVISION,)]
        tables = conn.execute(
            "SELECT table_name, count(*) FROM information_schema.tables"
            " WHERE table_schema = 'public' GROUP BY table_name"
        ).fetchall()
        keys = conn.execute("SELECT count(*) FROM store_settings WHERE name = 'page_token_key'").fetchall()
    counts = {str(name): int(str(n)) for name, n in tables}
    assert set(counts) == {*metadata.tables, "alembic_version"}, counts
    assert set(counts.values()) == {1}
    assert keys == [(1,)], "one page token key for every replica"


# -- 8. what the server refuses at start, and the password -------------------------------------------


def migrated(store: PgStore) -> None:
    """A database a server has migrated (started on it once, stopped cleanly)."""
    with serving(*store.args, env=clean_env(**store.env)) as served:
        served.listening()
        served.stop()


def test_a_database_with_a_newer_schema_is_refused(pg_store: PgStore) -> None:
    migrated(pg_store)
    with pg_store.cluster.connect(dbname(pg_store.url)) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (UNKNOWN_REVISION,))
    _, output = refuses_to_start(*pg_store.args, env=clean_env(**pg_store.env))
    assert UNKNOWN_REVISION in output and "newer" in output, f"say what is wrong with the schema:\n{output}"
    assert pgcluster.PASSWORD not in output
    with pg_store.cluster.connect(dbname(pg_store.url)) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(UNKNOWN_REVISION,)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("where", ["PGPASSWORD", "url"])
def test_a_wrong_password_is_refused_without_echoing_it(pg_store: PgStore, where: str) -> None:
    wrong = "wrong-" + SECRET
    if where == "url":
        code, output = refuses_to_start("--store", with_password(pg_store.url, wrong), env=clean_env())
    else:
        code, output = refuses_to_start(*pg_store.args, env=clean_env(PGPASSWORD=wrong))
    assert code != 0 and wrong not in output and pgcluster.PASSWORD not in output, output
    assert dbname(pg_store.url) in output, f"say which database:\n{output}"


def test_an_unreachable_database_is_refused_without_echoing_its_password(pg_store: PgStore) -> None:
    url = f"postgresql://{pgcluster.USER}:{SECRET}@127.0.0.1:{free_port()}/nowhere"
    _, output = refuses_to_start("--store", url, env=clean_env())
    assert SECRET not in output, output
    assert "nowhere" in output, f"say which database:\n{output}"


def spelled(form: str, store: PgStore) -> str:
    """`store`'s database with the password inside `--store`, in one of the accepted spellings."""
    url = with_password(store.url, pgcluster.PASSWORD)
    if form == "postgres":
        return url.replace("postgresql://", "postgres://", 1)
    if form == "key-value":
        c = store.cluster
        return (
            f"postgresql:host=127.0.0.1 port={c.port} dbname={dbname(store.url)} user={pgcluster.USER}"
            f" password={pgcluster.PASSWORD}"
        )
    return url


@pytest.mark.parametrize("form", ["postgresql", "postgres", "key-value"])
async def test_a_password_in_the_url_works_and_is_never_logged(pg_store: PgStore, form: str) -> None:
    with serving("--store", spelled(form, pg_store), env=clean_env()) as served:
        address = served.listening()
        async with grpc.aio.insecure_channel(address) as channel:
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            made = await create_thread(stub, agent="default")
            done = await run_thread(stub, made.thread_id, text="hello")
            assert completed_output(done.result) == "You said: hello"
        served.stop()
    logged = records(served.lines)
    assert [r["event"] for r in logged].count("store_password_in_command_line") == 1, served.lines
    [opened] = [r for r in logged if r["event"] == "thread_store_opened"]
    assert (opened["kind"], opened["path"]) == ("postgresql", pg_store.url)
    leaked = [line for line in served.lines if pgcluster.PASSWORD in line]
    assert not leaked, leaked


@pytest.mark.parametrize(
    "store",
    [
        f"postgresql://{pgcluster.USER}:{SECRET}@[::1/db",
        f"postgresql://{pgcluster.USER}:{SECRET}@127.0.0.1/db?no_such_option=1",
        f"postgresql:host=127.0.0.1 password='{SECRET}",
        f"postgres://{pgcluster.USER}:{SECRET}@[127.0.0.1/db",
    ],
    ids=["unclosed-bracket", "unknown-option", "unterminated-quote", "postgres-scheme"],
)
def test_a_malformed_url_is_a_config_error_that_does_not_echo_it(store: str) -> None:
    code, output = refuses_to_start("--store", store, env=clean_env())
    assert code == 2 and "threadline: error: --store" in output, output
    assert SECRET not in output and store not in output, output


# -- 9. the server's facts on PostgreSQL --------------------------------------------------------------


async def test_server_info_and_the_token_on_postgresql(pg_store: PgStore) -> None:
    token = (("authorization", "Bearer pg-token"),)
    with serving(
        *pg_store.args, "--lease-ttl", "7", "--token", "pg-token", env=clean_env(**pg_store.env)
    ) as served:
        async with grpc.aio.insecure_channel(served.listening()) as channel:
            harness = harness_service_pb2_grpc.HarnessServiceStub(channel)
            info = await harness.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), metadata=token)
            assert info.thread_store.kind == harness_service_pb2.THREAD_STORE_KIND_POSTGRESQL
            assert info.thread_store.lease_ttl.ToTimedelta() == timedelta(seconds=7)
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            code, reason, _ = await refused(stub.ListThreads(thread_service_pb2.ListThreadsRequest()))
            assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING")
            code, reason, _ = await refused(
                stub.CreateThread(
                    thread_service_pb2.CreateThreadRequest(), metadata=(("authorization", "Bearer wrong"),)
                )
            )
            assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")
            made = (await stub.CreateThread(thread_service_pb2.CreateThreadRequest(), metadata=token)).thread
            listed = await stub.ListThreads(thread_service_pb2.ListThreadsRequest(), metadata=token)
            assert [t.thread_id for t in listed.threads] == [made.thread_id], (
                "nothing was written unauthorised"
            )


# -- 10. a request's shape never reports the store down ------------------------------------------------


async def test_no_request_shape_reports_the_store_down(pg_store: PgStore) -> None:
    """Too many label filters, and a NUL (which PostgreSQL text cannot hold) in every string a request
    hands the store: each refused before any statement, health SERVING throughout."""
    with serving(*pg_store.args, env=clean_env(**pg_store.env)) as served:
        async with grpc.aio.insecure_channel(served.listening()) as channel:
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            health = health_pb2_grpc.HealthStub(channel)
            service = health_pb2.HealthCheckRequest(service="threadline.v1.ThreadService")
            ts = thread_service_pb2
            thread = await create_thread(stub, labels={f"k{i}": "v" for i in range(32)})
            matching = await stub.ListThreads(ts.ListThreadsRequest(labels=[f"k{i}=v" for i in range(32)]))
            assert [t.thread_id for t in matching.threads] == [thread.thread_id]
            nul = "a\x00"
            calls: dict[str, tuple[Any, str]] = {
                "33 filters": (
                    stub.ListThreads(ts.ListThreadsRequest(labels=[f"k{i}=v" for i in range(33)])),
                    "labels",
                ),
                "1000 filters": (
                    stub.ListThreads(ts.ListThreadsRequest(labels=[f"k{i}=v" for i in range(1000)])),
                    "labels",
                ),
                "filter": (stub.ListThreads(ts.ListThreadsRequest(labels=[f"k={nul}"])), "labels[0]"),
                "label value": (stub.CreateThread(ts.CreateThreadRequest(labels={"k": nul})), "labels"),
                "thread_id": (stub.GetThread(ts.GetThreadRequest(thread_id=nul)), "thread_id"),
                "run_id": (
                    stub.CancelThreadRun(ts.CancelThreadRunRequest(thread_id=thread.thread_id, run_id=nul)),
                    "run_id",
                ),
                "request_id": (
                    stub.RunThread(
                        ts.RunThreadRequest(
                            spec=ts.ThreadRunSpec(thread_id=thread.thread_id, text="hi", request_id=nul)
                        )
                    ),
                    "spec.request_id",
                ),
                "spec.thread_id": (
                    stub.RunThread(ts.RunThreadRequest(spec=ts.ThreadRunSpec(thread_id=nul, text="hi"))),
                    "spec.thread_id",
                ),
            }
            for name, (call, field) in calls.items():
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call
                code, reason, _ = refusal(caught.value)
                assert (code, reason, bad_request_fields(caught.value)) == (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "INPUT_INVALID",
                    [field],
                ), name
                status = (await health.Check(service)).status
                assert status == health_pb2.HealthCheckResponse.SERVING, name
            assert (await get_thread(stub, thread.thread_id)).revision == 1
