"""A bounded fuzz of every HarnessService and ThreadService RPC against a live `threadline serve`
(`--store memory`).

What a hostile or broken host can send, and what it must get back:

- raw bodies: random bytes, and valid requests with bits flipped, truncated or spliced, sent as they
  are (identity serializers);
- structurally valid requests with hostile values: built by hypothesis from the message descriptors,
  or a real request (a continued thread, a resume of a suspended one) with one to three fields
  replaced — huge and empty strings, unknown enum numbers, negative and huge integers, `*_json`
  fields holding JSON 1 000 levels deep, `NaN`/`Infinity`, lone surrogate escapes, duplicate keys,
  non-objects; histories of odd shapes; deferred resumes with forged ids;
- a catalogue of hand-made hostile requests, one per class of input, so that each class fails on
  its own and names itself.

ThreadService gets the same three kinds, starting from threads on the same server: an idle one, a
suspended import, fresh suspended threads to answer by call ID (each seed a fixed request ID, so a
repeated seed is a replay), and fresh threads for the RPCs that delete or roll back.

Every answer is OK, or a status whose `grpc-status-details-bin` trailer carries `ErrorInfo` with
domain `threadline`: never INTERNAL or UNKNOWN, never a bare status, and within a per-call deadline
(a hang is a failure). Afterwards, every line the server wrote to stderr is JSON, and every line that
names a run carries its `thread_id`, `run_id` and `request_id`.

Bounded for the suite (100 examples per test, about 20 s on two cores) and deterministic
(`derandomize=True`, no example database, no shrinking). To fuzz harder by hand, raise the number of
examples per test, which also turns shrinking and hypothesis' own reports on:
`THREADLINE_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest tests/test_fuzz.py`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from conftest import error_info
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st
from logged_serve import LoggedServe, logged_serve
from threadline.v1 import (
    deferred_pb2,
    harness_service_pb2,
    run_pb2,
    state_pb2,
    thread_pb2,
    thread_service_pb2,
)

pytestmark = pytest.mark.filterwarnings(
    # Hostile requests are large on purpose; hypothesis warns when it prints one.
    "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
)

SERVICE = harness_service_pb2.DESCRIPTOR.services_by_name["HarnessService"]
METHODS = {method.name: method for method in SERVICE.methods}
DEADLINE_S = 20.0
"""Per call. The demo agent answers in milliseconds; a call that needs this long is a hang."""
WORK_DEADLINES_S = {"prompt: 1 MB": 240.0}
"""Cases whose answer is real work in proportion to the input, not a hang: the demo agent echoes a 1 MB
prompt as 125 000 streamed text deltas (about 13 s on an idle 2-core machine, more under load)."""

_DEFAULT_EXAMPLES = 100
EXAMPLES = int(os.environ.get("THREADLINE_FUZZ_EXAMPLES", _DEFAULT_EXAMPLES))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate, *((Phase.shrink,) if EXAMPLES > _DEFAULT_EXAMPLES else ())),
    suppress_health_check=list(HealthCheck),
    # Requests are huge; the assertion names the method and a shortened request instead.
    verbosity=Verbosity.normal if EXAMPLES > _DEFAULT_EXAMPLES else Verbosity.quiet,
)


# --- the server, its seeds, and one way to call it --------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoggedServe]:
    # A mount named "m", so environment entries of that name are decoded (ours) or carried (others').
    mount = ["--mount", f"m=local:{tmp_path_factory.mktemp('mount')}"]
    as_root = ["--allow-root-shell"] if os.geteuid() == 0 else []
    with logged_serve("--store", "memory", *mount, *as_root) as running:
        yield running


@pytest.fixture(scope="module")
def channel(served: LoggedServe) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(served.address) as opened:
        yield opened


@dataclass(frozen=True)
class Seeds:
    """Real requests and results from the server, to mutate into hostile ones that get far."""

    state: state_pb2.HarnessState
    """A completed one-turn thread."""
    approval: run_pb2.RunResult
    """Suspended on `delete_file`, awaiting an approval."""
    client: run_pb2.RunResult
    """Suspended on the client tool `weather`."""
    child: run_pb2.RunResult
    """`demo-lead` suspended on a Host-managed child request."""


WEATHER = run_pb2.ClientTool(
    name="weather",
    description="The weather in a city.",
    parameters_json_schema='{"type":"object","properties":{"city":{"type":"string"}}}',
)


@pytest.fixture(scope="module")
def seeds(channel: grpc.Channel) -> Seeds:
    def run(spec: run_pb2.RunSpec) -> run_pb2.RunResult:
        request = harness_service_pb2.RunRequest(spec=spec)
        body = raw(channel, "Run", request.SerializeToString())
        assert isinstance(body, list), body
        return harness_service_pb2.RunResponse.FromString(body[0]).result

    state = run(run_pb2.RunSpec(text="hello")).state
    approval = run(run_pb2.RunSpec(text="delete notes.txt"))
    client = run(run_pb2.RunSpec(text='client:weather {"city": "Paris"}', client_tools=[WEATHER]))
    assert approval.status == run_pb2.RUN_STATUS_SUSPENDED and approval.deferred.approvals
    assert client.status == run_pb2.RUN_STATUS_SUSPENDED and client.deferred.calls
    child = run(run_pb2.RunSpec(agent="demo-lead", text="ask-child check it"))
    assert child.status == run_pb2.RUN_STATUS_SUSPENDED and child.deferred.calls[0].HasField("child")
    return Seeds(state=state, approval=approval, client=client, child=child)


def raw(
    channel: grpc.Channel,
    method: str,
    body: bytes,
    service: ServiceDescriptor = SERVICE,
    *,
    deadline: float = DEADLINE_S,
) -> list[bytes] | grpc.RpcError:
    """Send `body` to `method` unchanged; the response bodies, or the error the call ended with."""
    path = f"/{service.full_name}/{method}"
    try:
        if method == "WatchThread":  # never ends by itself: its first message (the snapshot) answers it
            call = channel.unary_stream(path)(body, timeout=deadline)
            first = next(call, None)
            call.cancel()
            return [] if first is None else [first]
        if service.methods_by_name[method].server_streaming:
            return list(channel.unary_stream(path)(body, timeout=deadline))
        return [channel.unary_unary(path)(body, timeout=deadline)]
    except grpc.RpcError as error:
        return error


def answer_is_typed(method: str, answer: list[bytes] | grpc.RpcError, what: object) -> None:
    """OK, or a status with `ErrorInfo` of domain `threadline`; never INTERNAL, UNKNOWN or a hang."""
    if isinstance(answer, list):
        return
    assert isinstance(answer, grpc.Call)
    code, details = answer.code(), answer.details()
    shown = f"{method} -> {code.name} {(details or '')[:200]!r} for {short(what)}"
    assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"hang: {shown}"
    assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), shown
    info = error_info(answer)
    assert info is not None, f"no ErrorInfo: {shown}"
    assert info.domain == "threadline", shown


def short(what: object) -> str:
    """A request as text, every long string or bytes value cut to its first 60 characters."""
    if not isinstance(what, Message):
        text = repr(what)
        return text if len(text) <= 300 else f"{text[:300]}… ({len(text)} characters)"
    copy = type(what)()
    copy.CopyFrom(what)
    _shorten(copy)
    return f"{type(what).__name__}({copy})".replace("\n", " ")


def _shorten(message: Message) -> None:
    for field, value in message.ListFields():
        if is_map(field):  # label maps: shown whole
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in value if field.is_repeated else [value]:
                _shorten(item)
        elif (
            field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES) and not field.is_repeated
        ) and len(value) > 60:
            mark = f"…({len(value)})"
            setattr(message, field.name, value[:60] + (mark if isinstance(value, str) else mark.encode()))


def send(
    channel: grpc.Channel,
    method: str,
    request: Message,
    service: ServiceDescriptor = SERVICE,
    *,
    deadline: float = DEADLINE_S,
) -> None:
    answer_is_typed(
        method, raw(channel, method, request.SerializeToString(), service, deadline=deadline), request
    )


# --- hostile values ---------------------------------------------------------------------------------


def nested(depth: int, *, objects: bool = False) -> str:
    return ('{"a":' * depth + "1" + "}" * depth) if objects else ("[" * depth + "]" * depth)


HOSTILE_JSON = [
    nested(1000),
    nested(1000, objects=True),
    nested(100_000),
    "NaN",
    '{"a": NaN}',
    '{"a": Infinity}',
    "[-Infinity]",
    '"\\ud800"',
    '{"a": "\\udfff"}',
    '{"\\ud800": 1}',
    '{"a": 1, "a": 2}',
    "[1]",
    "1",
    "null",
    '"text"',
    "true",
    "1e400",
    "-0",
    "123456789012345678901234567890",
    "",
    " ",
    "{",
    "}{",
    '{"a": 1} trailing',
    "\x00",
    '{"a":"' + "x" * 200_000 + '"}',
    "[" + ",".join(["{}"] * 20_000) + "]",
]
"""JSON texts a host may put in any `*_json` field; each must be refused or accepted, never crash."""

HOSTILE_TEXT = [
    "",
    " ",
    "x" * 4000,
    "y" * 300_000,
    "\x00",
    "é\u200b\U0001f600",
    "thread-" + "0" * 32,
    "a_b",
    "../../etc/passwd",
    "%s%n{}",
    "client:weather",
]
"""Plain strings: empty, huge, control characters, look-alikes of ids."""


def json_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists and objects of `inner` (a def, not a lambda: hypothesis reads its source to check that it
    recurses, which a lambda sharing its line with others can defeat)."""
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)


