"""One harness run as a stream: construction checks, preparation, the native run, the terminal result.

The run drives pydantic-ai's `Agent.iter` in the consumer's own task (no background task): each
node is streamed in turn and its events are yielded in order, with the harness's lifecycle events
placed around model requests. Cancellation is task cancellation: `stream.cancel()` asks the native
run to stop and yields a `cancelled` result; a cancellation from outside keeps propagating as
`CancelledError` after the candidate state has been normalized for `export_state()`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, get_args

from pydantic_ai import Agent, CancellationToken
from pydantic_ai.exceptions import AgentRunError, ModelHTTPError, RunCancelled, ToolFailed, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelResponse, UserContent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.tools import DeferredToolResults
from pydantic_ai.usage import RunUsage, UsageLimits
from pydantic_graph import End

from ._history_codec import HistoryEncoder
from ._prepare import (
    PartTracker,
    close_calls,
    ensure_input,
    lift_undelivered_input,
    normalize,
    set_system_prompt,
)
from ._recovery_input import find_unresolved_calls
from ._resume_checks import preflight_resume
from ._suspension import suspended_batch
from ._tooling import INTERRUPTED_TOOL_RESULT, RunTooling
from .capability_state import CapabilityStateStore
from .context import AgentContext, RunBindings
from .deferred import DeferredToolRequests, DeferredToolResume
from .errors import ErrorCode, FailureCode, HarnessError, InputError, RunCleanupError, RunError, StateError
from .events import HarnessEvent, HarnessExtensionEvent, HarnessRunResultEvent, numbered_event, utc_now
from .results import HarnessRunResult, SafeFailure
from .state import HarnessState

if TYPE_CHECKING:
    from .agent import ExecutableAgent

__all__ = ("HarnessRunStream", "ToolRecovery")

OutputT = TypeVar("OutputT")

ToolRecovery = Literal["declared", "never", "always"]
"""What happens to calls left unanswered in the previous state (SPEC §1.7)."""

_TOOL_RECOVERY_MODES: frozenset[str] = frozenset(get_args(ToolRecovery))


def _user_content_types() -> tuple[type, ...]:
    flat: list[type] = []

    def walk(tp: Any) -> None:
        args = get_args(tp)
        if not args:
            if isinstance(tp, type):
                flat.append(tp)
            return
        for arg in args:
            walk(arg)

    walk(UserContent)
    return tuple(flat)


_CONTENT_TYPES = _user_content_types()


def check_input(value: object) -> str | list[UserContent] | None:
    """Validate a run's input (SPEC §2.2.2): `None`, a non-empty `str`, or non-empty native content."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value:
            raise InputError("The run input is empty.", code=ErrorCode.INPUT_EMPTY)
        return value
    if isinstance(value, bytes | bytearray | memoryview) or not isinstance(value, Sequence):
        raise InputError(
            f"The run input must be a str or a sequence of user content, not {type(value).__name__}.",
            code=ErrorCode.INPUT_INVALID,
        )
    items = list(value)
    if not items:
        raise InputError("The run input is empty.", code=ErrorCode.INPUT_EMPTY)
    for item in items:
        if not isinstance(item, _CONTENT_TYPES) or isinstance(item, bytes):
            raise InputError(
                f"The run input holds a {type(item).__name__}, which is not native user content.",
                code=ErrorCode.INPUT_INVALID,
            )
    return items


@dataclass(slots=True)
class _Terminal:
    """What the run ended with, before it becomes a `HarnessRunResult`."""

    status: Literal["completed", "suspended", "failed", "cancelled"]
    history: list[ModelMessage]
    output: Any = None
    failure: SafeFailure | None = None
    deferred: DeferredToolRequests | None = None


