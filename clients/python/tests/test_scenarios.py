"""Threads driven end to end through `threadline_client` against a real `threadline serve`.

The server's embedded "default" agent has a scripted model (`server/demo.py`): `delete <path>`
asks for approval, `lookup <topic>` calls a plain tool, `count` bumps a counter in capability
state, `client:<name> {json}` calls a client tool the host declared, and anything else is echoed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import anyio
import grpclib.client
import grpclib.config
import grpclib.events
import pytest
import threadline_client as tl
from threadline_client import v1
from threadline_client._client import _parse_target

pytestmark = pytest.mark.anyio

VECTORS = Path(__file__).resolve().parents[3] / "tests" / "vectors"


class LoggedServer(Protocol):
    """The `logged_server` fixture of conftest.py: a server whose run log lines the test reads."""

    addr: str

    async def run_logged(self, event: str, request_id: str, *, within: float = ...) -> dict[str, Any]: ...


# --- continue and fork ---------------------------------------------------------------------------


async def test_continue_a_thread_twice(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="hello"))
    assert first.status == tl.RunStatus.COMPLETED
    assert tl.output(first) == "You said: hello"
    assert first.state is not None and first.state.thread_id == first.thread_id

    second = await client.run(tl.RunSpec(text="hello again", previous_state=first.state))
    third = await client.run(tl.RunSpec(text="and again", previous_state=second.state))

    assert first.thread_id == second.thread_id == third.thread_id
    assert len({first.run_id, second.run_id, third.run_id}) == 3
    assert all(r.run_id.startswith("run-") for r in (first, second, third))
    counts = [r.state.message_history.message_count for r in (first, second, third)]  # type: ignore[union-attr]
    assert counts[0] < counts[1] < counts[2]
    assert tl.output(third) == "You said: and again"


async def test_a_persisted_state_continues_the_thread(client: tl.Client, tmp_path: Path) -> None:
    """The host stores the envelope in either form and continues from what it stored."""
    first = await client.run(tl.RunSpec(text="count"))
    assert first.state is not None
    for form in ("binary", "json"):
        path = tmp_path / f"state.{form}"
        path.write_bytes(tl.dump_state(first.state, format=form))
        loaded = tl.load_state(path.read_bytes(), format=form)
        assert loaded == first.state
        again = await client.run(tl.RunSpec(text="count", previous_state=loaded))
        assert again.thread_id == first.thread_id
        # The counter lives in capability state, carried by the envelope: 1 -> 2 on each branch.
        assert tl.output(again) == "Tool results: count: 2"


async def test_fork_gives_a_new_thread_with_the_same_history(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="lookup grpc"))
    assert first.state is not None

    forked = await client.fork_state(first.state)

    assert forked.thread_id != first.thread_id
    assert forked.thread_id.startswith("thread_")
    assert forked.message_history == first.state.message_history
    assert forked.capability_states == first.state.capability_states

    on_fork = await client.run(tl.RunSpec(text="hello", previous_state=forked))
    on_source = await client.run(tl.RunSpec(text="hello", previous_state=first.state))
    assert on_fork.thread_id == forked.thread_id
    assert on_source.thread_id == first.thread_id
    assert on_fork.state is not None and on_source.state is not None
    assert on_fork.state.message_history.data != first.state.message_history.data  # type: ignore[union-attr]


async def test_fork_to_a_chosen_id_and_not_onto_itself(client: tl.Client) -> None:
    state = await client.new_state(thread_id="thread_source")
    assert state.thread_id == "thread_source" and state.schema_version == "1"

    forked = await client.fork_state(state, thread_id="thread_branch")
    assert forked.thread_id == "thread_branch"

    with pytest.raises(tl.ThreadlineError) as caught:
        await client.fork_state(state, thread_id="thread_source")
    assert caught.value.status == tl.StatusCode.INVALID_ARGUMENT
    assert caught.value.reason == "FORK_THREAD_ID_CONFLICT"


# --- deferred calls ------------------------------------------------------------------------------


async def test_approval_suspends_then_approve_completes(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="delete notes.txt"))

    assert first.status == tl.RunStatus.SUSPENDED
    assert first.suspend_reason == v1.SuspendReason.DEFERRED
    assert first.deferred is not None and not first.deferred.calls
    (call,) = first.deferred.approvals
    assert call.kind == tl.DeferredKind.APPROVAL
    assert call.tool_name == "delete_file"
    assert tl.call_args(call) == {"path": "notes.txt"}
    assert tl.pending(first.deferred) == [call]

    second = await client.run(
        tl.RunSpec(previous_state=first.state, deferred_resume=tl.resume(first.deferred, [tl.approve(call)]))
    )

    assert second.status == tl.RunStatus.COMPLETED
    assert second.thread_id == first.thread_id
    assert tl.output(second) == "Tool results: delete_file: Deleted notes.txt."


async def test_deny_the_model_sees_the_denial(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="delete secrets.txt"))
    assert first.deferred is not None
    (call,) = first.deferred.approvals

    second = await client.run(
        tl.RunSpec(
            previous_state=first.state,
            deferred_resume=tl.resume(first.deferred, [tl.deny(call, "Not that file, please.")]),
        )
    )

    assert second.status == tl.RunStatus.COMPLETED
    assert tl.output(second) == "Tool results: delete_file: Not that file, please."


async def test_approval_with_overridden_arguments(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="delete important.txt"))
    assert first.deferred is not None
    (call,) = first.deferred.approvals
    answer = tl.approve(call, override_args={"path": "scratch.txt"}, answered_by="tests")

    second = await client.run(
        tl.RunSpec(previous_state=first.state, deferred_resume=tl.resume(first.deferred, [answer]))
    )

    assert tl.output(second) == "Tool results: delete_file: Deleted scratch.txt."


def add_numbers(a: float, b: float) -> float:
    """The host's own tool: the server never runs it."""
    return a + b


