"""Deferred requests, results, resume validation (SPEC §2.7.2-§2.7.5) and the history helpers."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import DeferredToolRequests as NativeRequests
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied

from harness import _history
from harness._recovery_input import find_unresolved_calls
from harness._resume_checks import check_remaining, preflight_resume
from harness._suspension import export_requests
from harness._tooling import pending_items
from harness.deferred import (
    DEFERRED_FUNCTION_ID_METADATA_KEY,
    NO_PENDING_RESPONSE_MESSAGE,
    DeferredToolCall,
    DeferredToolRequests,
    DeferredToolResume,
    identity_for,
)
from harness.errors import ErrorCode, RunError, StateError

SMS = "tool/acme.sms/send_sms"


def call(call_id: str, name: str = "send_sms", args: Any = None) -> ToolCallPart:
    return ToolCallPart(name, {"to": call_id} if args is None else args, call_id)


def item(call_id: str, name: str = "send_sms", args: Any = None, identity: str = SMS) -> DeferredToolCall:
    return DeferredToolCall.of(call(call_id, name, args), identity)


def ret(call_id: str, name: str = "send_sms", outcome: Any = "success") -> ToolReturnPart:
    return ToolReturnPart(name, "done", call_id, outcome=outcome)


def retry_prompt(call_id: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated natively, still possible in memory
        return RetryPromptPart("again", tool_name="send_sms", tool_call_id=call_id)


def history(*calls: ToolCallPart, answers: tuple[Any, ...] = ()) -> list[ModelMessage]:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("start")]),
        ModelResponse(parts=[TextPart("ok"), *calls]),
    ]
    if answers:
        messages.append(ModelRequest(parts=list(answers)))
    return messages


def batch() -> tuple[DeferredToolRequests, list[ModelMessage]]:
    """c1 external, a1 approval; the history's last response holds both unanswered."""
    requests = DeferredToolRequests(
        calls=[item("c1")],
        approvals=[item("a1", "delete", identity="tool/native/delete")],
        metadata={"c1": {"channel": "sms", DEFERRED_FUNCTION_ID_METADATA_KEY: SMS}},
    )
    return requests, history(call("c1"), call("a1", "delete"))


def good_resume(**results: Any) -> tuple[DeferredToolResume, list[ModelMessage]]:
    requests, messages = batch()
    native = requests.build_results(
        calls=results.get("calls", {"c1": "sent"}), approvals=results.get("approvals", {"a1": True})
    )
    return DeferredToolResume(requests, native), messages


def code_of(fn: Callable[[], object]) -> tuple[object, dict[str, Any], str]:
    with pytest.raises(RunError) as info:
        fn()
    return info.value.code, info.value.details, info.value.message


# --------------------------------------------------------------------------------------------------------------
# _history


def test_history_helpers() -> None:
    messages = history(
        call("c1"), call("c2"), call("c3"), answers=(ret("c1", outcome="failed"), retry_prompt("c2"))
    )
    assert _history.last_response_index(messages) == 1
    last = _history.last_response(messages)
    assert last is not None
    assert [c.tool_call_id for c in _history.response_tool_calls(last)] == [
        "c1",
        "c2",
        "c3",
    ]
    assert _history.answered_call_ids(messages, 1) == {"c1", "c2"}
    assert [c.tool_call_id for c in _history.pending_calls(messages)] == ["c3"]
    assert _history.pending_calls([ModelRequest(parts=[UserPromptPart("x")])]) == []
    assert _history.last_response_index([]) is None


def test_history_only_last_response_counts() -> None:
    messages = [*history(call("old")), ModelResponse(parts=[call("new")])]
    assert [c.tool_call_id for c in _history.pending_calls(messages)] == ["new"]


@pytest.mark.parametrize("outcome", ["success", "failed", "denied", "interrupted", "retried"])
def test_any_outcome_answers(outcome: Any) -> None:
    assert _history.pending_calls(history(call("c1"), answers=(ret("c1", outcome=outcome),))) == []


