"""One strict, bounded JSON parser for every JSON text from outside (issue 10, items 2 and 6).

JSON nested 1 000 deep answered UNKNOWN `RecursionError`; a lone surrogate escape answered INTERNAL
from `Run`, UNKNOWN from `StreamRun` and `RemainingDeferred`. Now both are the field's own reason with
its path, in-process and over the wire.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from conftest import RunningServer, StartServer, error_info
from threadline.v1 import deferred_pb2, harness_service_pb2, harness_service_pb2_grpc, run_pb2

from harness import ExecutableAgent
from harness.json_text import MAX_JSON_DEPTH, JsonTextError, NotFiniteJson, check_finite_json, parse_json
from server.agents import AgentRegistry
from server.demo import demo_agent

pytestmark = pytest.mark.anyio

DEEP = "[" * 1000 + "]" * 1000


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (DEEP, "not valid JSON (recursion limit exceeded"),
        ("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, f"nested deeper than {MAX_JSON_DEPTH} levels"),
        ('"\\ud800"', "lone surrogate"),
        ("[NaN]", "not valid JSON"),
        ("[1e400]", "too large for a double"),
        ('{"a":1,"a":2}', "object key 'a' appears twice"),
        ("[1] x", "trailing characters"),
    ],
)
def test_parse_json_refuses_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(JsonTextError) as caught:
        parse_json(text)
    assert why in str(caught.value)


def test_parse_json_accepts_what_is_json() -> None:
    depth = MAX_JSON_DEPTH - 1
    assert parse_json("[" * depth + "]" * depth) is not None
    assert parse_json('{"a":[1,2.5,"é",null,true,{"b":"\\ud83d\\ude00"}]}') == {
        "a": [1, 2.5, "é", None, True, {"b": "😀"}]
    }


def test_python_values_are_held_to_the_same_rules() -> None:
    deep: Any = []
    for _ in range(2000):
        deep = [deep]
    for value in (deep, ["\ud800"], {"\udfff": 1}, [float("nan")]):
        with pytest.raises(NotFiniteJson):
            check_finite_json(value)


def deep_result(text: str) -> deferred_pb2.DeferredToolResume:
    return deferred_pb2.DeferredToolResume(
        results=deferred_pb2.DeferredToolResults(
            calls=[deferred_pb2.CallResult(tool_call_id="c", value_json=text)]
        )
    )


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield harness_service_pb2_grpc.HarnessServiceStub(channel)


@pytest.mark.parametrize("text", [DEEP, '"\\ud800"'])
@pytest.mark.parametrize("method", ["Run", "StreamRun", "RemainingDeferred"])
async def test_over_the_wire_each_is_the_fields_reason_with_its_path(
    stub: Any, method: str, text: str
) -> None:
    resume = deep_result(text)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if method == "Run":
            await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(deferred_resume=resume)))
        elif method == "StreamRun":
            request = harness_service_pb2.StreamRunRequest(spec=run_pb2.RunSpec(deferred_resume=resume))
            async for _ in stub.StreamRun(request):
                pass
        else:
            await stub.RemainingDeferred(harness_service_pb2.RemainingDeferredRequest(resume=resume))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = error_info(caught.value)
    assert info.reason == "DEFERRED_RESULTS_INVALID"
    prefix = "resume" if method == "RemainingDeferred" else "spec.deferred_resume"
    assert (
        f"{prefix}.results.calls[0].value_json" in caught.value.details()
        or info.metadata["tool_call_id"] == "c"
    )


async def test_a_deep_client_tool_schema_is_client_tool_invalid(stub: Any) -> None:
    tool = run_pb2.ClientTool(name="w", parameters_json_schema='{"a":' * 1000 + "1" + "}" * 1000)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Run(harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hi", client_tools=[tool])))
    assert error_info(caught.value).reason == "CLIENT_TOOL_INVALID"


class _Broken(ExecutableAgent[str]):
    def stream(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals: /srv/keys")


async def test_an_unexpected_exception_before_the_run_is_logged_with_ids_and_typed(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 10, item 11: the host gets INTERNAL_ERROR without internals, the log the ids and traceback."""
    caplog.set_level(logging.INFO, logger="threadline.server")
    broken = _Broken(demo_agent().native.model)  # type: ignore[arg-type]
    server = await start_server(agents=AgentRegistry({"broken": broken}, default="broken"))
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Run(
                harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="hi", request_id="req-crash"))
            )
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert error_info(caught.value).reason == "INTERNAL_ERROR"
    assert "secret" not in caught.value.details() and "RuntimeError" not in caught.value.details()
    [record] = [r for r in caplog.records if r.getMessage() == "request_crashed"]
    assert record.fields == {"method": "run", "request_id": "req-crash"}  # type: ignore[attr-defined]
    assert record.exc_info is not None and "secret internals" in str(record.exc_info[1])
