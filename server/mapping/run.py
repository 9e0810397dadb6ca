"""`RunSpec` -> the core call (`RunCall`), and the core's `HarnessRunResult` -> `RunResult`.

Decoding only translates: an empty text prompt is passed through as `""` so the core raises its own
`input_empty`; client tools go to the core's `client_tools_capability` check unchanged. What only the
wire can get wrong (an unset prompt part, an unspecified URL kind, a negative limit, an enum value this
server does not know) is refused here with `InputError` and the field at fault.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.messages import AudioUrl, BinaryContent, DocumentUrl, ImageUrl, UserContent, VideoUrl
from pydantic_ai.usage import RunUsage, UsageLimits
from threadline.v1 import run_pb2
from threadline.v1.thread_service_pb2 import ThreadRunSpec

from harness import (
    ClientTool,
    HarnessRunResult,
    InputError,
    RunRequest,
    ToolRecovery,
)
from harness.children import ChildLineage
from harness.errors import ErrorCode
from harness.json_text import canonical_json
from harness.results import SafeFailure
from harness.threads.outcome import ThreadRunOutcome

from ..errors import at_field
from .children import lineage_from_pb, lineage_to_pb
from .deferred import requests_to_pb, resume_from_pb
from .state import fill_state, state_from_pb

__all__ = (
    "CheckpointForm",
    "RunCall",
    "client_tools_from_pb",
    "fill_outcome",
    "fill_result",
    "input_from_pb",
    "limits_from_pb",
    "run_call_from_pb",
    "tool_recovery_from_pb",
    "usage_to_pb",
)


@dataclass
class RunCall:
    """What `ExecutableAgent.run` / `.stream` is called with for one `RunSpec`."""

    agent: str
    """The agent's name; empty = the server's default agent (the service resolves it)."""
    run: RunRequest
    """The run's inputs, without bindings (the service builds them: client tools, mounts, lineage)."""
    client_tools: list[ClientTool] = field(default_factory=list)
    """The host's tools for this run, unchecked (the core checks them when building bindings)."""
    checkpoint_form: CheckpointForm = "full"
    """How candidates carry their state: whole, or their history as a delta on the previous one."""
    request_id: str = ""
    """The host's ID for the request, echoed in `RunResult.request_id`."""
    delta_base: bytes = b"[]"
    """The history data the host sent (as sent): what the first delta checkpoint candidate edits. Only
    filled for a run that asked for delta checkpoints."""
    lineage: ChildLineage | None = None
    """The parent run this run is a child of (`RunSpec.lineage`), unchecked (the core checks it)."""
    parent_agent: str = ""
    """`RunSpec.lineage.parent_agent`: the served parent agent whose edge the server checks and applies."""
    deferred_tools_supported: bool = True
    """`RunSpec.deferred_tools`: whether the host answers deferred calls (never derived from lineage)."""


_RECOVERY: dict[int, ToolRecovery] = {
    run_pb2.TOOL_RECOVERY_UNSPECIFIED: "declared",
    run_pb2.TOOL_RECOVERY_DECLARED: "declared",
    run_pb2.TOOL_RECOVERY_NEVER: "never",
    run_pb2.TOOL_RECOVERY_ALWAYS: "always",
}

CheckpointForm = Literal["full", "delta"]
"""`RunSpec.checkpoint_form`, decoded."""

_DEFERRED_TOOLS: dict[int, bool] = {
    run_pb2.DEFERRED_TOOLS_MODE_UNSPECIFIED: True,
    run_pb2.DEFERRED_TOOLS_MODE_SUPPORTED: True,
    run_pb2.DEFERRED_TOOLS_MODE_UNSUPPORTED: False,
}

_CHECKPOINT_FORMS: dict[int, CheckpointForm] = {
    run_pb2.CHECKPOINT_FORM_UNSPECIFIED: "full",
    run_pb2.CHECKPOINT_FORM_FULL: "full",
    run_pb2.CHECKPOINT_FORM_DELTA: "delta",
}

_URL_TYPES: dict[int, type[ImageUrl | AudioUrl | VideoUrl | DocumentUrl]] = {
    run_pb2.URL_KIND_IMAGE: ImageUrl,
    run_pb2.URL_KIND_AUDIO: AudioUrl,
    run_pb2.URL_KIND_VIDEO: VideoUrl,
    run_pb2.URL_KIND_DOCUMENT: DocumentUrl,
}

_LIMITS = (
    "request_limit",
    "tool_calls_limit",
    "input_tokens_limit",
    "output_tokens_limit",
    "total_tokens_limit",
    "per_request_input_tokens_limit",
)