ADD_TOOL = tl.client_tool(
    "add_numbers",
    {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    description="Add two numbers.",
)


async def test_client_tool_executed_by_the_host(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text='client:add_numbers {"a": 2, "b": 40}', client_tools=[ADD_TOOL]))

    assert first.status == tl.RunStatus.SUSPENDED
    assert first.deferred is not None and not first.deferred.approvals
    (call,) = first.deferred.calls
    assert call.kind == tl.DeferredKind.EXTERNAL
    assert call.target_identity == "tool/threadline.client/add_numbers"

    value = add_numbers(**tl.call_args(call))
    second = await client.run(
        tl.RunSpec(
            previous_state=first.state,
            client_tools=[ADD_TOOL],  # declared again: the server keeps nothing between runs
            deferred_resume=tl.resume(first.deferred, [tl.external_result(call, value)]),
        )
    )

    assert second.status == tl.RunStatus.COMPLETED
    assert tl.output(second) == "Tool results: add_numbers: 42"


async def test_an_incomplete_resume_is_rejected_before_the_run(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="delete notes.txt"))
    assert first.deferred is not None

    with pytest.raises(tl.ThreadlineError) as caught:
        await client.run(
            tl.RunSpec(previous_state=first.state, deferred_resume=tl.resume(first.deferred, []))
        )

    assert caught.value.status == tl.StatusCode.INVALID_ARGUMENT
    assert caught.value.reason == "DEFERRED_RESULTS_INCOMPLETE"
    assert caught.value.domain == "threadline"


async def test_a_client_tool_clashing_with_the_agent_is_rejected(client: tl.Client) -> None:
    clash = tl.client_tool("lookup", {"type": "object", "properties": {}})

    with pytest.raises(tl.ThreadlineError) as caught:
        await client.run(tl.RunSpec(text="hello", client_tools=[clash]))

    assert caught.value.reason == "CLIENT_TOOL_INVALID"


# --- streaming -----------------------------------------------------------------------------------


