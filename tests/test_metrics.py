"""Prometheus metrics on `--metrics-port` (issue 16): scraped before and after real runs."""

from __future__ import annotations

import resource
import select
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from logged_serve import LoggedServe, logged_serve
from prometheus_client.parser import text_string_to_metric_families
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

from server.metrics_http import HEAD_TIMEOUT_S, MAX_CONNECTIONS

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of `/metrics`, parsed by the Prometheus text parser."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def metrics_port(running: LoggedServe) -> int:
    for _ in range(200):
        for record in running.records():
            if record["event"] == "metrics_listening":
                return int(record["port"])
        time.sleep(0.05)
    raise AssertionError("no metrics_listening line")


def test_runs_errors_tokens_and_streams_are_counted() -> None:
    with logged_serve("--metrics-port", "0") as running:
        port = metrics_port(running)
        before = scrape(port)
        with grpc.insecure_channel(running.address) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
            done = stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello")), timeout=30)
            suspended = stub.Run(
                harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="delete a.txt")), timeout=30
            )
            responses = list(
                stub.StreamRun(
                    harness_service_pb2.StreamRunRequest(
                        spec=run_pb2.RunSpec(text="several words here", checkpoints=True)
                    ),
                    timeout=30,
                )
            )
            try:
                stub.Run(
                    harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(agent="nobody", text="x")), timeout=30
                )
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
            threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
            thread = threads.CreateThread(thread_service_pb2.CreateThreadRequest(), timeout=30).thread
            spec = thread_service_pb2.ThreadRunSpec(thread_id=thread.thread_id, text="hi", request_id="r1")
            turn = list(
                threads.StreamThreadRun(thread_service_pb2.StreamThreadRunRequest(spec=spec), timeout=30)
            )
        after = scrape(port)
        assert running.stop() == 0

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("threadline_runs_started_total", service="harness", agent="default") == 3
    assert (
        delta("threadline_runs_finished_total", service="harness", agent="default", status="completed") == 2
    )
    assert (
        delta("threadline_runs_finished_total", service="harness", agent="default", status="suspended") == 1
    )
    assert delta("threadline_run_duration_seconds_count", service="harness", agent="default") == 3
    assert delta("threadline_run_first_event_seconds_count", service="harness") == 3
    assert delta("threadline_runs_started_total", service="threads", agent="default") == 1
    assert (
        delta("threadline_runs_finished_total", service="threads", agent="default", status="completed") == 1
    )
    assert delta("threadline_rpc_errors_total", reason="AGENT_UNKNOWN", transport="grpc") == 1
    commits = [r.event for r in turn if r.event.HasField("thread_committed")]
    assert commits and delta("threadline_thread_commits_total") == len(commits)
    assert delta("threadline_stream_messages_total", service="threads", transport="grpc") == len(turn)
    usage = [done.result.usage, suspended.result.usage, responses[-1].event.result.usage]
    assert (
        delta("threadline_model_tokens_total", agent="default", direction="input")
        >= sum(u.input_tokens for u in usage)
        > 0
    )
    assert delta("threadline_stream_messages_total", service="harness", transport="grpc") == len(responses)
    assert delta("threadline_stream_events_total", service="harness", transport="grpc") == len(
        responses
    )  # one event each
    candidates = [r.event.checkpoint_candidate for r in responses if r.event.HasField("checkpoint_candidate")]
    assert candidates and delta("threadline_checkpoint_bytes_total", service="harness") == sum(
        c.ByteSize() for c in candidates
    )
    assert value(after, "threadline_active_runs") == 0
    assert value(after, "threadline_run_limit") == 256


def test_the_startup_heap_is_frozen_and_the_collectors_pauses_are_counted() -> None:
    """`server.heap.settle`: once up, the server froze what it loaded out of every collection (its first
    full collection, counted, was the one that preceded the freeze), and collections since add up."""
    with logged_serve("--metrics-port", "0") as running:
        port = metrics_port(running)
        before = scrape(port)
        with grpc.insecure_channel(running.address) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
            for _ in range(5):
                stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello")), timeout=30)
        after = scrape(port)
        assert running.stop() == 0
    settled = [record for record in running.records() if record["event"] == "heap_settled"]
    assert len(settled) == 1
    frozen = [value(scraped, "threadline_gc_frozen_objects") for scraped in (before, after)]
    # pydantic-ai, the schemas, the descriptors; a frozen object freed later leaves the count
    assert settled[0]["frozen_objects"] >= frozen[0] >= frozen[1] > 50_000
    assert value(before, "threadline_gc_collections_total", generation="2") >= 1
    assert value(before, "threadline_gc_pause_seconds_total", generation="2") > 0
    for generation in "012":
        assert value(after, "threadline_gc_collections_total", generation=generation) >= value(
            before, "threadline_gc_collections_total", generation=generation
        )
    startup = value(before, "threadline_gc_pause_seconds_total", generation="2")
    since = sum(value(after, "threadline_gc_pause_seconds_total", generation=g) for g in "012") - startup
    assert (
        0 <= value(after, "threadline_gc_longest_pause_seconds") <= since + 1e-9
    )  # not the one before serving


def test_without_the_flag_nothing_listens() -> None:
    with logged_serve() as running:
        assert running.stop() == 0
    assert not any(record["event"] == "metrics_listening" for record in running.records())


PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
"""A request whose headers never end: the slow client that holds a connection open."""


def closed_by_server(conn: socket.socket, within: float = 60) -> bool:
    """Whether the server closes `conn` (EOF or reset) within `within` seconds; reads what it sends."""
    conn.settimeout(within)
    try:
        while conn.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


