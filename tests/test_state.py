"""`HarnessState`, its component models and `load_state` (SPEC §2.1, §2.9, Interoperability)."""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from harness import (
    AgentContextStateSnapshot,
    CapabilityState,
    EnvironmentState,
    HarnessState,
    StoredRef,
    load_state,
)
from harness.errors import ErrorCode, StateError

TS = datetime(2026, 1, 1, tzinfo=UTC)
HEX = "0123456789abcdef" * 2
DIGEST = "ab" * 32


def history() -> list[ModelMessage]:
    return [
        ModelRequest(
            parts=[
                SystemPromptPart("Be brief.", timestamp=TS),
                UserPromptPart("Draft the plan", timestamp=TS),
            ]
        ),
        ModelResponse(
            parts=[TextPart("Calling."), ToolCallPart("lookup", {"q": "plan", "n": 1.5}, tool_call_id="c1")],
            timestamp=TS,
        ),
        ModelRequest(
            parts=[ToolReturnPart("lookup", {"hits": [1, 2]}, tool_call_id="c1", timestamp=TS)], timestamp=TS
        ),
        ModelResponse(parts=[TextPart("Done.")], timestamp=TS),
    ]


def full_state(**overrides: Any) -> HarnessState:
    data: dict[str, Any] = {
        "schema_version": "1",
        "thread_id": "thr_productthread1",
        "agent_context_state": {"entries": {"acme.counter": {"version": "1", "data": {"value": 1}}}},
        "refs": [],
        "host_note": {"kept": True},
        "message_history": history(),
        "environment_states": {
            "workspace": {"provider_key": "docker", "state_version": "1", "state": {"container": "abc"}}
        },
    }
    data.update(overrides)
    return HarnessState.model_validate(data)


def errors_of(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[tuple[str | int, ...], str]]:
    return [(tuple(e["loc"]), e["type"]) for e in exc.value.errors()]


def state_errors_of(exc: pytest.ExceptionInfo[StateError]) -> list[tuple[tuple[str | int, ...], str]]:
    return [(tuple(e["loc"]), e["type"]) for e in exc.value.details["errors"]]


# --- §2.1.1 fields and validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "thread_id", ["thr_productthread1", "a_b", f"thread_{HEX}", f"thread-{HEX}", "x" + "_1" * 1]
)
def test_valid_thread_ids(thread_id: str) -> None:
    assert HarnessState.new(thread_id=thread_id).thread_id == thread_id


@pytest.mark.parametrize(
    "thread_id",
    ["thr_a_b", "Thr_1", "thr_A1", "1thr_a", "thr-1", "thread_", f"thread-{HEX.upper()}", "", "a_b\n"],
)
def test_invalid_thread_ids(thread_id: str) -> None:
    with pytest.raises(StateError) as exc:  # the core's own error, never pydantic's (issue 24, item 9)
        HarnessState.new(thread_id=thread_id)
    assert exc.value.code is ErrorCode.STATE_INVALID
    assert state_errors_of(exc) == [(("thread_id",), "string_pattern_mismatch")]
    with pytest.raises(StateError) as forked:
        HarnessState.new().fork(thread_id=thread_id)
    assert state_errors_of(forked) == state_errors_of(exc)


def test_thread_id_length_limit() -> None:
    assert len(HarnessState.new(thread_id="a_" + "b" * 254).thread_id) == 256
    with pytest.raises(StateError) as exc:
        HarnessState.new(thread_id="a_" + "b" * 255)
    assert state_errors_of(exc) == [(("thread_id",), "string_too_long")]


def test_thread_id_is_required() -> None:
    with pytest.raises(ValidationError) as exc:
        HarnessState.model_validate({"schema_version": "1"})
    assert errors_of(exc) == [(("thread_id",), "missing")]


@pytest.mark.parametrize(
    ("value", "kind"), [("2", "literal_error"), ("0", "literal_error"), (1, "literal_error")]
)
def test_schema_version_rejected(value: object, kind: str) -> None:
    with pytest.raises(ValidationError) as exc:
        HarnessState.model_validate({"schema_version": value, "thread_id": "a_b"})
    assert errors_of(exc) == [(("schema_version",), kind)]


def test_schema_version_missing() -> None:
    with pytest.raises(ValidationError) as exc:
        HarnessState.model_validate_json('{"thread_id":"a_b"}')
    assert errors_of(exc) == [(("schema_version",), "missing")]