async def test_stream_checkpoint_candidates_arrive_before_the_result(client: tl.Client) -> None:
    events: list[tl.RunEvent] = []
    async with client.stream_run(tl.RunSpec(text="lookup threadline", checkpoints=True)) as stream:
        async for event in stream:
            events.append(event)

    cases = [tl.event_case(e) for e in events]
    assert [e.sequence for e in events] == list(range(len(events)))
    assert cases[0] == "run_started"
    assert cases[-1] == "result" and cases.count("result") == 1
    candidates = [i for i, case in enumerate(cases) if case == "checkpoint_candidate"]
    assert candidates and max(candidates) < len(cases) - 1
    assert {"tool_call", "tool_result", "part_delta"} <= set(cases)

    result = stream.result
    assert result is not None and result is events[-1].result
    assert result.status == tl.RunStatus.COMPLETED
    assert all(e.thread_id == result.thread_id and e.run_id == result.run_id for e in events)
    for i in candidates:
        candidate = events[i].checkpoint_candidate
        assert candidate is not None and candidate.state is not None
        assert candidate.state.thread_id == result.thread_id
    # The last candidate is a checkpoint the host could continue from.
    last = events[candidates[-1]].checkpoint_candidate
    assert last is not None and last.state is not None
    validated = await client.validate_state(last.state)
    assert validated.state.thread_id == result.thread_id


async def test_stream_without_checkpoints_has_no_candidates(client: tl.Client) -> None:
    result = await client.stream_run(tl.RunSpec(text="hello")).collect()
    assert result.status == tl.RunStatus.COMPLETED
    assert tl.output(result) == "You said: hello"


async def test_stream_rejection_raises_while_iterating(client: tl.Client) -> None:
    stream = client.stream_run(tl.RunSpec(text="hello", agent="no-such-agent"))
    with pytest.raises(tl.ThreadlineError) as caught:
        async for _ in stream:
            pass
    assert caught.value.reason == "AGENT_UNKNOWN"
    assert stream.result is None


async def test_leaving_a_stream_early_cancels_it(logged_server: LoggedServer) -> None:
    request_id = f"leave-early-{uuid.uuid4().hex}"
    async with tl.Client(logged_server.addr, timeout=60.0) as client:
        async with client.stream_run(tl.RunSpec(text="sleep 30", request_id=request_id)) as stream:
            async for event in stream:
                assert tl.event_case(event) == "run_started"
                break
        # The server cancelled the run (it would sleep 30 s and finish "completed" otherwise).
        finished = await logged_server.run_logged("run_finished", request_id, within=20.0)
        assert finished["status"] == "client_cancelled"
        # The connection is still usable afterwards.
        assert (await client.run(tl.RunSpec(text="hello"))).status == tl.RunStatus.COMPLETED


async def test_cancelling_the_caller_cancels_the_call(logged_server: LoggedServer) -> None:
    request_id = f"cancel-caller-{uuid.uuid4().hex}"
    raised: list[BaseException] = []

    async def call(client: tl.Client) -> None:
        try:
            await client.run(tl.RunSpec(text="sleep 30", request_id=request_id))
        except BaseException as exc:
            raised.append(exc)
            raise

    async with tl.Client(logged_server.addr, timeout=60.0) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, client)
            await logged_server.run_logged("run_started", request_id)  # the run is under way
            tg.cancel_scope.cancel()
        # A cancellation stays a cancellation, never a ThreadlineError.
        assert [type(exc) for exc in raised] == [anyio.get_cancelled_exc_class()]
        finished = await logged_server.run_logged("run_finished", request_id, within=20.0)
        assert finished["status"] == "client_cancelled"
        assert (await client.run(tl.RunSpec(text="hello"))).status == tl.RunStatus.COMPLETED


async def test_a_thread_id_chosen_with_new_state(client: tl.Client) -> None:
    state = await client.new_state(thread_id="thread_hostchosen")
    result = await client.run(tl.RunSpec(text="hello", previous_state=state))
    assert result.thread_id == "thread_hostchosen"

    with pytest.raises(tl.ThreadlineError) as caught:
        await client.new_state(thread_id="not a valid id!")
    assert caught.value.reason == "STATE_INVALID"


