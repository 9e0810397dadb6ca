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

The host owns its threads: it keeps the `HarnessState` each run returns (`dump_state` /
`load_state`), answers deferred calls, and sends the state back with the next run. Every message
of the contract is in `threadline_client.v1`; the common ones are re-exported here.
"""

from . import v1
from ._client import DEFAULT_TARGET, DEFAULT_TIMEOUT, Client, RunStream, ValidatedState
from ._deferred import (
    approve,
    call_args,
    deny,
    external_failure,
    external_result,
    external_retry,
    pending,
    resume,
)
from ._errors import ProtocolError, StatusCode, ThreadlineError
from ._gen.threadline.v1 import (
    ClientTool,
    DeferredKind,
    DeferredToolCall,
    DeferredToolRequests,
    DeferredToolResume,
    HarnessState,
    RunEvent,
    RunResult,
    RunSpec,
    RunStatus,
)
from ._protojson import message_from_dict, message_from_json, message_to_dict, message_to_json
from ._runs import client_tool, event_case, output
from ._state import StateFormat, dump_state, load_state

__all__ = (
    "DEFAULT_TARGET",
    "DEFAULT_TIMEOUT",
    "Client",
    "ClientTool",
    "DeferredKind",
    "DeferredToolCall",
    "DeferredToolRequests",
    "DeferredToolResume",
    "HarnessState",
    "ProtocolError",
    "RunEvent",
    "RunResult",
    "RunSpec",
    "RunStatus",
    "RunStream",
    "StateFormat",
    "StatusCode",
    "ThreadlineError",
    "ValidatedState",
    "__version__",
    "approve",
    "call_args",
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
