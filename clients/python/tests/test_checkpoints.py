"""Checkpoint candidates: the SDK asks for history deltas and hands the host complete states.

Against the real `threadline serve` (the demo agent's `lookup <topic>` makes two model requests, so
four candidates), plus the `checkpoint_delta` golden vector fed through `RunStream` as recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpclib.client
import grpclib.events
import pytest
import threadline_client as tl
from threadline_client import v1
from threadline_client._client import _parse_target, _with_form

pytestmark = pytest.mark.anyio

VECTORS = Path(__file__).resolve().parents[3] / "tests" / "vectors"
FORM = v1.CheckpointForm


def _candidates(events: list[tl.RunEvent]) -> list[v1.CheckpointCandidate]:
    return [e.checkpoint_candidate for e in events if e.checkpoint_candidate is not None]


def _assert_complete(state: tl.HarnessState | None) -> tl.HarnessState:
    """A state a host can persist: its history data is whole and matches its own digest and count."""
    assert state is not None and state.message_history is not None
    history = state.message_history
    assert hashlib.sha256(history.data.encode("utf-8")).digest() == history.sha256
    assert history.message_count == len(json.loads(history.data))
    return state


class Wire:
    """What the SDK's real connection sends and receives, seen through grpclib's channel events."""

    def __init__(self, client: tl.Client) -> None:
        self.requests: list[Any] = []
        self.candidate_data: list[str] = []
        """Each candidate's `message_history.data` as it arrived, before the SDK rebuilt it."""
        channel = client._channel
        assert channel is not None, "use inside `async with client`"
        grpclib.events.listen(channel, grpclib.events.SendMessage, self._on_send)
        grpclib.events.listen(channel, grpclib.events.RecvMessage, self._on_receive)

    async def _on_send(self, event: grpclib.events.SendMessage) -> None:
        self.requests.append(event.message)

    async def _on_receive(self, event: grpclib.events.RecvMessage) -> None:
        message = event.message
        assert isinstance(message, v1.StreamRunResponse)
        for run_event in [message.event] if message.event is not None else message.events:
            candidate = run_event.checkpoint_candidate
            if candidate is not None and candidate.state is not None and candidate.state.message_history:
                self.candidate_data.append(candidate.state.message_history.data)


# --- what goes on the wire ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checkpoints", "form", "sent"),
    [
        (True, FORM.UNSPECIFIED, FORM.DELTA),
        (True, FORM.FULL, FORM.FULL),
        (True, FORM.DELTA, FORM.DELTA),
        (False, FORM.UNSPECIFIED, FORM.UNSPECIFIED),
    ],
    ids=["default", "explicit-full", "explicit-delta", "no-checkpoints"],
)
async def test_the_checkpoint_form_sent_and_what_arrives(
    server_addr: str,
    server_token: str | None,
    checkpoints: bool,
    form: v1.CheckpointForm,
    sent: v1.CheckpointForm,
) -> None:
    spec = tl.RunSpec(text="lookup threadline", checkpoints=checkpoints, checkpoint_form=form)
    async with tl.Client(server_addr, token=server_token, timeout=60.0) as client:
        wire = Wire(client)
        async with client.stream_run(spec) as stream:
            events = [event async for event in stream]

    (request,) = wire.requests
    assert isinstance(request, v1.StreamRunRequest) and request.spec is not None
    assert request.spec.checkpoint_form == sent
    assert request.spec.checkpoints == checkpoints
    assert spec.checkpoint_form == form, "the host's own spec is not changed"
    assert stream.result is not None and stream.result.status == tl.RunStatus.COMPLETED

    candidates = _candidates(events)
    if not checkpoints:
        assert not candidates and not wire.candidate_data
        return
    assert len(candidates) == len(wire.candidate_data) == 4
    for candidate, arrived in zip(candidates, wire.candidate_data, strict=True):
        state = _assert_complete(candidate.state)  # complete whichever form travelled
        assert state.message_history is not None
        if sent == FORM.DELTA:
            assert arrived == "" and candidate.history_delta is not None  # left in place
        else:
            assert arrived == state.message_history.data and candidate.history_delta is None


