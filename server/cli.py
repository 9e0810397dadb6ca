"""`threadline serve`: the command line of the server.

The first line on stdout is `listening on <host>:<port>`, flushed at once, so scripts and tests can
start the server with `--port 0` and read the address; everything else (logs) goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import faulthandler
import logging
import os
import sys
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .config import DEFAULT_HOST, DEFAULT_PORT, ConfigError, Flag, ServerConfig, flag_settings, setting_kind
from .config_file import FileSettings, load_file
from .mount_config import CheckedMounts, check_agents

if TYPE_CHECKING:
    from .agents import AgentRegistry

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
        "--config",
        type=Path,
        metavar="FILE",
        help="read settings from this TOML file (keys: the flags' names without dashes, plus agents, "
        "model, default_agent, token_file, and the tables [mounts.NAME] and [local_backend]); flags "
        "given here override it",
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
    for setting in flag_settings():
        _add_setting(serve, setting)
    config = commands.add_parser(
        "config", help="check a configuration file", description="Configuration files."
    )
    checks = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    check = checks.add_parser(
        "check",
        help="validate a configuration file (settings, agents) without serving",
        description="Load FILE as `threadline serve --config FILE` would, build its agents, and say what is "
        "wrong with the line it is on; exit status 0 when it would serve, 2 when not.",
    )
    check.add_argument("file", type=Path, metavar="FILE")
    return parser


def _add_setting(parser: argparse.ArgumentParser, setting: dataclasses.Field[Any]) -> None:
    """One `ServerConfig` field as its flag: the field's own default, type and help (`config.Flag`)."""
    flag: Flag = setting.metadata["flag"]
    kind = setting_kind(setting.name)
    # Unset flags stay out of the namespace, so a configuration file's value is not overridden by a
    # default; the field's default is the one place it is written.
    if kind is bool:
        parser.add_argument(
            flag.name, dest=setting.name, action="store_true", default=argparse.SUPPRESS, help=flag.help
        )
        return
    if kind is tuple:  # repeatable, e.g. --mount
        parser.add_argument(
            flag.name,
            dest=setting.name,
            action="append",
            default=argparse.SUPPRESS,
            metavar=flag.metavar,
            help=flag.help,
        )
        return
    parser.add_argument(
        flag.name,
        dest=setting.name,
        type=kind,
        default=argparse.SUPPRESS,
        metavar=flag.metavar,
        # The token's default comes from the environment and is a secret: never print it.
        help=flag.help
        if setting.default is None or setting.name == "token"
        else f"{flag.help} (default: {setting.default})",
    )


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything `threadline serve` was told, from its flags over its configuration file, checked."""

    config: ServerConfig
    agents: tuple[str, ...]
    """`NAME=module:factory`: the file's, then the flags' (a later one replaces an earlier NAME)."""
    model: str | None
    default_agent: str | None
    file: FileSettings | None = None
    """The configuration file read, if any (to name the line of a value found wrong later)."""
    flag_agents: frozenset[str] = frozenset()
    """The NAMEs `--agent` gave: an error of theirs is the flag's, not at a line of the file."""
    mounts: CheckedMounts = field(default_factory=CheckedMounts)
    """The mounts as `config.check()` checked them, served as they are."""

    def located(self, error: ConfigError, *, flags: Container[str] = ()) -> ConfigError:
        """`error` with the file's line of the value at fault, unless a flag (in `flags`) set it."""
        if self.file is None or error.field is None or error.field in flags:
            return error
        return ConfigError(f"{self.file.line_of(error.field)}{error}", field=error.field)

    def registry(self) -> AgentRegistry:
        """The served agents, each built and checked to be an `ExecutableAgent`, and what needs them: each
        mount's `agents` must name some. `config check` and `serve` both build it before anything else.

        Raises:
            ConfigError: A factory fails or a mount names an agent not served; located in the file.
        """
        from .agents import build_registry  # pydantic-ai is loaded only to check or to serve

        try:
            registry = build_registry(self.agents, model=self.model, default=self.default_agent)
            check_agents(self.mounts.definitions, tuple(registry))
        except ConfigError as error:
            raise self.located(error, flags={f"agents.{name}" for name in self.flag_agents}) from None
        return registry


def settings_from_args(args: argparse.Namespace, *, file: Path | None = None) -> Settings:
    """The settings of parsed `serve` arguments over `--config` (or `file`); `ServerConfig.check()`ed.

    Raises:
        ConfigError: A bad value; one the file set names the file's line.
    """
    path = file if file is not None else getattr(args, "config", None)
    loaded = load_file(path) if path is not None else None
    flags = {s.name: getattr(args, s.name) for s in flag_settings() if hasattr(args, s.name)}
    values = dict(loaded.config) if loaded is not None else {}
    if "mounts" in flags:  # the command line's mounts replace the file's, both forms
        flags["mounts"] = tuple(flags["mounts"])
        values.pop("mount_tables", None)
    if "token" in flags:
        flags["token"] = flags["token"] or None
    values.update(flags)
    if "token" not in values:
        values["token"] = os.environ.get(TOKEN_ENV) or None
    file_agents = tuple(f"{name}={target}" for name, target in (loaded.agents if loaded else {}).items())
    settings = Settings(
        config=ServerConfig(**values),
        agents=(*file_agents, *getattr(args, "agent", ())),
        model=getattr(args, "model", None) or (loaded.model if loaded else None),
        default_agent=getattr(args, "default_agent", None) or (loaded.default_agent if loaded else None),
        file=loaded,
        flag_agents=frozenset(spec.partition("=")[0].strip() for spec in getattr(args, "agent", ())),
    )
    try:
        mounts = settings.config.check()
    except ConfigError as error:
        raise settings.located(error, flags=flags) from None
    return dataclasses.replace(settings, mounts=mounts)


def _announce(address: str) -> None:
    print(f"listening on {address}", flush=True)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the `threadline` console script: `command(argv)`, then exit with its status."""
    _leave(command(argv))


def command(argv: Sequence[str] | None = None) -> int:
    """`threadline ARGS`: check a configuration or serve until SIGTERM; returns the exit status."""
    args = build_parser().parse_args(argv)
    # Imported here: the server, its agents and its store are loaded only to serve or to check.
    from . import runlog
    from .app import serve

    try:
        settings = settings_from_args(args, file=args.file if args.command == "config" else None)
        runlog.configure(settings.config.log_level, settings.config.log_format)
        registry = settings.registry()
        if args.command == "config":
            mounts = [
                f"{d.name} for {', '.join(a for a in registry if d.serves(a))}"
                for d in settings.mounts.definitions
            ]
            print(
                f"{args.file}: OK, it would serve {', '.join(registry)} (default {registry.default})"
                + (f"; mounts: {'; '.join(mounts)}." if mounts else ".")
            )
            return 0
        # A crash inside a C extension still tells which Python code every thread was running.
        faulthandler.enable()
        asyncio.run(serve(settings.config, registry, mounts=settings.mounts, ready=_announce))
    except ConfigError as error:
        print(f"threadline: error: {error}", file=sys.stderr)
        return 2
    return 0


def _leave(status: int) -> NoReturn:
    """Exit with `status` without the interpreter's finalization: the command has closed all it owns.

    After `serve` returns nothing is left to do (results sent, store and telemetry closed, workers
    joined). Finalization would only tear down C extensions' globals, gRPC's core among them, where
    crashes at exit are a known class (one CI run saw a drained server die of SIGSEGV there); a clean
    stop must reach the supervisor as 0.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    main()
