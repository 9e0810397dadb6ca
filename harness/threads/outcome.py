"""What a thread run gives back: its events' extra items and its outcome, stored for replay.

A live run and a replay end the same way, with a `ThreadRunOutcome`, so a retried request is answered
from the run record exactly as the first call was (THREADS §3 "Replay").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.usage import RunUsage

from ..deferred import DeferredToolRequests
from ..results import HarnessRunResult, RunStatus, SafeFailure
from .kinds import CheckpointKind

__all__ = ("ThreadCommittedEvent", "ThreadRunOutcome")

_USAGE: TypeAdapter[RunUsage] = TypeAdapter(RunUsage)


@dataclass(frozen=True, slots=True)
class ThreadCommittedEvent:
    """A thread run committed a checkpoint, now its thread's head."""

    thread_id: str
    run_id: str
    revision: int
    kind: CheckpointKind
    replayed: bool
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class ThreadRunOutcome:
    """A thread run's terminal result without its state: the state is the checkpoint at `revision`."""

    thread_id: str
    run_id: str
    request_id: str
    status: RunStatus
    revision: int
    committed: bool
    """Whether the run made a terminal commit (a run cancelled after its holder was gone made none)."""
    output_json: str | None
    usage: RunUsage
    failure: SafeFailure | None
    deferred: DeferredToolRequests | None
    started_at: datetime
    ended_at: datetime
    replayed: bool = False

    @classmethod
    def cancelled(
        cls, *, thread_id: str, run_id: str, request_id: str, revision: int, at: float
    ) -> ThreadRunOutcome:
        """A run closed CANCELLED with no terminal commit (its holder gone, or it never ran): at the head
        `revision`, at the store's time `at`, as `CancelThreadRun` and an INTERRUPT's Begin close one."""
        now = datetime.fromtimestamp(at, UTC)
        return cls(
            thread_id=thread_id,
            run_id=run_id,
            request_id=request_id,
            status="cancelled",
            revision=revision,
            committed=False,
            output_json=None,
            usage=RunUsage(),
            failure=None,
            deferred=None,
            started_at=now,
            ended_at=now,
        )

    @classmethod
    def of(
        cls,
        result: HarnessRunResult[Any],
        *,
        request_id: str,
        revision: int,
        committed: bool,
        started_at: datetime,
    ) -> ThreadRunOutcome:
        return cls(
            thread_id=result.thread_id,
            run_id=result.run_id,
            request_id=request_id,
            status=result.status,
            revision=revision,
            committed=committed,
            output_json=result.output_json().decode() if result.status == "completed" else None,
            usage=result.usage,
            failure=result.failure,
            deferred=result.deferred,
            started_at=started_at,
            ended_at=datetime.now(UTC),
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "thread_id": self.thread_id,
                "run_id": self.run_id,
                "request_id": self.request_id,
                "status": self.status,
                "revision": self.revision,
                "committed": self.committed,
                "output_json": self.output_json,
                "usage": json.loads(_USAGE.dump_json(self.usage)),
                "failure": None if self.failure is None else self.failure.model_dump(mode="json"),
                "deferred": None if self.deferred is None else self.deferred.to_jsonable(),
                "started_at": self.started_at.isoformat(),
                "ended_at": self.ended_at.isoformat(),
            }
        )

    @classmethod
    def from_json(cls, data: str) -> ThreadRunOutcome:
        doc = json.loads(data)
        return cls(
            thread_id=doc["thread_id"],
            run_id=doc["run_id"],
            request_id=doc["request_id"],
            status=doc["status"],
            revision=doc["revision"],
            committed=doc["committed"],
            output_json=doc["output_json"],
            usage=_USAGE.validate_python(doc["usage"]),
            failure=None if doc["failure"] is None else SafeFailure.model_validate(doc["failure"]),
            deferred=None if doc["deferred"] is None else DeferredToolRequests.from_jsonable(doc["deferred"]),
            started_at=datetime.fromisoformat(doc["started_at"]),
            ended_at=datetime.fromisoformat(doc["ended_at"]),
            replayed=True,
        )