def test_new_defaults_and_generated_id() -> None:
    state = HarnessState.new()
    assert state.schema_version == "1"
    assert state.thread_id.startswith("thread_") and len(state.thread_id) == 39
    assert int(state.thread_id[7:], 16) >= 0
    assert state.agent_context_state == AgentContextStateSnapshot(entries={})
    assert state.refs == ()
    assert state.message_history == ()
    assert state.environment_states == {}
    assert state.extra_fields == {}
    assert HarnessState.new().thread_id != state.thread_id


def test_new_accepts_snapshot_or_dict_form() -> None:
    snapshot = AgentContextStateSnapshot(entries={"a.b": CapabilityState(version="1", data=[1])})
    one = HarnessState.new(thread_id="a_b", agent_context_state=snapshot)
    two = HarnessState.new(
        thread_id="a_b", agent_context_state={"entries": {"a.b": {"version": "1", "data": [1]}}}
    )
    assert one == two
    assert one.agent_context_state.get("a.b") == CapabilityState(version="1", data=[1])


def test_frozen_assignment() -> None:
    state = full_state()
    for name, value in [
        ("thread_id", "a_b"),
        ("message_history", ()),
        ("environment_states", {}),
        ("host_note", 1),
    ]:
        with pytest.raises(ValidationError) as exc:
            setattr(state, name, value)
        assert exc.value.errors()[0]["type"] == "frozen_instance"
    with pytest.raises(ValidationError):
        state.agent_context_state.entries = {}  # type: ignore[misc]  # frozen on purpose


# --- message_history ---------------------------------------------------------------------------------


def test_history_reads_are_detached() -> None:
    state = full_state()
    first, second = state.message_history, state.message_history
    assert isinstance(first, tuple) and first == second
    assert first is not second and all(a is not b for a, b in zip(first, second, strict=True))
    part: Any = first[0].parts[1]
    part.content = "tampered"
    assert state.message_history == second


def test_history_json_is_the_native_encoding() -> None:
    state = full_state()
    native = ModelMessagesTypeAdapter.dump_json(history())
    assert state.message_history_json() == native
    assert state.message_history_json() == ModelMessagesTypeAdapter.dump_json(list(state.message_history))
    assert state.message_count() == 4
    assert f',"message_history":{native.decode()},' in state.model_dump_json()


def test_history_accepts_json_mode_dicts_and_objects() -> None:
    as_dicts = ModelMessagesTypeAdapter.dump_python(history(), mode="json")
    mixed = [history()[0], *as_dicts[1:]]
    assert full_state(message_history=as_dicts) == full_state()
    assert full_state(message_history=mixed) == full_state()
    assert full_state(message_history=tuple(history())) == full_state()


def test_binary_content_round_trips() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                UserPromptPart(["look", BinaryContent(b"\x00\xffpng", media_type="image/png")], timestamp=TS)
            ]
        )
    ]
    state = HarnessState.new(thread_id="a_b", message_history=messages)
    assert state.message_history_json() == ModelMessagesTypeAdapter.dump_json(messages)
    again = HarnessState.model_validate_json(state.model_dump_json())
    assert again == state
    part = again.message_history[0].parts[0]
    assert isinstance(part, UserPromptPart) and part.content[1].data == b"\x00\xffpng"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "bad",
    [
        [{"kind": "nope"}],
        [{"kind": "request", "parts": [{"part_kind": "user-prompt"}]}],
        "not a list",
        {"kind": "request"},
        [ModelRequest(parts=[42])],  # type: ignore[list-item]  # not a part
    ],
)
def test_invalid_history(bad: object) -> None:
    with pytest.raises(ValidationError) as exc:
        full_state(message_history=bad)
    (error,) = exc.value.errors()
    assert error["loc"] == ("message_history",)
    assert error["type"] == "value_error"
    assert "Invalid Agent message history." in error["msg"]


def test_non_finite_history_is_refused() -> None:
    nan_call = [ModelResponse(parts=[ToolCallPart("f", {"x": math.nan}, tool_call_id="c")], timestamp=TS)]
    with pytest.raises(StateError) as exc:
        HarnessState.new(thread_id="a_b", message_history=nan_call)
    assert state_errors_of(exc) == [(("message_history",), "value_error")]
    text = full_state().model_dump_json().replace('"n":1.5', '"n":NaN')
    with pytest.raises(ValidationError):
        HarnessState.model_validate_json(text)
    text = full_state().model_dump_json().replace('"n":1.5', '"n":1e999')
    with pytest.raises(ValidationError):
        HarnessState.model_validate_json(text)
    # The words themselves are fine inside strings.
    worded = [ModelResponse(parts=[TextPart("NaN and Infinity")], timestamp=TS)]
    assert HarnessState.new(thread_id="a_b", message_history=worded).message_count() == 1


