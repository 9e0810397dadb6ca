"""Durable threads (THREADS): the server as the durable Host of SPEC §1.15, on a real database.

`DurableHost` keeps threads in a `ThreadStore` (SQLAlchemy Core; SQLite now, PostgreSQL next) and runs
each request of a thread through the run protocol of THREADS §4 (`harness.threads.run`). Importing this
package loads SQLAlchemy; `import harness` alone does not.
"""

from .database import Database, SchemaTooNew, StoreKind, open_database
from .digest import BusyStrategy
from .host import MAX_LABEL_FILTERS, DurableHost, check_labels, check_storable
from .items import ThreadRunItem, ThreadRunStarted
from .outcome import ThreadCommittedEvent, ThreadRunOutcome
from .records import (
    THREAD_STATUS_NAMES,
    CheckpointKind,
    CheckpointRow,
    QueuedKind,
    RunRowStatus,
    ThreadRow,
    ThreadStatus,
)
from .request import Launcher, ThreadRunRequest
from .run import LISTENER_BACKLOG, ThreadRun
from .store import ThreadStore

__all__ = (
    "LISTENER_BACKLOG",
    "MAX_LABEL_FILTERS",
    "THREAD_STATUS_NAMES",
    "BusyStrategy",
    "CheckpointKind",
    "CheckpointRow",
    "Database",
    "DurableHost",
    "Launcher",
    "QueuedKind",
    "RunRowStatus",
    "SchemaTooNew",
    "StoreKind",
    "ThreadCommittedEvent",
    "ThreadRow",
    "ThreadRun",
    "ThreadRunItem",
    "ThreadRunOutcome",
    "ThreadRunRequest",
    "ThreadRunStarted",
    "ThreadStatus",
    "ThreadStore",
    "check_labels",
    "check_storable",
    "open_database",
)
