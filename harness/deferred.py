"""Deferred tool requests, their results, and a Host's resume: the public values of SPEC §2.7.

A run that ends with native deferred tool calls or approvals suspends with a harness
`DeferredToolRequests` (`result.deferred`). The Host answers it with a **native** `DeferredToolResults`
(usually from `build_results`) and resumes with `DeferredToolResume(requests, results)`.

What lives here:

- `DeferredToolCall`, `DeferredToolRequests`, `DeferredToolResume`: the public types, with their JSON form.
  JSON goes through pydantic `TypeAdapter`s (the native results through the native types' own schemas),
  with `to_json()` / `from_json()`; a document that does not validate raises `RunError`
  (`deferred_request_invalid` for requests, `deferred_resume_invalid` for a resume) with pydantic's
  `{"errors": [{"loc", "type", "msg"}]}` in `details`.

The checks of a resume (§2.7.4 phase A) live in `_resume_checks`, tool recovery's input (§2.5.2) in
`_recovery_input`; both read the stored values through the package-private accessors at the end of this
module, never through private attributes.

Every harness value here is detached: constructors deep-copy what they are given and accessors hand out
deep copies, so a caller mutating what it passed in or got back never changes a stored batch.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeAlias
from urllib.parse import quote

from pydantic_ai.messages import (
    ModelMessage,
    ToolCallPart,
)
from pydantic_ai.tools import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied

from . import _history
from ._deferred_json import REQUESTS_ADAPTER, RESUME_ADAPTER, CallDoc, RequestsDoc, ResumeDoc, validated
from .errors import ErrorCode, RunError
from .json_text import JsonValue

__all__ = (
    "DEFERRED_FUNCTION_ID_METADATA_KEY",
    "MAX_DEFERRED_ITEMS",
    "MAX_DEFERRED_METADATA_BYTES",
    "MAX_TARGET_IDENTITY_CHARS",
    "NO_PENDING_RESPONSE_MESSAGE",
    "UNANSWERED_APPROVAL_MESSAGE",
    "DeferredCategory",
    "DeferredToolCall",
    "DeferredToolKind",
    "DeferredToolRequests",
    "DeferredToolResume",
    "identity_for",
)

DEFERRED_FUNCTION_ID_METADATA_KEY = "threadline.deferred_function_id"
"""Request metadata key naming the function tool that deferred a call (§2.7.3); approvals never carry it."""

MAX_DEFERRED_ITEMS = 128
"""Most calls plus approvals one batch may hold (§2.7.4 step 4)."""

MAX_TARGET_IDENTITY_CHARS = 1024
"""Longest accepted `target_identity`."""

MAX_DEFERRED_METADATA_BYTES = 64 * 1024
"""Largest accepted metadata mapping (requests' or results'), as UTF-8 canonical JSON."""

UNANSWERED_APPROVAL_MESSAGE = "Not approved: the thread continued without an answer."
"""The denial a pending approval gets when its thread goes on without answering it and its call is known
never to have started (LIVE §5.4, `DeferredToolRequests.deny_unanswered`)."""

NO_PENDING_RESPONSE_MESSAGE = "Prior message history has no response containing the pending calls."
"""The exact message of `deferred_request_missing` for a history without a `ModelResponse`."""

DeferredToolKind: TypeAlias = Literal["approval", "question", "external"]
"""What a pending item waits for (native `DeferredToolKind`)."""

DeferredCategory: TypeAlias = Literal["calls", "approvals"]
"""The category an item is requested and answered in (the native field names)."""


def identity_for(toolset_id: str | None, tool_name: str) -> str:
    """The `target_identity` of a tool: `tool/<q(toolset id)>/<q(tool name)>` (§2.7.2).

    Args:
        toolset_id: The `id` of the innermost non-wrapper toolset defining the tool; `None` → `"native"`.
        tool_name: The tool's name before native prefix/rename wrappers.

    Returns:
        For example `identity_for("acme.files", "delete_file") == "tool/acme.files/delete_file"`.
    """
    toolset = "native" if toolset_id is None else toolset_id
    # `safe=""` so a "/" inside an ID or name cannot fake an extra path segment.
    return f"tool/{quote(toolset, safe='')}/{quote(tool_name, safe='')}"


def fail(code: ErrorCode, message: str, **details: JsonValue) -> NoReturn:
    """Raise the `RunError` of a deferred-batch rule (package-private: the checks of every module)."""
    raise RunError(message, code=code, details=details)


# --------------------------------------------------------------------------------------------------------------
# DeferredToolCall


@dataclass(frozen=True, slots=True)
class DeferredToolCall:
    """One pending item: the call the model made and the call its target tool receives.

    Frozen, but the parts are native (mutable) dataclasses: `DeferredToolRequests` keeps private copies and
    hands out fresh ones, so mutate only items you built yourself.
    """

    model_call: ToolCallPart
    """The call exactly as the model made it (its `tool_call_id` keys results and metadata)."""
    target_call: ToolCallPart
    """The call the target tool receives. Equal to `model_call` in this milestone (no forwarding)."""
    target_identity: str
    """`tool/<q(toolset id)>/<q(tool name)>` of the tool that deferred the call (see `identity_for`)."""

    @property
    def forwarded(self) -> bool:
        """Whether the call was forwarded to another target: never, in this milestone."""
        return False

    @property
    def tool_call_id(self) -> str:
        """The model call's ID."""
        return self.model_call.tool_call_id

    @classmethod
    def of(cls, call: ToolCallPart, target_identity: str) -> DeferredToolCall:
        """An unforwarded item for `call`: `model_call` and `target_call` are two equal deep copies."""
        return cls(copy.deepcopy(call), copy.deepcopy(call), target_identity)


