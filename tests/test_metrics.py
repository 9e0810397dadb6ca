"""Prometheus metrics on `--metrics-port` (issue 16): scraped before and after real runs."""

from __future__ import annotations

import time
import urllib.request

import grpc
from logged_serve import LoggedServe, logged_serve
from prometheus_client.parser import text_string_to_metric_families
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

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
    assert delta("threadline_rpc_errors_total", reason="AGENT_UNKNOWN") == 1
    commits = [r.event for r in turn if r.event.HasField("thread_committed")]
    assert commits and delta("threadline_thread_commits_total") == len(commits)
    assert delta("threadline_stream_messages_total", service="threads") == len(turn)
    usage = [done.result.usage, suspended.result.usage, responses[-1].event.result.usage]
    assert (
        delta("threadline_model_tokens_total", agent="default", direction="input")
        >= sum(u.input_tokens for u in usage)
        > 0
    )
    assert delta("threadline_stream_messages_total", service="harness") == len(responses)
    assert delta("threadline_stream_events_total", service="harness") == len(responses)  # one event each
    candidates = [r.event.checkpoint_candidate for r in responses if r.event.HasField("checkpoint_candidate")]
    assert candidates and delta("threadline_checkpoint_bytes_total", service="harness") == sum(
        c.ByteSize() for c in candidates
    )
    assert value(after, "threadline_active_runs") == 0
    assert value(after, "threadline_run_limit") == 256


def test_without_the_flag_nothing_listens() -> None:
    with logged_serve() as running:
        assert running.stop() == 0
    assert not any(record["event"] == "metrics_listening" for record in running.records())
