"""What one run is asked to do, as one value: the parameters of `ExecutableAgent.run` / `.stream`.

Every layer that starts a run (the core's stream, the server's launcher, a thread run) passes this
value whole instead of re-declaring the parameters (issue 24, item 7); `dataclasses.replace` derives
one from another (the server adds the bindings it builds).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pydantic_ai.messages import UserContent
from pydantic_ai.usage import RunUsage, UsageLimits

from ._recovery_input import ToolRecovery
from .barrier import RunBarrier
from .context import RunBindings
from .deferred import DeferredToolResume
from .state import HarnessState

__all__ = ("RunRequest",)


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A run's inputs. The types are the host's; the core still checks every value (SPEC §2.2.2)."""

    input: str | Sequence[UserContent] | None = None
    """The new user input; `None` continues without one."""
    bindings: RunBindings | None = None
    """Fresh per-run bindings (default `RunBindings.embedded()`)."""
    previous_state: HarnessState | None = None
    """The thread's state to continue (default: a new thread)."""
    tool_recovery: ToolRecovery = "declared"
    """What happens to unanswered calls: `"declared"`, `"never"` or `"always"`."""
    deferred_resume: DeferredToolResume | None = None
    """Answers to the batch `previous_state` is suspended on."""
    usage: RunUsage | None = None
    """A native usage baseline."""
    usage_limits: UsageLimits | None = None
    """Native limits (default: the agent's)."""
    checkpoints: bool = False
    """Offer a `HarnessCheckpointEvent` where the export moves (streams only)."""
    barrier: RunBarrier | None = None
    """Awaited before each model request (`harness.barrier`)."""
    calls_not_started: Collection[str] = ()
    """Calls of the last response the host knows never started (SPEC §2.5.8, a durable host's dispatch
    intents): each is dispatched as a new call, with a retained approval if it has one, and never gets
    the unknown result. Empty (the default): tool recovery as §2.5.4 says."""
    run_id: str | None = None
    """The run's ID, `run-<32 lowercase hex>`, when the host allocated it before the run (a queued
    thread request is named at acceptance); `None`: the run makes one."""