# --- delta candidates from the real server -------------------------------------------------------


async def test_default_candidates_are_complete_and_the_server_takes_them_back(client: tl.Client) -> None:
    async with client.stream_run(tl.RunSpec(text="lookup threadline", checkpoints=True)) as stream:
        candidates = _candidates([event async for event in stream])
    assert stream.result is not None and stream.result.state is not None

    assert len(candidates) == 4 and all(c.history_delta is not None for c in candidates)
    counts = []
    for candidate in candidates:
        state = _assert_complete(candidate.state)
        validated = await client.validate_state(state)
        assert validated.state == state
        assert state.message_history is not None
        counts.append(state.message_history.message_count)
    assert counts == sorted(counts) and counts[0] < counts[-1]
    last = candidates[-1].state
    assert last is not None and last.message_history is not None
    assert last.message_history == stream.result.state.message_history

    # Any candidate continues the thread, even the first, taken before the model had answered.
    for candidate in (candidates[0], candidates[-1]):
        assert candidate.state is not None and candidate.state.message_history is not None
        again = await client.run(tl.RunSpec(text="hello", previous_state=candidate.state))
        assert again.status == tl.RunStatus.COMPLETED
        assert again.thread_id == stream.result.thread_id
        assert again.state is not None and again.state.message_history is not None
        assert again.state.message_history.message_count > candidate.state.message_history.message_count
    assert tl.output(again) == "You said: hello"


async def test_a_continued_thread_rebuilds_its_first_candidate_from_the_previous_state(
    client: tl.Client,
) -> None:
    first = await client.run(tl.RunSpec(text="lookup grpc"))
    previous = first.state
    assert previous is not None and previous.message_history is not None
    stored = tl.dump_state(previous)
    previous_data = previous.message_history.data.encode("utf-8")

    spec = tl.RunSpec(text="lookup threadline", previous_state=previous, checkpoints=True)
    async with client.stream_run(spec) as stream:
        candidates = _candidates([event async for event in stream])

    assert stream.result is not None and stream.result.thread_id == first.thread_id
    assert tl.dump_state(previous) == stored, "the host's envelope is not changed"
    head = candidates[0]
    assert head.history_delta is not None
    keep = head.history_delta.keep_bytes
    assert keep > len(b"["), "the first delta applies to the previous state's data, not to []"
    state = _assert_complete(head.state)
    assert state.message_history is not None
    assert state.message_history.data.encode("utf-8")[:keep] == previous_data[:keep]
    assert state.message_history.message_count > previous.message_history.message_count
    for candidate in candidates[1:]:
        _assert_complete(candidate.state)
    assert (await client.validate_state(state)).state == state


async def test_a_delta_that_does_not_rebuild_cancels_the_call(
    server_addr: str, server_token: str | None, client: tl.Client
) -> None:
    """The server sends deltas on a previous state the stream was not told about: a protocol error.

    The call goes through the generated stub, so the `RunStream` can be given another spec than
    the one sent; its base (`[]`) is shorter than what the first delta keeps.
    """
    first = await client.run(tl.RunSpec(text="hello"))
    sent = tl.RunSpec(
        text="lookup grpc", previous_state=first.state, checkpoints=True, checkpoint_form=FORM.DELTA
    )
    host, port, _ = _parse_target(server_addr)
    channel = grpclib.client.Channel(host, port)
    metadata = {"authorization": f"Bearer {server_token}"} if server_token else None
    try:
        calls = v1.HarnessServiceStub(channel).stream_run(
            v1.StreamRunRequest(spec=sent), timeout=60.0, metadata=metadata
        )
        stream = tl.RunStream(calls, spec=tl.RunSpec(text="lookup grpc"))
        seen: list[str] = []
        with pytest.raises(tl.ProtocolError) as caught:
            async for event in stream:
                seen.append(tl.event_case(event))
        assert isinstance(calls, types.AsyncGeneratorType)
        assert calls.ag_frame is None, "the call was closed (cancelled on the server)"
        with pytest.raises(StopAsyncIteration):
            await anext(stream)
    finally:
        channel.close()

    assert "checkpoint_candidate" not in seen and "result" not in seen
    error = caught.value
    assert isinstance(error, tl.ThreadlineError)
    assert error.status == tl.StatusCode.INTERNAL and error.reason == "" and error.details == ()
    assert re.fullmatch(
        r"the checkpoint candidate at sequence 2 does not rebuild: "
        r"its history_delta keeps \d+ bytes of a base that has 2",
        error.message,
    ), error.message
    assert stream.result is None