def _copy_item(item: DeferredToolCall) -> DeferredToolCall:
    # A whole deep copy: the item is frozen, but its parts are mutable native dataclasses.
    return copy.deepcopy(item)


# --------------------------------------------------------------------------------------------------------------
# DeferredToolRequests


class DeferredToolRequests:
    """The pending items of a suspended run (`result.deferred`), with their targets and metadata.

    Constructing one performs no validation beyond deep-copying (a resume checks the batch, §2.7.4 step 4);
    `_suspension.export_requests` is what the run machinery uses and checks at once. Every accessor returns a
    fresh copy.
    JSON: `to_json()` / `from_json()` (shape of §2.7.2; `kinds` only when there are questions).
    """

    __slots__ = ("_approvals", "_calls", "_kinds", "_metadata")

    _calls: tuple[DeferredToolCall, ...]
    _approvals: tuple[DeferredToolCall, ...]
    _metadata: dict[str, dict[str, Any]]
    _kinds: dict[str, str]

    def __init__(
        self,
        *,
        calls: Iterable[DeferredToolCall] = (),
        approvals: Iterable[DeferredToolCall] = (),
        metadata: Mapping[str, Mapping[str, Any]] | None = None,
        kinds: Mapping[str, Literal["question"]] | None = None,
    ) -> None:
        """Build a batch from copies of the given items.

        Args:
            calls: Items waiting for an external result or an answer to a question, in native order.
            approvals: Items waiting for an approval, in native order.
            metadata: Per-item metadata keyed by model call ID (the tool's own plus harness keys).
            kinds: `{call id: "question"}` for the calls that are questions (others are external).

        Raises:
            RunError: `deferred_request_invalid` when the values cannot be copied.
        """
        try:
            self._calls = tuple(copy.deepcopy(list(calls)))
            self._approvals = tuple(copy.deepcopy(list(approvals)))
            # Mappings become dicts; anything else is kept for the checks to report (§2.7.4 step 4).
            self._metadata = {
                key: dict(value) if isinstance(value, Mapping) else value
                for key, value in copy.deepcopy(dict(metadata or {})).items()
            }
            self._kinds = dict(kinds or {})
        except Exception as error:  # deepcopy/dict() of arbitrary objects can raise anything
            fail(
                ErrorCode.DEFERRED_REQUEST_INVALID,
                f"Deferred tool requests cannot be copied: {type(error).__name__}",
            )

    # -- accessors ----------------------------------------------------------------------------------------------

    @property
    def calls(self) -> list[DeferredToolCall]:
        """Items answered in `DeferredToolResults.calls` (external results and questions), copied."""
        return [_copy_item(item) for item in self._calls]

    @property
    def approvals(self) -> list[DeferredToolCall]:
        """Items answered in `DeferredToolResults.approvals`, copied."""
        return [_copy_item(item) for item in self._approvals]

    @property
    def metadata(self) -> dict[str, dict[str, Any]]:
        """Metadata keyed by model call ID, copied (includes `DEFERRED_FUNCTION_ID_METADATA_KEY`)."""
        return copy.deepcopy(self._metadata)

    @property
    def kinds(self) -> dict[str, str]:
        """`{call id: "question"}` for the calls that are questions, copied."""
        return dict(self._kinds)

    def kind(self, tool_call_id: str) -> DeferredToolKind:
        """What the item with this model call ID waits for.

        Raises:
            ValueError: No item has this ID (as natively).
        """
        if any(item_id(item) == tool_call_id for item in self._approvals):
            return "approval"
        if not any(item_id(item) == tool_call_id for item in self._calls):
            raise ValueError(f"No pending deferred tool call has ID {tool_call_id!r}")
        return "question" if self._kinds.get(tool_call_id) == "question" else "external"

    def tool_call_ids(self) -> list[str]:
        """The model call IDs of all items: calls first, then approvals."""
        return [item_id(item) for item in (*self._calls, *self._approvals)]

    # -- native -------------------------------------------------------------------------------------------------

    def target_requests(self) -> NativeDeferredToolRequests:
        """The native structure the tools produced (detached): target calls, their metadata, question kinds.

        The harness-owned `DEFERRED_FUNCTION_ID_METADATA_KEY` is left out: it is not native data.
        """
        metadata: dict[str, dict[str, Any]] = {}
        for key, value in self._metadata.items():
            own = {k: copy.deepcopy(v) for k, v in value.items() if k != DEFERRED_FUNCTION_ID_METADATA_KEY}
            if own:
                metadata[key] = own
        return NativeDeferredToolRequests(
            calls=[copy.deepcopy(item.target_call) for item in self._calls],
            approvals=[copy.deepcopy(item.target_call) for item in self._approvals],
            metadata=metadata,
            _kinds={key: "question" for key, value in self._kinds.items() if value == "question"},
        )

    def build_results(
        self,
        *,
        approvals: Mapping[str, bool | ToolApproved | ToolDenied] | None = None,
        calls: Mapping[str, object] | None = None,
        metadata: Mapping[str, dict[str, Any]] | None = None,
        answered_by: Mapping[str, str] | None = None,
        approve_all: bool = False,
    ) -> DeferredToolResults:
        """Native `DeferredToolResults` for this batch, built by native `build_results`.

        Args:
            approvals: Answers to approval items, by model call ID.
            calls: Answers to external/question items, by model call ID (`ToolReturn`, `ToolFailed`,
                `ModelRetry` or a raw JSON value).
            metadata: Per-call metadata for the tools' `RunContext.tool_call_metadata`.
            answered_by: Who answered each item.
            approve_all: Approve (`ToolApproved()`) every approval item not in `approvals`. Never fills
                `calls`.

        Returns:
            The **native** results (pass them to `DeferredToolResume`).

        Raises:
            ValueError: A key names no item of its category.
        """
        return self.target_requests().build_results(
            approvals=dict(approvals) if approvals is not None else None,
            calls=dict(calls) if calls is not None else None,
            metadata=dict(metadata) if metadata is not None else None,
            answered_by=dict(answered_by) if answered_by is not None else None,
            approve_all=approve_all,
        )

    # -- JSON ---------------------------------------------------------------------------------------------------

    def _doc(self) -> RequestsDoc:
        doc: RequestsDoc = {
            "calls": [_call_doc(item) for item in self._calls],
            "approvals": [_call_doc(item) for item in self._approvals],
            "metadata": self._metadata,
        }
        if self._kinds:
            doc["kinds"] = {key: "question" for key in self._kinds}
        return doc

    def to_jsonable(self) -> dict[str, JsonValue]:
        """The §2.7.2 JSON document as Python values (new objects)."""
        dumped: dict[str, JsonValue] = REQUESTS_ADAPTER.dump_python(self._doc(), mode="json")
        return dumped

    def to_json(self) -> str:
        """The §2.7.2 JSON document: `calls`, `approvals`, `metadata`, and `kinds` only with questions."""
        return REQUESTS_ADAPTER.dump_json(self._doc()).decode()

    @classmethod
    def from_json(cls, data: str | bytes | bytearray) -> DeferredToolRequests:
        """Load `to_json()` output. Only the shape is checked here; a resume checks the rest.

        Raises:
            RunError: `deferred_request_invalid` with `{"errors": [...]}` when the document does not validate.
        """
        doc = validated(
            REQUESTS_ADAPTER.validate_json,
            data,
            ErrorCode.DEFERRED_REQUEST_INVALID,
            "Deferred tool requests",
        )
        return cls._from_doc(doc)

    @classmethod
    def from_jsonable(cls, data: object) -> DeferredToolRequests:
        """Load `to_jsonable()` output (same rules as `from_json`)."""
        doc = validated(
            REQUESTS_ADAPTER.validate_python,
            data,
            ErrorCode.DEFERRED_REQUEST_INVALID,
            "Deferred tool requests",
        )
        return cls._from_doc(doc)

    @classmethod
    def _from_doc(cls, doc: RequestsDoc) -> DeferredToolRequests:
        return cls(
            calls=[
                DeferredToolCall(c["model_call"], c["target_call"], c["target_identity"])
                for c in doc["calls"]
            ],
            approvals=[
                DeferredToolCall(c["model_call"], c["target_call"], c["target_identity"])
                for c in doc["approvals"]
            ],
            metadata=doc["metadata"],
            kinds=doc.get("kinds"),
        )

    # -- value semantics ----------------------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeferredToolRequests):
            return NotImplemented
        return (
            self._calls == other._calls
            and self._approvals == other._approvals
            and self._metadata == other._metadata
            and self._kinds == other._kinds
        )

    __hash__ = None  # type: ignore[assignment]  # mutable-looking value: equality without hashing

    def __repr__(self) -> str:
        return (
            f"DeferredToolRequests(calls={list(self._calls)!r}, approvals={list(self._approvals)!r}, "
            f"metadata={self._metadata!r}, kinds={self._kinds!r})"
        )

    def deny_unanswered(self, message: str, not_started: Collection[str]) -> DeferredToolResume | None:
        """The honest answer to this batch's approvals when a thread goes on without answers (LIVE §5.4):
        each approval whose call is in `not_started` (known never to have started) denied with `message`,
        as a `recovery=True` resume of only those (`None` when there are none). Run it as the retained
        batch of the next run: each is recorded `outcome="denied"` once, and its tool may be gone.
        Other items (external calls, questions, approvals that may have run) stay to tool recovery."""
        denied = [item_id(item) for item in self._approvals if _item_id_or_none(item) in not_started]
        if not denied:
            return None
        results = DeferredToolResults(approvals={call_id: ToolDenied(message) for call_id in denied})
        return DeferredToolResume._trusted(self._filtered(set(denied)), results, True)

    def _filtered(self, keep: set[str]) -> DeferredToolRequests:
        return DeferredToolRequests(
            calls=[item for item in self._calls if _item_id_or_none(item) in keep],
            approvals=[item for item in self._approvals if _item_id_or_none(item) in keep],
            metadata={key: value for key, value in self._metadata.items() if key in keep},
            kinds={
                key: "question" for key, value in self._kinds.items() if key in keep and value == "question"
            },
        )