json_texts = st.sampled_from(HOSTILE_JSON) | st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    json_containers,
    max_leaves=8,
).map(json.dumps)
texts = (st.sampled_from(HOSTILE_TEXT) | st.text(max_size=24)).filter(
    lambda text: "sleep" not in text.lower()
)
"""No `sleep`: the demo agent would sleep for it (up to 60 s), which is not a hang of the server."""

INT_EDGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
}


def scalars(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    """Hostile values for one scalar field, by its type and name."""
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return json_texts if field.name.endswith("_json") or field.name == "data" else texts
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=40) | st.just(b"\0" * 32)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values]) | st.sampled_from(
            [-1, 99, 2**31 - 1]
        )
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats()
    low, high = INT_EDGES.get(kind, (-(2**31), 2**31 - 1))
    return st.sampled_from([low, high, 0, -1, 1]).filter(lambda n: low <= n <= high) | st.integers(low, high)


def is_map(field: FieldDescriptor) -> bool:
    """Whether `field` is a `map<K, V>` (ThreadService's labels), set by key rather than appended to."""
    return field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def put_entries(draw: st.DrawFn, target: Any, field: FieldDescriptor, count: int) -> None:
    """Put `count` entries of hostile keys and values into the map `target` of `field`."""
    key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
    for _ in range(count):
        at = draw(scalars(key))
        if value.type == FieldDescriptor.TYPE_MESSAGE:
            target[at].CopyFrom(draw(built(value.message_type, 3)))
        else:
            target[at] = draw(scalars(value))


def assign(message: Message, field: FieldDescriptor, value: Any) -> None:
    if field.is_repeated:
        getattr(message, field.name).append(value)
    else:
        setattr(message, field.name, value)


@st.composite
def built(draw: st.DrawFn, descriptor: Descriptor, depth: int = 0) -> Message:
    """A message of `descriptor` with some fields set to hostile values (at most one per oneof)."""
    message = GetMessageClass(descriptor)()
    for field in descriptor.fields:
        if field.containing_oneof is not None and message.WhichOneof(field.containing_oneof.name):
            continue
        if not draw(st.booleans()):
            continue
        if is_map(field):
            put_entries(draw, getattr(message, field.name), field, draw(st.integers(1, 3)))
            continue
        count = draw(st.integers(1, 3)) if field.is_repeated else 1
        for _ in range(count):
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                if depth >= 4:
                    break
                child = draw(built(field.message_type, depth + 1))
                target = getattr(message, field.name)
                (target.add() if field.is_repeated else target).CopyFrom(child)
            else:
                assign(message, field, draw(scalars(field)))
    return message


def slots(message: Message, depth: int = 0) -> list[tuple[Message, FieldDescriptor]]:
    """Every (message, field) a mutation may replace: set fields everywhere, unset ones near the top."""
    out: list[tuple[Message, FieldDescriptor]] = []
    for field in message.DESCRIPTOR.fields:
        out.append((message, field))
        if field.type != FieldDescriptor.TYPE_MESSAGE or is_map(field):
            continue
        value = getattr(message, field.name)
        if field.is_repeated:
            for item in value:
                out += slots(item, depth + 1)
        elif message.HasField(field.name) or depth < 2:
            out += slots(value, depth + 1)
    return out


@st.composite
def mutated(draw: st.DrawFn, seed: Message) -> Message:
    """`seed` (a request that works) with one to three fields replaced by hostile values."""
    message = type(seed)()
    message.CopyFrom(seed)
    if not message.DESCRIPTOR.fields:
        return message
    for _ in range(draw(st.integers(1, 3))):
        parent, field = draw(st.sampled_from(slots(message)))
        if is_map(field):
            put_entries(draw, getattr(parent, field.name), field, 1)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            child = draw(built(field.message_type, 3))
            target = getattr(parent, field.name)
            if field.is_repeated:
                target.add().CopyFrom(child)
            else:
                target.CopyFrom(child)
        elif field.is_repeated and getattr(parent, field.name) and draw(st.booleans()):
            items = getattr(parent, field.name)
            items[draw(st.integers(0, len(items) - 1))] = draw(scalars(field))
        else:
            assign(parent, field, draw(scalars(field)))
    return message


# --- seeds per method: a request that works, to mutate ---------------------------------------------


def resume_of(result: run_pb2.RunResult, **answers: Any) -> deferred_pb2.DeferredToolResume:
    """The resume that answers `result`'s pending batch: approve every approval, `"sunny"` every call."""
    results = deferred_pb2.DeferredToolResults(
        approvals=[
            deferred_pb2.ApprovalResult(tool_call_id=item.tool_call_id, approved=deferred_pb2.ToolApproved())
            for item in result.deferred.approvals
        ],
        calls=[
            deferred_pb2.CallResult(
                tool_call_id=item.tool_call_id, value_json=answers.get("value_json", '"sunny"')
            )
            for item in result.deferred.calls
        ],
    )
    return deferred_pb2.DeferredToolResume(requests=result.deferred, results=results)


