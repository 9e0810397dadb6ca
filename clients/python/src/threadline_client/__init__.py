"""Threadline's Python host SDK: drive Pydantic AI harness threads on a Threadline server.

```python
import threadline_client as tl

async with tl.Client("127.0.0.1:50051") as client:
    result = await client.run(tl.RunSpec(text="delete notes.txt"))
    if result.status == tl.RunStatus.SUSPENDED:
        answers = [tl.approve(call) for call in result.deferred.approvals]
        result = await client.run(
            tl.RunSpec(previous_state=result.state, deferred_resume=tl.resume(result.deferred, answers))
        )
    print(tl.output(result))
```

With `HarnessService` (above) the host owns its threads: it keeps the `HarnessState` each run
returns (`dump_state` / `load_state`), answers deferred calls, and sends the state back with the
next run. With `client.threads` (`ThreadService`) the server keeps them, and the host sends only
what is new, a prompt or its answers by call ID:

```python
thread = await client.threads.create()
outcome = await client.threads.run(thread.thread_id, text="delete notes.txt")
if outcome.result.status == tl.RunStatus.SUSPENDED:
    answers = tl.answers(*[tl.approve(call) for call in outcome.result.deferred.approvals])
    outcome = await client.threads.run(thread.thread_id, answers=answers)
print(tl.output(outcome.result), outcome.revision)
```

Every message of the contract is in `threadline_client.v1`; the common ones are re-exported here.
"""

from . import v1
from ._children import ChildRunOptions, child_answer, child_calls, child_running, child_spec
from ._client import DEFAULT_TARGET, DEFAULT_TIMEOUT, Client, RunStream, ValidatedState
from ._deferred import (
    NOT_EXECUTED_TOOL_RESULT,
    UNANSWERED_APPROVAL_MESSAGE,
    answers,
    approve,
    call_args,
    deny,
    external_failure,
    external_result,
    external_retry,
    pending,
    resume,
)
from ._errors import (
    AnsweredBy,
    CheckpointNotFound,
    FollowerLimitReached,
    LeaseLost,
    ListenerTooSlow,
    ProtocolError,
    RequestIdReused,
    RequestInterrupted,
    RevisionConflict,
    RunAttemptLost,
    RunEventsExpired,
    RunNotFound,
    StatusCode,
    StoreUnavailable,
    ThreadBusy,
    ThreadExists,
    ThreadlineError,
    ThreadNotFound,
    ThreadNotSuspended,
    ThreadQueueFull,
)
from ._gen.threadline.v1 import (
    Checkpoint,
    CheckpointKind,
    ChildAction,
    ChildLineage,
    ChildRequest,
    ClientTool,
    DeferredKind,
    DeferredToolCall,
    DeferredToolRequests,
    DeferredToolResults,
    DeferredToolResume,
    DeferredToolsMode,
    HarnessState,
    QueuedRun,
    QueuedRunKind,
    RunEvent,
    RunResult,
    RunSpec,
    RunStatus,
    Thread,
    ThreadChange,
    ThreadRunStatus,
    ThreadStatus,
)
from ._live import JoinedRun, ThreadUpdate, ThreadWatch
from ._protojson import message_from_dict, message_from_json, message_to_dict, message_to_json
from ._runs import client_tool, event_case, output
from ._state import StateFormat, dump_state, load_state
from ._threads import BusyStrategyName, StartedRun, ThreadRunOutcome, ThreadRunStream, Threads

__all__ = (
    "DEFAULT_TARGET",
    "DEFAULT_TIMEOUT",
    "NOT_EXECUTED_TOOL_RESULT",
    "UNANSWERED_APPROVAL_MESSAGE",
    "AnsweredBy",
    "BusyStrategyName",
    "Checkpoint",
    "CheckpointKind",
    "CheckpointNotFound",
    "ChildAction",
    "ChildLineage",
    "ChildRequest",
    "ChildRunOptions",
    "Client",
    "ClientTool",
    "DeferredKind",
    "DeferredToolCall",
    "DeferredToolRequests",
    "DeferredToolResults",
    "DeferredToolResume",
    "DeferredToolsMode",
    "FollowerLimitReached",
    "HarnessState",
    "JoinedRun",
    "LeaseLost",
    "ListenerTooSlow",
    "ProtocolError",
    "QueuedRun",
    "QueuedRunKind",
    "RequestIdReused",
    "RequestInterrupted",
    "RevisionConflict",
    "RunAttemptLost",
    "RunEvent",
    "RunEventsExpired",
    "RunNotFound",
    "RunResult",
    "RunSpec",
    "RunStatus",
    "RunStream",
    "StartedRun",
    "StateFormat",
    "StatusCode",
    "StoreUnavailable",
    "Thread",
    "ThreadBusy",
    "ThreadChange",
    "ThreadExists",
    "ThreadNotFound",
    "ThreadNotSuspended",
    "ThreadQueueFull",
    "ThreadRunOutcome",
    "ThreadRunStatus",
    "ThreadRunStream",
    "ThreadStatus",
    "ThreadUpdate",
    "ThreadWatch",
    "ThreadlineError",
    "Threads",
    "ValidatedState",
    "__version__",
    "answers",
    "approve",
    "call_args",
    "child_answer",
    "child_calls",
    "child_running",
    "child_spec",
    "client_tool",
    "deny",
    "dump_state",
    "event_case",
    "external_failure",
    "external_result",
    "external_retry",
    "load_state",
    "message_from_dict",
    "message_from_json",
    "message_to_dict",
    "message_to_json",
    "output",
    "pending",
    "resume",
    "v1",
)

__version__ = "0.1.0"
