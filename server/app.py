"""Building, starting, draining and stopping the grpc.aio server.

The server carries `HarnessService`, `ThreadService` on its thread store (unless `--store none`), plus what generic tooling expects of any gRPC server: health
(`grpc.health.v1`) and reflection under both the v1 and the v1alpha names, describing every listed
service with the contract's comments (`server/reflection.py`).
Health and reflection stay open when a token is required: they reveal nothing a host could misuse.
"""

from __future__ import annotations

import asyncio
import hmac
import signal
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import grpc
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2
from threadline.v1 import harness_service_pb2, thread_service_pb2

from harness.threads import Database, DurableHost, SchemaTooNew, ThreadStore, open_database
from harness.threads.database import password_of, redacted
from harness.threads.eventlog import LogSettings

from . import heap
from .agents import AgentRegistry
from .config import CheckedMounts, ConfigError, ServerConfig
from .errors import ServerError, ServerReason
from .handlers import add_service
from .http import HttpGateway
from .launch import ThreadLauncher
from .mapping.errors import abort
from .mapping.threads import STORE_KIND_PB
from .metrics import CURRENT, Metrics
from .mounts import ServerMounts
from .reflection import add_reflection
from .runlog import log_run
from .runs import ActiveRuns
from .service import HarnessService
from .threads import ThreadService, encode_event
from .tracing import CURRENT as TRACING
from .tracing import tracing_from

__all__ = ("ThreadlineServer", "serve")

SERVICE_NAME = harness_service_pb2.DESCRIPTOR.services_by_name["HarnessService"].full_name
THREAD_SERVICE_NAME = thread_service_pb2.DESCRIPTOR.services_by_name["ThreadService"].full_name
_PROTECTED_PREFIXES = (f"/{SERVICE_NAME}/", f"/{THREAD_SERVICE_NAME}/")


def _denied_handler(
    handler: grpc.RpcMethodHandler[Any, Any], error: ServerError
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same shape as `handler` that only refuses the call with `error`'s status."""

    async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort(context, error)

    async def refuse_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort(context, error)
        yield  # pragma: no cover - makes this an async generator, as a server-streaming handler is

    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            refuse_stream, handler.request_deserializer, handler.response_serializer
        )
    return grpc.unary_unary_rpc_method_handler(
        refuse, handler.request_deserializer, handler.response_serializer
    )


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Require `authorization: Bearer <token>` on every HarnessService RPC (and nothing else)."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(_PROTECTED_PREFIXES):
            return handler
        values = [
            value for key, value in handler_call_details.invocation_metadata or () if key == "authorization"
        ]
        if not values:
            return _denied_handler(
                handler,
                ServerError(
                    ServerReason.TOKEN_MISSING, "This server needs `authorization: Bearer <token>` metadata."
                ),
            )
        presented = values[0].encode() if isinstance(values[0], str) else bytes(values[0])
        if not hmac.compare_digest(presented, self._expected):
            return _denied_handler(
                handler, ServerError(ServerReason.TOKEN_INVALID, "The bearer token is not valid.")
            )
        return handler