def working_requests(seeds: Seeds, method: str) -> list[Message]:
    """Requests to `method` that the server accepts (checked by `test_seeds_are_accepted`)."""
    continued = run_pb2.RunSpec(text="again", previous_state=seeds.state, checkpoints=True)
    approved = run_pb2.RunSpec(previous_state=seeds.approval.state, deferred_resume=resume_of(seeds.approval))
    answered = run_pb2.RunSpec(
        previous_state=seeds.client.state, deferred_resume=resume_of(seeds.client), client_tools=[WEATHER]
    )
    specs = [continued, approved, answered]
    match method:
        case "StreamRun":
            return [harness_service_pb2.StreamRunRequest(spec=s, max_events_per_message=8) for s in specs]
        case "Run":
            return [harness_service_pb2.RunRequest(spec=s) for s in specs]
        case "NewState":
            return [
                harness_service_pb2.NewStateRequest(
                    message_history=seeds.state.message_history,
                    capability_states=[
                        state_pb2.CapabilityState(capability_id="acme.x", version="1", data_json="{}")
                    ],
                )
            ]
        case "ForkState":
            return [harness_service_pb2.ForkStateRequest(state=seeds.approval.state)]
        case "ValidateState":
            return [
                harness_service_pb2.ValidateStateRequest(state=seeds.state),
                harness_service_pb2.ValidateStateRequest(
                    state_json='{"schema_version":"1","thread_id":"a_b"}'
                ),
            ]
        case "RemainingDeferred":
            return [
                harness_service_pb2.RemainingDeferredRequest(
                    resume=resume_of(seeds.approval), state=seeds.approval.state
                ),
                harness_service_pb2.RemainingDeferredRequest(
                    resume=resume_of(seeds.client), state=seeds.client.state
                ),
            ]
        case "GetServerInfo":
            return [harness_service_pb2.GetServerInfoRequest()]
    raise AssertionError(method)


@pytest.mark.parametrize("method", list(METHODS))
def test_seeds_are_accepted(channel: grpc.Channel, seeds: Seeds, method: str) -> None:
    # The mutations below start from these; a seed the server refuses would fuzz nothing deep.
    for request in working_requests(seeds, method):
        answer = raw(channel, method, request.SerializeToString())
        assert isinstance(answer, list), (method, short(request), answer)


# --- (a) raw bodies ---------------------------------------------------------------------------------


@st.composite
def flipped(draw: st.DrawFn, body: bytes) -> bytes:
    """`body` with bits flipped, or cut short, or a slice of random bytes spliced in."""
    data = bytearray(body)
    how = draw(st.sampled_from(["flip", "truncate", "splice"]))
    if how == "truncate" or not data:
        return bytes(data[: draw(st.integers(0, max(len(data) - 1, 0)))])
    if how == "splice":
        at = draw(st.integers(0, len(data)))
        return bytes(data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:])
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


@pytest.mark.parametrize("method", list(METHODS))
def test_random_bodies(channel: grpc.Channel, method: str) -> None:
    @FUZZ
    @given(body=st.binary(max_size=256))
    def check(body: bytes) -> None:
        answer_is_typed(method, raw(channel, method, body), body)

    check()


@pytest.mark.parametrize("method", list(METHODS))
def test_bit_flipped_bodies(channel: grpc.Channel, seeds: Seeds, method: str) -> None:
    bodies = [request.SerializeToString() for request in working_requests(seeds, method)]

    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        body = data.draw(st.sampled_from(bodies).flatmap(flipped))
        answer_is_typed(method, raw(channel, method, body), body)

    check()


# --- (b) structurally valid requests with hostile values -------------------------------------------


@pytest.mark.parametrize("method", list(METHODS))
def test_requests_built_from_descriptors(channel: grpc.Channel, method: str) -> None:
    @FUZZ
    @given(request=built(METHODS[method].input_type))
    def check(request: Message) -> None:
        send(channel, method, request)

    check()


@pytest.mark.parametrize("method", list(METHODS))
def test_working_requests_with_hostile_fields(channel: grpc.Channel, seeds: Seeds, method: str) -> None:
    requests = working_requests(seeds, method)

    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        send(channel, method, data.draw(st.sampled_from(requests).flatmap(mutated)))

    check()


# --- (c) one hand-made request per class of hostile input ------------------------------------------


def with_history(state: state_pb2.HarnessState, data: str) -> state_pb2.HarnessState:
    """`state` with its history data replaced, the digest matching (so the data itself is judged)."""
    changed = state_pb2.HarnessState()
    changed.CopyFrom(state)
    changed.message_history.data = data
    changed.message_history.sha256 = hashlib.sha256(data.encode()).digest()
    changed.message_history.message_count = 0
    return changed


def run(spec: run_pb2.RunSpec) -> tuple[str, Message]:
    return "Run", harness_service_pb2.RunRequest(spec=spec)


def continued(seeds: Seeds, change: Callable[[state_pb2.HarnessState], None]) -> tuple[str, Message]:
    state = state_pb2.HarnessState()
    state.CopyFrom(seeds.state)
    change(state)
    return run(run_pb2.RunSpec(text="again", previous_state=state))


def resumed(
    seeds: Seeds,
    change: Callable[[deferred_pb2.DeferredToolResume], None],
    *,
    client: bool = False,
    method: str = "Run",
) -> tuple[str, Message]:
    result = seeds.client if client else seeds.approval
    resume = resume_of(result)
    change(resume)
    if method == "RemainingDeferred":
        return method, harness_service_pb2.RemainingDeferredRequest(resume=resume, state=result.state)
    spec = run_pb2.RunSpec(previous_state=result.state, deferred_resume=resume, client_tools=[WEATHER])
    if method == "StreamRun":
        return method, harness_service_pb2.StreamRunRequest(spec=spec)
    return run(spec)


def call_value(value: str) -> Callable[[deferred_pb2.DeferredToolResume], None]:
    def change(resume: deferred_pb2.DeferredToolResume) -> None:
        resume.results.calls[0].value_json = value

    return change


def request_metadata(value: str) -> Callable[[deferred_pb2.DeferredToolResume], None]:
    def change(resume: deferred_pb2.DeferredToolResume) -> None:
        resume.requests.approvals[0].metadata_json = value

    return change


def forged_ids(resume: deferred_pb2.DeferredToolResume) -> None:
    resume.requests.approvals[0].tool_call_id = "call_forged"
    resume.results.approvals[0].tool_call_id = "call_forged"


def forged_recovery(resume: deferred_pb2.DeferredToolResume) -> None:
    forged_ids(resume)
    resume.recovery = True


def override_args(value: str) -> Callable[[deferred_pb2.DeferredToolResume], None]:
    def change(resume: deferred_pb2.DeferredToolResume) -> None:
        resume.results.approvals[0].approved.override_args_json = value

    return change


