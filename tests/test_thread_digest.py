"""The idempotency digest of a thread request (THREADS §4 step 1; docs/threads.md "Request digest").

The digest is the core's (`harness.threads.digest`): canonical JSON of what the request asks for, so a
host embedding `DurableHost` gets it without protobuf and a library upgrade does not change it. Records
an older server stored carry the SHA-256 of the spec's protobuf bytes instead; their retries still
replay.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import create_thread, refused, thread_spec
from logged_serve import logged_serve
from pydantic_ai.messages import BinaryContent, DocumentUrl, ImageUrl, ToolReturn
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied
from threadline.v1 import deferred_pb2, thread_service_pb2, thread_service_pb2_grpc

from harness.threads import ThreadRunRequest
from harness.threads.digest import request_digest

pytestmark = pytest.mark.anyio

ts = thread_service_pb2


def legacy_digest(spec: Any) -> str:
    """What servers before v2 stored: SHA-256 of the spec's deterministic protobuf bytes, without the
    settings each attempt takes from its own request."""
    body = ts.ThreadRunSpec()
    body.CopyFrom(spec)
    for name in ("tool_recovery", "client_tools", "usage_limits"):
        body.ClearField(name)
    return hashlib.sha256(body.SerializeToString(deterministic=True)).hexdigest()


def stored_digests(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT request_id, digest FROM runs"))


def store_as_an_older_server(path: Path, specs: list[Any]) -> None:
    with sqlite3.connect(path) as db:
        for spec in specs:
            db.execute(
                "UPDATE runs SET digest = ? WHERE request_id = ?", (legacy_digest(spec), spec.request_id)
            )


async def run(stub: Any, spec: Any) -> Any:
    return await stub.RunThread(ts.RunThreadRequest(spec=spec))


@asynccontextmanager
async def serving(path: Path) -> AsyncIterator[Any]:
    """A `ThreadService` stub of a server on the SQLite store at `path`, stopped after the block."""
    with logged_serve("--store", f"sqlite:{path}") as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            yield thread_service_pb2_grpc.ThreadServiceStub(channel)


async def test_a_retry_of_a_request_an_older_server_stored_is_still_a_replay(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    async with serving(path) as stub:
        thread = await create_thread(stub)
        prompt = thread_spec(thread.thread_id, text="delete a.txt")
        first = await run(stub, prompt)
        [approval] = first.result.deferred.approvals
        answer = thread_spec(
            thread.thread_id,
            expected_revision=first.revision,
            answers=deferred_pb2.DeferredToolResults(
                approvals=[
                    deferred_pb2.ApprovalResult(
                        tool_call_id=approval.tool_call_id, approved=deferred_pb2.ToolApproved()
                    )
                ]
            ),
        )
        answered = await run(stub, answer)
    assert all(d.startswith("v2:") for d in stored_digests(path).values())
    store_as_an_older_server(path, [prompt, answer])

    with logged_serve("--store", f"sqlite:{path}") as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
            for spec, original in ((prompt, first), (answer, answered)):
                again = await run(stub, spec)
                assert again.replayed and (again.result, again.revision) == (
                    original.result,
                    original.revision,
                )
            other = ts.ThreadRunSpec()
            other.CopyFrom(prompt)
            other.text = "delete b.txt"
            code, reason, _ = await refused(run(stub, other))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_ID_REUSED")
    assert stored_digests(path) == {s.request_id: legacy_digest(s) for s in (prompt, answer)}, (
        "left as stored"
    )


_NO_PROTOBUF = """
import json, sys
for name in ("google.protobuf", "grpc", "threadline", "server"):
    sys.modules[name] = None  # importing any of them now fails
