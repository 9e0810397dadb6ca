"""`threadline serve --config FILE` and `threadline config check FILE` (issue 16, the configuration file)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import REPO, ServeProcess
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc

from server.cli import build_parser, settings_from_args
from server.config import ConfigError, ServerConfig, flag_settings
from server.config_file import file_key

EXAMPLE = REPO / "docs" / "threadline.example.toml"
THREADLINE = REPO / ".venv" / "bin" / "threadline"
TLS = REPO / "tests" / "tls"
"""A self-signed pair for localhost and 127.0.0.1, for tests only (`openssl req -x509 -newkey ec`)."""


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
    (tmp_path / "tls").mkdir()
    shutil.copy(TLS / "localhost.crt", tmp_path / "tls" / "cert.pem")
    shutil.copy(TLS / "localhost.key", tmp_path / "tls" / "key.pem")
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
        "event_log": ('"off"', "off"),
        "dispatch_intents": ('"off"', "off"),
        "event_log_window_ms": ("50", 50.0),
        "event_log_max_bytes": ("2097152", 2097152),
        "event_retention_s": ("60", 60.0),
        "max_followers": ("8", 8),
        "sweep_interval_s": ("2", 2.0),
        "max_run_attempts": ("5", 5),
        "max_queued_runs": ("4", 4),
        "mounts": (f'["work=local:{tmp_path / "work"}"]', (f"work=local:{tmp_path / 'work'}",)),
        "allow_root_shell": ("true", True),
        "allow_remote_shell": ("true", True),
        "metrics_port": ("9464", 9464),
        "http_port": ("8080", 8080),
        "http_cors_origins": ('["https://app.example.com"]', ("https://app.example.com",)),
        "console": ("true", True),
        "log_level": ('"debug"', "debug"),
        "log_format": ('"text"', "text"),
        "otlp_endpoint": ('"http://127.0.0.1:4317"', "http://127.0.0.1:4317"),
        "trace_content": ("true", True),
    }
    fields = {setting.name: setting for setting in flag_settings()}
    assert set(values) == set(fields), "every flag has a file key"
    tables = {setting.name for setting in dataclasses.fields(ServerConfig)} - set(fields)
    assert tables == {"mount_tables", "local_backend"}, "the rest are tables (test_mount_tables_...)"
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
        ("\n\nmax_concurrent_runs = 0\n", 3, "--max-concurrent-runs must be between 1 and 2147483647, not 0"),
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
        # Every value that reaches grpc or the OS is held to what it accepts (grpc's are C ints).
        (
            "port = 1\nmax_message_bytes = 3000000000\n",
            2,
            "--max-message-bytes must be between 1 and 2147483647",
        ),
        ("max_message_bytes = 0\n", 1, "--max-message-bytes must be between 1 and 2147483647, not 0"),
        ("keepalive_time_ms = 2147483648\n", 1, "--keepalive-time-ms must be between 1 and 2147483647"),
        ("keepalive_timeout_ms = -1\n", 1, "--keepalive-timeout-ms must be between 1 and 2147483647"),
        ("max_concurrent_runs = 9223372036854775808\n", 1, "--max-concurrent-runs must be between 1 and"),
        ("drain_grace = nan\n", 1, "--drain-grace must be between 0 and 86400 seconds"),
        ("drain_grace = -1\n", 1, "--drain-grace must be between 0 and 86400 seconds"),
        ("pack_window_ms = inf\n", 1, "--pack-window-ms must be between 0 and 1000"),
        (
            'host = "127.0.0.1 x"\n',
            1,
            "--host must be an IP address (IPv6 without brackets) or a host name, not '127.0.0.1 x'",
        ),
        ('host = "localhost:80"\n', 1, "--host must be an IP address"),
        ('host = "[::1]"\n', 1, "--host must be an IP address (IPv6 without brackets) or a host name"),
        ('otlp_endpoint = "http://[::1"\n', 1, "--otlp-endpoint must be a URL like"),
        ('otlp_endpoint = "http://127.0.0.1:99999"\n', 1, "--otlp-endpoint must be a URL like"),
        ('tls_cert = "missing.crt"\ntls_key = "missing.key"\n', 2, "--tls-key"),
        (f'tls_cert = "{TLS / "localhost.key"}"\ntls_key = "{TLS / "localhost.key"}"\n', 1, "not a PEM"),
        ('tls_cert = "/dev/zero"\ntls_key = "/dev/zero"\n', 2, "cannot read it (not a regular file)"),
        # What a message echoes is cut short.
        (f'port = "{"x" * 5000}"\n', 1, "port must be an integer, not 'xxxxxxxx"),
    ],
)
def test_a_bad_value_names_its_line(tmp_path: Path, text: str, line: int, says: str) -> None:
    message = refusal(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'threadline.toml'}:{line}: "), message
    assert says in message and len(message) < 800, message


def test_a_tls_pair_that_serves_is_taken(tmp_path: Path) -> None:
    text = f'tls_cert = "{TLS / "localhost.crt"}"\ntls_key = "{TLS / "localhost.key"}"\n'
    config = settings(tmp_path, text).config
    assert config.tls_pair() == ((TLS / "localhost.key").read_bytes(), (TLS / "localhost.crt").read_bytes())


@pytest.mark.parametrize("depth", [500, 100_000])
@pytest.mark.parametrize(("opening", "closing"), [("[", "]"), ("{a=", "}")])
def test_a_value_nested_too_deeply_names_its_line(
    tmp_path: Path, depth: int, opening: str, closing: str
) -> None:
    text = f"port = 1\n\nmax_concurrent_runs = {opening * depth}1{closing * depth}\nhost = 1\n"
    message = refusal(tmp_path, text)
    assert (
        message
        == f"{tmp_path / 'threadline.toml'}:3: a value is nested too deeply (arrays or tables in each other)."
    )


def test_mount_tables_set_what_no_flag_can(tmp_path: Path) -> None:
    (tmp_path / "work" / "src").mkdir(parents=True)
    text = (
        "[mounts.work]\n"
        'root = "work"\n'
        'agents = ["default"]\n'
        'actions = ["environment.shell.exec", "environment.process.list"]\n'
        'working_directory = "src"\n'
        'inherit_env = ["PATH"]\n'
        'env = { CI = "1" }\n'
        "[mounts.work.limits]\n"
        "max_live_commands = 2\n"
        "initial_wait_seconds = 0.5\n"
        "[mounts.plain]\n"
        f'root = "{tmp_path}"\n'
        "[local_backend]\n"
        "max_live_commands = 3\n"
        "scope_idle_seconds = 60\n"
    )
    config = settings(tmp_path, "allow_root_shell = true\n" + text).config
    work, plain = config.checked_mounts().definitions
    assert (work.name, work.agents, work.actions) == (
        "work",
        ("default",),
        ("environment.shell.exec", "environment.process.list"),
    )
    local = work.local_config()
    assert local.root == (tmp_path / "work").resolve() and local.workdir() == str(
        (tmp_path / "work" / "src").resolve()
    )
    assert (dict(local.env), local.inherit_env) == ({"CI": "1"}, ("PATH",))
    assert (local.limits.max_live_commands, local.limits.initial_wait_seconds) == (2, 0.5)
    assert local.limits.max_page_bytes == 16384, "what the table leaves out keeps its default"
    assert (plain.agents, len(plain.actions), plain.local_config().shell) == (None, 9, "/bin/sh")
    limits = config.backend_limits()
    assert (limits.max_live_commands, limits.scope_idle_seconds, limits.max_retained_bytes) == (
        3,
        60.0,
        268435456,
    )
    # `--mount` on the command line replaces both forms of the file's mounts.
    flagged = settings(tmp_path, "allow_root_shell = true\n" + text, "--mount", f"w2=local:{tmp_path}").config
    assert [d.name for d in flagged.checked_mounts().definitions] == ["w2"]


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ('[mounts.work]\nroot = "w"\nbogus = 1\n', 3, "mounts.work: unknown key 'bogus'"),
        ("[mounts.work]\nagents = []\n", 1, "root must be the mount's directory"),
        ('[mounts.Work]\nroot = "w"\n', 1, "the name must match"),
        ('[mounts.work]\nroot = "w"\n\nagents = []\n', 4, "agents must be a non-empty list"),
        (
            '[mounts.work]\nroot = "w"\nactions = ["environment.shell.run"]\n',
            3,
            "not 'environment.shell.run'",
        ),
        ('[mounts.work]\nroot = "missing"\n', 2, "is not an existing directory"),
        ('[mounts.work]\nroot = "w"\nshell = "/no/such/shell"\n', 3, "shell must be an executable file"),
        (
            '[mounts.work]\nroot = "w"\nworking_directory = "../.."\n',
            1,
            "working_directory must resolve inside",
        ),
        ('[mounts.work]\nroot = "w"\nenv = { "1X" = "v" }\n', 3, "env keys must match"),
        ('[mounts.work]\nroot = "w"\n[mounts.work.limits]\nmax_live_commands = 0\n', 4, "greater than 0"),
        ('[mounts.work]\nroot = "w"\n[mounts.work.limits]\nmax_lives = 1\n', 4, "max_lives: Extra inputs"),
        ("[local_backend]\nmax_live_commands = 2\nscope_idle_seconds = -1\n", 3, "local_backend: scope_idle"),
        ("local_backend = 3\n", 1, "local_backend must be a table"),
        (
            "[local_backend]\nmax_live_commands = true\n",
            2,
            "max_live_commands: Input should be a valid integer",
        ),
        (
            '[mounts.work]\nroot = "w"\nlimits = { max_page_bytes = 100.5 }\n',
            3,
            "limits.max_page_bytes: Input should be a valid integer",
        ),
        # Limits that rule each other out (issue 23): the later of a pair, or the backend's.
        (
            '[mounts.work]\nroot = "w"\n[mounts.work.limits]\nretained_bytes_per_stream = 209715200\n',
            4,
            "limits.retained_bytes_per_stream: twice retained_bytes_per_stream (419430400",
        ),
        (
            '[mounts.work]\nroot = "w"\n[local_backend]\nmax_retained_bytes = 1000000\n',
            4,
            "local_backend: max_retained_bytes: twice retained_bytes_per_stream (2097152",
        ),
        (
            '[mounts.work]\nroot = "w"\n[mounts.work.limits]\nmax_wall_time_seconds = 10\n',
            3,
            "limits.foreground_timeout_seconds: must be at most max_wall_time_seconds (10)",
        ),
        (
            '[mounts.work]\nroot = "w"\n[mounts.work.limits]\nmax_retained_commands = 4\n',
            4,
            "limits.max_retained_commands: must be at least max_live_commands (8)",
        ),
        (
            '[mounts.work]\nroot = "w"\nlimits = { max_stdin_write_bytes = 9, max_stdin_total_bytes = 8 }\n',
            3,
            "limits.max_stdin_total_bytes: must be at least max_stdin_write_bytes (9)",
        ),
    ],
)
def test_a_bad_mount_table_names_its_line(tmp_path: Path, text: str, line: int, says: str) -> None:
    (tmp_path / "w").mkdir()
    message = refusal(tmp_path, "allow_root_shell = true\n" + text)
    assert message.startswith(f"{tmp_path / 'threadline.toml'}:{line + 1}: "), message
    assert says in message, message


def test_a_mount_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    table = '[mounts."work\\n"]\nroot = "w"\n'  # a TOML basic string: the key is "work" and a newline
    assert "the name must match" in refusal(tmp_path, "allow_root_shell = true\n" + table)
    flag = ("--mount", f"work\n=local:{tmp_path}")
    assert "the name must match" in refusal(tmp_path, "allow_root_shell = true\n", *flag)


def test_a_mount_for_an_agent_not_served_is_refused_by_config_check(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    path = tmp_path / "threadline.toml"
    path.write_text('allow_root_shell = true\n[mounts.work]\nroot = "w"\nagents = ["default", "ghost"]\n')
    done = check(path)
    assert done.returncode == 2, done.stdout
    assert f"{path}:4: mounts.work: agents: 'ghost' is not a served agent (served: default, " in done.stderr
    path.write_text('allow_root_shell = true\n[mounts.work]\nroot = "w"\nagents = ["default"]\n')
    done = check(path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("(default default); mounts: work for default.\n"), done.stdout


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


def capped(*args: str) -> subprocess.CompletedProcess[str]:
    """`threadline ARGS` in 2 GiB of address space, so a file read whole cannot take the machine's memory."""
    return subprocess.run(
        ["sh", "-c", 'ulimit -v 2097152 && exec "$@"', "sh", str(THREADLINE), *args],
        capture_output=True,
        text=True,
        timeout=60,  # a FIFO opened for reading waits for a writer: a hang fails here
    )