DEEP = nested(1000)
DEEP_OBJECT = nested(1000, objects=True)
SURROGATE = '"\\ud800"'
HISTORY_SHAPES = {
    "empty object": "{}",
    "list of empty objects": "[{}]",
    "response first": '[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]',
    "tool return without its call": (
        '[{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"x",'
        '"tool_call_id":"c1"}]}]'
    ),
    "consecutive user requests": "["
    + ",".join('{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}' for _ in range(300))
    + "]",
    "deep": "[" + DEEP + "]",
    "nan": '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":NaN}]}]',
    "lone surrogate": '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"\\ud800"}]}]',
}


Case = Callable[[Seeds], tuple[str, Message]]
"""Builds (method, request) from the seeds."""


def args_json(value: str) -> Callable[[deferred_pb2.DeferredToolResume], None]:
    def change(resume: deferred_pb2.DeferredToolResume) -> None:
        resume.requests.approvals[0].args_json = value

    return change


def answered_as_a_call(resume: deferred_pb2.DeferredToolResume) -> None:
    resume.results.calls.add(tool_call_id=resume.results.approvals[0].tool_call_id, value_json="1")
    resume.results.ClearField("approvals")


def add_capability(value: str) -> Callable[[state_pb2.HarnessState], None]:
    return lambda s: s.capability_states.add(capability_id="acme.x", version="1", data_json=value) and None


def add_environment(value: str) -> Callable[[state_pb2.HarnessState], None]:
    return lambda s: (
        s.environment_states.add(mount_name="m", provider_key="p", state_version="1", state_json=value)
        and None
    )


def add_local_environment(value: str, version: str = "1") -> Callable[[state_pb2.HarnessState], None]:
    """An entry of the server's own provider for its mount "m": decoded, so it must be refused cleanly."""
    return lambda s: (
        s.environment_states.add(
            mount_name="m", provider_key="threadline_local", state_version=version, state_json=value
        )
        and None
    )


def set_extra(value: str) -> Callable[[state_pb2.HarnessState], None]:
    return lambda s: setattr(s, "extra_json", value)


def child_answered(seeds: Seeds, value_json: str) -> tuple[str, Message]:
    """A resume of `demo-lead`'s suspended child request with `value_json` as the answer."""
    suspended = seeds.child
    call = suspended.deferred.calls[0]
    resume = deferred_pb2.DeferredToolResume(
        requests=suspended.deferred,
        results=deferred_pb2.DeferredToolResults(
            calls=[deferred_pb2.CallResult(tool_call_id=call.tool_call_id, value_json=value_json)]
        ),
    )
    return run(run_pb2.RunSpec(agent="demo-lead", previous_state=suspended.state, deferred_resume=resume))


def tool_with(schema: str) -> run_pb2.ClientTool:
    return run_pb2.ClientTool(name="weather", parameters_json_schema=schema)


