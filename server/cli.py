"""`threadline serve`: the command line of the server.

The first line on stdout is `listening on <host>:<port>`, flushed at once, so scripts and tests can
start the server with `--port 0` and read the address; everything else (logs) goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .config import (
    DEFAULT_HOST,
    DEFAULT_MAX_CONCURRENT_RUNS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PACK_WINDOW_MS,
    DEFAULT_PORT,
    ConfigError,
    ServerConfig,
)

__all__ = ("build_parser", "main")

TOKEN_ENV = "THREADLINE_TOKEN"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; `--help` is the reference of every flag."""
    parser = argparse.ArgumentParser(
        prog="threadline", description="Threadline: Pydantic AI harness threads over gRPC."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve HarnessService",
        description=(
            "Serve threadline.v1.HarnessService, grpc.health.v1 and server reflection. With no flags: "
            f"{DEFAULT_HOST}:{DEFAULT_PORT}, the offline demo agent 'default', no key, no database. "
            "The first stdout line is 'listening on HOST:PORT'; logs are JSON lines on stderr."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    serve.add_argument(
        "--host", default=DEFAULT_HOST, help="address to bind; non-loopback needs TLS, --token or --insecure"
    )
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to bind; 0 picks a free port")
    serve.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME=module:factory",
        help="serve the ExecutableAgent that module.factory() returns under NAME (repeatable); "
        "the factory gets the --model model as its argument when --model is given",
    )
    serve.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help="a pydantic-ai model (e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5) for the --agent "
        "factories and the demo agent's tools; keys come from the environment (OPENAI_API_KEY, ...). "
        "Default: the demo's offline scripted model",
    )
    serve.add_argument(
        "--default-agent",
        metavar="NAME",
        help="agent for runs that name none (default: first --agent, else 'default')",
    )
    serve.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=DEFAULT_MAX_CONCURRENT_RUNS,
        help="runs executing at once; beyond it a run fails with RESOURCE_EXHAUSTED RUN_LIMIT_REACHED",
    )
    serve.add_argument(
        "--max-message-bytes",
        type=int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        help="largest request/response message in bytes (64 MiB); larger ones fail with RESOURCE_EXHAUSTED",
    )
    serve.add_argument(
        "--keepalive-time-ms",
        type=int,
        default=30_000,
        help="interval of keepalive pings on idle connections",
    )
    serve.add_argument(
        "--keepalive-timeout-ms",
        type=int,
        default=10_000,
        help="how long an unanswered keepalive ping is tolerated",
    )
    serve.add_argument(
        "--pack-window-ms",
        type=float,
        default=DEFAULT_PACK_WINDOW_MS,
        metavar="MS",
        help="for hosts that let events share a message (max_events_per_message > 1): how long the next "
        "response of a stream in a burst may wait for more events (0 = never wait)",
    )
    serve.add_argument(
        "--drain-grace",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="on SIGTERM, how long cancelled runs get to send their CANCELLED result before the server stops",
    )
    serve.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"require 'authorization: Bearer TOKEN' on HarnessService RPCs (default: ${TOKEN_ENV}; "
        "health and reflection stay open)",
    )
    serve.add_argument(
        "--tls-cert", type=Path, metavar="PEM", help="certificate chain for TLS (with --tls-key)"
    )
    serve.add_argument("--tls-key", type=Path, metavar="PEM", help="private key for TLS (with --tls-cert)")
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --host without TLS or a token (only behind something that secures it)",
    )
    return parser


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The `ServerConfig` of parsed `serve` arguments."""
    return ServerConfig(
        host=args.host,
        port=args.port,
        max_message_bytes=args.max_message_bytes,
        max_concurrent_runs=args.max_concurrent_runs,
        keepalive_time_ms=args.keepalive_time_ms,
        keepalive_timeout_ms=args.keepalive_timeout_ms,
        token=args.token or None,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        insecure=args.insecure,
        drain_grace_s=args.drain_grace,
        pack_window_ms=args.pack_window_ms,
    )


def _announce(address: str) -> None:
    print(f"listening on {address}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `threadline` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    # Imported here so `threadline --help` answers without loading pydantic-ai and grpc.
    from . import runlog
    from .agents import build_registry
    from .app import serve

    runlog.configure()
    try:
        config = config_from_args(args)
        config.check()
        registry = build_registry(args.agent, model=args.model, default=args.default_agent)
        asyncio.run(serve(config, registry, ready=_announce))
    except ConfigError as error:
        print(f"threadline: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