def test_parse_and_compare_arguments() -> None:
    assert _history.parse_arguments(None) == {} == _history.parse_arguments("")
    assert _history.parse_arguments('{"a": 1}') == {"a": 1}
    for bad in ("{", "[1]", '{"a": NaN}', {"a": math.inf}, 3):
        with pytest.raises(_history.InvalidArguments):
            _history.parse_arguments(bad)
    assert _history.arguments_equal({"a": 1}, {"a": 1.0})
    assert not _history.arguments_equal({"a": True}, {"a": 1})
    assert not _history.arguments_equal({"a": [1]}, {"a": [1, 2]})


# --------------------------------------------------------------------------------------------------------------
# Types


def test_identity_for() -> None:
    assert identity_for("acme.files", "delete_file") == "tool/acme.files/delete_file"
    assert identity_for(None, "x") == "tool/native/x"
    assert identity_for("a/b", "c d") == "tool/a%2Fb/c%20d"


def test_deferred_tool_call_is_frozen_and_not_forwarded() -> None:
    value = item("c1")
    assert value.forwarded is False
    assert value.model_call == value.target_call and value.model_call is not value.target_call
    with pytest.raises(AttributeError):
        value.target_identity = "x"  # type: ignore[misc]


def test_from_native_merges_metadata_and_kinds() -> None:
    native = NativeRequests(
        calls=[call("c1"), call("e1", "ext")],
        approvals=[call("a1", "delete")],
        metadata={"c1": {"channel": "sms"}, "a1": {DEFERRED_FUNCTION_ID_METADATA_KEY: "forged", "why": "x"}},
        _kinds={"c1": "question"},
    )
    requests = export_requests(
        native,
        {"c1": SMS, "e1": "tool/ext/ext", "a1": "tool/native/delete"},
        {"c1": SMS, "a1": "tool/native/delete"},
    )
    assert requests.metadata == {
        "c1": {"channel": "sms", DEFERRED_FUNCTION_ID_METADATA_KEY: SMS},
        "a1": {"why": "x"},
    }
    assert [requests.kind(i) for i in ("c1", "e1", "a1")] == ["question", "external", "approval"]
    with pytest.raises(ValueError):
        requests.kind("nope")
    target = requests.target_requests()
    assert isinstance(target, NativeRequests)
    assert target == NativeRequests(
        calls=[call("c1"), call("e1", "ext")],
        approvals=[call("a1", "delete")],
        metadata={"c1": {"channel": "sms"}, "a1": {"why": "x"}},
        _kinds={"c1": "question"},
    )
    assert target._kinds == {"c1": "question"}


def test_from_native_needs_identities_and_checks() -> None:
    native = NativeRequests(calls=[call("c1")])
    assert code_of(lambda: export_requests(native, {}, {}))[:2] == (
        ErrorCode.DEFERRED_REQUEST_MISSING,
        {"tool_call_id": "c1"},
    )
    empty = NativeRequests()
    assert code_of(lambda: export_requests(empty, {}, {}))[0] is ErrorCode.DEFERRED_REQUESTS_EMPTY


def test_build_results() -> None:
    requests, _ = batch()
    results = requests.build_results(approve_all=True)
    assert isinstance(results, DeferredToolResults)
    assert results.calls == {} and results.approvals == {"a1": ToolApproved()}
    results = requests.build_results(approvals={"a1": ToolDenied("no")}, calls={"c1": 1}, approve_all=True)
    assert results.approvals == {"a1": ToolDenied("no")} and results.calls == {"c1": 1}
    with pytest.raises(ValueError):
        requests.build_results(calls={"a1": "x"})
    with pytest.raises(ValueError):
        requests.build_results(approvals={"zz": True})


