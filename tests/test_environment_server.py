"""Shell environments over gRPC (ENVIRONMENT §14 C, issue 14): real `threadline serve --mount` processes.

A scripted agent (tests/env_server.py) drives exact shell-tool calls from its prompt and answers with
every tool return; the generated stubs are the client. Commands record their pids in the root and
synchronise with the test through files, never sleeps. Every test stops its server with SIGTERM,
waits for the exit, and checks that the recorded pids are gone: the server kills its commands when
it stops (§11).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import (
    THREADLINE,
    create_thread,
    fresh_thread_id,
    get_thread,
    refusal,
    run_thread,
    stream_thread,
)
from env_server import (
    BOUND,
    ROOT_FLAGS,
    SHELL_TOOLS,
    alive,
    bad_request_fields,
    entries,
    harness_stub,
    lifecycle,
    outcome,
    plan,
    results,
    shell_server,
    spec,
    stream_run,
    until,
    wait_for,
)
from threadline.v1 import (
    harness_service_pb2,
    harness_service_pb2_grpc,
    run_pb2,
    state_pb2,
    thread_service_pb2_grpc,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32" or os.name != "posix", reason="POSIX only (ENVIRONMENT §14)"),
]

ACTIONS = [
    "environment.shell.exec",
    "environment.process.list",
    "environment.process.inspect",
    "environment.process.read_output",
    "environment.process.wait",
    "environment.process.write_stdin",
    "environment.process.close_stdin",
    "environment.process.signal",
    "environment.process.kill",
]
HEX_DIGITS = "0123456789abcdef"


def exec_step(command: str, **args: Any) -> tuple[str, dict[str, Any]]:
    return ("shell_exec", {"command": command, **args})


def own_entry(state_json: str, *, version: str = "1", mount: str = "build") -> state_pb2.EnvironmentState:
    return state_pb2.EnvironmentState(
        mount_name=mount, provider_key="threadline_local", state_version=version, state_json=state_json
    )


FOREIGN = state_pb2.EnvironmentState(
    mount_name="sandbox",
    provider_key="docker",
    state_version="3",
    state_json='{"container":"c0ffee","fingerprint":"f1"}',
)
"""An a13n provider's entry: never interpreted, carried byte for byte (§9.5)."""


async def state_with(
    stub: harness_service_pb2_grpc.HarnessServiceStub, *extra: state_pb2.EnvironmentState, thread_id: str = ""
) -> state_pb2.HarnessState:
    """A fresh envelope (NewState) whose environment_states are `extra`, in order."""
    response = await stub.NewState(harness_service_pb2.NewStateRequest(thread_id=thread_id))
    state = response.state
    state.environment_states.extend(extra)
    return state


# -- C28: a command outlives its run and the thread's next run finds it --------------------------------------


