"""Checkpoint candidates in CHECKPOINT_FORM_DELTA: each rebuilds, byte for byte, into the full candidate.

A host rebuilds a candidate's `message_history.data` as `base[:keep_bytes] + append`, where the base
is the previous candidate's data, or the `previous_state` data it sent; the result must pass the
server's own envelope checks (digest, count) and be a state the thread can continue from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from conftest import RunningServer, error_info
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given
from hypothesis import strategies as st
from threadline.v1 import events_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2, state_pb2

from harness.deltas import common_prefix
from harness.threads.blobs import BlobRef, plan_delta
from server.mapping.state import state_from_pb

pytestmark = pytest.mark.anyio

Stub = harness_service_pb2_grpc.HarnessServiceStub


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


async def stream(stub: Stub, **spec: Any) -> list[events_pb2.RunEvent]:
    request = harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(**spec))
    return [response.event async for response in stub.StreamRun(request)]


def rebuild(base: bytes, candidates: list[events_pb2.RunEvent]) -> list[state_pb2.HarnessState]:
    """What a host does: apply each delta to the data before it, then check the digest."""
    states = []
    for event in candidates:
        delta = event.checkpoint_candidate.history_delta
        state = state_pb2.HarnessState()
        state.CopyFrom(event.checkpoint_candidate.state)
        assert not state.message_history.data
        assert delta.keep_bytes <= len(base)
        data = base[: delta.keep_bytes] + delta.append.encode()
        assert hashlib.sha256(data).digest() == state.message_history.sha256
        state.message_history.data = data.decode()
        states.append(state)
        base = data
    return states


def candidates_of(events: list[events_pb2.RunEvent]) -> list[events_pb2.RunEvent]:
    return [e for e in events if e.WhichOneof("event") == "checkpoint_candidate"]


async def test_delta_candidates_rebuild_into_states_the_thread_continues_from(stub: Stub) -> None:
    first = await stream(stub, text="lookup grpc")
    previous = first[-1].result.state
    base = previous.message_history.data.encode()
    events = await stream(
        stub,
        text="lookup threadline",
        previous_state=previous,
        checkpoints=True,
        checkpoint_form=run_pb2.CHECKPOINT_FORM_DELTA,
    )
    candidates = candidates_of(events)
    assert len(candidates) == 4 and all(c.checkpoint_candidate.HasField("history_delta") for c in candidates)
    states = rebuild(base, candidates)
    for state in states:
        decoded = state_from_pb(state, field="state")  # the server's own checks: digest and count
        assert decoded.message_count() == state.message_history.message_count
        assert decoded.message_history_json().startswith(base[:-1])  # it only grew
    # Each candidate sends what changed, not the history again.
    sent = sum(len(c.checkpoint_candidate.history_delta.append) for c in candidates)
    assert sent < len(states[-1].message_history.data)
    # The last candidate is a checkpoint the thread continues from.
    after = await stream(stub, text="lookup grpc", previous_state=states[-1])
    assert after[-1].result.status == run_pb2.RUN_STATUS_COMPLETED


async def test_full_and_delta_candidates_carry_the_same_states(stub: Stub) -> None:
    full = candidates_of(await stream(stub, text="lookup grpc", checkpoints=True))
    delta = candidates_of(
        await stream(
            stub, text="lookup grpc", checkpoints=True, checkpoint_form=run_pb2.CHECKPOINT_FORM_DELTA
        )
    )
    assert all(not c.checkpoint_candidate.HasField("history_delta") for c in full)
    rebuilt = rebuild(b"[]", delta)
    assert len(rebuilt) == len(full)
    for state, candidate in zip(rebuilt, full, strict=True):
        # Timestamps and IDs differ from run to run; the shape of every message is the same.
        mine = json.loads(state.message_history.data)
        theirs = json.loads(candidate.checkpoint_candidate.state.message_history.data)
        assert [m["kind"] for m in mine] == [m["kind"] for m in theirs]
        assert (
            state.message_history.message_count
            == candidate.checkpoint_candidate.state.message_history.message_count
        )


async def test_the_first_delta_applies_to_the_previous_state_exactly_as_sent(stub: Stub) -> None:
    previous = (await stream(stub, text="lookup grpc"))[-1].result.state
    # A host that re-formatted the history it stored (still the same JSON value).
    reformatted = json.dumps(json.loads(previous.message_history.data), indent=1, ensure_ascii=False)
    previous.message_history.data = reformatted
    previous.message_history.sha256 = hashlib.sha256(reformatted.encode()).digest()
    events = await stream(
        stub,
        text="lookup grpc",
        previous_state=previous,
        checkpoints=True,
        checkpoint_form=run_pb2.CHECKPOINT_FORM_DELTA,
    )
    states = rebuild(reformatted.encode(), candidates_of(events))
    assert [state_from_pb(s, field="state").message_count() for s in states] == [
        s.message_history.message_count for s in states
    ]


async def test_an_unknown_checkpoint_form_is_input_invalid(stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream(stub, text="hi", checkpoints=True, checkpoint_form=99)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "INPUT_INVALID"
    fields = []
    for key, value in caught.value.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(bad):
                    fields += [v.field for v in bad.field_violations]
    assert fields == ["spec.checkpoint_form"]


@given(st.text(), st.text(), st.text())
def test_common_prefix_is_the_longest_shared_prefix_on_a_character_boundary(
    shared: str, left: str, right: str
) -> None:
    base, data = (shared + left).encode(), (shared + right).encode()
    longest = next(
        (i for i, (a, b) in enumerate(zip(base, data, strict=False)) if a != b), min(len(base), len(data))
    )
    boundaries = [i for i in range(longest + 1) if i == len(data) or data[i] & 0xC0 != 0x80]
    assert common_prefix(base, data) == boundaries[-1]


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=40), st.binary(max_size=60)), min_size=1, max_size=12
    )
)
def test_a_stored_blob_s_sha256_is_its_data_s_when_hashed_from_its_base_s_state(
    edits: list[tuple[int, bytes]],
) -> None:
    """Each blob's digest is computed from its base's hash state where it keeps the base whole but its
    last byte (`blobs.plan_delta`): whatever the edits (a tail rewritten, cut, appended), it is the
    SHA-256 of the data, and the delta rebuilds the data."""
    base: BlobRef | None = None
    data = b""
    for identity, (cut, added) in enumerate(edits):
        data = data[: max(len(data) - cut, 0)] + added
        delta = plan_delta(data, base)
        assert delta.sha256 == hashlib.sha256(data).hexdigest()
        kept = b"" if base is None or delta.base_id is None else base.data[: delta.keep]
        assert kept + delta.tail == data
        base = BlobRef(identity, data, delta.chain_bytes, delta.hashed)
