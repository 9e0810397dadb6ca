"""One harness run as a stream: preparation, the native run, the terminal result (SPEC §2.2, §2.3).

The run drives pydantic-ai's `Agent.iter` in the consumer's own task (no background task): each
node is streamed in turn and its events are yielded in order, with the harness's lifecycle events
placed around model requests and, when asked for, checkpoint candidates after them. Cancellation is
task cancellation: `stream.cancel()` asks the native run to stop and yields a `cancelled` result; a
cancellation from outside keeps propagating as `CancelledError` after the candidate state has been
normalized for `export_state()`. How an exception ends the run is decided in one place,
`_terminal_for`.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

from pydantic_ai import Agent, CancellationToken
from pydantic_ai.exceptions import AgentRunError, ModelHTTPError, RunCancelled, ToolFailed, UsageLimitExceeded
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelResponse,
    ToolCallPart,
    UserContent,
)
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.tools import DeferredToolResults, ToolApproved
from pydantic_ai.usage import RunUsage
from pydantic_graph import End

from ._history_codec import EncodedHistory, HistoryEncoder
from ._prepare import (
    PartTracker,
    close_calls,
    ensure_input,
    for_native,
    lift_undelivered_input,
    normalize,
    set_system_prompt,
    unknown_result,
)
from ._recovery_input import find_unresolved_calls
from ._run_inputs import check_run_inputs
from ._suspension import suspended_batch
from ._tooling import INTERRUPTED_TOOL_RESULT, RunTooling
from .barrier import held_cancellation
from .capability_state import CapabilityStateStore
from .context import AgentContext
from .deferred import DeferredToolRequests, DeferredToolResume
from .environment.run import RunEnvironment
from .errors import ErrorCode, FailureCode, HarnessError, RunCleanupError, RunError, StateError
from .events import (
    HarnessCheckpointEvent,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    RunItem,
    numbered_event,
    redact,
    utc_now,
)
from .own_loop import OwnLoop, at_home
from .results import HarnessRunResult, SafeFailure
from .run_request import RunRequest
from .state import HarnessState

if TYPE_CHECKING:
    from .agent import ExecutableAgent

__all__ = ("HarnessRunStream",)

OutputT = TypeVar("OutputT")

_CHECKPOINT_AFTER = frozenset({"model_request_started", "model_request_completed"})
"""The lifecycle events after which `export_state()` has moved (SPEC §2.3.4)."""

_MESSAGE_CHARS = 500
"""How much of a model-side exception's text a failed result carries."""


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

    def __init__(self, executable: ExecutableAgent[OutputT], request: RunRequest) -> None:
        inputs = check_run_inputs(
            request.input,
            bindings=request.bindings,
            previous_state=request.previous_state,
            tool_recovery=request.tool_recovery,
            deferred_resume=request.deferred_resume,
            checkpoints=request.checkpoints,
            calls_not_started=request.calls_not_started,
        )
        barrier, usage, usage_limits = request.barrier, request.usage, request.usage_limits
        self._not_started = inputs.calls_not_started
        self._prompt = inputs.prompt
        delegation = executable.delegation
        if delegation is not None:
            delegation.check_state(inputs.state)  # the inline registry (CHILDREN §3.4)
        self._resume = inputs.resume
        self._executable = executable
        self._bindings = inputs.bindings
        self._state = inputs.state
        self._history = inputs.history
        self._encoder = HistoryEncoder(inputs.encoded, inputs.history)
        self._mode = inputs.tool_recovery
        self._checkpoints = inputs.checkpoints
        self._barrier_state: HarnessState | None = None
        """The state the barrier persisted at the latest `model_request_started`: the candidate that
        follows that event is this state (the barrier's host committed it already)."""
        self._barrier = barrier
        self._barrier_error: Exception | None = None
        self._usage_baseline = usage
        self._usage_limits = usage_limits if usage_limits is not None else executable.usage_limits
        self.thread_id: str = inputs.state.thread_id
        self.run_id: str = _run_id(request.run_id)
        self._store = CapabilityStateStore(inputs.state.agent_context_state)
        self._pending_lifecycle: list[HarnessExtensionEvent] = []
        self._environment = (
            RunEnvironment(inputs.bindings.mounts, inputs.bindings.default_mount, self.queue_event)
            if inputs.bindings.mounts
            else None
        )
        self._tooling = RunTooling(
            mode=self._mode,
            deferred_tools_supported=inputs.bindings.deferred_tools_supported,
            # A barrier written before the gate existed has no `before_tool_call`: its tools run ungated.
            gate=self._before_tool_call if hasattr(barrier, "before_tool_call") else None,
        )
        self.context = AgentContext(
            run_id=self.run_id,
            thread_id=self.thread_id,
            instance=inputs.bindings.instance,
            metadata=MappingProxyType(dict(inputs.bindings.metadata)),
            deferred_tools_supported=inputs.bindings.deferred_tools_supported,
            state=self._store,
            lineage=inputs.bindings.lineage,
            _tooling=self._tooling,
            _hooks=self,
            _environment=self._environment,
        )
        self._token = CancellationToken()
        self._tracker = PartTracker()
        self._entered = False
        self._closed = False
        self._aiter_taken = False
        self._busy = False
        self._cancel_asked = False
        self._sequence = 0
        self._request_index = -1
        self._in_model_request = False
        self._native_run: Any = None
        self._prepared: list[ModelMessage] | None = None
        self._settled: list[ToolCallPart] = []
        self._run_input: str | list[UserContent] | None = None
        self._native_results: DeferredToolResults | None = None
        self._gen: AsyncIterator[RunItem[OutputT]] | None = None
        self._use_own_loop = False
        self._own_loop: OwnLoop[RunItem[OutputT]] | None = None
        self.result: HarnessRunResult[OutputT] | None = None
        self.outcome: HarnessRunResult[OutputT] | None = None
        self.failure_exception: BaseException | None = None
        """The exception a `failed` run ended with (a tool's, the model side's), for the host's own logs.
        Its text is never part of the result."""
        self._shutdown_history: list[ModelMessage] | None = None

    # -- context manager and iteration ----------------------------------------------------------------
    async def __aenter__(self) -> HarnessRunStream[OutputT]:
        if self._entered:
            raise RunError("A run stream can be entered only once.", code=ErrorCode.RUN_STREAM_REUSED)
        self._entered = True
        if self._prepared is None:
            self._prepare(None)
        if self._environment is not None:
            instance = self._bindings.instance
            self._environment.enter(
                thread_id=self.thread_id, issuer=instance.issuer, subject=instance.subject
            )
        if self._use_own_loop:
            self._gen = self._own_loop = OwnLoop(self._events())
        else:
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

    async def __anext__(self) -> RunItem[OutputT]:
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
            if self._cancel_asked:
                self._token.cancel()
            return await self._gen.__anext__()
        finally:
            self._busy = False

    def cancel(self) -> None:
        """Ask the run to stop; it ends with a `cancelled` result and a normalized state.

        pydantic-ai stops a run by cancelling the task driving it, so the request reaches the run only
        while that task waits on this stream: called while the consumer is busy with something else (a
        commit, a slow reader), it takes effect at the consumer's next `__anext__`, never inside its
        own work.
        """
        self._cancel_asked = True
        if self._busy:
            self._token.cancel()

    @property
    def history_length(self) -> int:
        """How many messages the run continues: what preparing it costs (`prepare`)."""
        return len(self._history)

    def prepare(self, pause: Callable[[], None] | None = None) -> None:
        """Prepare the history (SPEC §2.2.3) now, before `async with`, which otherwise does it.

        The passes walk the whole history (100 000 messages: about half a second), so a host may call
        this in a worker thread; `pause` is called between pieces and may raise to stop the work. The
        exception propagates and leaves the stream unprepared: drop it. Nothing else may use the stream
        meanwhile; calling it again, or once entered, does nothing.
        """
        if self._prepared is None and not self._entered:
            self._prepare(pause)

    def use_own_loop(self) -> None:
        """Drive the native run on an event loop of its own thread (`harness.own_loop`), before `async with`.

        For a long history: pydantic-ai's passes over it before each model request then hold that
        thread, not the host's loop. The agent's tools and model run there too, so they must not touch
        objects of the host's loop; a barrier and the shell tools are called on the host's loop.
        """
        if self._entered:
            raise RunError("Choose the run's loop before `async with`.", code=ErrorCode.RUN_STREAM_REUSED)
        self._use_own_loop = True

    @property
    def usage(self) -> RunUsage:
        """The run's usage so far."""
        if self._native_run is not None:
            return cast(RunUsage, self._native_run.usage)
        return self._usage_baseline or RunUsage()

    @property
    def own_input(self) -> str | list[UserContent] | None:
        """The input this run's `run()`/`stream()` got (not input lifted from behind unresolved calls)."""
        return self._prompt

    @property
    def pending_deferred_input(self) -> DeferredToolResume | None:
        """The accepted deferred batch not yet incorporated into the current history (detached)."""
        if self._resume is None:
            return None
        return self._resume.remaining(self._committed())

    def side_effect_calls(self) -> list[tuple[ToolCallPart, bool]]:
        """The calls of the run's latest response that name a `function` or `unapproved` tool (those
        the barrier's gate covers, LIVE §5.2), each with whether its tool is recovery-retryable: what a
        durable host records as issued with the commit that first holds that response."""
        history = self._committed()
        for message in reversed(history):
            if isinstance(message, ModelResponse):
                return self._tooling.gated([p for p in message.parts if isinstance(p, ToolCallPart)])
        return []

    def answered(self) -> bool:
        """Whether the run's latest message is a response that calls no tool (a text answer): nothing of
        the run's own runs after it but its end, or an output validator's retry (a new request)."""
        history = self._committed()
        last = history[-1] if history else None
        return isinstance(last, ModelResponse) and not any(isinstance(p, ToolCallPart) for p in last.parts)

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
    async def model_request_started(self, ctx: Any) -> None:
        """Called by the harness capability before each model request; the request waits for it.

        With a barrier, the host persists the state that ends with this request (the tool results and
        input it carries) before anything is sent (`harness.barrier`).
        """
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
        if self._barrier is not None:
            history = self._committed()
            pending = self._resume.remaining(history) if self._resume is not None else None
            state, barrier = self._state_from(history), self._barrier
            self._barrier_state = state  # the candidate after this event is this state (`_lifecycle`)
            try:
                await held_cancellation(at_home(lambda: barrier.before_model_request(state, pending)))
            except Exception as error:
                self._barrier_error = error  # the host's failure, not the model's (`_terminal_for`)
                raise

    async def _before_tool_call(
        self, call_id: str, tool_name: str, args: dict[str, Any], tool_kind: str, retryable: bool
    ) -> None:
        """The barrier's gate before a side-effecting tool starts (LIVE §5.2): the tool waits for it,
        a cancellation meanwhile is held as at a model request, and its failure is the host's."""
        assert self._barrier is not None
        barrier = self._barrier
        try:
            await held_cancellation(
                at_home(
                    lambda: barrier.before_tool_call(
                        call_id, tool_name, args, tool_kind=tool_kind, retryable=retryable
                    )
                )
            )
        except Exception as error:
            self._barrier_error = error
            raise

    # -- internals ------------------------------------------------------------------------------------
    def _prepare(self, pause: Callable[[], None] | None) -> None:
        """History preparation (SPEC §2.2.3): lift input, recover tools, set the system prompt.

        The result is what pydantic-ai's own clean-up would make of it (`for_native`), so the native run
        changes nothing and the run's own messages start at `len(self._prepared)`. Every step derives from
        the stream's inputs alone: preparing again after a `pause` raised gives the same result.
        """
        history, lifted = lift_undelivered_input(self._history)
        own: list[UserContent] = [self._prompt] if isinstance(self._prompt, str) else list(self._prompt or [])
        self._run_input = [*lifted, *own] if lifted else self._prompt
        resume = self._resume
        if resume is not None and not resume.recovery:
            self._native_results = resume.model_results()
            self._tooling.resume = resume
        else:
            history = self._plan_recovery(history, resume)
        history = set_system_prompt(history, self._executable.system_prompt, pause=pause)
        self._prepared = for_native(history, pause=pause)

    def _plan_recovery(
        self, history: list[ModelMessage], retained: DeferredToolResume | None
    ) -> list[ModelMessage]:
        """Decide what happens to the last response's unresolved calls (SPEC §2.5.2, §2.5.6)."""
        not_started = self._not_started
        unresolved = find_unresolved_calls(history, retained, not_started)
        self._tooling.resume = retained  # phase B checks the retained requests (§2.7.6)
        if not unresolved.calls:
            return history
        facts = unresolved.facts
        open_calls = {
            call.tool_call_id: call
            for call in unresolved.calls
            if call.tool_call_id not in facts.calls and call.tool_call_id not in facts.approvals
        }
        fresh = {cid for cid in open_calls if cid in not_started}
        if self._mode == "never" and not facts.calls and not facts.approvals and not fresh:
            # Settled here, in the prepared history (§2.5.5); the stream still tells the host (`_events`).
            self._settled = list(open_calls.values())
            return close_calls(history, self._settled)
        # The facts' metadata stays out, but an approval's (§2.5.8): a call answered by another fact
        # never runs, so no tool would read it.
        approved = {
            call.tool_call_id: call.tool_name
            for call in unresolved.calls
            if isinstance(facts.approvals.get(call.tool_call_id), ToolApproved)
        }
        results = DeferredToolResults(
            calls=facts.calls,
            approvals=facts.approvals,
            metadata={cid: value for cid, value in facts.metadata.items() if cid in approved},
        )
        self._tooling.not_started, self._tooling.kept_approvals = frozenset(not_started), approved
        candidates = {}
        for cid, call in open_calls.items():
            if self._mode == "never" and cid not in fresh:
                results.calls[cid] = ToolFailed(INTERRUPTED_TOOL_RESULT)
            else:
                results.approvals[cid] = True  # decided at the first step (replay or a result)
                candidates[cid] = call
        self._tooling.recovery_candidates = candidates
        self._native_results = results
        return history

    def _committed(self) -> list[ModelMessage]:
        if self._native_run is not None:
            try:
                return list(self._native_run.all_messages())
            except Exception:  # pragma: no cover - native run not started
                pass
        return list(self._prepared if self._prepared is not None else self._history)

    def _state_from(self, history: Sequence[ModelMessage]) -> HarnessState:
        previous = self._state.environment_states
        return HarnessState._from_parts(
            thread_id=self.thread_id,
            history=history,
            encoder=self._encoder,
            snapshot=self._store.snapshot(),
            environment_states=previous if self._environment is None else self._environment.export(previous),
            extra=self._state.extra_fields,
        )

    def queue_event(self, kind: Literal["state", "tool", "delegation"], payload: dict[str, Any]) -> None:
        """An environment or delegation event, yielded at the stream's next event boundary (ENVIRONMENT §5.5,
        CHILDREN §3.9)."""
        if self._closed:
            return
        event = HarnessExtensionEvent(kind=kind, payload=payload)
        own = self._own_loop
        if own is not None and threading.get_ident() != own.thread_id:
            own.call_soon(self._pending_lifecycle.append, event)  # from the host's loop: in the run's order
        else:
            self._pending_lifecycle.append(event)

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

    def _lifecycle(self, event: HarnessExtensionEvent) -> list[HarnessEvent | HarnessCheckpointEvent]:
        """A lifecycle event as items, followed by a checkpoint candidate where the export moved."""
        items: list[HarnessEvent | HarnessCheckpointEvent] = [self._event(event)]
        if self._checkpoints and event.type in _CHECKPOINT_AFTER:
            state, self._barrier_state = self._barrier_state, None
            if state is None or event.type != "model_request_started":
                state = self._state_from(self._committed())
            items.append(
                HarnessCheckpointEvent(self.thread_id, self.run_id, self._sequence, utc_now(), state)
            )
            self._sequence += 1
        return items

    def _drain_lifecycle(self) -> list[HarnessEvent | HarnessCheckpointEvent]:
        if not self._pending_lifecycle:
            return []
        items = [item for event in self._pending_lifecycle for item in self._lifecycle(event)]
        self._pending_lifecycle.clear()
        return items

    def _streams_model(self) -> bool:
        """Whether model requests are streamed: pydantic-ai's own test of a model that can stream."""
        model = self._executable.native.model
        return not isinstance(model, Model) or type(model).request_stream is not Model.request_stream

    async def _events(self) -> AsyncIterator[RunItem[OutputT]]:
        started: dict[str, Any] = {"type": "run_started"}
        if self._bindings.lineage is not None:
            started["lineage"] = self._bindings.lineage.to_jsonable()
        yield self._event(HarnessExtensionEvent(kind="lifecycle", payload=started))
        events = self._run_events()
        try:
            async for item in events:
                yield item
        finally:
            try:
                await events.aclose()  # type: ignore[attr-defined]  # the native run's teardown, now
            finally:
                # Run close (ENVIRONMENT §8), also when the consumer abandoned the stream: the run's
                # references and watchers go, and nothing it started is stopped.
                if self._environment is not None:
                    await self._environment.close()

    async def _run_events(self) -> AsyncIterator[RunItem[OutputT]]:
        for item in self._drain_lifecycle():  # what binding queued (environment_state_not_restored)
            yield item
        for call in self._settled:  # what `"never"` settled in preparation, as the native path would tell it
            yield self._event(FunctionToolCallEvent(part=call))
            yield self._event(FunctionToolResultEvent(part=unknown_result(call)))
        candidate: HarnessRunResult[OutputT] | None = None
        try:
            async with self._executable.native.iter(
                self._run_input,
                message_history=self._prepared,
                deferred_tool_results=self._native_results,
                run_id=self.run_id,
                conversation_id=self.thread_id,
                deps=self.context,
                usage=dataclasses.replace(self._usage_baseline) if self._usage_baseline else None,
                usage_limits=self._usage_limits,
                capabilities=list(self._bindings.capabilities) or None,
                cancellation_token=self._token,
            ) as run:
                self._native_run = run
                streams_model = self._streams_model()
                node: Any = run.next_node
                first_tools_node = True
                while not isinstance(node, End):
                    is_request = Agent.is_model_request_node(node)
                    is_tools = Agent.is_call_tools_node(node)
                    if is_tools and first_tools_node:
                        first_tools_node = False  # recovery edits this node's per-call results (`_tooling`)
                        if node.tool_call_results is not None:
                            self._tooling.native_results = node.tool_call_results
                    self._in_model_request = is_request
                    if (is_request and streams_model) or is_tools:
                        async with node.stream(run.ctx) as events:
                            async for event in events:
                                if self._pending_lifecycle:
                                    for item in self._drain_lifecycle():
                                        yield item
                                if is_request:
                                    self._tracker.observe(event)
                                yield self._event(event)
                    for item in self._drain_lifecycle():
                        yield item
                    node = await run.next(node)
                    self._in_model_request = False
                    if is_request:
                        for item in self._lifecycle(self._request_completed()):
                            yield item
                assert run.result is not None
                candidate = self._result(await self._finish(run.result.output))
        except Exception as error:
            if self._closed:
                raise  # the host closed the stream early: a teardown failure, reported by `__aexit__`
            if candidate is not None and not isinstance(error, RunCancelled):
                self._raise_after_outcome(candidate, error)
            terminal, events = self._terminal_for(error)
            for item in events:
                yield item
            if candidate is None:
                candidate = self._result(terminal)
        for item in self._drain_lifecycle():  # events queued as the native run ended (watchers, tools)
            yield item
        if self._environment is not None:
            try:
                await self._environment.close()
            except Exception as error:
                self._raise_after_outcome(candidate, error)
        self.result = self.outcome = candidate
        yield HarnessRunResultEvent(self.thread_id, self.run_id, self._sequence, utc_now(), candidate)

    def _terminal_for(
        self, error: Exception
    ) -> tuple[_Terminal, list[HarnessEvent | HarnessCheckpointEvent]]:
        """How an exception out of the native run ends it (SPEC §2.2.5), or re-raise it.

        Cancellation, usage limits, a tool's exception and model-side failures are outcomes with a
        safe state; anything else (a phase-B mismatch, a bug in a host's capability) propagates.
        """
        if self._barrier_error is not None:
            raise self._barrier_error from None
        if isinstance(error, RunCancelled):
            return _Terminal(
                "cancelled", self._normalized(self._messages_after(error), force_close=False)
            ), []
        if isinstance(error, UsageLimitExceeded):
            failure = SafeFailure(
                code=FailureCode.USAGE_LIMIT_EXCEEDED,
                message="Run usage limit exceeded.",
                retry_hint="dependency_change",
            )
            return self._failed(failure), []
        if self._tooling.surface_error is not None and not isinstance(error, HarnessError | AgentRunError):
            raise self._tooling.surface_error from None  # native code wrapped the phase-B failure
        if self._tooling.tool_failure is not None and not isinstance(error, AgentRunError):
            return self._tool_failed(), []
        if isinstance(error, HarnessError):
            raise error
        if isinstance(error, AgentRunError) or self._in_model_request:
            # Model-side failures are data: a provider's HTTP error, a model that cannot count tokens, a
            # model that raised (issue 10, item 4). The host gets the class and, bounded, the message.
            self.failure_exception = error
            events = self._model_request_failed(error)
            details: dict[str, Any] = {"exception_type": type(error).__name__}
            if isinstance(error, ModelHTTPError):
                details["status_code"] = error.status_code
            elif not isinstance(error, AgentRunError):
                details["exception_message"] = _bounded_message(error)
            failure = SafeFailure(
                code=FailureCode.AGENT_RUN_FAILED,
                message="Agent execution failed.",
                details=details,
                retry_hint="dependency_change",
            )
            return self._failed(failure), events
        raise error

    def _raise_after_outcome(self, candidate: HarnessRunResult[OutputT], error: Exception) -> None:
        """Raise `RunCleanupError`: the run failed after its outcome existed (SPEC §2.2.6).

        Such a failure (a capability's `after_run`, a toolset's exit) gets no terminal of its own and
        no terminal event: the outcome travels on the error, as a candidate only.
        """
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

    def _model_request_failed(self, error: Exception) -> list[HarnessEvent | HarnessCheckpointEvent]:
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
        self.failure_exception = error
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
        # The run is over and nothing else holds its final messages: the next run that continues this
        # state takes them instead of validating the same JSON again (`EncodedHistory.take`).
        encoded = state.__dict__["message_history"]
        if type(encoded) is EncodedHistory and not encoded.fresh:
            encoded.fresh.append(list(terminal.history))
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
            lineage=self._bindings.lineage,
        )


def _bounded_message(error: BaseException) -> str:
    text = redact(str(error))
    assert isinstance(text, str)
    return text if len(text) <= _MESSAGE_CHARS else f"{text[:_MESSAGE_CHARS]}… (cut)"


async def consume(stream: HarnessRunStream[OutputT]) -> HarnessRunResult[OutputT]:
    """Run a stream to its terminal event and return the result (what `run()` does)."""
    async with stream:
        async for item in stream:
            if isinstance(item, HarnessRunResultEvent):
                return item.result
    raise RunError("The run stream ended without a result.", code=ErrorCode.RUN_RESULT_MISSING)


_RUN_ID = re.compile(r"run-[0-9a-f]{32}")


def _run_id(given: str | None) -> str:
    """The run's ID: the host's (`RunRequest.run_id`), checked, or a new one."""
    if given is None:
        return f"run-{uuid.uuid4().hex}"
    if not isinstance(given, str) or not _RUN_ID.fullmatch(given):
        raise RunError(
            "run_id must be run-<32 lowercase hex>.",
            code=ErrorCode.RUN_ID_INVALID,
            details={"run_id": str(given)[:64]},
        )
    return given
