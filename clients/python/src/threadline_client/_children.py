"""Host-managed child runs: find the children a suspended parent asks for, run them, answer the parent.

An agent with a Host-managed child (`SubagentInfo.mode == SUBAGENT_MODE_HOST` in `get_server_info`)
does not run the child itself: its `delegate` (or `resume_subagent`) call suspends the parent with an
EXTERNAL item whose `child` (`ChildRequest`) says what to run. The child is an ordinary thread of the
host's, with its own state: the host runs agent `child.agent` on thread `child.thread_id` with text
`child.input` and `lineage=child.parent`; the child may suspend (e.g. for an approval), be resumed
and recovered like any thread; once it has ended, the host answers the parent's call with
`child_answer(call, child_result)`.

```python
(call,) = tl.child_calls(parent.deferred)
child = await client.run_child(call)                      # NewState(child.thread_id), then Run
while child.status == tl.RunStatus.SUSPENDED:             # answer the child first
    answers = [tl.approve(a) for a in child.deferred.approvals]
    child = await client.run_child(call, state=child.state, deferred_resume=tl.resume(child.deferred, answers))
parent = await client.run(tl.RunSpec(agent=parent_agent, previous_state=parent.state,
                                     deferred_resume=tl.resume(parent.deferred, [tl.child_answer(call, child)])))
```

Nothing here keeps state: the host persists the parent's checkpoint and batch, the child's states,
and the link from the parent's call to the child thread (keyed by `child.thread_id`: the same
parent response and call always name the same child thread, so a re-asked request finds the child
that already exists). The server checks the answer (`CHILD_RESULT_INVALID`) and the lineage
(`CHILD_LINEAGE_INVALID`, `CHILD_EDGE_UNKNOWN`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict, Unpack

from ._calls import missing
from ._deferred import compact_json
from ._gen.threadline.v1 import (
    CallResult,
    ChildRequest,
    ClientTool,
    DeferredToolCall,
    DeferredToolRequests,
    DeferredToolResume,
    DeferredToolsMode,
    HarnessState,
    RunResult,
    RunSpec,
    RunStatus,
    ToolFailedResult,
    ToolRecovery,
    UsageLimits,
)
from ._runs import output

__all__ = ("ChildRunOptions", "child_answer", "child_calls", "child_running", "child_spec")


def child_calls(requests: DeferredToolRequests | None) -> list[DeferredToolCall]:
    """The calls of a batch that ask the host to run a child (their `child` is set), in batch order."""
    if requests is None:
        return []
    return [call for call in requests.calls if call.child is not None]


def child_request(call: DeferredToolCall, helper: str) -> ChildRequest:
    """`call.child`, or the ValueError of `helper()` for a call that asks for no child."""
    if call.child is None:
        raise ValueError(f"{helper}() takes a child request; {call.tool_call_id!r} has no `child`")
    return call.child


class ChildRunOptions(TypedDict, total=False):
    """The `RunSpec` fields a host may set on a child's run (the request gives the others).

    The child gets only the client tools declared here, and the server lowers its usage limits to
    the edge's and its agent's, field by field.
    """

    checkpoints: bool
    tool_recovery: ToolRecovery
    usage_limits: UsageLimits
    client_tools: Sequence[ClientTool]
    deferred_tools: DeferredToolsMode
    request_id: str


def child_spec(
    call: DeferredToolCall,
    state: HarnessState,
    *,
    deferred_resume: DeferredToolResume | None = None,
    **options: Unpack[ChildRunOptions],
) -> RunSpec:
    """The `RunSpec` of one run of a child thread, e.g. for `Client.stream_run` (`Client.run_child`
    runs it).

    The run is agent `child.agent` on `state` with `lineage=child.parent`, and with text
    `child.input` unless it answers the child's own suspension (`deferred_resume`), which carries
    no new input.

    Args:
        call: An item of `child_calls(parent.deferred)`.
        state: The child thread's state: `new_state(thread_id=child.thread_id)` for its first run,
            else the state its last run returned (or a checkpoint candidate to recover from).
        deferred_resume: The answers to the child's own suspended batch (`resume(...)`, with
            `recovery=True` after an interrupted resume).
        **options: `checkpoints`, `tool_recovery`, `usage_limits`, `client_tools`,
            `deferred_tools`, `request_id`, as in `RunSpec`.

    Raises:
        ValueError: `call` is no child request, or `state` is another thread's.
    """
    child = child_request(call, "child_spec")
    if state.thread_id != child.thread_id:
        raise ValueError(f"the child's thread is {child.thread_id!r}; this state is {state.thread_id!r}'s")
    unknown = set(options) - set(ChildRunOptions.__annotations__)
    if unknown:
        raise TypeError(f"child_spec() got unexpected keyword arguments {sorted(unknown)}")
    spec = RunSpec(
        agent=child.agent,
        text=None if deferred_resume is not None else child.input,
        previous_state=state,
        deferred_resume=deferred_resume,
        lineage=child.parent,
    )
    for name, value in options.items():
        setattr(spec, name, value)
    spec.client_tools = list(options.get("client_tools", ()))
    return spec


def _answer_json(child: ChildRequest, status: str, **rest: Any) -> str:
    value = {"execution_id": child.thread_id, "subagent": child.subagent_name, "status": status, **rest}
    return compact_json(value)


def child_answer(call: DeferredToolCall, child_result: RunResult, *, answered_by: str = "") -> CallResult:
    """The parent's answer to a child request, from the child's terminal result.

    - COMPLETED: the value `{"execution_id": <child thread>, "subagent": <edge>, "status":
      "completed", "output": <the child's output>}`;
    - FAILED or CANCELLED: the failure "Child <thread> did not complete successfully (<code>)."
      (`failure.code`, or `child_cancelled`), which the parent's model sees.

    Args:
        call: The parent's child request (an item of `child_calls`).
        child_result: The result of the child's last run, on the requested thread.
        answered_by: Who answered, for the host's own audit trail.

    Raises:
        ValueError: `call` is no child request, the result is another thread's, or the child is
            SUSPENDED: answer the child first (or answer the parent `child_running(call)`).
    """
    child = child_request(call, "child_answer")
    if child_result.thread_id != child.thread_id:
        raise ValueError(
            f"the child's thread is {child.thread_id!r}; this result is {child_result.thread_id!r}'s"
        )
    status = child_result.status
    if status == RunStatus.COMPLETED:
        value = _answer_json(child, "completed", output=output(child_result))
        return CallResult(tool_call_id=call.tool_call_id, value_json=value, answered_by=answered_by)
    if status == RunStatus.FAILED:
        if child_result.failure is None:
            raise missing("RunResult.failure on a FAILED result")
        code = child_result.failure.code
    elif status == RunStatus.CANCELLED:
        code = "child_cancelled"
    elif status == RunStatus.SUSPENDED:
        raise ValueError(
            f"child {child.thread_id} is SUSPENDED: answer its own calls and run it again first, "
            "or answer the parent child_running(call)"
        )
    else:
        raise ValueError(f"child {child.thread_id} has no terminal status ({status!s})")
    message = f"Child {child.thread_id} did not complete successfully ({code})."
    return CallResult(
        tool_call_id=call.tool_call_id, failed=ToolFailedResult(message=message), answered_by=answered_by
    )


def child_running(call: DeferredToolCall, *, answered_by: str = "") -> CallResult:
    """The admission answer `{"execution_id", "subagent", "status": "running"}`: the parent goes on
    while the child works (it sees that status as the call's result)."""
    child = child_request(call, "child_running")
    return CallResult(
        tool_call_id=call.tool_call_id, value_json=_answer_json(child, "running"), answered_by=answered_by
    )