def test_requests_are_detached() -> None:
    metadata = {"c1": {"channel": "sms"}}
    part = call("c1")
    requests = DeferredToolRequests(calls=[DeferredToolCall(part, call("c1"), SMS)], metadata=metadata)
    metadata["c1"]["channel"] = "changed"
    part.args = {"to": "changed"}
    assert requests.metadata == {"c1": {"channel": "sms"}}
    assert requests.calls[0].model_call.args == {"to": "c1"}
    requests.metadata["c1"]["channel"] = "x"
    requests.calls[0].model_call.args = {"x": 1}
    assert requests.metadata == {"c1": {"channel": "sms"}}
    assert requests.calls[0].model_call.args == {"to": "c1"}


def test_requests_json_shape_and_round_trip() -> None:
    requests = DeferredToolRequests(
        calls=[item("c1")], metadata={"c1": {"channel": "sms", DEFERRED_FUNCTION_ID_METADATA_KEY: SMS}}
    )
    data = json.loads(requests.to_json())
    assert list(data) == ["calls", "approvals", "metadata"]
    assert data["calls"][0]["target_identity"] == SMS
    assert data["calls"][0]["model_call"]["part_kind"] == "tool-call"
    assert DeferredToolRequests.from_json(requests.to_json()) == requests
    questions = DeferredToolRequests(calls=[item("c1")], kinds={"c1": "question"})
    assert json.loads(questions.to_json())["kinds"] == {"c1": "question"}
    assert DeferredToolRequests.from_json(questions.to_json()).kind("c1") == "question"
    assert DeferredToolRequests.from_jsonable(questions.to_jsonable()) == questions
    code, details, _ = code_of(lambda: DeferredToolRequests.from_json('{"calls": 1}'))
    assert code is ErrorCode.DEFERRED_REQUEST_INVALID and details["errors"]


def test_resume_json_round_trip_with_every_result_kind() -> None:
    requests = DeferredToolRequests(
        calls=[item(i) for i in ("c1", "c2", "c3", "c4", "c5")],
        approvals=[item(i, "delete") for i in ("a1", "a2", "a3", "a4")],
    )
    results = DeferredToolResults(
        calls={
            "c1": ToolFailed("boom"),
            "c2": ToolReturn({"x": 1}, metadata={"m": 1}),
            "c3": {"raw": [1, 2]},
            "c4": "text",
            "c5": ModelRetry("again"),
        },
        approvals={
            "a1": True,
            "a2": False,
            "a3": ToolApproved(override_args={"to": "y"}),
            "a4": ToolDenied("no"),
        },
        metadata={"c1": {"k": 1}},
        answered_by={"a1": "alice"},
    )
    resume = DeferredToolResume(requests, results, recovery=True)
    text = resume.to_json()
    data = json.loads(text)
    assert data["results"]["calls"]["c1"] == {"message": "boom", "kind": "tool-failed"}
    assert data["results"]["approvals"]["a3"]["kind"] == "tool-approved"
    assert data["results"]["approvals"]["a4"] == {"message": "no", "kind": "tool-denied"}
    assert data["recovery"] is True
    back = DeferredToolResume.from_json(text)
    assert back == resume
    assert isinstance(back.results.calls["c1"], ToolFailed)
    assert back.results.approvals["a1"] is True
    code, _, _ = code_of(
        lambda: DeferredToolResume.from_json('{"requests": {}, "results": {}, "recovery": 1}')
    )
    assert code is ErrorCode.DEFERRED_RESUME_INVALID


def test_resume_is_frozen_and_detached() -> None:
    requests, _ = batch()
    value = {"v": 1}
    results = requests.build_results(calls={"c1": value}, approve_all=True)
    resume = DeferredToolResume(requests, results)
    value["v"] = 2
    assert resume.results.calls == {"c1": {"v": 1}}
    resume.results.calls["c1"] = "x"
    resume.model_results().calls["c1"] = "x"
    assert resume.model_results().calls == {"c1": {"v": 1}}
    with pytest.raises(AttributeError):
        resume.recovery = True  # type: ignore[misc]