def hostile_cases() -> dict[str, Case]:
    """name -> how to build its request: one per class of hostile input."""
    cases: dict[str, Case] = {}
    state_json_fields = {
        "capability data_json": add_capability,
        "environment state_json": add_environment,
        "threadline_local state_json": add_local_environment,
    }
    state_json_fields["extra_json"] = set_extra
    for field, setter in state_json_fields.items():
        for label, value in (
            ("deep", DEEP),
            ("deep objects", DEEP_OBJECT),
            ("NaN", '{"a": NaN}'),
            ("lone surrogate", '{"a": "\\ud800"}'),
            ("duplicate keys", '{"a": 1, "a": 2}'),
            ("non-object", "[1]"),
        ):
            change = setter(value)
            cases[f"state {field}: {label}"] = lambda seeds, c=change: continued(seeds, c)
    hex32 = "0" * 32
    for label, value, version in (
        ("not version 1's shape", '{"backend": "x"}', "1"),
        ("unknown key", json.dumps({"backend": hex32, "scope": hex32, "commands": [], "pid": 1}), "1"),
        (
            "commands repeated",
            json.dumps(
                {
                    "backend": hex32,
                    "scope": hex32,
                    "commands": [{"id": hex32, "started_at": "2026-01-01T00:00:00.000000Z"}] * 2,
                }
            ),
            "1",
        ),
        ("version 2", json.dumps({"backend": hex32, "scope": hex32, "commands": []}), "2"),
        ("version 300 000 characters", "{}", "9" * 300_000),
    ):
        change = add_local_environment(value, version)
        cases[f"state threadline_local: {label}"] = lambda seeds, c=change: continued(seeds, c)
    lineage = deferred_pb2.ChildLineage(
        parent_thread_id="thread_" + "a" * 32,
        parent_run_id="run-" + "b" * 32,
        parent_tool_call_id="p1",
        parent_agent_instance_id="i1",
        subagent_name="reviewer",
        delegation_id="thread_" + "c" * 32,
    )
    for label, change in (
        ("300 000-character tool call ID", {"parent_tool_call_id": "x" * 300_000}),
        ("bad parent run ID", {"parent_run_id": "run-1"}),
        ("NUL in subagent name", {"subagent_name": "re\x00viewer"}),
        ("unknown parent agent", {"parent_agent": "nobody"}),
        ("parent agent without that edge", {"parent_agent": "default"}),
        ("parent agent, wrong child agent", {"parent_agent": "demo-lead"}),
        ("empty", {field: "" for field in ("parent_thread_id", "parent_run_id", "subagent_name")}),
    ):
        hostile = deferred_pb2.ChildLineage()
        hostile.CopyFrom(lineage)
        for name, value in change.items():
            setattr(hostile, name, value)
        cases[f"lineage: {label}"] = lambda _, h=hostile: run(run_pb2.RunSpec(text="x", lineage=h))
    cases["deferred_tools 99"] = lambda _: run(run_pb2.RunSpec(text="x", deferred_tools=99))  # type: ignore[arg-type]
    cases["client tool named delegate"] = lambda _: run(
        run_pb2.RunSpec(text="x", client_tools=[run_pb2.ClientTool(name="delegate")])
    )
    cases["a child answer of the wrong shape"] = lambda seeds: child_answered(seeds, '{"status": "done"}')
    cases["client tool named shell_exec"] = lambda seeds: run(
        run_pb2.RunSpec(text="x", client_tools=[run_pb2.ClientTool(name="shell_exec")])
    )
    for label, value in (
        ("deep", DEEP),
        ("deep objects", DEEP_OBJECT),
        ("NaN", '{"schema_version": NaN}'),
        ("lone surrogate", '{"schema_version":"1","thread_id":"\\ud800"}'),
    ):
        request = harness_service_pb2.ValidateStateRequest(state_json=value)
        cases[f"ValidateState state_json: {label}"] = lambda _, r=request: ("ValidateState", r)
    for label, data in HISTORY_SHAPES.items():
        cases[f"history: {label}"] = lambda seeds, d=data: run(
            run_pb2.RunSpec(text="x", previous_state=with_history(seeds.state, d))
        )
    cases["history digest of 31 bytes"] = lambda seeds: continued(
        seeds, lambda s: setattr(s.message_history, "sha256", b"\x01" * 31)
    )
    cases["negative message_count"] = lambda seeds: continued(
        seeds, lambda s: setattr(s.message_history, "message_count", -1)
    )
    cases["refs negative size"] = lambda seeds: continued(
        seeds, lambda s: s.refs.add(key="k", digest="ab" * 32, size=-1) and None
    )
    cases["schema_version 300 000 characters"] = lambda seeds: continued(
        seeds, lambda s: setattr(s, "schema_version", "9" * 300_000)
    )
    cases["thread_id 300 000 characters"] = lambda seeds: continued(
        seeds, lambda s: setattr(s, "thread_id", "t" * 300_000)
    )
    for label, schema in (
        ("deep", DEEP_OBJECT),
        ("NaN", '{"type":"object","default":NaN}'),
        ("lone surrogate", '{"type":"object","description":"\\ud800"}'),
        ("non-object", "[1]"),
    ):
        tool = tool_with(schema)
        cases[f"client tool parameters: {label}"] = lambda _, t=tool: run(
            run_pb2.RunSpec(text="hi", client_tools=[t])
        )
    cases["client tool: declared twice"] = lambda _: run(
        run_pb2.RunSpec(text="hi", client_tools=[WEATHER, WEATHER])
    )
    cases["client tool: clashes with the agent's"] = lambda _: run(
        run_pb2.RunSpec(text="hi", client_tools=[run_pb2.ClientTool(name="delete_file")])
    )
    cases["client tool: name of 100 000 characters"] = lambda _: run(
        run_pb2.RunSpec(text="hi", client_tools=[run_pb2.ClientTool(name="w" * 100_000)])
    )
    cases["prompt: client call with deep arguments"] = lambda _: run(
        run_pb2.RunSpec(text="client:weather " + DEEP_OBJECT, client_tools=[WEATHER])
    )
    cases["prompt: 1 MB"] = lambda _: run(run_pb2.RunSpec(text="p" * 1_000_000))
    cases["prompt: unknown url kind"] = lambda _: run(
        run_pb2.RunSpec(
            parts=run_pb2.PromptParts(
                parts=[run_pb2.PromptPart(url=run_pb2.UrlContent(kind=99, url="x"))]  # type: ignore[arg-type]
            )
        )
    )
    cases["prompt: binary of no media type"] = lambda _: run(
        run_pb2.RunSpec(parts=run_pb2.PromptParts(parts=[run_pb2.PromptPart(binary=run_pb2.BinaryContent())]))
    )
    cases["unknown tool_recovery"] = lambda _: run(run_pb2.RunSpec(text="x", tool_recovery=99))  # type: ignore[arg-type]
    cases["unknown checkpoint_form"] = lambda _: (
        "StreamRun",
        harness_service_pb2.StreamRunRequest(
            spec=run_pb2.RunSpec(text="x", checkpoints=True, checkpoint_form=99)  # type: ignore[arg-type]
        ),
    )
    cases["max_events_per_message 2**32 - 1"] = lambda _: (
        "StreamRun",
        harness_service_pb2.StreamRunRequest(
            spec=run_pb2.RunSpec(text="x"), max_events_per_message=2**32 - 1
        ),
    )
    cases["usage limits huge and zero"] = lambda _: run(
        run_pb2.RunSpec(
            text="x", usage_limits=run_pb2.UsageLimits(request_limit=2**63 - 1, total_tokens_limit=0)
        )
    )
    cases["usage limits: count tokens before request"] = lambda _: run(
        run_pb2.RunSpec(text="x", usage_limits=run_pb2.UsageLimits(count_tokens_before_request=True))
    )
    cases["agent name of NULs"] = lambda _: run(run_pb2.RunSpec(text="x", agent="\x00" * 1000))
    for label, value in (("deep", DEEP), ("NaN", "NaN"), ("lone surrogate", SURROGATE), ("empty", "")):
        change = call_value(value)
        cases[f"client tool answer value_json: {label}"] = lambda seeds, c=change: resumed(
            seeds, c, client=True
        )
        cases[f"client tool answer value_json: {label}, streamed"] = lambda seeds, c=change: resumed(
            seeds, c, client=True, method="StreamRun"
        )
        cases[f"RemainingDeferred value_json: {label}"] = lambda seeds, c=change: resumed(
            seeds, c, client=True, method="RemainingDeferred"
        )
    for label, value in (("deep", DEEP_OBJECT), ("NaN", '{"a":NaN}'), ("lone surrogate", '{"a":"\\ud800"}')):
        metadata, override = request_metadata(value), override_args(value)
        cases[f"request metadata_json: {label}"] = lambda seeds, c=metadata: resumed(seeds, c)
        cases[f"RemainingDeferred request metadata_json: {label}"] = lambda seeds, c=metadata: resumed(
            seeds, c, method="RemainingDeferred"
        )
        cases[f"override_args_json: {label}"] = lambda seeds, c=override: resumed(seeds, c)
    cases["request args_json: deep"] = lambda seeds: resumed(seeds, args_json(DEEP_OBJECT))
    cases["request args_json: lone surrogate"] = lambda seeds: resumed(seeds, args_json('{"path":"\\ud800"}'))
    cases["forged call id"] = lambda seeds: resumed(seeds, forged_ids)
    cases["forged call id, recovery"] = lambda seeds: resumed(seeds, forged_recovery)
    cases["RemainingDeferred forged call id"] = lambda seeds: resumed(
        seeds, forged_ids, method="RemainingDeferred"
    )
    cases["RemainingDeferred against a state with no response"] = lambda seeds: (
        "RemainingDeferred",
        harness_service_pb2.RemainingDeferredRequest(resume=resume_of(seeds.approval), state=seeds.state),
    )
    cases["RemainingDeferred without a state"] = lambda seeds: (
        "RemainingDeferred",
        harness_service_pb2.RemainingDeferredRequest(resume=resume_of(seeds.approval)),
    )
    cases["unknown deferred kind"] = lambda seeds: resumed(
        seeds, lambda r: setattr(r.requests.approvals[0], "kind", 99)
    )
    cases["approval answered as a call"] = lambda seeds: resumed(seeds, answered_as_a_call)
    cases["ForkState: same thread id"] = lambda seeds: (
        "ForkState",
        harness_service_pb2.ForkStateRequest(state=seeds.state, thread_id=seeds.state.thread_id),
    )
    cases["ForkState: thread id of NULs"] = lambda seeds: (
        "ForkState",
        harness_service_pb2.ForkStateRequest(state=seeds.state, thread_id="\x00" * 10_000),
    )
    cases["NewState: path-like thread id"] = lambda _: (
        "NewState",
        harness_service_pb2.NewStateRequest(thread_id="../x"),
    )
    cases["NewState: deep capability data"] = lambda _: (
        "NewState",
        harness_service_pb2.NewStateRequest(
            capability_states=[state_pb2.CapabilityState(capability_id="acme.x", version="1", data_json=DEEP)]
        ),
    )
    return cases


HOSTILE_CASES = hostile_cases()


@pytest.mark.parametrize("name", list(HOSTILE_CASES))
def test_hostile_case(channel: grpc.Channel, seeds: Seeds, name: str) -> None:
    method, request = HOSTILE_CASES[name](seeds)
    send(channel, method, request, deadline=WORK_DEADLINES_S.get(name, DEADLINE_S))


