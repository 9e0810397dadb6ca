"""`ProtocolError`: what the SDK raises when the server's answer breaks the contract.

Each test provokes a real violation in the SDK's own code (the delta rebuilder, the response codec,
a real server's stream cut short before its result) and checks the whole model: a `ThreadlineError`
of kind `ProtocolError`, `StatusCode.INTERNAL`, no reason, and a message that says what broke.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import AsyncIterator

import grpclib.client
import grpclib.exceptions
import pytest
import threadline_client as tl
from threadline_client import v1
from threadline_client._checkpoints import HistoryRebuilder
from threadline_client._client import _Codec, _parse_target
from threadline_client._errors import translate

pytestmark = pytest.mark.anyio


def assert_protocol_error(error: BaseException, message: str) -> None:
    assert isinstance(error, tl.ProtocolError) and isinstance(error, tl.ThreadlineError)
    assert error.status == tl.StatusCode.INTERNAL
    assert (error.reason, error.domain, dict(error.metadata)) == ("", "", {})
    assert error.field_violations == () and error.details == ()
    assert error.message == message
    assert str(error) == f"INTERNAL: {message}"


def test_a_protocol_error_is_a_threadline_error_that_survives_pickling() -> None:
    error = tl.ProtocolError("the stream ended without its terminal result")
    assert_protocol_error(error, "the stream ended without its terminal result")
    assert repr(error) == "ProtocolError(message='the stream ended without its terminal result')"
    copy = pickle.loads(pickle.dumps(error))
    assert_protocol_error(copy, error.message)


def test_a_delta_whose_rebuilt_history_does_not_match_its_sha256() -> None:
    rebuilder = HistoryRebuilder(b'["a"]')
    state = tl.HarnessState(
        thread_id="thread_x",
        message_history=v1.MessageHistory(sha256=hashlib.sha256(b'["a","b"]').digest(), message_count=2),
    )
    with pytest.raises(tl.ProtocolError) as caught:
        rebuilder.rebuild(7, state, v1.HistoryDelta(keep_bytes=4, append=',"c"]'))
    assert_protocol_error(
        caught.value,
        "the checkpoint candidate at sequence 7 does not rebuild: "
        "its rebuilt history does not match message_history.sha256",
    )
    assert state.message_history is not None and state.message_history.data == "", "left as it came"

    # The base is unchanged, so the right delta still rebuilds after the broken one.
    rebuilder.rebuild(8, state, v1.HistoryDelta(keep_bytes=4, append=',"b"]'))
    assert state.message_history.data == '["a","b"]'


def test_a_delta_that_keeps_more_than_its_base() -> None:
    state = tl.HarnessState(message_history=v1.MessageHistory(sha256=hashlib.sha256(b"[]").digest()))
    with pytest.raises(tl.ProtocolError) as caught:
        HistoryRebuilder(b"[]").rebuild(3, state, v1.HistoryDelta(keep_bytes=3))
    assert_protocol_error(
        caught.value,
        "the checkpoint candidate at sequence 3 does not rebuild: its history_delta keeps 3 bytes of a base that has 2",
    )


async def test_a_stream_that_ends_without_its_result(server_addr: str, server_token: str | None) -> None:
    """A real server's stream, ended after the event before its result (as a proxy might cut it)."""
    host, port, _ = _parse_target(server_addr)
    channel = grpclib.client.Channel(host, port)
    metadata = {"authorization": f"Bearer {server_token}"} if server_token else None
    calls = v1.HarnessServiceStub(channel).stream_run(
        v1.StreamRunRequest(spec=tl.RunSpec(text="lookup grpc")), timeout=60.0, metadata=metadata
    )

    async def cut_before_the_result() -> AsyncIterator[v1.StreamRunResponse]:
        async for response in calls:  # one event per response: packing is off in this request
            assert response.event is not None
            if response.event.result is not None:
                return
            yield response

    seen: list[str] = []
    try:
        stream = tl.RunStream(cut_before_the_result())
        with pytest.raises(tl.ProtocolError) as caught:
            async for event in stream:
                seen.append(tl.event_case(event))
    finally:
        await calls.aclose()  # type: ignore[attr-defined]  # an async generator
        channel.close()

    assert seen[0] == "run_started" and "tool_result" in seen and "result" not in seen
    assert_protocol_error(caught.value, "the stream ended without its terminal result")
    assert stream.result is None
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    with pytest.raises(RuntimeError, match="ended before its result"):
        await stream.collect()


@pytest.mark.parametrize(
    "data", [b"\x08", b"\x0a\x02\x08"], ids=["truncated-varint", "truncated-inside-result"]
)
def test_a_response_that_does_not_decode(data: bytes) -> None:
    with pytest.raises(tl.ProtocolError) as caught:
        _Codec().decode(data, v1.RunResponse)
    assert caught.value.message.startswith("the server's RunResponse does not decode: ")
    assert_protocol_error(caught.value, caught.value.message)
    assert caught.value.__cause__ is not None  # what the parser raised, for the curious


def test_the_codec_still_decodes_what_conforms() -> None:
    result = v1.RunResponse(result=tl.RunResult(status=tl.RunStatus.COMPLETED, thread_id="thread_x"))
    assert _Codec().decode(bytes(result), v1.RunResponse) == result


def test_a_response_that_breaks_grpc_itself() -> None:
    error = translate(grpclib.exceptions.ProtocolError("Missing content-type header"))
    assert error is not None
    assert_protocol_error(
        error, "the server's response breaks the gRPC protocol: Missing content-type header"
    )