async def test_a_call_deadline_raises_deadline_exceeded(client: tl.Client) -> None:
    with pytest.raises(tl.ThreadlineError) as caught:
        await client.run(tl.RunSpec(text="sleep 10"), timeout=0.5)
    assert caught.value.status == tl.StatusCode.DEADLINE_EXCEEDED


# --- packed streams (StreamRunRequest.max_events_per_message) ------------------------------------


async def test_packed_stream_yields_what_one_event_per_message_does(
    client: tl.Client, server_addr: str, server_token: str | None
) -> None:
    spec = tl.RunSpec(text="lookup threadline", checkpoints=True)
    single = tl.Client(server_addr, token=server_token, timeout=60.0, max_events_per_message=0)
    async with single, single.stream_run(spec) as one_stream:
        one_each = [event async for event in one_stream]
    async with client.stream_run(spec) as stream:  # the default: up to 64 per response
        packed = [event async for event in stream]

    assert [tl.event_case(e) for e in packed] == [tl.event_case(e) for e in one_each]
    for events in (one_each, packed):
        assert [e.sequence for e in events] == list(range(len(events)))
        assert tl.event_case(events[-1]) == "result"
        assert [tl.event_case(e) for e in events].count("result") == 1
    assert stream.result is not None and stream.result is packed[-1].result
    assert one_each[-1].result is not None
    assert tl.output(stream.result) == tl.output(one_each[-1].result)


LONG_PROMPT = "x" * 16_000
"""Echoed back as "You said: " + prompt: the first characters in `part_start`, then ~2 000 deltas."""


def _echoed_text(events: list[tl.RunEvent]) -> str:
    return "".join(
        (e.part_start.content if e.part_start else "") + (e.part_delta.content_delta if e.part_delta else "")
        for e in events
    )


async def test_a_paused_reader_gets_every_event_once_and_in_order(client: tl.Client) -> None:
    async with client.stream_run(tl.RunSpec(text=LONG_PROMPT)) as stream:
        events = [await anext(stream)]
        await anyio.sleep(1)  # the server may pack what it produces meanwhile
        events += [event async for event in stream]

    assert [e.sequence for e in events] == list(range(len(events)))
    assert tl.event_case(events[-1]) == "result" and stream.result is events[-1].result
    assert _echoed_text(events) == "You said: " + LONG_PROMPT
    assert tl.output(stream.result) == "You said: " + LONG_PROMPT


async def test_a_paused_reader_behind_a_small_receive_window(
    server_addr: str, server_token: str | None
) -> None:
    """A stream that really falls behind: the server fills whole responses while nobody reads.

    grpclib's default 4 MiB receive window holds this whole run, so the server is never held back.
    `Client` cannot pass a channel `Configuration`, so this builds the `RunStream` on a grpclib
    channel with the smallest window HTTP/2 allows, and counts the responses on the way in.
    """
    host, port, _ = _parse_target(server_addr)
    window = grpclib.config.Configuration(
        http2_connection_window_size=65_535, http2_stream_window_size=65_535
    )
    channel = grpclib.client.Channel(host, port, config=window)
    sizes: list[int] = []

    async def counted(responses: AsyncIterator[v1.StreamRunResponse]) -> AsyncIterator[v1.StreamRunResponse]:
        async for response in responses:
            sizes.append(len(response.events) if response.event is None else 1)
            yield response

    request = v1.StreamRunRequest(spec=tl.RunSpec(text=LONG_PROMPT), max_events_per_message=64)
    metadata = {"authorization": f"Bearer {server_token}"} if server_token else None
    try:
        calls = v1.HarnessServiceStub(channel).stream_run(request, timeout=60.0, metadata=metadata)
        async with tl.RunStream(counted(calls)) as stream:
            events = [await anext(stream)]
            await anyio.sleep(1)
            events += [event async for event in stream]
    finally:
        channel.close()

    assert sum(sizes) == len(events)
    assert max(sizes) == 64, "responses queued behind the window fill up to the limit"
    assert [e.sequence for e in events] == list(range(len(events)))
    assert tl.event_case(events[-1]) == "result" and stream.result is events[-1].result
    assert _echoed_text(events) == "You said: " + LONG_PROMPT


