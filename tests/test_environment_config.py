"""Mounts from a configuration file (`[mounts.NAME]`, `[local_backend]`): a real `threadline serve
--config` whose mounts differ by agent, actions, shell, environment and limits, driven over gRPC.

The scripted agent of tests/env_server.py calls the shell tools its prompt names; commands report what
they saw in files of the root and wait on a handshake file, never on time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from env_server import (
    ROOT_FLAGS,
    SHELL_TOOLS,
    harness_stub,
    outcome,
    plan,
    results,
    shell_server,
    spec,
    until,
    wait_for,
)
from threadline.v1 import harness_service_pb2

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32" or os.name != "posix", reason="POSIX only (ENVIRONMENT §14)"),
]

EXEC = "environment.shell.exec"
BASH = "/bin/bash"


def config_file(tmp_path: Path, root: Path) -> Path:
    """`build` for the agent `shell` only (bash, a working directory, its own variables, a short command
    limit); `quick` for every agent, foreground commands only; the backend runs one command at a time."""
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (tmp_path / "quick").mkdir(exist_ok=True)
    path = tmp_path / "threadline.toml"
    path.write_text(
        f"allow_root_shell = {'true' if ROOT_FLAGS else 'false'}\n"
        "\n"
        "[mounts.build]\n"
        f'root = "{root}"\n'
        'agents = ["shell"]\n'
        f'shell = "{BASH}"\n'
        'working_directory = "sub"\n'
        'inherit_env = ["PATH"]\n'
        'env = { GREETING = "hello from the file" }\n'
        "\n"
        "[mounts.build.limits]\n"
        "max_command_bytes = 300\n"
        "initial_wait_seconds = 0.5\n"
        "\n"
        "[mounts.quick]\n"
        'root = "quick"\n'  # relative to the file
        f'actions = ["{EXEC}"]\n'
        "\n"
        "[local_backend]\n"
        "max_live_commands = 1\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.skipif(not Path(BASH).is_file(), reason="the test's mount runs bash")
async def test_each_mount_gets_its_agents_actions_shell_environment_and_limits(tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    path = config_file(tmp_path, root)
    seen = 'printf \'%s|%s|%s|%s\' "$GREETING" "${HOME-unset}" "${BASH_VERSION:+bash}" "$PWD" > seen'
    with shell_server(tmp_path, "--config", str(path), mount=False) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
            steps = plan(
                # Live until `go`: the one command the backend allows.
                ("shell_exec", {"alias": "build", "command": f"{seen}; {wait_for(root, 'go')}"}),
                ("shell_exec", {"alias": "quick", "command": "echo quick"}),
                ("shell_exec", {"alias": "build", "command": "echo " + "y" * 300}),
            )
            response = await stub.Run(harness_service_pb2.RunRequest(spec=spec(steps)))
        live, refused_by_backend, too_long = results(response.result)
        assert live["ok"] is True and live["status"]["phase"] == "running", live
        assert refused_by_backend["ok"] is False, refused_by_backend
        assert refused_by_backend["error"]["code"] == "environment_limit_exceeded"
        assert refused_by_backend["error"]["message"] == "The server runs as many commands as it allows."
        assert refused_by_backend["error"]["details"] == {"limit": 1}
        assert too_long["ok"] is False and too_long["error"]["code"] == "environment_too_large", too_long
        until(lambda: (root / "sub" / "seen").exists(), "the command's report")
        assert (root / "sub" / "seen").read_text() == f"hello from the file|unset|bash|{root / 'sub'}"
        (root / "go").touch()

        agents = {agent.name: agent for agent in info.agents}
        mounts = {
            name: [(m.name, list(m.actions), m.process_capable) for m in agent.mounts]
            for name, agent in agents.items()
        }
        assert mounts["shell"][0][0] == "build" and mounts["shell"][0][2] is True
        assert mounts["shell"][1] == ("quick", [EXEC], False)
        assert mounts["default"] == [("quick", [EXEC], False)], "build is for the agent shell only"
        assert [tool.name for tool in agents["shell"].tools] == ["note", *SHELL_TOOLS]
        default_tools = [tool.name for tool in agents["default"].tools]
        assert default_tools[-1] == "shell_exec" and not set(SHELL_TOOLS[1:]) & set(default_tools), (
            "a foreground-only mount offers shell_exec alone"
        )
        assert outcome(response.result)["tools"] == ["note", *SHELL_TOOLS]
        server.finish()
        [configured] = server.records("mounts_configured")
        assert configured["mounts"] == [
            {"name": "build", "actions": mounts["shell"][0][1], "agents": ["shell"]},
            {"name": "quick", "actions": [EXEC], "agents": list(agents)},
        ]
        assert str(root) not in json.dumps(configured), "logs carry no path (§10.5)"


async def test_a_mount_flag_replaces_the_files_mounts(tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    path = config_file(tmp_path, root)
    flag_root = tmp_path / "flagged"
    flag_root.mkdir()
    with shell_server(
        tmp_path, "--config", str(path), "--mount", f"other=local:{flag_root}", mount=False
    ) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            info = await harness_stub(channel).GetServerInfo(harness_service_pb2.GetServerInfoRequest())
        assert all([m.name for m in agent.mounts] == ["other"] for agent in info.agents), info.agents
        server.finish()


_COUNTING = """
import sys
from harness.environment.config import LocalMountConfig

built = []
init = LocalMountConfig.__init__


def counted(self, *args, **kwargs):
    built.append(args[0])
    init(self, *args, **kwargs)


LocalMountConfig.__init__ = counted
from server.cli import command

code = command(sys.argv[1:])
print(f"mount configurations built: {len(built)}", file=sys.stderr, flush=True)
sys.exit(code)
"""
"""`threadline ARGS`, counting the `LocalMountConfig`s built (each one checks its root, shell and working
directory against the machine) and saying so last on stderr."""


def built_configs(stderr: str) -> int:
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("mount configurations built: "), stderr[-2000:]
    return int(last.rpartition(" ")[2])


def test_each_mount_is_checked_once_from_the_command_line_to_a_serving_server(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name / "sub").mkdir(parents=True)
    path = tmp_path / "threadline.toml"
    path.write_text(
        f"allow_root_shell = {'true' if ROOT_FLAGS else 'false'}\n"
        '[mounts.one]\nroot = "one"\nworking_directory = "sub"\n'
        '[mounts.two]\nroot = "two"\n',
        encoding="utf-8",
    )
    repo = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-c", _COUNTING]
    checked = subprocess.run(
        [*command, "config", "check", str(path)], capture_output=True, text=True, timeout=60, cwd=repo
    )
    assert checked.returncode == 0 and "; mounts: one for default, " in checked.stdout, checked.stdout
    assert built_configs(checked.stderr) == 2

    serving = subprocess.Popen(
        [*command, "serve", "--port", "0", "--store", "memory", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=repo,
    )
    try:
        assert serving.stdout is not None
        assert serving.stdout.readline().startswith("listening on ")
        serving.send_signal(signal.SIGTERM)
        _, stderr = serving.communicate(timeout=60)
    finally:
        serving.kill()
    assert serving.returncode == 0 and built_configs(stderr) == 2, "one check per mount, served as checked"
