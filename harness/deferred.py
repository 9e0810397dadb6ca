"""Deferred tool requests, their results, and the validation of a resume (SPEC §2.7, §2.5.2).

A run that ends with native deferred tool calls or approvals suspends with a harness
`DeferredToolRequests` (`result.deferred`). The Host answers it with a **native** `DeferredToolResults`
(usually from `build_results`) and resumes with `DeferredToolResume(requests, results)`.

What lives here:

- `DeferredToolCall`, `DeferredToolRequests`, `DeferredToolResume`: the public types, with their JSON form.
  JSON goes through pydantic `TypeAdapter`s (the native results through the native types' own schemas),
  with `to_json()` / `from_json()`; a document that does not validate raises `RunError`
  (`deferred_request_invalid` for requests, `deferred_resume_invalid` for a resume) with pydantic's
  `{"errors": [{"loc", "type", "msg"}]}` in `details`.
- `preflight_resume()`: phase A of §2.7.4 (checks 1-9, the first failing check wins).
- `PendingDeferredItem` (via `DeferredToolResume.pending_items()`): what phase B needs per item.
- `find_unresolved_calls()`: §2.5.2, the pending calls and retained facts tool recovery decides on.

Every harness value here is detached: constructors deep-copy what they are given and accessors hand out
deep copies, so a caller mutating what it passed in or got back never changes a stored batch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, NotRequired, TypeAlias, TypeVar
from urllib.parse import quote

from pydantic import ConfigDict, StrictBool, TypeAdapter, ValidationError, with_config
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    ToolCallPart,
    ToolReturn,
)
from pydantic_ai.tools import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied
from typing_extensions import TypedDict

from . import _history
from ._json import JsonValue, NotFiniteJson, canonical_json, check_finite_json
from .errors import ErrorCode, RunError, StateError

__all__ = (
    "DEFERRED_FUNCTION_ID_METADATA_KEY",
    "MAX_DEFERRED_ITEMS",
    "MAX_DEFERRED_METADATA_BYTES",
    "MAX_TARGET_IDENTITY_CHARS",
    "NO_PENDING_RESPONSE_MESSAGE",
    "DeferredCategory",
    "DeferredToolCall",
    "DeferredToolKind",
    "DeferredToolRequests",
    "DeferredToolResume",
    "PendingDeferredItem",
    "UnresolvedCalls",
    "find_unresolved_calls",
    "identity_for",
    "preflight_resume",
)

DEFERRED_FUNCTION_ID_METADATA_KEY = "threadline.deferred_function_id"
"""Request metadata key naming the function tool that deferred a call (§2.7.3); approvals never carry it."""

MAX_DEFERRED_ITEMS = 128
"""Most calls plus approvals one batch may hold (§2.7.4 step 4)."""

MAX_TARGET_IDENTITY_CHARS = 1024
"""Longest accepted `target_identity`."""

MAX_DEFERRED_METADATA_BYTES = 64 * 1024
"""Largest accepted metadata mapping (requests' or results'), as UTF-8 canonical JSON."""

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


def _fail(code: ErrorCode, message: str, **details: JsonValue) -> NoReturn:
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
# JSON schemas (private): the TypedDicts describe the documents; pydantic validates and serializes them.


@with_config(ConfigDict(extra="forbid"))
class _CallDoc(TypedDict):
    model_call: ToolCallPart
    target_call: ToolCallPart
    target_identity: str


@with_config(ConfigDict(extra="forbid"))
class _RequestsDoc(TypedDict):
    calls: list[_CallDoc]
    approvals: list[_CallDoc]
    metadata: dict[str, dict[str, Any]]
    # Only present when there are questions, as in §2.7.2 (and as native `_kinds`).
    kinds: NotRequired[dict[str, Literal["question"]]]


@with_config(ConfigDict(extra="forbid"))
class _ResumeDoc(TypedDict):
    requests: _RequestsDoc
    # The native results, through the native schemas (discriminators "tool-approved", "tool-denied",
    # "tool-failed", "model-retry", "tool-return"; other values stay raw JSON).
    results: DeferredToolResults
    recovery: StrictBool


_REQUESTS_ADAPTER: TypeAdapter[_RequestsDoc] = TypeAdapter(_RequestsDoc)
_RESUME_ADAPTER: TypeAdapter[_ResumeDoc] = TypeAdapter(_ResumeDoc)


_DocT = TypeVar("_DocT")


def _validated(validate: Callable[[Any], _DocT], data: object, code: ErrorCode, what: str) -> _DocT:
    """`validate(data)`; the one failure shape of every loader: `RunError(code)`, `{"errors": [...]}`."""
    try:
        return validate(data)
    except ValidationError as error:
        errors: list[JsonValue] = [
            {
                "loc": [str(p) if not isinstance(p, int) else p for p in e["loc"]],
                "type": e["type"],
                "msg": e["msg"],
            }
            for e in error.errors(include_url=False, include_context=False, include_input=False)
        ]
        raise RunError(f"{what} JSON is invalid.", code=code, details={"errors": errors}) from None


# --------------------------------------------------------------------------------------------------------------
# DeferredToolRequests


class DeferredToolRequests:
    """The pending items of a suspended run (`result.deferred`), with their targets and metadata.

    Constructing one performs no validation beyond deep-copying (a resume checks the batch, §2.7.4 step 4);
    `from_native` is what the run machinery uses and checks at once. Every accessor returns a fresh copy.
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
            _fail(
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
        if any(_item_id(item) == tool_call_id for item in self._approvals):
            return "approval"
        if not any(_item_id(item) == tool_call_id for item in self._calls):
            raise ValueError(f"No pending deferred tool call has ID {tool_call_id!r}")
        return "question" if self._kinds.get(tool_call_id) == "question" else "external"

    def tool_call_ids(self) -> list[str]:
        """The model call IDs of all items: calls first, then approvals."""
        return [_item_id(item) for item in (*self._calls, *self._approvals)]

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

    @classmethod
    def from_native(
        cls,
        native_requests: NativeDeferredToolRequests,
        identities: Mapping[str, str],
        function_ids: Mapping[str, str],
    ) -> DeferredToolRequests:
        """The batch a run suspends with (§2.7.3), checked like a resume's requests (§2.7.4 step 4).

        Args:
            native_requests: What the native run ended with.
            identities: `target_identity` of the called tool, by call ID (every item needs one).
            function_ids: For calls deferred by a *function* tool (`CallDeferred` raised in its body), that
                tool's identity, by call ID. Recorded as `DEFERRED_FUNCTION_ID_METADATA_KEY` on calls only;
                entries for approvals are ignored.

        Returns:
            A detached, checked batch in native order.

        Raises:
            RunError: `deferred_request_missing` (`{"tool_call_id"}`) for an item without an identity, or
                any step-4 code.
        """
        approval_ids = {part.tool_call_id for part in native_requests.approvals}

        def wrap(part: ToolCallPart) -> DeferredToolCall:
            identity = identities.get(part.tool_call_id)
            if identity is None:
                _fail(
                    ErrorCode.DEFERRED_REQUEST_MISSING,
                    f"No tool identity was captured for deferred call {part.tool_call_id!r}.",
                    tool_call_id=part.tool_call_id,
                )
            return DeferredToolCall.of(part, identity)

        calls = [wrap(part) for part in native_requests.calls]
        approvals = [wrap(part) for part in native_requests.approvals]
        metadata: dict[str, dict[str, Any]] = {}
        for item in (*calls, *approvals):
            call_id = item.tool_call_id
            # The key is the harness's: a value a tool put there itself would fake a function identity.
            merged = {
                key: value
                for key, value in (native_requests.metadata.get(call_id) or {}).items()
                if key != DEFERRED_FUNCTION_ID_METADATA_KEY
            }
            if call_id not in approval_ids and call_id in function_ids:
                merged[DEFERRED_FUNCTION_ID_METADATA_KEY] = function_ids[call_id]
            if merged:
                metadata[call_id] = merged
        kinds: dict[str, Literal["question"]] = {
            key: "question"
            for key, value in native_requests._kinds.items()  # the only native access to question kinds
            if value == "question"
        }
        requests = cls(calls=calls, approvals=approvals, metadata=metadata, kinds=kinds)
        _check_requests(requests)
        return requests

    # -- JSON ---------------------------------------------------------------------------------------------------

    def _doc(self) -> _RequestsDoc:
        doc: _RequestsDoc = {
            "calls": [_call_doc(item) for item in self._calls],
            "approvals": [_call_doc(item) for item in self._approvals],
            "metadata": self._metadata,
        }
        if self._kinds:
            doc["kinds"] = {key: "question" for key in self._kinds}
        return doc

    def to_jsonable(self) -> dict[str, JsonValue]:
        """The §2.7.2 JSON document as Python values (new objects)."""
        dumped: dict[str, JsonValue] = _REQUESTS_ADAPTER.dump_python(self._doc(), mode="json")
        return dumped

    def to_json(self) -> str:
        """The §2.7.2 JSON document: `calls`, `approvals`, `metadata`, and `kinds` only with questions."""
        return _REQUESTS_ADAPTER.dump_json(self._doc()).decode()

    @classmethod
    def from_json(cls, data: str | bytes | bytearray) -> DeferredToolRequests:
        """Load `to_json()` output. Only the shape is checked here; a resume checks the rest.

        Raises:
            RunError: `deferred_request_invalid` with `{"errors": [...]}` when the document does not validate.
        """
        doc = _validated(
            _REQUESTS_ADAPTER.validate_json,
            data,
            ErrorCode.DEFERRED_REQUEST_INVALID,
            "Deferred tool requests",
        )
        return cls._from_doc(doc)

    @classmethod
    def from_jsonable(cls, data: object) -> DeferredToolRequests:
        """Load `to_jsonable()` output (same rules as `from_json`)."""
        doc = _validated(
            _REQUESTS_ADAPTER.validate_python,
            data,
            ErrorCode.DEFERRED_REQUEST_INVALID,
            "Deferred tool requests",
        )
        return cls._from_doc(doc)

    @classmethod
    def _from_doc(cls, doc: _RequestsDoc) -> DeferredToolRequests:
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

    def _filtered(self, keep: set[str]) -> DeferredToolRequests:
        return DeferredToolRequests(
            calls=[item for item in self._calls if _item_id_or_none(item) in keep],
            approvals=[item for item in self._approvals if _item_id_or_none(item) in keep],
            metadata={key: value for key, value in self._metadata.items() if key in keep},
            kinds={
                key: "question" for key, value in self._kinds.items() if key in keep and value == "question"
            },
        )


def _call_doc(item: DeferredToolCall) -> _CallDoc:
    return {
        "model_call": item.model_call,
        "target_call": item.target_call,
        "target_identity": item.target_identity,
    }


def _item_id(item: DeferredToolCall) -> str:
    return item.model_call.tool_call_id


def _item_id_or_none(item: object) -> str | None:
    # Robust against junk items (a resume checks them only after `remaining` ran, §2.7.4 step 3 → 4).
    model_call = getattr(item, "model_call", None)
    call_id = getattr(model_call, "tool_call_id", None)
    return call_id if isinstance(call_id, str) else None


# --------------------------------------------------------------------------------------------------------------
# DeferredToolResume


@dataclass(frozen=True, slots=True)
class PendingDeferredItem:
    """One item of a resume batch as phase B (§2.7.4 steps 10-12) and tool recovery see it."""

    tool_call_id: str
    """The model call ID."""
    tool_name: str
    """The target call's tool name (the name on the current surface)."""
    category: DeferredCategory
    """`"calls"` (external result or question) or `"approvals"`."""
    kind: DeferredToolKind
    """`"approval"`, `"question"` or `"external"`."""
    target_identity: str
    """Identity of the tool that deferred the call; a present tool must have exactly this identity."""
    function_id: str | None
    """`DEFERRED_FUNCTION_ID_METADATA_KEY` of a call deferred by a function tool; `None` otherwise."""
    answered_with_failure: bool
    """The answer is a `ToolFailed` (an absent tool without function ID may be answered so, step 11)."""


@dataclass(frozen=True, slots=True)
class UnresolvedCalls:
    """What tool recovery decides on (§2.5.2)."""

    calls: tuple[ToolCallPart, ...]
    """The pending calls of the last response, in order (the history's own parts: do not mutate)."""
    facts: DeferredToolResults
    """Retained facts for some of them: external results (incl. `ToolFailed`) in `calls`, denials as
    `ToolDenied` in `approvals`. Positive approvals are never retained."""


class DeferredToolResume:
    """A Host's answer to a suspension: the exported requests and native results (§2.7.2).

    Frozen and detached: the constructor deep-copies both values, accessors return copies.
    JSON: `to_json()` / `from_json()`, `{"requests": <requests>, "results": <native>, "recovery": bool}`.
    """

    __slots__ = ("_recovery", "_requests", "_results")

    _requests: DeferredToolRequests
    _results: DeferredToolResults
    _recovery: bool

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
            _fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                "DeferredToolResume.requests must be the harness DeferredToolRequests.",
                received=type(requests).__name__,
            )
        if not isinstance(results, DeferredToolResults):
            _fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                "DeferredToolResume.results must be a native pydantic_ai DeferredToolResults.",
                received=type(results).__name__,
            )
        if type(recovery) is not bool:
            _fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                "DeferredToolResume.recovery must be a bool.",
                received=type(recovery).__name__,
            )
        for field_name in ("calls", "approvals", "metadata", "answered_by"):
            if not isinstance(getattr(results, field_name, None), dict):
                _fail(
                    ErrorCode.DEFERRED_RESUME_INVALID,
                    f"DeferredToolResults.{field_name} must be a dict.",
                    field=field_name,
                )
        try:
            copied_requests = copy.deepcopy(requests)
            copied_results = copy.deepcopy(results)
        except Exception as error:  # anything a foreign object's __deepcopy__ may raise
            _fail(
                ErrorCode.DEFERRED_RESUME_INVALID,
                f"The deferred resume cannot be copied: {type(error).__name__}",
            )
        object.__setattr__(self, "_requests", copied_requests)
        object.__setattr__(self, "_results", copied_results)
        object.__setattr__(self, "_recovery", recovery)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("DeferredToolResume is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("DeferredToolResume is frozen")

    def __copy__(self) -> DeferredToolResume:
        return self  # immutable and detached

    def __deepcopy__(self, memo: dict[int, object]) -> DeferredToolResume:
        return self

    @classmethod
    def _trusted(
        cls, requests: DeferredToolRequests, results: DeferredToolResults, recovery: bool
    ) -> DeferredToolResume:
        # For values this module just built from private copies: skip the second deep copy.
        resume = object.__new__(cls)
        object.__setattr__(resume, "_requests", requests)
        object.__setattr__(resume, "_results", results)
        object.__setattr__(resume, "_recovery", recovery)
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
            _fail(ErrorCode.DEFERRED_REQUEST_MISSING, NO_PENDING_RESPONSE_MESSAGE)
        pending = {call.tool_call_id for call in _history.pending_calls(messages)}
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

    def pending_items(self) -> tuple[PendingDeferredItem, ...]:
        """Each item with what phase B checks: category, kind, target identity, recorded function ID.

        Call it on a resume that passed `preflight_resume` (items are then well formed).
        """
        items: list[PendingDeferredItem] = []
        for category, group in (("calls", self._requests._calls), ("approvals", self._requests._approvals)):
            for item in group:
                call_id = _item_id(item)
                function_id = None
                if category == "calls":
                    recorded = self._requests._metadata.get(call_id, {}).get(
                        DEFERRED_FUNCTION_ID_METADATA_KEY
                    )
                    function_id = recorded if isinstance(recorded, str) else None
                answer = (self._results.calls if category == "calls" else self._results.approvals).get(
                    call_id
                )
                items.append(
                    PendingDeferredItem(
                        tool_call_id=call_id,
                        tool_name=item.target_call.tool_name,
                        category="calls" if category == "calls" else "approvals",
                        kind=self._requests.kind(call_id),
                        target_identity=item.target_identity,
                        function_id=function_id,
                        answered_with_failure=isinstance(answer, ToolFailed),
                    )
                )
        return tuple(items)

    def retained_facts(self) -> DeferredToolResults:
        """The facts a `recovery=True` batch contributes to tool recovery (§2.5.2 step 1), detached.

        External results (including `ToolFailed`) stay in `calls`; `False` and `ToolDenied` approvals become
        `ToolDenied` in `approvals` (recorded as `outcome="denied"`, §2.7.6); positive approvals are dropped.
        """
        denials: dict[str, bool | ToolApproved | ToolDenied] = {}
        for key, value in self._results.approvals.items():
            if value is False:
                denials[key] = ToolDenied()
            elif isinstance(value, ToolDenied):
                denials[key] = copy.deepcopy(value)
        return DeferredToolResults(
            calls=copy.deepcopy(self._results.calls),
            approvals=denials,
            metadata={
                key: copy.deepcopy(v)
                for key, v in self._results.metadata.items()
                if key in self._results.calls
            },
        )

    # -- JSON ---------------------------------------------------------------------------------------------------

    def to_json(self) -> str:
        """`{"requests": <requests JSON>, "results": <native results JSON>, "recovery": <bool>}`."""
        doc: _ResumeDoc = {
            "requests": self._requests._doc(),
            "results": self._results,
            "recovery": self._recovery,
        }
        return _RESUME_ADAPTER.dump_json(doc).decode()

    @classmethod
    def from_json(cls, data: str | bytes | bytearray) -> DeferredToolResume:
        """Load `to_json()` output. Only the shape is checked here; `preflight_resume` checks the rest.

        Raises:
            RunError: `deferred_resume_invalid` with `{"errors": [...]}` when the document does not validate.
        """
        doc = _validated(
            _RESUME_ADAPTER.validate_json, data, ErrorCode.DEFERRED_RESUME_INVALID, "Deferred resume"
        )
        return cls(DeferredToolRequests._from_doc(doc["requests"]), doc["results"], doc["recovery"])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeferredToolResume):
            return NotImplemented
        return (
            self._requests == other._requests
            and self._results == other._results
            and self._recovery == other._recovery
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DeferredToolResume({self._requests!r}, {self._results!r}, recovery={self._recovery!r})"


# --------------------------------------------------------------------------------------------------------------
# Checks (§2.7.4 phase A)


def _check_metadata(metadata: object, pending: set[str], *, approval_ids: set[str], what: str) -> None:
    code = ErrorCode.DEFERRED_METADATA_INVALID
    if not isinstance(metadata, dict):
        _fail(code, f"{what} metadata must be a dict keyed by tool call ID.")
    for key, value in metadata.items():
        if not isinstance(key, str) or key not in pending:
            _fail(
                code,
                f"{what} metadata is keyed by a non-pending tool call ID.",
                tool_call_id=_jsonable_key(key),
            )
        if not isinstance(value, dict):
            _fail(code, f"{what} metadata for {key!r} must be a JSON object.", tool_call_id=key)
        try:
            check_finite_json(value, where=f"$.metadata.{key}")
        except NotFiniteJson as error:
            _fail(code, f"{what} metadata for {key!r} is not finite JSON: {error}", tool_call_id=key)
        if what == "Request":
            # Phase B trusts the key, so it must mean what §2.7.3 says: a string, on calls only.
            function_id = value.get(DEFERRED_FUNCTION_ID_METADATA_KEY)
            if DEFERRED_FUNCTION_ID_METADATA_KEY in value and (
                key in approval_ids or not isinstance(function_id, str)
            ):
                _fail(
                    code,
                    f"Request metadata for {key!r} has an invalid deferred function ID.",
                    tool_call_id=key,
                )
    size = len(canonical_json(check_finite_json(metadata)).encode())
    if size > MAX_DEFERRED_METADATA_BYTES:
        _fail(code, f"{what} metadata is too large.", size=size, limit=MAX_DEFERRED_METADATA_BYTES)


def _jsonable_key(key: object) -> JsonValue:
    return key if isinstance(key, str) else repr(key)


def _check_requests(requests: DeferredToolRequests) -> None:
    """§2.7.4 step 4, in the listed order."""
    groups: tuple[tuple[DeferredCategory, tuple[DeferredToolCall, ...]], ...] = (
        ("calls", requests._calls),
        ("approvals", requests._approvals),
    )
    # Well-formed items.
    for _, group in groups:
        for item in group:
            if (
                not isinstance(item, DeferredToolCall)
                or not isinstance(item.model_call, ToolCallPart)
                or not isinstance(item.target_call, ToolCallPart)
                or not isinstance(item.model_call.tool_call_id, str)
            ):
                _fail(
                    ErrorCode.DEFERRED_REQUEST_INVALID,
                    "A deferred item is not a DeferredToolCall of ToolCallParts.",
                )
    # IDs: unique and non-blank within a category, disjoint across categories.
    seen: dict[DeferredCategory, set[str]] = {"calls": set(), "approvals": set()}
    for category, group in groups:
        for item in group:
            call_id = _item_id(item)
            if not call_id.strip() or call_id in seen[category]:
                _fail(
                    ErrorCode.DEFERRED_REQUEST_DUPLICATE,
                    f"Deferred {category} hold a blank or repeated tool call ID.",
                    category=category,
                )
            seen[category].add(call_id)
    for call_id in seen["calls"] & seen["approvals"]:
        _fail(
            ErrorCode.DEFERRED_REQUEST_CATEGORY_OVERLAP,
            f"Tool call {call_id!r} is both a deferred call and an approval.",
            tool_call_id=call_id,
        )
    count = len(requests._calls) + len(requests._approvals)
    if count == 0:
        _fail(ErrorCode.DEFERRED_REQUESTS_EMPTY, "The deferred requests hold no items.")
    if count > MAX_DEFERRED_ITEMS:
        _fail(
            ErrorCode.DEFERRED_REQUESTS_TOO_LARGE,
            f"The deferred requests hold {count} items; at most {MAX_DEFERRED_ITEMS} are allowed.",
            count=count,
            limit=MAX_DEFERRED_ITEMS,
        )
    # Item contents.
    for _, group in groups:
        for item in group:
            call_id = _item_id(item)
            identity = item.target_identity
            if not isinstance(identity, str) or not identity or len(identity) > MAX_TARGET_IDENTITY_CHARS:
                _fail(
                    ErrorCode.DEFERRED_REQUEST_INVALID,
                    f"Deferred item {call_id!r} has an invalid target identity.",
                    tool_call_id=call_id,
                )
            for part in (item.model_call, item.target_call):
                name = part.tool_name
                if not isinstance(name, str) or not name.strip():
                    _fail(
                        ErrorCode.DEFERRED_REQUEST_INVALID,
                        f"Deferred item {call_id!r} has an empty tool name.",
                        tool_call_id=call_id,
                    )
                try:
                    _history.parse_arguments(part.args)
                except _history.InvalidArguments as error:
                    _fail(
                        ErrorCode.DEFERRED_REQUEST_INVALID,
                        f"Deferred item {call_id!r} has invalid arguments: {error}",
                        tool_call_id=call_id,
                    )
            if item.model_call != item.target_call:
                _fail(
                    ErrorCode.DEFERRED_REQUEST_INVALID,
                    f"Deferred item {call_id!r} is forwarded; forwarding is not supported.",
                    tool_call_id=call_id,
                )
    for key, value in requests._kinds.items():
        if key not in seen["calls"] or value != "question":
            _fail(
                ErrorCode.DEFERRED_REQUEST_INVALID,
                "Deferred question kinds must name deferred calls with the kind 'question'.",
                tool_call_id=_jsonable_key(key),
            )
    _check_metadata(
        requests._metadata,
        seen["calls"] | seen["approvals"],
        approval_ids=seen["approvals"],
        what="Request",
    )


def _check_finite(value: object, call_id: str, what: str) -> None:
    try:
        check_finite_json(value)
    except NotFiniteJson as error:
        _fail(
            ErrorCode.DEFERRED_RESULTS_INVALID,
            f"{what} for tool call {call_id!r} is not finite JSON: {error}",
            tool_call_id=call_id,
        )


def _check_results(requests: DeferredToolRequests, results: DeferredToolResults) -> None:
    """§2.7.4 steps 5-8."""
    call_ids = {_item_id(item) for item in requests._calls}
    approval_ids = {_item_id(item) for item in requests._approvals}
    # 5. Every item answered exactly once, in its own category.
    for category, expected, got in (
        ("calls", call_ids, results.calls),
        ("approvals", approval_ids, results.approvals),
    ):
        keys = set(got)
        if keys != expected:
            missing: list[JsonValue] = [*sorted(expected - keys)]
            unexpected: list[JsonValue] = [*sorted(str(key) for key in keys - expected)]
            _fail(
                ErrorCode.DEFERRED_RESULTS_INCOMPLETE,
                f"Deferred results for {category} do not answer exactly the pending {category}.",
                category=category,
                missing=missing,
                unexpected=unexpected,
            )
    # 6. Approvals are exactly bool / ToolApproved / ToolDenied. `type(...)`, not isinstance: `1 == True`
    # and an int or bool-like object must not pass for a decision, and a subclass would not round-trip.
    for call_id, approval in results.approvals.items():
        if type(approval) not in (bool, ToolApproved, ToolDenied):
            _fail(
                ErrorCode.DEFERRED_APPROVAL_INVALID,
                f"Approval for tool call {call_id!r} must be a bool, ToolApproved or ToolDenied.",
                tool_call_id=call_id,
            )
    # 7. Finite JSON values.
    for call_id, value in results.calls.items():
        if isinstance(value, ToolFailed | ModelRetry):
            if not isinstance(value.message, str):
                _fail(
                    ErrorCode.DEFERRED_RESULTS_INVALID,
                    f"Failure message for tool call {call_id!r} must be a string.",
                    tool_call_id=call_id,
                )
        elif isinstance(value, ToolReturn):
            _check_finite(value.return_value, call_id, "Return value")
            _check_finite(value.metadata, call_id, "Return metadata")
        elif isinstance(value, RetryPromptPart):
            _check_finite(value.content, call_id, "Retry content")
        else:
            _check_finite(value, call_id, "Result")
    for call_id, approval in results.approvals.items():
        if isinstance(approval, ToolApproved) and approval.override_args is not None:
            if not isinstance(approval.override_args, dict):
                _fail(
                    ErrorCode.DEFERRED_RESULTS_INVALID,
                    f"override_args for tool call {call_id!r} must be a JSON object.",
                    tool_call_id=call_id,
                )
            _check_finite(approval.override_args, call_id, "override_args")
        elif isinstance(approval, ToolDenied) and not isinstance(approval.message, str):
            _fail(
                ErrorCode.DEFERRED_RESULTS_INVALID,
                f"Denial message for tool call {call_id!r} must be a string.",
                tool_call_id=call_id,
            )
    for call_id, who in results.answered_by.items():
        if not isinstance(who, str) or call_id not in call_ids | approval_ids:
            _fail(
                ErrorCode.DEFERRED_RESULTS_INVALID,
                "answered_by must map pending tool call IDs to strings.",
                tool_call_id=_jsonable_key(call_id),
            )
    # 8. Result metadata.
    _check_metadata(results.metadata, call_ids | approval_ids, approval_ids=approval_ids, what="Result")


def _check_correlation(requests: DeferredToolRequests, messages: Sequence[ModelMessage]) -> None:
    """§2.7.4 step 9: the items are the unanswered calls of the last response, unchanged."""
    index = _history.last_response_index(messages)
    if index is None:
        _fail(ErrorCode.DEFERRED_REQUEST_MISSING, NO_PENDING_RESPONSE_MESSAGE)
    response = messages[index]
    assert isinstance(response, ModelResponse)
    calls = _history.response_tool_calls(response)
    for call_id in _history.duplicate_call_ids(calls):
        _fail(
            ErrorCode.DEFERRED_REQUEST_DUPLICATE,
            f"The last response repeats tool call ID {call_id!r}.",
            tool_call_id=call_id,
        )
    by_id = {call.tool_call_id: call for call in calls}
    items = (*requests._calls, *requests._approvals)
    for item in items:
        if _item_id(item) not in by_id:
            _fail(
                ErrorCode.DEFERRED_REQUEST_MISSING,
                f"Pending tool call {_item_id(item)!r} is not in the last response of the history.",
                tool_call_id=_item_id(item),
            )
    answered = _history.answered_call_ids(messages, index)
    for item in items:
        if _item_id(item) in answered:
            _fail(
                ErrorCode.DEFERRED_REQUEST_COMPLETED,
                f"Pending tool call {_item_id(item)!r} was already answered in the history.",
                tool_call_id=_item_id(item),
            )
    parsed: dict[str, dict[str, JsonValue]] = {}
    for item in items:
        call_id = _item_id(item)
        try:
            parsed[call_id] = _history.parse_arguments(by_id[call_id].args)
        except _history.InvalidArguments as error:
            _fail(
                ErrorCode.DEFERRED_REQUEST_INVALID,
                f"History arguments of tool call {call_id!r} are invalid: {error}",
                tool_call_id=call_id,
            )
    for item in items:
        call_id = _item_id(item)
        recorded = by_id[call_id]
        if recorded.tool_name != item.model_call.tool_name or not _history.arguments_equal(
            parsed[call_id], _history.parse_arguments(item.model_call.args)
        ):
            _fail(
                ErrorCode.DEFERRED_REQUEST_MISMATCH,
                f"Pending tool call {call_id!r} differs from the call in the history.",
                tool_call_id=call_id,
            )


def preflight_resume(resume: object, history: Sequence[ModelMessage] | None) -> DeferredToolResume | None:
    """Phase A of §2.7.4: check a `deferred_resume` before the run starts (the first failing check wins).

    Args:
        resume: What the caller passed as `deferred_resume` (not `None`; the caller skips this then).
        history: `previous_state.message_history`, or `None` when there is no previous state.

    Returns:
        The resume to run with: the same batch, or for `recovery=True` its `remaining(history)`. `None`
        means a recovery batch was fully incorporated: drop it and run a plain continuation with tool
        recovery.

    Raises:
        RunError: With the §2.7.4 code of the first failing check.
    """
    # 1.
    if not isinstance(resume, DeferredToolResume):
        _fail(
            ErrorCode.DEFERRED_RESUME_INVALID,
            "deferred_resume must be a DeferredToolResume.",
            received=type(resume).__name__,
        )
    # 2.
    if history is None:
        _fail(ErrorCode.DEFERRED_STATE_REQUIRED, "A deferred resume needs the previous state it answers.")
    # 3.
    if resume.recovery:
        remaining = resume.remaining(history)
        if remaining is None:
            return None
        resume = remaining
    # 4-8.
    _check_requests(resume._requests)
    _check_results(resume._requests, resume._results)
    # 9.
    _check_correlation(resume._requests, history)
    return resume


# --------------------------------------------------------------------------------------------------------------
# Tool recovery input (§2.5.2)


def find_unresolved_calls(
    messages: Sequence[ModelMessage], retained: DeferredToolResume | None
) -> UnresolvedCalls:
    """The pending calls tool recovery decides on, with the retained facts for them (§2.5.2).

    Args:
        messages: The prepared history (not copied).
        retained: The `recovery=True` batch after `preflight_resume` (its `remaining`), or `None`.

    Returns:
        Pending calls of the last response (none without a response, or when that response is a provider
        pause and there is no batch) and the facts for them.

    Raises:
        StateError: `deferred_state_invalid` (`{"tool_call_id"}`) for a retained fact whose call is not
            pending.
    """
    facts = retained.retained_facts() if retained is not None else DeferredToolResults()
    response = _history.last_response(messages)
    if response is None or (response.state == "suspended" and retained is None):
        calls: tuple[ToolCallPart, ...] = ()
    else:
        calls = tuple(_history.pending_calls(messages))
    pending = {call.tool_call_id for call in calls}
    for call_id in (*facts.calls, *facts.approvals):
        if call_id not in pending:
            raise StateError(
                f"A retained deferred fact answers tool call {call_id!r}, which is not pending.",
                code=ErrorCode.DEFERRED_STATE_INVALID,
                details={"tool_call_id": call_id},
            )
    return UnresolvedCalls(calls=calls, facts=facts)
