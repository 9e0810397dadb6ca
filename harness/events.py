"""The stream's envelope: every item a run yields, numbered gap-free from 0 (SPEC §2.3.2, §2.3.3).

`HarnessEvent.event` is either a native pydantic-ai `AgentStreamEvent`, passed through unchanged,
or a `HarnessExtensionEvent` of the harness itself (this milestone: `kind="lifecycle"` with payload
types `run_started`, `model_request_started`, `model_request_completed`, `model_request_failed`).
The last item is the only `HarnessRunResultEvent`. A stream started with `checkpoints=True` also
offers a `HarnessCheckpointEvent` (a candidate state, SPEC §2.3.4) after each `model_request_started`
and `model_request_completed` event: the points where `export_state()` changes. Checkpoint items are
numbered with the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_ai.messages import AgentStreamEvent

from .json_text import JsonValue, NotFiniteJson, canonical_json, check_finite_json
from .results import HarnessRunResult

if TYPE_CHECKING:
    from .state import HarnessState

__all__ = (
    "ExtensionKind",
    "HarnessCheckpointEvent",
    "HarnessEvent",
    "HarnessExtensionEvent",
    "HarnessRunResultEvent",
    "RunItem",
)

OutputT = TypeVar("OutputT")

ExtensionKind = Literal[
    "context", "state", "recovery", "invocation", "delegation", "usage", "lifecycle", "tool", "diagnostic"
]
"""What part of the harness an extension event speaks for; consumers ignore kinds they do not know."""

MAX_PAYLOAD_BYTES = 64 * 1024
_SECRET_SEGMENTS = frozenset(
    {"authorization", "credential", "credentials", "grant", "grants", "password", "passwd", "secret", "token"}
)
_BEARER = re.compile(r"Bearer\s+\S+")
REDACTED = "[REDACTED]"


def _is_secret_key(key: str) -> bool:
    normal = key.lower().replace("-", "_").replace(".", "_")
    return "api_key" in normal or any(segment in _SECRET_SEGMENTS for segment in normal.split("_"))


def redact(value: JsonValue) -> JsonValue:
    """Replace secret-looking members and `Bearer` tokens, so payloads never leak credentials."""
    if isinstance(value, dict):
        return {k: (REDACTED if _is_secret_key(k) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, str) and "Bearer" in value:
        return _BEARER.sub("Bearer [REDACTED]", value)
    return value


class HarnessExtensionEvent(BaseModel):
    """An event of the harness itself, beside the native ones. Its payload always carries a `type`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ExtensionKind
    """The area the event belongs to."""
    payload: dict[str, Any]
    """Finite JSON, at most 64 KiB once redacted; `payload["type"]` names the event."""
    schema_version: str = Field(default="1", min_length=1, max_length=32)
    """The payload schema's version."""
    event_kind: Literal["harness_extension"] = "harness_extension"
    """Discriminates harness events from native `event_kind`s."""

    @field_validator("payload", mode="before")
    @classmethod
    def _finite_redacted(cls, value: Any) -> Any:
        try:
            checked = check_finite_json(value)
        except NotFiniteJson as exc:
            raise ValueError(str(exc)) from None
        if not isinstance(checked, dict):
            raise ValueError("payload must be a JSON object")
        redacted = redact(checked)
        if len(canonical_json(redacted).encode()) > MAX_PAYLOAD_BYTES:
            raise ValueError("payload exceeds 64 KiB")
        return redacted

    @property
    def type(self) -> str | None:
        """The payload's `type`, e.g. `"model_request_started"`."""
        value = self.payload.get("type")
        return value if isinstance(value, str) else None


def _check_envelope(thread_id: str, run_id: str, sequence: int, occurred_at: datetime) -> None:
    if not thread_id.strip() or not run_id.strip():
        raise ValueError("thread_id and run_id must be non-blank")
    if sequence < 0:
        raise ValueError("sequence must be >= 0")
    if occurred_at.utcoffset() != UTC.utcoffset(None):
        raise ValueError("occurred_at must be UTC")


@dataclass(frozen=True, slots=True)
class HarnessEvent:
    """One streamed item before the terminal result."""

    thread_id: str
    """The thread the run belongs to."""
    run_id: str
    """The run that produced the event."""
    sequence: int
    """Position in the stream, contiguous from 0."""
    occurred_at: datetime
    """When the harness emitted it (UTC)."""
    event: AgentStreamEvent | HarnessExtensionEvent
    """A native event, unchanged, or a harness extension event."""

    def __post_init__(self) -> None:
        _check_envelope(self.thread_id, self.run_id, self.sequence, self.occurred_at)


@dataclass(frozen=True, slots=True)
class HarnessCheckpointEvent:
    """A candidate state offered mid-run (`stream(..., checkpoints=True)`); persists nothing (SPEC §2.3.4).

    It follows each `model_request_started` event (tool results entered the history) and each
    `model_request_completed` event (the response was committed): the two points where the export moves.
    """

    thread_id: str
    """The thread the run belongs to."""
    run_id: str
    """The run that offers it."""
    sequence: int
    """Position in the stream, numbered with the other items."""
    occurred_at: datetime
    """When it was taken (UTC)."""
    state: HarnessState
    """What `export_state()` returned at that point."""


@dataclass(frozen=True, slots=True)
class HarnessRunResultEvent(Generic[OutputT]):
    """The terminal item: emitted once teardown succeeded; nothing follows it."""

    thread_id: str
    """The thread the run belongs to."""
    run_id: str
    """The run that ended."""
    sequence: int
    """The number after the last event's."""
    occurred_at: datetime
    """When the run ended (UTC)."""
    result: HarnessRunResult[OutputT]
    """The run's result; its IDs equal the event's."""

    def __post_init__(self) -> None:
        _check_envelope(self.thread_id, self.run_id, self.sequence, self.occurred_at)
        if self.result.thread_id != self.thread_id or self.result.run_id != self.run_id:
            raise ValueError("the result's IDs must equal the event's")


def utc_now() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


_new = object.__new__
_set = object.__setattr__


def numbered_event(
    thread_id: str, run_id: str, sequence: int, event: AgentStreamEvent | HarnessExtensionEvent
) -> HarnessEvent:
    """`HarnessEvent(thread_id, run_id, sequence, utc_now(), event)` for the run that numbers it.

    The run's IDs were checked when it started and it counts `sequence` up from 0, so the envelope
    checks of `__post_init__` cannot fail and are skipped: this is on the path of every streamed delta.
    """
    item: HarnessEvent = _new(HarnessEvent)
    _set(item, "thread_id", thread_id)
    _set(item, "run_id", run_id)
    _set(item, "sequence", sequence)
    _set(item, "occurred_at", datetime.now(UTC))
    _set(item, "event", event)
    return item


RunItem = HarnessEvent | HarnessCheckpointEvent | HarnessRunResultEvent[OutputT]
"""Every item a run stream yields."""
