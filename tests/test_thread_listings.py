"""Label filters of `ListThreads` (THREADS §3), on a real server.

A label filter has at most 32 keys (a thread has at most 32 labels), each once; past that the request
is refused and never reaches the database, so the service's health stays SERVING.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from conftest import bad_request_fields, create_thread, refusal, run_thread
from grpc_health.v1 import health_pb2, health_pb2_grpc
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import thread_service_pb2, thread_service_pb2_grpc
from threadline.v1.thread_service_pb2_grpc import ThreadServiceStub as Stub

from harness.threads import MAX_LABEL_FILTERS

pytestmark = pytest.mark.anyio

ts = thread_service_pb2
Code = grpc.StatusCode


@pytest.fixture(scope="module")
def served() -> Iterator[LoggedServe]:
    with logged_serve("--store", "memory") as running:
        yield running


@pytest.fixture
async def channel(served: LoggedServe) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(served.address) as opened:
        yield opened


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> Stub:
    return thread_service_pb2_grpc.ThreadServiceStub(channel)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


async def refused_at(call: Any) -> tuple[Any, str, list[str]]:
    """A call that must fail: (code, ErrorInfo reason, BadRequest fields)."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    code, reason, _ = refusal(caught.value)
    return code, reason, bad_request_fields(caught.value)


REFUSED_TOKEN = (Code.INVALID_ARGUMENT, "INPUT_INVALID", ["page_token"])


async def healthy(channel: grpc.aio.Channel) -> bool:
    check = health_pb2.HealthCheckRequest(service="threadline.v1.ThreadService")
    status = (await health_pb2_grpc.HealthStub(channel).Check(check)).status
    return bool(status == health_pb2.HealthCheckResponse.SERVING)


async def labelled(stub: Stub, count: int) -> tuple[str, list[str]]:
    """`count` threads with a label of their own; (the filter naming them, their IDs oldest first)."""
    suite = uuid.uuid4().hex
    made = [(await create_thread(stub, labels={"suite": suite})).thread_id for _ in range(count)]
    return f"suite={suite}", made


async def a_checkpoints_token(stub: Stub) -> tuple[str, str]:
    """A thread with three checkpoints or more, and the token of its second page of one."""
    thread = await create_thread(stub)
    await run_thread(stub, thread.thread_id, text="hello")
    page = await stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread.thread_id, page_size=1))
    assert page.next_page_token
    return thread.thread_id, page.next_page_token


# --- label filters --------------------------------------------------------------------------------------


async def test_a_filter_of_32_keys_matches_a_thread_of_32_labels(stub: Stub) -> None:
    labels = {f"k{i}": uuid.uuid4().hex for i in range(MAX_LABEL_FILTERS)}
    assert MAX_LABEL_FILTERS == 32
    made = await create_thread(stub, labels=labels)
    found = await stub.ListThreads(ts.ListThreadsRequest(labels=[f"{k}={v}" for k, v in labels.items()]))
    assert [t.thread_id for t in found.threads] == [made.thread_id]


@pytest.mark.parametrize("count", [33, 1000, 10_000])
async def test_more_filters_than_a_thread_has_labels_are_refused_and_health_stays_serving(
    stub: Stub, channel: grpc.aio.Channel, count: int
) -> None:
    request = ts.ListThreadsRequest(labels=[f"k{i}=v" for i in range(count)])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListThreads(request)
    code, reason, meta = refusal(caught.value)
    assert (code, reason, bad_request_fields(caught.value)) == (
        Code.INVALID_ARGUMENT,
        "INPUT_INVALID",
        ["labels"],
    )
    assert meta == {"field": "labels", "count": str(count), "limit": "32"}
    assert await healthy(channel)
    assert (await stub.ListThreads(ts.ListThreadsRequest(page_size=1))).threads, "the store still serves"


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        (["a=1", "a=2"], "labels[1]"),  # a thread has one value per key
        (["a=1", "b=2", "a=1"], "labels[2]"),
        (["a=\x00"], "labels[0]"),  # no store can keep a NUL (PostgreSQL text cannot)
        (["\x00=v"], "labels[0]"),
    ],
    ids=["a key twice", "a key twice, same value", "NUL in a value", "NUL in a key"],
)
async def test_a_malformed_filter_is_refused_at_its_entry(
    stub: Stub, channel: grpc.aio.Channel, labels: list[str], field: str
) -> None:
    call = stub.ListThreads(ts.ListThreadsRequest(labels=labels))
    assert await refused_at(call) == (Code.INVALID_ARGUMENT, "INPUT_INVALID", [field])
    assert await healthy(channel)