# --- §2.1.2 JSON form ------------------------------------------------------------------------------


def test_json_form_matches_the_spec_example() -> None:
    prompt = [
        {
            "parts": [
                {"content": "Draft the plan", "timestamp": "2026-01-01T00:00:00Z", "part_kind": "user-prompt"}
            ],
            "kind": "request",
        }
    ]
    state = full_state(message_history=prompt)
    text = state.model_dump_json()
    assert text.startswith(
        '{"schema_version":"1","thread_id":"thr_productthread1",'
        '"agent_context_state":{"entries":{"acme.counter":{"version":"1","data":{"value":1}}}},'
        '"refs":[],"host_note":{"kept":true},'
        '"message_history":[{"parts":[{"content":"Draft the plan","timestamp":"2026-01-01T00:00:00Z","part_kind":"user-prompt"}]'
        ',"timestamp":null,"instructions":null,"kind":"request",'
    )
    assert text.endswith(
        ',"environment_states":{"workspace":{"provider_key":"docker","state_version":"1","state":{"container":"abc"}}}}'
    )
    assert list(json.loads(text)) == [
        "schema_version",
        "thread_id",
        "agent_context_state",
        "refs",
        "host_note",
        "message_history",
        "environment_states",
    ]


def test_round_trip_is_byte_identical() -> None:
    state = full_state()
    text = state.model_dump_json()
    again = HarnessState.model_validate_json(text)
    assert again == state and hash(again) == hash(state)
    assert again.model_dump_json() == text
    assert HarnessState.model_validate_json(text.encode()).model_dump_json() == text


def test_equality_is_equality_of_json_forms() -> None:
    assert full_state() == full_state()
    assert full_state() != full_state(thread_id="a_b")
    assert full_state() != full_state(host_note={"kept": False})
    # Unknown-key order is part of the JSON form.
    one = HarnessState.model_validate({"schema_version": "1", "thread_id": "a_b", "x": 1, "y": 2})
    two = HarnessState.model_validate({"schema_version": "1", "thread_id": "a_b", "y": 2, "x": 1})
    assert one != two
    assert full_state() != "not a state"


def test_unknown_keys_kept_verbatim_and_in_order() -> None:
    text = (
        '{"schema_version":"1","thread_id":"a_b","zeta":{"b":1,"a":[1.0,"é"]},"refs":[],"alpha":null,'
        '"message_history":[],"mid":[true,{"y":2,"x":1}]}'
    )
    state = HarnessState.model_validate_json(text)
    dumped = state.model_dump_json()
    assert dumped == (
        '{"schema_version":"1","thread_id":"a_b","agent_context_state":{"entries":{}},"refs":[],'
        '"zeta":{"b":1,"a":[1.0,"é"]},"alpha":null,"mid":[true,{"y":2,"x":1}],'
        '"message_history":[],"environment_states":{}}'
    )
    assert state.extra_fields == {
        "zeta": {"b": 1, "a": [1.0, "é"]},
        "alpha": None,
        "mid": [True, {"y": 2, "x": 1}],
    }
    assert list(state.extra_fields) == ["zeta", "alpha", "mid"]
    assert (
        state.extra_fields_json() == '{"zeta":{"b":1,"a":[1.0,"é"]},"alpha":null,"mid":[true,{"y":2,"x":1}]}'
    )
    fork = state.fork(thread_id="b_c")
    assert fork.model_dump_json() == dumped.replace('"a_b"', '"b_c"')


def test_unknown_keys_are_detached() -> None:
    state = full_state()
    note: Any = state.extra_fields["host_note"]
    note["kept"] = False
    note = getattr(state, "host_note")  # noqa: B009  # an unknown key, read as pydantic offers it
    note["kept"] = False
    assert state.model_extra is not None
    state.model_extra["host_note"] = 0
    assert state.extra_fields == {"host_note": {"kept": True}}


