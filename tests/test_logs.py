"""Every log line of a run carries its ids, whoever logs it; `--log-level` and `--log-format` (issue 16)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from contextlib import AbstractContextManager
from pathlib import Path

import grpc
from conftest import THREADLINE
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

AGENT = textwrap.dedent(
    '''
    import logging

    from pydantic_ai import Tool
    from pydantic_ai.capabilities import Capability
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart

    from harness import ExecutableAgent
    from harness.testing import scripted_model


    def noisy(word: str) -> str:
        """A tool that logs through a logger of its own, as library code does."""
        logging.getLogger("acme.tool").warning("tool_says %s", word)
        return word


    def script(messages, info):
        if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("noisy", {"word": "hello"})])


    def build():
        return ExecutableAgent(scripted_model(script), capabilities=[Capability(tools=[Tool(noisy)])], name="noisy")
    '''
)


def serve_noisy(tmp_path: Path, *args: str) -> AbstractContextManager[LoggedServe]:
    (tmp_path / "noisy_agent.py").write_text(AGENT, encoding="utf-8")
    path = os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH"))))
    return logged_serve("--agent", "noisy=noisy_agent:build", *args, env={"PYTHONPATH": path})


def test_a_tools_own_log_line_carries_the_runs_ids(tmp_path: Path) -> None:
    with serve_noisy(tmp_path) as running:
        with grpc.insecure_channel(running.address) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
            spec = run_pb2.RunSpec(agent="noisy", text="go", request_id="req-logs-1")
            result = stub.Run(harness_service_pb2.RunRequest(spec=spec), timeout=30).result
            threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
            thread = threads.CreateThread(thread_service_pb2.CreateThreadRequest(agent="noisy"), timeout=30)
            turn = threads.RunThread(
                thread_service_pb2.RunThreadRequest(
                    spec=thread_service_pb2.ThreadRunSpec(
                        thread_id=thread.thread.thread_id, text="go", request_id="req-logs-2"
                    )
                ),
                timeout=30,
            ).result
        assert running.stop() == 0
    said = [r for r in running.records() if r["event"] == "tool_says hello"]
    assert [(r["thread_id"], r["run_id"], r["request_id"]) for r in said] == [
        (result.thread_id, result.run_id, "req-logs-1"),
        (turn.thread_id, turn.run_id, "req-logs-2"),
    ]
    assert all(r["level"] == "warning" for r in said)
    # Lines outside any run carry no run ids.
    assert all(
        "run_id" not in r for r in running.records() if r["event"] in ("server_draining", "server_stopped")
    )


def test_text_format_and_level(tmp_path: Path) -> None:
    with serve_noisy(tmp_path, "--log-format", "text", "--log-level", "warning") as running:
        with grpc.insecure_channel(running.address) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
            spec = run_pb2.RunSpec(agent="noisy", text="go", request_id="req-logs-3")
            stub.Run(harness_service_pb2.RunRequest(spec=spec), timeout=30)
        assert running.stop() == 0
    lines = [line.rstrip("\n") for line in running.lines if line.strip()]
    [said] = [line for line in lines if " tool_says hello " in line]
    ts, level, event, *_ = said.split()
    assert (level, event) == ("warning", "tool_says") and ts.endswith("+00:00")
    assert "request_id=req-logs-3" in said and "run_id=run-" in said
    assert not any(" run_started " in line for line in lines), "info lines are below --log-level warning"
    assert not any(line.startswith("{") for line in lines)


def test_a_bad_log_setting_refuses_to_start() -> None:
    done = subprocess.run(
        [str(THREADLINE), "serve", "--port", "0", "--store", "memory", "--log-level", "loud"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--log-level must be one of debug, info, warning, error" in done.stderr