from harness.threads import ThreadRunRequest
spec = json.loads(sys.argv[1])
request = ThreadRunRequest(
    thread_id=spec["thread_id"], request_id=spec["request_id"], expected_revision=0, input=spec["text"],
    answers=None, tool_recovery="never", client_tools=(), usage_limits=None,
)
print(request.digest)
"""


async def test_a_host_embedding_the_core_gets_the_digest_the_server_stores_without_protobuf(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    async with serving(path) as stub:
        thread = await create_thread(stub)
        spec = thread_spec(thread.thread_id, text="hello")
        await run(stub, spec)
    argument = json.dumps({"thread_id": spec.thread_id, "request_id": spec.request_id, "text": spec.text})
    embedded = subprocess.run(
        [sys.executable, "-c", _NO_PROTOBUF, argument],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout.strip()
    assert embedded == stored_digests(path)[spec.request_id]


def digest(**fields: Any) -> str:
    return request_digest(**{"expected_revision": 0, "input": None, "answers": None, **fields})


def test_the_digest_is_a_fixed_function_of_the_request() -> None:
    # Golden: a change in how digests are made would turn every retry of a stored request into
    # REQUEST_ID_REUSED.
    assert digest(input="hi") == "v2:e6ab44ba3696389650a847082e5bd1638a134186e8f032a18b4988d232e1"
    meaning = (
        b'{"answers":{"approvals":{"call-1":{"kind":"tool-approved"}}},'
        b'"busy_strategy":"reject","expected_revision":3,"input":null}'
    )
    answers = DeferredToolResults(approvals={"call-1": ToolApproved()})
    assert digest(expected_revision=3, answers=answers) == "v2:" + hashlib.sha256(meaning).hexdigest()[:60]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        # Answers are by call ID: their order is no part of the request.
        (
            {"answers": DeferredToolResults(calls={"a": 1, "b": 2})},
            {"answers": DeferredToolResults(calls={"b": 2, "a": 1})},
        ),
        # A value given at its default says what the default says.
        (
            {"answers": DeferredToolResults(approvals={"a": ToolDenied()})},
            {"answers": DeferredToolResults(approvals={"a": ToolDenied("The tool call was denied.")})},
        ),
        ({"input": ["see", ImageUrl("https://x/a.png")]}, {"input": ("see", ImageUrl("https://x/a.png"))}),
    ],
)
def test_requests_that_mean_the_same_have_one_digest(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert digest(**one) == digest(**other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"input": "hi"}, {"input": ["hi"]}),
        ({"input": "hi"}, {"input": "hi", "expected_revision": 2}),
        ({"input": ["see", ImageUrl("https://x/a.png")]}, {"input": ["see", DocumentUrl("https://x/a.png")]}),
        (
            {"input": [BinaryContent(b"a", media_type="image/png")]},
            {"input": [BinaryContent(b"b", media_type="image/png")]},
        ),
        (
            {"answers": DeferredToolResults(calls={"a": 1})},
            {"answers": DeferredToolResults(calls={"a": "1"})},
        ),
        (
            {"answers": DeferredToolResults(calls={"a": ToolReturn(1)})},
            {"answers": DeferredToolResults(calls={"a": ToolReturn(1, content="seen")})},
        ),
        (
            {"answers": DeferredToolResults(approvals={"a": ToolApproved()})},
            {"answers": DeferredToolResults(approvals={"a": ToolDenied()})},
        ),
        ({"input": None}, {"answers": DeferredToolResults()}),
    ],
)
def test_requests_that_differ_have_different_digests(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert digest(**one) != digest(**other)


def test_a_request_matches_a_legacy_record_only_by_its_legacy_digest() -> None:
    def request(legacy: str | None) -> ThreadRunRequest:
        return ThreadRunRequest(
            thread_id="t",
            request_id="r",
            expected_revision=0,
            input="hi",
            answers=None,
            tool_recovery="declared",
            client_tools=(),
            usage_limits=None,
            legacy_digest=legacy,
        )

    old = "ab" * 32
    assert request(old).matches(old) and request(None).matches(request(None).digest)
    assert not request("cd" * 32).matches(old)
    assert not request(None).matches(old), "without its legacy digest, a host cannot tell: another request"
    assert not request(old).matches("v2:" + old[:60]), "a v2 record is compared by the v2 digest"