def test_unknown_keys_must_be_finite_json() -> None:
    with pytest.raises(ValidationError) as exc:
        HarnessState.model_validate({"schema_version": "1", "thread_id": "a_b", "bad": math.inf})
    assert errors_of(exc) == [(("bad",), "value_error")]
    with pytest.raises(ValidationError):
        HarnessState.model_validate({"schema_version": "1", "thread_id": "a_b", "bad": object()})
    with pytest.raises(ValidationError):
        HarnessState.model_validate_json('{"schema_version":"1","thread_id":"a_b","bad":NaN}')


def test_python_dump_shape() -> None:
    state = full_state(refs=[{"key": "k", "digest": DIGEST, "size": 3}])
    dumped = state.model_dump()
    assert list(dumped) == [
        "schema_version",
        "thread_id",
        "agent_context_state",
        "refs",
        "host_note",
        "message_history",
        "environment_states",
    ]
    assert dumped["refs"] == ({"key": "k", "digest": DIGEST, "size": 3},)
    assert isinstance(dumped["message_history"], tuple) and len(dumped["message_history"]) == 4
    assert dumped["agent_context_state"] == {
        "entries": {"acme.counter": {"version": "1", "data": {"value": 1}}}
    }
    assert HarnessState.model_validate(dumped) == state
    as_json = state.model_dump(mode="json")
    assert as_json["message_history"] == json.loads(state.message_history_json())
    assert HarnessState.model_validate(as_json) == state
    assert json.loads(state.model_dump_json(indent=2)) == json.loads(state.model_dump_json())
    assert list(json.loads(state.model_dump_json(indent=2))) == list(dumped)
    assert "_seal" not in state.model_dump_json() and "encoded" not in state.model_dump_json()


def test_spec_examples_run_as_written() -> None:
    state = full_state()
    # §1.4
    payload = state.model_dump_json()
    restored = HarnessState.model_validate_json(payload)
    assert restored == state
    # §1.5
    branch_state = state.fork(thread_id="thr_productbranch1")
    assert branch_state.thread_id != state.thread_id
    assert branch_state.message_history == state.message_history


# --- §2.1.3 fork -------------------------------------------------------------------------------------


def test_fork_copies_continuation_and_clears_environments() -> None:
    state = full_state(refs=[{"key": "k", "digest": DIGEST, "size": 0}])
    branch = state.fork()
    assert branch.thread_id.startswith("thread_") and branch.thread_id != state.thread_id
    assert branch.message_history_json() == state.message_history_json()
    assert branch.agent_context_state == state.agent_context_state
    assert branch.refs == state.refs
    assert branch.extra_fields == state.extra_fields
    assert branch.environment_states == {}
    assert branch.schema_version == "1"
    assert state.environment_states != {}


def test_fork_to_the_same_id_conflicts() -> None:
    state = full_state()
    with pytest.raises(StateError) as exc:
        state.fork(thread_id=state.thread_id)
    assert exc.value.code is ErrorCode.FORK_THREAD_ID_CONFLICT
    with pytest.raises(StateError) as invalid:
        state.fork(thread_id="Bad")
    assert invalid.value.code is ErrorCode.STATE_INVALID
    assert state_errors_of(invalid) == [(("thread_id",), "string_pattern_mismatch")]


# --- §2.1.4 capability snapshot -------------------------------------------------------------------------


def test_capability_data_is_canonical() -> None:
    entry = CapabilityState(version="1", data={"b": 1, "a": [1.0, "é"]})
    assert entry.data_json() == '{"a":[1.0,"é"],"b":1}'
    assert entry.model_dump_json() == '{"version":"1","data":{"a":[1.0,"é"],"b":1}}'
    assert list(entry.data) == ["a", "b"]  # type: ignore[arg-type]
    state = HarnessState.new(thread_id="a_b", agent_context_state={"entries": {"z.ns": entry, "a.ns": entry}})
    assert '"entries":{"z.ns":{"version":"1","data":{"a":[1.0,"é"],"b":1}},"a.ns":' in state.model_dump_json()


def test_capability_data_is_detached() -> None:
    entry = CapabilityState(version="1", data={"a": [1]})
    data = entry.data
    assert isinstance(data, dict)
    data["a"] = 2
    assert entry.data == {"a": [1]}
    source: dict[str, Any] = {"a": [1]}
    entry = CapabilityState(version="1", data=source)
    source["a"].append(2)
    assert entry.data == {"a": [1]}