@contextmanager
def slow_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """Up to `count` connections to `port` that each send `PARTIAL` and nothing more, closed at the end.

    Stops early when a connection cannot be made within 10 s (a server that no longer accepts).
    """
    with ExitStack() as stack:
        conns: list[socket.socket] = []
        for _ in range(count):
            try:
                conn = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
                conn.sendall(PARTIAL)
            except OSError:
                break
            conns.append(conn)
        yield conns


def health(address: str) -> int:
    """`grpc.health.v1` Check of the whole server on a new channel, or -1 when it fails."""
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        except grpc.RpcError:
            return -1
        return int(response.status)


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="lowers the server's limit with Linux's prlimit")
def test_slow_metrics_clients_cannot_starve_the_server_of_descriptors() -> None:
    """More half-sent requests than the server has file descriptors: the metrics port holds at most
    `MAX_CONNECTIONS` of them (the rest are closed at once) and drops those after `HEAD_TIMEOUT_S`, so a
    new gRPC channel still works, and `/metrics` answers again once they are gone."""
    limit = 256  # the server holds 14 descriptors when idle, so the held connections leave room
    assert limit > MAX_CONNECTIONS + 64
    count = limit + 32
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count + 256:  # this process holds one per connection
        if hard != resource.RLIM_INFINITY and hard < count + 256:
            pytest.skip(f"RLIMIT_NOFILE {hard} leaves too few descriptors for {count} connections")
        resource.setrlimit(resource.RLIMIT_NOFILE, (count + 256, hard))
    with logged_serve("--metrics-port", "0") as running:
        port = metrics_port(running)
        assert health(running.address) == health_pb2.HealthCheckResponse.SERVING
        # Lowered once it runs (prlimit): a preexec_fn in this threaded process could deadlock the fork.
        resource.prlimit(running.serve.process.pid, resource.RLIMIT_NOFILE, (limit, limit))
        with slow_connections(port, count) as conns:
            assert health(running.address) == health_pb2.HealthCheckResponse.SERVING, "starved"
            assert len(conns) == count, "the metrics port stopped accepting"
            assert all(closed_by_server(conn) for conn in conns), "a half-sent request is held forever"
        assert value(scrape(port), "threadline_run_limit") == 256
        assert running.stop() == 0


def test_an_unfinished_request_is_closed_after_the_head_timeout() -> None:
    with logged_serve("--metrics-port", "0") as running:
        port = metrics_port(running)
        with slow_connections(port, 1) as [conn]:
            started = time.monotonic()
            assert closed_by_server(conn), "not closed"
            assert time.monotonic() - started > HEAD_TIMEOUT_S / 2, "closed before its time ran out"
        # Trickled a byte at a time: the time is for the whole head, not for each read.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(PARTIAL + b"X-Slow: ")
            started, closed = time.monotonic(), False
            while not closed and time.monotonic() - started < 60:
                closed = bool(select.select([conn], [], [], 0.25)[0])  # readable: EOF or a reset
                try:
                    conn.send(b"a")
                except ConnectionError:
                    closed = True
            assert closed, "a trickled request is held as long as it trickles"
            assert time.monotonic() - started > HEAD_TIMEOUT_S / 2
        assert running.stop() == 0


def http(port: int, request: bytes) -> bytes:
    """Send a raw request; everything the server answers before it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
        return answer


def test_the_metrics_port_answers_only_get_metrics() -> None:
    with logged_serve("--metrics-port", "0") as running:
        port = metrics_port(running)
        ok = http(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n\r\n")
        head, _, body = ok.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in head
        assert f"Content-Length: {len(body)}".encode() in head and b"threadline_run_limit 256.0" in body
        assert http(port, b"HEAD /metrics HTTP/1.1\r\n\r\n").endswith(b"\r\n\r\n")
        assert http(port, b"GET / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404 ")
        refused = http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 405 ") and b"Allow: GET, HEAD\r\n" in refused
        assert http(port, b"HELLO\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        huge = b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 10_000 + b"\r\n\r\n"
        assert http(port, huge).startswith(b"HTTP/1.1 431 ")
        openmetrics = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        with urllib.request.urlopen(openmetrics, timeout=30) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            assert response.read().endswith(b"# EOF\n")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30)
        assert caught.value.code == 404
        caught.value.close()
        assert running.stop() == 0


def test_a_request_whose_begin_is_refused_is_not_counted_as_a_run() -> None:
    """Concurrent requests on one thread: those refused THREAD_BUSY, at the decision or at Begin after
    losing its compare-and-set race, are refusals, not runs (issue 24, item 9): the metrics count exactly
    the runs that answered, and none `interrupted`."""
    with logged_serve("--metrics-port", "0") as running:
        port = metrics_port(running)
        before = scrape(port)
        with grpc.insecure_channel(running.address) as channel:
            threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
            thread_id = threads.CreateThread(
                thread_service_pb2.CreateThreadRequest(), timeout=30
            ).thread.thread_id

            def turn(index: int) -> str:
                spec = thread_service_pb2.ThreadRunSpec(
                    thread_id=thread_id, text="hi", request_id=f"r{index}"
                )
                try:
                    threads.RunThread(thread_service_pb2.RunThreadRequest(spec=spec), timeout=60)
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.ABORTED, error
                    return "busy"
                return "ran"

            with ThreadPoolExecutor(16) as pool:
                outcomes = list(pool.map(turn, range(16)))
        after = scrape(port)
        assert running.stop() == 0
    ran = outcomes.count("ran")
    assert ran >= 1

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("threadline_runs_started_total", service="threads", agent="default") == ran
    assert (
        delta("threadline_runs_finished_total", service="threads", agent="default", status="completed") == ran
    )
    assert (
        delta("threadline_runs_finished_total", service="threads", agent="default", status="interrupted") == 0
    )
