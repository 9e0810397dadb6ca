"""`examples/host.py` works as its docstring says, against the real server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import threadline_client as tl

HOST = Path(__file__).resolve().parents[1] / "examples" / "host.py"
Host = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def host(server_addr: str, server_token: str | None) -> Host:
    """Run the example host against the suite's server: `host(*args, stdin="y\\n")`."""
    token = ["--token", server_token] if server_token else []

    def run(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return run_host(server_addr, *token, *args, stdin=stdin, cwd=cwd)

    return run


def run_host(
    server_addr: str, *args: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", str(HOST), "--server", server_addr, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_approve_then_deny_on_the_terminal(host: Host, tmp_path: Path) -> None:
    state = tmp_path / "thread.json"

    approved = host("--state", str(state), "delete notes.txt", stdin="y\n")
    assert approved.returncode == 0, approved.stderr
    assert "Approve delete_file" in approved.stdout
    assert "Tool results: delete_file: Deleted notes.txt." in approved.stdout
    thread_id = json.loads(state.read_text())["thread_id"]

    denied = host("--state", str(state), "delete b.txt", stdin="keep it\n")
    assert denied.returncode == 0, denied.stderr
    assert "Tool results: delete_file: keep it" in denied.stdout
    assert json.loads(state.read_text())["thread_id"] == thread_id
    assert not (tmp_path / "thread.json.pending.json").exists()


def test_the_host_runs_its_own_client_tool(host: Host, tmp_path: Path) -> None:
    state = tmp_path / "thread.binpb"

    done = host("--state", str(state), 'client:word_count {"text": "one two three"}')

    assert done.returncode == 0, done.stderr
    assert "Tool results: word_count: 3" in done.stdout
    assert tl.load_state(state.read_bytes()).thread_id.startswith("thread_")


@pytest.mark.anyio
async def test_a_batch_left_pending_is_answered_in_a_later_session(
    host: Host, client: tl.Client, tmp_path: Path
) -> None:
    state = tmp_path / "thread.json"
    first = await client.run(tl.RunSpec(text="delete later.txt"))
    assert first.state is not None and first.deferred is not None
    state.write_bytes(tl.dump_state(first.state, format="json"))
    (tmp_path / "thread.json.pending.json").write_text(tl.message_to_json(first.deferred))

    later = host("--state", str(state), stdin="y\n")

    assert later.returncode == 0, later.stderr
    assert "Tool results: delete_file: Deleted later.txt." in later.stdout
    assert not (tmp_path / "thread.json.pending.json").exists()


def test_fork_into_a_new_file(host: Host, tmp_path: Path) -> None:
    source, branch = tmp_path / "a.json", tmp_path / "b.json"
    assert host("--state", str(source), "count").returncode == 0

    forked = host("--state", str(source), "--fork", str(branch), "count")

    assert forked.returncode == 0, forked.stderr
    assert "Tool results: count: 2" in forked.stdout
    assert json.loads(branch.read_text())["thread_id"] != json.loads(source.read_text())["thread_id"]


def test_a_host_managed_child_runs_here_and_answers_its_parent(host: Host, tmp_path: Path) -> None:
    state = tmp_path / "lead.json"

    done = host("--state", str(state), "--agent", "demo-lead", "ask-child delete old.txt", stdin="y\n")

    assert done.returncode == 0, done.stderr
    assert "demo-lead asks for child reviewer on thread_" in done.stderr
    assert "Approve delete_file" in done.stdout  # the child's own approval, asked on the terminal
    (child_file,) = tmp_path.glob("lead.json.thread_*.json")
    child = tl.load_state(child_file.read_bytes(), format="json")
    assert f"[host] child {child.thread_id} ended COMPLETED" in done.stderr
    answer = {
        "execution_id": child.thread_id,
        "subagent": "reviewer",
        "status": "completed",
        "output": "Tool results: delete_file: Deleted old.txt.",
    }
    assert f"Tool results: delegate: {json.dumps(answer, separators=(',', ':'))}" in done.stdout
    assert json.loads(state.read_text())["thread_id"] != child.thread_id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lead.json", child_file.name]  # nothing pending


# --- --thread: the server keeps the thread, the host keeps nothing --------------------------------


def test_a_thread_driven_by_its_id_only(host: Host, tmp_path: Path) -> None:
    thread_id = f"thread_host{uuid.uuid4().hex[:12]}"

    approved = host("--thread", thread_id, "delete notes.txt", stdin="y\n", cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    assert f"[host] created {thread_id}" in approved.stderr
    assert "Approve delete_file" in approved.stdout
    assert "Tool results: delete_file: Deleted notes.txt." in approved.stdout

    # Later sessions find the thread by its ID: the counter lives in the server's thread.
    for expected in ("count: 1", "count: 2"):
        counted = host("--thread", thread_id, "count", cwd=tmp_path)
        assert counted.returncode == 0, counted.stderr
        assert f"[host] {thread_id} is at revision" in counted.stderr
        assert f"Tool results: {expected}" in counted.stdout
    tool = host("--thread", thread_id, 'client:word_count {"text": "one two three"}', cwd=tmp_path)
    assert tool.returncode == 0, tool.stderr
    assert "Tool results: word_count: 3" in tool.stdout
    assert list(tmp_path.iterdir()) == [], "the host wrote no state file"


@pytest.mark.anyio
async def test_a_thread_left_suspended_is_answered_in_a_later_session(host: Host, client: tl.Client) -> None:
    thread = await client.threads.create()
    first = await client.threads.run(thread.thread_id, text="delete later.txt")
    assert first.result.status == tl.RunStatus.SUSPENDED

    later = host("--thread", thread.thread_id, stdin="y\n")

    assert later.returncode == 0, later.stderr
    assert "1 deferred call(s) wait for an answer" in later.stderr
    assert "Tool results: delete_file: Deleted later.txt." in later.stdout
    after = await client.threads.get(thread.thread_id)
    assert after.status == tl.ThreadStatus.IDLE and after.revision > first.revision
    assert f"is now at revision {after.revision}" in later.stderr


def test_thread_mode_without_a_prompt_or_anything_pending(host: Host) -> None:
    idle = host("--thread", f"thread_host{uuid.uuid4().hex[:12]}")
    assert idle.returncode == 2
    assert "nothing is pending" in idle.stderr


# --- --join, --watch and --start: following a thread the server keeps ----------------------------


@pytest.mark.anyio
async def test_the_host_prints_a_joined_run(host: Host, client: tl.Client) -> None:
    thread = await client.threads.create()
    async with client.threads.stream(thread.thread_id, text="lookup threadline") as stream:
        events = [event async for event in stream]
    run_id = events[0].run_id

    joined = host("--thread", thread.thread_id, "--join", run_id)

    assert joined.returncode == 0, joined.stderr
    lines = joined.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [[str(e.sequence), tl.event_case(e)] for e in events]
    assert lines[-1] == f"{events[-1].sequence} result COMPLETED"
    assert f"[host] {thread.thread_id} is at revision {stream.revision}" in joined.stderr
    after = host("--thread", thread.thread_id, "--join", run_id, "--after", "2")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == lines[3:]


@pytest.mark.anyio
async def test_the_host_starts_a_background_turn_and_prints_its_events_and_result(
    host: Host, client: tl.Client
) -> None:
    thread_id = f"thread_host{uuid.uuid4().hex[:12]}"

    started = host("--thread", thread_id, "--start", "sleep 1")

    assert started.returncode == 0, started.stderr
    first, *lines = started.stdout.splitlines()
    assert first.startswith("started run-")
    run_id = first.removeprefix("started ")
    events = [e async for e in client.threads.join_run(thread_id, run_id=run_id)]
    assert [line.split()[:2] for line in lines] == [[str(e.sequence), tl.event_case(e)] for e in events]
    assert lines[-1] == f"{events[-1].sequence} result COMPLETED"
    thread = await client.threads.get(thread_id)
    assert f"[host] {thread_id} is at revision {thread.revision}" in started.stderr
    assert "runs in the background" in started.stderr
    refused = host("--thread", thread_id, "--start")
    assert refused.returncode == 2 and "--start needs --thread and a prompt" in refused.stderr


@pytest.mark.anyio
async def test_the_host_watches_a_thread_until_it_is_deleted(
    server_addr: str, server_token: str | None, client: tl.Client
) -> None:
    thread = await client.threads.create()
    watcher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-W",
        "error",
        str(HOST),
        "--server",
        server_addr,
        *(["--token", server_token] if server_token else []),
        "--thread",
        thread.thread_id,
        "--watch",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert watcher.stdout is not None
        snapshot = (await asyncio.wait_for(watcher.stdout.readline(), 60)).decode()
        assert snapshot.split()[1:] == ["SNAPSHOT", "IDLE", "revision", str(thread.revision)]
        outcome = await client.threads.run(thread.thread_id, text="hello")
        seen: list[str] = []
        while not seen or "RUN_ENDED" not in seen[-1]:  # delete only once the watch saw the run end
            seen.append((await asyncio.wait_for(watcher.stdout.readline(), 60)).decode())
            assert seen[-1], "the watcher ended early"
        await client.threads.delete(thread.thread_id)
        rest, err = await asyncio.wait_for(watcher.communicate(), 60)
        out = "".join(seen).encode() + rest
    finally:
        if watcher.returncode is None:
            watcher.kill()
            await watcher.wait()
    assert watcher.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    kinds = {kind for line in lines for kind in line.split()[1].split(",")}
    assert {"RUN_STARTED", "COMMITTED", "RUN_ENDED"} <= kinds
    assert lines[-1].split()[2:] == ["IDLE", "revision", str(outcome.revision)]
    assert f"[host] {thread.thread_id} was deleted" in err.decode()