@pytest.mark.parametrize(
    ("data", "kind", "loc"),
    [
        ({"version": "", "data": 1}, "string_too_short", ("version",)),
        ({"version": 1, "data": 1}, "string_type", ("version",)),
        ({"version": "1"}, "missing", ("data",)),
        ({"version": "1", "data": 1, "x": 1}, "extra_forbidden", ("x",)),
        ({"version": "1", "data": math.nan}, "value_error", ("data",)),
        ({"version": "1", "data": (1, 2)}, "value_error", ("data",)),
        ({"version": "1", "data": {1: 2}}, "value_error", ("data",)),
    ],
)
def test_capability_state_rules(data: dict[str, Any], kind: str, loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as exc:
        CapabilityState.model_validate(data)
    assert errors_of(exc) == [(loc, kind)]


def test_snapshot_rules() -> None:
    snapshot = AgentContextStateSnapshot.model_validate(
        {"entries": {"b": {"version": "1", "data": 1}, "a": {"version": "2", "data": None}}}
    )
    assert list(snapshot.entries) == ["b", "a"]
    assert snapshot.get("a") == CapabilityState(version="2", data=None)
    assert snapshot.get("missing") is None
    snapshot.entries.clear()
    assert len(snapshot.entries) == 2
    assert AgentContextStateSnapshot().entries == {}
    for blank in ["", "  ", "\t"]:
        with pytest.raises(ValidationError) as exc:
            AgentContextStateSnapshot.model_validate({"entries": {blank: {"version": "1", "data": 1}}})
        assert exc.value.errors()[0]["type"] == "value_error"
    with pytest.raises(ValidationError) as extra:
        AgentContextStateSnapshot.model_validate({"entries": {}, "other": 1})
    assert errors_of(extra) == [(("other",), "extra_forbidden")]


def test_reference_library_namespaces_pass_unchanged() -> None:
    entries: dict[str, Any] = {
        "a13n.usage": {"version": "1", "data": {"requests": 3, "details": {"z": 1, "a": 2.5}}},
        "a13n.steering": {"version": "3", "data": []},
        "a13n.tool-execution-boundary.review-history": {"version": "1", "data": [{"id": "x"}]},
    }
    text = json.dumps(
        {"schema_version": "1", "thread_id": "a_b", "agent_context_state": {"entries": entries}}
    )
    state = HarnessState.model_validate_json(text)
    assert list(state.agent_context_state.entries) == list(entries)
    again = HarnessState.model_validate_json(state.model_dump_json())
    assert again.model_dump_json() == state.model_dump_json()
    usage = state.agent_context_state.get("a13n.usage")
    assert usage is not None and usage.data == entries["a13n.usage"]["data"]


# --- §2.1.5 environment states and refs ----------------------------------------------------------------


def env(**overrides: Any) -> dict[str, Any]:
    return {"provider_key": "docker", "state_version": "1", "state": {"c": 1}} | overrides


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("data", "kind", "loc"),
    [
        (env(provider_key="Docker"), "string_pattern_mismatch", ("provider_key",)),
        (env(provider_key="a" * 65), "string_pattern_mismatch", ("provider_key",)),
        (env(state_version=""), "string_too_short", ("state_version",)),
        (env(state_version="v" * 65), "string_too_long", ("state_version",)),
        (env(state_version=".1"), "string_pattern_mismatch", ("state_version",)),
        (env(extra=1), "extra_forbidden", ("extra",)),
        (env(state=math.inf), "value_error", ("state",)),
        (env(state=nested(33)), "value_error", ("state",)),
        (env(state=list(range(10_000))), "value_error", ("state",)),
        (env(state="x" * (1024 * 1024)), "value_error", ("state",)),
        ({"provider_key": "d", "state_version": "1"}, "missing", ("state",)),
    ],
)
def test_environment_state_rules(data: dict[str, Any], kind: str, loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as exc:
        EnvironmentState.model_validate(data)
    assert errors_of(exc) == [(loc, kind)]


def test_environment_state_bounds_accept_the_limits() -> None:
    EnvironmentState.model_validate(env(provider_key="a" * 64, state_version="A1._-" + "x" * 59))
    EnvironmentState.model_validate(env(state=nested(32)))
    EnvironmentState.model_validate(env(state=list(range(9_999))))
    EnvironmentState.model_validate(env(state="x" * (1024 * 1024 - 2)))


def test_environment_states_are_detached_and_ordered() -> None:
    state = full_state(environment_states={"z": env(state={"b": 1, "a": 2}), "a": env()})
    states = state.environment_states
    assert list(states) == ["z", "a"]
    assert states["z"].state_json() == '{"a":2,"b":1}'
    states.clear()
    assert list(state.environment_states) == ["z", "a"]
    inner = state.environment_states["z"].state
    assert isinstance(inner, dict)
    inner["a"] = 99
    assert state.environment_states["z"].state == {"a": 2, "b": 1}
    with pytest.raises(ValidationError) as exc:
        full_state(environment_states={"w": env(provider_key="")})
    assert errors_of(exc) == [(("environment_states", "w", "provider_key"), "string_pattern_mismatch")]


@pytest.mark.parametrize(
    ("ref", "kind", "loc"),
    [
        ({"key": "", "digest": DIGEST, "size": 1}, "string_too_short", ("key",)),
        ({"key": "k" * 1025, "digest": DIGEST, "size": 1}, "string_too_long", ("key",)),
        ({"key": "k", "digest": DIGEST.upper(), "size": 1}, "string_pattern_mismatch", ("digest",)),
        ({"key": "k", "digest": DIGEST[:-1], "size": 1}, "string_pattern_mismatch", ("digest",)),
        ({"key": "k", "digest": DIGEST, "size": -1}, "greater_than_equal", ("size",)),
        ({"key": "k", "digest": DIGEST, "size": "1"}, "int_type", ("size",)),
        ({"key": "k", "digest": DIGEST, "size": 1, "x": 0}, "extra_forbidden", ("x",)),
        ({"key": "k", "digest": DIGEST}, "missing", ("size",)),
    ],
)
def test_stored_ref_rules(ref: dict[str, Any], kind: str, loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as exc:
        full_state(refs=[ref])
    assert errors_of(exc) == [(("refs", 0, *loc), kind)]


def test_refs_are_kept() -> None:
    state = full_state(refs=[{"key": "k" * 1024, "digest": DIGEST, "size": 0}])
    assert state.refs == (StoredRef(key="k" * 1024, digest=DIGEST, size=0),)
    assert '"refs":[{"key":"' + "k" * 1024 + f'","digest":"{DIGEST}","size":0}}]' in state.model_dump_json()
    assert HarnessState.model_validate_json(state.model_dump_json()) == state


# --- forged copies and the internal helpers --------------------------------------------------------------


def test_forged_copies_are_detected() -> None:
    state = full_state()
    assert state._is_intact()
    assert state._revalidated() is state
    assert state.model_copy()._is_intact()
    deep = copy.deepcopy(state)
    assert deep._is_intact() and deep == state
    updates: list[dict[str, Any]] = [
        {"thread_id": "Bad id"},
        {"message_history": [1]},
        {"host_note": math.nan},
        {"environment_states": {"w": 1}},
    ]
    for update in updates:
        forged = state.model_copy(update=update)
        assert not forged._is_intact()
        with pytest.raises(ValidationError):
            forged._revalidated()
    fine = state.model_copy(update={"thread_id": "thr_other1"})
    assert not fine._is_intact()
    assert fine._revalidated().thread_id == "thr_other1"
    assert HarnessState.model_construct(schema_version="1", thread_id="a_b")._is_intact() is False


def test_from_parts_builds_a_validated_state() -> None:
    state = full_state()
    built = HarnessState._from_parts(
        thread_id=state.thread_id,
        history=history(),
        snapshot=state.agent_context_state,
        environment_states=state.environment_states,
        extra=state.extra_fields,
    )
    assert built == state and built._is_intact()
    with pytest.raises(ValidationError):
        HarnessState._from_parts(
            thread_id="Bad", history=(), snapshot=AgentContextStateSnapshot(), environment_states={}, extra={}
        )
    with pytest.raises(ValidationError) as exc:
        HarnessState._from_parts(
            thread_id="a_b",
            history=[ModelResponse(parts=[ToolCallPart("f", {"x": math.inf})])],
            snapshot=AgentContextStateSnapshot(),
            environment_states={},
            extra={},
        )
    assert errors_of(exc) == [(("message_history",), "value_error")]


# --- §2.9 load_state ---------------------------------------------------------------------------------------


def test_load_state_accepts_every_form() -> None:
    state = full_state()
    text = state.model_dump_json()
    assert load_state(text) == state
    assert load_state(text.encode()) == state
    assert load_state(bytearray(text.encode())) == state
    assert load_state(json.loads(text)) == state


@pytest.mark.parametrize(
    ("data", "received"),
    [
        ('{"schema_version":"2","thread_id":"a_b"}', "2"),
        ('{"schema_version":1,"thread_id":"BAD","refs":7,"message_history":[{}]}', 1),
        ('{"thread_id":"a_b"}', None),
        ('{"schema_version":null}', None),
        ('{"schema_version":"0","x":NaN}', "0"),
        ({"schema_version": "2", "thread_id": 5}, "2"),
        ({"thread_id": "a_b"}, None),
        ({"schema_version": ["1"]}, ["1"]),
    ],
)
def test_load_state_reads_schema_version_first(data: Any, received: object) -> None:
    with pytest.raises(StateError) as exc:
        load_state(data)
    assert exc.value.code is ErrorCode.SCHEMA_VERSION_UNSUPPORTED
    assert exc.value.details == {"received": received, "supported": ["1"]}


@pytest.mark.parametrize(
    ("data", "first"),
    [
        (
            '{"schema_version":"1","thread_id":"Bad"}',
            {"loc": ["thread_id"], "type": "string_pattern_mismatch"},
        ),
        (
            '{"schema_version":"1","thread_id":"a_b","refs":[{"key":"k"}]}',
            {"loc": ["refs", 0, "digest"], "type": "missing"},
        ),
        (
            '{"schema_version":"1","thread_id":"a_b","message_history":[{}]}',
            {"loc": ["message_history"], "type": "value_error"},
        ),
        ('{"schema_version":"1","thread_id":"a_b","x":NaN}', {"loc": ["x"], "type": "value_error"}),
        ("not json", {"loc": [], "type": "json_invalid"}),
        ("[1, 2]", {"loc": [], "type": "model_type"}),
        (b"\xff\xfe", {"loc": [], "type": "json_invalid"}),
        ({"schema_version": "1"}, {"loc": ["thread_id"], "type": "missing"}),
    ],
)
def test_load_state_invalid(data: Any, first: dict[str, Any]) -> None:
    with pytest.raises(StateError) as exc:
        load_state(data)
    assert exc.value.code is ErrorCode.STATE_INVALID
    errors = exc.value.details["errors"]
    assert isinstance(errors, list) and errors
    head = errors[0]
    assert isinstance(head, dict) and set(head) == {"loc", "type", "msg"}
    assert {"loc": head["loc"], "type": head["type"]} == first
    json.dumps(exc.value.details, allow_nan=False)


def test_load_state_refuses_non_mapping_objects() -> None:
    with pytest.raises(StateError) as exc:
        load_state(42)  # type: ignore[arg-type]  # on purpose
    assert exc.value.code is ErrorCode.STATE_INVALID


# --- Interoperability ---------------------------------------------------------------------------------


REFERENCE_STATE = """{"schema_version":"1","thread_id":"thread-0123456789abcdef0123456789abcdef",
"agent_context_state":{"entries":{"a13n.usage":{"version":"1","data":{"input_tokens":10,"requests":1}},
"acme.counter":{"version":"1","data":{"value":2}}}},"refs":[],
"message_history":[
{"parts":[{"content":"hidden context","timestamp":"2025-06-01T10:00:00Z","dynamic_ref":null,"part_kind":"system-prompt"},
{"content":"Draft the plan","timestamp":"2025-06-01T10:00:00Z","part_kind":"user-prompt"}],
"instructions":null,"kind":"request"},
{"parts":[{"content":"Calling.","id":null,"part_kind":"text"},
{"tool_name":"lookup","args":{"q":"plan"},"tool_call_id":"c1","id":null,"part_kind":"tool-call"}],
"usage":{"input_tokens":5,"cache_write_tokens":0,"cache_read_tokens":0,"output_tokens":3,"input_audio_tokens":0,
"cache_audio_read_tokens":0,"output_audio_tokens":0,"details":{}},"model_name":"gpt-4.1",
"timestamp":"2025-06-01T10:00:01Z","kind":"response","provider_name":"openai","provider_details":null,
"provider_response_id":"resp_1","finish_reason":"tool_call","run_id":"run-1"},
{"parts":[{"tool_name":"lookup","content":{"hits":[1]},"tool_call_id":"c1","metadata":null,
"timestamp":"2025-06-01T10:00:02Z","part_kind":"tool-return"}],"instructions":null,"kind":"request"}],
"environment_states":{}}"""


def test_reference_library_state_validates() -> None:
    state = HarnessState.model_validate_json(REFERENCE_STATE)
    assert state.thread_id == "thread-0123456789abcdef0123456789abcdef"
    assert list(state.agent_context_state.entries) == ["a13n.usage", "acme.counter"]
    messages = state.message_history
    assert len(messages) == 3
    response = messages[1]
    assert (
        isinstance(response, ModelResponse)
        and response.state == "complete"
        and response.failed_attempts is None
    )
    tool_return = messages[2].parts[0]
    assert isinstance(tool_return, ToolReturnPart) and tool_return.outcome == "success"
    first = state.model_dump_json()
    assert HarnessState.model_validate_json(first).model_dump_json() == first
    assert load_state(REFERENCE_STATE) == state


# --- property: JSON round trip ----------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=12,
)
TIMES = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
IDS = st.from_regex(r"\A[a-z][a-z0-9]{0,8}\Z")


@st.composite
def messages(draw: st.DrawFn) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for _ in range(draw(st.integers(0, 4))):
        ts = draw(TIMES)
        call_id = draw(IDS)
        out.append(ModelRequest(parts=[UserPromptPart(draw(TEXT), timestamp=ts)], timestamp=ts))
        out.append(
            ModelResponse(
                parts=[
                    TextPart(draw(TEXT)),
                    ThinkingPart(draw(TEXT)),
                    ToolCallPart(
                        draw(IDS), draw(st.dictionaries(TEXT, JSON_VALUES, max_size=3)), tool_call_id=call_id
                    ),
                ],
                timestamp=ts,
                run_id=draw(st.none() | IDS),
            )
        )
        outcome = draw(st.sampled_from(["return", "retry"]))
        if outcome == "return":
            part: Any = ToolReturnPart(draw(IDS), draw(JSON_VALUES), tool_call_id=call_id, timestamp=ts)
        else:
            part = ToolReturnPart(
                draw(IDS), draw(TEXT), tool_call_id=call_id, timestamp=ts, outcome="retried"
            )
        out.append(ModelRequest(parts=[part], timestamp=ts))
    return out


FIELD_NAMES = {
    "schema_version",
    "thread_id",
    "agent_context_state",
    "refs",
    "message_history",
    "environment_states",
}


@st.composite
def harness_states(draw: st.DrawFn) -> HarnessState:
    data: dict[str, Any] = {
        "schema_version": "1",
        "thread_id": draw(st.from_regex(r"\A[a-z][a-z0-9]{0,6}_[a-z0-9]{1,6}\Z")),
    }
    data["agent_context_state"] = {
        "entries": draw(
            st.dictionaries(
                TEXT.filter(lambda s: bool(s.strip())),
                st.fixed_dictionaries({"version": TEXT.filter(bool), "data": JSON_VALUES}),
                max_size=3,
            )
        )
    }
    data["refs"] = draw(
        st.lists(
            st.fixed_dictionaries(
                {"key": TEXT.filter(bool), "digest": st.just(DIGEST), "size": st.integers(0, 10**12)}
            ),
            max_size=2,
        )
    )
    for key, value in draw(
        st.dictionaries(TEXT.filter(lambda s: s not in FIELD_NAMES), JSON_VALUES, max_size=3)
    ).items():
        data[key] = value
    data["message_history"] = draw(messages())
    data["environment_states"] = draw(
        st.dictionaries(
            TEXT,
            st.fixed_dictionaries(
                {
                    "provider_key": st.from_regex(r"\A[a-z][a-z0-9_]{0,8}\Z"),
                    "state_version": st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,6}\Z"),
                    "state": JSON_VALUES,
                }
            ),
            max_size=2,
        )
    )
    return HarnessState.model_validate(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(harness_states())
def test_json_round_trip_property(state: HarnessState) -> None:
    text = state.model_dump_json()
    again = HarnessState.model_validate_json(text)
    assert again == state
    assert again.model_dump_json() == text
    assert state.message_history_json() == ModelMessagesTypeAdapter.dump_json(list(state.message_history))
    assert HarnessState.model_validate(state.model_dump()) == state
    assert load_state(text.encode()) == state
    assert state.fork().extra_fields == state.extra_fields
