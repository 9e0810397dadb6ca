"""A run's construction-time checks (SPEC §2.2.2): everything refused before the run starts.

`ExecutableAgent.run`/`stream` are typed, but the checks stay: an untyped host (or a server mapping
the wire) may pass anything, and each wrong value has its own documented code. The order is the
SPEC's, so the first failing check wins: input, bindings, previous state, refs, tool recovery, new
input on a provider-suspended turn, the deferred resume (phase A), the checkpoints flag.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast, get_args

from pydantic_ai.messages import ModelMessage, ModelResponse, UserContent

from ._history_codec import EncodedHistory
from ._recovery_input import TOOL_RECOVERY_MODES, ToolRecovery
from ._resume_checks import preflight_resume
from .children.names import check_lineage
from .context import RunBindings
from .deferred import DeferredToolResume
from .environment.run import check_mounts
from .errors import ErrorCode, InputError, RunError, StateError
from .state import HarnessState

__all__ = ("RunInputs", "check_input", "check_run_inputs")


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


@dataclass(frozen=True, slots=True)
class RunInputs:
    """What a run starts from, once every construction check passed."""

    prompt: str | list[UserContent] | None
    bindings: RunBindings
    state: HarnessState
    history: list[ModelMessage]
    """New message objects of `state`'s history, the run's own."""
    encoded: EncodedHistory | None
    """`history`'s stored bytes, for the run's encoder to reuse."""
    tool_recovery: ToolRecovery
    resume: DeferredToolResume | None
    """The resume to run with (after phase A); `None` also for a fully incorporated recovery batch."""
    checkpoints: bool
    calls_not_started: frozenset[str] = frozenset()
    """Calls of the last response the host knows never started (SPEC §2.5.8)."""


def check_run_inputs(
    input: object,
    *,
    bindings: object,
    previous_state: object,
    tool_recovery: object,
    deferred_resume: object,
    checkpoints: object,
    calls_not_started: object = (),
) -> RunInputs:
    """Check a run's arguments in the SPEC's order; the first failure raises.

    Raises:
        InputError: `input_empty`, `input_invalid`, `tool_recovery_invalid`.
        RunError: `run_bindings_invalid`, `previous_state_invalid`, `child_lineage_invalid`, or a phase-A
            resume code.
        StateError: `state_store_missing`, or a forged state that does not re-validate.
    """
    prompt = check_input(input)
    if bindings is None:
        bindings = RunBindings.embedded()
    if not isinstance(bindings, RunBindings) or not isinstance(bindings.deferred_tools_supported, bool):
        raise RunError(
            "bindings must be RunBindings with a bool deferred_tools_supported.",
            code=ErrorCode.RUN_BINDINGS_INVALID,
        )
    check_mounts(bindings.mounts, bindings.default_mount)
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
    check_lineage(bindings.lineage, state.thread_id)
    if state.refs:
        raise StateError(
            "The previous state references a host state store, which this harness does not have.",
            code=ErrorCode.STATE_STORE_MISSING,
        )
    if not isinstance(tool_recovery, str) or tool_recovery not in TOOL_RECOVERY_MODES:
        raise InputError(
            f"tool_recovery must be one of {sorted(TOOL_RECOVERY_MODES)}, not {tool_recovery!r}.",
            code=ErrorCode.TOOL_RECOVERY_INVALID,
        )
    history, encoded = state._history_for_run()
    if (
        prompt is not None
        and history
        and isinstance(history[-1], ModelResponse)
        and history[-1].state == "suspended"
    ):
        raise InputError(
            "New input cannot be given while the history ends in a provider-suspended turn; continue without input first.",
            code=ErrorCode.INPUT_INVALID,
            details={"reason": "provider_suspended_turn"},
        )
    resume = None
    if deferred_resume is not None:
        # `None` for a fully incorporated `recovery=True` batch: a plain continuation with tool recovery.
        resume = preflight_resume(deferred_resume, history if previous_state is not None else None)
    if type(checkpoints) is not bool:
        raise InputError("checkpoints must be a bool.", code=ErrorCode.INPUT_INVALID)
    if isinstance(calls_not_started, str | bytes) or not isinstance(calls_not_started, Collection):
        raise InputError("calls_not_started must be a collection of call IDs.", code=ErrorCode.INPUT_INVALID)
    not_started = frozenset(calls_not_started)
    if not all(isinstance(call_id, str) for call_id in not_started):
        raise InputError("calls_not_started must hold call IDs (str).", code=ErrorCode.INPUT_INVALID)
    return RunInputs(
        prompt=prompt,
        bindings=bindings,
        state=state,
        history=history,
        encoded=encoded,
        tool_recovery=cast(ToolRecovery, tool_recovery),
        resume=resume,
        checkpoints=checkpoints,
        calls_not_started=not_started,
    )
