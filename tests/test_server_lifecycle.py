"""Server behaviour around runs: cancellation, deadlines, the run limit, auth, health, reflection,
SIGTERM drain, and the `threadline serve` command line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import grpc
import pytest
from conftest import THREADLINE, RunningServer, ServeProcess, StartServer, error_info
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    thread_service_pb2,
    thread_service_pb2_grpc,
)

pytestmark = pytest.mark.anyio

SLOW = "sleep 30"
"""The demo's slow prompt: its tool waits 30 s, far longer than any test waits for it."""


def stream_request(text: str) -> harness_service_pb2.StreamRunRequest:
    return harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(text=text))


async def until_tool_runs(call: AsyncIterator[harness_service_pb2.StreamRunResponse]) -> None:
    """Read events until the slow tool is executing (its ToolCall event arrived)."""
    async for response in call:
        if response.event.WhichOneof("event") == "tool_call":
            return
    raise AssertionError("the stream ended before the tool ran")


async def settled(server: RunningServer) -> int:
    """The server's active run count once it stops changing (polls; asserts nothing about time)."""
    for _ in range(200):
        if server.active_runs == 0:
            return 0
        await anyio.sleep(0.05)
    return server.active_runs


async def test_client_cancel_mid_stream_cancels_the_run(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        call = stub.StreamRun(stream_request(SLOW))
        await until_tool_runs(call)
        assert server.active_runs >= 1
        call.cancel()
        with pytest.raises(asyncio.CancelledError):  # a locally cancelled call raises this on read
            await call.read()
        assert call.cancelled()
    assert await settled(server) == 0


async def test_deadline_cancels_the_run(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text=SLOW)), timeout=1)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert await settled(server) == 0


async def test_run_limit(start_server: StartServer, caplog: pytest.LogCaptureFixture) -> None:
    limited = await start_server(max_concurrent_runs=1)
    async with grpc.aio.insecure_channel(limited.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        slow = stub.StreamRun(stream_request(SLOW))
        await until_tool_runs(slow)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hi")))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = error_info(caught.value)
        assert (info.reason, info.metadata["limit"]) == ("RUN_LIMIT_REACHED", "1")
        # A thread run at the limit is refused alike, and a refusal is no crash in the server's log.
        threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
        created = await threads.CreateThread(thread_service_pb2.CreateThreadRequest())
        caplog.set_level(logging.INFO, logger="threadline.threads")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            spec = thread_service_pb2.ThreadRunSpec(thread_id=created.thread.thread_id, text="hi")
            await threads.RunThread(thread_service_pb2.RunThreadRequest(spec=spec))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info(caught.value).reason == "RUN_LIMIT_REACHED"
        assert not [r for r in caplog.records if r.getMessage() == "run_crashed"]
        # Envelope RPCs are not runs: they still work at the limit.
        await stub.NewState(harness_service_pb2.NewStateRequest())
        slow.cancel()
        assert await settled(limited) == 0
        done = await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hi")))
        assert done.result.status == run_pb2.RUN_STATUS_COMPLETED


async def test_oversized_message_is_resource_exhausted(start_server: StartServer) -> None:
    # Small, but room for GetServerInfo's answer (the demo's three agents and their tools).
    small = await start_server(max_message_bytes=8192)
    async with grpc.aio.insecure_channel(small.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="x" * 16384)))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
        assert info.limits.max_message_bytes == 8192