@pytest.mark.parametrize(
    ("kwargs", "sent"),
    [
        ({}, 64),
        ({"max_events_per_message": 0}, 0),
        ({"max_events_per_message": 1}, 1),
        ({"max_events_per_message": 300}, 300),
    ],
    ids=["default", "zero", "one", "above-the-server-limit"],
)
async def test_stream_run_sends_max_events_per_message(
    server_addr: str, server_token: str | None, kwargs: dict[str, int], sent: int
) -> None:
    """What goes on the wire, seen through grpclib's own channel events."""
    requests: list[Any] = []
    responses: list[v1.StreamRunResponse] = []

    async def on_send(event: grpclib.events.SendMessage) -> None:
        requests.append(event.message)

    async def on_receive(event: grpclib.events.RecvMessage) -> None:
        responses.append(event.message)

    async with tl.Client(server_addr, token=server_token, timeout=60.0, **kwargs) as client:
        channel = client._channel  # the SDK's real connection; grpclib reports every message on it
        assert channel is not None
        grpclib.events.listen(channel, grpclib.events.SendMessage, on_send)
        grpclib.events.listen(channel, grpclib.events.RecvMessage, on_receive)
        result = await client.stream_run(tl.RunSpec(text="hello there, several words")).collect()

    assert result.status == tl.RunStatus.COMPLETED
    (request,) = requests
    assert isinstance(request, v1.StreamRunRequest)
    assert request.max_events_per_message == sent
    assert responses
    if sent > 1:  # the server answers in the form the request asked for
        assert all(r.event is None and r.events for r in responses)
    else:
        assert all(r.event is not None and not r.events for r in responses)


# --- envelopes and versions ----------------------------------------------------------------------


async def test_unsupported_schema_version_is_rejected(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="hello"))
    assert first.state is not None
    future = tl.load_state(tl.dump_state(first.state))
    future.schema_version = "999"

    for call in (
        client.validate_state(future),
        client.run(tl.RunSpec(text="hello", previous_state=future)),
        client.stream_run(tl.RunSpec(text="hello", previous_state=future)).collect(),
    ):
        with pytest.raises(tl.ThreadlineError) as caught:
            await call
        error = caught.value
        assert error.status == tl.StatusCode.FAILED_PRECONDITION
        assert error.reason == "SCHEMA_VERSION_UNSUPPORTED"
        assert error.metadata["received"] == "999"
        assert error.metadata["supported"] == "1"


async def test_validate_state_returns_both_forms(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="count"))
    assert first.state is not None

    validated = await client.validate_state(first.state)
    assert validated.state == first.state
    assert json.loads(validated.state_json)["thread_id"] == first.thread_id

    from_json = await client.validate_state(validated.state_json)
    assert from_json.state == first.state
    assert from_json.state_json == validated.state_json


async def test_remaining_deferred(client: tl.Client) -> None:
    first = await client.run(tl.RunSpec(text="delete notes.txt"))
    assert first.deferred is not None and first.state is not None
    accepted = tl.resume(first.deferred, [tl.approve(first.deferred.approvals[0])])

    remaining = await client.remaining_deferred(accepted, first.state)
    # Nothing is answered in the suspended checkpoint's history yet: the whole batch remains (the
    # server may re-encode JSON text canonically, so compare decoded arguments).
    assert remaining is not None and remaining.requests is not None
    assert [c.tool_call_id for c in tl.pending(remaining.requests)] == ["call_1_delete_file"]
    assert [tl.call_args(c) for c in tl.pending(remaining.requests)] == [{"path": "notes.txt"}]
    assert remaining.results == accepted.results

    second = await client.run(tl.RunSpec(previous_state=first.state, deferred_resume=accepted))
    assert second.state is not None
    assert await client.remaining_deferred(accepted, second.state) is None


