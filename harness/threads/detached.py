"""What a server-driven request's next attempts run with (LIVE §3.2), kept in its record's `spec`.

A detached request has no client to retry it: when its attempt stops (its server crashed, or parked on
SIGTERM), a sweeper builds the request again from its record, which holds its prompt and digest, and
from this spec, which holds the rest of what the client sent: tool recovery, client tools and usage
limits. Its answers need no keeping: Begin retained them on the thread, where a next attempt recovers them;
except a queued ROLLBACK's (LIVE §4.5), which answer a batch its first Begin restores, so its spec keeps
them with that batch.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

from pydantic_ai.usage import UsageLimits

from .._recovery_input import TOOL_RECOVERY_MODES, ToolRecovery
from ..deferred import DeferredToolResume
from .codec import client_tools_from_json, client_tools_json
from .records import RunRow
from .request import ThreadRunRequest

__all__ = ("next_attempt", "spec_json")

_LIMITS = tuple(
    field.name for field in dataclasses.fields(UsageLimits) if field.name != "cost_limit"
)  # the limits a spec can carry (`ThreadRunSpec.usage_limits`)


def spec_json(request: ThreadRunRequest, *, answers: DeferredToolResume | None = None) -> str:
    """The spec of `request` as its record keeps it; `answers`: a queued ROLLBACK's, with the batch
    they answer."""
    limits = request.usage_limits
    return json.dumps(
        {
            **({} if answers is None else {"answers": json.loads(answers.to_json())}),
            "tool_recovery": request.tool_recovery,
            "client_tools": json.loads(client_tools_json(request.client_tools)),
            "usage_limits": None
            if limits is None
            else {name: value for name in _LIMITS if (value := getattr(limits, name)) is not None},
        },
        sort_keys=True,
    )


def next_attempt(thread_id: str, record: RunRow) -> ThreadRunRequest:
    """The request `record` was made for, as a server-driven attempt runs it again: Begin finds its
    record unfinished and recovers from the thread's head (THREADS §4 step 4)."""
    spec: dict[str, Any] = json.loads(record.spec or "{}")
    recovery = spec.get("tool_recovery", "declared")
    limits = spec.get("usage_limits")
    answers = spec.get("answers")
    return ThreadRunRequest(
        thread_id=thread_id,
        request_id=record.request_id,
        expected_revision=0,
        input=None,
        answers=None if answers is None else DeferredToolResume.from_json(json.dumps(answers)).results,
        tool_recovery=cast(ToolRecovery, recovery if recovery in TOOL_RECOVERY_MODES else "declared"),
        client_tools=tuple(client_tools_from_json(json.dumps(spec.get("client_tools", [])))),
        usage_limits=None if limits is None else UsageLimits(**limits),
        record_digest=record.digest,
    )