async def test_token_auth(start_server: StartServer) -> None:
    secured = await start_server(token="s3cret-token")
    async with grpc.aio.insecure_channel(secured.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        request = harness_service_pb2.GetServerInfoRequest()
        for metadata, reason in (
            ((), "TOKEN_MISSING"),
            ((("authorization", "Bearer wrong"),), "TOKEN_INVALID"),
            ((("authorization", "s3cret-token"),), "TOKEN_INVALID"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetServerInfo(request, metadata=metadata)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert error_info(caught.value).reason == reason
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.StreamRun(stream_request("hi")):
                pass
        assert error_info(caught.value).reason == "TOKEN_MISSING"

        good = (("authorization", "Bearer s3cret-token"),)
        assert (await stub.GetServerInfo(request, metadata=good)).default_agent == "default"
        events = [r async for r in stub.StreamRun(stream_request("hi"), metadata=good)]
        assert events[-1].event.result.status == run_pb2.RUN_STATUS_COMPLETED

        # Health and reflection stay open.
        health = health_pb2_grpc.HealthStub(channel)
        response = await health.Check(health_pb2.HealthCheckRequest(service="threadline.v1.HarnessService"))
        assert response.status == health_pb2.HealthCheckResponse.SERVING
        assert "threadline.v1.HarnessService" in await list_services(channel)


async def test_no_token_means_no_auth(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        metadata = (("authorization", "Bearer anything"),)
        assert (
            await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), metadata=metadata)
        ).agents


async def list_services(channel: grpc.aio.Channel) -> list[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    async for response in call:
        return [s.name for s in response.list_services_response.service]
    return []


async def test_health_and_both_reflection_versions(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "threadline.v1.HarnessService"):
            response = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert response.status == health_pb2.HealthCheckResponse.SERVING
        names = await list_services(channel)
        assert {"threadline.v1.HarnessService", "grpc.health.v1.Health"} <= set(names)
        assert {"grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"} <= set(
            names
        )
        # v1 is the same servicer under the v1 name (wire-identical messages).
        v1 = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        async for response in v1(iter([reflection_pb2.ServerReflectionRequest(list_services="")])):
            assert "threadline.v1.HarnessService" in [s.name for s in response.list_services_response.service]
            break


# -- the command line, as a subprocess ------------------------------------------------------------------


def log_lines(process: ServeProcess) -> list[dict[str, object]]:
    assert process.process.stderr is not None
    lines = [line for line in process.process.stderr.read().splitlines() if line.startswith("{")]
    return [json.loads(line) for line in lines]


async def test_sigterm_drains_running_runs_into_cancelled_results(serve_process) -> None:  # type: ignore[no-untyped-def]
    running: ServeProcess = serve_process("--drain-grace", "20")
    assert running.first_line == f"listening on {running.address}"
    assert running.address.startswith("127.0.0.1:")
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        call = stub.StreamRun(
            harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(text=SLOW, request_id="drain-me"))
        )
        await until_tool_runs(call)
        running.process.send_signal(signal.SIGTERM)
        rest = [response.event async for response in call]
    assert rest[-1].WhichOneof("event") == "result"
    result = rest[-1].result
    assert result.status == run_pb2.RUN_STATUS_CANCELLED
    assert result.HasField("state") and result.state.message_history.message_count >= 2
    assert result.request_id == "drain-me"
    assert await anyio.to_thread.run_sync(running.process.wait, 30) == 0
    logs = log_lines(running)
    runs = [line for line in logs if line.get("request_id") == "drain-me"]
    assert [line["event"] for line in runs] == ["run_started", "run_finished"]
    finished = runs[-1]
    assert finished["status"] == "cancelled"
    assert {"thread_id", "run_id", "duration_ms"} <= set(finished)
    assert finished["thread_id"] == result.thread_id and finished["run_id"] == result.run_id


async def test_a_unary_run_is_logged_with_its_status(serve_process) -> None:  # type: ignore[no-untyped-def]
    running: ServeProcess = serve_process()
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        response = await stub.Run(
            harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hello there", request_id="unary-log"))
        )
    assert response.result.status == run_pb2.RUN_STATUS_COMPLETED
    running.process.send_signal(signal.SIGTERM)
    assert await anyio.to_thread.run_sync(running.process.wait, 30) == 0
    runs = [line for line in log_lines(running) if line.get("request_id") == "unary-log"]
    assert [(line["event"], line.get("status")) for line in runs] == [
        ("run_started", None),
        ("run_finished", "completed"),
    ]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [str(THREADLINE), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_help_explains_every_flag() -> None:
    result = run_cli("serve", "--help")
    assert result.returncode == 0
    for flag in (
        "--host",
        "--port",
        "--agent",
        "--model",
        "--max-concurrent-runs",
        "--max-message-bytes",
        "--token",
        "--tls-cert",
        "--tls-key",
        "--insecure",
        "--drain-grace",
        "--pack-window-ms",
    ):
        assert flag in result.stdout
    assert "256" in result.stdout and "127.0.0.1" in result.stdout and "50051" in result.stdout


def test_non_loopback_without_tls_or_token_refuses_to_start() -> None:
    result = run_cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 2
    assert "--insecure" in result.stderr and result.stdout == ""


def test_missing_model_extra_fails_at_start_naming_it() -> None:
    result = run_cli("serve", "--port", "0", "--model", "groq:llama-3.3-70b-versatile")
    assert result.returncode == 2
    assert "pydantic-ai-slim[groq]" in result.stderr


async def test_user_agent_factory_and_non_loopback_with_token(serve_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "my_agents.py").write_text(
        textwrap.dedent(
            """
            from harness import ExecutableAgent
            from harness.testing import scripted_model
            from pydantic_ai.messages import ModelResponse, TextPart

            def build():
                return ExecutableAgent(
                    scripted_model(lambda messages, info: ModelResponse(parts=[TextPart("custom!")])), name="custom"
                )
            """
        )
    )
    running: ServeProcess = serve_process(
        "--agent", "custom=my_agents:build", "--token", "t0k", env={"PYTHONPATH": str(tmp_path)}
    )
    metadata = (("authorization", "Bearer t0k"),)
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest(), metadata=metadata)
        assert [a.name for a in info.agents] == ["default", "demo-lead", "demo-reviewer", "custom"]
        assert info.default_agent == "custom"
        result = (
            await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hi")), metadata=metadata)
        ).result
        assert json.loads(result.output_json) == "custom!"
    assert running.stop() == 0


def test_token_from_environment_allows_a_non_loopback_bind(serve_process) -> None:  # type: ignore[no-untyped-def]
    running: ServeProcess = serve_process("--host", "0.0.0.0", env={"THREADLINE_TOKEN": "from-env"})
    assert running.address.startswith("0.0.0.0:")
    assert running.stop() == 0


def test_a_pack_window_outside_0_to_1000_ms_refuses_to_start() -> None:
    result = run_cli("serve", "--port", "0", "--pack-window-ms", "-1")
    assert result.returncode == 2
    assert "--pack-window-ms must be between 0 and 1000" in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ("--max-message-bytes", "3000000000"),
            "--max-message-bytes must be between 1 and 2147483647, not 3000000000.",
        ),
        (("--keepalive-time-ms", "2147483648"), "--keepalive-time-ms must be between 1 and 2147483647"),
        (("--keepalive-timeout-ms", "0"), "--keepalive-timeout-ms must be between 1 and 2147483647, not 0."),
        (("--drain-grace", "nan"), "--drain-grace must be between 0 and 86400 seconds."),
        (
            ("--host", "local host", "--insecure"),
            "--host must be an IP address (IPv6 without brackets) or a host name",
        ),
        (("--agent", "x=json:loads"), "--agent 'x=json:loads': calling json:loads() failed: TypeError: "),
    ],
)
def test_a_flag_out_of_range_refuses_to_start(flags: tuple[str, ...], says: str) -> None:
    """The values grpc or the OS cannot take are refused with the flag's name, exit 2, no traceback."""
    result = run_cli("serve", "--port", "0", "--store", "memory", *flags)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"threadline: error: {says}"), result.stderr


