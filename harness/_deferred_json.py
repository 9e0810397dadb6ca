"""The JSON documents of deferred batches (SPEC §2.7.2): their schemas, and the one loader failure shape.

The TypedDicts describe the documents; pydantic validates and serializes them (the native results
through the native types' own schemas). `deferred` builds and reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypeVar

from pydantic import ConfigDict, StrictBool, TypeAdapter, ValidationError, with_config
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolResults
from typing_extensions import TypedDict

from .errors import ErrorCode, RunError
from .json_text import JsonValue

__all__ = ("REQUESTS_ADAPTER", "RESUME_ADAPTER", "CallDoc", "RequestsDoc", "ResumeDoc", "validated")


@with_config(ConfigDict(extra="forbid"))
class CallDoc(TypedDict):
    model_call: ToolCallPart
    target_call: ToolCallPart
    target_identity: str


@with_config(ConfigDict(extra="forbid"))
class RequestsDoc(TypedDict):
    calls: list[CallDoc]
    approvals: list[CallDoc]
    metadata: dict[str, dict[str, Any]]
    # Only present when there are questions, as in §2.7.2 (and as native `_kinds`).
    kinds: NotRequired[dict[str, Literal["question"]]]


@with_config(ConfigDict(extra="forbid"))
class ResumeDoc(TypedDict):
    requests: RequestsDoc
    # The native results, through the native schemas (discriminators "tool-approved", "tool-denied",
    # "tool-failed", "model-retry", "tool-return"; other values stay raw JSON).
    results: DeferredToolResults
    recovery: StrictBool


REQUESTS_ADAPTER: TypeAdapter[RequestsDoc] = TypeAdapter(RequestsDoc)
RESUME_ADAPTER: TypeAdapter[ResumeDoc] = TypeAdapter(ResumeDoc)

_DocT = TypeVar("_DocT")


def validated(validate: Callable[[Any], _DocT], data: object, code: ErrorCode, what: str) -> _DocT:
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