async def test_a_background_command_is_discovered_and_read_by_offset_in_the_next_run(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        root = server.root
        command = f"echo $$ > pids/main; printf early; {wait_for(root, 'go')}; printf late"
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
            _, first = await stream_run(stub, plan(exec_step(command)))
            assert alive(server.pid("main")), "run close kills nothing (§8)"
            [started] = results(first)
            r1 = started["process_id"]
            assert started["ok"] is True and started["status"]["phase"] == "running", started
            assert started["stdout"]["text"] == "early"
            [(mount, provider, version, state_json)] = entries(first.state)
            assert (mount, provider, version) == ("build", "threadline_local", "1")
            evidence = json.loads(state_json)
            # Random ids only (§9.1): no pid, path, command text or output can hide in this shape.
            [recorded] = evidence["commands"]
            assert sorted(evidence) == ["backend", "commands", "scope"] and sorted(recorded) == [
                "id",
                "started_at",
            ]
            assert all(
                len(v) == 32 and set(v) <= set(HEX_DIGITS)
                for v in (evidence["backend"], evidence["scope"], recorded["id"])
            )
            assert recorded["started_at"] == started["status"]["started_at"]

            (root / "go").touch()
            _, second = await stream_run(
                stub,
                plan(
                    ("shell_info", {}),
                    ("shell_wait", {"process_id": "$0:processes.0.process_id", "stdout_offset": 5}),
                ),
                state=first.state,
            )
        listed, read = results(second)
        [item] = listed["processes"]
        assert item["origin"] == "earlier_run" and item["process_id"] != r1
        assert item["process_id"].startswith("proc-") and item["command"] == command
        assert read["ok"] is True and read["process_id"] == item["process_id"]
        assert read["status"]["phase"] == "exited" and read["status"]["exit_code"] == 0
        page = read["stdout"]
        assert (page["requested_offset"], page["start_offset"], page["next_offset"]) == (5, 5, 9)
        assert page["text"] == "late" and page["available_end"] == 9 and page["observation_closed"]
        assert entries(second.state) == entries(first.state), "the same scope and command: the same entry"

        [agent] = [agent for agent in info.agents if agent.name == "shell"]
        assert [tool.name for tool in agent.tools] == ["note", *SHELL_TOOLS]
        categories = {tool.name: (tool.category, tool.recovery_retryable) for tool in agent.tools}
        retryable = (harness_service_pb2.TOOL_CATEGORY_RECOVERY_RETRYABLE, True)
        plain = (harness_service_pb2.TOOL_CATEGORY_PLAIN, False)
        assert categories == {
            "note": plain,
            "shell_exec": plain,
            "shell_info": retryable,
            "shell_wait": retryable,
            "shell_input": plain,
            "shell_signal": plain,
        }
        assert [(m.name, m.provider_key, list(m.actions), m.process_capable) for m in agent.mounts] == [
            ("build", "threadline_local", ACTIONS, True)
        ]
        assert all([m.name for m in a.mounts] == ["build"] for a in info.agents), (
            "every agent gets every mount"
        )
        assert [(p.provider_key, list(p.state_versions)) for p in info.environment_providers] == [
            ("threadline_local", ["1"])
        ]
        assert str(root) not in str(info), "GetServerInfo never publishes a path (§10.5)"
        assert outcome(first)["tools"] == ["note", *SHELL_TOOLS]
        server.finish()


async def test_without_a_mount_the_tools_are_the_agents_own(tmp_path: Path) -> None:
    with shell_server(tmp_path, mount=False) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            info = await stub.GetServerInfo(harness_service_pb2.GetServerInfoRequest())
            # Without a mount, `shell_exec` is no reserved name: a client tool may take it.
            tool = run_pb2.ClientTool(name="shell_exec", parameters_json_schema='{"type": "object"}')
            _, result = await stream_run(stub, plan(("note", {"text": "hi"})), client_tools=[tool])
            _, demo = await stream_run(stub, "shell printf hi", agent="default")
        [agent] = [agent for agent in info.agents if agent.name == "shell"]
        assert [tool.name for tool in agent.tools] == ["note"]
        assert not any(a.mounts for a in info.agents) and not info.environment_providers
        assert outcome(result) == {"tools": ["note", "shell_exec"], "results": ["hi"]}
        assert entries(result.state) == []
        assert "--mount" in json.loads(demo.output_json), "the demo's shell words say how to get a shell"
        server.finish()


# -- C29: start-up refusals --------------------------------------------------------------------------------


def refusals(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Each refused configuration: (`serve` arguments, the words its message must contain)."""
    root = (tmp_path / "root").resolve()
    root.mkdir(exist_ok=True)
    (tmp_path / "file").write_text("not a directory")
    mount = f"build=local:{root}"
    return {
        "non-loopback": (["--host", "0.0.0.0", "--insecure", "--mount", mount], "--allow-remote-shell"),
        "missing root": (["--mount", f"build=local:{tmp_path / 'missing'}"], "not an existing directory"),
        "relative root": (["--mount", "build=local:relative/root"], "not an absolute path"),
        "file as root": (["--mount", f"build=local:{tmp_path / 'file'}"], "not an existing directory"),
        "bad name": (["--mount", f"Build=local:{root}"], "the name must match"),
        "duplicate name": (["--mount", mount, "--mount", f"build=local:{tmp_path}"], "given twice"),
        "other provider": (["--mount", "build=docker:/x"], "expected NAME=local:ROOT"),
    }


CASES = [
    "non-loopback",
    "missing root",
    "relative root",
    "file as root",
    "bad name",
    "duplicate name",
    "other provider",
]


def serve_refused(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(THREADLINE), "serve", "--port", "0", "--store", "memory", *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )


@pytest.mark.parametrize("case", CASES)
def test_a_refused_mount_configuration_exits_2_with_its_reason(tmp_path: Path, case: str) -> None:
    args, words = refusals(tmp_path)[case]
    done = serve_refused([*args, *ROOT_FLAGS])
    assert done.returncode == 2, done.stderr
    assert done.stdout == "", "it never listened"
    assert words in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("case", CASES)
def test_thread_line_server_refuses_the_same_configuration(tmp_path: Path, case: str) -> None:
    from server.agents import build_registry
    from server.app import ThreadlineServer
    from server.config import ConfigError, ServerConfig

    args, words = refusals(tmp_path)[case]
    fields: dict[str, Any] = {"port": 0, "store": "memory", "allow_root_shell": bool(ROOT_FLAGS)}
    mounts = [value for flag, value in itertools.pairwise(args) if flag == "--mount"]
    if "--host" in args:
        fields.update(host="0.0.0.0", insecure=True)
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        ThreadlineServer(ServerConfig(mounts=tuple(mounts), **fields), build_registry())


@pytest.mark.skipif(not ROOT_FLAGS, reason="the root refusal is tested only when the suite runs as root (CI)")
def test_as_root_a_mount_needs_allow_root_shell(tmp_path: Path) -> None:
    from server.agents import build_registry
    from server.app import ThreadlineServer
    from server.config import ConfigError, ServerConfig

    done = serve_refused(["--mount", f"build=local:{tmp_path}"])
    assert done.returncode == 2 and done.stdout == ""
    assert "--allow-root-shell" in done.stderr and "as root" in done.stderr, done.stderr
    with pytest.raises(ConfigError, match="--allow-root-shell"):
        ThreadlineServer(
            ServerConfig(port=0, store="memory", mounts=(f"build=local:{tmp_path}",)), build_registry()
        )


# -- C30, C31: the server stops its commands; a restarted server declines the old state ---------------------


async def test_sigterm_stops_a_live_command_and_its_children(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        command = "sleep 300 & echo $! > pids/child; echo $$ > pids/main; printf up; wait"
        async with grpc.aio.insecure_channel(server.address) as channel:
            _, result = await stream_run(harness_stub(channel), plan(exec_step(command)))
        [started] = results(result)
        assert started["status"]["phase"] == "running"
        main, child = server.pid("main"), server.pid("child")
        assert alive(main) and alive(child), "the command outlives its run"
        assert server.finish() == {"child": child, "main": main}
        assert not alive(main) and not alive(child)
        [closed] = server.records("mounts_closed")
        assert closed["commands_stopped"] >= 1
        assert str(server.root) not in "".join(server.logged.lines), "logs carry no path (§10.5)"


async def test_a_restarted_server_declines_the_old_state_and_lists_its_commands_as_missing(
    tmp_path: Path,
) -> None:
    with shell_server(tmp_path) as before:
        async with grpc.aio.insecure_channel(before.address) as channel:
            _, first = await stream_run(
                harness_stub(channel), plan(exec_step("echo $$ > pids/main; sleep 300"))
            )
        [started] = results(first)
        assert started["status"]["phase"] == "running" and alive(before.pid("main"))
        before.finish()
    old = entries(first.state)
    with shell_server(tmp_path) as after:  # the same mount name and root: only the incarnation differs
        async with grpc.aio.insecure_channel(after.address) as channel:
            events, second = await stream_run(
                harness_stub(channel),
                plan(
                    ("shell_info", {}),
                    ("shell_wait", {"process_id": started["process_id"], "timeout_seconds": 0}),
                ),
                state=first.state,
            )
        listed, stale = results(second)
        assert listed["ok"] is True and listed["processes"] == []
        assert listed["missing"] == [
            {"started_at": started["status"]["started_at"], "status": {"phase": "missing"}}
        ]
        assert stale["ok"] is False and stale["error"]["code"] == "environment_reference_unknown"
        assert stale["error"]["details"]["reason"] == "other_run"
        [(index, kind, payload)] = lifecycle(events, "environment_state_not_restored")
        assert (kind, payload) == (
            "state",
            {"type": "environment_state_not_restored", "alias": "build", "reason": "backend_changed"},
        )
        kinds = [event.WhichOneof("event") for event in events]
        assert kinds.index("run_started") < index < kinds.index("tool_call"), "right after run_started (§5.5)"
        assert entries(second.state) == old, (
            "the old entry is carried byte-identical until a new command is retained"
        )
        after.finish()


# -- C32: decode errors of the restored entry; foreign entries carried -------------------------------------------


async def test_a_malformed_own_entry_is_invalid_argument_at_its_index(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            malformed = await state_with(stub, FOREIGN, own_entry('{"backend": "nope"}'))
            unsupported = await state_with(
                stub, FOREIGN, own_entry(json.dumps({"any": "thing"}), version="2")
            )
            for state, status, reason, leaf in (
                (malformed, grpc.StatusCode.INVALID_ARGUMENT, "ENVIRONMENT_STATE_INVALID", "state_json"),
                (
                    unsupported,
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "ENVIRONMENT_STATE_VERSION_UNSUPPORTED",
                    "state_version",
                ),
            ):
                call = stub.StreamRun(
                    harness_service_pb2.StreamRunRequest(spec=spec(plan(exec_step("touch ran")), state=state))
                )
                seen: list[Any] = []
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    async for response in call:
                        seen.append(response)
                assert seen == [], "refused before the run starts"
                code, got, metadata = refusal(caught.value)
                assert (code, got, metadata["mount"]) == (status, reason, "build")
                if leaf == "state_version":
                    assert (metadata["received"], metadata["supported"]) == ("2", "1")
                assert bad_request_fields(caught.value) == [
                    f"spec.previous_state.environment_states[1].{leaf}"
                ]
        assert not (server.root / "ran").exists(), "no model request, no command"
        server.finish()


async def test_foreign_entries_are_carried_byte_identical_through_a_run(tmp_path: Path) -> None:
    foreign_here = state_pb2.EnvironmentState(
        mount_name="build", provider_key="docker", state_version="1", state_json='{"container":"beef"}'
    )
    with shell_server(tmp_path) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            state = await state_with(stub, FOREIGN, foreign_here)
            events, result = await stream_run(stub, plan(exec_step("printf hi")), state=state)
        [done] = results(result)
        assert done["ok"] is True and "process_id" not in done and done["stdout"]["text"] == "hi"
        assert entries(result.state) == entries(state), "not ours: never interpreted, never rewritten (§9.2)"
        assert lifecycle(events, "environment_state_not_restored") == [], "a foreign entry is no diagnostic"
        server.finish()


async def test_a_client_tool_named_like_a_shell_tool_is_refused_before_the_run(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            tool = run_pb2.ClientTool(name="shell_exec", parameters_json_schema='{"type": "object"}')
            request = harness_service_pb2.StreamRunRequest(spec=spec(plan(), client_tools=[tool]))
            seen: list[Any] = []
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                async for response in stub.StreamRun(request):
                    seen.append(response)
        assert seen == []
        code, reason, _ = refusal(caught.value)
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "CLIENT_TOOL_INVALID")
        server.finish()


# -- over-gRPC rules of issue 14 -------------------------------------------------------------------------------


async def test_a_forked_state_cannot_reach_its_parents_commands(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        command = f"echo $$ > pids/main; printf parent; {wait_for(server.root, 'go')}; printf ' after'"
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            _, parent = await stream_run(stub, plan(exec_step(command)))
            [started] = results(parent)
            forked = (await stub.ForkState(harness_service_pb2.ForkStateRequest(state=parent.state))).state
            assert forked.thread_id != parent.state.thread_id and entries(forked) == []
            events, branch = await stream_run(
                stub,
                plan(
                    ("shell_info", {}),
                    ("shell_wait", {"process_id": started["process_id"], "timeout_seconds": 0}),
                ),
                state=forked,
            )
            listed, stale = results(branch)
            assert listed["ok"] is True and listed["processes"] == [] and not listed.get("missing")
            assert stale["error"]["code"] == "environment_reference_unknown"
            assert lifecycle(events, "environment_state_not_restored") == [], "no state, nothing to decline"
            assert entries(branch.state) == []
            assert alive(server.pid("main")), "the branch's run left the parent's command alone"

            (server.root / "go").touch()
            _, again = await stream_run(
                stub,
                plan(("shell_info", {}), ("shell_wait", {"process_id": "$0:processes.0.process_id"})),
                state=parent.state,
            )
        listed, read = results(again)
        [item] = listed["processes"]
        assert item["origin"] == "earlier_run"
        assert read["stdout"]["text"] == "parent after" and read["status"]["exit_code"] == 0
        server.finish()


async def test_a_cwd_outside_the_root_is_refused_over_the_wire(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with shell_server(tmp_path) as server:
        (server.root / "sub").mkdir()
        (server.root / "out").symlink_to(outside, target_is_directory=True)
        async with grpc.aio.insecure_channel(server.address) as channel:
            _, result = await stream_run(
                harness_stub(channel),
                plan(
                    exec_step("touch escaped; pwd", cwd=".."),
                    exec_step("touch escaped; pwd", cwd="out"),
                    exec_step("touch escaped; pwd", cwd="sub/../.."),
                    exec_step("pwd", cwd="sub"),
                ),
            )
        *refused, inside = results(result)
        for answer in refused:
            assert answer["ok"] is False and answer["error"]["code"] == "environment_path_outside_mount", (
                answer
            )
        assert inside["ok"] is True and inside["stdout"]["text"] == f"{server.root / 'sub'}\n"
        assert not (outside / "escaped").exists() and not (tmp_path / "escaped").exists(), "nothing ran"
        server.finish()


async def test_output_larger_than_the_window_keeps_the_newest_bytes(tmp_path: Path) -> None:
    window = 1024 * 1024  # the default retained_bytes_per_stream
    produced = "".join(f"{n}\n" for n in range(1, 250_001)).encode()  # `seq 1 250000`: 1.56 MiB, no period
    total = len(produced)
    assert total > window * 3 // 2
    with shell_server(tmp_path) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            _, result = await stream_run(
                harness_stub(channel),
                plan(
                    exec_step("echo $$ > pids/main; seq 1 250000"),
                    ("shell_wait", {"process_id": "$0:process_id", "stdout_offset": 0}),
                    ("shell_wait", {"process_id": "$0:process_id", "stdout_offset": total - 100}),
                ),
            )
        started, at_zero, at_end = results(result)
        assert started["ok"] is True and "process_id" in started, "larger than a page: a reference (§4.3)"
        page = at_zero["stdout"]
        assert page["requested_offset"] == 0
        assert (
            page["start_offset"] == page["available_start"] == page["omitted_before_bytes"] == total - window
        )
        assert page["available_end"] == total and page["more_available"] and page["producer_complete"]
        text = page["text"].encode()
        assert text and text == produced[total - window : total - window + len(text)]
        assert page["next_offset"] == total - window + len(text)
        assert at_zero["status"]["phase"] == "exited" and at_zero["status"]["exit_code"] == 0
        tail = at_end["stdout"]
        assert (tail["start_offset"], tail["omitted_before_bytes"], tail["next_offset"]) == (
            total - 100,
            0,
            total,
        )
        assert tail["text"].encode() == produced[-100:] and tail["text"].endswith("249999\n250000\n")
        server.finish()


async def test_a_run_cancelled_mid_wait_leaves_the_command_running(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        command = f"echo $$ > pids/main; printf early; {wait_for(server.root, 'go')}; printf late"
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            request = harness_service_pb2.StreamRunRequest(
                spec=spec(
                    plan(
                        exec_step(command),
                        ("shell_wait", {"process_id": "$0:process_id", "timeout_seconds": 300}),
                    ),
                    checkpoints=True,
                )
            )
            call = stub.StreamRun(request)
            candidate: state_pb2.HarnessState | None = None
            run_id = ""
            async for response in call:
                run_id = response.event.run_id
                kind = response.event.WhichOneof("event")
                if kind == "checkpoint_candidate":
                    candidate = response.event.checkpoint_candidate.state
                elif kind == "tool_call" and response.event.tool_call.tool_name == "shell_wait":
                    break
            else:
                raise AssertionError("the stream ended before shell_wait ran")
            call.cancel()
            assert candidate is not None and [e[0] for e in entries(candidate)] == ["build"]
            # The server has closed the run (its log says so) before the command may finish.
            until(
                lambda: [r["status"] for r in server.records("run_finished") if r["run_id"] == run_id],
                "run end",
            )
            [finished] = [r for r in server.records("run_finished") if r["run_id"] == run_id]
            assert finished["status"] == "client_cancelled"
            assert alive(server.pid("main")), "cancelling the run kills nothing (§4.3, §8)"

            (server.root / "go").touch()
            _, later = await stream_run(
                stub,
                plan(
                    ("shell_info", {}),
                    ("shell_wait", {"process_id": "$0:processes.0.process_id", "stdout_offset": 5}),
                ),
                state=candidate,
            )
        listed, read = results(later)
        [item] = listed["processes"]
        assert item["origin"] == "earlier_run" and item["command"] == command
        assert read["stdout"]["text"] == "late" and read["stdout"]["start_offset"] == 5
        assert read["status"]["phase"] == "exited" and read["status"]["exit_code"] == 0
        server.finish()


# -- ThreadService: the thread's next run gets the state from the store -------------------------------------------


async def test_a_thread_run_finds_the_command_its_previous_run_started(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        command = f"echo $$ > pids/main; printf early; {wait_for(server.root, 'go')}; printf late"
        async with grpc.aio.insecure_channel(server.address) as channel:
            threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
            thread = await create_thread(threads, agent="shell")
            first = await run_thread(threads, thread.thread_id, text=plan(exec_step(command)))
            [started] = results(first.result)
            assert started["status"]["phase"] == "running" and alive(server.pid("main"))
            head = (await get_thread(threads, thread.thread_id, full=True)).head.state
            [(mount, provider, _, _)] = entries(head)
            assert (mount, provider) == ("build", "threadline_local"), "the committed head carries the entry"

            (server.root / "go").touch()
            events = await stream_thread(
                threads,
                thread.thread_id,
                text=plan(
                    ("shell_info", {}),
                    ("shell_wait", {"process_id": "$0:processes.0.process_id", "stdout_offset": 5}),
                ),
            )
        [terminal] = [event.result for event in events if event.WhichOneof("event") == "result"]
        listed, read = results(terminal)
        [item] = listed["processes"]
        assert item["origin"] == "earlier_run" and item["process_id"] != started["process_id"]
        assert read["stdout"]["text"] == "late" and read["status"]["exit_code"] == 0
        assert lifecycle(events, "environment_state_not_restored") == []
        server.finish()


async def test_an_imported_malformed_entry_is_refused_at_its_index_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    with shell_server(tmp_path) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            thread_id = fresh_thread_id()
            state = await state_with(
                harness_stub(channel), FOREIGN, own_entry('{"scope": 1}'), thread_id=thread_id
            )
            threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await create_thread(threads, thread_id=thread_id, agent="shell", state=state)
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await get_thread(threads, thread_id)
        code, reason, metadata = refusal(caught.value)
        assert (code, reason, metadata["mount"]) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "ENVIRONMENT_STATE_INVALID",
            "build",
        )
        assert bad_request_fields(caught.value) == ["state.environment_states[1].state_json"]
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        server.finish()


async def test_a_stored_malformed_entry_fails_the_thread_run_without_a_field(tmp_path: Path) -> None:
    # Stored by a server whose agent has no mount of that name (the entry is not its to check), then run
    # by one whose agent has: the state comes from the store, so the refusal names no request field.
    store = ("--store", f"sqlite:{tmp_path / 'threads.sqlite3'}")
    thread_id = fresh_thread_id()
    with shell_server(tmp_path, *store, mount=False) as first:
        async with grpc.aio.insecure_channel(first.address) as channel:
            state = await state_with(
                harness_stub(channel), FOREIGN, own_entry('{"scope": 1}'), thread_id=thread_id
            )
            threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
            await create_thread(threads, thread_id=thread_id, agent="shell", state=state)
        first.finish()
    with shell_server(tmp_path, *store) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            threads = thread_service_pb2_grpc.ThreadServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await run_thread(threads, thread_id, text=plan(exec_step("touch ran")))
        code, reason, metadata = refusal(caught.value)
        assert (code, reason, metadata["mount"]) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "ENVIRONMENT_STATE_INVALID",
            "build",
        )
        assert bad_request_fields(caught.value) is None, (
            "the state came from the store, not from a request field"
        )
        assert not (server.root / "ran").exists()
        server.finish()


# -- the demo agent's words ------------------------------------------------------------------------------------


def tool_returns(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The shell tools' returns as the stream carried them: (tool name, decoded content)."""
    return [
        (event.tool_result.tool_name, json.loads(event.tool_result.content_json))
        for event in events
        if event.WhichOneof("event") == "tool_result"
    ]


async def test_the_demo_agent_words_start_and_rediscover_a_command(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        command = f"echo $$ > pids/main; printf early; {wait_for(server.root, 'go')}; printf late"
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = harness_stub(channel)
            events, first = await stream_run(stub, f"shell-bg {command}", agent="default")
            [(name, started)] = tool_returns(events)
            assert (
                name == "shell_exec" and started["status"]["phase"] == "running" and "process_id" in started
            )
            assert alive(server.pid("main"))
            (server.root / "go").touch()
            events, second = await stream_run(stub, "shell-wait 5", agent="default", state=first.state)
        [(info_name, listed), (wait_name, read)] = tool_returns(events)
        assert (info_name, wait_name) == ("shell_info", "shell_wait")
        assert [item["origin"] for item in listed["processes"]] == ["earlier_run"]
        assert read["stdout"]["start_offset"] == 5 and read["stdout"]["text"] == "late"
        assert second.status == run_pb2.RUN_STATUS_COMPLETED and "late" in json.loads(second.output_json)
        server.finish()


async def test_stdin_and_signals_over_the_wire(tmp_path: Path) -> None:
    with shell_server(tmp_path) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            _, result = await stream_run(
                harness_stub(channel),
                plan(
                    exec_step("echo $$ > pids/cat; cat", keep_stdin_open=True),
                    ("shell_input", {"process_id": "$0:process_id", "data": "hello\n", "close_stdin": True}),
                    ("shell_wait", {"process_id": "$0:process_id"}),
                    exec_step("echo $$ > pids/sleeper; exec sleep 300"),
                    ("shell_signal", {"process_id": "$3:process_id", "signal": "kill"}),
                    ("shell_wait", {"process_id": "$3:process_id"}),
                ),
            )
        cat, wrote, echoed, sleeper, signalled, killed = results(result)
        assert cat["stdin_open"] is True and cat["status"]["phase"] == "running"
        assert wrote["ok"] is True and wrote["accepted_bytes"] == 6 and wrote["stdin_open"] is False
        assert echoed["stdout"]["text"] == "hello\n" and echoed["status"]["exit_code"] == 0
        assert sleeper["status"]["phase"] == "running" and signalled["accepted"] is True
        assert (killed["status"]["phase"], killed["status"]["signal"]) == ("signaled", "kill")
        assert entries(result.state)[0][0] == "build"
        server.finish()


async def test_a_server_started_ignoring_int_and_quit_still_ends_commands_with_them(tmp_path: Path) -> None:
    """`threadline serve &` in a script starts with SIGINT and SIGQUIT ignored; its commands must not
    inherit that: `shell_signal interrupt` and a SIGQUIT end them (issue 23)."""
    quiet = "ulimit -c 0; echo $$ > pids/{}; exec sleep 300"  # no core file from the SIGQUIT
    with shell_server(tmp_path, ignoring=("INT", "QUIT")) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            _, result = await stream_run(
                harness_stub(channel),
                plan(
                    exec_step(quiet.format("interrupted")),
                    exec_step(quiet.format("quit")),
                    ("shell_signal", {"process_id": "$0:process_id", "signal": "interrupt"}),
                    exec_step("kill -s QUIT $(cat pids/quit)"),
                    ("shell_wait", {"process_id": "$0:process_id"}),
                    ("shell_wait", {"process_id": "$1:process_id"}),
                ),
            )
        first, second, signalled, sent, interrupted, quit = results(result)
        assert first["status"]["phase"] == second["status"]["phase"] == "running"
        assert signalled["accepted"] is True and sent["status"]["exit_code"] == 0
        assert (interrupted["status"]["phase"], interrupted["status"]["signal"]) == ("signaled", "interrupt")
        assert (quit["status"]["phase"], quit["status"]["signal"]) == ("signaled", "other")
        server.finish()