# --- the golden vector ---------------------------------------------------------------------------


needs_vector = pytest.mark.skipif(
    not (VECTORS / "checkpoint_delta.binpb").is_file(), reason="no checkpoint_delta golden vector"
)


def _vector() -> tuple[v1.RunEvent, tl.HarnessState]:
    """`checkpoint_delta` and its documented base, `state_full` (tests/vectors/README.md)."""
    event = v1.RunEvent.parse((VECTORS / "checkpoint_delta.binpb").read_bytes())
    base = tl.load_state((VECTORS / "state_full.binpb").read_bytes())
    return event, base


RESULT = v1.StreamRunResponse(event=v1.RunEvent(result=tl.RunResult(status=tl.RunStatus.COMPLETED)))
"""A terminal result, for recorded streams that must end as a conforming stream does."""


class Recorded:
    """Responses recorded beforehand, as `HarnessServiceStub.stream_run` would yield them."""

    def __init__(self, *responses: v1.StreamRunResponse) -> None:
        self._responses = responses
        self.closed = False

    async def __call__(self) -> AsyncIterator[v1.StreamRunResponse]:
        try:
            for response in self._responses:
                yield response
        finally:
            self.closed = True


@needs_vector
@pytest.mark.parametrize("source", ["binpb", "json"])
async def test_the_delta_vector_rebuilds_from_its_documented_base(source: str) -> None:
    event, base = _vector()
    if source == "json":
        event = tl.message_from_json(v1.RunEvent, (VECTORS / "checkpoint_delta.json").read_text("utf-8"))
    assert event.checkpoint_candidate is not None and event.checkpoint_candidate.history_delta is not None
    assert event.checkpoint_candidate.state is not None
    assert event.checkpoint_candidate.state.message_history is not None
    assert event.checkpoint_candidate.state.message_history.data == ""
    recorded = Recorded(v1.StreamRunResponse(event=event), RESULT)

    stream = tl.RunStream(recorded(), spec=tl.RunSpec(text="go on", previous_state=base))
    got, _ = [e async for e in stream]

    candidate = got.checkpoint_candidate
    assert candidate is not None and candidate.history_delta is not None
    state = _assert_complete(candidate.state)
    assert state.message_history is not None and base.message_history is not None
    keep = candidate.history_delta.keep_bytes
    data = state.message_history.data
    assert data.encode("utf-8") == base.message_history.data.encode("utf-8")[:keep] + (
        candidate.history_delta.append.encode("utf-8")
    )
    assert "Déjà" in data  # the appended text is not ASCII: keep_bytes counts bytes, not characters
    assert state.thread_id == base.thread_id


def _broken(how: str) -> tuple[v1.RunEvent, tl.RunSpec]:
    event, base = _vector()
    spec = tl.RunSpec(previous_state=base)
    candidate = event.checkpoint_candidate
    assert candidate is not None and candidate.history_delta is not None
    assert candidate.state is not None and candidate.state.message_history is not None
    assert base.message_history is not None
    match how:
        case "digest":
            candidate.state.message_history.sha256 = hashlib.sha256(b"something else").digest()
        case "keep-beyond-base":
            candidate.history_delta.keep_bytes = len(base.message_history.data.encode("utf-8")) + 1
        case "wrong-base":
            spec = tl.RunSpec()  # no previous state: the base is `[]`, far shorter than what is kept
        case "no-history":
            candidate.state.message_history = None
        case _:
            raise AssertionError(how)
    return event, spec


