"""Page tokens and label filters of `ListThreads` and `ListCheckpoints` (THREADS §3), on real servers.

A page token is opaque and tamper-evident: a forged one, one altered in any byte, or one of another
listing (another RPC, thread, filter or status) is `INVALID_ARGUMENT` `INPUT_INVALID` at `page_token`,
never INTERNAL; every replica of one store accepts the others' tokens (two servers on one SQLite file).
A label filter has at most 32 keys (a thread has at most 32 labels), each once; past that the request
is refused and never reaches the database, so the service's health stays SERVING.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import bad_request_fields, create_thread, refusal, run_thread
from grpc_health.v1 import health_pb2, health_pb2_grpc
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import thread_pb2, thread_service_pb2, thread_service_pb2_grpc
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


# --- forged and altered tokens --------------------------------------------------------------------

DEEP = '{"t":' + "[" * 100_000 + "]" * 100_000 + ',"id":"a"}'
FORGED_THREADS = {
    "t a string": b64('{"t":"x","id":"a"}'),
    "t a list": b64('{"t":[1],"id":"a"}'),
    "deeply nested": b64(DEEP),
    "the old format": b64('{"t":1.5,"id":"a"}'),
    "not base64": "not-a-token!",
    "non-ASCII": "tök€n",
    "100 000 characters": "A" * 100_000,
    "empty JSON object": b64("{}"),
    "NUL bytes": base64.urlsafe_b64encode(b"\0" * 40).decode(),
}
FORGED_CHECKPOINTS = {
    "before a string": b64('{"before":"x"}'),
    "before 1e400": b64('{"before":1e400}'),
    "before 2**80": b64(f'{{"before":{2**80}}}'),
    "before null": b64('{"before":null}'),
    "before NaN": b64('{"before":NaN}'),
    "before -1": b64('{"before":-1}'),
    "the old format": b64('{"before":2}'),
}


@pytest.mark.parametrize("token", list(FORGED_THREADS.values()), ids=list(FORGED_THREADS))
async def test_a_forged_list_threads_token_is_refused_at_page_token(stub: Stub, token: str) -> None:
    assert await refused_at(stub.ListThreads(ts.ListThreadsRequest(page_token=token))) == REFUSED_TOKEN


@pytest.mark.parametrize("token", list(FORGED_CHECKPOINTS.values()), ids=list(FORGED_CHECKPOINTS))
async def test_a_forged_list_checkpoints_token_is_refused_at_page_token(stub: Stub, token: str) -> None:
    thread = await create_thread(stub)
    call = stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread.thread_id, page_token=token))
    assert await refused_at(call) == REFUSED_TOKEN


def altered(token: str) -> Iterator[str]:
    """`token` with each character replaced in turn, wherever that changes the bytes it stands for."""
    original = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    for at, char in enumerate(token):
        other = "A" if char != "A" else "B"
        changed = token[:at] + other + token[at + 1 :]
        if base64.urlsafe_b64decode(changed + "=" * (-len(changed) % 4)) != original:
            yield changed


async def test_a_token_altered_in_any_byte_is_refused(stub: Stub) -> None:
    mine, _ = await labelled(stub, 2)
    token = (await stub.ListThreads(ts.ListThreadsRequest(labels=[mine], page_size=1))).next_page_token
    variants = list(altered(token))
    assert len(variants) >= len(token) - 1
    for variant in variants:
        call = stub.ListThreads(ts.ListThreadsRequest(labels=[mine], page_size=1, page_token=variant))
        assert await refused_at(call) == REFUSED_TOKEN, variant
    thread_id, token = await a_checkpoints_token(stub)
    for variant in altered(token):
        call = stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread_id, page_token=variant))
        assert await refused_at(call) == REFUSED_TOKEN, variant


# --- a token of another listing -------------------------------------------------------------------


async def test_a_token_pages_only_the_listing_it_came_from(stub: Stub) -> None:
    mine, made = await labelled(stub, 3)
    other, _ = await labelled(stub, 3)
    first = await stub.ListThreads(ts.ListThreadsRequest(labels=[mine], page_size=1))
    token = first.next_page_token
    # The same listing: a page of any size continues it.
    rest = await stub.ListThreads(ts.ListThreadsRequest(labels=[mine], page_size=5, page_token=token))
    assert [t.thread_id for t in (*first.threads, *rest.threads)] == made[::-1]
    assert not rest.next_page_token
    for request in (
        ts.ListThreadsRequest(labels=[other], page_token=token),
        ts.ListThreadsRequest(labels=[mine, "n=1"], page_token=token),
        ts.ListThreadsRequest(page_token=token),
        ts.ListThreadsRequest(labels=[mine], status=thread_pb2.THREAD_STATUS_IDLE, page_token=token),
    ):
        assert await refused_at(stub.ListThreads(request)) == REFUSED_TOKEN, request
    thread_id, checkpoints = await a_checkpoints_token(stub)
    another, _ = await a_checkpoints_token(stub)
    call = stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=another, page_token=checkpoints))
    assert await refused_at(call) == REFUSED_TOKEN, "another thread's"
    call = stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread_id, page_token=token))
    assert await refused_at(call) == REFUSED_TOKEN, "ListThreads'"
    assert await refused_at(stub.ListThreads(ts.ListThreadsRequest(page_token=checkpoints))) == REFUSED_TOKEN
    page = await stub.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread_id, page_token=checkpoints))
    assert page.checkpoints, "its own thread's is accepted"


async def test_the_filter_order_does_not_matter(stub: Stub) -> None:
    suite = uuid.uuid4().hex
    for _ in range(2):
        await create_thread(stub, labels={"suite": suite, "kind": "x"})
    one, two = f"suite={suite}", "kind=x"
    token = (await stub.ListThreads(ts.ListThreadsRequest(labels=[one, two], page_size=1))).next_page_token
    page = await stub.ListThreads(ts.ListThreadsRequest(labels=[two, one], page_token=token))
    assert len(page.threads) == 1


# --- every replica of one store ------------------------------------------------------------------------


async def test_every_replica_of_one_sqlite_file_accepts_the_others_tokens(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'threads.db'}"
    # Started together, they migrate the new file together: one of them makes the store's key.
    with logged_serve("--store", store) as one_server, logged_serve("--store", store) as two_server:
        async with (
            grpc.aio.insecure_channel(one_server.address) as one_channel,
            grpc.aio.insecure_channel(two_server.address) as two_channel,
        ):
            one, two = Stub(one_channel), Stub(two_channel)
            mine, made = await labelled(one, 3)
            first = await one.ListThreads(ts.ListThreadsRequest(labels=[mine], page_size=1))
            second = await two.ListThreads(
                ts.ListThreadsRequest(labels=[mine], page_size=1, page_token=first.next_page_token)
            )
            third = await one.ListThreads(
                ts.ListThreadsRequest(labels=[mine], page_size=1, page_token=second.next_page_token)
            )
            paged = [t.thread_id for page in (first, second, third) for t in page.threads]
            assert paged == made[::-1] and not third.next_page_token
            thread_id, token = await a_checkpoints_token(two)
            page = await one.ListCheckpoints(ts.ListCheckpointsRequest(thread_id=thread_id, page_token=token))
            assert page.checkpoints
    # A token of another store (its own key) is refused like a forged one.
    with logged_serve("--store", "memory") as elsewhere:
        async with grpc.aio.insecure_channel(elsewhere.address) as channel:
            call = Stub(channel).ListThreads(
                ts.ListThreadsRequest(labels=[mine], page_token=first.next_page_token)
            )
            assert await refused_at(call) == REFUSED_TOKEN


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
