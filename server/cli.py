"""`threadline serve`: the command line of the server.

The first line on stdout is `listening on <host>:<port>`, flushed at once, so scripts and tests can
start the server with `--port 0` and read the address; everything else (logs) goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from .config import DEFAULT_HOST, DEFAULT_PORT, ConfigError, Flag, ServerConfig

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
    )
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
    for setting in dataclasses.fields(ServerConfig):
        _add_setting(serve, setting)
    return parser


def _add_setting(parser: argparse.ArgumentParser, setting: dataclasses.Field[Any]) -> None:
    """One `ServerConfig` field as its flag: the field's own default, type and help (`config.Flag`)."""
    flag: Flag = setting.metadata["flag"]
    kind = _HINTS[setting.name]
    default = os.environ.get(TOKEN_ENV) if setting.name == "token" else setting.default
    if kind is bool:
        parser.add_argument(flag.name, dest=setting.name, action="store_true", help=flag.help)
        return
    if get_origin(kind) is tuple:  # repeatable, e.g. --mount
        parser.add_argument(
            flag.name, dest=setting.name, action="append", default=[], metavar=flag.metavar, help=flag.help
        )
        return
    value_type = next(t for t in (Path, int, float, str) if t is kind or t in get_args(kind))
    parser.add_argument(
        flag.name,
        dest=setting.name,
        type=value_type,
        default=default,
        metavar=flag.metavar,
        # The token's default comes from the environment and is a secret: never print it.
        help=flag.help
        if default is None or setting.name == "token"
        else f"{flag.help} (default: %(default)s)",
    )


_HINTS = get_type_hints(ServerConfig)


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The `ServerConfig` of parsed `serve` arguments (every field has its flag, same name)."""
    values = {setting.name: getattr(args, setting.name) for setting in dataclasses.fields(ServerConfig)}
    values["token"] = values["token"] or None
    values["mounts"] = tuple(values["mounts"])
    return ServerConfig(**values)


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