async def test_server_info(client: tl.Client) -> None:
    info = await client.get_server_info()

    assert "1" in info.schema_versions
    assert info.default_agent == "default"
    (agent,) = [a for a in info.agents if a.name == "default"]
    categories = {tool.name: tool.category for tool in agent.tools}
    assert categories["delete_file"] == v1.ToolCategory.REQUIRES_APPROVAL
    assert categories["lookup"] == v1.ToolCategory.PLAIN
    assert info.limits is not None and info.limits.max_message_bytes > 0


async def test_an_unreachable_server_is_unavailable() -> None:
    async with tl.Client("127.0.0.1:1", timeout=5.0) as client:
        with pytest.raises(tl.ThreadlineError) as caught:
            await client.get_server_info()
    assert caught.value.status == tl.StatusCode.UNAVAILABLE
    assert caught.value.reason == ""


# --- golden vectors ------------------------------------------------------------------------------


def _manifest() -> dict[str, str]:
    """Vector name -> fully qualified message type, from `tests/vectors/manifest.json`."""
    path = VECTORS / "manifest.json"
    if not path.is_file():
        return {}
    manifest: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    return manifest


def _vector_files() -> list[Path]:
    return sorted(
        p for p in VECTORS.rglob("*") if p.suffix in (".binpb", ".json") and p.name != "manifest.json"
    )


def _vector_cases() -> list[Any]:
    if not VECTORS.is_dir():
        return []
    return [
        pytest.param(name, VECTORS / f"{name}{suffix}", id=f"{name}{suffix}")
        for name in sorted(_manifest())
        for suffix in (".binpb", ".json")
    ]


def _message_type(full_name: str) -> type[Any]:
    package, _, name = full_name.rpartition(".")
    assert package == "threadline.v1", f"a vector of another package: {full_name}"
    cls: type[Any] = getattr(v1, name)
    return cls


@pytest.mark.skipif(not VECTORS.is_dir(), reason="tests/vectors does not exist yet")
def test_every_vector_is_in_the_manifest() -> None:
    names = {p.relative_to(VECTORS).as_posix().rsplit(".", 1)[0] for p in _vector_files()}
    assert names <= set(_manifest())


@pytest.mark.skipif(not VECTORS.is_dir(), reason="tests/vectors does not exist yet")
@pytest.mark.parametrize(("name", "path"), _vector_cases())
def test_golden_vector_round_trips(name: str, path: Path) -> None:
    cls = _message_type(_manifest()[name])
    data = path.read_bytes()
    if path.suffix == ".binpb":
        assert bytes(cls.parse(data)) == data
    else:
        message = tl.message_from_json(cls, data)
        assert json.loads(tl.message_to_json(message)) == json.loads(data)


@pytest.mark.skipif(not VECTORS.is_dir(), reason="tests/vectors does not exist yet")
@pytest.mark.parametrize("form", ["binary", "json"])
def test_state_environment_vector_decodes_and_carries_the_foreign_entry(form: tl.StateFormat) -> None:
    suffix = ".binpb" if form == "binary" else ".json"
    data = (VECTORS / f"state_environment{suffix}").read_bytes()

    state = tl.load_state(data, format=form)

    work, box = state.environment_states
    assert (work.mount_name, work.provider_key, work.state_version) == ("work", "threadline_local", "1")
    local = json.loads(work.state_json)
    assert isinstance(local, dict) and sorted(local) == ["backend", "commands", "scope"]
    assert [c["id"] for c in local["commands"]] == [f"{n:032x}" for n in (1, 2)]
    assert (box.mount_name, box.provider_key, box.state_version) == ("box", "docker", "1.0")
    assert box.state_json == '{"container":"c-1"}'
    # The SDK's re-encoding carries the entry it cannot read byte for byte.
    again = tl.load_state(tl.dump_state(state, format=form), format=form)
    assert bytes(again.environment_states[1]) == bytes(box)
    binary = (VECTORS / "state_environment.binpb").read_bytes()
    assert bytes(box) in binary and bytes(box) in tl.dump_state(again)