def _input_invalid(message: str, field: str) -> InputError:
    return at_field(InputError(message, code=ErrorCode.INPUT_INVALID, details={"field": field}), field)


def run_call_from_pb(spec: run_pb2.RunSpec, *, pause: Callable[[], None] | None = None) -> RunCall:
    """Decode a `RunSpec` (inside `RunRequest.spec` / `StreamRunRequest.spec`; fields are `spec.*`).

    Raises:
        InputError: `input_invalid` / `tool_recovery_invalid` for what only the wire can get wrong (an
            unknown `checkpoint_form` is `input_invalid`).
        StateError, ServerError, RunError: from decoding `previous_state` and `deferred_resume`.

    `pause` is called between pieces of a large history (`state_from_pb`).
    """
    recovery = tool_recovery_from_pb(spec.tool_recovery)
    checkpoint_form = _CHECKPOINT_FORMS.get(spec.checkpoint_form)
    if checkpoint_form is None:
        raise _input_invalid(
            f"checkpoint_form {spec.checkpoint_form} is not known to this server.", "spec.checkpoint_form"
        )
    deferred_tools = _DEFERRED_TOOLS.get(spec.deferred_tools)
    if deferred_tools is None:
        raise _input_invalid(
            f"deferred_tools {spec.deferred_tools} is not known to this server.", "spec.deferred_tools"
        )
    has_state = spec.HasField("previous_state")
    has_lineage = spec.HasField("lineage")
    run = RunRequest(
        input_from_pb(spec),
        previous_state=state_from_pb(spec.previous_state, field="spec.previous_state", pause=pause)
        if has_state
        else None,
        deferred_resume=resume_from_pb(spec.deferred_resume, field="spec.deferred_resume")
        if spec.HasField("deferred_resume")
        else None,
        tool_recovery=recovery,
        usage_limits=limits_from_pb(spec.usage_limits) if spec.HasField("usage_limits") else None,
        checkpoints=spec.checkpoints,
    )
    return RunCall(
        agent=spec.agent,
        run=run,
        client_tools=client_tools_from_pb(spec.client_tools),
        checkpoint_form=checkpoint_form,
        request_id=spec.request_id,
        # Copied only for the streams that edit it: a history can be most of a 64 MiB request.
        delta_base=spec.previous_state.message_history.data.encode()
        if has_state and spec.checkpoints and checkpoint_form == "delta"
        else b"[]",
        lineage=lineage_from_pb(spec.lineage) if has_lineage else None,
        parent_agent=spec.lineage.parent_agent if has_lineage else "",
        deferred_tools_supported=deferred_tools,
    )


def input_from_pb(spec: run_pb2.RunSpec | ThreadRunSpec) -> str | list[UserContent] | None:
    """The `prompt` oneof of a `RunSpec` or a `ThreadRunSpec` (the same fields in both)."""
    which = spec.WhichOneof("prompt")
    if which is None:
        return None
    if which == "text":
        return spec.text  # "" included: the core raises `input_empty`
    items: list[UserContent] = []
    for i, part in enumerate(spec.parts.parts):
        where = f"spec.parts.parts[{i}]"
        content = part.WhichOneof("content")
        if content == "text":
            items.append(part.text)
        elif content == "binary":
            if not part.binary.media_type:
                raise _input_invalid(
                    "Binary prompt content needs a media_type.", f"{where}.binary.media_type"
                )
            items.append(BinaryContent(data=part.binary.data, media_type=part.binary.media_type))
        elif content == "url":
            url_type = _URL_TYPES.get(part.url.kind)
            if url_type is None:
                raise _input_invalid("A URL prompt part needs a known kind.", f"{where}.url.kind")
            if part.url.media_type:
                items.append(url_type(url=part.url.url, media_type=part.url.media_type))
            else:
                items.append(url_type(url=part.url.url))
        else:
            raise _input_invalid("A prompt part has no content.", where)
    return items  # [] included: the core raises `input_empty`


def client_tools_from_pb(tools: Iterable[run_pb2.ClientTool]) -> list[ClientTool]:
    """Client tool declarations, unchecked (the core checks them when building bindings)."""
    return [
        ClientTool(name=t.name, description=t.description, parameters_json_schema=t.parameters_json_schema)
        for t in tools
    ]


def tool_recovery_from_pb(value: int) -> ToolRecovery:
    recovery = _RECOVERY.get(value)
    if recovery is None:
        raise at_field(
            InputError(
                f"tool_recovery {value} is not known to this server.",
                code=ErrorCode.TOOL_RECOVERY_INVALID,
                details={"received": int(value)},
            ),
            "spec.tool_recovery",
        )
    return recovery