# --- ThreadService: the same hostile input, on the durable threads' RPCs ----------------------------

THREAD_SERVICE = thread_service_pb2.DESCRIPTOR.services_by_name["ThreadService"]
THREAD_METHODS = {method.name: method for method in THREAD_SERVICE.methods}


def thread_call(channel: grpc.Channel, method: str, request: Message) -> Message:
    """A ThreadService call that must succeed; its (first) response."""
    answer = raw(channel, method, request.SerializeToString(), THREAD_SERVICE)
    assert isinstance(answer, list), (method, short(request), answer)
    return GetMessageClass(THREAD_METHODS[method].output_type).FromString(answer[0])


def new_thread(channel: grpc.Channel, **fields: Any) -> str:
    response = thread_call(channel, "CreateThread", thread_service_pb2.CreateThreadRequest(**fields))
    assert isinstance(response, thread_service_pb2.CreateThreadResponse)
    return response.thread.thread_id


def imported(channel: grpc.Channel, result: run_pb2.RunResult, **fields: Any) -> str:
    """A new thread importing `result`'s state (forked to a fresh ID) with `fields` (a batch)."""
    request = harness_service_pb2.ForkStateRequest(state=result.state)
    body = raw(channel, "ForkState", request.SerializeToString())
    assert isinstance(body, list), body
    state = harness_service_pb2.ForkStateResponse.FromString(body[0]).state
    return new_thread(channel, state=state, client_tools=[WEATHER], **fields)


def thread_run_specs(
    channel: grpc.Channel, seeds: Seeds, idle: str
) -> list[thread_service_pb2.ThreadRunSpec]:
    """Turns of an idle thread (each busy strategy), and the answers to two fresh
    suspended ones, each by a fixed request ID (sent again, each is a replay, so a seed stays accepted)."""
    approval, client = resume_of(seeds.approval), resume_of(seeds.client)
    return [
        thread_service_pb2.ThreadRunSpec(thread_id=idle, request_id="fuzz-turn", text="again"),
        thread_service_pb2.ThreadRunSpec(
            thread_id=idle,
            request_id="fuzz-enqueue",
            text="queued",
            busy_strategy=thread_service_pb2.BUSY_STRATEGY_ENQUEUE,
        ),
        thread_service_pb2.ThreadRunSpec(
            thread_id=idle,
            request_id="fuzz-interrupt",
            text="instead",
            busy_strategy=thread_service_pb2.BUSY_STRATEGY_INTERRUPT,
        ),
        thread_service_pb2.ThreadRunSpec(
            thread_id=idle,
            request_id="fuzz-rollback",
            text="redo",
            busy_strategy=thread_service_pb2.BUSY_STRATEGY_ROLLBACK,
        ),
        thread_service_pb2.ThreadRunSpec(
            thread_id=imported(channel, seeds.approval, pending=seeds.approval.deferred),
            request_id="fuzz-approve",
            answers=approval.results,
        ),
        thread_service_pb2.ThreadRunSpec(
            thread_id=imported(channel, seeds.client, pending=seeds.client.deferred),
            request_id="fuzz-answer",
            answers=client.results,
        ),
    ]


@dataclass(frozen=True)
class ThreadSeeds:
    """Threads on the fuzzed server for requests to start from."""

    idle: str
    """A thread with one completed turn (revisions 1 to 3 or more)."""
    suspended: str
    """Imported suspended on `delete_file`; only read and forked, never answered."""
    run_id: str
    """The idle thread's finished run."""
    request_id: str
    """That run's request."""


@pytest.fixture(scope="module")
def thread_seeds(channel: grpc.Channel, seeds: Seeds) -> ThreadSeeds:
    idle = new_thread(channel, labels={"fuzz": "seed"})
    turn = thread_call(
        channel,
        "RunThread",
        thread_service_pb2.RunThreadRequest(
            spec=thread_service_pb2.ThreadRunSpec(thread_id=idle, text="hello")
        ),
    )
    assert isinstance(turn, thread_service_pb2.RunThreadResponse)
    assert turn.result.status == run_pb2.RUN_STATUS_COMPLETED, turn
    suspended = imported(channel, seeds.approval, pending=seeds.approval.deferred)
    return ThreadSeeds(
        idle=idle, suspended=suspended, run_id=turn.result.run_id, request_id=turn.result.request_id
    )


def working_thread_requests(
    channel: grpc.Channel, seeds: Seeds, threads: ThreadSeeds, method: str
) -> list[Message]:
    """Requests to a ThreadService `method` that the server accepts; threads they change are new."""
    ts = thread_service_pb2
    match method:
        case "CreateThread":
            return [
                ts.CreateThreadRequest(labels={"fuzz": "1", "empty": ""}),
                ts.CreateThreadRequest(agent="default", client_tools=[WEATHER]),
            ]
        case "GetThread":
            return [
                ts.GetThreadRequest(thread_id=threads.idle, view=ts.THREAD_VIEW_FULL),
                ts.GetThreadRequest(thread_id=threads.suspended),
            ]
        case "ListThreads":
            return [
                ts.ListThreadsRequest(page_size=5, labels=["fuzz=seed"]),
                ts.ListThreadsRequest(status=thread_pb2.THREAD_STATUS_SUSPENDED),
            ]
        case "DeleteThread":
            return [ts.DeleteThreadRequest(thread_id=new_thread(channel), expected_revision=1)]
        case "ListCheckpoints":
            return [ts.ListCheckpointsRequest(thread_id=threads.idle, page_size=2)]
        case "GetCheckpoint":
            return [
                ts.GetCheckpointRequest(thread_id=threads.idle, revision=2),
                ts.GetCheckpointRequest(thread_id=threads.suspended, revision=1),
            ]
        case "ForkThread":
            return [
                ts.ForkThreadRequest(thread_id=threads.idle),
                ts.ForkThreadRequest(thread_id=threads.suspended, revision=1, labels={"fuzz": "fork"}),
            ]
        case "RollbackThread":
            rolled = new_thread(channel)
            return [ts.RollbackThreadRequest(thread_id=rolled, revision=1, expected_revision=0)]
        case "RunThread":
            return [ts.RunThreadRequest(spec=s) for s in thread_run_specs(channel, seeds, threads.idle)]
        case "StreamThreadRun":
            return [
                ts.StreamThreadRunRequest(spec=s, max_events_per_message=8)
                for s in thread_run_specs(channel, seeds, new_thread(channel))
            ]
        case "StartThreadRun":
            # Each in a fresh thread: the server runs it on after the call, and a replay answers again.
            return [
                ts.StartThreadRunRequest(spec=s)
                for s in thread_run_specs(channel, seeds, new_thread(channel))
            ]
        case "CancelThreadRun":
            return [
                ts.CancelThreadRunRequest(thread_id=threads.idle, run_id=threads.run_id),
                ts.CancelThreadRunRequest(thread_id=threads.idle, request_id=threads.request_id),
            ]
        case "JoinThreadRun":
            return [
                ts.JoinThreadRunRequest(thread_id=threads.idle, run_id=threads.run_id),
                ts.JoinThreadRunRequest(thread_id=threads.idle, after_sequence=1, max_events_per_message=4),
            ]
        case "WatchThread":
            return [ts.WatchThreadRequest(thread_id=threads.idle)]
    raise AssertionError(method)


