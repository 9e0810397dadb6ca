"""A run's terminal outcome: `HarnessRunResult` and the `SafeFailure` a failed run carries (SPEC §2.2.4, §2.2.6)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, field_validator
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.usage import RunUsage

from .errors import ErrorCode, RetryHint, RunError
from .json_text import JsonValue, NotFiniteJson, canonical_json, check_finite_json

if TYPE_CHECKING:
    from .context import ChildLineage
    from .deferred import DeferredToolRequests
    from .state import HarnessState

__all__ = ("HarnessRunResult", "RunStatus", "SafeFailure")

OutputT = TypeVar("OutputT")

RunStatus = Literal["completed", "suspended", "failed", "cancelled"]
"""Why a run stopped."""


class SafeFailure(BaseModel):
    """Why a run failed, in a form safe to show a host: no exception text from tools or providers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    """The failure code: a `FailureCode`, or the code of a `HarnessError` a tool raised."""
    message: str
    """A fixed, human-readable message."""
    details: dict[str, Any] = {}
    """Finite-JSON facts, stored canonically."""
    retry_hint: RetryHint = "none"
    """Whether a new run may help."""

    @field_validator("code", "message")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("details", mode="before")
    @classmethod
    def _finite_details(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError("details must be a JSON object")
        try:
            checked = check_finite_json(dict(value))
        except NotFiniteJson as exc:
            raise ValueError(str(exc)) from None
        return _sorted_json(checked)

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        # Detached: a caller mutating `details` never changes the failure.
        return copy.deepcopy(value) if name == "details" else value


def _sorted_json(value: JsonValue) -> JsonValue:
    import json

    return json.loads(canonical_json(value))  # type: ignore[no-any-return]


class HarnessRunResult(Generic[OutputT]):
    """A run's terminal result. Read-only and detached: every accessor returns a fresh copy.

    | status | state | output | failure | suspend_reason | deferred |
    |---|---|---|---|---|---|
    | completed | required | the validated output | None | None | None |
    | suspended | required | None | None | "deferred" | required |
    | failed | when a history existed | None | required | None | None |
    | cancelled | when a history existed | None | None | None | None |
    """

    __slots__ = (
        "_all_messages",
        "_deferred",
        "_failure",
        "_lineage",
        "_new_from",
        "_output",
        "_output_adapter",
        "_run_id",
        "_state",
        "_status",
        "_suspend_reason",
        "_thread_id",
        "_usage",
    )

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        status: RunStatus,
        output: OutputT | None = None,
        state: HarnessState | None = None,
        usage: RunUsage | None = None,
        failure: SafeFailure | None = None,
        suspend_reason: Literal["deferred"] | None = None,
        deferred: DeferredToolRequests | None = None,
        output_adapter: TypeAdapter[Any] | None = None,
        new_from: int = 0,
        lineage: ChildLineage | None = None,
    ) -> None:
        if not thread_id or not thread_id.strip() or not run_id or not run_id.strip():
            raise ValueError("thread_id and run_id must be non-blank")
        if state is not None and state.thread_id != thread_id:
            raise ValueError("state.thread_id must equal the result's thread_id")
        _check_invariants(status, output, state, failure, suspend_reason, deferred)
        if status == "completed":
            if isinstance(output, NativeDeferredToolRequests):
                raise ValueError("a completed output is never a DeferredToolRequests")
            if output_adapter is not None:
                output = output_adapter.validate_python(output, strict=True)
        self._thread_id = thread_id
        self._run_id = run_id
        self._status: RunStatus = status
        self._output = output
        self._state = state
        self._usage = usage if usage is not None else RunUsage()
        self._failure = failure
        self._suspend_reason = suspend_reason
        self._deferred = deferred
        self._output_adapter = output_adapter
        self._new_from = new_from
        self._lineage = lineage

    # -- fields -------------------------------------------------------------------------------------
    @property
    def thread_id(self) -> str:
        """The thread this run advanced."""
        return self._thread_id

    @property
    def run_id(self) -> str:
        """This run's id, `run-<32 hex>`."""
        return self._run_id

    @property
    def status(self) -> RunStatus:
        """Why the run stopped."""
        return self._status

    @property
    def output(self) -> OutputT | None:
        """The validated output of a completed run (a fresh copy), else `None`."""
        return copy.deepcopy(self._output)

    @property
    def state(self) -> HarnessState | None:
        """The candidate state to persist (states are immutable; their accessors detach)."""
        return self._state

    @property
    def usage(self) -> RunUsage:
        """The run's usage (a fresh copy)."""
        return copy.deepcopy(self._usage)

    @property
    def failure(self) -> SafeFailure | None:
        """Why a failed run failed."""
        return self._failure

    @property
    def suspend_reason(self) -> Literal["deferred"] | None:
        """`"deferred"` for a suspended run, else `None`."""
        return self._suspend_reason

    @property
    def lineage(self) -> ChildLineage | None:
        """The run's `RunBindings.lineage`, echoed (a child run's correlation; CHILDREN §4.3)."""
        return self._lineage

    @property
    def deferred(self) -> DeferredToolRequests | None:
        """The exact pending batch of a suspended run (a fresh copy)."""
        return copy.deepcopy(self._deferred)

    # -- helpers ------------------------------------------------------------------------------------
    def all_messages(self) -> tuple[ModelMessage, ...]:
        """The whole history of the result's state (fresh objects)."""
        return self._state.message_history if self._state is not None else ()

    def new_messages(self) -> tuple[ModelMessage, ...]:
        """The messages after the prepared history; preparation rewrites are not "new"."""
        return self.all_messages()[self._new_from :]

    def raise_for_status(self) -> None:
        """Return for a completed run; raise `RunError` with the failure's code otherwise."""
        if self._status == "completed":
            return
        if self._status == "failed":
            assert self._failure is not None
            failure = self._failure
            raise RunError(
                failure.message, code=failure.code, details=failure.details, retry_hint=failure.retry_hint
            )
        if self._status == "suspended":
            raise RunError(
                "The run suspended on deferred tool calls.",
                code=ErrorCode.RUN_SUSPENDED,
                retry_hint="new_run",
            )
        raise RunError("The run was cancelled.", code=ErrorCode.RUN_CANCELLED, retry_hint="new_run")

    def output_or_raise(self) -> OutputT:
        """The output of a completed run; `raise_for_status()` otherwise."""
        self.raise_for_status()
        return self.output  # type: ignore[return-value]

    def output_json(self) -> bytes:
        """The output as JSON bytes through the output type's adapter (`null` when there is none)."""
        if self._output_adapter is None:
            return TypeAdapter(Any).dump_json(self._output)
        return self._output_adapter.dump_json(self._output)

    def __repr__(self) -> str:
        return (
            f"HarnessRunResult(status={self._status!r}, thread_id={self._thread_id!r}, run_id={self._run_id!r}, "
            f"failure={self._failure!r})"
        )


def _check_invariants(
    status: RunStatus,
    output: object,
    state: object,
    failure: object,
    suspend_reason: object,
    deferred: object,
) -> None:
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise ValueError(f"a {status} result {what}")

    if status == "completed":
        need(state is not None, "requires a state")
        need(failure is None and suspend_reason is None and deferred is None, "has no failure or deferral")
    elif status == "suspended":
        need(state is not None and deferred is not None, "requires a state and a deferred batch")
        need(suspend_reason == "deferred", 'has suspend_reason "deferred"')
        need(output is None and failure is None, "has no output or failure")
    elif status == "failed":
        need(failure is not None, "requires a failure")
        need(output is None and suspend_reason is None and deferred is None, "has no output or deferral")
    elif status == "cancelled":
        need(
            output is None and failure is None and suspend_reason is None and deferred is None,
            "carries only a state",
        )
    else:
        raise ValueError(f"unknown status {status!r}")
