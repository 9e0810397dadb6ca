"""`CapabilityStateStore`, the `ctx.deps.state` object (SPEC §2.8, order rules of §2.1.4)."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from harness.capability_state import CapabilityStateStore
from harness.errors import ErrorCode, StateError
from harness.state import AgentContextStateSnapshot, CapabilityState, HarnessState

pytestmark = pytest.mark.anyio


class CounterState(BaseModel):
    value: int


class Notes(BaseModel):
    items: list[str] = []
    score: float = 0.0


def seeded() -> CapabilityStateStore:
    return CapabilityStateStore(
        AgentContextStateSnapshot.model_validate(
            {
                "entries": {
                    "a13n.usage": {"version": "1", "data": {"z": 1, "a": [2.5]}},
                    "acme.counter": {"version": "1", "data": {"value": 4}},
                }
            }
        )
    )


async def test_design_document_example_runs_as_written() -> None:
    context = SimpleNamespace(state=CapabilityStateStore())
    for expected in (1, 2):
        current = await context.state.read("acme.counter", CounterState, version="1")
        await context.state.write(
            "acme.counter", CounterState(value=(current.value if current else 0) + 1), version="1"
        )
        assert await context.state.read("acme.counter", CounterState, version="1") == CounterState(
            value=expected
        )


async def test_read_absent_and_fresh_instances() -> None:
    store = seeded()
    assert await store.read("acme.other", CounterState, version="1") is None
    one = await store.read("acme.counter", CounterState, version="1")
    two = await store.read("acme.counter", CounterState, version="1")
    assert one == two == CounterState(value=4)
    assert one is not two


async def test_read_is_lax() -> None:
    store = CapabilityStateStore(
        AgentContextStateSnapshot.model_validate(
            {"entries": {"n": {"version": "1", "data": {"items": [], "score": 1}}}}
        )
    )
    assert await store.read("n", Notes, version="1") == Notes(items=[], score=1.0)


@pytest.mark.parametrize("capability_id", ["", "   ", "\n"])
async def test_blank_id(capability_id: str) -> None:
    store = seeded()
    with pytest.raises(StateError) as exc:
        await store.read(capability_id, CounterState, version="1")
    assert exc.value.code is ErrorCode.CAPABILITY_STATE_ID_INVALID
    with pytest.raises(StateError) as exc:
        await store.write(capability_id, CounterState(value=1), version="1")
    assert exc.value.code is ErrorCode.CAPABILITY_STATE_ID_INVALID


@pytest.mark.parametrize("version", ["", "  "])
async def test_blank_version(version: str) -> None:
    store = seeded()
    for call in (
        store.read("acme.counter", CounterState, version=version),
        store.write("acme.counter", CounterState(value=1), version=version),
    ):
        with pytest.raises(StateError) as exc:
            await call
        assert exc.value.code is ErrorCode.CAPABILITY_STATE_VERSION_INVALID
        assert exc.value.details == {"capability_id": "acme.counter"}


async def test_version_must_match_exactly() -> None:
    store = seeded()
    with pytest.raises(StateError) as exc:
        await store.read("acme.counter", CounterState, version="2")
    assert exc.value.code is ErrorCode.CAPABILITY_STATE_VERSION_UNSUPPORTED
    assert exc.value.details == {
        "capability_id": "acme.counter",
        "expected_version": "2",
        "actual_version": "1",
    }
    assert exc.value.code.upper() == "CAPABILITY_STATE_VERSION_UNSUPPORTED"


async def test_stored_data_that_does_not_validate() -> None:
    store = seeded()
    with pytest.raises(StateError) as exc:
        await store.read("a13n.usage", CounterState, version="1")
    assert exc.value.code is ErrorCode.CAPABILITY_STATE_INVALID
    assert exc.value.details == {"capability_id": "a13n.usage"}


@pytest.mark.parametrize(
    "value",
    [{"value": 1}, 5, None, Notes(score=math.nan), Notes(score=math.inf)],
)
async def test_write_refuses_non_models_and_non_finite(value: Any) -> None:
    store = seeded()
    before = store.snapshot()
    with pytest.raises(StateError) as exc:
        await store.write("acme.notes", value, version="1")
    assert exc.value.code is ErrorCode.CAPABILITY_STATE_INVALID
    assert exc.value.details == {"capability_id": "acme.notes"}
    assert store.snapshot() is before


async def test_write_stores_json_mode_dump_canonically() -> None:
    store = CapabilityStateStore()
    await store.write("acme.notes", Notes(items=["é"], score=1.0), version="3")
    entry = store.snapshot().get("acme.notes")
    assert entry == CapabilityState(version="3", data={"items": ["é"], "score": 1.0})
    assert entry is not None and entry.data_json() == '{"items":["é"],"score":1.0}'


async def test_order_restored_first_then_write_order_and_rewrites_keep_place() -> None:
    store = seeded()
    await store.write("new.b", CounterState(value=1), version="1")
    await store.write("new.a", CounterState(value=1), version="1")
    await store.write("a13n.usage", CounterState(value=9), version="2")
    await store.write("new.b", CounterState(value=2), version="1")
    snapshot = store.snapshot()
    assert list(snapshot.entries) == ["a13n.usage", "acme.counter", "new.b", "new.a"]
    assert snapshot.get("a13n.usage") == CapabilityState(version="2", data={"value": 9})
    assert snapshot.get("new.b") == CapabilityState(version="1", data={"value": 2})


async def test_snapshot_is_detached_and_rebuilt_only_after_a_change() -> None:
    seed = seeded().snapshot()
    store = CapabilityStateStore(seed)
    first = store.snapshot()
    assert first == seed
    assert store.snapshot() is first
    await store.write("acme.counter", CounterState(value=4), version="1")  # equal entry: a no-op
    assert store.snapshot() is first
    await store.write("acme.counter", CounterState(value=5), version="1")
    second = store.snapshot()
    assert second is not first
    assert first.get("acme.counter") == CapabilityState(version="1", data={"value": 4})
    assert seed.get("acme.counter") == CapabilityState(version="1", data={"value": 4})
    second.entries.clear()
    assert list(store.snapshot().entries) == ["a13n.usage", "acme.counter"]


async def test_unknown_namespaces_reexport_byte_for_byte() -> None:
    text = (
        '{"schema_version":"1","thread_id":"a_b","agent_context_state":{"entries":'
        '{"a13n.steering":{"version":"7","data":{"b":[1.5,{"y":null,"x":"é"}],"a":1}},'
        '"acme.counter":{"version":"1","data":{"value":1}}}}}'
    )
    state = HarnessState.model_validate_json(text)
    store = CapabilityStateStore(state.agent_context_state)
    await store.write("acme.counter", CounterState(value=2), version="1")
    exported = HarnessState._from_parts(
        thread_id=state.thread_id, history=(), snapshot=store.snapshot(), environment_states={}, extra={}
    )
    dumped = exported.model_dump_json()
    assert '"a13n.steering":{"version":"7","data":{"a":1,"b":[1.5,{"x":"é","y":null}]}}' in dumped
    assert '"acme.counter":{"version":"1","data":{"value":2}}' in dumped


async def test_a_write_takes_effect_in_one_step_so_concurrent_writers_keep_call_order() -> None:
    """A write has no `await` between its check and its replacement (SPEC §2.8, docs/amendments.md):
    however concurrent tool calls interleave, each namespace holds the value of the write called last."""
    store = CapabilityStateStore()
    called: list[tuple[str, int]] = []

    async def write(i: int) -> None:
        for _ in range(i % 3):  # interleave the writers differently
            await asyncio.sleep(0)
        namespace = f"ns.{i % 5}"
        called.append((namespace, i))
        await store.write(namespace, CounterState(value=i), version="1")
        seen = await store.read(namespace, CounterState, version="1")
        assert seen is not None  # another writer may have replaced it since, never half-way

    await asyncio.gather(*(write(i) for i in range(50)))
    last = {namespace: i for namespace, i in called}
    snapshot = store.snapshot()
    assert sorted(snapshot.entries) == sorted(last)
    for namespace, i in last.items():
        entry = snapshot.get(namespace)
        assert entry is not None and entry.version == "1"
        data: Any = entry.data
        assert data["value"] == i


async def test_read_refuses_a_non_model_type() -> None:
    store = seeded()
    with pytest.raises(StateError) as exc:
        await store.read("acme.counter", dict, version="1")  # type: ignore[type-var]  # on purpose
    assert exc.value.code is ErrorCode.CAPABILITY_STATE_INVALID
