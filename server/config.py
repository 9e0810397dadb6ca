"""The server's settings: one frozen value built by the CLI (or a test) and read everywhere else.

Defaults are explicit and safe: loopback only, bounded messages and concurrency, keepalive on, so
a server started with no flags cannot be reached from another machine or exhausted by one host.
"""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
import sys
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from harness.environment import LocalBackendLimits
from harness.threads.database import StoreKind, postgresql_conninfo

from .config_error import ConfigError
from .mount_config import (
    CheckedMount,
    CheckedMounts,
    MountDefinition,
    backend_limits,
    check_unique,
    mount_flag,
)
from .runlog import LOG_FORMATS, LOG_LEVELS
from .setting_files import TLS_FILE_LIMIT, read_setting_file
from .tracing import exporter_names

__all__ = (
    "DEFAULT_HOST",
    "DEFAULT_LEASE_TTL_S",
    "DEFAULT_MAX_CONCURRENT_RUNS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_PACK_WINDOW_MS",
    "DEFAULT_PORT",
    "UNACCEPTED_CALL_WAIT_S",
    "CheckedMounts",
    "ConfigError",
    "Flag",
    "MountDefinition",
    "ServerConfig",
    "flag_settings",
    "setting_kind",
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 50051
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""64 MiB: long histories travel whole in every request, so grpc's 4 MiB default is too small."""
DEFAULT_MAX_CONCURRENT_RUNS = 256
DEFAULT_LEASE_TTL_S = 30.0
"""30 s: far above any event-loop stall we expect, short enough that a crashed run is recovered soon."""
DEFAULT_PACK_WINDOW_MS = 1.0
"""1 ms: far below what a reader can see, and long enough to pack a fast model's burst (`server.outbox`)."""
UNACCEPTED_CALL_WAIT_S = 300
"""How long grpc keeps a call the busy server has not accepted yet before cancelling it (grpc: 30 s)."""
MAX_METADATA_BYTES = 16 << 10
"""The one limit on a request's metadata, soft and hard alike (grpc: 8 KiB soft, 16 KiB hard)."""
GRPC_INT_MAX = 2**31 - 1
"""The largest value of a grpc channel argument (a C int): a larger one stops the server's start."""
MAX_DRAIN_GRACE_S = 86_400.0
"""A day: the longest `--drain-grace`."""
_HOST_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
"""One label of a host name (`api` of `api.example.com`); an address is checked by `ipaddress`."""


def default_store_path() -> Path:
    """`threads.sqlite3` in the user's data directory (THREADS §6), per platform."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "threadline" / "threads.sqlite3"


@dataclass(frozen=True, slots=True)
class Flag:
    """How a `ServerConfig` field appears on `threadline serve`'s command line (`server.cli` builds it)."""

    name: str
    """The option, e.g. `--max-message-bytes`."""
    help: str
    """Its help text; the default is appended by the parser."""
    metavar: str | None = None


def _setting(default: Any, flag: str, help: str, *, metavar: str | None = None, repr: bool = True) -> Any:
    """A field with its one default and its one help text (`field(metadata=...)`)."""
    return field(default=default, repr=repr, metadata={"flag": Flag(flag, help, metavar)})


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything `threadline serve` can be told; every field has a safe default, its flag and its help."""

    host: str = _setting(
        DEFAULT_HOST, "--host", "address to bind; non-loopback needs TLS, --token or --insecure"
    )
    """The address to bind. Anything but loopback needs TLS, a token or `insecure`."""
    port: int = _setting(DEFAULT_PORT, "--port", "port to bind; 0 picks a free port")
    """The port to bind; 0 picks a free one."""
    max_message_bytes: int = _setting(
        DEFAULT_MAX_MESSAGE_BYTES,
        "--max-message-bytes",
        "largest request/response message in bytes (64 MiB); a larger request fails with grpc's "
        "RESOURCE_EXHAUSTED, a larger answer with RESOURCE_EXHAUSTED RESPONSE_TOO_LARGE",
    )
    """The largest request or response message, both directions."""
    max_concurrent_runs: int = _setting(
        DEFAULT_MAX_CONCURRENT_RUNS,
        "--max-concurrent-runs",
        "runs executing at once; beyond it a run fails with RESOURCE_EXHAUSTED RUN_LIMIT_REACHED",
    )
    """Runs executing at once; one more fails with RESOURCE_EXHAUSTED RUN_LIMIT_REACHED."""
    keepalive_time_ms: int = _setting(
        30_000, "--keepalive-time-ms", "interval of keepalive pings on idle connections"
    )
    """How often the server pings an idle connection, so dead hosts are noticed."""
    keepalive_timeout_ms: int = _setting(
        10_000, "--keepalive-timeout-ms", "how long an unanswered keepalive ping is tolerated"
    )
    """How long a ping may go unanswered before the connection is closed."""
    token: str | None = _setting(
        None,
        "--token",
        "require 'authorization: Bearer TOKEN' on HarnessService RPCs (default: $THREADLINE_TOKEN; health "
        "and reflection stay open)",
        repr=False,
    )
    """The bearer token every HarnessService RPC must carry; `None` = no auth."""
    tls_cert: Path | None = _setting(
        None, "--tls-cert", "certificate chain for TLS (with --tls-key)", metavar="PEM"
    )
    """PEM certificate chain; with `tls_key`, the server speaks TLS."""
    tls_key: Path | None = _setting(None, "--tls-key", "private key for TLS (with --tls-cert)", metavar="PEM")
    """PEM private key of `tls_cert`."""
    insecure: bool = _setting(
        False,
        "--insecure",
        "allow a non-loopback --host without TLS or a token (only behind something that secures it)",
    )
    """Allow a non-loopback bind with neither TLS nor token (e.g. behind a trusted proxy)."""
    drain_grace_s: float = _setting(
        10.0,
        "--drain-grace",
        "on SIGTERM, how long cancelled runs get to send their CANCELLED result before the server stops",
        metavar="SECONDS",
    )
    """On SIGTERM, how long cancelled runs get to send their CANCELLED result before the server stops."""
    pack_window_ms: float = _setting(
        DEFAULT_PACK_WINDOW_MS,
        "--pack-window-ms",
        "for hosts that let events share a message (max_events_per_message > 1): how long the next "
        "response of a stream in a burst may wait for more events (0 = never wait)",
        metavar="MS",
    )
    """How long a packing stream's next response may wait for more events in a burst (`server.outbox`)."""

    store: str | None = _setting(
        None,
        "--store",
        "where ThreadService keeps threads: sqlite:PATH, postgresql://USER@HOST:PORT/DB (several "
        "replicas on one database; the password from PGPASSWORD or a libpq password file), memory "
        "(lost at exit), or none (ThreadService answers UNIMPLEMENTED); default: threads.sqlite3 in "
        "the user's data directory ($XDG_DATA_HOME/threadline, else ~/.local/share/threadline)",
        metavar="STORE",
    )
    """The thread store: `sqlite:PATH`, `postgresql://...`, `memory`, `none`, or `None` for the default file."""
    lease_ttl_s: float = _setting(
        DEFAULT_LEASE_TTL_S,
        "--lease-ttl",
        "how long a thread run's lease lasts without renewal; after a crash the thread's next run "
        "waits at most this long to recover it",
        metavar="SECONDS",
    )
    """How long a thread run's lease lasts without renewal (renewed every third of it)."""
    event_log: str = _setting(
        "on",
        "--event-log",
        "on: record every thread run's events so JoinThreadRun can follow it from any replica and a retry "
        "of a running request attaches to it; off: record nothing (JoinThreadRun answers UNIMPLEMENTED)",
        metavar="on|off",
    )
    """Whether this replica records thread runs' events (LIVE §2)."""
    dispatch_intents: str = _setting(
        "on",
        "--dispatch-intents",
        "on: record each side-effecting tool call durably before it starts, so that after a crash a call "
        "that never started runs (once) instead of getting the unknown result; off: record nothing "
        "(every unanswered call is recovered by --tool-recovery's rule, as before)",
        metavar="on|off",
    )
    """Whether this replica's thread runs gate their tools with dispatch intents (LIVE §5.2)."""
    event_log_window_ms: float = _setting(
        100.0,
        "--event-log-window-ms",
        "how long a run's events may wait before they are written for its followers (between commits)",
        metavar="MS",
    )
    """How long a run's newest events may wait before an append writes them (followers lag about this)."""
    event_log_max_bytes: int = _setting(
        32 * 1024 * 1024,
        "--event-log-max-bytes",
        "the most bytes one run attempt's event log holds; past a quarter of it text deltas are left out "
        "(part_end carries each whole part), past it everything but commits (events_omitted says so)",
    )
    """The cap of one attempt's log (LIVE §2.3)."""
    event_retention_s: float = _setting(
        86400.0,
        "--event-retention",
        "how long an ended run's events stay joinable",
        metavar="SECONDS",
    )
    """How long an ended attempt's log is kept."""
    max_followers: int = _setting(
        1024,
        "--max-followers",
        "JoinThreadRun calls, attached retries and WatchThread calls open at once on this replica; beyond "
        "it one fails with RESOURCE_EXHAUSTED FOLLOWER_LIMIT_REACHED",
    )
    """Joins, attached retries and watches at once."""
    sweep_interval_s: float = _setting(
        1.0,
        "--sweep-interval",
        "how often this replica's sweeper takes up server-driven work that is due (a StartThreadRun "
        "request whose server was lost or stopped), deletes expired event logs and marks abandoned ones lost",
        metavar="SECONDS",
    )
    """The sweeper's period (LIVE §3.2, §2.3)."""
    max_run_attempts: int = _setting(
        3,
        "--max-run-attempts",
        "how many attempts of a StartThreadRun request may end by a lost server (a crash, a stop past its "
        "lease) before the request ends INTERRUPTED; attempts parked by SIGTERM do not count",
    )
    """The attempt cap of detached requests (LIVE §3.2)."""
    max_queued_runs: int = _setting(
        16,
        "--max-queued-runs",
        "how many requests may wait in one thread's queue (BUSY_STRATEGY_ENQUEUE); one more is refused "
        "RESOURCE_EXHAUSTED THREAD_QUEUE_FULL",
    )
    """The bound of each thread's queue (LIVE §4.2)."""

    mounts: tuple[str, ...] = _setting(
        (),
        "--mount",
        "give every agent's runs a shell environment NAME=local:ROOT (repeatable): the shell tools run "
        "commands on this machine as the server's user; ROOT confines only their working directory, it "
        "is not a sandbox; given here, it replaces the configuration file's mounts ([mounts.NAME] tables "
        "there also set a mount's agents, actions, shell, environment and limits)",
        metavar="NAME=local:ROOT",
    )
    """Shell environments `NAME=local:ROOT` every served agent gets (ENVIRONMENT §12.1)."""
    allow_root_shell: bool = _setting(
        False, "--allow-root-shell", "allow --mount while the server runs as root (commands run as root)"
    )
    """Allow mounts when the effective uid is 0: every command would run as root."""
    allow_remote_shell: bool = _setting(
        False,
        "--allow-remote-shell",
        "allow --mount with a non-loopback --host: whoever may run agents may then run commands here",
    )
    """Allow mounts on a non-loopback bind, where remote callers drive the shell tools."""

    metrics_port: int | None = _setting(
        None,
        "--metrics-port",
        "serve Prometheus metrics at http://HOST:PORT/metrics (0 = a free port, logged as "
        "metrics_listening); off by default",
        metavar="PORT",
    )
    """Where `/metrics` is served, on `host`; `None` = no metrics at all."""
    http_port: int | None = _setting(
        None,
        "--http-port",
        "also serve HarnessService and ThreadService over Connect (JSON and binary) and gRPC-Web at "
        "http://HOST:PORT, for browsers and curl (0 = a free port, logged as http_listening); off by default",
        metavar="PORT",
    )
    """Where the HTTP transports are served, on `host` (docs/http.md); `None` = gRPC only."""
    http_cors_origins: tuple[str, ...] = _setting(
        (),
        "--http-cors-origin",
        "let web pages of this origin (e.g. https://app.example.com) call the HTTP port from a browser "
        "(repeatable; CORS is off without it; `*` is refused)",
        metavar="ORIGIN",
    )
    """The origins CORS lets call `http_port` from a browser; none = CORS off."""
    console: bool = _setting(
        False,
        "--console",
        "serve the web console at / on the HTTP port (needs --http-port): watch and steer threads from a "
        "browser",
    )
    """Serve the web console (`server/console/`, built from console/) at `/` of `http_port`."""
    log_level: str = _setting(
        "info",
        "--log-level",
        "the server's own log lines from this level: debug, info, warning, error (other libraries' from "
        "warning, or debug with debug)",
        metavar="LEVEL",
    )
    """The least level of the server's own log lines; other libraries log from WARNING (DEBUG with debug)."""
    log_format: str = _setting(
        "json", "--log-format", "log lines on stderr as json (one object per line) or text", metavar="FORMAT"
    )
    """`json`: one object per line for a log pipeline; `text`: `TS LEVEL EVENT key=value` for a terminal."""
    otlp_endpoint: str | None = _setting(
        None,
        "--otlp-endpoint",
        "export OpenTelemetry traces over OTLP/gRPC to this collector, e.g. http://127.0.0.1:4317 (https:// "
        "for TLS); default: $OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, else no traces",
        metavar="URL",
    )
    """Where traces go; `None` leaves it to the standard OTEL_* variables (no endpoint there: no traces)."""
    trace_content: bool = _setting(
        False,
        "--trace-content",
        "record prompts, model output and tool arguments and results in the spans (off: only their shape)",
    )
    """Whether pydantic-ai's spans carry message content; off by default, since prompts may be private."""

    # -- set only by a configuration file (tables, no flag) ---------------------------------------------
    mount_tables: tuple[MountDefinition, ...] = field(default=(), metadata={"file": "mounts"})
    """`[mounts.NAME]` tables: mounts with their actions, agents, shell, environment and limits; `--mount`
    on the command line replaces them with its own."""
    local_backend: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), metadata={"file": "local_backend"}
    )
    """The `[local_backend]` table: `LocalBackendLimits` across all mounts (ENVIRONMENT §10.4)."""

    @property
    def tls(self) -> bool:
        """Whether the server speaks TLS."""
        return self.tls_cert is not None

    def is_loopback(self) -> bool:
        """Whether `host` only accepts connections from this machine."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False

    def check(self) -> CheckedMounts:
        """Refuse settings that would serve something unsafe or impossible.

        Every value that reaches grpc or the OS is held to what they accept, so what this accepts
        starts (`threadline config check` and `threadline serve` both call it).

        Returns:
            The mounts as checked (`checked_mounts()`), for the server to serve without checking again.

        Raises:
            ConfigError: A value is out of its range, only half of a TLS pair is given or the pair
                does not load, or a non-loopback address would be served without TLS or a token and
                without `insecure`.
        """
        if not _is_host(self.host):
            raise ConfigError(
                f"--host must be an IP address (IPv6 without brackets) or a host name, not "
                f"{self.host[:200]!r}.",
                field="host",
            )
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be between 0 and 65535, not {self.port}.", field="port")
        for name in ("max_message_bytes", "keepalive_time_ms", "keepalive_timeout_ms", "max_concurrent_runs"):
            value = getattr(self, name)
            if not 1 <= value <= GRPC_INT_MAX:  # grpc's channel arguments; the run limit keeps to the same
                raise ConfigError(
                    f"{_flag(name)} must be between 1 and {GRPC_INT_MAX}, not {value}.", field=name
                )
        if not 0 <= self.drain_grace_s <= MAX_DRAIN_GRACE_S:
            raise ConfigError(
                f"--drain-grace must be between 0 and {MAX_DRAIN_GRACE_S:.0f} seconds.", field="drain_grace_s"
            )
        if not 0 <= self.pack_window_ms <= 1000:
            raise ConfigError("--pack-window-ms must be between 0 and 1000.", field="pack_window_ms")
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(f"--log-level must be one of {', '.join(LOG_LEVELS)}.", field="log_level")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(f"--log-format must be one of {', '.join(LOG_FORMATS)}.", field="log_format")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError("--metrics-port must be between 0 and 65535.", field="metrics_port")
        if self.http_port is not None and not 0 <= self.http_port <= 65535:
            raise ConfigError("--http-port must be between 0 and 65535.", field="http_port")
        if self.console and self.http_port is None:
            raise ConfigError(
                "--console needs --http-port: the console is served on the HTTP port.", field="console"
            )
        for origin in self.http_cors_origins:
            if not _is_origin(origin):
                raise ConfigError(
                    f"--http-cors-origin {origin[:100]!r}: name an origin like https://app.example.com "
                    "(scheme, host and port only; `*` is not allowed).",
                    field="http_cors_origins",
                )
        if self.otlp_endpoint is not None and not _is_collector_url(self.otlp_endpoint):
            raise ConfigError(
                "--otlp-endpoint must be a URL like http://127.0.0.1:4317 (https:// for TLS).",
                field="otlp_endpoint",
            )
        try:
            exporter_names(self.otlp_endpoint)  # the OTEL_* variables this server would trace with
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if not 0.5 <= self.lease_ttl_s <= 3600:
            raise ConfigError("--lease-ttl must be between 0.5 and 3600 seconds.", field="lease_ttl_s")
        self._check_event_log()
        self.store_location()
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("--tls-cert and --tls-key must be given together.", field="tls_cert")
        self.tls_pair()
        if self.token is not None and not self.token.strip():
            raise ConfigError("--token must not be empty.", field="token")
        if not self.is_loopback() and not (self.tls or self.token) and not self.insecure:
            raise ConfigError(
                f"Refusing to serve {self.host} without TLS or a token: anyone who can reach it could run "
                "agents. Add --tls-cert/--tls-key and/or --token, or --insecure if that is intended.",
                field="host",
            )
        return self.checked_mounts()

    def _check_event_log(self) -> None:
        if self.event_log not in ("on", "off"):
            raise ConfigError("--event-log must be on or off.", field="event_log")
        if self.dispatch_intents not in ("on", "off"):
            raise ConfigError("--dispatch-intents must be on or off.", field="dispatch_intents")
        _between(self.event_log_window_ms, 1, 10_000, "--event-log-window-ms", "event_log_window_ms")
        _between(self.event_log_max_bytes, 1 << 20, 1 << 34, "--event-log-max-bytes", "event_log_max_bytes")
        _between(self.event_retention_s, 1, 365 * 86400, "--event-retention", "event_retention_s", " seconds")
        _between(self.max_followers, 1, 1_000_000, "--max-followers", "max_followers")
        _between(self.sweep_interval_s, 0.05, 3600, "--sweep-interval", "sweep_interval_s", " seconds")
        _between(self.max_run_attempts, 1, 100, "--max-run-attempts", "max_run_attempts")
        _between(self.max_queued_runs, 1, 10_000, "--max-queued-runs", "max_queued_runs")

    def tls_pair(self) -> tuple[bytes, bytes] | None:
        """The PEM key and certificate chain (`--tls-key`, `--tls-cert`), read and checked to be a
        pair that serves, or `None` without TLS.

        Raises:
            ConfigError: A file is unreadable, not a regular file or over 1 MiB, or the two are not
                a PEM certificate chain and its unencrypted private key.
        """
        if self.tls_cert is None or self.tls_key is None:
            return None
        pair: dict[str, bytes] = {}
        for name, path in (("tls_key", self.tls_key), ("tls_cert", self.tls_cert)):
            try:
                pair[name] = read_setting_file(path, TLS_FILE_LIMIT)
            except (OSError, ValueError) as error:
                detail = error.strerror if isinstance(error, OSError) else error
                raise ConfigError(
                    f"{_flag(name)} {str(path)[:200]}: cannot read it ({detail}).", field=name
                ) from None
        try:  # what grpc will load at start; a key with a passphrase cannot serve
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                self.tls_cert, self.tls_key, password=lambda: b""
            )
        except OSError as error:  # ssl.SSLError among them
            raise ConfigError(
                f"--tls-cert and --tls-key are not a PEM certificate chain and its unencrypted private key "
                f"({getattr(error, 'reason', None) or error}).",
                field="tls_cert",
            ) from None
        return pair["tls_key"], pair["tls_cert"]

    def checked_mounts(self) -> CheckedMounts:
        """Every mount (`--mount`, then the file's tables), checked against ENVIRONMENT §12.1's refusals
        and against this machine (`MountDefinition.local_config()`), with the backend's limits.

        Raises:
            ConfigError: A mount is malformed, named twice, its root is not an existing absolute
                directory, an option is out of range, or its limits rule each other (or the
                backend's, `[local_backend]`) out; the platform is not POSIX; the server runs as
                root without `allow_root_shell`, or binds a non-loopback address without
                `allow_remote_shell`.
        """
        if not self.mounts and not self.mount_tables:
            return CheckedMounts(backend=self.backend_limits())
        if os.name != "posix":
            raise ConfigError("--mount needs a POSIX system (process groups and signals).", field="mounts")
        if os.geteuid() == 0 and not self.allow_root_shell:
            raise ConfigError(
                "Refusing --mount as root: every command the model runs would run as root. Run the server "
                "as an unprivileged user, or add --allow-root-shell if that is intended (e.g. in a container).",
                field="mounts",
            )
        if not self.is_loopback() and not self.allow_remote_shell:
            raise ConfigError(
                f"Refusing --mount on {self.host}: whoever can run agents remotely could run commands on "
                "this machine. Bind loopback, or add --allow-remote-shell if that is intended.",
                field="mounts",
            )
        definitions = (*(mount_flag(spec) for spec in self.mounts), *self.mount_tables)
        check_unique(definitions)
        backend = self.backend_limits()
        return CheckedMounts(tuple(CheckedMount(d, d.local_config(backend)) for d in definitions), backend)

    def backend_limits(self) -> LocalBackendLimits:
        """The local backend's limits across all mounts (`[local_backend]`, else ENVIRONMENT §10.4's).

        Raises:
            ConfigError: An unknown key or a value out of range.
        """
        return backend_limits(self.local_backend)

    def store_location(self) -> tuple[StoreKind | Literal["none"], str | None]:
        """The store's kind ("sqlite", "memory", "postgresql", "none") and its file or connection string.

        Raises:
            ConfigError: `--store` is none of the accepted forms (a PostgreSQL one is never echoed: it
                may hold a password).
        """
        if self.store is None:
            return "sqlite", str(default_store_path())
        if self.store in ("memory", "none"):
            return "memory" if self.store == "memory" else "none", None
        if self.store.startswith("sqlite:") and len(self.store) > len("sqlite:"):
            return "sqlite", str(Path(self.store[len("sqlite:") :]).expanduser())
        if self.store.startswith(("postgresql:", "postgres:")):
            # A URL as it is, or `postgresql:` before a key=value connection string.
            location = self.store if "://" in self.store else self.store.split(":", 1)[1]
            try:
                postgresql_conninfo(location)
            except ValueError as error:
                raise ConfigError(
                    f"--store: not a valid PostgreSQL connection string ({error}).", field="store"
                ) from None
            return "postgresql", location
        raise ConfigError(
            f"--store must be sqlite:PATH, postgresql://..., memory or none, not {self.store[:200]!r}.",
            field="store",
        )

    def grpc_options(self) -> list[tuple[str, int]]:
        """The channel arguments of the grpc server: message sizes and keepalive."""
        return [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.keepalive_time_ms", self.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
            ("grpc.http2.max_pings_without_data", 0),
            # grpc.aio accepts one call per event-loop iteration, so under a burst (1 000 streams at
            # once) calls wait in grpc's own queue until the loop gets to them; grpc's default cancels
            # those still waiting after 30 s (CANCELLED, before `--max-concurrent-runs` is even asked).
            # A client's deadline still bounds the wait.
            ("grpc.server_max_unrequested_time_in_server", UNACCEPTED_CALL_WAIT_S),
            # Request metadata (tokens, traceparent, tracestate, baggage) up to 16 KiB, and above it
            # always RESOURCE_EXHAUSTED: grpc's default refuses metadata between 8 and 16 KiB at random.
            ("grpc.max_metadata_size", MAX_METADATA_BYTES),
            ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
        ]


_HINTS = get_type_hints(ServerConfig)


def _is_host(text: str) -> bool:
    """An IP address or a host name; anything else (a space, a NUL, a `:port`) would only fail when
    grpc binds it."""
    try:
        ipaddress.ip_address(text)  # IPv6 without brackets: `::1`, as grpc's target adds them
        return True
    except ValueError:
        labels = text.removesuffix(".").split(".")
    return len(text) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)


def _is_collector_url(text: str) -> bool:
    """`http://` or `https://` with a host and, if any, a port that exists."""
    try:
        url = urlsplit(text)
        url.port  # noqa: B018 - raises ValueError past 65535
    except ValueError:  # also a bracket left open: `http://[::1`
        return False
    return url.scheme in ("http", "https") and bool(url.hostname)


def _flag(name: str) -> str:
    """The flag of the `ServerConfig` field `name` (`--max-message-bytes`), as messages spell it."""
    flag: Flag = next(f for f in fields(ServerConfig) if f.name == name).metadata["flag"]
    return flag.name


def setting_kind(name: str) -> type:
    """What the `ServerConfig` field `name` takes as a flag and as a file key: `bool` (a switch),
    `tuple` (a repeatable flag, a list in the file), or one `Path`, `int`, `float` or `str`."""
    hint = _HINTS[name]
    if hint is bool or get_origin(hint) is tuple:
        return bool if hint is bool else tuple
    return next(t for t in (Path, int, float, str) if t is hint or t in get_args(hint))


def _between(value: float, low: float, high: float, flag: str, field: str, unit: str = "") -> None:
    if not low <= value <= high:
        raise ConfigError(f"{flag} must be between {low:g} and {high:g}{unit}, not {value:g}.", field=field)


def flag_settings() -> tuple[Field[Any], ...]:
    """The `ServerConfig` fields a flag sets, each also a file key; the rest are the file's tables."""
    return tuple(setting for setting in fields(ServerConfig) if "flag" in setting.metadata)


def _is_origin(origin: str) -> bool:
    """`scheme://host[:port]` and nothing more: what a browser sends as `Origin`."""
    parsed = urlsplit(origin)
    return (
        parsed.scheme in ("http", "https")
        and bool(parsed.hostname)
        and "*" not in origin
        and not parsed.path
        and not parsed.query
        and not parsed.fragment
        and parsed.username is None
    )