class ThreadlineServer:
    """One grpc.aio server serving `registry` with `config`: `start()`, then `drain()` or `stop()`."""

    def __init__(
        self, config: ServerConfig, registry: AgentRegistry, *, mounts: CheckedMounts | None = None
    ) -> None:
        """`mounts`: what `config.check()` returned, when the caller checked `config` already (the
        CLI); without it, `config` is checked here.

        Raises:
            ConfigError: `config` does not pass `ServerConfig.check()`, or a mount names an agent
                `registry` does not serve.
        """
        if mounts is None:
            mounts = config.check()
        self.config = config
        self.runs = ActiveRuns(config.max_concurrent_runs)
        """The running runs (tests read its size to prove nothing leaked)."""
        self.port: int | None = None
        """The bound port, once started."""
        self.tracing = tracing_from(config.otlp_endpoint, include_content=config.trace_content)
        """OpenTelemetry traces (`--otlp-endpoint`, the OTEL_* variables), or `None`: nothing is traced."""
        interceptors: list[grpc.aio.ServerInterceptor] = []
        if self.tracing is not None:  # outermost, so that a refused token is traced too
            interceptors.append(self.tracing.interceptor((SERVICE_NAME, THREAD_SERVICE_NAME)))
        if config.token:
            interceptors.append(BearerTokenInterceptor(config.token))
        self._server = grpc.aio.server(options=config.grpc_options(), interceptors=interceptors)
        self._store_kind, self._store_path = config.store_location()
        self.mounts = ServerMounts(mounts, agents=tuple(registry))
        """The shell environments (`--mount`, `[mounts.NAME]`) and their backend, open while the server runs."""
        self.metrics = (
            Metrics(run_limit=config.max_concurrent_runs, active_runs=lambda: len(self.runs))
            if config.metrics_port is not None
            else None
        )
        """Prometheus metrics (`--metrics-port`), or `None`: then nothing is counted."""
        store_info = harness_service_pb2.ThreadStoreInfo(kind=STORE_KIND_PB[self._store_kind])
        store_info.lease_ttl.FromTimedelta(timedelta(seconds=config.lease_ttl_s))
        if self._store_kind != "none":
            store_info.event_log = config.event_log == "on"
            store_info.dispatch_intents = config.dispatch_intents == "on"
            store_info.event_retention.FromTimedelta(timedelta(seconds=config.event_retention_s))
            store_info.event_log_max_bytes = config.event_log_max_bytes
            store_info.max_run_attempts = config.max_run_attempts
            store_info.max_queued_runs = config.max_queued_runs
        service = HarnessService(
            registry,
            self.runs,
            max_message_bytes=config.max_message_bytes,
            pack_window_s=config.pack_window_ms / 1000,
            mounts=self.mounts,
            thread_store=store_info,
        )
        # Guarded handlers: an undecodable body answers REQUEST_UNDECODABLE, not UNKNOWN (server/handlers.py).
        add_service(self._server, service, SERVICE_NAME)
        self._harness_service = service
        self._http: HttpGateway | None = None
        self.http_port: int | None = None
        """The bound HTTP port (`--http-port`), once started."""
        self._registry = registry
        self._database: Database | None = None
        self.threads: DurableHost | None = None
        self._sweeper: asyncio.Future[None] | None = None
        """The durable host behind ThreadService, once started (None with `--store none`)."""
        self._thread_service: ThreadService | None = None
        self._health_tasks: set[asyncio.Future[None]] = set()
        if self._store_kind != "none":
            self._thread_service = ThreadService(
                None,
                registry,
                max_message_bytes=config.max_message_bytes,
                pack_window_s=config.pack_window_ms / 1000,
                mounts=self.mounts,
                max_followers=config.max_followers,
            )
            add_service(self._server, self._thread_service, THREAD_SERVICE_NAME)
        self._health = health_aio.HealthServicer()
        add_service(self._server, self._health, "grpc.health.v1.Health")
        self._add_reflection()

    def _add_reflection(self) -> None:
        health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
        names = (SERVICE_NAME, THREAD_SERVICE_NAME) if self._store_kind != "none" else (SERVICE_NAME,)
        add_reflection(self._server, (*names, health_name))

    @property
    def address(self) -> str:
        """`host:port` as bound (the port resolved when 0 was asked for)."""
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"{host}:{self.port}"

    async def _open_store(self) -> None:
        """Open and migrate the thread store; a store that cannot serve stops the start (`ConfigError`)."""
        if self._thread_service is None:
            return
        kind, location = self._store_kind, self._store_path
        assert kind != "none"
        where = redacted(location or "") if kind == "postgresql" else location or "memory"
        secret = password_of(location or "") if kind == "postgresql" else None
        if secret:
            # Visible in the process list and shell history; PGPASSWORD or a password file is not.
            log_run("store_password_in_command_line", hint="use PGPASSWORD or a libpq password file")
        try:
            self._database = await open_database(kind, location)
        except SchemaTooNew as error:
            raise ConfigError(f"--store {where}: {error}.") from None
        except Exception as error:  # the file cannot be created or written; the database refuses us
            hint = (
                "Check that the database runs and accepts this user (its password from PGPASSWORD or "
                "a libpq password file)."
                if kind == "postgresql"
                else "Pick a writable place with --store sqlite:PATH, or --store memory / none."
            )
            detail = str(error).replace(secret, "***") if secret else str(error)
            raise ConfigError(
                f"--store: cannot use the thread store at {where} ({type(error).__name__}: "
                f"{detail.strip()[:300]}). {hint}"
            ) from None
        log_run("thread_store_opened", kind=kind, path=where)
        store = ThreadStore(
            self._database,
            replica=uuid.uuid4().hex[:12],
            dispatch_intents=self.config.dispatch_intents == "on",
        )
        store.on_health = self._store_health
        config = self.config
        self.threads = DurableHost(
            store,
            ThreadLauncher(self._registry, self.runs, self.mounts),
            lease_ttl=config.lease_ttl_s,
            encode=encode_event,
            log_settings=LogSettings(
                enabled=config.event_log == "on",
                window_s=config.event_log_window_ms / 1000,
                max_bytes=config.event_log_max_bytes,
                retention_s=config.event_retention_s,
                max_followers=config.max_followers,
            ),
            max_run_attempts=config.max_run_attempts,
            max_queued_runs=config.max_queued_runs,
        )
        self.threads.follower_slot = self._thread_service.follower_slot
        self._sweeper = asyncio.ensure_future(self.threads.sweep(config.sweep_interval_s))
        self._thread_service.host = self.threads
        if self.metrics is not None:
            metrics = self.metrics
            self.threads.on_commit = metrics.thread_commits.inc
            self.threads.on_log = metrics.logged
            self.threads.appends.on_append = metrics.appended
            metrics.followers = lambda: self._thread_service.followers if self._thread_service else 0
            metrics.durable_writes = lambda: store.worker.durable_writes
            metrics.committed_writes = lambda: store.worker.committed_writes

    def _store_health(self, healthy: bool) -> None:
        """ThreadService is NOT_SERVING while its store is unreachable; HarnessService is unaffected."""
        status = (
            health_pb2.HealthCheckResponse.SERVING if healthy else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        log_run("thread_store_health", serving=healthy)
        self._health_tasks.add(task := asyncio.ensure_future(self._health.set(THREAD_SERVICE_NAME, status)))
        task.add_done_callback(self._health_tasks.discard)

    async def start(self) -> str:
        """Open the thread store and the mounts' backend, bind and start serving; returns `address`.

        Raises:
            ConfigError: The store cannot be used, or a port cannot be bound (in use, or the host is
                not an address of this machine); what was opened is closed again.
        """
        try:
            await self._start()
        except BaseException:
            await self.stop(0)
            raise
        names = ("", SERVICE_NAME, THREAD_SERVICE_NAME) if self.threads is not None else ("", SERVICE_NAME)
        for name in names:
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self.address

    async def _start(self) -> None:
        await self._open_store()
        await self.mounts.open()
        if self.metrics is not None and self.config.metrics_port is not None:
            try:
                port = await self.metrics.serve(self.config.host, self.config.metrics_port)
            except OSError as error:
                raise ConfigError(
                    f"--metrics-port: cannot listen on {self.config.host}:{self.config.metrics_port} "
                    f"({error.strerror or error})."
                ) from None
            log_run("metrics_listening", port=port)
            CURRENT.set(self.metrics)  # the RPC tasks the server starts from here inherit it
        if self.tracing is not None:
            TRACING.set(self.tracing)
            log_run("tracing_on", exporters=list(self.tracing.exporters), content=self.config.trace_content)
        target = f"{'[' + self.config.host + ']' if ':' in self.config.host else self.config.host}:{self.config.port}"
        tls = self.config.tls_pair()
        try:
            if tls is not None:
                self.port = self._server.add_secure_port(target, grpc.ssl_server_credentials([tls]))
            else:
                self.port = self._server.add_insecure_port(target)
        except RuntimeError:  # grpc says only "Failed to bind"
            raise ConfigError(
                f"cannot listen on {target}: the port is in use, or {self.config.host} is not an address "
                "of this machine."
            ) from None
        await self._server.start()
        await self._start_http()

    async def _start_http(self) -> None:
        """The HTTP port (`--http-port`): the same servicers over Connect and gRPC-Web (server/http.py)."""
        config = self.config
        if config.http_port is None:
            return
        try:
            self._http = HttpGateway(
                self._harness_service,
                self._thread_service,
                token=config.token,
                cors_origins=config.http_cors_origins,
                max_message_bytes=config.max_message_bytes,
                tls=(config.tls_cert, config.tls_key) if config.tls_cert and config.tls_key else None,
                console=config.console,
            )
        except OSError as error:
            raise ConfigError(
                f"--console: the console's files are missing ({error.filename}); build them with "
                "`node console/build.mjs` (scripts/setup.sh does)."
            ) from None
        try:
            self.http_port = await self._http.start(config.host, config.http_port)
        except OSError as error:
            raise ConfigError(
                f"--http-port: cannot listen on {config.host}:{config.http_port} ({error.strerror or error})."
            ) from None
        log_run(
            "http_listening",
            port=self.http_port,
            cors_origins=list(config.http_cors_origins),
            console=config.console,
        )

    async def drain(self) -> None:
        """Graceful shutdown: stop admitting, cancel running runs into CANCELLED results, then stop.

        Health turns NOT_SERVING first so load balancers move traffic away; each cancelled run
        still sends its terminal result (with its candidate state) within `drain_grace_s`.
        """
        await self._health.enter_graceful_shutdown()
        cancelled = self.runs.drain()
        log_run("server_draining", runs_cancelled=cancelled)
        started = asyncio.get_running_loop().time()
        if self.threads is not None:
            # Thread runs outlive their RPCs: wait for their CANCELLED commits (THREADS §4 "Shutdown").
            await self.threads.drain(self.config.drain_grace_s)
        left = self.config.drain_grace_s - (asyncio.get_running_loop().time() - started)
        await asyncio.gather(self._server.stop(max(0.0, left)), self._close_http(max(0.0, left)))
        await self._close_store()
        await self.mounts.close()
        await self._close_telemetry()

    async def _close_http(self, grace: float) -> None:
        if self._http is not None:
            await self._http.close(grace)
            self._http = None

    async def _close_telemetry(self) -> None:
        if self.metrics is not None:
            await self.metrics.close()
        if self.tracing is not None:
            await self.tracing.close()  # the last spans are exported before the process goes

    async def _close_store(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self.threads is not None:
            self.threads.store.close()
        if self._database is not None:
            await self._database.close()
            self._database = None

    async def stop(self, grace: float | None = None) -> None:
        """Stop at once (cancelling RPCs after `grace` seconds)."""
        await asyncio.gather(self._server.stop(grace), self._close_http(grace or 0.0))
        await self._close_store()
        await self.mounts.close()
        await self._close_telemetry()

    async def wait_for_termination(self) -> None:
        """Block until the server has stopped."""
        await self._server.wait_for_termination()


async def serve(
    config: ServerConfig, registry: AgentRegistry, *, mounts: CheckedMounts, ready: Callable[[str], None]
) -> None:
    """Run a server until SIGTERM or SIGINT, then drain it; `ready(address)` is called once bound.
    `config` is checked already: `mounts` is what its check returned."""
    server = ThreadlineServer(config, registry, mounts=mounts)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Handlers first: whoever reads the "listening" line may signal at once.
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    address = await server.start()
    log_run("heap_settled", frozen_objects=heap.settle())
    ready(address)
    await stopping.wait()
    await server.drain()
    log_run("server_stopped")