class HarnessRunStream(Generic[OutputT]):
    """A run as an async context manager and async iterator, used once (SPEC §2.3)."""

    def __init__(
        self,
        executable: ExecutableAgent[OutputT],
        input: object = None,
        *,
        bindings: object = None,
        previous_state: object = None,
        tool_recovery: object = "declared",
        deferred_resume: object = None,
        usage: RunUsage | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> None:
        self._prompt = check_input(input)
        if bindings is None:
            bindings = RunBindings.embedded()
        if not isinstance(bindings, RunBindings) or not isinstance(bindings.deferred_tools_supported, bool):
            raise RunError(
                "bindings must be RunBindings with a bool deferred_tools_supported.",
                code=ErrorCode.RUN_BINDINGS_INVALID,
            )
        if previous_state is None:
            state = HarnessState.new()
        elif isinstance(previous_state, HarnessState):
            # A state still holding what validation produced is immutable and valid as it is; any other
            # (e.g. forged with `model_copy(update=...)`) is re-validated from its JSON form and fails here.
            state = (
                previous_state
                if previous_state._is_intact()
                else HarnessState.model_validate_json(previous_state.model_dump_json())
            )
        else:
            raise RunError(
                f"previous_state must be a HarnessState, not {type(previous_state).__name__}.",
                code=ErrorCode.PREVIOUS_STATE_INVALID,
            )
        if state.refs:
            raise StateError(
                "The previous state references a host state store, which this harness does not have.",
                code=ErrorCode.STATE_STORE_MISSING,
            )
        if not isinstance(tool_recovery, str) or tool_recovery not in _TOOL_RECOVERY_MODES:
            raise InputError(
                f"tool_recovery must be one of {sorted(_TOOL_RECOVERY_MODES)}, not {tool_recovery!r}.",
                code=ErrorCode.TOOL_RECOVERY_INVALID,
            )
        history, encoded = state._history_for_run()
        if (
            self._prompt is not None
            and history
            and isinstance(history[-1], ModelResponse)
            and history[-1].state == "suspended"
        ):
            raise InputError(
                "New input cannot be given while the history ends in a provider-suspended turn; continue without input first.",
                code=ErrorCode.INPUT_INVALID,
                details={"reason": "provider_suspended_turn"},
            )
        self._resume: DeferredToolResume | None = None
        if deferred_resume is not None:
            # `None` for a fully incorporated `recovery=True` batch: a plain continuation with tool recovery.
            self._resume = preflight_resume(deferred_resume, history if previous_state is not None else None)
        self._executable = executable
        self._bindings: RunBindings = bindings
        self._state = state
        self._history = history
        self._encoder = HistoryEncoder(encoded, history)
        self._mode = cast(ToolRecovery, tool_recovery)
        self._usage_baseline = usage
        self._usage_limits = usage_limits if usage_limits is not None else executable.usage_limits
        self.thread_id: str = state.thread_id
        self.run_id: str = f"run-{uuid.uuid4().hex}"
        self._store = CapabilityStateStore(state.agent_context_state)
        self._tooling = RunTooling(
            mode=self._mode, deferred_tools_supported=bindings.deferred_tools_supported
        )
        self.context = AgentContext(
            run_id=self.run_id,
            thread_id=self.thread_id,
            instance=bindings.instance,
            metadata=MappingProxyType(dict(bindings.metadata)),
            deferred_tools_supported=bindings.deferred_tools_supported,
            state=self._store,
            _tooling=self._tooling,
            _observer=self,
        )
        self._token = CancellationToken()
        self._tracker = PartTracker()
        self._entered = False
        self._closed = False
        self._iterating = False
        self._aiter_taken = False
        self._busy = False
        self._sequence = 0
        self._request_index = -1
        self._pending_lifecycle: list[HarnessExtensionEvent] = []
        self._native_run: Any = None
        self._prepared: list[ModelMessage] | None = None
        self._run_input: str | list[UserContent] | None = None
        self._gen: AsyncIterator[HarnessEvent | HarnessRunResultEvent[OutputT]] | None = None
        self.result: HarnessRunResult[OutputT] | None = None
        self.outcome: HarnessRunResult[OutputT] | None = None
        self._shutdown_history: list[ModelMessage] | None = None

    # -- context manager and iteration ----------------------------------------------------------------
    async def __aenter__(self) -> HarnessRunStream[OutputT]:
        if self._entered:
            raise RunError("A run stream can be entered only once.", code=ErrorCode.RUN_STREAM_REUSED)
        self._entered = True
        self._prepare()
        self._gen = self._events()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._gen is not None:
                await self._gen.aclose()  # type: ignore[attr-defined]
        except Exception as error:
            # Closing a run that did not finish tears the native run down (its capabilities' hooks,
            # its toolsets' exits); a failure there is a cleanup failure (SPEC §2.2.6). A cancellation
            # or interrupt in flight keeps propagating, noting what else failed.
            in_flight = exc[1] if len(exc) > 1 else None
            if isinstance(in_flight, BaseException) and not isinstance(in_flight, Exception):
                in_flight.add_note(f"Harness cleanup also failed: {type(error).__name__}")
                return
            raise RunCleanupError(
                "Harness run cleanup failed.",
                outcome=cast("HarnessRunResult[object] | None", self.outcome),
                causes=(error,),
            ) from error
        finally:
            if self._shutdown_history is None and self.result is None:
                self._shutdown_history = self._normalized(self._committed(), force_close=False)

    def __aiter__(self) -> HarnessRunStream[OutputT]:
        if self._aiter_taken:
            raise RunError("A run stream can be iterated only once.", code=ErrorCode.RUN_STREAM_REUSED)
        self._aiter_taken = True
        return self

    async def __anext__(self) -> HarnessEvent | HarnessRunResultEvent[OutputT]:
        if not self._entered or self._closed or self._gen is None:
            raise RunError(
                "The run stream is not active: enter it with `async with` first.",
                code=ErrorCode.RUN_NOT_ACTIVE,
            )
        if self._busy:
            raise RunError(
                "Another task is already waiting on this stream.", code=ErrorCode.RUN_STREAM_CONCURRENT_NEXT
            )
        self._busy = True
        try:
            return await self._gen.__anext__()
        finally:
            self._busy = False

    def cancel(self) -> None:
        """Ask the run to stop; it ends with a `cancelled` result and a normalized state."""
        self._token.cancel()

    @property
    def usage(self) -> RunUsage:
        """The run's usage so far."""
        if self._native_run is not None:
            return cast(RunUsage, self._native_run.usage)
        return self._usage_baseline or RunUsage()

    @property
    def pending_deferred_input(self) -> DeferredToolResume | None:
        """The accepted deferred batch not yet incorporated into the current history (detached)."""
        if self._resume is None:
            return None
        return self._resume.remaining(self._committed())

    async def export_state(self) -> HarnessState:
        """A candidate state at the latest safe public boundary; persists nothing (SPEC §2.3.4)."""
        if not self._entered:
            raise StateError("The run has not started.", code=ErrorCode.RUN_NOT_ACTIVE)
        if self._closed:
            if self.outcome is not None and self.outcome.state is not None:
                return self.outcome.state
            if self._shutdown_history is not None:
                return self._state_from(self._shutdown_history)
            raise StateError("No checkpoint is available for this run.", code=ErrorCode.RUN_STATE_UNAVAILABLE)
        return self._state_from(self._committed())

    # -- observer hooks -------------------------------------------------------------------------------
    def model_request_started(self, ctx: Any) -> None:
        """Called by the harness capability before each model request."""
        self._request_index += 1
        self._tracker.reset()
        self._pending_lifecycle.append(
            HarnessExtensionEvent(
                kind="lifecycle",
                payload={
                    "type": "model_request_started",
                    "request_id": f"model-request-{self._request_index + 1}",
                    "request_index": self._request_index,
                    "message_count": len(ctx.messages),
                },
            )
        )

    # -- internals ------------------------------------------------------------------------------------
    def _prepare(self) -> None:
        """History preparation (SPEC §2.2.3): lift input, recover tools, set the system prompt."""
        history, lifted = lift_undelivered_input(self._history)
        own: list[UserContent] = [self._prompt] if isinstance(self._prompt, str) else list(self._prompt or [])
        self._run_input = [*lifted, *own] if lifted else self._prompt
        native_results: DeferredToolResults | None = None
        resume = self._resume
        if resume is not None and not resume.recovery:
            native_results = resume.model_results()
            self._tooling.resume = resume
        else:
            history, native_results = self._plan_recovery(history, resume)
        self._native_results = native_results
        self._prepared = set_system_prompt(history, self._executable.system_prompt)

    def _plan_recovery(
        self, history: list[ModelMessage], retained: DeferredToolResume | None
    ) -> tuple[list[ModelMessage], DeferredToolResults | None]:
        """Decide what happens to the last response's unresolved calls (SPEC §2.5.2, §2.5.6)."""
        unresolved = find_unresolved_calls(history, retained)
        self._tooling.resume = retained  # phase B checks the retained requests (§2.7.6)
        if not unresolved.calls:
            return history, None
        facts = unresolved.facts
        open_calls = {
            call.tool_call_id: call
            for call in unresolved.calls
            if call.tool_call_id not in facts.calls and call.tool_call_id not in facts.approvals
        }
        if self._mode == "never" and not facts.calls and not facts.approvals:
            return close_calls(history, list(open_calls.values())), None
        # The facts' metadata stays out: a call answered by a fact never runs, so no tool would read it.
        results = DeferredToolResults(calls=facts.calls, approvals=facts.approvals)
        if self._mode == "never":
            for cid in open_calls:
                results.calls[cid] = ToolFailed(INTERRUPTED_TOOL_RESULT)
        else:
            for cid in open_calls:
                results.approvals[cid] = True  # decided at the first step (replay or unknown)
            self._tooling.recovery_candidates = open_calls
        return history, results

    def _committed(self) -> list[ModelMessage]:
        if self._native_run is not None:
            try:
                return list(self._native_run.all_messages())
            except Exception:  # pragma: no cover - native run not started
                pass
        return list(self._prepared if self._prepared is not None else self._history)

    def _state_from(self, history: Sequence[ModelMessage]) -> HarnessState:
        return HarnessState._from_parts(
            thread_id=self.thread_id,
            history=history,
            encoder=self._encoder,
            snapshot=self._store.snapshot(),
            environment_states=self._state.environment_states,
            extra=self._state.extra_fields,
        )

    def _normalized(self, history: list[ModelMessage], *, force_close: bool) -> list[ModelMessage]:
        own_from = len(self._prepared or ())
        pending = self._resume.remaining(history) if self._resume is not None and history else None
        history = normalize(
            history,
            tracker=self._tracker,
            own_from=own_from,
            deferred_pending=pending is not None,
            force_close=force_close,
        )
        return ensure_input(
            history, self._run_input, since=min(own_from, len(history)) if self._prompt is None else 0
        )

    def _event(self, event: Any) -> HarnessEvent:
        item = numbered_event(self.thread_id, self.run_id, self._sequence, event)
        self._sequence += 1
        return item

    def _drain_lifecycle(self) -> list[HarnessEvent]:
        if not self._pending_lifecycle:
            return []
        events = [self._event(e) for e in self._pending_lifecycle]
        self._pending_lifecycle.clear()
        return events

    def _streams_model(self) -> bool:
        model = self._executable.native.model
        return not (isinstance(model, FunctionModel) and model.stream_function is None)

    async def _events(self) -> AsyncIterator[HarnessEvent | HarnessRunResultEvent[OutputT]]:
        yield self._event(HarnessExtensionEvent(kind="lifecycle", payload={"type": "run_started"}))
        native = self._executable.native
        terminal: _Terminal | None = None
        candidate: HarnessRunResult[OutputT] | None = None
        streams_model = self._streams_model()
        try:
            async with native.iter(
                self._run_input,
                message_history=self._prepared,
                deferred_tool_results=self._native_results,
                run_id=self.run_id,
                conversation_id=self.thread_id,
                deps=self.context,
                usage=self._usage_baseline.__class__(**vars(self._usage_baseline))
                if self._usage_baseline
                else None,
                usage_limits=self._usage_limits,
                capabilities=list(self._bindings.capabilities) or None,
                cancellation_token=self._token,
            ) as run:
                self._native_run = run
                node: Any = run.next_node
                first_tools_node = True
                while not isinstance(node, End):
                    is_request = Agent.is_model_request_node(node)
                    if Agent.is_call_tools_node(node) and first_tools_node:
                        first_tools_node = False
                        if node.tool_call_results is not None:
                            self._tooling.native_results = node.tool_call_results
                    if (is_request and streams_model) or Agent.is_call_tools_node(node):
                        async with node.stream(run.ctx) as events:
                            async for event in events:
                                for item in self._drain_lifecycle():
                                    yield item
                                if is_request:
                                    self._tracker.observe(event)
                                yield self._event(event)
                    for item in self._drain_lifecycle():
                        yield item
                    node = await run.next(node)
                    if is_request:
                        yield self._event(self._request_completed())
                assert run.result is not None
                terminal = await self._finish(run.result.output)
                candidate = self._result(terminal)
        except RunCancelled as cancelled:
            terminal = _Terminal(
                "cancelled", self._normalized(self._messages_after(cancelled), force_close=False)
            )
        except UsageLimitExceeded as error:
            self._raise_if_outcome(candidate, error)
            terminal = self._failed(
                SafeFailure(
                    code=FailureCode.USAGE_LIMIT_EXCEEDED,
                    message="Run usage limit exceeded.",
                    retry_hint="dependency_change",
                )
            )
        except HarnessError as error:
            self._raise_if_outcome(candidate, error)
            if self._tooling.tool_failure is None:
                raise
            terminal = self._tool_failed()
        except AgentRunError as error:
            self._raise_if_outcome(candidate, error)
            for item in self._model_request_failed(error):
                yield item
            details: dict[str, Any] = {"exception_type": type(error).__name__}
            if isinstance(error, ModelHTTPError):
                details["status_code"] = error.status_code
            terminal = self._failed(
                SafeFailure(
                    code=FailureCode.AGENT_RUN_FAILED,
                    message="Agent execution failed.",
                    details=details,
                    retry_hint="dependency_change",
                )
            )
        except Exception as error:
            self._raise_if_outcome(candidate, error)
            if self._tooling.surface_error is not None:
                raise self._tooling.surface_error from None
            if self._tooling.tool_failure is None:
                raise
            terminal = self._tool_failed()
        result_obj = candidate if candidate is not None else self._result(terminal)
        self.result = result_obj
        self.outcome = result_obj
        yield HarnessRunResultEvent(self.thread_id, self.run_id, self._sequence, utc_now(), result_obj)

    def _raise_if_outcome(self, candidate: HarnessRunResult[OutputT] | None, error: Exception) -> None:
        """Raise `RunCleanupError` when the run failed after its outcome existed (SPEC §2.2.6).

        Such a failure (a capability's `after_run`, a toolset's exit) gets no terminal of its own and
        no terminal event: the outcome travels on the error, as a candidate only.
        """
        if candidate is None:
            return
        self.outcome = candidate
        raise RunCleanupError(
            "Harness run failed after producing an outcome.",
            outcome=cast("HarnessRunResult[object]", candidate),
            causes=(error,),
        ) from error

    def _messages_after(self, error: BaseException) -> list[ModelMessage]:
        messages = getattr(error, "all_messages", None)
        if callable(messages):
            try:
                return list(messages())
            except Exception:
                pass
        return self._committed()

    def _request_completed(self) -> HarnessExtensionEvent:
        return HarnessExtensionEvent(
            kind="lifecycle",
            payload={
                "type": "model_request_completed",
                "request_id": f"model-request-{self._request_index + 1}",
                "request_index": self._request_index,
            },
        )

    def _model_request_failed(self, error: AgentRunError) -> list[HarnessEvent]:
        if self._request_index < 0:
            return []
        payload: dict[str, Any] = {
            "type": "model_request_failed",
            "request_id": f"model-request-{self._request_index + 1}",
            "request_index": self._request_index,
            "error_code": "model_request_failed",
            "detail": type(error).__name__,
        }
        if isinstance(error, ModelHTTPError):
            payload["status_code"] = error.status_code
            payload["detail"] = str(error.message)[:1000]
        return [
            *self._drain_lifecycle(),
            self._event(HarnessExtensionEvent(kind="lifecycle", payload=payload)),
        ]

    async def _finish(self, output: Any) -> _Terminal:
        history = self._committed()
        if isinstance(output, NativeDeferredToolRequests):
            if not self._bindings.deferred_tools_supported:
                return self._failed(
                    SafeFailure(
                        code=FailureCode.DEFERRED_TOOLS_UNSUPPORTED,
                        message="This Host does not support deferred tool requests for this Run.",
                    )
                )
            history = ensure_input(history, self._run_input, since=0)
            return _Terminal("suspended", history, deferred=await suspended_batch(output, self._tooling))
        return _Terminal("completed", history, output=output)

    def _failed(self, failure: SafeFailure) -> _Terminal:
        return _Terminal("failed", self._normalized(self._committed(), force_close=False), failure=failure)

    def _tool_failed(self) -> _Terminal:
        failure = self._tooling.tool_failure
        assert failure is not None
        error = failure.error
        if isinstance(error, HarnessError):
            safe = SafeFailure(
                code=error.code, message=str(error), details=error.details, retry_hint=error.retry_hint
            )
        else:
            safe = SafeFailure(
                code=FailureCode.TOOL_EXECUTION_FAILED,
                message="Tool execution failed.",
                details={
                    "exception_type": type(error).__name__,
                    "tool_name": failure.tool_name,
                    "tool_call_id": failure.tool_call_id,
                },
                retry_hint="new_run",
            )
        return _Terminal("failed", self._normalized(self._committed(), force_close=True), failure=safe)

    def _result(self, terminal: _Terminal) -> HarnessRunResult[OutputT]:
        state = self._state_from(terminal.history)
        return HarnessRunResult(
            thread_id=self.thread_id,
            run_id=self.run_id,
            status=terminal.status,
            output=terminal.output,
            state=state,
            usage=self.usage,
            failure=terminal.failure,
            suspend_reason="deferred" if terminal.status == "suspended" else None,
            deferred=terminal.deferred,
            output_adapter=self._executable.output_adapter if terminal.status == "completed" else None,
            new_from=len(self._prepared or ()),
        )


async def consume(stream: HarnessRunStream[OutputT]) -> HarnessRunResult[OutputT]:
    """Run a stream to its terminal event and return the result (what `run()` does)."""
    async with stream:
        async for item in stream:
            if isinstance(item, HarnessRunResultEvent):
                return item.result
    raise RunError("The run stream ended without a result.", code=ErrorCode.RUN_RESULT_MISSING)