def _call_doc(item: DeferredToolCall) -> CallDoc:
    return {
        "model_call": item.model_call,
        "target_call": item.target_call,
        "target_identity": item.target_identity,
    }


def _item_id_or_none(item: object) -> str | None:
    # Robust against junk items (a resume checks them only after `remaining` ran, §2.7.4 step 3 → 4).
    model_call = getattr(item, "model_call", None)
    call_id = getattr(model_call, "tool_call_id", None)
    return call_id if isinstance(call_id, str) else None


# --------------------------------------------------------------------------------------------------------------
# DeferredToolResume


# No `slots=True`: CPython 3.11 frozen slotted dataclasses fail `super()` on assigning a non-field name.
@dataclass(frozen=True, init=False, repr=False)
class DeferredToolResume:
    """A Host's answer to a suspension: the exported requests and native results (§2.7.2).

    Frozen and detached: the constructor deep-copies both values, accessors return copies.
    JSON: `to_json()` / `from_json()`, `{"requests": <requests>, "results": <native>, "recovery": bool}`.
    """

    _requests: DeferredToolRequests
    _results: DeferredToolResults
    _recovery: bool

    __hash__ = None  # type: ignore[assignment]  # equality by value, like the mutable-looking batch it holds

    def __init__(
        self,
        requests: DeferredToolRequests,
        results: DeferredToolResults,
        recovery: bool = False,
    ) -> None:
        """Bind results to the requests they answer.

        Args:
            requests: The harness batch the run exported (`result.deferred`, or `remaining(...)` of it).
            results: Native results (e.g. `requests.build_results(...)`).
            recovery: `True` to recover an interrupted resume (§2.7.6).

        Raises:
            RunError: `deferred_resume_invalid` for a wrong type or a value that cannot be copied.
        """
        if not isinstance(requests, DeferredToolRequests):
            fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                "DeferredToolResume.requests must be the harness DeferredToolRequests.",
                received=type(requests).__name__,
            )
        if not isinstance(results, DeferredToolResults):
            fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                "DeferredToolResume.results must be a native pydantic_ai DeferredToolResults.",
                received=type(results).__name__,
            )
        if type(recovery) is not bool:
            fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                "DeferredToolResume.recovery must be a bool.",
                received=type(recovery).__name__,
            )
        for field_name in ("calls", "approvals", "metadata", "answered_by"):
            if not isinstance(getattr(results, field_name, None), dict):
                fail(
                    ErrorCode.DEFERRED_RESUME_INVALID,
                    f"DeferredToolResults.{field_name} must be a dict.",
                    field=field_name,
                )
        try:
            copied = (copy.deepcopy(requests), copy.deepcopy(results))
        except Exception as error:  # anything a foreign object's __deepcopy__ may raise
            fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                f"The deferred resume cannot be copied: {type(error).__name__}",
            )
        self._set(*copied, recovery)

    def _set(self, requests: DeferredToolRequests, results: DeferredToolResults, recovery: bool) -> None:
        # The one place a frozen dataclass with its own `__init__` assigns its fields.
        object.__setattr__(self, "_requests", requests)
        object.__setattr__(self, "_results", results)
        object.__setattr__(self, "_recovery", recovery)

    @classmethod
    def _trusted(
        cls, requests: DeferredToolRequests, results: DeferredToolResults, recovery: bool
    ) -> DeferredToolResume:
        # For values this module just built from private copies: skip the second deep copy.
        resume = object.__new__(cls)
        resume._set(requests, results, recovery)
        return resume

    # -- accessors ----------------------------------------------------------------------------------------------

    @property
    def requests(self) -> DeferredToolRequests:
        """The requests (a copy)."""
        return copy.deepcopy(self._requests)

    @property
    def results(self) -> DeferredToolResults:
        """The native results (a copy)."""
        return copy.deepcopy(self._results)

    @property
    def recovery(self) -> bool:
        """Whether this resumes an interrupted resume (§2.7.6)."""
        return self._recovery

    def model_results(self) -> DeferredToolResults:
        """The native batch keyed by model call ID, for `deferred_tool_results` (a copy).

        Without forwarding, model and target call IDs coincide, so this is the results as supplied.
        """
        return copy.deepcopy(self._results)

    def remaining(self, messages: Sequence[ModelMessage]) -> DeferredToolResume | None:
        """The part of this batch `messages` has not incorporated yet (§2.7.5).

        Pending = the last `ModelResponse`'s call IDs minus those answered in later requests; the calls and
        approvals whose model call ID is pending are kept, with their results, metadata and kinds.

        Args:
            messages: A checkpoint's message history (not copied).

        Returns:
            A new resume with the same `recovery` flag, or `None` when nothing is left (the batch was
            incorporated, or superseded by a later response).

        Raises:
            RunError: `deferred_request_missing` when `messages` has no `ModelResponse`.
        """
        if _history.last_response_index(messages) is None:
            fail(ErrorCode.DEFERRED_REQUEST_MISSING, NO_PENDING_RESPONSE_MESSAGE)
        return self._keeping({call.tool_call_id for call in _history.pending_calls(messages)})

    def without_positive_approvals(self, keep: Collection[str] = ()) -> DeferredToolResume | None:
        """This batch without its positive approvals (`None` when nothing else is left), but those of
        the calls in `keep`.

        What a durable Host retains after a recovery run: a recovery never reuses a positive approval
        (§2.7.6), so keeping one would only make a later run look like a recovery for nothing; a host
        that knows a call never started keeps its approval for the next run (§2.5.8).
        """
        approved = {
            key
            for key, value in self._results.approvals.items()
            if (value is True or isinstance(value, ToolApproved)) and key not in keep
        }
        ids = {_item_id_or_none(item) for item in (*self._requests._calls, *self._requests._approvals)}
        return self._keeping({key for key in ids if key is not None and key not in approved})

    def _keeping(self, pending: set[str]) -> DeferredToolResume | None:
        """The items whose call ID is in `pending`, with their results, metadata and kinds."""
        requests = self._requests._filtered(pending)
        if not requests._calls and not requests._approvals:
            return None
        call_ids = {_item_id_or_none(item) for item in requests._calls}
        approval_ids = {_item_id_or_none(item) for item in requests._approvals}
        kept = call_ids | approval_ids
        results = self._results
        filtered = DeferredToolResults(
            calls={key: copy.deepcopy(value) for key, value in results.calls.items() if key in call_ids},
            approvals={
                key: copy.deepcopy(value) for key, value in results.approvals.items() if key in approval_ids
            },
            metadata={key: copy.deepcopy(value) for key, value in results.metadata.items() if key in kept},
            answered_by={key: value for key, value in results.answered_by.items() if key in kept},
        )
        return DeferredToolResume._trusted(requests, filtered, self._recovery)

    # -- JSON ---------------------------------------------------------------------------------------------------

    def to_json(self) -> str:
        """`{"requests": <requests JSON>, "results": <native results JSON>, "recovery": <bool>}`."""
        doc: ResumeDoc = {
            "requests": self._requests._doc(),
            "results": self._results,
            "recovery": self._recovery,
        }
        return RESUME_ADAPTER.dump_json(doc).decode()

    @classmethod
    def from_json(cls, data: str | bytes | bytearray) -> DeferredToolResume:
        """Load `to_json()` output. Only the shape is checked here; `preflight_resume` checks the rest.

        Raises:
            RunError: `deferred_resume_invalid` with `{"errors": [...]}` when the document does not validate.
        """
        doc = validated(
            RESUME_ADAPTER.validate_json, data, ErrorCode.DEFERRED_RESUME_INVALID, "Deferred resume"
        )
        return cls(DeferredToolRequests._from_doc(doc["requests"]), doc["results"], doc["recovery"])

    def __repr__(self) -> str:
        return f"DeferredToolResume({self._requests!r}, {self._results!r}, recovery={self._recovery!r})"


# --------------------------------------------------------------------------------------------------------------
# Package-private accessors: the stored values themselves, not copies, for the harness's own checks
# (`_resume_checks`, `_recovery_input`). Callers only read them.


def stored_items(requests: DeferredToolRequests) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The calls and approvals as stored (items a caller built by hand may be junk: check before use)."""
    return requests._calls, requests._approvals


def stored_metadata(requests: DeferredToolRequests) -> dict[str, Any]:
    """The metadata as stored (values a caller built by hand may not be dicts)."""
    return requests._metadata


def stored_kinds(requests: DeferredToolRequests) -> dict[str, str]:
    """The question kinds as stored."""
    return requests._kinds


def stored_resume(resume: DeferredToolResume) -> tuple[DeferredToolRequests, DeferredToolResults, bool]:
    """A resume's requests, native results and recovery flag, as stored."""
    return resume._requests, resume._results, resume._recovery


def item_id(item: DeferredToolCall) -> str:
    """A well-formed item's model call ID."""
    return item.model_call.tool_call_id
