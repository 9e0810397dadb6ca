"""`threadline serve --config FILE` and `threadline config check FILE` (issue 16, the configuration file)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import REPO, ServeProcess
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc

from server.cli import build_parser, settings_from_args
from server.config import ConfigError, ServerConfig
from server.config_file import file_key

EXAMPLE = REPO / "docs" / "threadline.example.toml"
THREADLINE = REPO / ".venv" / "bin" / "threadline"


def settings(tmp_path: Path, text: str, *flags: str) -> Any:
    path = tmp_path / "threadline.toml"
    path.write_text(text, encoding="utf-8")
    return settings_from_args(build_parser().parse_args(["serve", "--config", str(path), *flags]))


def refusal(tmp_path: Path, text: str, *flags: str) -> str:
    with pytest.raises(ConfigError) as caught:
        settings(tmp_path, text, *flags)
    return str(caught.value)


def test_the_file_sets_every_flag(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "token").write_text("s3cret\n", encoding="utf-8")
    values: dict[str, tuple[str, Any]] = {  # field -> (TOML value, what ServerConfig gets)
        "host": ('"127.0.0.2"', "127.0.0.2"),
        "port": ("0", 0),
        "max_message_bytes": ("1000000", 1_000_000),
        "max_concurrent_runs": ("3", 3),
        "keepalive_time_ms": ("1000", 1000),
        "keepalive_timeout_ms": ("500", 500),
        "token": ('"t0ken"', "t0ken"),
        "tls_cert": ('"tls/cert.pem"', tmp_path / "tls" / "cert.pem"),
        "tls_key": ('"tls/key.pem"', tmp_path / "tls" / "key.pem"),
        "insecure": ("true", True),
        "drain_grace_s": ("2.5", 2.5),
        "pack_window_ms": ("0", 0.0),
        "store": ('"memory"', "memory"),
        "lease_ttl_s": ("5", 5.0),
        "mounts": (f'["work=local:{tmp_path / "work"}"]', (f"work=local:{tmp_path / 'work'}",)),
        "allow_root_shell": ("true", True),
        "allow_remote_shell": ("true", True),
        "metrics_port": ("9464", 9464),
        "log_level": ('"debug"', "debug"),
        "log_format": ('"text"', "text"),
        "otlp_endpoint": ('"http://127.0.0.1:4317"', "http://127.0.0.1:4317"),
        "trace_content": ("true", True),
    }
    fields = {setting.name: setting for setting in dataclasses.fields(ServerConfig)}
    assert set(values) == set(fields), "every ServerConfig field has a file key"
    text = "".join(f"{file_key(fields[name])} = {toml}\n" for name, (toml, _) in values.items())
    got = settings(tmp_path, text + '[agents]\nother = "server.demo:demo_agent"\n').config
    for name, (_, expected) in values.items():
        assert getattr(got, name) == expected, name
        assert expected != fields[name].default, f"{name}: the test must set a non-default value"

    # token_file instead of token: read from the file, next to the configuration file.
    assert settings(tmp_path, 'token_file = "token"\n').config.token == "s3cret"


def test_agents_model_and_the_default_agent(tmp_path: Path) -> None:
    got = settings(
        tmp_path, 'default_agent = "b"\n[agents]\na = "m:one"\nb = "m:two"\n', "--agent", "c=m:three"
    )
    assert got.agents == ("a=m:one", "b=m:two", "c=m:three")
    assert got.default_agent == "b"
    assert settings(tmp_path, 'model = "openai:x"\n', "--model", "anthropic:y").model == "anthropic:y"


def test_flags_override_the_file(tmp_path: Path) -> None:
    text = "max_concurrent_runs = 3\ninsecure = true\nmounts = []\n"
    got = settings(tmp_path, text, "--max-concurrent-runs", "9").config
    assert (got.max_concurrent_runs, got.insecure) == (9, True)
    # A bad value in the file that a flag replaces is never looked at.
    assert (
        settings(
            tmp_path, "max_concurrent_runs = 0\n", "--max-concurrent-runs", "4"
        ).config.max_concurrent_runs
        == 4
    )
    # Without the file, the field's default; a flag's default never hides the file's value.
    assert settings(tmp_path, "").config == ServerConfig(token=os.environ.get("THREADLINE_TOKEN") or None)


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ('# comment\nport = "x"\n', 2, "port must be an integer, not 'x'"),
        ("\n\nmax_concurrent_runs = 0\n", 3, "--max-concurrent-runs must be positive"),
        ("port = 1\n\nlease_ttl = 99999\n", 3, "--lease-ttl must be between"),
        ("insecure = 1\n", 1, "insecure must be true or false"),
        ('mounts = "work=local:/x"\n', 1, "mounts must be a list of strings"),
        (
            'allow_root_shell = true\nmounts = ["work=local:/no/such/dir"]\n',
            2,
            "is not an existing directory",
        ),
        ('store = "mysql:x"\n', 1, "--store must be sqlite:PATH"),
        ('port = 1\nhost = "0.0.0.0"\n', 2, "Refusing to serve 0.0.0.0"),
        ("port = 1\nbogus = 2\n", 2, "unknown setting 'bogus'"),
        ('token_file = "missing"\n', 1, "cannot read the token file"),
        ("[agents]\nx = 1\n", 1, "agents must be a table"),
    ],
)
def test_a_bad_value_names_its_line(tmp_path: Path, text: str, line: int, says: str) -> None:
    message = refusal(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'threadline.toml'}:{line}: "), message
    assert says in message


def test_a_broken_file_says_so(tmp_path: Path) -> None:
    assert "not valid TOML" in refusal(tmp_path, "port = = 1\n")
    with pytest.raises(ConfigError, match="cannot read it"):
        settings_from_args(build_parser().parse_args(["serve", "--config", str(tmp_path / "none.toml")]))
    # A flag at fault is the flag's, not the file's: no line.
    assert not refusal(tmp_path, "port = 1\n", "--max-concurrent-runs", "0").startswith(str(tmp_path))


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(THREADLINE), "config", "check", str(path)], capture_output=True, text=True, timeout=60
    )


def test_config_check_passes_the_example_and_names_a_bad_line(tmp_path: Path) -> None:
    done = check(EXAMPLE)
    assert done.returncode == 0, done.stderr
    assert f"{EXAMPLE}: OK" in done.stdout and "default" in done.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('host = "127.0.0.1"\nport = 70000\n', encoding="utf-8")
    done = check(bad)
    assert done.returncode == 2 and done.stdout == ""
    assert f"{bad}:2: --port must be between 0 and 65535" in done.stderr
    # Agents are built too: a factory that cannot be imported fails the check.
    bad.write_text('[agents]\nx = "no_such_module:build"\n', encoding="utf-8")
    done = check(bad)
    assert done.returncode == 2 and "cannot import no_such_module:build" in done.stderr


def test_a_server_serves_what_its_file_says(
    tmp_path: Path, serve_process: Callable[..., ServeProcess]
) -> None:
    path = tmp_path / "threadline.toml"
    path.write_text("max_concurrent_runs = 3\nmax_message_bytes = 2000000\n", encoding="utf-8")
    running = serve_process("--config", str(path), "--max-message-bytes", "3000000")
    with grpc.insecure_channel(running.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        info = stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), timeout=30)
    assert (info.limits.max_concurrent_runs, info.limits.max_message_bytes) == (3, 3_000_000)
    assert running.stop() == 0


def test_help_still_shows_each_default() -> None:
    text = subprocess.run(
        [sys.executable, "-m", "server.cli", "serve", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "(default: 256)" in text and "--config FILE" in text