def unreadable(tmp_path: Path, kind: str, limit: int) -> Path:
    """A path of `kind` that a setting must not be read from, or a regular file of `limit` + 1 bytes."""
    if kind == "device":
        return Path("/dev/zero")
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_text("#" * limit + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("device", "not a regular file"),
        ("fifo", "not a regular file"),
        ("directory", "not a regular file"),
        ("large", "larger than 1 MiB"),
    ],
)
def test_a_configuration_file_is_read_only_from_a_regular_file_of_at_most_1_mib(
    tmp_path: Path, kind: str, says: str
) -> None:
    path = unreadable(tmp_path, kind, 1 << 20)
    done = capped("config", "check", str(path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"threadline: error: --config {path}: cannot read it: {says}.\n"


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("device", "not a regular file"),
        ("fifo", "not a regular file"),
        ("directory", "not a regular file"),
        ("large", "larger than 64 KiB"),
    ],
)
def test_a_token_file_is_read_only_from_a_regular_file_of_at_most_64_kib(
    tmp_path: Path, kind: str, says: str
) -> None:
    token = unreadable(tmp_path, kind, 64 << 10)
    path = tmp_path / "threadline.toml"
    path.write_text(f'port = 0\ntoken_file = "{token}"\n', encoding="utf-8")
    done = capped("config", "check", str(path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"threadline: error: {path}:2: cannot read the token file {str(token)!r}: {says}.\n"


def test_files_at_their_limits_are_read(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t" * (64 << 10), encoding="utf-8")
    text = 'token_file = "token"\n'
    text += "#" * ((1 << 20) - len(text) - 1) + "\n"
    assert settings(tmp_path, text).config.token == "t" * (64 << 10)


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("max_message_bytes = 3000000000\n", 1, "--max-message-bytes must be between 1 and 2147483647"),
        ("port = 0\nkeepalive_time_ms = 2147483648\n", 2, "--keepalive-time-ms must be between 1 and"),
        ('port = 0\n[agents]\nx = "json:loads"\n', 3, "calling json:loads() failed: TypeError: "),
        ("max_concurrent_runs = " + "[" * 500 + "]" * 500 + "\n", 1, "a value is nested too deeply"),
    ],
)
def test_config_check_and_serve_refuse_a_bad_file_alike(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    """What `config check` accepts, `serve` starts with: both refuse these the same way, with its line."""
    path = tmp_path / "threadline.toml"
    path.write_text(text, encoding="utf-8")
    checked = check(path)
    served = subprocess.run(
        [str(THREADLINE), "serve", "--port", "0", "--store", "memory", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,  # a server that started would still be serving: fails here
    )
    for done in (checked, served):
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.startswith(f"threadline: error: {path}:{line}: ") and says in done.stderr
    assert served.stderr == checked.stderr


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("json:loads", "calling json:loads() failed: TypeError: "),
        ("os:sep", "os:sep is a str, not a factory to call"),
        ("builtins:dict", "the factory returned dict, not an ExecutableAgent"),
        ("no_such_module:build", "cannot import no_such_module:build: ModuleNotFoundError: "),
    ],
)
def test_an_agent_that_is_no_factory_is_refused_at_its_line(tmp_path: Path, target: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(tmp_path, f'port = 0\n[agents]\nok = "server.demo:demo_agent"\nx = "{target}"\n').registry()
    assert str(caught.value).startswith(f"{tmp_path / 'threadline.toml'}:4: --agent 'x={target}': ")
    assert says in str(caught.value)
    # Given as a flag, it is the flag's: no line of the file.
    with pytest.raises(ConfigError) as caught:
        settings(tmp_path, "port = 0\n", "--agent", f"x={target}").registry()
    assert str(caught.value).startswith(f"--agent 'x={target}': ") and says in str(caught.value)


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


def test_config_check_refuses_limits_that_refuse_every_command(tmp_path: Path) -> None:
    """The issue 23 file: each limit in range, together impossible. `config check` exits 2 at the line
    (and `serve` would too: both run `ServerConfig.check()`); at half the backend's bound it passes."""
    (tmp_path / "w").mkdir()
    path = tmp_path / "threadline.toml"
    table = 'allow_root_shell = true\n[mounts.work]\nroot = "w"\n[mounts.work.limits]\n'
    path.write_text(table + "retained_bytes_per_stream = 209715200\n", encoding="utf-8")
    done = check(path)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert f"{path}:5: mounts.work: limits.retained_bytes_per_stream: " in done.stderr, done.stderr
    assert "max_retained_bytes (268435456)" in done.stderr and "Traceback" not in done.stderr
    path.write_text(table + "retained_bytes_per_stream = 134217728\n", encoding="utf-8")
    done = check(path)
    assert done.returncode == 0, done.stderr


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


def test_the_documented_mount_table_shows_every_limit_with_its_default(tmp_path: Path) -> None:
    from harness.environment import LocalBackendLimits, LocalMountLimits
    from harness.environment.config import DEFAULT_INHERIT_ENV

    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page[page.index("## Mounts in a configuration file") :]
    block = section[
        section.index("```toml\n") + len("```toml\n") : section.index("```\n", section.index("```toml"))
    ]
    data = tomllib.loads(block)
    [(name, table)] = data["mounts"].items()
    assert table["limits"] == LocalMountLimits().model_dump(), "every per-mount limit, at its default"
    assert data["local_backend"] == LocalBackendLimits().model_dump(), "every backend limit, at its default"
    assert tuple(table["inherit_env"]) == DEFAULT_INHERIT_ENV
    # And it loads: the same table, its root moved to a directory that exists here.
    (tmp_path / "src").mkdir()
    text = block.replace('root = "/srv/build"', f'root = "{tmp_path}"').replace('["coder"]', '["default"]')
    config = settings(tmp_path, "allow_root_shell = true\n" + text).config
    [definition] = config.checked_mounts().definitions
    assert definition.name == name and definition.local_config().limits == LocalMountLimits()


@pytest.mark.parametrize(
    "text",
    [
        f'[agents]\nx = "{"m" * 5000}:build"\n',
        f'[agents]\nx = "json:{"f" * 5000}"\n',
        f'default_agent = "{"d" * 5000}"\n',
        f'model = "{"p" * 5000}:model"\n',
    ],
)
def test_what_a_refusal_echoes_is_bounded(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(tmp_path, text).registry()
    assert len(str(caught.value)) < 1000, str(caught.value)[:300]