def send_thread(channel: grpc.Channel, method: str, request: Message) -> None:
    send(channel, method, request, THREAD_SERVICE)


@pytest.mark.parametrize("method", list(THREAD_METHODS))
def test_thread_seeds_are_accepted(
    channel: grpc.Channel, seeds: Seeds, thread_seeds: ThreadSeeds, method: str
) -> None:
    for request in working_thread_requests(channel, seeds, thread_seeds, method):
        thread_call(channel, method, request)


@pytest.mark.parametrize("method", list(THREAD_METHODS))
def test_thread_random_bodies(channel: grpc.Channel, method: str) -> None:
    @FUZZ
    @given(body=st.binary(max_size=256))
    def check(body: bytes) -> None:
        answer_is_typed(method, raw(channel, method, body, THREAD_SERVICE), body)

    check()


@pytest.mark.parametrize("method", list(THREAD_METHODS))
def test_thread_bit_flipped_bodies(
    channel: grpc.Channel, seeds: Seeds, thread_seeds: ThreadSeeds, method: str
) -> None:
    bodies = [r.SerializeToString() for r in working_thread_requests(channel, seeds, thread_seeds, method)]

    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        body = data.draw(st.sampled_from(bodies).flatmap(flipped))
        answer_is_typed(method, raw(channel, method, body, THREAD_SERVICE), body)

    check()


@pytest.mark.parametrize("method", list(THREAD_METHODS))
def test_thread_requests_built_from_descriptors(channel: grpc.Channel, method: str) -> None:
    @FUZZ
    @given(request=built(THREAD_METHODS[method].input_type))
    def check(request: Message) -> None:
        send_thread(channel, method, request)

    check()


@pytest.mark.parametrize("method", list(THREAD_METHODS))
def test_thread_working_requests_with_hostile_fields(
    channel: grpc.Channel, seeds: Seeds, thread_seeds: ThreadSeeds, method: str
) -> None:
    requests = working_thread_requests(channel, seeds, thread_seeds, method)

    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        send_thread(channel, method, data.draw(st.sampled_from(requests).flatmap(mutated)))

    check()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


POSITIONS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    json_containers,
    max_leaves=6,
)
"""Any JSON value: what a forged token's position might hold."""


@st.composite
def page_tokens(draw: st.DrawFn, genuine: str) -> str:
    """A token the server never made: text, base64 of bytes or of JSON shaped like a position (the
    fields `t`, `id`, `before` with any values, or nested deeply), or a genuine token altered."""
    raw = base64.urlsafe_b64decode(genuine + "=" * (-len(genuine) % 4))
    made = draw(
        st.one_of(
            st.text(max_size=300),
            st.binary(max_size=300).map(b64),
            st.fixed_dictionaries({}, optional={"t": POSITIONS, "id": POSITIONS, "before": POSITIONS}).map(
                lambda position: b64(json.dumps(position).encode())
            ),
            st.integers(1, 50_000).map(lambda depth: b64(('{"before":' + nested(depth) + "}").encode())),
            st.sampled_from(HOSTILE_JSON).map(lambda text: b64(text.encode("utf-8", "surrogatepass"))),
            flipped(raw).map(b64),
            st.integers(0, len(genuine) - 1).map(lambda cut: genuine[:cut]),
            st.text(min_size=1, max_size=8).map(lambda tail: genuine + tail),
        )
    )
    return made if made not in ("", genuine) else made + "A"  # "" asks for the first page


def listing(method: str, threads: ThreadSeeds, **fields: Any) -> Message:
    """A listing of the seeds that has a second page: threads labelled `fuzz=seed`, or the idle one's
    checkpoints."""
    if method == "ListThreads":
        return thread_service_pb2.ListThreadsRequest(labels=["fuzz=seed"], **fields)
    return thread_service_pb2.ListCheckpointsRequest(thread_id=threads.idle, **fields)