def limits_from_pb(msg: run_pb2.UsageLimits) -> UsageLimits:
    values: dict[str, Any] = {}
    for name in _LIMITS:
        if msg.HasField(name):  # type: ignore[arg-type]  # names from _LIMITS are optional int64 fields
            value = getattr(msg, name)
            if value < 0:
                raise _input_invalid(
                    f"usage_limits.{name} must not be negative.", f"spec.usage_limits.{name}"
                )
            values[name] = value
    if msg.HasField("count_tokens_before_request"):
        values["count_tokens_before_request"] = msg.count_tokens_before_request
    return UsageLimits(**values)


# --- result -----------------------------------------------------------------------------------------

_STATUS = {
    "completed": run_pb2.RUN_STATUS_COMPLETED,
    "suspended": run_pb2.RUN_STATUS_SUSPENDED,
    "failed": run_pb2.RUN_STATUS_FAILED,
    "cancelled": run_pb2.RUN_STATUS_CANCELLED,
}

_RETRY_HINT = {
    "none": run_pb2.RETRY_HINT_NONE,
    "new_run": run_pb2.RETRY_HINT_NEW_RUN,
    "dependency_change": run_pb2.RETRY_HINT_DEPENDENCY_CHANGE,
}


def usage_to_pb(usage: RunUsage) -> run_pb2.RunUsage:
    """The native counters, one to one; `cost` as a decimal string, empty when unknown."""
    return run_pb2.RunUsage(
        requests=usage.requests,
        tool_calls=usage.tool_calls,
        input_tokens=usage.input_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        output_tokens=usage.output_tokens,
        unmeasured_requests=usage.unmeasured_requests,
        output_reasoning_tokens=usage.output_reasoning_tokens,
        input_audio_tokens=usage.input_audio_tokens,
        cache_audio_read_tokens=usage.cache_audio_read_tokens,
        output_audio_tokens=usage.output_audio_tokens,
        audio_seconds=usage.audio_seconds,
        details=[run_pb2.UsageDetail(name=name, value=value) for name, value in usage.details.items()],
        cost="" if usage.cost is None else str(usage.cost),
    )


def fill_result(
    msg: run_pb2.RunResult, result: HarnessRunResult[Any], *, request_id: str, parent_agent: str = ""
) -> None:
    """Encode a terminal result into the empty `msg` (its state in place, never copied); `state`,
    `deferred`, `output_json`, `failure` and `lineage` are set exactly when the core's result has them
    (`parent_agent`: the request's, which the core does not keep)."""
    msg.status = _STATUS[result.status]
    msg.thread_id = result.thread_id
    msg.run_id = result.run_id
    msg.request_id = request_id
    msg.usage.CopyFrom(usage_to_pb(result.usage))
    state = result.state
    if state is not None:
        fill_state(msg.state, state)
    deferred = result.deferred
    if deferred is not None:
        msg.deferred.CopyFrom(requests_to_pb(deferred))
    if result.suspend_reason == "deferred":
        msg.suspend_reason = run_pb2.SUSPEND_REASON_DEFERRED
    if result.status == "completed":
        msg.output_json = result.output_json().decode()
    _fill_failure(msg, result.failure)
    if result.lineage is not None:
        msg.lineage.CopyFrom(lineage_to_pb(result.lineage, parent_agent=parent_agent))


def fill_outcome(msg: run_pb2.RunResult, outcome: ThreadRunOutcome) -> None:
    """A thread run's result, live or replayed, into the empty `msg`; `state` stays unset (THREADS §3)."""
    msg.status = _STATUS[outcome.status]
    msg.thread_id = outcome.thread_id
    msg.run_id = outcome.run_id
    msg.request_id = outcome.request_id
    msg.usage.CopyFrom(usage_to_pb(outcome.usage))
    if outcome.deferred is not None:
        msg.deferred.CopyFrom(requests_to_pb(outcome.deferred))
        msg.suspend_reason = run_pb2.SUSPEND_REASON_DEFERRED
    if outcome.output_json is not None:
        msg.output_json = outcome.output_json
    _fill_failure(msg, outcome.failure)


def _fill_failure(msg: run_pb2.RunResult, failure: SafeFailure | None) -> None:
    if failure is not None:
        msg.failure.CopyFrom(
            run_pb2.Failure(
                code=failure.code,
                message=failure.message,
                details_json=canonical_json(failure.details),
                retry_hint=_RETRY_HINT[failure.retry_hint],
            )
        )
