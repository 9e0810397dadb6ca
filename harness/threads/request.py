"""What a thread run is given: the host's request, the launcher that builds its stream, the host it runs for.

`run.py` (the run) and `host.py` (the host that starts runs) both need these; they live here so that
neither module imports the other's internals: the run knows its host only as `RunHost`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai.messages import UserContent
from pydantic_ai.tools import DeferredToolResults
from pydantic_ai.usage import UsageLimits

from .._recovery_input import ToolRecovery
from .._run import HarnessRunStream
from ..client_tools import ClientTool
from ..errors import RecordedRefusal, Refusal
from ..run_request import RunRequest
from ..state import HarnessState
from .digest import BusyStrategy, request_digest, request_digest_parts, same_request
from .eventlog import Encoder, LogSettings
from .records import Head, RunRow, RunRowStatus, ThreadRow
from .store import ThreadStore

if TYPE_CHECKING:
    from .appends import Appends
    from .run import ThreadRun

__all__ = ("Launcher", "RunHost", "ThreadRunRequest")


class Launcher(Protocol):
    """How a thread run gets its core stream: fresh bindings, construction checks, admission.

    Its refusals (a full server, a drain, an unknown agent) raise a `HarnessError` or a `Refusal`;
    anything else it raises is a bug, logged as `run_crashed`.
    """

    def stream(
        self, agent: str, run: RunRequest, *, client_tools: Sequence[ClientTool]
    ) -> HarnessRunStream[Any]:
        """The stream of `run` (whose barrier is the commit point before each model request) for the
        thread's `agent`, with the run's `client_tools`."""
        ...

    def admit(
        self, stream: HarnessRunStream[Any], *, cancel: Callable[[], None], request_id: str, agent: str
    ) -> AbstractContextManager[Callable[[], None]]:
        """Count the run against the server's limit for as long as it runs; `cancel` is how a drain
        stops it; `request_id` and `agent` name the host's request and the thread's agent (for the
        run's log lines and metrics). Yields `begun`, called once Begin took the lease: the run counts as
        one (its span, its metrics) from then, so a request refused before (a lost Begin) is no run."""
        ...

    def has_room(self, *, freeing: int = 0) -> bool:
        """Whether a run could be admitted now (not draining, below the run limit), once `freeing`
        runs that are ending let go: a sweeper claims server-side work only then, and a run's end
        keeps its queue's head for this replica only then."""
        ...

    def refused_again(self, refusal: RecordedRefusal) -> Refusal:
        """The host's own error for a refusal a run record kept (a failed server-driven start)."""
        ...

    async def prepare(self, stream: HarnessRunStream[Any], *, request_id: str) -> None:
        """`stream.prepare()`, once admitted and before Begin: a long history's takes a while, so a
        server does it off its event loop. Raising refuses the run (e.g. the server drains meanwhile)."""
        ...


class RunHost(Protocol):
    """What a run uses of the host that started it (`DurableHost`)."""

    store: ThreadStore
    launcher: Launcher
    lease_ttl: float
    max_run_attempts: int
    """A detached request closes INTERRUPTED once this many attempts ended by a lost server (0: no cap)."""
    max_queued_runs: int
    """How many requests may wait in one thread's queue (LIVE §4.2)."""
    on_commit: Callable[[], None] | None
    encode: Encoder | None
    """The wire form of each event (the server's); `None`: events are not encoded, and no log is kept."""
    log_settings: LogSettings
    follower_slot: Callable[[], AbstractContextManager[None]]
    on_log: Callable[[int, int], None] | None
    """Told of each log write: its bytes and the events left out since the last one (a server counts them)."""
    appends: Appends
    """The replica's grouped appends of its attempts' logs."""

    async def thread(self, thread_id: str) -> ThreadRow:
        """The thread, or `THREAD_NOT_FOUND`."""
        ...

    async def thread_and_record(self, thread_id: str, request_id: str) -> tuple[ThreadRow, RunRow | None]:
        """The thread (or `THREAD_NOT_FOUND`) and the record of `request_id` on it, read together."""
        ...

    async def head_state(self, thread: ThreadRow) -> tuple[Head, HarnessState]:
        """The thread's head and its validated state."""
        ...

    async def revision_state(self, thread_id: str, revision: int) -> tuple[Head, HarnessState]:
        """A committed checkpoint of the thread with its validated state (a ROLLBACK begins from one)."""
        ...

    def remember(self, thread: ThreadRow, head: Head, state: HarnessState) -> None:
        """Keep a head the run just committed for the thread's next turn."""
        ...

    def running(self, run: ThreadRun) -> AbstractContextManager[None]:
        """Register `run` under its ids while it holds its lease, so that a cancel finds it."""
        ...

    async def cancel(self, thread_id: str, run_id: str) -> RunRowStatus:
        """`CancelThreadRun`: ask the holder, or close a run whose holder is gone."""
        ...

    def cancel_here(self, thread_id: str, run_id: str) -> None:
        """Stop `run_id` if this process holds it (an INTERRUPT asked it to stop)."""
        ...

    def sweep_soon(self) -> None:
        """Take up the server's due work now (a request found a detached request's next attempt due)."""
        ...


@dataclass(frozen=True)
class ThreadRunRequest:
    """One `ThreadRunSpec`, decoded; its `digest` is computed from it (`harness.threads.digest`)."""

    thread_id: str
    request_id: str
    expected_revision: int
    input: str | list[UserContent] | None
    answers: DeferredToolResults | None
    """Answers to the thread's pending batch, by call ID; Begin pairs them with the stored batch."""
    tool_recovery: ToolRecovery
    client_tools: tuple[ClientTool, ...]
    usage_limits: UsageLimits | None
    _: KW_ONLY
    busy_strategy: BusyStrategy = "reject"
    legacy_digest: str | None = None
    """The digest servers before v2 stored (SHA-256 of the spec's protobuf bytes), for their records;
    `None` where no older server ever wrote the store."""
    record_digest: str | None = None
    """The stored digest of the request a server-driven attempt runs again (`detached.next_attempt`),
    whose body the server no longer has."""
    digest: str = field(init=False)
    """Identifies the request's body (without tool recovery, client tools, limits) across retries."""
    digest_parts: dict[str, str] | None = field(init=False)
    """A digest per part of that body (`digest.DIGEST_PARTS`), stored with a new record so that a reused
    ID can be told where it differs; `None` for a server-driven attempt (its record has them)."""

    def __post_init__(self) -> None:
        if self.record_digest is not None:
            object.__setattr__(self, "digest", self.record_digest)
            object.__setattr__(self, "digest_parts", None)
            return
        meaning: dict[str, Any] = {
            "expected_revision": self.expected_revision,
            "input": self.input,
            "answers": self.answers,
            "busy_strategy": self.busy_strategy,
        }
        object.__setattr__(self, "digest", request_digest(**meaning))
        object.__setattr__(self, "digest_parts", request_digest_parts(**meaning))

    def matches(self, stored: str) -> bool:
        """Whether a run record whose digest is `stored` was made by this request (a retry of it)."""
        return same_request(stored, digest=self.digest, legacy=self.legacy_digest)