@pytest.mark.parametrize("method", ["ListThreads", "ListCheckpoints"])
def test_thread_forged_page_tokens(channel: grpc.Channel, thread_seeds: ThreadSeeds, method: str) -> None:
    new_thread(channel, labels={"fuzz": "seed"})  # with the seed's, two: a page of one has a next page
    first = thread_call(channel, method, listing(method, thread_seeds, page_size=1))
    genuine = str(first.next_page_token)  # type: ignore[attr-defined]  # both responses have it
    assert genuine, "the seed listing has a second page"

    @FUZZ
    @given(token=page_tokens(genuine))
    def check(token: str) -> None:
        request = listing(method, thread_seeds, page_token=token)
        answer = raw(channel, method, request.SerializeToString(), THREAD_SERVICE)
        answer_is_typed(method, answer, request)
        assert isinstance(answer, grpc.Call), f"{method} accepted the forged token {token[:80]!r}"
        reason = error_info(answer).reason
        assert (answer.code(), reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INPUT_INVALID"), token[:80]

    check()


LABEL_KEYS = st.sampled_from(["fuzz", "k", "a.b-c_d", "K", "", "=", "\x00", "k\n"]) | st.text(max_size=70)
label_filters = st.lists(
    st.tuples(LABEL_KEYS, st.sampled_from(["", "seed", "v" * 300, "\x00", "="]) | st.text(max_size=20)).map(
        lambda kv: f"{kv[0]}={kv[1]}"
    )
    | texts,
    max_size=40,
) | st.integers(30, 2_000).map(lambda n: [f"k{i}=v" for i in range(n)])
"""Label filters of any shape: keys and values of any text, entries without `=`, repeated keys, NULs,
and from 30 to 2 000 entries (more than a thread has labels)."""


def test_thread_label_filters(channel: grpc.Channel) -> None:
    @FUZZ
    @given(labels=label_filters, status=st.sampled_from([0, 1, 2, 3, 99]))
    def check(labels: list[str], status: int) -> None:
        send_thread(
            channel, "ListThreads", thread_service_pb2.ListThreadsRequest(labels=labels, status=status)
        )

    check()


def thread_hostile_cases() -> dict[str, Callable[[grpc.Channel, Seeds], tuple[str, Message]]]:
    """name -> how to build its ThreadService request: one per class of hostile input."""
    ts = thread_service_pb2
    cases: dict[str, Callable[[grpc.Channel, Seeds], tuple[str, Message]]] = {}
    for label, value in (
        ("deep", DEEP),
        ("NaN", "NaN"),
        ("lone surrogate", SURROGATE),
        ("empty", ""),
    ):

        def answered(channel: grpc.Channel, seeds: Seeds, v: str = value) -> tuple[str, Message]:
            thread_id = imported(channel, seeds.client, pending=seeds.client.deferred)
            answers = resume_of(seeds.client, value_json=v).results
            return "RunThread", ts.RunThreadRequest(
                spec=ts.ThreadRunSpec(thread_id=thread_id, answers=answers)
            )

        cases[f"answer value_json: {label}"] = answered
    for label, value in (("deep", DEEP_OBJECT), ("NaN", '{"a":NaN}'), ("lone surrogate", '{"a":"\\ud800"}')):

        def overridden(channel: grpc.Channel, seeds: Seeds, v: str = value) -> tuple[str, Message]:
            thread_id = imported(channel, seeds.approval, pending=seeds.approval.deferred)
            answers = resume_of(seeds.approval).results
            answers.approvals[0].approved.override_args_json = v
            return "StreamThreadRun", ts.StreamThreadRunRequest(
                spec=ts.ThreadRunSpec(thread_id=thread_id, answers=answers)
            )

        def bad_pending_metadata(channel: grpc.Channel, seeds: Seeds, v: str = value) -> tuple[str, Message]:
            pending = deferred_pb2.DeferredToolRequests()
            pending.CopyFrom(seeds.approval.deferred)
            pending.approvals[0].metadata_json = v
            return "CreateThread", ts.CreateThreadRequest(state=seeds.approval.state, pending=pending)

        cases[f"override_args_json: {label}"] = overridden
        cases[f"imported pending metadata_json: {label}"] = bad_pending_metadata

    def forged_answer(channel: grpc.Channel, seeds: Seeds) -> tuple[str, Message]:
        thread_id = imported(channel, seeds.approval, pending=seeds.approval.deferred)
        answers = resume_of(seeds.approval).results
        answers.approvals[0].tool_call_id = "call_forged"
        return "RunThread", ts.RunThreadRequest(spec=ts.ThreadRunSpec(thread_id=thread_id, answers=answers))

    def forged_accepted(channel: grpc.Channel, seeds: Seeds) -> tuple[str, Message]:
        accepted = resume_of(seeds.approval)
        forged_ids(accepted)
        return "CreateThread", ts.CreateThreadRequest(state=seeds.approval.state, accepted=accepted)

    def deep_history(channel: grpc.Channel, seeds: Seeds) -> tuple[str, Message]:
        return "CreateThread", ts.CreateThreadRequest(state=with_history(seeds.state, "[" + DEEP + "]"))

    cases["answer with a forged call id"] = forged_answer
    cases["accepted batch with forged call ids"] = forged_accepted
    cases["imported history: deep"] = deep_history
    cases["imported state: thread id of 300 000 characters"] = lambda channel, seeds: (
        "CreateThread",
        ts.CreateThreadRequest(thread_id="t" * 300_000),
    )
    cases["labels: 10 000 of them"] = lambda channel, seeds: (
        "CreateThread",
        ts.CreateThreadRequest(labels={f"k{i}": "v" for i in range(10_000)}),
    )
    cases["label filter: 10 000 of them"] = lambda channel, seeds: (
        "ListThreads",
        ts.ListThreadsRequest(labels=[f"k{i}=v" for i in range(10_000)]),
    )
    cases["page_token: 100 000 characters"] = lambda channel, seeds: (
        "ListThreads",
        ts.ListThreadsRequest(page_token="A" * 100_000),
    )
    cases["revision: the largest int64"] = lambda channel, seeds: (
        "GetCheckpoint",
        ts.GetCheckpointRequest(thread_id=new_thread(channel), revision=2**63 - 1),
    )
    cases["expected_revision: the smallest int64"] = lambda channel, seeds: (
        "RunThread",
        ts.RunThreadRequest(
            spec=ts.ThreadRunSpec(thread_id=new_thread(channel), text="x", expected_revision=-(2**63))
        ),
    )
    cases["request_id: 100 000 characters"] = lambda channel, seeds: (
        "RunThread",
        ts.RunThreadRequest(
            spec=ts.ThreadRunSpec(thread_id=new_thread(channel), text="x", request_id="r" * 100_000)
        ),
    )
    cases["prompt: client call with deep arguments"] = lambda channel, seeds: (
        "StreamThreadRun",
        ts.StreamThreadRunRequest(
            spec=ts.ThreadRunSpec(
                thread_id=new_thread(channel), text="client:weather " + DEEP_OBJECT, client_tools=[WEATHER]
            )
        ),
    )
    cases["join: the largest after_sequence"] = lambda channel, seeds: (
        "JoinThreadRun",
        ts.JoinThreadRunRequest(thread_id=new_thread(channel), after_sequence=2**64 - 1),
    )
    cases["join: run_id and request_id of 100 000 characters"] = lambda channel, seeds: (
        "JoinThreadRun",
        ts.JoinThreadRunRequest(thread_id=new_thread(channel), run_id="r" * 100_000, request_id="\x00" * 10),
    )
    cases["cancel: request_id of 100 000 characters"] = lambda channel, seeds: (
        "CancelThreadRun",
        ts.CancelThreadRunRequest(thread_id=new_thread(channel), request_id="\x00" * 100_000),
    )
    cases["start: NULs in every ID"] = lambda channel, seeds: (
        "StartThreadRun",
        ts.StartThreadRunRequest(spec=ts.ThreadRunSpec(thread_id="\x00" * 300, request_id="\x00", text="x")),
    )
    cases["watch: a NUL thread_id"] = lambda channel, seeds: (
        "WatchThread",
        ts.WatchThreadRequest(thread_id="\x00" * 300),
    )
    cases["run_id: NULs"] = lambda channel, seeds: (
        "CancelThreadRun",
        ts.CancelThreadRunRequest(thread_id=new_thread(channel), run_id="\x00" * 10_000),
    )
    return cases


THREAD_HOSTILE_CASES = thread_hostile_cases()


@pytest.mark.parametrize("name", list(THREAD_HOSTILE_CASES))
def test_thread_hostile_case(channel: grpc.Channel, seeds: Seeds, name: str) -> None:
    method, request = THREAD_HOSTILE_CASES[name](channel, seeds)
    send_thread(channel, method, request)


# --- afterwards: the log -------------------------------------------------------------------------------

RUN_KEYS = ("thread_id", "run_id", "request_id")


def test_every_log_line_is_json_and_names_its_run(
    served: LoggedServe, channel: grpc.Channel, seeds: Seeds
) -> None:
    # Runs last (pytest keeps file order), so it reads what every test above made the server write;
    # alone, it still has the seeds' runs and this refusal to read.
    send(channel, "Run", harness_service_pb2.RunRequest(spec=run_pb2.RunSpec(text="")))
    assert served.stop() == 0
    stray = [line for line in served.lines if line.strip() and not line.lstrip().startswith("{")]
    assert not stray, f"{len(stray)} lines on stderr that are not JSON, e.g.:\n" + "".join(stray[:20])
    records = served.records()
    assert any(r["event"] == "run_finished" for r in records)
    # No request's shape counts as the store being down (that would turn the service NOT_SERVING).
    down = [r for r in records if r["event"] in ("store_unavailable", "thread_store_health")]
    assert not down, "requests reported the store down: " + "; ".join(
        f"{r['event']} {str(r.get('exception', r.get('serving')))[-300:]}" for r in down[:3]
    )
    naming = [r for r in records if r["event"].startswith("run_") or any(key in r for key in RUN_KEYS)]
    unnamed = [r for r in naming if not all(r.get(key) is not None for key in RUN_KEYS)]
    assert not unnamed, f"{len(unnamed)} log lines name a run without all of {RUN_KEYS}, e.g. {unnamed[:5]}"