async def test_the_largest_values_grpc_takes_serve(serve_process) -> None:  # type: ignore[no-untyped-def]
    largest = str(2**31 - 1)
    running: ServeProcess = serve_process(
        *("--max-message-bytes", largest, "--max-concurrent-runs", largest),
        *("--keepalive-time-ms", largest, "--keepalive-timeout-ms", largest, "--drain-grace", "86400"),
    )
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        limits = (await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())).limits
    assert (limits.max_message_bytes, limits.max_concurrent_runs) == (2**31 - 1, 2**31 - 1)
    assert running.stop() == 0


async def test_tls_serves_the_pair_config_check_took(serve_process) -> None:  # type: ignore[no-untyped-def]
    tls = Path(__file__).parent / "tls"
    pair = ("--tls-cert", str(tls / "localhost.crt"), "--tls-key", str(tls / "localhost.key"))
    running: ServeProcess = serve_process(*pair)
    port = running.address.rsplit(":", 1)[1]
    credentials = grpc.ssl_channel_credentials((tls / "localhost.crt").read_bytes())
    async with grpc.aio.secure_channel(f"localhost:{port}", credentials) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert (await check).status == health_pb2.HealthCheckResponse.SERVING
    assert running.stop() == 0


def test_a_port_in_use_stops_the_start_with_a_message() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for flags, says in (
            (("--port", port), f"cannot listen on 127.0.0.1:{port}: the port is in use"),
            (("--port", "0", "--metrics-port", port), f"--metrics-port: cannot listen on 127.0.0.1:{port}"),
        ):
            result = run_cli("serve", "--store", "memory", *flags)
            assert result.returncode == 2 and result.stdout == ""
            assert f"threadline: error: {says}" in result.stderr and "Traceback" not in result.stderr