@needs_vector
@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("digest", "its rebuilt history does not match message_history.sha256"),
        ("keep-beyond-base", "its history_delta keeps 2472 bytes of a base that has 2471"),
        ("wrong-base", "its history_delta keeps 2470 bytes of a base that has 2"),
        ("no-history", "its history_delta has no state.message_history to rebuild"),
    ],
)
async def test_a_broken_delta_is_a_protocol_error(how: str, says: str) -> None:
    event, spec = _broken(how)
    after = v1.RunEvent(thread_id=event.thread_id, run_id=event.run_id, sequence=event.sequence + 1)
    # Packed with a later event, which the host must not see either.
    recorded = Recorded(v1.StreamRunResponse(events=[event, after]), v1.StreamRunResponse(event=after))
    stream = tl.RunStream(recorded(), spec=spec)

    with pytest.raises(tl.ProtocolError) as caught:
        await anext(stream)

    assert caught.value.status == tl.StatusCode.INTERNAL and caught.value.reason == ""
    assert caught.value.message == f"the checkpoint candidate at sequence 3 does not rebuild: {says}"
    assert recorded.closed, "the call is ended"
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


def test_the_sent_copy_keeps_fields_of_a_newer_contract() -> None:
    newer = bytes(tl.RunSpec(text="hi", checkpoints=True)) + b"\xf8\x06\x01"  # field 111 = 1, unknown here
    spec = v1.RunSpec.parse(newer)

    sent = _with_form(spec, FORM.DELTA)

    assert bytes(spec) == newer, "the host's spec is not changed"
    assert sent.checkpoint_form == FORM.DELTA and sent.text == "hi" and sent.checkpoints
    assert bytes(sent).endswith(b"\xf8\x06\x01")


async def test_a_history_that_shrinks_or_is_rewritten_rebuilds_too() -> None:
    """Deltas that keep less than the one before (the SDK hashes incrementally over kept prefixes)."""
    histories = ["[1,2,3,4]", "[1,9]", "[1,9,5]", "[]", '["é","ü"]', '["é","ü","日本"]']
    base = "[1,2,3]"

    def candidate(sequence: int, data: str, previous: str) -> v1.StreamRunResponse:
        new, old = data.encode("utf-8"), previous.encode("utf-8")
        shared = min(len(new), len(old))
        keep = next((i for i in range(shared) if new[i] != old[i]), shared)
        while 0 < keep < len(new) and new[keep] & 0xC0 == 0x80:
            keep -= 1
        history = v1.MessageHistory(sha256=hashlib.sha256(new).digest(), message_count=len(json.loads(data)))
        return v1.StreamRunResponse(
            event=v1.RunEvent(
                sequence=sequence,
                checkpoint_candidate=v1.CheckpointCandidate(
                    state=tl.HarnessState(thread_id="thread_x", message_history=history),
                    history_delta=v1.HistoryDelta(keep_bytes=keep, append=new[keep:].decode("utf-8")),
                ),
            )
        )

    previous_data = [base, *histories[:-1]]
    responses = [candidate(i, d, p) for i, (d, p) in enumerate(zip(histories, previous_data, strict=True))]
    previous = tl.HarnessState(thread_id="thread_x", message_history=v1.MessageHistory(data=base))
    stream = tl.RunStream(Recorded(*responses, RESULT)(), spec=tl.RunSpec(previous_state=previous))

    candidates = _candidates([event async for event in stream])

    rebuilt = [_assert_complete(c.state).message_history for c in candidates]
    assert [h.data for h in rebuilt if h is not None] == histories