@pytest.mark.parametrize(
    "args",
    [
        (NativeRequests(), DeferredToolResults()),
        (DeferredToolRequests(), {"calls": {}}),
        (DeferredToolRequests(), DeferredToolResults(), 1),
        (DeferredToolRequests(), DeferredToolResults(calls={"c1": (x for x in [1])})),
    ],
    ids=["native-requests", "dict-results", "int-recovery", "uncopyable"],
)
def test_resume_construction_invalid(args: tuple[Any, ...]) -> None:
    assert code_of(lambda: DeferredToolResume(*args))[0] is ErrorCode.DEFERRED_RESUME_INVALID


# --------------------------------------------------------------------------------------------------------------
# remaining (§2.7.5)


def test_remaining_example() -> None:
    requests = DeferredToolRequests(
        calls=[item("c2"), item("c3")],
        approvals=[item("c1", "delete")],
        metadata={"c2": {"k": 2}, "c3": {"k": 3}},
    )
    results = requests.build_results(
        calls={"c2": "r2", "c3": "r3"}, approvals={"c1": True}, metadata={"c2": {}}
    )
    resume = DeferredToolResume(requests, results, recovery=True)
    checkpoint = history(call("c1", "delete"), call("c2"), call("c3"), answers=(ret("c2"),))
    left = resume.remaining(checkpoint)
    assert left is not None and left.recovery is True
    assert [i.tool_call_id for i in left.requests.calls] == ["c3"]
    assert [i.tool_call_id for i in left.requests.approvals] == ["c1"]
    assert left.requests.metadata == {"c3": {"k": 3}}
    assert left.results == DeferredToolResults(calls={"c3": "r3"}, approvals={"c1": True})
    final = [
        *checkpoint,
        ModelRequest(parts=[ret("c1", "delete"), ret("c3")]),
        ModelResponse(parts=[TextPart("all done")]),
    ]
    assert resume.remaining(final) is None
    code, _, message = code_of(lambda: resume.remaining([ModelRequest(parts=[UserPromptPart("x")])]))
    assert (code, message) == (ErrorCode.DEFERRED_REQUEST_MISSING, NO_PENDING_RESPONSE_MESSAGE)


# --------------------------------------------------------------------------------------------------------------
# preflight_resume (§2.7.4 phase A)


def test_preflight_accepts_a_good_resume() -> None:
    resume, messages = good_resume()
    checked = preflight_resume(resume, messages)
    assert checked == resume


def test_preflight_1_not_a_resume() -> None:
    assert code_of(lambda: preflight_resume("resume", []))[0] is ErrorCode.DEFERRED_RESUME_INVALID


def test_preflight_2_state_required() -> None:
    resume, _ = good_resume()
    assert code_of(lambda: preflight_resume(resume, None))[0] is ErrorCode.DEFERRED_STATE_REQUIRED


def test_preflight_3_recovery_filters_and_drops() -> None:
    requests, messages = batch()
    resume = DeferredToolResume(
        requests, requests.build_results(calls={"c1": "x"}, approve_all=True), recovery=True
    )
    answered = [*messages, ModelRequest(parts=[ret("c1")])]
    checked = preflight_resume(resume, answered)
    assert checked is not None and [i.tool_call_id for i in checked.requests.calls] == []
    assert [i.tool_call_id for i in checked.requests.approvals] == ["a1"]
    done = [*answered, ModelResponse(parts=[TextPart("bye")])]
    assert preflight_resume(resume, done) is None
    code, _, message = code_of(lambda: preflight_resume(resume, [ModelRequest(parts=[UserPromptPart("x")])]))
    assert (code, message) == (ErrorCode.DEFERRED_REQUEST_MISSING, NO_PENDING_RESPONSE_MESSAGE)


