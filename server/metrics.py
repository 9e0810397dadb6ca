"""Prometheus metrics on `--metrics-port` (`/metrics`, `server.metrics_http`): runs, errors, tokens,
streamed events.

Off unless asked for: without `--metrics-port` there is no `Metrics` and nothing is counted. Each server
has a registry of its own (not the process-global one), so in-process servers do not add up. Things are
counted where they are already observed: `RunLog` (HarnessService runs), the thread launcher (thread
runs), the services' event streams, and `abort` (every error status with a reason).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic_ai.usage import RunUsage

from .heap import GcPauses
from .metrics_http import MetricsHttp

__all__ = ("CURRENT", "TRANSPORT", "Metrics", "Service")

Service = Literal["harness", "threads"]
"""Which service a run or a stream belongs to (the `service` label)."""

CURRENT: ContextVar[Metrics | None] = ContextVar("threadline_metrics", default=None)
"""The serving server's metrics: set when it starts, so its RPC tasks (which inherit it) can count errors."""

TRANSPORT: ContextVar[str] = ContextVar("threadline_transport", default="grpc")
"""The transport of the RPC being served (`grpc`, `connect`, `grpc-web`; the `transport` label): the HTTP
port sets it per request (`server.http`), and the RPC's tasks inherit it."""

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    """The server's metrics and their HTTP endpoint."""

    def __init__(self, *, run_limit: int, active_runs: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.runs_started = Counter(
            "threadline_runs_started", "Runs started.", ["service", "agent"], registry=r
        )
        self.runs_finished = Counter(
            "threadline_runs_finished",
            "Runs ended, by how: the result's status, or error, interrupted, client_cancelled.",
            ["service", "agent", "status"],
            registry=r,
        )
        self.run_seconds = Histogram(
            "threadline_run_duration_seconds",
            "How long runs took.",
            ["service", "agent"],
            buckets=_SECONDS,
            registry=r,
        )
        self.first_event_seconds = Histogram(
            "threadline_run_first_event_seconds",
            "From a run's start to its first event.",
            ["service"],
            buckets=_SECONDS,
            registry=r,
        )
        active = Gauge("threadline_active_runs", "Runs executing now.", registry=r)
        active.set_function(lambda: float(active_runs()))
        Gauge("threadline_run_limit", "--max-concurrent-runs.", registry=r).set(run_limit)
        self.rpc_errors = Counter(
            "threadline_rpc_errors",
            "RPCs ended with an error status, by its ErrorInfo reason and the transport it was served on.",
            ["reason", "transport"],
            registry=r,
        )
        self.tokens = Counter(
            "threadline_model_tokens", "Model tokens of ended runs.", ["agent", "direction"], registry=r
        )
        self.events = Counter(
            "threadline_stream_events", "Events streamed to hosts.", ["service", "transport"], registry=r
        )
        self.messages = Counter(
            "threadline_stream_messages",
            "Stream responses sent (one or more events each).",
            ["service", "transport"],
            registry=r,
        )
        self.checkpoint_bytes = Counter(
            "threadline_checkpoint_bytes", "Bytes of checkpoint candidates streamed.", ["service"], registry=r
        )
        self.thread_commits = Counter(
            "threadline_thread_commits", "Checkpoints thread runs committed to the store.", registry=r
        )
        self.thread_joins = Counter(
            "threadline_thread_joins", "JoinThreadRun calls that found their attempt.", registry=r
        )
        followers = Gauge(
            "threadline_thread_followers", "Joins, attached retries and watches open now.", registry=r
        )
        followers.set_function(lambda: float(self.followers()))
        self.followers: Callable[[], int] = lambda: 0
        """Set by the server: how many follower slots are taken."""
        writes = Gauge(
            "threadline_store_durable_writes",
            "Durable write transactions this replica committed to the thread store since it started "
            "(not reads, not the event log's relaxed appends): what its turns cost the database.",
            registry=r,
        )
        writes.set_function(lambda: float(self.durable_writes()))
        self.durable_writes: Callable[[], int] = lambda: 0
        """Set by the server: the store's count (`StoreWorker.durable_writes`)."""
        committed = Gauge(
            "threadline_store_committed_writes",
            "Write transactions of requests this replica committed durably since it started: more than "
            "threadline_store_durable_writes when several were ready together and shared one (SQLite's "
            "group commit).",
            registry=r,
        )
        committed.set_function(lambda: float(self.committed_writes()))
        self.committed_writes: Callable[[], int] = lambda: 0
        """Set by the server: the store's count (`StoreWorker.committed_writes`)."""
        self.log_bytes = Counter(
            "threadline_event_log_bytes", "Bytes of run events written to event logs.", registry=r
        )
        self.log_appends = Counter(
            "threadline_event_log_appends",
            "Append transactions: each writes the waiting events of every attempt this replica runs.",
            registry=r,
        )
        self.log_appended = Counter(
            "threadline_event_log_appended_attempts",
            "Attempt logs written by append transactions (over appends: how many each grouped).",
            registry=r,
        )
        self.events_omitted = Counter(
            "threadline_events_omitted", "Run events their event log left out (events_omitted).", registry=r
        )
        r.register(GcPauses())
        self._http = MetricsHttp(self.registry)

    async def serve(self, host: str, port: int) -> int:
        """Serve `/metrics` on `host:port` (0 = a free port) on this event loop; returns the port.

        Raises:
            OSError: The address cannot be bound.
        """
        return await self._http.start(host, port)

    async def close(self) -> None:
        await self._http.close()

    def logged(self, written: int, omitted: int) -> None:
        """A run's event log write: `written` bytes, `omitted` events left out since its last one."""
        self.log_bytes.inc(written)
        if omitted:
            self.events_omitted.inc(omitted)

    def appended(self, attempts: int) -> None:
        """One append transaction, writing the logs of `attempts` attempts."""
        self.log_appends.inc()
        self.log_appended.inc(attempts)

    def run_started(self, service: Service, agent: str) -> None:
        self.runs_started.labels(service, agent).inc()

    def streamed(self, service: Service, events: int) -> None:
        """One stream response went out, carrying `events` events."""
        transport = TRANSPORT.get()
        self.messages.labels(service, transport).inc()
        self.events.labels(service, transport).inc(events)

    def run_finished(
        self, service: Service, agent: str, status: str, seconds: float, usage: RunUsage | None
    ) -> None:
        self.runs_finished.labels(service, agent, status).inc()
        self.run_seconds.labels(service, agent).observe(seconds)
        if usage is not None:
            self.tokens.labels(agent, "input").inc(usage.input_tokens)
            self.tokens.labels(agent, "output").inc(usage.output_tokens)