def test_preflight_3_recovery_refuses_a_call_the_model_never_made() -> None:
    """A forged ID is refused in a recovery resume as in a normal one (ours; issue 10, item 10).

    A batch superseded by a later response is still dropped (SPEC §2.7.5): its calls were made.
    """
    requests, messages = batch()
    forged = DeferredToolRequests(calls=[item("c1"), item("zz")])
    native = forged.build_results(calls={"c1": "x", "zz": "y"})
    for recovery in (True, False):
        code, details, _ = code_of(
            lambda recovery=recovery: preflight_resume(DeferredToolResume(forged, native, recovery), messages)
        )
        assert (code, details) == (ErrorCode.DEFERRED_REQUEST_MISSING, {"tool_call_id": "zz"})
    superseded = [*messages, ModelRequest(parts=[UserPromptPart("on")]), ModelResponse(parts=[call("n1")])]
    resume = DeferredToolResume(requests, requests.build_results(calls={"c1": "x"}, approve_all=True), True)
    assert preflight_resume(resume, superseded) is None


def test_check_remaining_checks_like_a_recovery_resume() -> None:
    """What `RemainingDeferred` answers is a batch a later resume accepts (issue 10, item 5)."""
    requests, messages = batch()
    native = requests.build_results(calls={"c1": "x"}, approve_all=True)
    resume = DeferredToolResume(requests, native)
    answered = [*messages, ModelRequest(parts=[ret("c1")])]
    left = check_remaining(resume, answered)
    assert left is not None and left.recovery is False and left.requests.tool_call_ids() == ["a1"]
    assert check_remaining(resume, [*answered, ModelResponse(parts=[TextPart("bye")])]) is None
    no_response = [ModelRequest(parts=[UserPromptPart("x")])]
    assert code_of(lambda: check_remaining(resume, no_response))[0] is ErrorCode.DEFERRED_REQUEST_MISSING
    bad_metadata = DeferredToolResume(
        DeferredToolRequests(calls=[item("c1")], metadata={"c1": {"a": float("nan")}}),
        DeferredToolResults(calls={"c1": "x"}),
    )
    assert code_of(lambda: check_remaining(bad_metadata, messages))[0] is ErrorCode.DEFERRED_METADATA_INVALID
    incomplete = DeferredToolResume(requests, DeferredToolResults(calls={"c1": "x"}))
    assert code_of(lambda: check_remaining(incomplete, messages))[0] is ErrorCode.DEFERRED_RESULTS_INCOMPLETE
    other_args = DeferredToolResume(
        DeferredToolRequests(calls=[item("c1", args={"to": "elsewhere"})]),
        DeferredToolResults(calls={"c1": "x"}),
    )
    assert code_of(lambda: check_remaining(other_args, messages))[0] is ErrorCode.DEFERRED_REQUEST_MISMATCH
    forged = DeferredToolResume(
        DeferredToolRequests(calls=[item("zz")]), DeferredToolResults(calls={"zz": 1})
    )
    assert code_of(lambda: check_remaining(forged, messages))[:2] == (
        ErrorCode.DEFERRED_REQUEST_MISSING,
        {"tool_call_id": "zz"},
    )


def _requests_case(name: str) -> DeferredToolRequests:
    junk: Any = "junk"
    junk_identity: Any = 5
    cases: dict[str, Callable[[], DeferredToolRequests]] = {
        "not-an-item": lambda: DeferredToolRequests(calls=[junk]),
        "not-parts": lambda: DeferredToolRequests(calls=[DeferredToolCall(junk, junk, SMS)]),
        "blank-id": lambda: DeferredToolRequests(calls=[item(" ")]),
        "repeated-id": lambda: DeferredToolRequests(approvals=[item("c1"), item("c1")]),
        "overlap": lambda: DeferredToolRequests(calls=[item("c1")], approvals=[item("c1")]),
        "empty": lambda: DeferredToolRequests(),
        "too-large": lambda: DeferredToolRequests(calls=[item(f"c{i}") for i in range(129)]),
        "identity-empty": lambda: DeferredToolRequests(calls=[item("c1", identity="")]),
        "identity-long": lambda: DeferredToolRequests(calls=[item("c1", identity="x" * 1025)]),
        "identity-type": lambda: DeferredToolRequests(
            calls=[DeferredToolCall(call("c1"), call("c1"), junk_identity)]
        ),
        "args-nan": lambda: DeferredToolRequests(calls=[item("c1", args={"x": math.nan})]),
        "args-unparsable": lambda: DeferredToolRequests(calls=[item("c1", args="{")]),
        "empty-name": lambda: DeferredToolRequests(calls=[item("c1", name="")]),
        "forwarded": lambda: DeferredToolRequests(
            calls=[DeferredToolCall(call("c1"), call("c1", "other"), SMS)]
        ),
        "meta-key": lambda: DeferredToolRequests(calls=[item("c1")], metadata={"zz": {}}),
        "meta-nan": lambda: DeferredToolRequests(calls=[item("c1")], metadata={"c1": {"x": math.inf}}),
        "meta-not-object": lambda: DeferredToolRequests(calls=[item("c1")], metadata={"c1": junk}),
        "meta-large": lambda: DeferredToolRequests(calls=[item("c1")], metadata={"c1": {"x": "y" * 65536}}),
        "meta-function-id-on-approval": lambda: DeferredToolRequests(
            approvals=[item("c1")], metadata={"c1": {DEFERRED_FUNCTION_ID_METADATA_KEY: SMS}}
        ),
    }
    return cases[name]()


@pytest.mark.parametrize(
    ("case", "code", "details"),
    [
        ("not-an-item", ErrorCode.DEFERRED_REQUEST_INVALID, {}),
        ("not-parts", ErrorCode.DEFERRED_REQUEST_INVALID, {}),
        ("blank-id", ErrorCode.DEFERRED_REQUEST_DUPLICATE, {"category": "calls"}),
        ("repeated-id", ErrorCode.DEFERRED_REQUEST_DUPLICATE, {"category": "approvals"}),
        ("overlap", ErrorCode.DEFERRED_REQUEST_CATEGORY_OVERLAP, {"tool_call_id": "c1"}),
        ("empty", ErrorCode.DEFERRED_REQUESTS_EMPTY, {}),
        ("too-large", ErrorCode.DEFERRED_REQUESTS_TOO_LARGE, {"count": 129, "limit": 128}),
        ("identity-empty", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("identity-long", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("identity-type", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("args-nan", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("args-unparsable", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("empty-name", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("forwarded", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("meta-key", ErrorCode.DEFERRED_METADATA_INVALID, {"tool_call_id": "zz"}),
        ("meta-nan", ErrorCode.DEFERRED_METADATA_INVALID, {"tool_call_id": "c1"}),
        ("meta-not-object", ErrorCode.DEFERRED_METADATA_INVALID, {"tool_call_id": "c1"}),
        ("meta-large", ErrorCode.DEFERRED_METADATA_INVALID, None),
        ("meta-function-id-on-approval", ErrorCode.DEFERRED_METADATA_INVALID, {"tool_call_id": "c1"}),
    ],
)
def test_preflight_4_requests(case: str, code: ErrorCode, details: dict[str, Any] | None) -> None:
    requests = _requests_case(case)
    resume = DeferredToolResume(requests, DeferredToolResults())
    got_code, got_details, _ = code_of(lambda: preflight_resume(resume, history(call("c1"))))
    assert got_code is code
    if details is not None:
        assert got_details == details


@pytest.mark.parametrize(
    ("calls", "approvals", "category"),
    [
        ({}, {"a1": True}, "calls"),
        ({"c1": "x", "zz": "y"}, {"a1": True}, "calls"),
        ({"c1": "x"}, {}, "approvals"),
        ({"c1": "x", "a1": "y"}, {}, "calls"),
    ],
    ids=["missing-call", "extra-call", "missing-approval", "wrong-category"],
)
def test_preflight_5_incomplete(calls: dict[str, Any], approvals: dict[str, Any], category: str) -> None:
    requests, messages = batch()
    resume = DeferredToolResume(requests, DeferredToolResults(calls=calls, approvals=approvals))
    code, details, _ = code_of(lambda: preflight_resume(resume, messages))
    assert code is ErrorCode.DEFERRED_RESULTS_INCOMPLETE and details["category"] == category


@pytest.mark.parametrize("approval", ["yes", 1, 0, None, {"kind": "tool-approved"}])
def test_preflight_6_approval_type(approval: Any) -> None:
    resume, messages = good_resume(approvals={"a1": True})
    bad = DeferredToolResume(
        resume.requests, DeferredToolResults(calls={"c1": "x"}, approvals={"a1": approval})
    )
    assert code_of(lambda: preflight_resume(bad, messages))[:2] == (
        ErrorCode.DEFERRED_APPROVAL_INVALID,
        {"tool_call_id": "a1"},
    )


@pytest.mark.parametrize("approval", [True, False, ToolApproved(), ToolDenied()])
def test_preflight_6_approval_ok(approval: Any) -> None:
    resume, messages = good_resume(approvals={"a1": approval})
    assert preflight_resume(resume, messages) is not None


@pytest.mark.parametrize(
    ("call_result", "approval"),
    [
        (ToolFailed(math.nan), True),  # type: ignore[arg-type]
        (ToolReturn({"x": math.inf}), True),
        (ToolReturn("ok", metadata={"x": math.nan}), True),
        ({"x": {1, 2}}, True),
        (object(), True),
        ("ok", ToolApproved(override_args={"x": math.nan})),
        ("ok", ToolApproved(override_args=[1])),  # type: ignore[arg-type]
    ],
    ids=[
        "failed-message",
        "return-value",
        "return-metadata",
        "raw-set",
        "raw-object",
        "override-nan",
        "override-list",
    ],
)
def test_preflight_7_results_finite_json(call_result: Any, approval: Any) -> None:
    requests, messages = batch()
    resume = DeferredToolResume(
        requests, DeferredToolResults(calls={"c1": call_result}, approvals={"a1": approval})
    )
    assert code_of(lambda: preflight_resume(resume, messages))[0] is ErrorCode.DEFERRED_RESULTS_INVALID


@pytest.mark.parametrize(
    "metadata",
    [{"zz": {}}, {"c1": {"x": math.nan}}, {"c1": "text"}, {"c1": {"x": "y" * 65536}}],
    ids=["non-pending", "nan", "not-object", "too-large"],
)
def test_preflight_8_result_metadata(metadata: dict[str, Any]) -> None:
    requests, messages = batch()
    resume = DeferredToolResume(
        requests, DeferredToolResults(calls={"c1": "x"}, approvals={"a1": True}, metadata=metadata)
    )
    assert code_of(lambda: preflight_resume(resume, messages))[0] is ErrorCode.DEFERRED_METADATA_INVALID


def _history_case(name: str) -> list[ModelMessage]:
    both = (call("c1"), call("a1", "delete"))
    cases: dict[str, list[ModelMessage]] = {
        "no-response": [ModelRequest(parts=[UserPromptPart("x")])],
        "repeated": history(*both, call("c1")),
        "moved-on": [
            *history(*both),
            ModelRequest(parts=[ret("c1"), ret("a1")]),
            ModelResponse(parts=[call("n1")]),
        ],
        "missing-one": history(call("c1")),
        "answered": history(*both, answers=(ret("c1"),)),
        "answered-retry-prompt": history(*both, answers=(retry_prompt("a1"),)),
        "unparsable": history(call("c1", args="{"), call("a1", "delete")),
        "name": history(call("c1", "other"), call("a1", "delete")),
        "args": history(call("c1", args={"to": "someone else"}), call("a1", "delete")),
        "args-bool-vs-int": history(call("c1", args={"to": True}), call("a1", "delete")),
    }
    return cases[name]


@pytest.mark.parametrize(
    ("case", "code", "details"),
    [
        ("no-response", ErrorCode.DEFERRED_REQUEST_MISSING, {}),
        ("repeated", ErrorCode.DEFERRED_REQUEST_DUPLICATE, {"tool_call_id": "c1"}),
        ("moved-on", ErrorCode.DEFERRED_REQUEST_MISSING, {"tool_call_id": "c1"}),
        ("missing-one", ErrorCode.DEFERRED_REQUEST_MISSING, {"tool_call_id": "a1"}),
        ("answered", ErrorCode.DEFERRED_REQUEST_COMPLETED, {"tool_call_id": "c1"}),
        ("answered-retry-prompt", ErrorCode.DEFERRED_REQUEST_COMPLETED, {"tool_call_id": "a1"}),
        ("unparsable", ErrorCode.DEFERRED_REQUEST_INVALID, {"tool_call_id": "c1"}),
        ("name", ErrorCode.DEFERRED_REQUEST_MISMATCH, {"tool_call_id": "c1"}),
        ("args", ErrorCode.DEFERRED_REQUEST_MISMATCH, {"tool_call_id": "c1"}),
    ],
)
def test_preflight_9_correlation(case: str, code: ErrorCode, details: dict[str, Any]) -> None:
    resume, _ = good_resume()
    got_code, got_details, message = code_of(lambda: preflight_resume(resume, _history_case(case)))
    assert (got_code, got_details) == (code, details)
    if case == "no-response":
        assert message == NO_PENDING_RESPONSE_MESSAGE


def test_preflight_9_bool_is_not_int() -> None:
    requests = DeferredToolRequests(calls=[item("c1", args={"to": 1})])
    resume = DeferredToolResume(requests, requests.build_results(calls={"c1": "x"}))
    messages = history(call("c1", args='{"to": true}'))
    assert code_of(lambda: preflight_resume(resume, messages))[0] is ErrorCode.DEFERRED_REQUEST_MISMATCH
    assert preflight_resume(resume, history(call("c1", args='{"to": 1.0}'))) is not None


def test_first_failing_check_wins() -> None:
    # Empty requests (step 4) beat missing results (step 5) and a history without a response (step 9).
    resume = DeferredToolResume(DeferredToolRequests(), DeferredToolResults(calls={"x": 1}))
    assert code_of(lambda: preflight_resume(resume, []))[0] is ErrorCode.DEFERRED_REQUESTS_EMPTY


# --------------------------------------------------------------------------------------------------------------
# Phase B and tool recovery inputs


def test_pending_items() -> None:
    requests, _ = batch()
    resume = DeferredToolResume(
        requests, requests.build_results(calls={"c1": ToolFailed("x")}, approve_all=True)
    )
    first, second = pending_items(resume)
    assert (first.tool_call_id, first.category, first.kind, first.function_id) == (
        "c1",
        "calls",
        "external",
        SMS,
    )
    assert first.target_identity == SMS and first.answered_with_failure
    assert (second.category, second.kind, second.function_id, second.target_identity) == (
        "approvals",
        "approval",
        None,
        "tool/native/delete",
    )


def test_find_unresolved_calls() -> None:
    requests = DeferredToolRequests(calls=[item("c1")], approvals=[item("a1"), item("a2"), item("a3")])
    results = DeferredToolResults(
        calls={"c1": ToolFailed("gone")}, approvals={"a1": True, "a2": False, "a3": ToolDenied("no")}
    )
    resume = DeferredToolResume(requests, results, recovery=True)
    messages = history(call("c1"), call("a1"), call("a2"), call("a3"), call("x1"))
    found = find_unresolved_calls(messages, resume)
    assert [c.tool_call_id for c in found.calls] == ["c1", "a1", "a2", "a3", "x1"]
    assert found.facts.calls == {"c1": ToolFailed("gone")}
    assert found.facts.approvals == {"a2": ToolDenied(), "a3": ToolDenied("no")}
    suspended: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("x")]),
        ModelResponse(parts=[call("s1")], state="suspended"),
    ]
    assert find_unresolved_calls(suspended, None).calls == ()
    assert find_unresolved_calls([], None).calls == ()
    with pytest.raises(StateError) as info:
        find_unresolved_calls(history(call("other")), resume)
    assert info.value.code is ErrorCode.DEFERRED_STATE_INVALID
